// The raw sockets around an LE link as sources of its loop (issue 35): the HCI link monitor, the SMP failure watch
// and the pairing agent deliver on the loop's thread, start no thread of their own, answer a wait made on the loop's
// thread (which reads their socket itself), and leave the loop's set at close, so a released loop ends.
import Foundation
import XCTest
@testable import LinuxBluetooth
import LinkCore
import ATTStack
import CBlueZSocket

/// The names of this process's threads now (/proc/self/task/*/comm).
func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
        .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
}

/// How many of this process's threads are named `name` (another test's reader may still be ending: compare counts).
func threadCount(_ name: String) -> Int { threadNames().filter { $0 == name }.count }

final class LoopSourceTests: XCTestCase {
    let adapter = HCIAdapter(index: 0, name: "hci0", address: BluetoothAddress(uncheckedBytes: [0, 0xAA, 1, 1, 0, 1]), isUp: true,
                             supportsLE: true, supportsBREDR: false, aclMTU: 27, aclPackets: 8, bus: "virtual")
    let quick = LinkRequestLimits(commandAnswer: .seconds(2), completion: .seconds(2), dataLengthChange: .milliseconds(200))

    /// Runs `body` on `loop`'s thread and returns its result (the test thread waits; bounded by the body's own limits).
    func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) -> T { loop.sync(body) }

    func testTheMonitorOnALoopDeliversThereAnswersARequestMadeThereAndLeavesTheLoopAtClose() throws {
        let before = EventLoop.liveLoops
        var loop: EventLoop? = try EventLoop()
        let loopThread = loop!.sync { pthread_self() }
        let pair = try SocketPair()
        pair.handOverA()
        let readers = threadCount("hci-link")
        // Each event record with whether it reached the sink on the loop's thread (a command's record goes there
        // from the thread that sends it, and `bind` hands over the earlier ones on its caller's).
        let onLoopThread = Lock<[Bool]>([])
        var monitor: HCILinkMonitor! = try HCILinkMonitor(adopting: pair.a, adapter: adapter, loop: loop!, sink: { r in
            guard case .event = r.kind else { return }
            onLoopThread.withLockBroadcasting { $0.append(pthread_equal(pthread_self(), loopThread) != 0) }
        })
        let controller = ScriptedController(fd: pair.b) { cmd in
            guard opcode(cmd) == 0x2030 else { return [] }
            return [commandComplete(0x2030, [0x00, 0x40, 0x00, 0x02, 0x02])]
        }
        XCTAssertLessThanOrEqual(threadCount("hci-link"), readers, "the monitor on a loop has no reader thread: \(threadNames())")
        loop!.sync { [monitor] in monitor!.bind(handle: 0x40) }
        controller.send(connectionComplete(handle: 0x40))
        XCTAssertNotNil(onLoopThread.wait(until: { $0.isEmpty ? nil : $0 }, timeoutNanoseconds: 5_000_000_000))
        // LE Read PHY asked from the loop's own thread: the source cannot run while it waits, so the wait reads.
        let phy = onLoop(loop!) { [quick, monitor] in Result { () throws(LinkError) in try monitor!.readPHY(limits: quick) } }
        XCTAssertEqual(try phy.get(), .granted(LinkPHYs(tx: 2, rx: 2)))
        // And from another thread, as the reader (the loop's source) wakes it.
        XCTAssertEqual(try monitor.readPHY(limits: quick), .granted(LinkPHYs(tx: 2, rx: 2)))
        XCTAssertEqual(onLoopThread.withLock { $0 }.count, 3, "LE Connection Complete and the two commands' answers")
        XCTAssertTrue(onLoopThread.withLock { $0 }.allSatisfy { $0 }, "every record reached the sink on the loop's thread")

        monitor.close()
        XCTAssertThrowsError(try monitor.readPHY(limits: quick)) { e in XCTAssertEqual(e as? LinkError, .closed) }
        // Closed: what the controller sends now is not read.
        controller.send(hciEvent(0x05, [0x00, 0x40, 0x00, 0x13]))
        Thread.sleep(forTimeInterval: 0.1)
        XCTAssertNil(monitor.disconnectReason())
        // Out of the set, the source holds the monitor (and so the loop) no more: released, the loop's thread ends.
        monitor = nil
        loop = nil
        XCTAssertTrue(EventLoop.waitForLiveLoops(atMost: before, seconds: 5), "the released loop still had a source")
    }

    /// A request asked on the loop's thread that the controller never answers ends at its limit there too.
    func testARequestOnTheLoopsThreadTimesOutAtItsLimit() throws {
        let loop = try EventLoop()
        let pair = try SocketPair()
        pair.handOverA()
        let monitor = try HCILinkMonitor(adopting: pair.a, adapter: adapter, loop: loop)
        defer { monitor.close() }
        let controller = ScriptedController(fd: pair.b) { _ in [] }
        monitor.bind(handle: 0x40)
        let limits = LinkRequestLimits(commandAnswer: .milliseconds(200), completion: .milliseconds(200), dataLengthChange: .milliseconds(200))
        let start = ContinuousClock.now
        let outcome = loop.sync { Result { () throws(LinkError) in try monitor.readPHY(limits: limits) } }
        XCTAssertEqual(try outcome.get(), .timedOut(LinkWaitTimeout(waitedFor: "Command Status or Command Complete for LE Read PHY", handle: nil, limit: .milliseconds(200))))
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(190))
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(3))
        XCTAssertEqual(controller.commands.count, 1, "LE Read PHY was sent once")
    }

    func testTheMonitorOnALoopEndsWithItsSocket() throws {
        let loop = try EventLoop()
        let pair = try SocketPair()
        pair.handOverA()
        let monitor = try HCILinkMonitor(adopting: pair.a, adapter: adapter, loop: loop)
        monitor.bind(handle: 0x40)
        pair.closeB()
        // The socket's end ends the source: a wait fails as closed at once, not at its limit.
        let start = ContinuousClock.now
        XCTAssertNil(monitor.awaitDisconnectReason(limit: .seconds(5)))
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(4))
        monitor.close()
    }

    func testTheSMPWatchOnALoopFindsAFailureFromEitherThreadAndLeavesAtClose() throws {
        let before = EventLoop.liveLoops
        var loop: EventLoop? = try EventLoop()
        let pair = try SocketPair()
        pair.handOverA()
        let readers = threadCount("smp-watch")
        var watch: SMPFailureWatch! = try XCTUnwrap(SMPFailureWatch(adopting: pair.a, adapter: "hci0", seesACL: true, loop: loop!))
        XCTAssertLessThanOrEqual(threadCount("smp-watch"), readers, "the watch on a loop has no reader thread: \(threadNames())")
        let peer = try BluetoothAddress(parsing: "00:AA:01:01:00:01")
        // None yet: the wait on the loop's thread ends at its limit.
        let start = ContinuousClock.now
        XCTAssertNil(onLoop(loop!) { [watch] in watch!.pairingFailed(peer: peer, limit: .milliseconds(100)) })
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(90))
        // Pairing Failed on handle 0x2A, reason 0x08 Unspecified Reason (no LE Connection Complete: any handle counts).
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { [b = pair.b] in
            sendDatagram(b, [0x02, 0x2A, 0x20, 0x06, 0x00, 0x02, 0x00, 0x06, 0x00, 0x05, 0x08])
        }
        // Waited for on the loop's own thread: the wait reads the socket itself.
        let found = onLoop(loop!) { [watch] in watch!.takePairingFailed(peer: peer, limit: .seconds(5)) }
        XCTAssertEqual(found, SMPPairingFailed(handle: 0x2A, reason: 0x08, sentBy: .peer))
        pair.sendB([0x02, 0x2A, 0x20, 0x06, 0x00, 0x02, 0x00, 0x06, 0x00, 0x05, 0x04])
        XCTAssertEqual(watch.pairingFailed(peer: peer, limit: .seconds(5))?.reason, 0x04, "and from another thread, as the source reads")
        watch.close()
        watch = nil
        loop = nil
        XCTAssertTrue(EventLoop.waitForLiveLoops(atMost: before, seconds: 5), "the released loop still had the watch's source")
    }

    /// As --pair's terminal prompt waits for its line (no limit: a person types it): the line ends the wait, and the
    /// interrupt fd is taken meanwhile (mirror's SIGINT then ends the command at once).
    func testAWaitWithNoLimitEndsAtItsLineAndTakesTheInterruptMeanwhile() throws {
        let interrupt = cbz_eventfd()
        defer { _ = cbz_close(interrupt) }
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        let taken = Lock(0)
        // The line is typed only after the interrupt was taken (150 ms later), however late the timers fire.
        BlockingWait.setInterruptSource(fd: interrupt, take: { [w = fds[1]] in
            _ = cbz_eventfd_drain(interrupt)
            taken.withLockBroadcasting { $0 += 1 }
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.15) { _ = write(w, "y\n", 2) }
        })
        defer { BlockingWait.clearInterruptSource() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { _ = cbz_eventfd_signal(interrupt) }
        XCTAssertGreaterThan(BlockingWait.poll(fd: fds[0], events: Int16(CBZ_POLLIN), timeoutMilliseconds: -1), 0)
        XCTAssertEqual(taken.withLock { $0 }, 1)
    }

    func testAWaitThatHoldsItsThreadTakesTheInterruptSourceMeanwhile() throws {
        // The interrupt fd (an eventfd standing in for the signalfd) is taken while the wait's own fd stays quiet.
        let interrupt = cbz_eventfd()
        let pair = try SocketPair()
        defer { _ = cbz_close(interrupt) }
        let taken = Lock(0)
        // The datagram is sent only after the interrupt was taken (250 ms later), however late the timers fire.
        BlockingWait.setInterruptSource(fd: interrupt, take: { [b = pair.b] in
            _ = cbz_eventfd_drain(interrupt)
            taken.withLockBroadcasting { $0 += 1 }
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.25) { sendDatagram(b, [1]) }
        })
        defer { BlockingWait.clearInterruptSource() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { _ = cbz_eventfd_signal(interrupt) }
        let start = ContinuousClock.now
        let ready = BlockingWait.poll(fd: pair.a, events: Int16(CBZ_POLLIN), timeoutMilliseconds: 5000)
        XCTAssertGreaterThan(ready, 0)
        XCTAssertEqual(taken.withLock { $0 }, 1, "the interrupt was taken while the wait held its thread")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(250), "and the wait went on for its own fd")
        // Its limit still holds: once the datagram is read, nothing comes.
        XCTAssertNotNil(receiveDatagram(pair.a, seconds: 1))
        XCTAssertEqual(BlockingWait.poll(fd: pair.a, events: Int16(CBZ_POLLIN), timeoutMilliseconds: 100), 0)
    }
}
