// A clock for tests, as NIO's EmbeddedEventLoop: it moves only when a test says so, so every ATT deadline
// (Core Spec 5.4 Vol 3 Part F §3.3.3, the 30 s transaction timeout) fires in milliseconds and in order.
import GATTClient
import LinuxBluetooth
import LinkCore

/// A clock that only moves when a test calls `advance(by:)`: every wake-up due by then runs, in deadline order,
/// on the caller's thread, with `now()` equal to its deadline while it runs. Timeout tests take milliseconds.
public final class ManualClock: GATTClock {
    private struct Sleeper {
        var deadline: ClockInstant
        var order: UInt64
        var action: @Sendable () -> Void
    }
    private struct State {
        var now: ClockInstant
        var sleepers: [UInt64: Sleeper] = [:]
        var nextID: UInt64 = 0
        var scheduleWaiters: [(count: Int, once: OnceBox<Void>)] = []
    }
    /// Guards the current time, the pending wake-ups and the tests waiting for a wake-up to be scheduled.
    private let state: Lock<State>

    public init(start: ClockInstant = ClockInstant(nanoseconds: 1_000_000_000)) {
        state = Lock(State(now: start))
    }

    public func now() -> ClockInstant { state.withLock { $0.now } }

    /// The number of wake-ups scheduled and not yet run or cancelled.
    public var pendingWakeups: Int { state.withLock { $0.sleepers.count } }

    public func schedule(at deadline: ClockInstant, _ action: @escaping @Sendable () -> Void) -> any ClockWakeup {
        let (id, ready): (UInt64, [OnceBox<Void>]) = state.withLock { s in
            let id = s.nextID
            s.nextID += 1
            s.sleepers[id] = Sleeper(deadline: deadline, order: id, action: action)
            var ready: [OnceBox<Void>] = []
            s.scheduleWaiters.removeAll { w in
                if s.sleepers.count >= w.count { ready.append(w.once); return true }
                return false
            }
            return (id, ready)
        }
        for once in ready { once.finish(.success(())) }
        return ManualWakeup(clock: self, id: id)
    }

    func cancel(_ id: UInt64) {
        _ = state.withLock { $0.sleepers.removeValue(forKey: id) }
    }

    /// Moves time forward by `duration`, running every wake-up that falls due, earliest first.
    public func advance(by duration: Duration) {
        let target = now().advanced(by: duration)
        advance(to: target)
    }

    /// Moves time forward to `target` (never backwards), running every wake-up that falls due, earliest first.
    public func advance(to target: ClockInstant) {
        while true {
            let due: (@Sendable () -> Void)? = state.withLock { s in
                let next = s.sleepers.min { a, b in
                    (a.value.deadline, a.value.order) < (b.value.deadline, b.value.order)
                }
                guard let next, next.value.deadline <= target else {
                    if s.now < target { s.now = target }
                    return nil
                }
                s.sleepers.removeValue(forKey: next.key)
                if s.now < next.value.deadline { s.now = next.value.deadline }
                return next.value.action
            }
            guard let due else { return }
            due()
        }
    }

    /// Waits until at least `count` wake-ups are pending (so a test can advance time only once the code under
    /// test has armed its timer). Never polls: `schedule` wakes the waiter.
    public func waitForPendingWakeups(atLeast count: Int) async {
        let once = OnceBox<Void>()
        let already = state.withLock { s -> Bool in
            if s.sleepers.count >= count { return true }
            s.scheduleWaiters.append((count, once))
            return false
        }
        if already { return }
        try? await once.value()
    }
}

private final class ManualWakeup: ClockWakeup {
    let clock: ManualClock
    let id: UInt64
    init(clock: ManualClock, id: UInt64) { self.clock = clock; self.id = id }
    func cancel() { clock.cancel(id) }
}
