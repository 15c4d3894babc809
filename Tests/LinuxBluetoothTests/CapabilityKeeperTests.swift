// The capability keeper (Privilege): calls run on its thread while it lives, on the caller after it ended or
// when it does not take them in time; ending runs its drop. Driven with a drop that changes nothing, so the
// test process keeps its own capabilities.
@testable import LinuxBluetooth
import LinkCore
import CBlueZSocket
import Foundation
import XCTest

/// The calling thread's name (/proc/thread-self/comm).
private func threadName() -> String {
    (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
}

final class CapabilityKeeperTests: XCTestCase {
    func testCallsRunOnTheKeeperUntilItEndsThenOnTheCaller() {
        let dropped = Lock(0)
        let keeper = CapabilityKeeper(name: "test-keeper", drop: { dropped.withLock { $0 += 1 } })
        XCTAssertTrue(keeper.isAlive)
        XCTAssertEqual(keeper.perform { threadName() }, "test-keeper")
        XCTAssertEqual(keeper.perform { 6 * 7 }, 42)
        keeper.end()
        XCTAssertFalse(keeper.isAlive)
        XCTAssertEqual(dropped.current, 1, "the keeper ran its drop as it ended")
        XCTAssertNotEqual(keeper.perform { threadName() }, "test-keeper", "after the end a call runs on its caller")
        keeper.end()
        XCTAssertEqual(dropped.current, 1, "a second end changes nothing")
    }

    /// Issue 36: the keeper keeps CAP_NET_RAW and CAP_NET_ADMIN of what it held and nothing else (before: run as
    /// root, it kept all of root's capabilities until the drop); the caller's thread is untouched (per thread).
    func testTheKeeperKeepsOnlyTheTwoRawHCINeeds() throws {
        let before = try Capabilities.process()
        let keeper = CapabilityKeeper(name: "narrow-keeper", keep: { try? Capabilities.keepOnly(.rawHCI) }, drop: {})
        defer { keeper.end() }
        let held = keeper.perform { try? Capabilities.process() }
        let kept = try XCTUnwrap(held)
        XCTAssertEqual(kept.effective, before.effective.intersection(.rawHCI), "root's other capabilities are gone from the keeper")
        XCTAssertEqual(kept.permitted, before.permitted.intersection(.rawHCI))
        XCTAssertEqual(kept.inheritable, CapabilitySet(rawValue: 0))
        XCTAssertEqual(try Capabilities.process(), before, "the test's own thread keeps what it had")
        if getuid() == 0 {
            XCTAssertTrue(before.effective.contains(.rawHCI) && before.effective != .rawHCI, "as root the narrowing is seen: \(before.effective)")
        }
    }

    /// An end whose drop does not finish within the answer limit returns at that limit.
    func testAnEndTheKeeperDoesNotFinishInTimeReturnsAtItsLimit() {
        let release = DispatchSemaphore(value: 0)
        let keeper = CapabilityKeeper(name: "slow-drop", answerLimit: .milliseconds(100), drop: { release.wait() })
        let started = ContinuousClock.now
        keeper.end()
        let took = ContinuousClock.now - started
        XCTAssertGreaterThanOrEqual(took, .milliseconds(90), "end returned before its limit, though the drop never finished")
        XCTAssertLessThan(took, .seconds(5), "end waited past its limit")
        release.signal()
    }

    /// A call that finds the keeper busy past the answer limit runs on its caller instead of waiting on.
    func testACallTheKeeperDoesNotTakeInTimeRunsOnTheCaller() {
        let keeper = CapabilityKeeper(name: "busy-keeper", answerLimit: .milliseconds(100), drop: {})
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = keeper.perform { started.signal(); release.wait(); return 0 }
        }
        XCTAssertEqual(started.wait(timeout: .now() + 5), .success)
        let t0 = Date()
        XCTAssertEqual(keeper.perform { threadName() } == "busy-keeper", false, "the busy keeper did not take it")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(t0), 0.09, "the call waited for the keeper up to the answer limit")
        XCTAssertLessThan(Date().timeIntervalSince(t0), 3, "bounded by the answer limit")
        release.signal()
        XCTAssertEqual(keeper.perform { threadName() }, "busy-keeper", "free again, the keeper takes calls")
        keeper.end()
    }

    /// Without a keeper (a process that held nothing, or after the drop), Privilege runs calls where they are made.
    func testPrivilegeWithoutAKeeperRunsCallsInPlace() {
        XCTAssertFalse(Privilege.isKept)
        XCTAssertEqual(Privilege.perform { 7 }, 7)
    }
}
