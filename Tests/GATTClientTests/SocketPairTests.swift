import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Dispatch
import Synchronization
import XCTest
@testable import GATTClient

/// A scripted peer on the far end of a real AF_UNIX SOCK_SEQPACKET socketpair (the bearer helper's `ATTBearer`),
/// in the style of BlueZ's unit/test-gatt.c: each client PDU must match the next expected one byte for byte, then
/// the peer sends the replies that follow it in the script.
final class SocketScriptPeer: ATTTransportSink {
    struct State {
        var steps: [Step]
        var next = 0
        var failures: [String] = []
        var received: [[UInt8]] = []
        var closed: TransportError?
        var doneWaiters: [OnceBox<Void>] = []
        var receivedWaiters: [(Int, OnceBox<Void>)] = []
    }
    let bearer: ATTBearer
    let state: Lock<State>
    /// When set, the reader thread waits on it before handling each PDU (a slow peer that lets the socket fill).
    let gate: DispatchSemaphore?
    let gateOpen = Atomic<Bool>(true)

    /// When set, replies go out this long after the client PDU that triggers them (network latency).
    let replyDelay: DispatchTimeInterval?
    /// While true, no reply goes out until `releaseReplies()` (a peer that answers when the test says, not after a time).
    let repliesHeld: Atomic<Bool>

    init(bearer: ATTBearer, steps: [Step], gated: Bool = false, replyDelay: DispatchTimeInterval? = nil, holdingReplies: Bool = false) {
        self.bearer = bearer
        self.replyDelay = replyDelay
        self.repliesHeld = Atomic(holdingReplies)
        self.state = Lock(State(steps: steps))
        self.gate = gated ? DispatchSemaphore(value: 0) : nil
        if gated { gateOpen.store(false, ordering: .sequentiallyConsistent) }
    }

    func start() {
        bearer.start(self)
        sendReplies()
    }

    /// Lets a gated peer read again.
    func openGate() {
        gateOpen.store(true, ordering: .sequentiallyConsistent)
        gate?.signal()
    }

    /// Sends the replies held so far, and from now on replies as they fall due.
    func releaseReplies() {
        repliesHeld.store(false, ordering: .sequentiallyConsistent)
        sendReplies()
    }

    private func sendReplies() {
        guard !repliesHeld.load(ordering: .sequentiallyConsistent) else { return }
        let replies: [[UInt8]] = state.withLock { s in
            var out: [[UInt8]] = []
            while s.next < s.steps.count {
                guard case .server(let pdu) = s.steps[s.next] else { break }
                out.append(pdu)
                s.next += 1
            }
            return out
        }
        for r in replies {
            let result = r.withUnsafeBytes { b in Result { () throws(TransportError) in try bearer.trySend(b) } }
            if case .failure(let e) = result { state.withLock { $0.failures.append("peer could not send [\(show(r))]: \(e)") } }
        }
        let done: [OnceBox<Void>] = state.withLock { s in
            guard s.next >= s.steps.count else { return [] }
            defer { s.doneWaiters = [] }
            return s.doneWaiters
        }
        for d in done { d.finish(.success(())) }
    }

    func transport(didReceive pdu: [UInt8]) {
        if let gate, !gateOpen.load(ordering: .sequentiallyConsistent) {
            gate.wait()
        }
        let ready: [OnceBox<Void>] = state.withLock { s in
            s.received.append(pdu)
            var ready: [OnceBox<Void>] = []
            s.receivedWaiters.removeAll { w in
                if s.received.count >= w.0 { ready.append(w.1); return true }
                return false
            }
            guard s.next < s.steps.count else {
                if !s.steps.isEmpty { s.failures.append("unexpected client PDU [\(show(pdu))] after the end of the script") }
                return ready
            }
            guard case .client(let expected) = s.steps[s.next] else {
                s.failures.append("step \(s.next): client sent [\(show(pdu))] before the peer's reply")
                return ready
            }
            if expected != pdu { s.failures.append("step \(s.next): expected client PDU [\(show(expected))], got [\(show(pdu))]") }
            s.next += 1
            return ready
        }
        for r in ready { r.finish(.success(())) }
        if let replyDelay {
            DispatchQueue.global().asyncAfter(deadline: .now() + replyDelay) { [self] in sendReplies() }
        } else {
            sendReplies()
        }
    }

