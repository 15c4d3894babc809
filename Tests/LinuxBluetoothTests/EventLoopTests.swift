// The link's event loop (EventLoop.swift): posted work runs in order on its one thread, `sync` returns what the
// loop computed, timers fire by their deadline on the loop (a cancelled one never), a task that prefers the loop
// runs there, and a released loop's thread ends and closes its fds.
import TestSupport
import LinuxBluetooth
import LinkCore
import Synchronization
import XCTest
#if canImport(Glibc)
import Glibc
#endif

final class EventLoopTests: XCTestCase {
    func testPostedWorkRunsInOrderOnTheLoopsThreadFromManyThreads() throws {
        let loop = try EventLoop()
        let seen = Lock<(order: [Int: [Int]], offLoop: Int)>(([:], 0))
        DispatchQueue.concurrentPerform(iterations: 4) { poster in
            for i in 0..<500 {
                loop.execute {
                    seen.withLock { s in
                        s.order[poster, default: []].append(i)
                        if !loop.inEventLoop { s.offLoop += 1 }
                    }
                }
            }
        }
        XCTAssertFalse(loop.inEventLoop, "the test's thread is not the loop's")
        // `sync` is posted after everything above: when it returns, all of it has run.
        let count = loop.sync { seen.withLock { $0.order.values.reduce(0) { $0 + $1.count } } }
        XCTAssertEqual(count, 2000)
        for (poster, order) in seen.withLock({ $0.order }) {
            XCTAssertEqual(order, Array(0..<500), "poster \(poster)'s work ran out of order")
        }
        XCTAssertEqual(seen.withLock { $0.offLoop }, 0, "work ran off the loop's thread")
    }

    func testSyncRunsOnTheLoopAndReturnsItsResult() throws {
        let loop = try EventLoop()
        XCTAssertEqual(loop.sync { loop.inEventLoop ? "on the loop" : "elsewhere" }, "on the loop")
        // On the loop itself `sync` runs at once (no deadlock).
        XCTAssertEqual(loop.sync { loop.sync { 42 } }, 42)
    }

    func testTimersFireByDeadlineOnTheLoopAndACancelledOneNever() throws {
        let loop = try EventLoop()
        let fired = Lock<[String]>([])
        let done = Lock<Bool>(false)
        let now = monotonicNanoseconds()
        _ = loop.schedule(atNanoseconds: now + 60_000_000) {
            fired.withLock { $0.append("60 ms" + (loop.inEventLoop ? "" : " off the loop")) }
            done.withLockBroadcasting { $0 = true }
        }
        _ = loop.schedule(atNanoseconds: now + 20_000_000) { fired.withLock { $0.append("20 ms") } }
        let cancelled = loop.schedule(atNanoseconds: now + 40_000_000) { fired.withLock { $0.append("cancelled") } }
        cancelled.cancel()
        // A deadline already past fires at once.
        _ = loop.schedule(atNanoseconds: now) { fired.withLock { $0.append("past") } }
        XCTAssertNotNil(done.wait(until: { $0 ? () : nil }, timeoutNanoseconds: 5_000_000_000), "the 60 ms timer never fired")
        XCTAssertEqual(fired.withLock { $0 }, ["past", "20 ms", "60 ms"])
        XCTAssertGreaterThanOrEqual(monotonicNanoseconds() - now, 60_000_000, "a timer fired before its deadline")
    }

    func testATaskThatPrefersTheLoopRunsOnItsThread() async throws {
        let loop = try EventLoop()
        let onLoop = await withTaskExecutorPreference(loop) { () async -> [Bool] in
            var seen = [loop.inEventLoop]
            await Task.yield()
            seen.append(loop.inEventLoop)
            return seen
        }
        XCTAssertEqual(onLoop, [true, true])
    }

    func testAReleasedLoopsThreadEndsAndClosesItsFDs() throws {
        XCTAssertTrue(EventLoop.waitForStoppingLoops(seconds: 10))
        let before = openFileDescriptors()
        let liveBefore = EventLoop.liveLoops
        var loops: [EventLoop] = []
        for _ in 0..<20 { loops.append(try EventLoop()) }
        XCTAssertEqual(EventLoop.liveLoops, liveBefore + 20)
        XCTAssertEqual(openFileDescriptors(), before + 60, "an event loop holds three fds: epoll, eventfd, timerfd")
        // Both waits give up at their limit while the loops are held, then a busy released loop is still stopping.
        XCTAssertFalse(EventLoop.waitForLiveLoops(atMost: liveBefore, seconds: 0.01))
        let ran = Lock<Int>(0)
        let gate = Lock(false)
        for loop in loops { loop.execute { ran.withLock { $0 += 1 } } }
        loops[0].execute { gate.wait(until: { $0 ? () : nil }) }
        loops = []
        XCTAssertFalse(EventLoop.waitForStoppingLoops(seconds: 0.01), "a loop busy with posted work is still stopping")
        gate.withLockBroadcasting { $0 = true }
        XCTAssertTrue(EventLoop.waitForStoppingLoops(seconds: 10), "a released loop's thread did not end")
        XCTAssertTrue(EventLoop.waitForLiveLoops(atMost: liveBefore, seconds: 10))
        XCTAssertEqual(ran.withLock { $0 }, 20, "work posted before the release did not run")
        XCTAssertEqual(openFileDescriptors(), before)
    }
}
