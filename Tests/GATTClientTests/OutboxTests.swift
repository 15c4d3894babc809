import TestSupport
import ATTStack
import XCTest
@testable import GATTClient

/// The one outbox (Core Spec 5.4 Vol 3 Part F §3.3): every PDU leaves through one writer in one order, answers to
/// the peer first, then the slot's request, then write-without-response permits in FIFO order; and every PDU the
/// peer sends is decoded once, so a malformed one is still answered as ATT requires.
final class OutboxTests: XCTestCase {
    func testAfterAFullSocketAnswersGoFirstThenTheSlotsRequestThenPermitsInFIFOOrder() async throws {
        let peer = ScriptedPeer([], capacity: 0)
        peer.strict = false
        let client = try await makeClient(peer)
        let first = Task { try await client.writeWithoutResponse(handle: 0x20, value: [1]) }
        try await waitUntil("a write waiting for a send permit") { client.engine.snapshot.permitWaiters >= 1 }
        let read = Task { try await client.read(handle: 0x03) }
        try await waitUntil("the read in the slot") { client.engine.snapshot.inFlight != nil }
        let second = Task { try await client.writeWithoutResponse(handle: 0x20, value: [2]) }
        try await waitUntil("two writes waiting for a send permit") { client.engine.snapshot.permitWaiters >= 2 }
        // An indication arrives last: its confirmation still leaves first.
        peer.inject([0x1D, 0x05, 0x00, 0xAA])
        try await waitUntil("the confirmation queued") { client.engine.snapshot.queuedAnswers >= 1 }
        XCTAssertEqual(peer.sent, [], "nothing may go while the socket is full")
        peer.grantWritable(10)
        await peer.waitForSent(4)
        XCTAssertEqual(peer.sent, [[0x1E], [0x0A, 0x03, 0x00], [0x52, 0x20, 0x00, 1], [0x52, 0x20, 0x00, 2]])
        peer.inject([0x0B, 0x42])
        let value = try await within { try await read.value }
        XCTAssertEqual(value, [0x42])
        try await first.value
        try await second.value
    }

    func testTheATTTimeoutRunsFromTheMomentTheRequestIsWrittenNotFromWhenItWasQueued() async throws {
        let clock = ManualClock()
        let peer = ScriptedPeer([], capacity: 0)
        peer.strict = false
        let client = try await makeClient(peer, clock: clock)
        let read = Task { try await client.read(handle: 0x03) }
        try await waitUntil("the send refused by the full socket") { client.engine.snapshot.sendBlocked }
        clock.advance(by: .seconds(20))
        peer.grantWritable(1)
        await peer.waitForSent(1)
        clock.advance(by: .seconds(29))
        XCTAssertFalse(client.isClosed, "the deadline counted time the request spent waiting for the socket")
        clock.advance(by: .seconds(1))
        do { _ = try await within { try await read.value }; XCTFail() } catch let e as GATTError {
            guard case .timeout(let t) = e else { return XCTFail("\(e)") }
            XCTAssertEqual(t.waitingFor, "Read Response")
        }
        XCTAssertTrue(client.isClosed)
    }

    func testAMalformedIndicationIsReportedAndStillConfirmed() async throws {
        let log = EventLog()
        // Handle 0x0000 is forbidden (§3.4.7.2): the codec rejects it, the router still confirms (§3.4.7.3).
        let peer = ScriptedPeer([.server(hex("1d 00 00 09")), .client(hex("1e"))])
        let client = try await makeClient(peer, log: log)
        await peer.waitForSent(1)
        peer.assertScriptDone()
        // The violation is reported before the confirmation is queued.
        let stats0 = await client.statistics
        XCTAssertEqual(stats0.indicationsConfirmed, 1)
        let stats1 = await client.statistics
        XCTAssertEqual(stats1.protocolViolations, 1)
        guard case .protocolViolation(let v, nil)? = log.all.first else { return XCTFail("\(log.all)") }
        XCTAssertEqual(v.received, [0x1D, 0x00, 0x00, 0x09])
        XCTAssertTrue(v.problem.hasSuffix("(confirmed anyway)"), v.problem)
    }

    func testAMalformedExchangeMTURequestIsAnsweredInvalidPDUAndChangesNothing() async throws {
        let log = EventLog()
        let peer = ScriptedPeer([.server(hex("02 17")), .client(hex("01 02 00 00 04"))])
        let client = try await makeClient(peer, log: log)
        await peer.waitForSent(1)
        // The event follows the send, on the reader's thread.
        try await waitUntil("an event logged") { !log.all.isEmpty }
        peer.assertScriptDone()
        XCTAssertEqual(client.mtu, 23)
        XCTAssertEqual(log.all, [.answeredPeerRequest(request: [0x02, 0x17], answer: [0x01, 0x02, 0x00, 0x00, 0x04])])
    }
}
