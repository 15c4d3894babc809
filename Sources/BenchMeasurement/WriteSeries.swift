// The bench's time series: writes per 100 ms bucket over one mode's measured rounds, laid end to end (the bare
// loop's turns between rounds left out), for `mirror bench`'s --json `series` and its --plot drawing.

/// Writes per 100 ms bucket of one mode's measured rounds, sampled as the rounds run.
public struct WriteSeries: Sendable {
    public static let bucketNanoseconds: UInt64 = 100_000_000
    /// Fewer buckets than this are not a series: a run that short is drawn as no line, and says so.
    public static let minimumBuckets = 5
    /// Writes whose sample fell in each bucket.
    public private(set) var writes: [Int] = []
    /// The measured time of the closed rounds: the next round's times start there.
    public private(set) var nanoseconds: UInt64 = 0
    /// This round's writes already in a bucket.
    private var counted = 0

    public init() {}

    /// Puts the round's writes since the last sample (`writesSoFar` in all) in the bucket of `elapsed` (since the
    /// round's start). The array grows once per bucket, so a sample is a division and an add.
    @inline(__always)
    public mutating func sample(writesSoFar: Int, elapsed: UInt64) {
        let bucket = Int((nanoseconds + elapsed) / Self.bucketNanoseconds)
        if bucket >= writes.count { writes.append(contentsOf: repeatElement(0, count: bucket + 1 - writes.count)) }
        writes[bucket] += writesSoFar - counted
        counted = writesSoFar
    }

    /// Ends a round of `roundNanoseconds` (its figure's time): the next round's buckets follow it.
    public mutating func closeRound(nanoseconds roundNanoseconds: UInt64) {
        nanoseconds += roundNanoseconds
        counted = 0
    }

    /// One Write Request round from its round trips (each the time since the previous answer, the first since the
    /// round's start): nothing more is read in the loop.
    public mutating func addRound(latencies: some Sequence<UInt64>) {
        var elapsed: UInt64 = 0, n = 0
        for latency in latencies {
            elapsed += latency
            n += 1
            sample(writesSoFar: n, elapsed: elapsed)
        }
        closeRound(nanoseconds: elapsed)
    }

    /// One round of several writers at once (`mirror bench --bearers N`) from each write's completion since the
    /// round's start, sorted.
    public mutating func addRound(completions: [UInt64], nanoseconds roundNanoseconds: UInt64) {
        for (i, t) in completions.enumerated() { sample(writesSoFar: i + 1, elapsed: t) }
        closeRound(nanoseconds: roundNanoseconds)
    }

    /// Bytes per second in each bucket for writes of `size` bytes, for the drawing. The last bucket counts its own
    /// length (a round rarely ends on a bucket's edge), and is left out under half a bucket: a few writes over a
    /// fraction of a millisecond make a rate of nothing (--json keeps every bucket).
    public func bytesPerSecond(size: Int) -> [Double] {
        var rates: [Double] = []
        for (i, n) in writes.enumerated() {
            let start = UInt64(i) * Self.bucketNanoseconds
            let length = min(Self.bucketNanoseconds, nanoseconds > start ? nanoseconds - start : 0)
            if length < Self.bucketNanoseconds / 2 && i > 0 && i == writes.count - 1 { break }
            rates.append(Double(n * size) / (Double(max(length, 1)) / 1e9))
        }
        return rates
    }

    /// Whether the measured rounds last fewer than `minimumBuckets` buckets.
    public var isTooShort: Bool { nanoseconds < UInt64(Self.minimumBuckets) * Self.bucketNanoseconds }
}
