import TestSupport
import ATTStack
import Synchronization
import XCTest
@testable import GATTClient

/// The transaction engine: the slot and its owner, timeouts, matching, cancellation, the peer's requests, disconnect.
final class EngineTests: XCTestCase {
    func testWriteRequestIsByteExact() async throws {
        let peer = ScriptedPeer(raw("12 12 00 32", "13"))
        let client = try await makeClient(peer)
        try await client.write(handle: 0x0012, value: [0x32])
        peer.assertScriptDone()
        XCTAssertEqual(client.engine.snapshot.pendingDeadlines, 0, "the request's deadline outlived its response")
    }

    /// Seed 000: two writes less than the timeout apart; the first's timer never resolves the second.
    func testStaleTimerOfAnEarlierWriteNeverResolvesALaterWrite() async throws {
        let clock = ManualClock()
        let peer = ScriptedPeer(raw("12 12 00 31", "13") + raw("12 12 00 32"))
        let client = try await makeClient(peer, clock: clock)
        client.setName("scannerAction", for: 0x0012)
        let t0 = clock.now()
        try await client.write(handle: 0x0012, value: [0x31])          // answered at once
        clock.advance(by: .seconds(25))
        let second = Task { try await client.write(handle: 0x0012, value: [0x32]) }   // never answered
        await peer.waitForSent(2)
        clock.advance(to: t0.advanced(by: .seconds(31)))                // the first write's 30 s have passed
        await peer.flush()
        XCTAssertFalse(client.isClosed, "the first write's deadline closed the bearer")
        XCTAssertEqual(client.engine.snapshot.pendingDeadlines, 1)
        clock.advance(to: t0.advanced(by: .seconds(55)))                // the second write's own 30 s
        do {
            try await second.value
            XCTFail("expected the second write to time out")
        } catch let e as GATTError {
            XCTAssertEqual(e.description, "timed out after 30 s waiting for Write Response on handle 0x0012 (scannerAction)")
        }
        XCTAssertTrue(peer.isClosed, "the bearer must close after an ATT timeout")
        peer.assertScriptDone()
    }

    func testATTTimeoutClosesTheBearerAndFailsQueuedOperationsNamingTheTimedOutRequest() async throws {
        let clock = ManualClock()
        let peer = ScriptedPeer(raw("0a 21 00"))
        let client = try await makeClient(peer, clock: clock)
        client.setName("scanState", for: 0x0021)
        let first = Task { try await client.read(handle: 0x0021) }
        await peer.waitForSent(1)
        let queued = Task { try await client.write(handle: 0x0030, value: [1]) }
        try await waitUntil("a request queued behind the slot") { client.engine.snapshot.queuedRequests >= 1 }
        clock.advance(by: .seconds(30))
        do {
            _ = try await first.value
            XCTFail("expected a timeout")
        } catch let e as GATTError {
            guard case .timeout(let t) = e else { return XCTFail("\(e)") }
            XCTAssertEqual(t.waitingFor, "Read Response")
            XCTAssertEqual(t.handle, 0x0021)
            XCTAssertEqual(t.after, .seconds(30))
        }
        do {
            try await queued.value
            XCTFail("expected the queued write to fail")
        } catch let e as GATTError {
            guard case .disconnected(let d) = e else { return XCTFail("\(e)") }
            XCTAssertEqual(d.during, "Write Request to handle 0x0030")
            XCTAssertTrue(d.reason.contains("ATT timeout: no Read Response on handle 0x0021 (scanState) within 30 s"), d.reason)
        }
        XCTAssertTrue(peer.isClosed)
        // A late response after the timeout changes nothing and crashes nothing.
        let stats0 = await client.statistics
        let droppedBefore = stats0.droppedEvents
        client.engine.transport(didReceive: [0x0B, 0x01])
        let stats1 = await client.statistics
        XCTAssertEqual(stats1.droppedEvents, droppedBefore + 1)
        let stats2 = await client.statistics
        XCTAssertEqual(stats2.protocolViolations, 0)
        do {
            _ = try await client.read(handle: 0x0021)
            XCTFail("a closed bearer accepted a request")
        } catch let e {
            guard case .disconnected = e else { return XCTFail("\(e)") }
        }
        peer.assertScriptDone()
    }

