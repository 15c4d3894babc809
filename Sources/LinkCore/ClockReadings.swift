// The clocks the tools read for latencies, rates, CPU cost and timestamps (clock_gettime): one place for each,
// and the one form of a timestamp in text.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// CLOCK_MONOTONIC in nanoseconds: latencies, rates, trace timestamps.
public func monotonicNanoseconds() -> UInt64 { clockNanoseconds(CLOCK_MONOTONIC) }

/// CLOCK_PROCESS_CPUTIME_ID in nanoseconds: the CPU time of every thread of this process (a bench's cost).
public func processCPUNanoseconds() -> UInt64 { clockNanoseconds(CLOCK_PROCESS_CPUTIME_ID) }

/// CLOCK_THREAD_CPUTIME_ID in nanoseconds: the calling thread's CPU time (a single-threaded micro-benchmark).
public func threadCPUNanoseconds() -> UInt64 { clockNanoseconds(CLOCK_THREAD_CPUTIME_ID) }

/// "22:41:07.123" in UTC (`digits` decimals of the second, 3 or 6), for timestamps in text.
public func clockTime(unixSeconds: Double, digits: Int = 3) -> String {
    let whole = unixSeconds.rounded(.down)
    var t = time_t(whole)
    var parts = tm()
    gmtime_r(&t, &parts)
    let scale = digits >= 6 ? 1_000_000 : 1000
    let fraction = min(Int((unixSeconds - whole) * Double(scale)), scale - 1)
    func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
    let f = String(fraction)
    let width = digits >= 6 ? 6 : 3
    return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(String(repeating: "0", count: width - f.count))\(f)"
}

/// Now, in seconds since the Unix epoch (CLOCK_REALTIME).
public func unixNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

@inline(__always)
private func clockNanoseconds(_ clock: clockid_t) -> UInt64 {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}
