// Time for the transaction engine: a monotonic clock that can wake a callback at a deadline. Every ATT deadline
// (Core Spec 5.4 Vol 3 Part F §3.3.3, the 30 s transaction timeout) and every timed wait in GATTClient, Mirror and
// MirrorCommandLine takes its time from a GATTClock: this one, or TestSupport's ManualClock in tests.
import ATTStack
import Dispatch
import Synchronization

/// A point on a monotonic clock, in nanoseconds from an arbitrary origin. Never goes backwards.
public struct ClockInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: UInt64
    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    public static func < (a: ClockInstant, b: ClockInstant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// This instant moved forward by `d` (negative durations clamp at the origin).
    public func advanced(by d: Duration) -> ClockInstant {
        let ns = d.nanosecondsClamped
        if ns >= 0 { return ClockInstant(nanoseconds: nanoseconds &+ UInt64(ns)) }
        let back = UInt64(-ns)
        return ClockInstant(nanoseconds: nanoseconds > back ? nanoseconds - back : 0)
    }

    /// The time from `earlier` to this instant (zero if `earlier` is later).
    public func duration(since earlier: ClockInstant) -> Duration {
        nanoseconds >= earlier.nanoseconds ? .nanoseconds(Int64(nanoseconds - earlier.nanoseconds)) : .zero
    }

    public var description: String { "t+\(Duration.nanoseconds(Int64(clamping: nanoseconds)).spoken)" }
}

/// A wake-up scheduled on a `GATTClock`; `cancel()` guarantees the action will not start afterwards
/// (an action that already started runs to its end).
public protocol ClockWakeup: AnyObject, Sendable {
    func cancel()
}

/// A monotonic clock that can call an action at a deadline: the one source of time for every deadline in
/// the ATT transaction engine (Core Spec 5.4 Vol 3 Part F §3.3.3).
public protocol GATTClock: Sendable {
    /// The current instant.
    func now() -> ClockInstant
    /// Calls `action` once, on some thread, at or after `deadline`, unless the returned wake-up is cancelled first.
    /// Never calls `action` from inside `schedule` itself.
    func schedule(at deadline: ClockInstant, _ action: @escaping @Sendable () -> Void) -> any ClockWakeup
    /// Calls `action` once on `loop`'s thread at or after `deadline`, unless cancelled first (on the loop, a cancel
    /// guarantees it will not run). The system clock uses the loop's timerfd; another clock (a test's) runs it on
    /// the loop and waits for it there, so that a test's `advance` returns after the deadline's effects.
    func schedule(at deadline: ClockInstant, on loop: EventLoop, _ action: @escaping @Sendable () -> Void) -> any ClockWakeup
}

extension GATTClock {
    public func schedule(at deadline: ClockInstant, on loop: EventLoop, _ action: @escaping @Sendable () -> Void) -> any ClockWakeup {
        let guarded = LoopGuardedWakeup(loop: loop)
        guarded.inner = schedule(at: deadline) {
            let run: @Sendable () -> Void = { if !guarded.cancelled { action() } }
            if loop.inEventLoop { run() } else { loop.sync(run) }
        }
        return guarded
    }
}

/// A wake-up of another clock whose action is posted to a loop: cancelled on the loop, it will not run even when
/// the clock already fired it and its post waits in the loop's queue.
private final class LoopGuardedWakeup: ClockWakeup, @unchecked Sendable {
    // @unchecked: `cancelled` and `inner` are written before the wake-up is shared or on the loop's thread, and read
    // only on the loop's thread (cancel off the loop is posted to it).
    let loop: EventLoop
    var cancelled = false
    var inner: (any ClockWakeup)?
    init(loop: EventLoop) { self.loop = loop }
    func cancel() {
        inner?.cancel()
        if loop.inEventLoop { cancelled = true } else { loop.execute { self.cancelled = true } }
    }
}

extension LoopTimer: ClockWakeup {}

