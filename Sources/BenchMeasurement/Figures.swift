// What a bench measures and what it found: the plan, one timed round, one mode over its rounds (with the bare
// loop's and the bearers' figures), one run. Data and arithmetic only: their --json record is BenchRecord.swift;
// `mirror bench` words them (text, plot).
import JSON

/// Which write modes a bench measures.
public enum BenchMode: String, Sendable, CaseIterable {
    case withResponse = "with-response"
    case withoutResponse = "without-response"
    case both
}

/// What to measure.
public struct BenchPlan: Sendable {
    public var handle: UInt16
    /// Value bytes per write; nil for the MTU's budget.
    public var size: Int?
    /// Writes per mode and round; nil when `duration` is set.
    public var count: Int?
    /// Seconds per mode and round, instead of a count.
    public var duration: Double?
    public var warmup: Int
    public var mode: BenchMode
    /// A characteristic whose value is the peer's little-endian count of writes received, read around each mode.
    public var counter: UInt16?
    public var rounds: Int
    /// Where the bare socket loop runs (--bare-loop); nil for the target's default: a second connection for
    /// unix: targets, the same connection for LE ones.
    public var bareLoop: BareLoopOption?
    /// --batch: after each mode's round, a round of as many writes through one batch call
    /// (`write(handle:contentsOf:)`, `writeWithoutResponse(handle:contentsOf:)`), reported apart from the plain writes.
    public var batch: Bool

    public init(handle: UInt16, size: Int?, count: Int?, duration: Double?, warmup: Int, mode: BenchMode,
                counter: UInt16?, rounds: Int, bareLoop: BareLoopOption? = nil, batch: Bool = false) {
        self.handle = handle
        self.size = size
        self.count = count
        self.duration = duration
        self.warmup = warmup
        self.mode = mode
        self.counter = counter
        self.rounds = rounds
        self.bareLoop = bareLoop
        self.batch = batch
    }
}

/// `--bare-loop`: where the bench runs its bare socket loop, or not at all.
public enum BareLoopOption: String, Sendable, CaseIterable {
    case secondConnection = "second-connection"
    case sameConnection = "same-connection"
    case none
}

/// Where the bench's bare socket loop ran.
public enum BareLoopPlacement: String, Sendable {
    /// unix: targets: a second connection to the same peer, its rounds alternating with the client's.
    case secondConnection = "second-connection"
    /// LE targets: the same connection's socket, lent by the GATT client's bearer for each of the loop's turns.
    case sameConnection = "same-connection"
}

/// One timed run of one mode: wall time, and the CPU time of the whole process (every thread), which stays
/// steady on a loaded machine where wall time does not.
public struct RoundFigures: Sendable {
    public var writes: Int
    public var nanoseconds: UInt64
    public var cpuNanoseconds: UInt64
    public var writesPerSecond: Double { Double(writes) / (Double(nanoseconds) / 1e9) }
    public var cpuMicrosecondsPerWrite: Double { Double(cpuNanoseconds) / 1000 / Double(max(1, writes)) }

    public init(writes: Int, nanoseconds: UInt64, cpuNanoseconds: UInt64) {
        self.writes = writes
        self.nanoseconds = nanoseconds
        self.cpuNanoseconds = cpuNanoseconds
    }

    /// A round of `writes` timed by a `Stopwatch`.
    public init(writes: Int, _ elapsed: Elapsed) {
        self.init(writes: writes, nanoseconds: elapsed.wallNanoseconds, cpuNanoseconds: elapsed.cpuNanoseconds)
    }
}

/// Write Requests over several bearers (`--bearers N`, Core Spec 5.4 Vol 3 Part F §3.2.11): one writer per open
/// bearer at once, the client spreading them; and, in the same run, rounds of one writer (whose requests all go on
/// CID 4: the client keeps an idle unenhanced bearer), so the gain is a ratio measured in one process.
public struct BearerFigures: Sendable {
    /// Writers run at once: one per bearer open when the bench started.
    public var writers: Int
    /// Write Requests answered on each bearer (`GATTBearer.requestsAnswered`, by index) over the measured rounds.
    public var perBearer: [Int] = []
    /// The peer's count of writes over those rounds (--counter, or --loopback's), nil when nothing tells.
    public var peerCounted: Int?
    /// The rounds of one writer, alternating with the parallel ones.
    public var oneBearer: [RoundFigures] = []