    func testTimeoutIsConfigurable() async throws {
        let clock = ManualClock()
        let peer = ScriptedPeer(raw("0a 21 00"))
        let client = try await makeClient(peer, clock: clock) { $0.transactionTimeout = .seconds(5) }
        let op = Task { try await client.read(handle: 0x0021) }
        await peer.waitForSent(1)
        clock.advance(by: .milliseconds(4999))
        await peer.flush()
        XCTAssertFalse(client.isClosed)
        clock.advance(by: .milliseconds(1))
        do { _ = try await op.value; XCTFail() } catch let e as GATTError {
            XCTAssertEqual(e.description, "timed out after 5 s waiting for Read Response on handle 0x0021")
        }
    }

    func testRequestsGoOutOneAtATimeInFIFOOrder() async throws {
        let peer = ScriptedPeer(raw("0a 01 00", "0b 01") + raw("0a 02 00", "0b 02") + raw("0a 03 00", "0b 03"))
        let client = try await makeClient(peer)
        // Each read is submitted before the next task starts: a submitted request is either queued or was sent to
        // the peer, so wait until those two together count every read added so far.
        let results = try await withThrowingTaskGroup(of: (UInt16, [UInt8]).self) { group in
            for h in UInt16(1)...3 {
                group.addTask { (h, try await client.read(handle: h)) }
                try await waitUntil("read \(h) queued or sent") { client.engine.snapshot.queuedRequests + peer.sent.count >= Int(h) }
            }
            var out: [UInt16: [UInt8]] = [:]
            for try await (h, v) in group { out[h] = v }
            return out
        }
        XCTAssertEqual(results, [1: [1], 2: [2], 3: [3]])
        peer.assertScriptDone()
    }

    func testMismatchedResponseIsAProtocolViolationThatFailsOnlyTheSlot() async throws {
        let log = EventLog()
        let peer = ScriptedPeer(raw("12 12 00 01", "0b 05") + raw("0a 12 00", "0b 07"))
        let client = try await makeClient(peer, log: log)
        do {
            try await client.write(handle: 0x0012, value: [1])
            XCTFail("a Read Response answered a Write Request")
        } catch let e {
            guard case .protocolViolation(let v) = e else { return XCTFail("\(e)") }
            XCTAssertEqual(v.received, [0x0B, 0x05])
            XCTAssertTrue(v.description.contains("received [0B 05]"), v.description)
            XCTAssertTrue(v.expected.contains("0x13 Write Response"), v.expected)
        }
        let v = try await client.read(handle: 0x0012)
        XCTAssertEqual(v, [7])
        let stats3 = await client.statistics
        XCTAssertEqual(stats3.protocolViolations, 1)
        XCTAssertTrue(log.all.contains { if case .protocolViolation = $0 { return true }; return false })
        peer.assertScriptDone()
    }

    func testErrorResponseMustNameTheRequestInTheSlot() async throws {
        let peer = ScriptedPeer(raw("12 12 00 01", "01 0a 12 00 0d"))
        let client = try await makeClient(peer)
        do {
            try await client.write(handle: 0x0012, value: [1])
            XCTFail()
        } catch let e {
            guard case .protocolViolation(let v) = e else { return XCTFail("\(e)") }
            XCTAssertTrue(v.problem.contains("Error Response for 0x0A Read Request while 0x12 Write Request is in flight"), v.problem)
        }
    }

    func testMalformedErrorResponseFailsTheSlotWithTheBytes() async throws {
        let peer = ScriptedPeer(raw("0a 12 00", "01 0a 12"))
        let client = try await makeClient(peer)
        do { _ = try await client.read(handle: 0x12); XCTFail() } catch let e {
            guard case .protocolViolation(let v) = e else { return XCTFail("\(e)") }
            XCTAssertEqual(v.received, [0x01, 0x0A, 0x12])
        }
    }

    func testMalformedResponseBodyIsAProtocolViolation() async throws {
        // A Read By Group Type Response whose length byte does not divide the list.
        let peer = ScriptedPeer(raw("10 01 00 ff ff 00 28", "11 06 01 00 05 00 00 18 06"))
        let client = try await makeClient(peer)
        do { _ = try await client.discoverAllPrimaryServices(); XCTFail() } catch let e {
            guard case .protocolViolation(let v) = e else { return XCTFail("\(e)") }
            XCTAssertEqual(v.received, hex("11 06 01 00 05 00 00 18 06"))
        }
        XCTAssertFalse(client.isClosed)
    }

