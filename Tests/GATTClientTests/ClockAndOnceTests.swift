import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Synchronization
import XCTest
@testable import GATTClient

final class ClockAndOnceTests: XCTestCase {
    func testManualClockWakesSleepersInDeadlineOrderWhenAdvanced() async throws {
        let clock = ManualClock()
        let order = Lock<[Int]>([])
        let start = clock.now()
        _ = clock.schedule(at: start.advanced(by: .seconds(2))) { order.withLock { $0.append(2) } }
        _ = clock.schedule(at: start.advanced(by: .seconds(1))) { order.withLock { $0.append(1) } }
        let cancelled = clock.schedule(at: start.advanced(by: .milliseconds(1500))) { order.withLock { $0.append(99) } }
        cancelled.cancel()
        clock.advance(by: .milliseconds(999))
        XCTAssertEqual(order.withLock { $0 }, [])
        clock.advance(by: .seconds(5))
        XCTAssertEqual(order.withLock { $0 }, [1, 2])
        XCTAssertEqual(clock.now(), start.advanced(by: .milliseconds(5999)))
        XCTAssertEqual(clock.pendingWakeups, 0)
    }

    func testSleepOnManualClockEndsWhenTimeIsAdvanced() async throws {
        let clock = ManualClock()
        let woke = Atomic<Bool>(false)
        let sleeper = Task {
            try await clock.sleep(for: .seconds(30))
            woke.store(true, ordering: .sequentiallyConsistent)
        }
        await clock.waitForPendingWakeups(atLeast: 1)
        clock.advance(by: .seconds(29))
        XCTAssertFalse(woke.load(ordering: .sequentiallyConsistent))
        clock.advance(by: .seconds(1))
        try await sleeper.value
        XCTAssertTrue(woke.load(ordering: .sequentiallyConsistent))
    }

    func testSleepIsCancellable() async throws {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(30)) }
        await clock.waitForPendingWakeups(atLeast: 1)
        sleeper.cancel()
        do {
            try await sleeper.value
            XCTFail("a cancelled sleep returned normally")
        } catch is CancellationError {}
        XCTAssertEqual(clock.pendingWakeups, 0, "the cancelled sleep's wake-up was not removed")
    }

    func testOnceBoxResumesExactlyOnceAndKeepsAnEarlyResult() async throws {
        let once = OnceBox<Int>()
        XCTAssertTrue(once.finish(.success(1)))
        XCTAssertFalse(once.finish(.success(2)), "a second result was accepted")
        let v = try await once.value()
        XCTAssertEqual(v, 1)
        XCTAssertFalse(once.finish(.failure(CancellationError())))
    }

    func testOnceBoxCancellationReachesAWaiterWhoseCallbackNeverComes() async throws {
        let once = OnceBox<Int>()
        let waiter = Task { try await once.value() }
        waiter.cancel()
        do {
            _ = try await waiter.value
            XCTFail("expected CancellationError")
        } catch is CancellationError {}
        XCTAssertFalse(once.finish(.success(5)), "a late callback was accepted after cancellation")
    }

    /// Seed 002: a callback that never comes ends with the named timeout; one that comes after the deadline
    /// changes nothing.
    func testNamedDeadlineForACallbackThatNeverComesAndOneThatComesLate() async throws {
        let clock = ManualClock()
        let box = OnceBox<Int>()
        let waiter = Task {
            try await withDeadline(.seconds(90), waitingFor: "scanState to reach complete", handle: 0x002A,
                                   handleName: "scanState", clock: clock) {
                try await box.value()
            }
        }
        await clock.waitForPendingWakeups(atLeast: 1)
        clock.advance(by: .seconds(90))
        do {
            _ = try await waiter.value
            XCTFail("expected a timeout")
        } catch let e as GATTError {
            XCTAssertEqual(e.description, "timed out after 90 s waiting for scanState to reach complete on handle 0x002A (scanState)")
        }
        // The callback arrives after the deadline: dropped, no crash, no second resume.
        box.finish(.success(8))
        XCTAssertEqual(clock.pendingWakeups, 0)
    }

    func testNamedDeadlineReturnsTheResultAndCancelsItsTimer() async throws {
        let clock = ManualClock()
        let v = try await withDeadline(.seconds(5), waitingFor: "a value", clock: clock) { 42 }
        XCTAssertEqual(v, 42)
        XCTAssertEqual(clock.pendingWakeups, 0, "the deadline's timer outlived the work")
    }

    func testDurationsAreSpokenForErrors() {
        XCTAssertEqual(Duration.seconds(30).spoken, "30 s")
        XCTAssertEqual(Duration.milliseconds(1500).spoken, "1.5 s")
        XCTAssertEqual(Duration.milliseconds(250).spoken, "250 ms")
    }
}