    public var total: Int { perBearer.reduce(0, +) }

    /// Adds one round's counts by bearer (a bearer added since counts from its index).
    mutating func add(_ round: [Int]) {
        if round.count > perBearer.count { perBearer += Array(repeating: 0, count: round.count - perBearer.count) }
        for (i, n) in round.enumerated() { perBearer[i] += n }
    }

    public var oneBearerWritesPerSecond: Double { median(oneBearer.map(\.writesPerSecond)) }
    /// The one-writer rounds' writes, in all.
    public var oneBearerWrites: Int { oneBearer.reduce(0) { $0 + $1.writes } }

    /// `writesPerSecond` (the writers' at once) over one writer's on one bearer: the gain; nil when one wrote nothing.
    public func ratioToOneBearer(_ writesPerSecond: Double) -> Double? {
        let one = oneBearerWritesPerSecond
        return one > 0 ? writesPerSecond / one : nil
    }
}

/// The figures of one mode over every round.
public struct ModeFigures: Sendable {
    public var mode: BenchMode
    public var size: Int
    public var rounds: [RoundFigures] = []
    /// Round trips of Write Requests over every round, in nanoseconds (empty for Write Commands).
    public var latencies: [UInt64] = []
    /// Write Commands: time the socket was full (EAGAIN until POLLOUT), and how many sends found it full.
    public var blockedNanoseconds: UInt64?
    public var blockedWaits: Int?
    /// Writes the peer confirmed: Write Responses received (requests), or the counter's increase (commands).
    public var confirmed: Int?
    public var bare: [RoundFigures] = []
    /// The bare loop's writes the peer confirmed: Write Responses (requests), or the counter's increase over each
    /// of its rounds (commands, with --counter); nil when nothing tells.
    public var bareConfirmed: Int?
    /// Writes per 100 ms over the measured rounds, laid end to end.
    public var series = WriteSeries()
    /// The radio's ceiling for this mode and the fraction of it reached; nil until the run is judged.
    public var ceiling: CeilingVerdict?
    /// Write Requests over several bearers (--bearers N with N > 1 open); nil over one.
    public var bearers: BearerFigures?
    /// --batch: the rounds of one batch call each; nil without --batch. Not part of the figures above.
    public var batch: BatchFigures?

    public init(mode: BenchMode, size: Int) {
        self.mode = mode
        self.size = size
    }

    public var writes: Int { rounds.reduce(0) { $0 + $1.writes } }
    public var seconds: Double { Double(rounds.reduce(0) { $0 + $1.nanoseconds }) / 1e9 }
    /// The median round's rate.
    public var writesPerSecond: Double { median(rounds.map(\.writesPerSecond)) }
    public var bytesPerSecond: Double { writesPerSecond * Double(size) }
    public var bareWritesPerSecond: Double? { bare.isEmpty ? nil : median(bare.map(\.writesPerSecond)) }
    /// The bare loop's writes over its rounds, in all.
    public var bareWrites: Int { bare.reduce(0) { $0 + $1.writes } }
    public var ratio: Double? { bareWritesPerSecond.map { writesPerSecond / $0 } }
    /// CPU per write, median of the rounds (the whole process: with --loopback that includes the peer).
    public var cpuPerWrite: Double { median(rounds.map(\.cpuMicrosecondsPerWrite)) }
    public var bareCPUPerWrite: Double? { bare.isEmpty ? nil : median(bare.map(\.cpuMicrosecondsPerWrite)) }
    /// CPU per write over the bare loop's; nil without a bare loop, or when it took no CPU.
    public var cpuRatioToBare: Double? { bareCPUPerWrite.flatMap { $0 > 0 ? cpuPerWrite / $0 : nil } }
    /// How far the rounds' writes/s disagree (nil with one round).
    public var spread: RoundSpread? { RoundSpread(rounds.map(\.writesPerSecond)) }

    /// --batch: the batch rounds' writes/s and CPU per write over the plain rounds', and their CPU per write over the
    /// bare loop's; each nil when its divisor is missing or zero.
    public func batchRatios(_ b: BatchFigures) -> (toPlainRate: Double?, toPlainCPU: Double?, toBareCPU: Double?) {
        (writesPerSecond > 0 ? b.writesPerSecond / writesPerSecond : nil,
         cpuPerWrite > 0 ? b.cpuPerWrite / cpuPerWrite : nil,
         bareCPUPerWrite.flatMap { $0 > 0 ? b.cpuPerWrite / $0 : nil })
    }

