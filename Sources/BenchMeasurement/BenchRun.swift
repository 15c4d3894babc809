// One bench run (`mirror bench`): Write Requests and Write Commands through the GATT client (Core Spec 5.4 Vol 3
// Part G §4.9.3, §4.9.1), timed after a warm-up, in rounds that alternate with a bare socket loop moving the same
// PDUs over the same socket type without the ATT engine; figures are medians of the rounds. It prints nothing:
// the caller is asked and told through `BenchHooks`, and words the result.
import ATTStack
import GATTClient
import JSON
import LinkCeiling
import LinkCore

/// The connection a run measures, and what the caller knows of it.
public struct BenchConnection: Sendable {
    public var client: GATTClient
    /// The target as the result names it.
    public var target: String
    /// A unix: target: no radio, so no ceiling.
    public var isUnix: Bool
    /// The MTU the connection negotiated (the default size's when no bearer is open, and the ceiling's).
    public var mtu: Int
    /// Each Write Command's send limit.
    public var timeout: Duration

    public init(client: GATTClient, target: String, isUnix: Bool, mtu: Int, timeout: Duration) {
        self.client = client
        self.target = target
        self.isUnix = isUnix
        self.mtu = mtu
        self.timeout = timeout
    }
}

/// What the caller gives a run once the size probe is done, before the first timed write.
public struct BenchPreparation {
    /// The link's PHY, data length and interval for the ceiling; nil when not known (or unix:).
    public var link: LinkParameters?
    /// The link as the caller reports it, and its one line (BenchResult's `link`, `linkLine`).
    public var linkJSON: JSONValue
    public var linkLine: String?
    /// The bare loop's socket and where it is; nil for no bare loop.
    public var bare: (socket: BareSocket, placement: BareLoopPlacement)?

    public init(link: LinkParameters?, linkJSON: JSONValue, linkLine: String?,
                bare: (socket: BareSocket, placement: BareLoopPlacement)?) {
        self.link = link
        self.linkJSON = linkJSON
        self.linkLine = linkLine
        self.bare = bare
    }
}

/// What a run asks of its caller and tells it (the library prints nothing).
public struct BenchHooks {
    /// After the size probe, before the first timed write: the link it runs on and the bare loop's socket.
    public var prepare: () async throws -> BenchPreparation
    /// A phase's GATT error as the caller names it (the handle's characteristic).
    public var label: (GATTError) async -> GATTError
    /// The transport's backpressure so far: time sends waited on a full socket, and how many found it full.
    public var backpressure: () -> (blockedNanoseconds: UInt64, waits: Int)
    /// The default size was refused by the peer: the probe's finding, before the rounds.
    public var sizeProbed: (SizeProbe) -> Void
    /// After each round: the result of the rounds measured so far (what an interrupted run reports).
    public var roundDone: (BenchResult) -> Void

    public init(prepare: @escaping () async throws -> BenchPreparation,
                label: @escaping (GATTError) async -> GATTError,
                backpressure: @escaping () -> (blockedNanoseconds: UInt64, waits: Int),
                sizeProbed: @escaping (SizeProbe) -> Void, roundDone: @escaping (BenchResult) -> Void) {
        self.prepare = prepare
        self.label = label
        self.backpressure = backpressure
        self.sizeProbed = sizeProbed
        self.roundDone = roundDone
    }
}

/// The rounds measured so far, recorded after each one (`BenchHooks.roundDone`): what an interrupted run reports.
public final class BenchProgress: Sendable {
    private let last = Lock<BenchResult?>(nil)
    public init() {}
    public func record(_ r: BenchResult) { last.withLock { $0 = r } }
    public var result: BenchResult? { last.current }
}

/// A bench phase that failed ("the Write Request warm-up", "Write Command round 2 of 3"): the error as it is (a
/// GATT error named by `BenchHooks.label`), said to have happened there.
public struct BenchPhaseError: Error {
    public var phase: String
    public var underlying: any Error
    /// The phase's value size when the plan gave it (--size): a refused length then has a remedy.
    public var givenSize: Int?
}

