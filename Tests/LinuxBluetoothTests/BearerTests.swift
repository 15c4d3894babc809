import TestSupport
import Dispatch
import Foundation
import Synchronization
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

/// The socket bearer over socketpairs and AF_UNIX listeners: delivery, truncation, backpressure, close, errors.
final class BearerTests: XCTestCase {
    func testSocketPairDeliversWholePDUsInOrderOnOneThread() throws {
        let (a, b) = try ATTBearer.pair()
        let sinkA = RecordingSink(), sinkB = RecordingSink()
        a.start(sinkA)
        b.start(sinkB)
        var sent: [[UInt8]] = []
        for i in 0..<200 {
            let pdu = [UInt8(0x52)] + [UInt8](repeating: UInt8(i & 0xFF), count: 1 + (i * 7) % 516)
            sent.append(pdu)
            XCTAssertEqual(try send(a, pdu), .sent)
            if i % 16 == 15 { sinkB.waitForPDUs(i + 1) } // stay inside the socket buffer
        }
        sinkB.waitForPDUs(200)
        XCTAssertEqual(sinkB.pdus, sent)
        XCTAssertEqual(sinkB.threadNames, ["att-bearer"], "every PDU arrives on the bearer's one reader thread")
        // And the other way.
        XCTAssertEqual(try send(b, [0x1B, 0x03, 0x00, 0xAA]), .sent)
        sinkA.waitForPDUs(1)
        XCTAssertEqual(sinkA.pdus, [[0x1B, 0x03, 0x00, 0xAA]])
        a.close(reason: "test done")
        XCTAssertEqual(sinkA.waitForClose(), .closedLocally(reason: "test done"))
        XCTAssertEqual(sinkB.waitForClose(), .closedByPeer)
    }

    func testMaximumMTUPDUCrossesWhole() throws {
        let (a, b) = try ATTBearer.pair()
        let sink = RecordingSink()
        b.start(sink)
        let pdu = [UInt8(0x12), 0x03, 0x00] + (0..<514).map { UInt8($0 & 0xFF) } // 517 bytes
        XCTAssertEqual(try send(a, pdu), .sent)
        sink.waitForPDUs(1)
        XCTAssertEqual(sink.pdus.first, pdu)
        XCTAssertGreaterThanOrEqual(b.receiveBufferSize, 1024)
        a.close(reason: "done")
        sink.waitForClose()
    }

    func testTruncatedDatagramIsAnErrorNotSilentLoss() throws {
        let (a, b) = try ATTBearer.pair()
        let sink = RecordingSink()
        XCTAssertEqual(try send(a, [0x52, 0x01, 0x00]), .sent)
        XCTAssertEqual(try send(a, [UInt8](repeating: 0x77, count: 1500)), .sent)
        b.start(sink)
        let reason = sink.waitForClose()
        XCTAssertEqual(sink.pdus, [[0x52, 0x01, 0x00]], "the PDU before the oversized one arrives whole")
        XCTAssertEqual(reason, .truncated(received: 1500, bufferSize: 1024))
        XCTAssertEqual(reason?.description, "received a 1500-byte PDU, larger than the 1024-byte receive buffer (dropped as truncated)")
        XCTAssertEqual(sink.closes.count, 1)
        a.close(reason: "done")
    }

    func testFullSendBufferIsWouldBlockAndWhenWritableFiresAfterDrain() throws {
        let (a, b) = try ATTBearer.pair()
        let sinkA = RecordingSink()
        a.start(sinkA)
        try a.setSendBufferSize(4096)
        let pdu = [UInt8](repeating: 0x52, count: 200)
        var sentCount = 0
        while try send(a, pdu) == .sent {
            sentCount += 1
            XCTAssertLessThan(sentCount, 100_000, "the send buffer never filled")
        }
        XCTAssertGreaterThan(sentCount, 0)
        XCTAssertEqual(try send(a, pdu), .wouldBlock, "still full: nothing was drained")
        let writable = DispatchSemaphore(value: 0)
        let fired = Atomic<Int>(0)
        a.whenWritable {
            fired.add(1, ordering: .relaxed)
            writable.signal()
        }
        // Nothing drains yet: the callback must not fire.
        XCTAssertEqual(writable.wait(timeout: .now() + 0.2), .timedOut)
        let sinkB = RecordingSink()
        b.start(sinkB)
        XCTAssertEqual(writable.wait(timeout: .now() + 10), .success)
        sinkB.waitForPDUs(sentCount)
        XCTAssertEqual(fired.load(ordering: .relaxed), 1, "one-shot")
        XCTAssertEqual(try send(a, pdu), .sent)
        sinkB.waitForPDUs(sentCount + 1)
        a.close(reason: "done")
        sinkB.waitForClose()
    }

