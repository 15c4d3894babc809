// The clocks the tools read for latencies, rates and CPU cost (clock_gettime): one place for each.
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

@inline(__always)
private func clockNanoseconds(_ clock: clockid_t) -> UInt64 {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}
