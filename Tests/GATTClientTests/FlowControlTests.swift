import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Synchronization
import XCTest
@testable import GATTClient

/// Write without response with flow control (seed 004): FIFO permits, backpressure, cancellation, deadlines.
final class FlowControlTests: XCTestCase {
    func responder() -> ScriptedPeer {
        let p = ScriptedPeer(label: "sink", responder: { (_: [UInt8]) -> [[UInt8]] in [] })
        return p
    }

    func testFastPathSendsAtOnceWhenTheSocketHasRoom() async throws {
        let peer = responder()
        let client = try await makeClient(peer)
        for i in 0..<10 { try await client.writeWithoutResponse(handle: 0x20, value: [UInt8(i)]) }
        XCTAssertEqual(peer.sent, (0..<10).map { [0x52, 0x20, 0x00, UInt8($0)] })
        XCTAssertEqual(client.engine.snapshot.permitWaiters, 0)
    }

    func testWaitersGetPermitsInFIFOOrderWhenTheSocketDrains() async throws {
        let peer = ScriptedPeer([], capacity: 0)
        peer.strict = false
        let client = try await makeClient(peer)
        var tasks: [Task<Void, any Error>] = []
        for i in 0..<20 {
            tasks.append(Task { try await client.writeWithoutResponse(handle: 0x20, value: [UInt8(i)]) })
            try await waitUntil("write \(i) waiting for a send permit") { client.engine.snapshot.permitWaiters >= i + 1 }
        }
        XCTAssertEqual(peer.sent.count, 0)
        peer.grantWritable(5)
        await peer.waitForSent(5)
        await peer.flush()
        XCTAssertEqual(client.engine.snapshot.permitWaiters, 15)
        peer.grantWritable(100)
        for t in tasks { try await t.value }
        XCTAssertEqual(peer.sent, (0..<20).map { [0x52, 0x20, 0x00, UInt8($0)] }, "permits were not granted in FIFO order")
    }

    func testAWaitingWriterCanBeCancelledAndLeavesTheQueue() async throws {
        let peer = ScriptedPeer([], capacity: 0)
        peer.strict = false
        let client = try await makeClient(peer)
        let a = Task { try await client.writeWithoutResponse(handle: 0x20, value: [1]) }
        try await waitUntil("a write waiting for a send permit") { client.engine.snapshot.permitWaiters >= 1 }
        let b = Task { try await client.writeWithoutResponse(handle: 0x20, value: [2]) }
        try await waitUntil("two writes waiting for a send permit") { client.engine.snapshot.permitWaiters >= 2 }
        b.cancel()
        do { try await b.value; XCTFail() } catch let e as GATTError {
            XCTAssertEqual(e, .cancelled(operation: "Write Command to handle 0x0020"))
        }
        peer.grantWritable(10)
        try await a.value
        await peer.flush()
        XCTAssertEqual(peer.sent, [[0x52, 0x20, 0x00, 1]], "a cancelled write was sent")
    }

    func testPermitWaitHasANamedDeadline() async throws {
        let clock = ManualClock()
        let peer = ScriptedPeer([], capacity: 0)
        let client = try await makeClient(peer, clock: clock)
        client.setName("wifiSetSSID", for: 0x20)
        let a = Task { try await client.writeWithoutResponse(handle: 0x20, value: [1], timeout: .seconds(2)) }
        try await waitUntil("a write waiting for a send permit") { client.engine.snapshot.permitWaiters >= 1 }
        clock.advance(by: .milliseconds(1999))
        XCTAssertEqual(client.engine.snapshot.permitWaiters, 1)
        clock.advance(by: .milliseconds(1))
        do { try await a.value; XCTFail() } catch let e as GATTError {
            XCTAssertEqual(e.description, "timed out after 2 s waiting for a send permit for Write Command on handle 0x0020 (wifiSetSSID)")
        }
        XCTAssertEqual(client.engine.snapshot.pendingDeadlines, 0)
        XCTAssertFalse(client.isClosed, "a permit timeout is not an ATT timeout: the bearer stays open")
        peer.grantWritable(1)
        await peer.flush()
        XCTAssertEqual(peer.sent, [], "a timed-out write was sent")
    }

