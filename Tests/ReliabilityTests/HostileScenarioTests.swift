// The GATT client against every hostile peer scenario over unix: sockets: each operation ends with a named
// error within its deadline (or succeeds where the spec lets the client carry on), memory stays bounded, and
// nothing crashes or hangs.
import TestSupport
import ATTStack
import Foundation
import GATTClient
import HostilePeer
import LinkCore
import XCTest

typealias Procedure = @Sendable (GATTClient) async throws(GATTError) -> Void

/// Every procedure once, by the request it starts with (Core Spec 5.4 Vol 3 Part G §4).
let procedures: [(name: String, opcode: UInt8, run: Procedure)] = [
    ("Discover All Primary Services", 0x10, { c throws(GATTError) in _ = try await c.discoverAllPrimaryServices() }),
    ("Discover Primary Service by UUID", 0x06, { c throws(GATTError) in _ = try await c.discoverPrimaryServices(uuid: .bit16(0xFFF0)) }),
    ("Discover All Characteristics", 0x08, { c throws(GATTError) in _ = try await c.discoverCharacteristics(in: .all) }),
    ("Discover All Descriptors", 0x04, { c throws(GATTError) in _ = try await c.discoverDescriptors(in: .all) }),
    ("Read", 0x0A, { c throws(GATTError) in _ = try await c.read(handle: HostilePeer.deviceNameHandle) }),
    ("Read Long", 0x0C, { c throws(GATTError) in _ = try await c.readLong(handle: HostilePeer.longValueHandle) }),
    ("Read Multiple", 0x0E, { c throws(GATTError) in _ = try await c.readMultiple(handles: [3, 5]) }),
    ("Read Multiple Variable", 0x20, { c throws(GATTError) in _ = try await c.readMultipleVariable(handles: [3, 5]) }),
    ("Write", 0x12, { c throws(GATTError) in try await c.write(handle: HostilePeer.shortValueHandle, value: [1, 2, 3]) }),
    ("Write Long", 0x16, { c throws(GATTError) in try await c.writeLong(handle: HostilePeer.longValueHandle, value: Array(repeating: 7, count: 100)) }),
    ("Reliable Write", 0x18, { c throws(GATTError) in try await c.writeReliable([(HostilePeer.shortValueHandle, [9, 9])]) }),
]

final class HostileScenarioTests: XCTestCase {
    /// The transaction timeout of these tests, and the deadline every operation must meet.
    let timeout = Duration.milliseconds(400)
    let deadline = Duration.seconds(3)

    override func setUp() {
        // A flood or an oversize test that fails must not leave the next test a wedged socket path.
        continueAfterFailure = true
    }

    func testAHostilePeerWaitForCountersThatNeverComeEndsAtItsTimeout() throws {
        let peer = try startPeer(HostileOptions(.wellBehaved))
        defer { peer.close() }
        let start = ContinuousClock.now
        XCTAssertFalse(peer.wait(timeout: 0.2) { $0.connections > 0 }, "nobody connected, so the counters never get there")
        let took = ContinuousClock.now - start
        XCTAssertGreaterThanOrEqual(took, .milliseconds(200))
        XCTAssertLessThan(took, .seconds(5))
    }

    func testControlAWellBehavedPeerPassesEveryProcedure() async throws {
        let peer = try startPeer(HostileOptions(.wellBehaved))
        defer { peer.close() }
        let c = try await connect(peer)
        defer { c.close() }
        let got = try await c.exchangeMTU()
        XCTAssertEqual(got, 517)
        for p in procedures { try await p.run(c) }
        let long = try await c.readLong(handle: HostilePeer.longValueHandle)
        XCTAssertEqual(long.count, 300)
        let stats0 = await c.statistics
        XCTAssertEqual(stats0.protocolViolations, 0)
    }

    func testWrongOpcodeFailsEachProcedureAsAProtocolViolationAndTheBearerStaysUp() async throws {
        let peer = try startPeer(HostileOptions(.wrongOpcode))
        defer { peer.close() }
        let c = try await connect(peer)
        defer { c.close() }
        _ = try await c.exchangeMTU()
        for p in procedures {
            let e = await expectFailure(within: deadline, p.name) { () async throws(GATTError) in try await p.run(c) }
            XCTAssertTrue(e?.isProtocolViolation ?? false, "\(p.name): \(String(describing: e))")
            XCTAssertTrue(e?.description.contains("is in flight") ?? false, "\(p.name): \(String(describing: e))")
        }
        XCTAssertFalse(c.isClosed)
        let stats1 = await c.statistics
        XCTAssertGreaterThanOrEqual(stats1.protocolViolations, procedures.count)
    }

