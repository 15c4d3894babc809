// InterruptSignals' decisions in-process, without sending a signal (the test process's threads do not all block
// them): a signal delivered while an interruptible task runs cancels it and is recorded; the same signal again within
// the same-signal window is one signal; any other (or one with no interruptible task) is the process's exit; the
// handlers nest. The CLI's InterruptTests send real signals to `mirror`.
import XCTest
@testable import LinuxBluetooth
import LinkCore

#if canImport(Glibc)
import Glibc
#endif

final class InterruptSignalsTests: XCTestCase {
    let window = UInt64(InterruptSignals.sameSignalWindow.nanosecondsClamped)

    /// Waits, bounded, until `body` holds.
    func waitUntil(_ what: String, _ body: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !body() {
            guard ContinuousClock.now < deadline else { return XCTFail("not within 10 s: \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func testAnInterruptibleTaskIsCancelledOnceAndTheSignalRecorded() async throws {
        let started = Lock(false)
        let run = Task {
            try await InterruptSignals.whileInterruptible { () async throws -> Bool in
                started.withLock { $0 = true }
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                return Task.isCancelled
            }
        }
        try await waitUntil("the interruptible task started") { started.current }
        XCTAssertEqual(InterruptSignals.receivedSignal, 0)
        let now: UInt64 = 1_000_000_000
        XCTAssertEqual(InterruptSignals.deliver(SIGINT, at: now), .cancel)
        let cancelled = try await run.value
        XCTAssertTrue(cancelled, "the body saw its cancellation")
        XCTAssertEqual(InterruptSignals.receivedSignal, SIGINT)
        // The task ended: with no interruptible task left, any signal is the exit.
        XCTAssertEqual(InterruptSignals.action(for: SIGINT, at: now + 1), .exit)
        XCTAssertEqual(InterruptSignals.takeReceivedSignal(), SIGINT)
        XCTAssertEqual(InterruptSignals.receivedSignal, 0, "taken once")
    }

    func testTheSameSignalWithinTheWindowIsOneSignalAndAnyOtherExits() async throws {
        let gate = Lock(false)
        let run = Task {
            try await InterruptSignals.whileInterruptible { () async throws -> Int in
                gate.withLock { $0 = true }
                // Kept running after the cancel, so the decisions below are made while the task is signalled.
                while gate.current { try? await Task.sleep(for: .milliseconds(5)) }
                return 0
            }
        }
        try await waitUntil("the interruptible task started") { gate.current }
        let t0: UInt64 = 5_000_000_000
        XCTAssertEqual(InterruptSignals.deliver(SIGTERM, at: t0), .cancel)
        XCTAssertEqual(InterruptSignals.action(for: SIGTERM, at: t0 + 1_000), .repeated, "GNU timeout's second copy")
        XCTAssertEqual(InterruptSignals.action(for: SIGTERM, at: t0 + window - 1), .repeated)
        XCTAssertEqual(InterruptSignals.action(for: SIGTERM, at: t0 + window), .exit, "past the window: a second signal")
        XCTAssertEqual(InterruptSignals.action(for: SIGINT, at: t0 + 1_000), .exit, "another signal")
        gate.withLock { $0 = false }
        _ = try await run.value
        XCTAssertEqual(InterruptSignals.takeReceivedSignal(), SIGTERM)
    }

    func testHandlersNestTheInnerCancelsFirstAndTheOuterIsBackAfter() async throws {
        let inner = Lock(false), innerDone = Lock(false), outerCancelled = Lock(false)
        let run = Task {
            try await InterruptSignals.whileInterruptible { () async throws -> Bool in
                let innerCancelled = try await InterruptSignals.whileInterruptible { () async throws -> Bool in
                    inner.withLock { $0 = true }
                    while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                    return true
                }
                XCTAssertFalse(Task.isCancelled, "the inner signal cancels the inner task only")
                innerDone.withLock { $0 = true }
                // The outer handler is back: the next signal cancels the outer task.
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                outerCancelled.withLock { $0 = true }
                return innerCancelled
            }
        }
        try await waitUntil("the inner task started") { inner.current }
        XCTAssertEqual(InterruptSignals.deliver(SIGINT, at: 10_000_000_000), .cancel)
        try await waitUntil("the inner task ended, the outer's handler back") { innerDone.current }
        XCTAssertEqual(InterruptSignals.deliver(SIGINT, at: 20_000_000_000), .cancel)
        let innerCancelled = try await run.value
        XCTAssertTrue(innerCancelled)
        XCTAssertTrue(outerCancelled.current)
        _ = InterruptSignals.takeReceivedSignal()
    }
}
