// GATTPeer's listen (`CharacteristicLookup.listen`, what `mirror listen` calls) in-process against the simulator:
// the subscriptions told, armed before the wait, the values with their targets, the count, the duration, the drops,
// and a characteristic that cannot notify refused by name. The CLI's subprocess tests cover what it prints.
import GATTPeer
import Mirror
import MirrorSimulator
import XCTest

final class PeerListenTests: XCTestCase {
    /// scanState by name: told subscribed (notifications, the value read after the CCCD write), armed once before
    /// the wait, then the scan's first three states with the target's label, and no drop (bounded: 10 s).
    func testListenSubscribesArmsAndHandsEachValueWithItsTarget() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await h.peer()
        defer { peer.close() }
        // The scan the write below starts needs a cloud token first (the simulator's upload target).
        try await peer.write(.name("cloudToken"), Array("http://127.0.0.1:9/peer".utf8))
        let stream = try peer.client.notificationStream()
        let drops = NotificationDrops()
        let seen = Lock<[(value: [UInt8], label: String?)]>([])
        var told: [(UInt16, GATTSubscriptionMode, [UInt8]?)] = []
        var armedCount = 0
        let received = try await withLinkLoop(peer.loop) {
            try await peer.lookup.listen(
                [.name("scanState")], on: stream, count: 3, duration: .seconds(10), drops: drops,
                subscribed: { entry, mode, value in told.append((entry.characteristic.valueHandle, mode, value)) },
                armed: {
                    armedCount += 1
                    // Armed: the peer may be triggered now, and nothing it sends from here is missed.
                    Task { try await peer.write(.name("scannerAction"), [MirrorProfile.bundled.initDeviceForScanCommand]) }
                }
            ) { n, target in seen.withLock { $0.append((n.value, target?.label)) } }
        }
        XCTAssertEqual(received, 3)
        XCTAssertEqual(armedCount, 1)
        XCTAssertEqual(told.map(\.0), [0x000C])
        XCTAssertEqual(told.first?.1, .notify)
        XCTAssertEqual(told.first?.2, [0x00])
        XCTAssertEqual(seen.current.map(\.value), [[0x01], [0x02], [0x03]])
        XCTAssertEqual(seen.current.map(\.label), ["scanState", "scanState", "scanState"])
        XCTAssertEqual(drops.total, 0)
        XCTAssertEqual(drops.counts.fellBehind, 0)
    }

    /// With `duration` and nothing sent, the listen ends by itself after the subscriptions are armed, with none.
    func testDurationEndsAQuietListen() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await h.peer()
        defer { peer.close() }
        let stream = try peer.client.notificationStream()
        let started = ContinuousClock.now
        let received = try await withLinkLoop(peer.loop) {
            try await peer.lookup.listen([.name("scanState")], on: stream, duration: .milliseconds(200)) { _, _ in }
        }
        XCTAssertEqual(received, 0)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(200))
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(10))
    }

    /// A named characteristic that neither notifies nor indicates is refused as named, offering those that do.
    func testACharacteristicThatCannotNotifyIsRefusedByName() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await h.peer()
        defer { peer.close() }
        let stream = try peer.client.notificationStream()
        do {
            _ = try await withLinkLoop(peer.loop) {
                try await peer.lookup.listen([.name("cloudToken")], on: stream, count: 1) { _, _ in }
            }
            XCTFail("cloudToken does not notify")
        } catch let e as CharacteristicNotSubscribable {
            XCTAssertEqual(e.reference, "cloudToken")
            XCTAssertEqual(e.valueHandle, 0x0012)
            XCTAssertTrue(e.subscribable.contains { $0.hasPrefix("scanState") }, "\(e.subscribable)")
        }
    }
}
