import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Synchronization
import XCTest
@testable import GATTClient

/// Requests from a task that prefers the link's event loop, on a real socket bearer: the task submits on the loop's
/// thread and continues there after each response, and every other event (a notification, a cancellation, the
/// peer's close, a loan of the socket, the ATT timeout on the loop's timerfd) still reaches it.
final class LoopTaskTests: XCTestCase {
    /// A client on one end of a socketpair and a scripted peer on the other; `b` sends what the script does not.
    func makePair(_ steps: [Step], timeout: Duration = .seconds(30))
        async throws -> (client: GATTClient, peer: SocketScriptPeer, a: ATTBearer, b: ATTBearer) {
        let (a, b) = try ATTBearer.pair()
        let peer = SocketScriptPeer(bearer: b, steps: steps)
        var config = GATTClient.Configuration()
        config.transactionTimeout = timeout
        let client = try await GATTClient.connect(transport: a, configuration: config)
        peer.start()
        return (client, peer, a, b)
    }

    func send(_ b: ATTBearer, _ pdu: String) throws {
        let bytes = hex(pdu)
        let sent = try bytes.withUnsafeBytes { p throws(TransportError) in try b.trySend(p) }
        XCTAssertEqual(sent, .sent)
    }

    /// Every write of a task that prefers the loop continues on the loop's thread; a notification between two of
    /// them reaches its stream.
    func testWritesOnTheLoopContinueThereAndNotificationsStillArrive() async throws {
        var steps = raw("12 12 00 01", "13")
        steps += raw("12 12 00 02", "1b 15 00 aa", "13")
        for v in 3...5 { steps += raw("12 12 00 0\(v)", "13") }
        let (client, peer, _, _) = try await makePair(steps)
        let loop = client.eventLoop
        let onLoop = try await within {
            try await withTaskExecutorPreference(loop) {
                var onLoop: [Bool] = []
                for v: UInt8 in 1...5 {
                    try await client.write(handle: 0x0012, value: [v])
                    onLoop.append(loop.inEventLoop)
                }
                return onLoop
            }
        }
        XCTAssertEqual(onLoop, [true, true, true, true, true], "a write's caller did not continue on the loop's thread")
        var it = client.notifications.makeAsyncIterator()
        let n = try await it.next()
        XCTAssertEqual(n, GATTNotification(handle: 0x15, value: [0xaa], kind: .notification),
                       "the notification did not reach the stream")
        peer.assertScriptDone()
        client.close()
    }

    /// A connection's public async methods run on its loop even when called from a task of the global pool (no
    /// executor preference): a subscribe (its stream armed in the loop's state), a read and a write then block no
    /// thread in `loop.sync`, and each caller is back on its own executor after.
    func testPublicAsyncMethodsCalledFromThePoolRunOnTheLoopWithoutBlockingInSync() async throws {
        var steps = raw("12 13 00 01 00", "13")     // the CCCD write of the subscription (Part G §4.12.3)
        steps += raw("0a 12 00", "0b 07")           // the value read after it
        steps += raw("12 12 00 05", "13")
        steps += raw("0a 02 00", "0b 09")
        let (client, peer, _, _) = try await makePair(steps)
        let loop = client.eventLoop
        let before = loop.blockedCallers
        let outcome = try await within {
            try await Task.detached { () async throws -> (value: [UInt8]?, read: [UInt8], onLoopAfter: Bool) in
                let (value, _) = try await client.subscribe(valueHandle: 0x0012, cccdHandle: 0x0013, mode: .notify)
                try await client.write(handle: 0x0012, value: [5])
                let read = try await client.read(handle: 2)
                return (value, read, loop.inEventLoop)
            }.value
        }
        XCTAssertEqual(outcome.value, [7])
        XCTAssertEqual(outcome.read, [9])
        XCTAssertFalse(outcome.onLoopAfter, "the pool task should be back on the pool after the calls")
        XCTAssertEqual(loop.blockedCallers - before, 0, "a public async method blocked a pool thread in loop.sync")
        peer.assertScriptDone()
        client.close()
    }