    func testManyConcurrentWritersEachKeepTheirOrderAndNothingIsLost() async throws {
        let peer = ScriptedPeer([], capacity: 3)
        peer.strict = false
        let client = try await makeClient(peer)
        let writers = 8, each = 200
        let refill = Task {
            // The "socket" drains a few PDUs each time the client waits for POLLOUT.
            while !Task.isCancelled {
                await peer.flush()
                peer.grantWritable(7)
                await Task.yield()
            }
        }
        // Ended on every path: a failed write below must not leave it spinning.
        defer { refill.cancel() }
        try await within(20) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<writers {
                    group.addTask {
                        for i in 0..<each {
                            try await client.writeWithoutResponse(handle: 0x20, value: [UInt8(w), UInt8(i & 0xFF), UInt8(i >> 8)])
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        refill.cancel()
        let sent = peer.sent
        XCTAssertEqual(sent.count, writers * each)
        for w in 0..<writers {
            let mine = sent.filter { $0[3] == UInt8(w) }.map { Int($0[4]) | Int($0[5]) << 8 }
            XCTAssertEqual(mine, Array(0..<each), "writer \(w) lost or reordered PDUs")
        }
    }
}

/// A transport whose socket is full until the test says otherwise, and whose next send can be held at a gate: lets
/// a test interleave the writable thread's flush of held answers with a new answer made on the reader thread.
final class GatedTransport: ATTTransport, @unchecked Sendable {
    // @unchecked: every stored property below `label` is guarded by `lock`.
    let label = "gated"
    private let lock = NSLock()
    private var full = true
    private var gateArmed = false
    private var sentPDUs: [[UInt8]] = []
    private var writable: [@Sendable () -> Void] = []
    private(set) var sink: (any ATTTransportSink)?
    /// Signalled when a send reaches the armed gate; the send then waits for `openGate`.
    let atGate = DispatchSemaphore(value: 0)
    private let gate = DispatchSemaphore(value: 0)
    /// Signalled after every PDU that was sent.
    let sentOne = DispatchSemaphore(value: 0)

    func start(_ sink: any ATTTransportSink) {
        lock.lock()
        self.sink = sink
        lock.unlock()
    }

    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        lock.lock()
        if full {
            lock.unlock()
            return .wouldBlock
        }
        let waitAtGate = gateArmed
        gateArmed = false
        lock.unlock()
        if waitAtGate {
            atGate.signal()
            gate.wait()
        }
        lock.lock()
        sentPDUs.append(Array(pdu))
        lock.unlock()
        sentOne.signal()
        return .sent
    }

    func whenWritable(_ callback: @escaping @Sendable () -> Void) {
        lock.lock()
        writable.append(callback)
        lock.unlock()
    }

    func close(reason: String) {}

    /// The socket has room again, the next send stops at the gate, and the writable callbacks run on a thread of
    /// their own (the bearer's writable thread).
    func drainWithGateOnAnotherThread() {
        lock.lock()
        full = false
        gateArmed = true
        let callbacks = writable
        writable = []
        lock.unlock()
        Thread { for c in callbacks { c() } }.start()
    }

    func openGate() { gate.signal() }

    var sent: [[UInt8]] {
        lock.lock()
        defer { lock.unlock() }
        return sentPDUs
    }
}

/// Answers to the peer leave in the order they were made, also when the writable thread flushes the held ones while
/// the reader makes a new one.
final class AnswerOrderTests: XCTestCase {
    func testAnAnswerMadeWhileTheWritableThreadFlushesHeldOnesGoesOutAfterThem() async throws {
        let transport = GatedTransport()
        let client = try await GATTClient.connect(transport: transport)
        let sink = try XCTUnwrap(transport.sink)
        // The socket is full: the answer to the peer's Read Request is held, and POLLOUT is awaited.
        sink.transport(didReceive: [0x0A, 0x03, 0x00])
        XCTAssertEqual(client.engine.snapshot.queuedAnswers, 1)
        // POLLOUT: the writable thread takes the held answer and is stopped at the gate while sending it.
        transport.drainWithGateOnAnotherThread()
        XCTAssertEqual(transport.atGate.wait(timeout: .now() + 10), .success)
        // Meanwhile a Write Request arrives (from another thread: the loop is busy in the send, so its routing waits
        // for the loop): its answer must queue behind the one being sent.
        let delivered = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            sink.transport(didReceive: [0x12, 0x05, 0x00, 0x01])
            delivered.signal()
        }
        transport.openGate()
        XCTAssertEqual(delivered.wait(timeout: .now() + 10), .success)
        for _ in 0..<2 { XCTAssertEqual(transport.sentOne.wait(timeout: .now() + 10), .success) }
        XCTAssertEqual(transport.sent, [[0x01, 0x0A, 0x00, 0x00, 0x06], [0x01, 0x12, 0x00, 0x00, 0x06]],
                       "the answers left in the order the requests came")
        client.close()
    }
}