    func testPeerCloseAfterQueuedDataDeliversDataThenCloseOnce() throws {
        let (a, b) = try ATTBearer.pair()
        for i in 0..<5 { XCTAssertEqual(try send(a, [0x1B, UInt8(i), 0x00]), .sent) }
        a.close(reason: "bye")
        let sink = RecordingSink()
        b.start(sink)
        XCTAssertEqual(sink.waitForClose(), .closedByPeer)
        XCTAssertEqual(sink.pdus.count, 5)
        XCTAssertEqual(sink.closes, [.closedByPeer])
        XCTAssertEqual(TransportError.closedByPeer.description, "the peer closed the connection")
    }

    func testCloseBeforeStartStillReportsOnceAndSendFails() throws {
        let (a, b) = try ATTBearer.pair()
        a.close(reason: "never used")
        a.close(reason: "twice")
        XCTAssertThrowsError(try send(a, [0x0A, 0x01, 0x00])) { error in
            XCTAssertEqual(error as? TransportError, .closedLocally(reason: "never used"))
        }
        let sink = RecordingSink()
        a.start(sink)
        XCTAssertEqual(sink.waitForClose(), .closedLocally(reason: "never used"))
        XCTAssertEqual(sink.closes.count, 1)
        let fired = DispatchSemaphore(value: 0)
        a.whenWritable { fired.signal() }
        XCTAssertEqual(fired.wait(timeout: .now() + 1), .success, "a closed bearer wakes writers at once")
        b.close(reason: "done")
    }

    func testWaiterRegisteredBeforeStartWakesOnClose() throws {
        let (a, b) = try ATTBearer.pair()
        let woke = DispatchSemaphore(value: 0)
        a.whenWritable { woke.signal() }
        a.close(reason: "never started")
        XCTAssertEqual(woke.wait(timeout: .now() + 5), .success)
        b.close(reason: "done")
    }

    func testWhenWritableWaiterWakesOnClose() throws {
        let (a, b) = try ATTBearer.pair()
        a.start(RecordingSink())
        try a.setSendBufferSize(4096)
        while try send(a, [UInt8](repeating: 1, count: 300)) == .sent {}
        let woke = DispatchSemaphore(value: 0)
        a.whenWritable { woke.signal() }
        a.close(reason: "shutting down")
        XCTAssertEqual(woke.wait(timeout: .now() + 10), .success)
        b.close(reason: "done")
    }