    func testErrorResponseNamingAnotherRequestIsAProtocolViolation() async throws {
        let peer = try startPeer(HostileOptions(.errorForOtherRequest))
        defer { peer.close() }
        let c = try await connect(peer)
        defer { c.close() }
        _ = try await c.exchangeMTU()
        for p in procedures {
            let e = await expectFailure(within: deadline, p.name) { () async throws(GATTError) in try await p.run(c) }
            guard case .protocolViolation(let v)? = e else { XCTFail("\(p.name): \(String(describing: e))"); continue }
            XCTAssertTrue(v.problem.hasPrefix("an Error Response for 0x"), v.problem)
            XCTAssertEqual(v.received.first, 0x01)
        }
    }

    func testResponsesNobodyAskedForAreCountedAndDroppedAndTheNextRequestIsUnharmed() async throws {
        let peer = try startPeer(HostileOptions(.unsolicitedResponses))
        defer { peer.close() }
        let c = try await connect(peer)
        defer { c.close() }
        _ = try await c.exchangeMTU()
        var stream = c.notifications.makeAsyncIterator()
        for round in 1...3 {
            let stats2 = await c.statistics
            let before = stats2.protocolViolations
            let got = try await c.read(handle: HostilePeer.deviceNameHandle)
            XCTAssertEqual(got, Array("hostile-peer".utf8))
            // The marker follows the four unsolicited PDUs on the wire, so once it is here they were all handled.
            var marker: GATTNotification?
            while let n = try await stream.next() {
                if n.handle == HostilePeer.markerHandle { marker = n; break }
            }
            XCTAssertNotNil(marker, "round \(round)")
            let stats3 = await c.statistics
            XCTAssertEqual(stats3.protocolViolations - before, 4, "round \(round)")
        }
        XCTAssertFalse(c.isClosed)
    }

    func testAResponseAfterTheTimeoutFindsTheBearerClosedAndChangesNothing() async throws {
        let peer = try startPeer(HostileOptions(.lateResponse, delayMilliseconds: 900))
        defer { peer.close() }
        let c = try await connect(peer, timeout: timeout)
        defer { c.close() }
        _ = try await c.exchangeMTU()
        // The read of 0x0003 goes out first (the peer has it), then a read of 0x0005 queues behind it.
        let start = ContinuousClock.now
        let first = Task { try await c.read(handle: HostilePeer.deviceNameHandle) }
        XCTAssertTrue(peer.wait(timeout: 5) { $0.requests == 2 }, "Exchange MTU and the read")
        let queued = Task { try await c.read(handle: 5) }
        do { _ = try await first.value; XCTFail("the read succeeded") } catch {
            XCTAssertEqual(error as? GATTError, .timeout(GATTTimeoutError(waitingFor: "Read Response", handle: 3, after: timeout)))
            XCTAssertEqual("\(error)", "timed out after 400 ms waiting for Read Response on handle 0x0003")
        }
        XCTAssertLessThan(ContinuousClock.now - start, deadline)
        // The request queued behind it fails at once, naming the ATT timeout (Vol 3 Part F §3.3.3).
        do { _ = try await queued.value; XCTFail("queued read succeeded") } catch {
            XCTAssertTrue((error as? GATTError)?.isDisconnected ?? false, "\(error)")
            XCTAssertTrue("\(error)".contains("ATT timeout: no Read Response on handle 0x0003 within 400 ms"), "\(error)")
        }
        XCTAssertTrue(c.isClosed)
        // The late answer goes nowhere: the peer's connection ends, the client is unchanged.
        XCTAssertTrue(peer.wait(timeout: 5) { $0.closedConnections == 1 })
        let stats4 = await c.statistics
        XCTAssertEqual(stats4.protocolViolations, 0)
    }