/// What the bench itself finds wrong, apart from the GATT client's and the bare loop's errors.
public enum BenchFailure: Error, Equatable {
    /// The peer refused every length from 1 to `size` bytes on `handle` with ATT 0x0D.
    case noSizeAccepted(size: Int, handle: UInt16)
    /// The connection whose bearer (named) was to lend its socket ended before the bare loop's turn.
    case bearerEndedBeforeBareTurn(String)
    /// --bare-loop second-connection on an LE target: the link takes one ATT socket.
    case secondConnectionNeedsUnixTarget
    /// --bare-loop same-connection with no socket bearer under the GATT client to lend.
    case sameConnectionNeedsSocketBearer
}

/// The measurement: the run, and each of its loops (tools/gatt-bench times with the same loops).
public enum BenchRun {
    /// Measures `plan` on `connection`: the size probe (without --size), warm-ups, then each mode's rounds, each
    /// followed by the bare loop's round of as many writes; the ceilings judged for every result.
    public static func run(_ connection: BenchConnection, plan: BenchPlan, hooks: BenchHooks) async throws -> BenchResult {
        let client = connection.client
        // Every bearer takes the default size: the budget of the smallest open bearer's MTU (Part F §3.4.5.1).
        var size = plan.size ?? ATTMTU.writeValueLimit(client.bearers.filter { !$0.isClosed }.map(\.mtu).min() ?? connection.mtu)
        // Without --size, the warm-up's first Write Request tries that default: a peer that refuses it with 0x0D
        // (a characteristic's own length limit, as the mirror's cloudToken) gets the largest size it accepts.
        var sizeProbe: SizeProbe?
        var warmupDone = 0
        if plan.size == nil, plan.mode != .withoutResponse, plan.warmup > 0 {
            let probe = try await phase("the size probe (the warm-up's first Write Request)", hooks) {
                try await probeSize(client, handle: plan.handle, size: size)
            }
            if probe.refused != nil {
                sizeProbe = probe
                size = probe.chosen
                hooks.sizeProbed(probe)
            }
            warmupDone = 1
        } else if plan.size == nil, plan.warmup > 0 {
            // Write Commands only: a peer drops a Write Command it refuses without a word (Part F §3.4.5.3), so one
            // Write Request learns the length limit first. A characteristic that takes no Write Request (any other
            // error from the peer) keeps the default: nothing can tell.
            do {
                let probe = try await probeSize(client, handle: plan.handle, size: size)
                if probe.refused != nil {
                    sizeProbe = probe
                    size = probe.chosen
                    hooks.sizeProbed(probe)
                }
            } catch let error as GATTError where error.attributeError?.rejectedBy == .peer {
            } catch {
                throw BenchPhaseError(phase: "the size probe (one Write Request before the Write Commands)", underlying: error, givenSize: nil)
            }
        }
        // The link it runs on, read once before the first write (LE Read PHY goes out here, not during a round),
        // and the bare loop's socket, whose rounds alternate with the client's.
        let preparation = try await hooks.prepare()
        let value = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        let bare = preparation.bare?.socket
        defer { bare?.close() }
        let givenSize = plan.size != nil ? size : nil
        let handle = plan.handle, counter = plan.counter, warmup = plan.warmup
        var modes: [ModeFigures] = []
        let radio = BenchRadio(isUnix: connection.isUnix, link: preparation.link, mtu: connection.mtu)
        // The result of the modes and rounds measured so far: at the end, and after each round for an interrupt.
        let result = { (measured: [ModeFigures]) -> BenchResult in
            var ms = measured
            for i in ms.indices {
                ms[i].ceiling = radio.verdict(mode: ms[i].mode, size: size, measuredWritesPerSecond: ms[i].writesPerSecond)
            }
            return BenchResult(target: connection.target, handle: plan.handle, size: size, mtu: connection.mtu,
                               warmup: plan.warmup, rounds: plan.rounds, bareLoop: preparation.bare?.placement, radio: radio, modes: ms,
                               link: preparation.linkJSON, linkLine: preparation.linkLine, sizeProbe: sizeProbe)
        }
        if plan.mode != .withoutResponse {
            var figures = ModeFigures(mode: .withResponse, size: size)
            if plan.batch { figures.batch = BatchFigures() }
            // Plain `client.write` calls, as `write`, the shell and `scan` make them, from a task that prefers the
            // link's event loop (as every command's task does): each continues on the loop when its response is read.
            try await phase("the Write Request warm-up", hooks, givenSize: givenSize) {
                try await withTaskExecutorPreference(client.eventLoop) {
                    for _ in warmupDone..<plan.warmup { try await client.write(handle: plan.handle, value: value) }
                }
            }
            if let bare {
                _ = try await phase("the bare loop's Write Request warm-up", hooks, givenSize: givenSize) {
                    try await bare.run { try $0.requests(handle: handle, value: value, writes: warmup) }
                }
            }
            // --bearers N: one writer per open bearer at once, each round followed by one of a single writer.
            let writers = client.openBearerCount
            if writers > 1 { figures.bearers = BearerFigures(writers: writers, perBearer: client.bearers.map { _ in 0 }) }
            for index in 0..<plan.rounds {
              try await phase("Write Request round \(index + 1) of \(plan.rounds)", hooks, givenSize: givenSize) {
                let (round, latencies): (RoundFigures, [UInt64])
                if writers > 1 {
                    let before = try await readCounter(client, counter)
                    // The writers prefer the loop too: each one's first request is placed there before the next
                    // writer starts, so they are at once from the first write (on the pool one could finish first).
                    let parallel = try await withTaskExecutorPreference(client.eventLoop) {
                        try await measureRequests(client, writers: writers, plan: plan, value: value)
                    }
                    round = parallel.round
                    latencies = parallel.latencies
                    figures.series.addRound(completions: parallel.completions, nanoseconds: round.nanoseconds)
                    figures.bearers!.add(parallel.perBearer)
                    if let before, let after = try await readCounter(client, counter) {
                        figures.bearers!.peerCounted = (figures.bearers!.peerCounted ?? 0) + after - before
                    }
                    figures.bearers!.oneBearer.append(try await withTaskExecutorPreference(client.eventLoop) {
                        try await measureRequests(client, plan: plan, value: value)
                    }.0)
                } else {
                    (round, latencies) = try await withTaskExecutorPreference(client.eventLoop) {
                        try await measureRequests(client, plan: plan, value: value)
                    }
                    figures.series.addRound(latencies: latencies)
                }
                figures.rounds.append(round)
                figures.latencies += latencies
                if plan.batch {
                    figures.batch!.rounds.append(try await phase("the \(BatchFigures.api(.withResponse)) batch of round \(index + 1)", hooks, givenSize: givenSize) {
                        try await measureRequestBatch(client, handle: handle, value: value, writes: round.writes)
                    })
                }
                if let bare {
                    figures.bare.append(try await bare.run { try $0.requests(handle: handle, value: value, writes: round.writes) })
                }
                var sofar = figures
                sofar.confirmed = sofar.writes
                hooks.roundDone(result(modes + [sofar]))
              }
            }
            figures.confirmed = figures.writes
            if let writes = figures.batch?.writes { figures.batch!.confirmed = writes }
            // Each bare Write Request counts only once its Write Response arrived.
            if bare != nil { figures.bareConfirmed = figures.bare.reduce(0) { $0 + $1.writes } }
            modes.append(figures)
        }
        if plan.mode != .withResponse {
            var figures = ModeFigures(mode: .withoutResponse, size: size)
            if plan.batch { figures.batch = BatchFigures() }
            var batchCounted: Int? = counter == nil ? nil : 0
            var batchBlocked: (nanoseconds: UInt64, waits: Int) = (0, 0)
            try await phase("the Write Command warm-up", hooks, givenSize: givenSize) {
                try await withTaskExecutorPreference(client.eventLoop) {
                    for _ in 0..<plan.warmup { try await client.writeWithoutResponse(handle: plan.handle, value: value, timeout: connection.timeout) }
                }
                if let bare { _ = try await bare.run { try $0.commands(handle: handle, value: value, writes: warmup, counter: counter) } }
            }
            let before = try await drain(client, plan: plan)
            let pressureBefore = hooks.backpressure()
            var bareCounted: Int? = counter == nil ? nil : 0
            for index in 0..<plan.rounds {
              try await phase("Write Command round \(index + 1) of \(plan.rounds)", hooks, givenSize: givenSize) {
                try await measureCommands(client, timeout: connection.timeout, plan: plan, value: value, into: &figures)
                if plan.batch {
                    let writes = figures.rounds.last!.writes
                    let pressure = hooks.backpressure()
                    let (round, counted) = try await phase("the \(BatchFigures.api(.withoutResponse)) batch of round \(index + 1)", hooks, givenSize: givenSize) {
                        try await measureCommandBatch(client, timeout: connection.timeout, plan: plan, value: value, writes: writes)
                    }
                    let after = hooks.backpressure()
                    batchBlocked.nanoseconds += after.blockedNanoseconds - pressure.blockedNanoseconds
                    batchBlocked.waits += after.waits - pressure.waits
                    figures.batch!.rounds.append(round)
                    if let counted, let sum = batchCounted { batchCounted = sum + counted }
                }
                if let bare {
                    let writes = figures.rounds.last!.writes
                    let (round, counted) = try await bare.run { try $0.commands(handle: handle, value: value, writes: writes, counter: counter) }
                    figures.bare.append(round)
                    if let counted, let sum = bareCounted { bareCounted = sum + counted }
                }
                hooks.roundDone(result(modes + [figures]))
              }
            }
            let pressureAfter = hooks.backpressure()
            // The batch rounds' waits are theirs, not the plain writes'.
            figures.blockedNanoseconds = pressureAfter.blockedNanoseconds - pressureBefore.blockedNanoseconds - batchBlocked.nanoseconds
            figures.blockedWaits = pressureAfter.waits - pressureBefore.waits - batchBlocked.waits
            if plan.batch {
                figures.batch!.blockedNanoseconds = batchBlocked.nanoseconds
                figures.batch!.blockedWaits = batchBlocked.waits
                figures.batch!.confirmed = batchCounted
            }
            if bare != nil { figures.bareConfirmed = bareCounted }
            // The counter counts the bare loop's and the batch rounds' commands too (same handle, same peer): take
            // them out.
            if let after = try await drain(client, plan: plan), let before {
                figures.confirmed = after - before - (figures.bareConfirmed ?? 0) - (batchCounted ?? 0)
            }
            modes.append(figures)
        }
        return result(modes)
    }