    func testUnixListenerAcceptsAndBearersEchoBothWays() throws {
        let path = temporarySocketPath("echo")
        let listener = try ATTBearerListener.unix(path: path)
        XCTAssertEqual(listener.label, "unix:\(path)")
        let accepted = Lock<ATTBearer?>(nil)
        let acceptedSignal = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            if let b = try? listener.accept(timeout: 10) {
                // Echo every PDU back from the server side.
                b.start(RecordingSink(onPDU: { pdu in _ = try? send(b, pdu) }))
                accepted.withLock { $0 = b }
            }
            acceptedSignal.signal()
        }
        let client = try ATTBearer.connect(to: BearerTarget(parsing: "unix:\(path)"))
        XCTAssertEqual(client.label, "unix:\(path)")
        let sink = RecordingSink()
        client.start(sink)
        XCTAssertEqual(acceptedSignal.wait(timeout: .now() + 10), .success)
        for i in 0..<50 { XCTAssertEqual(try send(client, [0x12, UInt8(i), 0x00, 0xEE]), .sent) }
        sink.waitForPDUs(50)
        XCTAssertEqual(sink.pdus.map { $0[1] }, (0..<50).map { UInt8($0) })
        client.close(reason: "done")
        sink.waitForClose()
        accepted.withLock { $0?.close(reason: "done") }
        listener.close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "closing the listener removes the socket file")
    }

    func testListenerReplacesStaleSocketFileAndRefusesLiveOne() throws {
        let path = temporarySocketPath("stale")
        let first = try ATTBearerListener.unix(path: path)
        XCTAssertThrowsError(try ATTBearerListener.unix(path: path)) { error in
            guard case .socket(let e)? = error as? TransportError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.errnoName, "EADDRINUSE")
            XCTAssertTrue(e.description.contains("another process already listens at \(path)"), e.description)
        }
        first.close()
        // A stale file: bound, never listened, closed without unlink.
        let fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { p in
            for (i, c) in path.utf8.enumerated() { p[i] = c }
        }
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        XCTAssertEqual(bound, 0)
        close(fd)
        XCTAssertThrowsError(try ATTBearer.connect(unixPath: path)) { error in
            guard case .socket(let e)? = error as? TransportError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.errnoName, "ECONNREFUSED")
            XCTAssertEqual(e.syscall, "connect")
            XCTAssertEqual(e.description, "connecting to unix:\(path): connect failed with ECONNREFUSED (Connection refused): \(path) exists but nobody listens on it: start the simulator (or listener) again")
        }
        let second = try ATTBearerListener.unix(path: path)
        second.close()
    }

    func testListenerNeverRemovesAFileThatIsNotASocket() throws {
        let path = temporarySocketPath("regular")
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        XCTAssertThrowsError(try ATTBearerListener.unix(path: path)) { error in
            guard case .socket(let e)? = error as? TransportError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.errnoName, "EADDRINUSE")
            XCTAssertEqual(e.advice, "\(path) exists and is not a socket: choose another path (it is left untouched)")
        }
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "keep me")
    }

    func testConnectToMissingPathSaysWhatToDo() {
        let path = temporarySocketPath("missing")
        XCTAssertThrowsError(try ATTBearer.connect(to: .unix(path: path))) { error in
            guard case .socket(let e)? = error as? TransportError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.errnoName, "ENOENT")
            XCTAssertEqual(e.errnoMeaning, "No such file or directory")
            XCTAssertTrue(e.description.hasSuffix("nothing exists at \(path): start the simulator (or listener) first"), e.description)
        }
    }

    func testAcceptTimesOutAndCloseWakesAccept() throws {
        let listener = try ATTBearerListener.unix(path: temporarySocketPath("timeout"))
        XCTAssertThrowsError(try listener.accept(timeout: 0.05)) { error in
            guard case .connectTimedOut? = error as? TransportError else { return XCTFail("\(error)") }
        }
        let done = DispatchSemaphore(value: 0)
        let result = Lock<TransportError?>(nil)
        DispatchQueue.global().async {
            do { _ = try listener.accept() } catch { result.withLock { $0 = error as? TransportError } }
            done.signal()
        }
        // Close from this thread: whether accept already waits in poll (the eventfd wakes it) or has not
        // started yet (it sees the closed flag), it ends with closedLocally.
        listener.close()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        guard case .closedLocally? = result.withLock({ $0 }) else { return XCTFail("accept should end with closedLocally") }
    }

    func testSendAfterPeerClosedIsASocketErrorWithName() throws {
        let (a, b) = try ATTBearer.pair()
        let sink = RecordingSink()
        a.start(sink)
        b.close(reason: "gone")
        sink.waitForClose()
        // a's reader has closed a's socket: trySend reports the close reason.
        XCTAssertThrowsError(try send(a, [0x52, 0x01, 0x00])) { error in
            XCTAssertEqual(error as? TransportError, .closedByPeer)
        }
    }

    func testNoFileDescriptorLeaksOver1000Cycles() throws {
        // Warm up anything lazily opened (Foundation, Dispatch) before counting.
        do {
            let (a, b) = try ATTBearer.pair()
            let s = RecordingSink()
            a.start(s)
            b.close(reason: "warm-up")
            s.waitForClose()
            a.close(reason: "warm-up")
        }
        XCTAssertTrue(EventLoop.waitForStoppingLoops(seconds: 10))
        let liveBefore = EventLoop.liveLoops
        let before = openFileDescriptorTable()
        let path = temporarySocketPath("leak")
        for i in 0..<1000 {
            let (a, b) = try ATTBearer.pair()
            let sa = RecordingSink(), sb = RecordingSink()
            a.start(sa)
            if i % 2 == 0 { b.start(sb) }
            XCTAssertEqual(try send(a, [0x0A, 0x01, 0x00]), .sent)
            a.close(reason: "cycle")
            sa.waitForClose()
            if i % 2 == 0 { sb.waitForClose() } else { b.close(reason: "never started") }
            if i % 10 == 0 {
                let l = try ATTBearerListener.unix(path: path)
                let c = try ATTBearer.connect(unixPath: path)
                let s = try l.accept(timeout: 5)
                c.close(reason: "cycle")
                s.close(reason: "cycle")
                l.close()
                _ = try? ATTBearer.connect(unixPath: path) // ENOENT path: must not leak either
            }
        }
        // Each bearer's loop ends once the bearer is released: its thread closes the loop's fds. A loop whose last
        // bearer is still being handled is live, not yet stopping: wait for those too (else a busy machine leaves one).
        XCTAssertTrue(EventLoop.waitForLiveLoops(atMost: liveBefore, seconds: 10), "a released bearer's event loop still runs")
        XCTAssertTrue(EventLoop.waitForStoppingLoops(seconds: 10), "a released event loop's thread did not end")
        XCTAssertEqual(descriptorsOpened(between: before, and: openFileDescriptorTable()), [])
    }
}