    func testTruncatedResponsesAreProtocolViolations() async throws {
        let peer = try startPeer(HostileOptions(.truncated))
        defer { peer.close() }
        let c = try await connect(peer)
        defer { c.close() }
        _ = try await c.exchangeMTU()
        // Read, Read Blob, Read Multiple and Write Responses have no length field or are one byte: cut short they are
        // still well formed, so only the structured responses are checked.
        for p in procedures where ![0x0A, 0x0C, 0x0E, 0x12].contains(p.opcode) {
            let e = await expectFailure(within: deadline, p.name) { () async throws(GATTError) in try await p.run(c) }
            XCTAssertTrue(e?.isProtocolViolation ?? false, "\(p.name): \(String(describing: e))")
        }
    }

    func testResponsesLongerThanTheMTUAreProtocolViolations() async throws {
        let peer = try startPeer(HostileOptions(.oversized))
        defer { peer.close() }
        let c = try await connect(peer, mtu: 64)
        defer { c.close() }
        let got = try await c.exchangeMTU()
        XCTAssertEqual(got, 64)
        for p in procedures {
            let e = await expectFailure(within: deadline, p.name) { () async throws(GATTError) in try await p.run(c) }
            guard case .protocolViolation(let v)? = e else { XCTFail("\(p.name): \(String(describing: e))"); continue }
            XCTAssertTrue(v.problem.contains("longer than the ATT_MTU of 64"), "\(p.name): \(v.problem)")
        }
    }

    func testAPDUOverTheReceiveBufferClosesTheBearerNamingIt() async throws {
        let peer = try startPeer(HostileOptions(.overBuffer))
        defer { peer.close() }
        let c = try await connect(peer)
        defer { c.close() }
        _ = try await c.exchangeMTU()
        let e = await expectFailure(within: deadline, "Read") { () async throws(GATTError) in try await c.read(handle: 3) }
        XCTAssertTrue(e?.isDisconnected ?? false, "\(String(describing: e))")
        XCTAssertTrue(e?.description.contains("received a 2000-byte PDU, larger than the 1024-byte receive buffer") ?? false, "\(String(describing: e))")
        XCTAssertTrue(c.isClosed)
    }

    func testAnMTUBelow23IsTakenAs23AndOneAbove517As517() async throws {
        for (scenario, expected) in [(HostileScenario.mtuBelowMinimum, 23), (.mtuAboveMaximum, 517)] {
            let peer = try startPeer(HostileOptions(scenario))
            defer { peer.close() }
            let c = try await connect(peer)
            defer { c.close() }
            let got = try await c.exchangeMTU()
            XCTAssertEqual(got, expected, scenario.rawValue)
            XCTAssertEqual(c.mtu, expected)
            XCTAssertEqual(c.writeValueBudget, min(expected - 3, 512))
            // Everything after works at that MTU (the long read in MTU-1 parts).
            let long = try await c.readLong(handle: HostilePeer.longValueHandle)
            XCTAssertEqual(long, HostilePeer.longValue)
        }
    }

    func testDiscoveryHandlesThatGoBackwardsOrRepeatEndInAProtocolViolationNotALoop() async throws {
        for scenario in [HostileScenario.handlesBackwards, .handlesRepeat] {
            let peer = try startPeer(HostileOptions(scenario))
            defer { peer.close() }
            let c = try await connect(peer, mtu: 23)
            defer { c.close() }
            _ = try await c.exchangeMTU()
            for p in procedures where [0x10, 0x08, 0x04].contains(p.opcode) {
                let e = await expectFailure(within: deadline, "\(scenario.rawValue) \(p.name)") { () async throws(GATTError) in try await p.run(c) }
                guard case .protocolViolation(let v)? = e else { XCTFail("\(p.name): \(String(describing: e))"); continue }
                XCTAssertTrue(v.problem.hasPrefix("a handle going backwards or out of range"), v.problem)
            }
            let e = await expectFailure(within: deadline, "discoverAll") { () async throws(GATTError) in try await c.discoverAll() }
            XCTAssertTrue(e?.isProtocolViolation ?? false)
            // A handful of requests, not a loop.
            XCTAssertLessThan(peer.stats.requests, 20, scenario.rawValue)
        }
    }