    func transport(didCloseWith reason: TransportError) {
        state.withLock { $0.closed = reason }
    }

    func waitUntilScriptDone() async {
        let once = OnceBox<Void>()
        let done = state.withLock { s -> Bool in
            if s.next >= s.steps.count { return true }
            s.doneWaiters.append(once)
            return false
        }
        if !done { try? await once.value() }
    }

    func waitForReceived(_ n: Int) async {
        let once = OnceBox<Void>()
        let done = state.withLock { s -> Bool in
            if s.received.count >= n { return true }
            s.receivedWaiters.append((n, once))
            return false
        }
        if !done { try? await once.value() }
    }

    var received: [[UInt8]] { state.withLock { $0.received } }

    func assertScriptDone(file: StaticString = #filePath, line: UInt = #line) {
        let (failures, next, count) = state.withLock { ($0.failures, $0.next, $0.steps.count) }
        for f in failures { XCTFail(f, file: file, line: line) }
        if next < count { XCTFail("script not finished: \(count - next) steps left", file: file, line: line) }
    }
}

final class SocketPairTests: XCTestCase {
    func makePair(_ steps: [Step], gated: Bool = false, clock: any GATTClock = MonotonicClock(),
                  configure: (inout GATTClient.Configuration) -> Void = { _ in }) async throws -> (GATTClient, SocketScriptPeer) {
        let (a, b) = try ATTBearer.pair()
        let peer = SocketScriptPeer(bearer: b, steps: steps, gated: gated)
        var config = GATTClient.Configuration()
        config.clock = clock
        configure(&config)
        let client = try await GATTClient.connect(transport: a, configuration: config)
        peer.start()
        return (client, peer)
    }

    func testMTUDiscoveryReadWriteOverASocketPair() async throws {
        let (client, peer) = try await makePair(
            raw("02 05 02", "03 f7 00")
            + raw("10 01 00 ff ff 00 28", "11 06 01 00 05 00 00 18")
            + raw("10 06 00 ff ff 00 28", "01 10 06 00 0a")
            + raw("0a 03 00", "0b 41 42")
            + raw("12 03 00 43", "13"))
        try await within {
            let m = try await client.exchangeMTU()
            XCTAssertEqual(m, 247)
            let s = try await client.discoverAllPrimaryServices()
            XCTAssertEqual(s.map(\.description), ["0x0001-0x0005 1800"])
            let v = try await client.read(handle: 3)
            XCTAssertEqual(v, [0x41, 0x42])
            try await client.write(handle: 3, value: [0x43])
        }
        peer.assertScriptDone()
        client.close()
    }

    /// Seed 001 over a real socket: the notification comes before the Write Response of the write that caused it.
    func testNotificationBeforeWriteResponseOverASocketPair() async throws {
        let (client, peer) = try await makePair(
            raw("12 2e 00 01 00", "13") + raw("0a 2d 00", "0b 00")
            + raw("12 12 00 32", "1b 2d 00 0b", "13"))
        try await within {
            let (v, stream) = try await client.subscribe(valueHandle: 0x2D, cccdHandle: 0x2E)
            XCTAssertEqual(v, [0])
            try await client.write(handle: 0x12, value: [0x32])
            var it = stream.makeAsyncIterator()
            let n = try await it.next()
            XCTAssertEqual(n?.value, [11])
        }
        peer.assertScriptDone()
        client.close()
    }

    func testIndicationIsConfirmedOverASocketPair() async throws {
        let (client, peer) = try await makePair([.server(hex("1d 21 00 07")), .client(hex("1e"))])
        try await within { await peer.waitUntilScriptDone() }
        var it = client.notifications.makeAsyncIterator()
        let n = try await it.next()
        XCTAssertEqual(n?.kind, .indication)
        peer.assertScriptDone()
        client.close()
    }