    /// A peer that never answers: cancelling the task releases the write at once;
    /// the slot keeps the request until its late response (§3.3.2), and the next request goes out after it.
    func testCancellingAWriteOnTheLoopReleasesItAtOnce() async throws {
        let (client, peer, _, b) = try await makePair(raw("12 12 00 01", "13") + raw("12 12 00 02") + raw("0a 02 00", "0b 07"))
        let task = Task {
            try await withTaskExecutorPreference(client.eventLoop) {
                try await client.write(handle: 0x0012, value: [1])
                try await client.write(handle: 0x0012, value: [2])   // never answered in time
            }
        }
        await peer.waitForReceived(2)
        try await waitUntil("the request in the slot written") { client.engine.snapshot.inFlightWritten }
        try await assertCancellingReleasesTheWriteInFlight(task)
        let read = Task { try await client.read(handle: 2) }
        try await waitUntil("a request queued behind the slot") { client.engine.snapshot.queuedRequests >= 1 }
        try send(b, "13")   // the late Write Response: dropped, then the read goes out
        let v = try await within { try await read.value }
        XCTAssertEqual(v, [7])
        peer.assertScriptDone()
        client.close()
    }

    /// The peer closes while the task waits on the loop: the write fails as a disconnect and the bearer ends once.
    func testThePeerClosingWhileAWriteWaitsOnTheLoopFailsItAsADisconnect() async throws {
        let (client, peer, _, b) = try await makePair(raw("12 12 00 01", "13") + raw("12 12 00 02"))
        let task = Task {
            try await withTaskExecutorPreference(client.eventLoop) {
                try await client.write(handle: 0x0012, value: [1])
                try await client.write(handle: 0x0012, value: [2])
            }
        }
        await peer.waitForReceived(2)
        b.close(reason: "the test's peer leaves")
        do {
            try await within(5, "the write's failure") { try await task.value }
            XCTFail("expected the write to fail")
        } catch let e as GATTError {
            guard case .disconnected(let d) = e else { return XCTFail("\(e)") }
            XCTAssertTrue(d.during.contains("Write Request to handle 0x0012"), d.description)
        }
        try await waitUntil("the client closed") { client.isClosed }
        peer.assertScriptDone()
    }

    /// A loan of the socket while the task's write waits: the loan runs on the loop's thread, and the write
    /// completes with the response read after it.
    func testALoanWhileAWriteWaitsRunsAndTheWriteCompletes() async throws {
        let (client, peer, a, b) = try await makePair(raw("12 12 00 01", "13") + raw("12 12 00 02"))
        let loaned = Lock<[Int32?]>([])
        let task = Task {
            try await withTaskExecutorPreference(client.eventLoop) {
                try await client.write(handle: 0x0012, value: [1])
                try await client.write(handle: 0x0012, value: [2])
            }
        }
        await peer.waitForReceived(2)
        try await waitUntil("the request in the slot written") { client.engine.snapshot.inFlightWritten }
        a.lend { fd in loaned.withLock { $0.append(fd) } }
        try await waitUntil("the loan", within: 5) { !loaned.withLock({ $0.isEmpty }) }
        XCTAssertNotNil(loaned.withLock { $0.first ?? nil }, "the loan got no socket")
        XCTAssertEqual(client.engine.snapshot.inFlightWritten, true, "the write finished before the loan")
        try send(b, "13")
        try await within(5, "the write after the loan") { try await task.value }
        peer.assertScriptDone()
        client.close()
    }

    /// The ATT timeout (the loop's timerfd) ends the wait, naming the Write Response it waited for; the bearer closes.
    func testTheLoopsTimerEndsAWriteWithTheATTTimeout() async throws {
        let (client, peer, _, _) = try await makePair(raw("12 12 00 01", "13") + raw("12 12 00 02"), timeout: .milliseconds(300))
        client.setName("cloudToken", for: 0x0012)
        let task = Task {
            try await withTaskExecutorPreference(client.eventLoop) {
                try await client.write(handle: 0x0012, value: [1])
                try await client.write(handle: 0x0012, value: [2])
            }
        }
        do {
            try await within(5, "the ATT timeout") { try await task.value }
            XCTFail("expected a timeout")
        } catch let e as GATTError {
            XCTAssertEqual(e.description, "timed out after 300 ms waiting for Write Response on handle 0x0012 (cloudToken)")
        }
        XCTAssertTrue(client.isClosed, "the bearer must close after an ATT timeout")
        peer.assertScriptDone()
    }
}
