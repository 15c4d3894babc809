// The named deadlines shown firing: each test runs a wait into its limit and checks the error that names what
// was waited for. The list of every wait in the sources and its trigger test is a lint: tools/lint/waits.py.
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Foundation
import GATTClient
import GATTServer
import HostilePeer
import Mirror
import MirrorSimulator
import XCTest

/// A scripted peer that answers as the one server (over the hostile peer's database) except for the requests it
/// keeps silent on; `silentSent` is finished when the first of those has been sent.
func selectivePeer(silentOn: Set<UInt8>, capacity: Int? = nil) -> (peer: ScriptedPeer, silentSent: OnceBox<Void>) {
    let silentSent = OnceBox<Void>()
    let server = Lock((ATTServer(database: HostilePeer.database), ATTSession()))
    let peer = ScriptedPeer(label: "selective", capacity: capacity) { bytes in
        if silentOn.contains(bytes[0]) {
            silentSent.finish(.success(()))
            return []
        }
        return server.withLock { s in
            guard case .now(let answer) = s.0.answer(bytes: bytes, session: &s.1) else { return [] }
            return [.server(answer.bytes)]
        }
    }
    return (peer, silentSent)
}

final class DeadlineAuditTests: XCTestCase {
    /// Runs `procedure` on a client whose peer answers everything but `silentOn`; the ATT timeout must fire and say
    /// `expected`.
    func timeout(silentOn: Set<UInt8>, mtu: Int = 23, _ expected: String, file: StaticString = #filePath, line: UInt = #line,
                 _ procedure: @escaping @Sendable (GATTClient) async throws -> Void) async throws {
        let clock = ManualClock()
        var configuration = GATTClient.Configuration()
        configuration.clock = clock
        configuration.clientRxMTU = mtu
        let (transport, silentSent) = selectivePeer(silentOn: silentOn)
        let c = try await GATTClient.connect(transport: transport, configuration: configuration)
        if mtu != 23 { _ = try await c.exchangeMTU() }
        let task = Task { try await procedure(c) }
        // Time moves only once the silent request is out (its deadline is armed before it is sent): the answered
        // requests before it resolve without time passing.
        try await silentSent.value()
        await clock.waitForPendingWakeups(atLeast: 1)
        clock.advance(by: .seconds(30))
        do {
            try await task.value
            XCTFail("succeeded; expected: \(expected)", file: file, line: line)
        } catch {
            XCTAssertEqual("\(error)", expected, file: file, line: line)
        }
        XCTAssertTrue(c.isClosed, file: file, line: line)
    }

    func testEveryRequestOfEveryProcedureTimesOutNamingItsResponse() async throws {
        let t = "timed out after 30 s waiting for "
        try await timeout(silentOn: [0x02], t + "Exchange MTU Response") { c in _ = try await c.exchangeMTU() }
        try await timeout(silentOn: [0x10], t + "Read By Group Type Response on handle 0x0001") { c in _ = try await c.discoverAllPrimaryServices() }
        try await timeout(silentOn: [0x06], t + "Find By Type Value Response on handle 0x0001") { c in _ = try await c.discoverPrimaryServices(uuid: .bit16(0xFFF0)) }
        try await timeout(silentOn: [0x08], t + "Read By Type Response on handle 0x0001") { c in _ = try await c.discoverCharacteristics(in: .all) }
        try await timeout(silentOn: [0x04], t + "Find Information Response on handle 0x0009") { c in _ = try await c.discoverDescriptors(in: ATTHandleRange(start: 9, end: 11)) }
        try await timeout(silentOn: [0x0A], t + "Read Response on handle 0x0003") { c in _ = try await c.read(handle: 3) }
        try await timeout(silentOn: [0x0C], t + "Read Blob Response on handle 0x0008") { c in _ = try await c.readLong(handle: 8) }
        try await timeout(silentOn: [0x0E], t + "Read Multiple Response on handle 0x0003") { c in _ = try await c.readMultiple(handles: [3, 5]) }
        try await timeout(silentOn: [0x20], t + "Read Multiple Variable Length Response on handle 0x0003") { c in _ = try await c.readMultipleVariable(handles: [3, 5]) }
        try await timeout(silentOn: [0x12], t + "Write Response on handle 0x000B") { c in try await c.write(handle: 11, value: [1]) }
        try await timeout(silentOn: [0x16], t + "Prepare Write Response on handle 0x0008") { c in try await c.writeLong(handle: 8, value: Array(repeating: 1, count: 40)) }
        try await timeout(silentOn: [0x18], t + "Execute Write Response on handle 0x0008") { c in try await c.writeLong(handle: 8, value: Array(repeating: 1, count: 40)) }
        // The subscription's two waits: the CCCD write, then the first read of the value.
        try await timeout(silentOn: [0x12], t + "Write Response on handle 0x0009") { c in _ = try await c.subscribe(valueHandle: 8, cccdHandle: 9) }
        try await timeout(silentOn: [0x0A], t + "Read Response on handle 0x0008") { c in _ = try await c.subscribe(valueHandle: 8, cccdHandle: 9) }
        // With a name given to the handle, the message carries it.
        try await timeout(silentOn: [0x12], t + "Write Response on handle 0x000B (shortValue)") { c in
            c.setName("shortValue", for: 11)
            try await c.write(handle: 11, value: [1])
        }
    }