    /// The round trips counted in `bins` equal bins from 0 to `top` (microseconds over `divisor`: the caller's unit),
    /// and how many lie above `top`.
    public func latencyHistogram(top: Double, bins: Int, divisor: Double = 1) -> (counts: [Int], above: Int) {
        let binWidth = top / Double(bins)
        var counts = [Int](repeating: 0, count: bins)
        var above = 0
        for ns in latencies {
            let v = Double(ns) / 1000 / divisor
            if v > top { above += 1 } else { counts[min(bins - 1, Int(v / binWidth))] += 1 }
        }
        return (counts, above)
    }

    /// The `p`th percentile of the round trips, in microseconds; nil without any.
    public func percentile(_ p: Double) -> Double? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return Double(sorted[max(0, min(sorted.count - 1, rank))]) / 1000
    }
}

/// The rounds of one batch call each (--batch): `write(handle:contentsOf:)` for Write Requests (one request at a
/// time on the wire, Vol 3 Part F §3.3.2), `writeWithoutResponse(handle:contentsOf:)` for Write Commands.
public struct BatchFigures: Sendable {
    public var rounds: [RoundFigures] = []
    /// Writes the peer confirmed: every request of a call that returned, or the counter's increase over each round
    /// (commands); nil when nothing tells.
    public var confirmed: Int?
    /// Write Commands: time the socket was full over the batch rounds, and how many sends found it full.
    public var blockedNanoseconds: UInt64?
    public var blockedWaits: Int?

    public init() {}

    /// The API the rounds called, as the result names it.
    public static func api(_ mode: BenchMode) -> String {
        mode == .withResponse ? "write(handle:contentsOf:)" : "writeWithoutResponse(handle:contentsOf:)"
    }

    public var writes: Int { rounds.reduce(0) { $0 + $1.writes } }
    public var seconds: Double { Double(rounds.reduce(0) { $0 + $1.nanoseconds }) / 1e9 }
    /// The median round's rate, and its CPU per write (the whole process).
    public var writesPerSecond: Double { median(rounds.map(\.writesPerSecond)) }
    public var cpuPerWrite: Double { median(rounds.map(\.cpuMicrosecondsPerWrite)) }
}

/// The figures of one run.
public struct BenchResult: Sendable {
    public var target: String
    public var handle: UInt16
    public var size: Int
    public var mtu: Int
    public var warmup: Int
    public var rounds: Int
    /// Where the bare socket loop ran; nil when it did not.
    public var bareLoop: BareLoopPlacement?
    /// What the ceilings were computed for (each mode's `ceiling`).
    public var radio: BenchRadio
    public var modes: [ModeFigures]
    /// The link the bench ran on, as the caller reports it (`BenchPreparation.linkJSON`), read before the first write.
    public var link: JSONValue = .null
    /// "link: handle 0x002A, 1M, 27-octet data length, 50 ms interval" or why it is not known.
    public var linkLine: String?
    /// What the size probe found when the default size was refused; nil otherwise.
    public var sizeProbe: SizeProbe?
    /// The signal that ended the run early ("SIGINT", "SIGTERM"): the figures are those of the rounds done.
    public var interruptedBy: String?

    /// Rounds measured, over every mode.
    public var roundsDone: Int { modes.reduce(0) { $0 + $1.rounds.count } }
}

/// What the size probe found: the default size `tried`, `refused` by the peer with 0x0D (nil when accepted), and
/// the largest size it accepted, which the bench then uses.
public struct SizeProbe: Sendable, Equatable {
    public var tried: Int
    public var refused: Int?
    public var chosen: Int
}

/// How far a mode's rounds disagree: the fastest round's writes/s over the slowest's. Above `limit` the median
/// stands on rounds that measured different things (a busy host, a link that changed), and the run says so.
public struct RoundSpread: Sendable, Equatable {
    public static let limit = 1.5
    public var slowest: Double
    public var fastest: Double
    public var ratio: Double { slowest > 0 ? fastest / slowest : .infinity }
    public var flagged: Bool { ratio > Self.limit }

    /// Nil for fewer than two rounds: one round has no spread.
    public init?(_ rates: [Double]) {
        guard rates.count >= 2, let lo = rates.min(), let hi = rates.max() else { return nil }
        slowest = lo
        fastest = hi
    }
}