    func testAReadBlobThatNeverEndsStopsAt512BytesWithAProtocolViolation() async throws {
        for mtu in [23, 100, 517] {
            let peer = try startPeer(HostileOptions(.endlessBlob))
            defer { peer.close() }
            let c = try await connect(peer, mtu: mtu)
            defer { c.close() }
            _ = try await c.exchangeMTU()
            let e = await expectFailure(within: deadline, "readLong at MTU \(mtu)") { () async throws(GATTError) in
                try await c.readLong(handle: HostilePeer.longValueHandle)
            }
            guard case .protocolViolation(let v)? = e else { XCTFail("MTU \(mtu): \(String(describing: e))"); continue }
            XCTAssertTrue(v.problem.contains("past the 512-byte maximum"), v.problem)
            // Exchange MTU, the read, and at most 512/(MTU-1) + 1 blobs.
            XCTAssertLessThanOrEqual(peer.stats.requests, 2 + 512 / (mtu - 1) + 1, "MTU \(mtu)")
        }
    }

    func testAPrepareWriteEchoThatDiffersCancelsAReliableWrite() async throws {
        let peer = try startPeer(HostileOptions(.prepareEchoDiffers))
        defer { peer.close() }
        let c = try await connect(peer, mtu: 23)
        defer { c.close() }
        _ = try await c.exchangeMTU()
        let value = (0..<40).map { UInt8($0) }
        let e = await expectFailure(within: deadline, "reliable write") { () async throws(GATTError) in
            try await c.writeReliable([(HostilePeer.longValueHandle, value)])
        }
        guard case .protocolViolation(let v)? = e else { return XCTFail("\(String(describing: e))") }
        XCTAssertEqual(v.problem, "the echo of a reliable write differs from what was sent")
        XCTAssertEqual(peer.stats.executeWrites, [0x00], "the queue is cancelled, never executed")
        let got = try await c.readLong(handle: HostilePeer.longValueHandle)
        XCTAssertEqual(got, HostilePeer.longValue)
        // A plain long write does not compare echoes (Part G §4.9.4): it goes through.
        try await c.writeLong(handle: HostilePeer.longValueHandle, value: value)
        XCTAssertEqual(peer.stats.executeWrites, [0x00, 0x01])
    }

    func testAMillionNotificationsKeepMemoryBoundedAndRequestsAnswered() async throws {
        let count = Scale.flood
        let peer = try startPeer(HostileOptions(.notificationFlood, count: count))
        defer { peer.close() }
        let c = try await connect(peer, timeout: .seconds(10))
        defer { c.close() }
        _ = try await c.exchangeMTU()
        let rssBefore = residentKiB()
        let (_, stream) = try await c.subscribe(valueHandle: HostilePeer.longValueHandle,
                                                cccdHandle: HostilePeer.cccdHandle, readValue: false)
        // Requests during the flood are answered (each within the transaction timeout).
        var reads = 0
        while peer.stats.floodsDone == 0 && reads < 50 {
            let start = ContinuousClock.now
            let got = try await c.read(handle: HostilePeer.deviceNameHandle)
            XCTAssertEqual(got, Array("hostile-peer".utf8))
            XCTAssertLessThan(ContinuousClock.now - start, .seconds(10))
            reads += 1
        }
        XCTAssertTrue(peer.wait(timeout: 120) { $0.floodsDone == 1 }, "the flood did not finish: \(peer.stats)")
        // This answer follows every notification on the wire: once it is here, the engine has handled them all.
        _ = try await c.read(handle: HostilePeer.deviceNameHandle)
        let stats5 = await c.statistics
        XCTAssertEqual(stats5.notificationsReceived, count)
        XCTAssertGreaterThan(stream.droppedCount, 0, "nobody consumed the stream: it must have dropped")
        XCTAssertEqual(stream.droppedCount, count - 1024, "the stream keeps its 1024 oldest values")
        let grewKiB = residentKiB() - rssBefore
        XCTAssertLessThan(grewKiB, 48 * 1024, "RSS grew by \(grewKiB) KiB over \(count) notifications")
        print("flood: \(count) notifications, \(reads) reads answered during it, RSS grew \(grewKiB) KiB")
    }