/// The system's monotonic clock (CLOCK_MONOTONIC, read directly: every request reads it); wake-ups run on a
/// global Dispatch queue, scheduled by the time left, whatever clock Dispatch counts in.
public struct MonotonicClock: GATTClock {
    public init() {}

    public func now() -> ClockInstant { ClockInstant(nanoseconds: monotonicNanoseconds()) }

    /// On the loop's timerfd, in the loop's thread: no other thread, no Dispatch.
    public func schedule(at deadline: ClockInstant, on loop: EventLoop, _ action: @escaping @Sendable () -> Void) -> any ClockWakeup {
        loop.schedule(atNanoseconds: deadline.nanoseconds, action)
    }

    public func schedule(at deadline: ClockInstant, _ action: @escaping @Sendable () -> Void) -> any ClockWakeup {
        let item = DispatchWorkItem(block: action)
        let left = deadline.duration(since: now()).nanosecondsClamped
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: left)), execute: item)
        return DispatchWakeup(item: item)
    }
}

/// A scheduled Dispatch work item. `DispatchWorkItem.cancel()` is thread-safe, so nothing else is needed.
private final class DispatchWakeup: ClockWakeup, @unchecked Sendable {
    // @unchecked: the only stored property is a DispatchWorkItem, whose cancel() is thread-safe.
    private let item: DispatchWorkItem
    init(item: DispatchWorkItem) { self.item = item }
    func cancel() { item.cancel() }
}

extension Duration {
    /// Whole nanoseconds, clamped to Int64.
    public var nanosecondsClamped: Int64 {
        let (s, atto) = components
        let (ms, o1) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if o1 { return s < 0 ? .min : .max }
        let (sum, o2) = ms.addingReportingOverflow(atto / 1_000_000_000)
        if o2 { return s < 0 ? .min : .max }
        return sum
    }

    /// "30 s", "1.5 s", "250 ms", "40 µs": how errors say a duration.
    public var spoken: String {
        let ns = nanosecondsClamped
        if ns == 0 { return "0 s" }
        if ns % 1_000_000_000 == 0 { return "\(ns / 1_000_000_000) s" }
        if ns >= 1_000_000_000 {
            let tenths = (ns + 50_000_000) / 100_000_000
            return tenths % 10 == 0 ? "\(tenths / 10) s" : "\(tenths / 10).\(tenths % 10) s"
        }
        if ns % 1_000_000 == 0 || ns >= 1_000_000 { return "\((ns + 500_000) / 1_000_000) ms" }
        if ns >= 1_000 { return "\(ns / 1_000) µs" }
        return "\(ns) ns"
    }
}

/// A wait that ran past its named limit: what it waited for, on which handle (with its name when known), for how long.
/// Core Spec 5.4 Vol 3 Part F §3.3.3 for the ATT transaction timeout; every other wait in the stack also has a limit.
/// In LinkCore, under every module that waits (the GATT client, the line editor).
public struct GATTTimeoutError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the wait was for: "Write Response", "a send permit for Write Command", "scanState to reach complete".
    public var waitingFor: String
    /// The attribute handle concerned, when there is one.
    public var handle: UInt16?
    /// The handle's name, when the caller gave one (`GATTClient.setName(_:for:)`).
    public var handleName: String?
    /// The limit that ran out.
    public var after: Duration

    public init(waitingFor: String, handle: UInt16? = nil, handleName: String? = nil, after: Duration) {
        self.waitingFor = waitingFor
        self.handle = handle
        self.handleName = handleName
        self.after = after
    }

    /// "timed out after 30 s waiting for Write Response on handle 0x0012 (scannerAction)"
    public var description: String {
        var s = "timed out after \(after.spoken) waiting for \(waitingFor)"
        if let handle { s += " on handle \(ATTHex.handle(handle))" }
        if let handleName { s += " (\(handleName))" }
        return s
    }
}