/// Closing from inside the sink, and adopting a socket made elsewhere.
final class BearerLifecycleTests: XCTestCase {
    func testCloseFromInsideTheSinkStopsDeliveryAtOnce() throws {
        let (a, b) = try ATTBearer.pair()
        for i in 0..<20 { XCTAssertEqual(try send(a, [0x1B, UInt8(i), 0x00]), .sent) }
        let sink = RecordingSink(onPDU: { pdu in if pdu[1] == 2 { b.close(reason: "seen enough") } })
        b.start(sink)
        XCTAssertEqual(sink.waitForClose(), .closedLocally(reason: "seen enough"))
        XCTAssertEqual(sink.pdus.map { $0[1] }, [0, 1, 2], "nothing is delivered after close(reason:)")
        a.close(reason: "done")
    }

    func testAdoptingAConnectedSocket() throws {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds), 0)
        let bearer = try ATTBearer(adoptingConnected: fds[1], label: "adopted")
        XCTAssertEqual(bearer.label, "adopted")
        XCTAssertEqual(bearer.endpoint, .socketPair)
        let sink = RecordingSink()
        bearer.start(sink)
        let pdu: [UInt8] = [0x0A, 0x03, 0x00]
        XCTAssertEqual(Glibc.send(fds[0], pdu, pdu.count, 0), 3)
        sink.waitForPDUs(1)
        XCTAssertEqual(sink.pdus, [pdu])
        Glibc.close(fds[0])
        XCTAssertEqual(sink.waitForClose(), .closedByPeer)
        XCTAssertThrowsError(try ATTBearer(adoptingConnected: 987_654, label: "bad fd")) { error in
            guard case .socket(let e)? = error as? TransportError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.errnoName, "EBADF")
        }
    }
}