    func testAnIndicationStormWithoutReadingKeepsTheAnswersBounded() async throws {
        let count = Scale.storm
        let peer = try startPeer(HostileOptions(.indicationStorm, count: count))
        defer { peer.close() }
        let c = try await connect(peer, timeout: .seconds(20))
        defer { c.close() }
        _ = try await c.exchangeMTU()
        let rssBefore = residentKiB()
        let (_, stream) = try await c.subscribe(valueHandle: HostilePeer.longValueHandle, cccdHandle: HostilePeer.cccdHandle,
                                                mode: .indicate, readValue: false)
        XCTAssertTrue(peer.wait(timeout: 120) { $0.stormsDone == 1 }, "the storm did not finish: \(peer.stats)")
        // The peer reads again after its storm: this read's answer follows every indication.
        let got = try await c.read(handle: HostilePeer.deviceNameHandle)
        XCTAssertEqual(got, Array("hostile-peer".utf8))
        let stats6 = await c.statistics
        XCTAssertEqual(stats6.notificationsReceived, count)
        let stats7 = await c.statistics
        XCTAssertEqual(stats7.indicationsConfirmed, count)
        // The confirmations the socket could not take were dropped, not queued without bound.
        let stats = peer.stats
        XCTAssertGreaterThan(stats.confirmations, 0)
        // Bounded by what the socket buffer takes plus the engine's small backlog, not by the storm's length.
        XCTAssertLessThan(stats.confirmations, 2_000, "confirmations held for a peer that does not read must be bounded")
        // Each dropped confirmation is counted as the peer's violation (nearly all of them: the socket held a few hundred).
        let stats8 = await c.statistics
        XCTAssertGreaterThan(stats8.protocolViolations, count - 2_000)
        let grew = residentKiB() - rssBefore
        XCTAssertLessThan(grew, 32 * 1024, "RSS grew by \(grew) KiB over \(count) indications")
        XCTAssertLessThanOrEqual(stream.droppedCount, count)
        XCTAssertFalse(c.isClosed)
        print("storm: \(count) indications, \(stats.confirmations) confirmations sent, RSS grew \(grew) KiB")
    }

    func testNoAnswerAtAllEndsEveryOperationWithItsNamedTimeout() async throws {
        let peer = try startPeer(HostileOptions(.silent))
        defer { peer.close() }
        let c = try await connect(peer, timeout: timeout)
        defer { c.close() }
        // The first request waits for its own response; everything queued behind it ends with it (the ATT
        // timeout closes the bearer, Vol 3 Part F §3.3.3).
        let first = Task { try await c.exchangeMTU() }
        XCTAssertTrue(peer.wait(timeout: 5) { $0.requests == 1 })
        let others = procedures.map { p in Task { try await p.run(c) } }
        let start = ContinuousClock.now
        do { _ = try await first.value; XCTFail("Exchange MTU succeeded") } catch {
            XCTAssertEqual("\(error)", "timed out after 400 ms waiting for Exchange MTU Response")
        }
        for (p, t) in zip(procedures, others) {
            do { try await t.value; XCTFail("\(p.name) succeeded") } catch {
                XCTAssertTrue((error as? GATTError)?.isDisconnected ?? false, "\(p.name): \(error)")
                XCTAssertTrue("\(error)".contains("ATT timeout: no Exchange MTU Response within 400 ms"), "\(error)")
            }
        }
        XCTAssertLessThan(ContinuousClock.now - start, deadline)
        XCTAssertTrue(c.isClosed)
        XCTAssertEqual(peer.stats.requests, 1, "one request in flight at a time")
    }

