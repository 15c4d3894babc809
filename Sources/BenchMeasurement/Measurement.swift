// What both benches measure with (`mirror bench` through BenchRun.swift, and tools/gatt-bench): one stopwatch over
// the wall clock and the whole process's CPU time, and one median. Read both clocks here, not in each bench, so
// that a round, a chunk and a run are timed the same way.
import LinkCore

/// Wall-clock time (CLOCK_MONOTONIC) and CPU time of every thread of the process (CLOCK_PROCESS_CPUTIME_ID) over a
/// stretch of work.
public struct Elapsed: Sendable, Equatable {
    public var wallNanoseconds: UInt64
    public var cpuNanoseconds: UInt64

    public init(wallNanoseconds: UInt64, cpuNanoseconds: UInt64) {
        self.wallNanoseconds = wallNanoseconds
        self.cpuNanoseconds = cpuNanoseconds
    }
}

/// Started when made: the process's CPU time first, then the wall clock (the work's own clocks, a latency's start,
/// read the wall clock right after). `elapsed` reads both again.
public struct Stopwatch: Sendable {
    /// The wall clock at the start, in CLOCK_MONOTONIC nanoseconds (a bench's latencies and deadlines count from it).
    public let wallStart: UInt64
    public let cpuStart: UInt64

    public init() {
        cpuStart = processCPUNanoseconds()
        wallStart = monotonicNanoseconds()
    }

    /// The time since the start, the wall clock read at `wallNow` (a reading the caller already took) or now.
    public func elapsed(at wallNow: UInt64 = monotonicNanoseconds()) -> Elapsed {
        Elapsed(wallNanoseconds: wallNow &- wallStart, cpuNanoseconds: processCPUNanoseconds() &- cpuStart)
    }
}

/// The median: the middle value, or the mean of the two middle values of an even count (taking the upper one made
/// the median of two rounds' writes/s the faster round); 0 for none.
public func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return 0 }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}