    func testPeerClosingFailsTheRequestInFlight() async throws {
        let (client, peer) = try await makePair(raw("0a 03 00"))
        let op = Task { try await client.read(handle: 3) }
        await peer.waitUntilScriptDone()
        peer.bearer.close(reason: "peer test")
        do {
            _ = try await within { try await op.value }
            XCTFail()
        } catch let e as GATTError {
            guard case .disconnected(let d) = e else { return XCTFail("\(e)") }
            XCTAssertEqual(d.during, "Read Request of handle 0x0003")
            XCTAssertEqual(d.reason, "the peer closed the connection")
        }
    }

    /// Seed 004 over a real socket: a slow peer lets the socket fill; writes without response queue for permits,
    /// nothing is dropped or cut, and every PDU arrives in FIFO order once the peer reads again.
    func testWriteWithoutResponseBackpressureDeliversEveryPDUInOrder() async throws {
        let (client, peer) = try await makePair([], gated: true)
        let total = 3000
        let value = [UInt8](repeating: 0xAB, count: 18)
        let writer = Task {
            for i in 0..<total {
                var v = value
                v[0] = UInt8(i & 0xFF)
                v[1] = UInt8(i >> 8)
                try await client.writeWithoutResponse(handle: 0x0012, value: v, timeout: .seconds(20))
            }
        }
        // Wait until the socket is full and writes queue for a permit, then let the peer read.
        try await waitUntil("the socket full or a write waiting for a send permit") {
            let s = client.engine.snapshot
            return s.sendBlocked || s.permitWaiters > 0
        }
        peer.openGate()
        try await within(20) { try await writer.value }
        await peer.waitForReceived(total)
        let got = peer.received
        XCTAssertEqual(got.count, total)
        for (i, pdu) in got.enumerated() {
            XCTAssertEqual(pdu.count, 21)
            XCTAssertEqual(Int(pdu[3]) | Int(pdu[4]) << 8, i, "PDU \(i) out of order")
            if pdu.count != 21 || Int(pdu[3]) | Int(pdu[4]) << 8 != i { break }
        }
        client.close()
    }
}

final class EventLoopExecutorTests: XCTestCase {
    func testCallersOnTheEventLoopContinueOnItsThread() async throws {
        let (a, b) = try ATTBearer.pair()
        // The peer first sends an unsolicited Handle Value Confirmation: the engine reports it from the reader
        // thread, which tells the test that thread's id.
        let readerThread = Lock<UInt?>(nil)
        // Replies come 20 ms late, so that each caller has surely suspended before its response arrives (a response
        // that wins the race lets the caller go on without suspending at all: no hop either).
        let peer = SocketScriptPeer(bearer: b, steps: [.server(hex("1e"))] + raw("0a 03 00", "0b 01")
                                    + raw("0a 04 00", "0b 02") + raw("12 06 00 01", "13") + raw("12 06 00 02", "13")
                                    + raw("0a 05 00", "0b 03"), replyDelay: .milliseconds(20))
        var config = GATTClient.Configuration()
        config.events = { _ in readerThread.withLock { $0 = UInt(pthread_self()) } }
        let client = try await GATTClient.connect(transport: a, configuration: config)
        peer.start()
        let threads = try await within {
            try await withTaskExecutorPreference(client.eventLoop) {
                var threads: [UInt] = []
                _ = try await client.read(handle: 3)
                threads.append(UInt(pthread_self()))
                _ = try await client.read(handle: 4)
                threads.append(UInt(pthread_self()))
                return threads
            }
        }
        // Writes continue on the loop's thread too.
        let writeThreads = try await within {
            try await withTaskExecutorPreference(client.eventLoop) {
                var threads: [UInt] = []
                for v: UInt8 in [1, 2] {
                    try await client.write(handle: 6, value: [v])
                    threads.append(UInt(pthread_self()))
                }
                return threads
            }
        }
        let reader = try XCTUnwrap(readerThread.withLock { $0 })
        XCTAssertEqual(threads, [reader, reader], "the caller did not continue on the reader thread")
        XCTAssertEqual(writeThreads, [reader, reader], "a writer did not continue on the loop's thread")
        let v = try await client.read(handle: 5)
        XCTAssertEqual(v, [3])
        XCTAssertNotEqual(UInt(pthread_self()), reader, "a caller without the preference ran on the reader thread")
        peer.assertScriptDone()
        client.close()
    }
}