/// Many senders against a closing bearer; several writable waiters.
final class BearerConcurrencyTests: XCTestCase {
    func testConcurrentSendersWhileThePeerClosesNeverTouchAClosedFD() throws {
        for _ in 0..<20 {
            let (a, b) = try ATTBearer.pair()
            let sinkA = RecordingSink()
            a.start(sinkA)
            let sinkB = RecordingSink()
            b.start(sinkB)
            let outcomes = Lock<[String: Int]>([:])
            let group = DispatchGroup()
            for t in 0..<4 {
                group.enter()
                DispatchQueue.global().async {
                    for i in 0..<200 {
                        let key: String
                        do {
                            key = try send(a, [0x52, UInt8(t), UInt8(i & 0xFF)]) == .sent ? "sent" : "wouldBlock"
                        } catch {
                            switch error as? TransportError {
                            case .closedByPeer?: key = "closedByPeer"
                            // A send racing the close: EPIPE, or ECONNRESET (the peer closed with unread data).
                            case .socket(let e)? where e.syscall == "send" || e.syscall == "recv": key = e.errnoName
                            default: key = "other: \(error)"
                            }
                        }
                        outcomes.withLock { $0[key, default: 0] += 1 }
                    }
                    group.leave()
                }
            }
            b.close(reason: "going away mid-stream")
            XCTAssertEqual(group.wait(timeout: .now() + 10), .success)
            // AF_UNIX reports a peer that closed with unread data as ECONNRESET, otherwise as end of file.
            switch sinkA.waitForClose() {
            case .closedByPeer?: break
            case .socket(let e)?: XCTAssertEqual(e.errnoName, "ECONNRESET")
            case let other: XCTFail("unexpected close \(String(describing: other))")
            }
            XCTAssertEqual(sinkA.closes.count, 1)
            let o = outcomes.withLock { $0 }
            XCTAssertEqual(o.values.reduce(0, +), 800)
            XCTAssertEqual(Set(o.keys).subtracting(["sent", "wouldBlock", "closedByPeer", "EPIPE", "ECONNRESET"]), [], "\(o)")
            XCTAssertEqual(sinkB.waitForClose(), .closedLocally(reason: "going away mid-stream"))
            XCTAssertEqual(sinkB.closes.count, 1)
        }
    }

    func testEveryWritableWaiterFiresOnceOnTheLoopThread() throws {
        let (a, b) = try ATTBearer.pair()
        a.start(RecordingSink())
        try a.setSendBufferSize(4096)
        while try send(a, [UInt8](repeating: 7, count: 256)) == .sent {}
        let fired = Lock<[Int: [String]]>([:])
        let all = DispatchGroup()
        for i in 0..<3 {
            all.enter()
            a.whenWritable {
                fired.withLock { $0[i, default: []].append(currentThreadName()) }
                all.leave()
            }
        }
        b.start(RecordingSink())
        XCTAssertEqual(all.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(fired.withLock { $0 }, [0: ["att-bearer"], 1: ["att-bearer"], 2: ["att-bearer"]])
        a.close(reason: "done")
        b.close(reason: "done")
    }
}

/// The bearer's one loop: one epoll_wait on the socket and an eventfd, on AF_UNIX as on any other datagram socket
/// (close shuts the socket down, which wakes it); the same thread serves `whenWritable`.
final class BearerReaderTests: XCTestCase {
    func testCloseWakesTheLoopAtOnce() throws {
        let (a, b) = try ATTBearer.pair()
        let sinkA = RecordingSink(), sinkB = RecordingSink()
        a.start(sinkA)
        b.start(sinkB)
        // One PDU through, so that the loop is back in its epoll_wait when close comes.
        XCTAssertEqual(try send(b, [0x1B, 0x01, 0x00]), .sent)
        sinkA.waitForPDUs(1)
        let started = Date()
        a.close(reason: "done waiting")
        XCTAssertEqual(sinkA.waitForClose(seconds: 5), .closedLocally(reason: "done waiting"))
        XCTAssertLessThan(Date().timeIntervalSince(started), 2, "close must wake the reader, not wait for data")
        XCTAssertEqual(sinkA.closes.count, 1)
        XCTAssertEqual(sinkB.waitForClose(), .closedByPeer, "the shutdown reaches the peer as end of file")
        XCTAssertThrowsError(try send(a, [0x52, 0x01, 0x00])) { error in
            XCTAssertEqual(error as? TransportError, .closedLocally(reason: "done waiting"))
        }
    }