    /// Runs `body` as the run's `name`d phase: an error from it is thrown as a `BenchPhaseError` naming the phase
    /// (a GATT error named by the hooks first), with the size when the plan gave it.
    static func phase<T>(_ name: String, _ hooks: BenchHooks, givenSize: Int? = nil,
                         _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as GATTError {
            throw BenchPhaseError(phase: name, underlying: await hooks.label(error), givenSize: givenSize)
        } catch let error as BenchPhaseError {
            throw error
        } catch {
            throw BenchPhaseError(phase: name, underlying: error, givenSize: givenSize)
        }
    }

    /// One Write Request of `size` bytes: true when answered, false when the peer refused the length (0x0D).
    static func accepts(_ client: GATTClient, handle: UInt16, size: Int) async throws(GATTError) -> Bool {
        do {
            try await client.write(handle: handle, value: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) })
            return true
        } catch {
            guard let a = error.attributeError, a.code == .invalidAttributeValueLength, a.rejectedBy == .peer else { throw error }
            return false
        }
    }

    /// Writes `size` bytes; when the peer refuses that length (0x0D Invalid Attribute Value Length), finds the
    /// largest length it accepts by halving the interval (about log2(size) Write Requests).
    static func probeSize(_ client: GATTClient, handle: UInt16, size: Int) async throws -> SizeProbe {
        if try await accepts(client, handle: handle, size: size) { return SizeProbe(tried: size, refused: nil, chosen: size) }
        var accepted = 0, refused = size
        while refused - accepted > 1 {
            let mid = (accepted + refused) / 2
            if try await accepts(client, handle: handle, size: mid) { accepted = mid } else { refused = mid }
        }
        guard accepted > 0 else { throw BenchFailure.noSizeAccepted(size: size, handle: handle) }
        return SizeProbe(tried: size, refused: size, chosen: accepted)
    }

    /// Reads the peer's write counter (little-endian, 1-8 bytes).
    static func readCounter(_ client: GATTClient, _ handle: UInt16?) async throws -> Int? {
        guard let handle else { return nil }
        let bytes = try await client.read(handle: handle)
        return bytes.prefix(8).enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
    }

    /// One round of Write Requests, each awaited: its rate and every round trip.
    public static func measureRequests(_ client: GATTClient, plan: BenchPlan, value: [UInt8]) async throws -> (RoundFigures, [UInt64]) {
        var latencies: [UInt64] = []
        latencies.reserveCapacity(plan.count ?? 100_000)
        let deadline = plan.duration.map { monotonicNanoseconds() + UInt64($0 * 1e9) }
        let watch = Stopwatch()
        let start = watch.wallStart
        var now = start
        var writes = 0
        while true {
            if let count = plan.count, writes >= count { break }
            if let deadline, now >= deadline { break }
            try await client.write(handle: plan.handle, value: value)
            let after = monotonicNanoseconds()
            latencies.append(after - now)
            now = after
            writes += 1
        }
        return (RoundFigures(writes: writes, watch.elapsed(at: now)), latencies)
    }

    /// One round of Write Requests by `writers` writers at once (the client spreads them over its bearers), the
    /// round's count split between them: its rate, every round trip, each write's completion since the round's
    /// start (sorted), and the requests each bearer answered in the round.
    static func measureRequests(_ client: GATTClient, writers: Int, plan: BenchPlan, value: [UInt8]) async throws
        -> (round: RoundFigures, latencies: [UInt64], completions: [UInt64], perBearer: [Int]) {
        let answeredBefore = client.bearers.map(\.requestsAnswered)
        let deadline = plan.duration.map { monotonicNanoseconds() + UInt64($0 * 1e9) }
        let watch = Stopwatch()
        let start = watch.wallStart
        let handle = plan.handle
        let parts = try await withThrowingTaskGroup(of: (latencies: [UInt64], completions: [UInt64]).self) { group in
            for w in 0..<writers {
                let share = plan.count.map { $0 / writers + (w < $0 % writers ? 1 : 0) }
                group.addTask {
                    var latencies: [UInt64] = [], completions: [UInt64] = []
                    var now = start
                    while true {
                        if let share, latencies.count >= share { break }
                        if let deadline, now >= deadline { break }
                        try await client.write(handle: handle, value: value)
                        let after = monotonicNanoseconds()
                        latencies.append(after - now)
                        completions.append(after - start)
                        now = after
                    }
                    return (latencies, completions)
                }
            }
            var all: [(latencies: [UInt64], completions: [UInt64])] = []
            for try await part in group { all.append(part) }
            return all
        }
        let end = monotonicNanoseconds()
        let answeredAfter = client.bearers.map(\.requestsAnswered)
        let perBearer = answeredAfter.indices.map { answeredAfter[$0] - (answeredBefore.indices.contains($0) ? answeredBefore[$0] : 0) }
        let latencies = parts.flatMap(\.latencies)
        let round = RoundFigures(writes: latencies.count, watch.elapsed(at: end))
        return (round, latencies, parts.flatMap(\.completions).sorted(), perBearer)
    }

    /// One round of Write Commands, timed until the peer answered a request sent after the last one (it handles
    /// PDUs in order), so the rate is what the peer took in, not what the kernel buffered.
    public static func measureCommands(_ client: GATTClient, timeout: Duration?, plan: BenchPlan, value: [UInt8],
                                       into figures: inout ModeFigures) async throws {
        let deadline = plan.duration.map { monotonicNanoseconds() + UInt64($0 * 1e9) }
        let watch = Stopwatch()
        let start = watch.wallStart
        var writes = 0
        var series = figures.series
        // From a task that prefers the link's event loop, as every command's writes: each Write Command is sent on
        // the loop's thread, with no hop.
        try await withTaskExecutorPreference(client.eventLoop) {
            while true {
                if let count = plan.count, writes >= count { break }
                // The series' sample, and the deadline, every 8th write: CLOCK_MONOTONIC is read through the vDSO (no
                // syscall), some 25 ns per 8 writes of about a microsecond each; a sample is an add into the bucket.
                if writes & 7 == 0 {
                    let now = monotonicNanoseconds()
                    series.sample(writesSoFar: writes, elapsed: now - start)
                    if let deadline, now >= deadline { break }
                }
                try await client.writeWithoutResponse(handle: plan.handle, value: value, timeout: timeout)
                writes += 1
            }
        }
        figures.series = series
        figures.series.sample(writesSoFar: writes, elapsed: monotonicNanoseconds() - start)
        _ = try await drain(client, plan: plan)
        let round = RoundFigures(writes: writes, watch.elapsed())
        figures.rounds.append(round)
        figures.series.closeRound(nanoseconds: round.nanoseconds)
    }

    /// One round of `writes` Write Requests through one `write(handle:contentsOf:)` call (each request sent when
    /// the one before it was answered, Part F §3.3.2): its rate and CPU. A failure throws the value's GATT error.
    public static func measureRequestBatch(_ client: GATTClient, handle: UInt16, value: [UInt8], writes: Int) async throws -> RoundFigures {
        let values = Array(repeating: value, count: writes)
        let watch = Stopwatch()
        do {
            try await client.write(handle: handle, contentsOf: values)
        } catch {
            throw error.error
        }
        return RoundFigures(writes: writes, watch.elapsed())
    }

    /// One round of `writes` Write Commands through one `writeWithoutResponse(handle:contentsOf:)` call, timed as
    /// `measureCommands` is, until the drain's answer; with a counter, the peer's count of them (read before,
    /// untimed, and by the drain).
    public static func measureCommandBatch(_ client: GATTClient, timeout: Duration?, plan: BenchPlan, value: [UInt8],
                                           writes: Int) async throws -> (RoundFigures, counted: Int?) {
        let values = Array(repeating: value, count: writes)
        let before = try await readCounter(client, plan.counter)
        let watch = Stopwatch()
        do {
            try await client.writeWithoutResponse(handle: plan.handle, contentsOf: values, timeout: timeout)
        } catch {
            throw error.error
        }
        let after = try await drain(client, plan: plan)
        let round = RoundFigures(writes: writes, watch.elapsed())
        guard let before, let after else { return (round, nil) }
        return (round, after - before)
    }

    /// A request whose answer proves every earlier command was handled: the counter's read when there is one
    /// (returning its value), else a Read Request of the bench handle (its answer, even an error, is enough).
    static func drain(_ client: GATTClient, plan: BenchPlan) async throws -> Int? {
        if plan.counter != nil { return try await readCounter(client, plan.counter) }
        do {
            _ = try await client.read(handle: plan.handle)
        } catch {
            guard case .attribute = error else { throw error }
        }
        return nil
    }
}