    func testUnsolicitedResponseIsReportedAndDropped() async throws {
        let log = EventLog()
        let peer = ScriptedPeer([.server(hex("13"))] + raw("0a 01 00", "0b 09"))
        let client = try await makeClient(peer, log: log)
        await peer.flush()
        let stats4 = await client.statistics
        XCTAssertEqual(stats4.protocolViolations, 1)
        let v = try await client.read(handle: 1)
        XCTAssertEqual(v, [9])
        XCTAssertTrue(log.all.contains { $0.description.contains("an unsolicited Write Response") })
        peer.assertScriptDone()
    }

    func testCancelledQueuedRequestLeavesTheQueue() async throws {
        let peer = ScriptedPeer(raw("0a 01 00") + [.pause, .server(hex("0b 01"))] + raw("0a 03 00", "0b 03"))
        let client = try await makeClient(peer)
        let first = Task { try await client.read(handle: 1) }
        await peer.waitForSent(1)
        let second = Task { try await client.read(handle: 2) }
        try await waitUntil("a request queued behind the slot") { client.engine.snapshot.queuedRequests >= 1 }
        second.cancel()
        do { _ = try await second.value; XCTFail() } catch let e as GATTError {
            XCTAssertEqual(e, .cancelled(operation: "Read Request of handle 0x0002"))
        }
        XCTAssertEqual(client.engine.snapshot.queuedRequests, 0)
        let third = Task { try await client.read(handle: 3) }
        try await waitUntil("a request queued behind the slot") { client.engine.snapshot.queuedRequests >= 1 }
        peer.grantScriptStep()
        let v1 = try await first.value
        let v3 = try await third.value
        XCTAssertEqual(v1, [1])
        XCTAssertEqual(v3, [3])
        XCTAssertEqual(peer.sent, [hex("0a 01 00"), hex("0a 03 00")], "the cancelled request was sent")
    }

    func testCancelledInFlightRequestReleasesItsCallerButKeepsTheSlotUntilItsResponse() async throws {
        let log = EventLog()
        let peer = ScriptedPeer(raw("0a 01 00") + [.pause, .server(hex("0b 01"))] + raw("0a 02 00", "0b 02"))
        let client = try await makeClient(peer, log: log)
        let first = Task { try await client.read(handle: 1) }
        await peer.waitForSent(1)
        let second = Task { try await client.read(handle: 2) }
        try await waitUntil("a request queued behind the slot") { client.engine.snapshot.queuedRequests >= 1 }
        first.cancel()
        do { _ = try await first.value; XCTFail() } catch let e as GATTError {
            guard case .cancelled = e else { return XCTFail("\(e)") }
        }
        try await assertTheSlotIsHeldUntilTheLateResponse(peer, log, sent: 1, queued: second, answer: [2])
    }

    /// After the caller of the request in flight was cancelled: nothing else goes out until that request's late
    /// response, which is dropped (named), then the queued read goes out and gets `answer`.
    private func assertTheSlotIsHeldUntilTheLateResponse(_ peer: ScriptedPeer, _ log: EventLog, sent: Int,
                                                         queued: Task<[UInt8], any Error>, answer: [UInt8]) async throws {
        await peer.flush()
        XCTAssertEqual(peer.sent.count, sent, "a request went out while the cancelled one was in flight")
        peer.grantScriptStep()   // the late response arrives: dropped, then the queued request goes out
        let v = try await queued.value
        XCTAssertEqual(v, answer)
        XCTAssertTrue(log.all.contains { $0.description.contains("whose caller was cancelled") })
        peer.assertScriptDone()
    }

    /// Writes of a task on the link's event loop: cancelling the task releases the write in flight at once, and its
    /// late response is dropped (the slot keeps the request until then, §3.3.2).
    func testCancellingWritesOnTheLoopReleasesTheWriteInFlightAtOnce() async throws {
        let log = EventLog()
        let peer = ScriptedPeer(raw("12 12 00 31", "13") + raw("12 12 00 32") + [.pause, .server(hex("13"))]
                                + raw("0a 02 00", "0b 02"))
        let client = try await makeClient(peer, log: log)
        let task = Task {
            try await withTaskExecutorPreference(client.eventLoop) {
                try await client.write(handle: 0x0012, value: [0x31])
                try await client.write(handle: 0x0012, value: [0x32])   // never answered in time
            }
        }
        await peer.waitForSent(2)
        try await assertCancellingReleasesTheWriteInFlight(task)
        let queued = Task { try await client.read(handle: 2) }
        try await waitUntil("a request queued behind the slot") { client.engine.snapshot.queuedRequests >= 1 }
        try await assertTheSlotIsHeldUntilTheLateResponse(peer, log, sent: 2, queued: queued, answer: [2])
    }