    func testAnEmptyDatagramIsNotEndOfFile() throws {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds), 0)
        let bearer = try ATTBearer(adoptingConnected: fds[1], label: "empty")
        let sink = RecordingSink()
        bearer.start(sink)
        var nothing: UInt8 = 0
        XCTAssertEqual(Glibc.send(fds[0], &nothing, 0, 0), 0)
        let pdu: [UInt8] = [0x1B, 0x02, 0x00, 0x07]
        XCTAssertEqual(Glibc.send(fds[0], pdu, pdu.count, 0), pdu.count)
        sink.waitForPDUs(2)
        XCTAssertEqual(sink.pdus, [[], pdu], "an empty datagram is delivered (the engine rejects it), and reading goes on")
        Glibc.close(fds[0])
        XCTAssertEqual(sink.waitForClose(), .closedByPeer)
        XCTAssertEqual(sink.closes.count, 1)
    }

    func testAPeerThatClosesWithOurDataUnreadEndsWithECONNRESETAfterWhatItSent() throws {
        let (a, b) = try ATTBearer.pair()
        // a's PDU stays unread in b's queue, so that b's close reaches a as ECONNRESET (AF_UNIX).
        XCTAssertEqual(try send(a, [0x12, 0x03, 0x00, 0x01]), .sent)
        XCTAssertEqual(try send(b, [0x1B, 0x01, 0x00]), .sent)
        XCTAssertEqual(try send(b, [0x1B, 0x02, 0x00]), .sent)
        b.close(reason: "gone with data unread")
        let sink = RecordingSink()
        a.start(sink)
        let reason = sink.waitForClose()
        XCTAssertEqual(sink.pdus, [[0x1B, 0x01, 0x00], [0x1B, 0x02, 0x00]], "what the peer sent first is delivered first")
        guard case .socket(let e)? = reason else { return XCTFail("\(String(describing: reason))") }
        XCTAssertEqual(e.errnoName, "ECONNRESET")
        XCTAssertEqual(e.syscall, "recv")
        XCTAssertEqual(sink.closes.count, 1)
    }

    func testASocketThatIsNotAFUnixIsReadByTheSameLoopAndCloseWakesIt() throws {
        // Connected UDP sockets on the loopback: datagrams like SEQPACKET, but not AF_UNIX (as L2CAP is not): the
        // loop waits in the same epoll_wait, and close's shutdown ends it.
        let (x, y) = try connectedUDPSockets()
        let bearer = try ATTBearer(adoptingConnected: y, label: "udp")
        let sink = RecordingSink()
        bearer.start(sink)
        let pdus: [[UInt8]] = [[0x1B, 0x01, 0x00, 0xAA], [0x1D, 0x02, 0x00], [0x0A, 0x03, 0x00]]
        for p in pdus { XCTAssertEqual(Glibc.send(x, p, p.count, 0), p.count) }
        sink.waitForPDUs(3)
        XCTAssertEqual(sink.pdus, pdus)
        XCTAssertEqual(try send(bearer, [0x13]), .sent)
        var back = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(recv(x, &back, back.count, 0), 1)
        XCTAssertEqual(back[0], 0x13)
        bearer.close(reason: "udp done")
        XCTAssertEqual(sink.waitForClose(seconds: 5), .closedLocally(reason: "udp done"))
        XCTAssertEqual(sink.threadNames, ["att-bearer"])
        Glibc.close(x)
    }

    func testTheLoopServesBackpressureAgainAndAgainThenEndsWithTheBearer() throws {
        let (a, b) = try ATTBearer.pair()
        a.start(RecordingSink())
        try a.setSendBufferSize(4096)
        let sinkB = RecordingSink()
        let pdu = [UInt8](repeating: 0x52, count: 200)
        var total = 0
        for round in 0..<5 {
            while try send(a, pdu) == .sent { total += 1 }
            let writable = DispatchSemaphore(value: 0)
            a.whenWritable { writable.signal() }
            if round == 0 { b.start(sinkB) }
            XCTAssertEqual(writable.wait(timeout: .now() + 10), .success, "round \(round)")
            sinkB.waitForPDUs(total)
        }
        // A waiter left when the bearer closes wakes then, once.
        while try send(a, pdu) == .sent { total += 1 }
        let fired = Atomic<Int>(0)
        let woke = DispatchSemaphore(value: 0)
        b.close(reason: "stop reading") // a's socket is full: the waiter is still waiting
        a.whenWritable {
            fired.add(1, ordering: .relaxed)
            woke.signal()
        }
        XCTAssertEqual(woke.wait(timeout: .now() + 10), .success)
        a.close(reason: "done")
        XCTAssertEqual(fired.load(ordering: .relaxed), 1)
    }
}