    func testAPermitWaitTimesOutNamingThePermitWithAndWithoutALimit() async throws {
        for (limit, spoken) in [(Duration?.some(.seconds(2)), "2 s"), (nil, "30 s")] {
            let clock = ManualClock()
            var configuration = GATTClient.Configuration()
            configuration.clock = clock
            let c = try await GATTClient.connect(transport: selectivePeer(silentOn: [], capacity: 0).peer, configuration: configuration)
            let task = Task { try await c.writeWithoutResponse(handle: 11, value: [1, 2], timeout: limit) }
            await clock.waitForPendingWakeups(atLeast: 1)
            clock.advance(by: limit ?? .seconds(30))
            do {
                try await task.value
                XCTFail("the write went out through a socket that takes nothing")
            } catch {
                XCTAssertEqual("\(error)", "timed out after \(spoken) waiting for a send permit for Write Command on handle 0x000B")
            }
            XCTAssertFalse(c.isClosed, "a permit timeout fails the one write, not the bearer")
            c.close()
        }
    }

    func testWithDeadlineNamesWhatItWaitedFor() async throws {
        let clock = ManualClock()
        let task = Task {
            try await withDeadline(.seconds(5), waitingFor: "the mirror to finish", clock: clock) { () async throws -> Int in
                try await clock.sleep(for: .seconds(3600))
                return 1
            }
        }
        await clock.waitForPendingWakeups(atLeast: 2)
        clock.advance(by: .seconds(5))
        do { _ = try await task.value; XCTFail("no timeout") } catch {
            XCTAssertEqual("\(error)", "timed out after 5 s waiting for the mirror to finish")
        }
    }

    /// A client (5 s transaction timeout, MTU exchanged) of a simulated mirror with `options` over a unix: bearer;
    /// `end` closes the client, the listener and the mirror's connections.
    func simulatedMirrorClient(_ options: SimOptions) async throws -> (client: GATTClient, end: () -> Void) {
        let sim = SimulatedMirror(options: options)
        let path = freshSocketPath("wifi")
        let listener = try ATTBearerListener.unix(path: path)
        Thread { while let b = try? listener.accept() { sim.attach(b) } }.start()
        let ending = { listener.close(); sim.disconnectAll(reason: "test over") }
        do {
            let bearer = try ATTBearer.connect(unixPath: path)
            var configuration = GATTClient.Configuration()
            configuration.transactionTimeout = .seconds(5)
            let c = try await GATTClient.connect(transport: bearer, configuration: configuration)
            do { _ = try await c.exchangeMTU() } catch { c.close(); throw error }
            return (c, { c.close(); ending() })
        } catch {
            ending()
            throw error
        }
    }

    func testWiFiWaitsTimeOutNamingWhatTheyWaitedFor() async throws {
        var options = SimOptions()
        options.timings = .realistic
        options.wifiConnected = false
        let (c, end) = try await simulatedMirrorClient(options)
        defer { end() }
        // The list waits for the mirror's scan (1.2 s when realistic).
        do {
            _ = try await MirrorWiFi.list(client: c, profile: .bundled, timeout: .milliseconds(200))
            XCTFail("the list came within 200 ms")
        } catch {
            XCTAssertTrue("\(error)".hasPrefix("timed out after 200 ms waiting for the Wi-Fi network list"), "\(error)")
        }
        // The join waits for connected or failed (3 s when realistic): the timeout is reported as an event, then
        // the final read says where it got to.
        let events = EventCollector()
        let status = try await MirrorWiFi.join(client: c, profile: .bundled, ssid: "alpha", timeout: .milliseconds(200), emit: events.emit)
        XCTAssertNotEqual(status.status, "connected")
        XCTAssertTrue(events.details.contains { $0.contains("timed out after 200 ms waiting for wifiConnectionStatus connected or failed after joining alpha") },
                      "\(events.details)")
    }

    func testWiFiStatusTimesOutNamingWhatItWaitedFor() async throws {
        var options = SimOptions()
        options.faults = [try SimFault(parsing: "drop:wifiConnectionStatus")]
        let (c, end) = try await simulatedMirrorClient(options)
        defer { end() }
        do {
            _ = try await MirrorWiFi.status(client: c, profile: .bundled, timeout: .milliseconds(200))
            XCTFail("the dropped status read came back")
        } catch {
            XCTAssertEqual("\(error)", "timed out after 200 ms waiting for wifiConnectionStatus")
        }
    }
}

/// Collects the details of procedure events.
final class EventCollector: @unchecked Sendable {
    // @unchecked: `lock` guards `details`.
    let lock = NSLock()
    private var _details: [String] = []
    var details: [String] { lock.lock(); defer { lock.unlock() }; return _details }
    var emit: @Sendable (MirrorEvent) -> Void {
        { [self] e in
            lock.lock()
            if let d = e.detail { _details.append(d) }
            lock.unlock()
        }
    }
}