    /// A write on the loop is bounded as any request: the ATT timeout names the Write Response it waited for.
    func testAWriteOnTheLoopTimesOutNamingTheWriteResponse() async throws {
        let clock = ManualClock()
        let peer = ScriptedPeer(raw("12 12 00 34"))
        let client = try await makeClient(peer, clock: clock)
        client.setName("cloudToken", for: 0x0012)
        let task = Task { try await withTaskExecutorPreference(client.eventLoop) { try await client.write(handle: 0x0012, value: [0x34]) } }
        await peer.waitForSent(1)
        clock.advance(by: .seconds(30))
        do { try await task.value; XCTFail("expected a timeout") } catch let e as GATTError {
            XCTAssertEqual(e.description, "timed out after 30 s waiting for Write Response on handle 0x0012 (cloudToken)")
        }
        XCTAssertTrue(peer.isClosed, "the bearer must close after an ATT timeout")
        peer.assertScriptDone()
    }

    /// A task cancelled before its write on the loop sends nothing: the write fails as cancelled.
    func testAWriteOnTheLoopOfACancelledTaskSendsNothing() async throws {
        let peer = ScriptedPeer(raw("0a 02 00", "0b 02"))
        let client = try await makeClient(peer)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await withTaskExecutorPreference(client.eventLoop) { try await client.write(handle: 0x0012, value: [0x33]) }
        }
        do { try await task.value; XCTFail("expected the write to fail") } catch let e as GATTError {
            guard case .cancelled = e else { return XCTFail("\(e)") }
        }
        let v = try await client.read(handle: 2)
        XCTAssertEqual(v, [2])
        XCTAssertEqual(peer.sent, [hex("0a 02 00")], "the cancelled task's write was sent")
        peer.assertScriptDone()
    }

    func testExchangeMTURequestFromThePeerIsAnsweredAndApplied() async throws {
        let peer = ScriptedPeer([.server(hex("02 f7 00"))] + [.client(hex("03 05 02"))])
        let client = try await makeClient(peer)
        await peer.waitForSent(1)
        XCTAssertEqual(client.mtu, 247)
        peer.assertScriptDone()
    }

    func testOtherPeerRequestsAreAnsweredRequestNotSupported() async throws {
        let peer = ScriptedPeer([.server(hex("0a 03 00")), .server(hex("12 05 00 01")), .server(hex("52 05 00 01")),
                                 .server(hex("3f 00"))]
                                + [.client(hex("01 0a 00 00 06")), .client(hex("01 12 00 00 06")), .client(hex("01 3f 00 00 06"))])
        let client = try await makeClient(peer)
        await peer.waitForSent(3)
        await peer.flush()
        let stats5 = await client.statistics
        XCTAssertEqual(stats5.peerRequestsAnswered, 3)
        peer.assertScriptDone()
    }

    func testIndicationIsConfirmedEvenWithoutASubscriberAndReachesTheCatchAll() async throws {
        let peer = ScriptedPeer([.server(hex("1d 21 00 09"))] + [.client(hex("1e"))])
        let client = try await makeClient(peer)
        await peer.waitForSent(1)
        var it = client.notifications.makeAsyncIterator()
        let n = try await it.next()
        XCTAssertEqual(n, GATTNotification(handle: 0x21, value: [9], kind: .indication))
        peer.assertScriptDone()
    }

    func testANotificationStreamOfItsOwnStartsWhenAskedAndOutlivesAnotherThatWasCancelled() async throws {
        let peer = ScriptedPeer(raw("0a 01 00", "1b 21 00 07", "0b 55") + raw("0a 01 00", "1b 21 00 08", "0b 55") + [.serverClose])
        let client = try await makeClient(peer)
        let first = try client.notificationStream()
        let cancelled = try client.notificationStream()
        let ended = Task { () -> Int in
            var n = 0
            do { for try await _ in cancelled { n += 1 } } catch {}
            return n
        }
        ended.cancel()
        _ = await ended.value
        _ = try await client.read(handle: 1)
        var it = first.makeAsyncIterator()
        let seven = try await it.next()
        XCTAssertEqual(seven, GATTNotification(handle: 0x21, value: [7], kind: .notification))
        let later = try client.notificationStream()
        _ = try await client.read(handle: 1)
        let eight = try await it.next()
        XCTAssertEqual(eight, GATTNotification(handle: 0x21, value: [8], kind: .notification), "a cancelled stream leaves the others")
        var laterIt = later.makeAsyncIterator()
        let laterFirst = try await laterIt.next()
        XCTAssertEqual(laterFirst?.value, [8], "a stream asked for later starts then")
        do {
            _ = try await it.next()
            XCTFail("the stream ends with the bearer")
        } catch let e as GATTError {
            guard case .disconnected(let d) = e else { return XCTFail("\(e)") }
            XCTAssertEqual(d.during, "the notification stream")
        }
        XCTAssertThrowsError(try client.notificationStream(), "none after the close")
    }

    func testAFinishedNotificationStreamLeavesTheFanOutAndEndsAfterWhatItHeld() async throws {
        let peer = ScriptedPeer(raw("0a 01 00", "1b 21 00 07", "0b 55") + raw("0a 01 00", "1b 21 00 08", "0b 55") + [.serverClose])
        let client = try await makeClient(peer)
        let stream = try client.notificationStream()
        XCTAssertEqual(client.engine.snapshot.notificationStreams, 1)
        _ = try await client.read(handle: 1)
        stream.finish()
        XCTAssertEqual(client.engine.snapshot.notificationStreams, 0, "the fan-out forgets a finished stream")
        _ = try await client.read(handle: 1)
        var it = stream.makeAsyncIterator()
        let held = try await it.next()
        XCTAssertEqual(held?.value, [7], "what it held before finish is still read")
        let after = try await it.next()
        XCTAssertNil(after, "then it ends: the value after finish did not reach it")
    }

    func testDisconnectEndsEveryWaiterAtOnceNamingTheOperationAndReason() async throws {
        let peer = ScriptedPeer(raw("0a 01 00") + raw("12 02 00 00 01"), capacity: 2)
        let client = try await makeClient(peer)
        client.setName("cloudToken", for: 0x0002)
        let (_, stream) = try await subscribeDirect(client, handle: 0x0040)
        let inFlight = Task { try await client.read(handle: 1) }
        await peer.waitForSent(1)
        let queued = Task { try await client.write(handle: 2, value: [0]) }
        try await waitUntil("a request queued behind the slot") { client.engine.snapshot.queuedRequests >= 1 }
        // Fill the socket: the capacity left is 1 (one slot request sent).
        try await client.writeWithoutResponse(handle: 0x0050, value: [1])
        let permit = Task { try await client.writeWithoutResponse(handle: 0x0050, value: [2]) }
        try await waitUntil("a write waiting for a send permit") { client.engine.snapshot.permitWaiters >= 1 }
        let streamEnd = Task { () -> GATTError? in
            do { for try await _ in stream {} } catch let e as GATTError { return e } catch { return .unsupported("\(error)") }
            return nil
        }
        peer.closeFromPeer()
        func expectDisconnect<T>(_ t: Task<T, any Error>, _ during: String) async {
            do { _ = try await t.value; XCTFail("\(during) did not fail") } catch let e as GATTError {
                XCTAssertEqual(e, .disconnected(GATTDisconnectedError(reason: "the peer closed the connection", during: during)))
            } catch { XCTFail("\(error)") }
        }
        await expectDisconnect(inFlight, "Read Request of handle 0x0001")
        await expectDisconnect(queued, "Write Request to handle 0x0002 (cloudToken)")
        await expectDisconnect(permit, "Write Command to handle 0x0050")
        let e = await streamEnd.value
        XCTAssertEqual(e, .disconnected(GATTDisconnectedError(reason: "the peer closed the connection",
                                                              during: "notifications of handle 0x0040")))
        do { _ = try await client.read(handle: 1); XCTFail() } catch let e {
            guard case .disconnected = e else { return XCTFail("\(e)") }
        }
    }

    func testCloseFailsWaitersAtOnce() async throws {
        let peer = ScriptedPeer(raw("0a 01 00"))
        let client = try await makeClient(peer)
        let op = Task { try await client.read(handle: 1) }
        await peer.waitForSent(1)
        client.close(reason: "test over")
        do { _ = try await op.value; XCTFail() } catch let e as GATTError {
            XCTAssertEqual(e.description, "disconnected during Read Request of handle 0x0001: closed by this host: test over")
        }
        XCTAssertTrue(peer.isClosed)
    }

    /// Subscribes by arming a stream directly (no CCCD write), for engine tests.
    func subscribeDirect(_ client: GATTClient, handle: UInt16) async throws -> (NotificationSink, GATTNotificationStream) {
        let (stream, sink) = try client.engine.addSubscriber(handle: handle)
        return (sink, stream)
    }
}