    func testClosingTheSocketInTheMiddleOfEveryProcedure() async throws {
        // (request opcode to close on, which one of them, the procedure, the operation the error must name)
        let cases: [(UInt8, Int, String, Procedure, String)] = [
            (0x02, 1, "Exchange MTU", { c throws(GATTError) in _ = try await c.exchangeMTU() }, "Exchange MTU Request"),
            (0x10, 1, "Discover All Primary Services", { c throws(GATTError) in _ = try await c.discoverAllPrimaryServices() }, "Read By Group Type Request"),
            (0x10, 2, "Discover All Primary Services, second request", { c throws(GATTError) in _ = try await c.discoverAllPrimaryServices() }, "Read By Group Type Request"),
            (0x06, 1, "Discover Primary Service by UUID", { c throws(GATTError) in _ = try await c.discoverPrimaryServices(uuid: .bit16(0xFFF0)) }, "Find By Type Value Request"),
            (0x08, 2, "Discover Characteristics", { c throws(GATTError) in _ = try await c.discoverCharacteristics(in: .all) }, "Read By Type Request"),
            (0x04, 1, "Discover Descriptors", { c throws(GATTError) in _ = try await c.discoverDescriptors(in: .all) }, "Find Information Request"),
            (0x08, 3, "Discover All", { c throws(GATTError) in _ = try await c.discoverAll() }, "Read By Type Request"),
            (0x0A, 1, "Read", { c throws(GATTError) in _ = try await c.read(handle: 3) }, "Read Request of handle 0x0003"),
            (0x0C, 3, "Read Long, third blob", { c throws(GATTError) in _ = try await c.readLong(handle: 8) }, "Read Blob Request of handle 0x0008"),
            (0x12, 1, "Write", { c throws(GATTError) in try await c.write(handle: 11, value: [1]) }, "Write Request to handle 0x000B"),
            (0x16, 2, "Write Long, second part", { c throws(GATTError) in try await c.writeLong(handle: 8, value: Array(repeating: 1, count: 100)) }, "Prepare Write Request to handle 0x0008"),
            (0x18, 1, "Write Long, execute", { c throws(GATTError) in try await c.writeLong(handle: 8, value: Array(repeating: 1, count: 100)) }, "Execute Write Request"),
            (0x16, 1, "Reliable Write", { c throws(GATTError) in try await c.writeReliable([(8, [1, 2]), (11, [3])]) }, "Prepare Write Request to handle 0x0008"),
            (0x12, 1, "Subscribe, CCCD write", { c throws(GATTError) in _ = try await c.subscribe(valueHandle: 8, cccdHandle: 9) }, "Write Request to handle 0x0009"),
            (0x0A, 1, "Subscribe, first read", { c throws(GATTError) in _ = try await c.subscribe(valueHandle: 8, cccdHandle: 9) }, "Read Request of handle 0x0008"),
            (0x0E, 1, "Read Multiple", { c throws(GATTError) in _ = try await c.readMultiple(handles: [3, 5]) }, "Read Multiple Request"),
        ]
        for (op, nth, name, run, during) in cases {
            let peer = try startPeer(HostileOptions(.close, victims: [op], nth: nth))
            defer { peer.close() }
            let c = try await connect(peer, mtu: 23, events: nil)
            defer { c.close() }
            if op != 0x02 { _ = try await c.exchangeMTU() }
            let notifications = c.notifications
            let e = await expectFailure(within: deadline, name) { () async throws(GATTError) in try await run(c) }
            guard case .disconnected(let d)? = e else { XCTFail("\(name): \(String(describing: e))"); continue }
            XCTAssertEqual(d.reason, "the peer closed the connection", name)
            XCTAssertTrue(d.during.hasPrefix(during), "\(name): during \(d.during), expected \(during)")
            XCTAssertEqual(peer.stats.closedOnPurpose, 1, name)
            XCTAssertTrue(c.isClosed, name)
            // The catch-all stream ends too, naming the reason; later operations fail at once.
            do { for try await _ in notifications {} ; XCTFail("the stream ended without an error") } catch {
                XCTAssertTrue("\(error)".contains("the peer closed the connection"), "\(error)")
            }
            let after = await expectFailure(within: .milliseconds(200), "after the close") { () async throws(GATTError) in
                try await c.writeWithoutResponse(handle: 11, value: [1])
            }
            XCTAssertTrue(after?.isDisconnected ?? false, "\(String(describing: after))")
        }
    }

    func testANotificationStreamEndsWhenThePeerClosesMidListen() async throws {
        let peer = try startPeer(HostileOptions(.close, victims: [0x0A], nth: 2))
        defer { peer.close() }
        let c = try await connect(peer)
        defer { c.close() }
        let (value, stream) = try await c.subscribe(valueHandle: 8, cccdHandle: 9)
        XCTAssertEqual(value, HostilePeer.longValue)
        let listener = Task { () -> String in
            do { for try await _ in stream {}; return "ended without an error" } catch { return "\(error)" }
        }
        let e = await expectFailure(within: deadline, "read") { () async throws(GATTError) in try await c.read(handle: 3) }
        XCTAssertTrue(e?.isDisconnected ?? false)
        let ended = await listener.value
        XCTAssertEqual(ended, "disconnected during notifications of handle 0x0008: the peer closed the connection")
    }
}
