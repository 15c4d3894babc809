// The write benchmark behind `mirror bench`: Write Requests and Write Commands through the GATT client
// (Core Spec 5.4 Vol 3 Part G §4.9.3, §4.9.1), timed after a warm-up, in rounds that alternate with a bare socket
// loop moving the same PDUs over the same socket type without the ATT engine; figures are medians of the rounds.
import BenchMeasurement
import ATTStack
import BareATT
import LinuxBluetooth
import LinkCore
import GATTClient
import JSON
import LinkCeiling

#if canImport(Glibc)
import Glibc
#endif

/// Which write modes `mirror bench` measures.
enum BenchMode: String, Sendable, CaseIterable {
    case withResponse = "with-response"
    case withoutResponse = "without-response"
    case both
}

/// What to measure.
struct BenchPlan: Sendable {
    var handle: UInt16
    /// Value bytes per write; nil for the MTU's budget.
    var size: Int?
    /// Writes per mode and round; nil when `duration` is set.
    var count: Int?
    /// Seconds per mode and round, instead of a count.
    var duration: Double?
    var warmup: Int
    var mode: BenchMode
    /// A characteristic whose value is the peer's little-endian count of writes received, read around each mode.
    var counter: UInt16?
    var rounds: Int
    /// Where the bare socket loop runs (--bare-loop); nil for the target's default: a second connection for
    /// unix: targets, the same connection for LE ones.
    var bareLoop: BareLoopOption? = nil
}

/// `--bare-loop`: where `mirror bench` runs its bare socket loop, or not at all.
enum BareLoopOption: String, Sendable, CaseIterable {
    case secondConnection = "second-connection"
    case sameConnection = "same-connection"
    case none
}

/// One timed run of one mode: wall time, and the CPU time of the whole process (every thread), which stays
/// steady on a loaded machine where wall time does not.
struct RoundFigures: Sendable {
    var writes: Int
    var nanoseconds: UInt64
    var cpuNanoseconds: UInt64
    var writesPerSecond: Double { Double(writes) / (Double(nanoseconds) / 1e9) }
    var cpuMicrosecondsPerWrite: Double { Double(cpuNanoseconds) / 1000 / Double(max(1, writes)) }

    init(writes: Int, nanoseconds: UInt64, cpuNanoseconds: UInt64) {
        self.writes = writes
        self.nanoseconds = nanoseconds
        self.cpuNanoseconds = cpuNanoseconds
    }

    /// A round of `writes` timed by a `Stopwatch`.
    init(writes: Int, _ elapsed: Elapsed) {
        self.init(writes: writes, nanoseconds: elapsed.wallNanoseconds, cpuNanoseconds: elapsed.cpuNanoseconds)
    }
}

/// Write Requests over several bearers (`--bearers N`, Core Spec 5.4 Vol 3 Part F §3.2.11): one writer per open
/// bearer at once, the client spreading them; and, in the same run, rounds of one writer (whose requests all go on
/// CID 4: the client keeps an idle unenhanced bearer), so the gain is a ratio measured in one process.
struct BearerFigures: Sendable {
    /// Writers run at once: one per bearer open when the bench started.
    var writers: Int
    /// Write Requests answered on each bearer (`GATTBearer.requestsAnswered`, by index) over the measured rounds.
    var perBearer: [Int] = []
    /// The peer's count of writes over those rounds (--counter, or --loopback's), nil when nothing tells.
    var peerCounted: Int?
    /// The rounds of one writer, alternating with the parallel ones.
    var oneBearer: [RoundFigures] = []

    var total: Int { perBearer.reduce(0, +) }

    /// Adds one round's counts by bearer (a bearer added since counts from its index).
    mutating func add(_ round: [Int]) {
        if round.count > perBearer.count { perBearer += Array(repeating: 0, count: round.count - perBearer.count) }
        for (i, n) in round.enumerated() { perBearer[i] += n }
    }

    var oneBearerWritesPerSecond: Double { median(oneBearer.map(\.writesPerSecond)) }

    func json(writesPerSecond: Double) -> JSONValue {
        let one = oneBearerWritesPerSecond
        return .object([
            ("writers", .int(writers)),
            ("perBearer", .array(perBearer.enumerated().map { .object([("index", .int($0)), ("writes", .int($1))]) })),
            ("total", .int(total)),
            ("peerCounted", peerCounted.map { .int($0) } ?? .null),
            ("oneBearer", .object([("writes", .int(oneBearer.reduce(0) { $0 + $1.writes })),
                                   ("writesPerSecond", .double(one.rounded()))])),
            ("ratioToOneBearer", one > 0 ? .double((writesPerSecond / one * 1000).rounded() / 1000) : .null),
        ])
    }

    func text(writesPerSecond: Double) -> [String] {
        let counts = perBearer.enumerated().map { "bearer \($0) \($1)" }.joined(separator: ", ")
        let one = oneBearerWritesPerSecond
        return ["  \(writers) writers at once on \(perBearer.count) bearers: \(counts); total \(total)"
                    + (peerCounted.map { ", peer counted \($0)" } ?? ""),
                "  one writer, one bearer (same run): \(Int(one.rounded())) writes/s; \(writers) bearers / one = "
                    + (one > 0 ? format2(writesPerSecond / one) : "unknown")]
    }
}

/// The figures of one mode over every round.
struct ModeFigures: Sendable {
    var mode: BenchMode
    var size: Int
    var rounds: [RoundFigures] = []
    /// Round trips of Write Requests over every round, in nanoseconds (empty for Write Commands).
    var latencies: [UInt64] = []
    /// Write Commands: time the socket was full (EAGAIN until POLLOUT), and how many sends found it full.
    var blockedNanoseconds: UInt64?
    var blockedWaits: Int?
    /// Writes the peer confirmed: Write Responses received (requests), or the counter's increase (commands).
    var confirmed: Int?
    var bare: [RoundFigures] = []
    /// The bare loop's writes the peer confirmed: Write Responses (requests), or the counter's increase over each
    /// of its rounds (commands, with --counter); nil when nothing tells.
    var bareConfirmed: Int?
    /// Writes per 100 ms over the measured rounds, laid end to end.
    var series = WriteSeries()
    /// The radio's ceiling for this mode and the fraction of it reached; nil until the run is judged.
    var ceiling: CeilingVerdict?
    /// Write Requests over several bearers (--bearers N with N > 1 open); nil over one.
    var bearers: BearerFigures?

    var writes: Int { rounds.reduce(0) { $0 + $1.writes } }
    var seconds: Double { Double(rounds.reduce(0) { $0 + $1.nanoseconds }) / 1e9 }
    /// The median round's rate.
    var writesPerSecond: Double { median(rounds.map(\.writesPerSecond)) }
    var bytesPerSecond: Double { writesPerSecond * Double(size) }
    var bareWritesPerSecond: Double? { bare.isEmpty ? nil : median(bare.map(\.writesPerSecond)) }
    var ratio: Double? { bareWritesPerSecond.map { writesPerSecond / $0 } }
    /// CPU per write, median of the rounds (the whole process: with --loopback that includes the peer).
    var cpuPerWrite: Double { median(rounds.map(\.cpuMicrosecondsPerWrite)) }
    var bareCPUPerWrite: Double? { bare.isEmpty ? nil : median(bare.map(\.cpuMicrosecondsPerWrite)) }
    /// How far the rounds' writes/s disagree (nil with one round).
    var spread: RoundSpread? { RoundSpread(rounds.map(\.writesPerSecond)) }

    func percentile(_ p: Double) -> Double? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return Double(sorted[max(0, min(sorted.count - 1, rank))]) / 1000
    }

    var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("mode", .string(mode.rawValue)), ("writes", .int(writes)), ("bytes", .int(writes * size)),
            ("seconds", .double(seconds)), ("bytesPerSecond", .double(bytesPerSecond.rounded())),
            ("writesPerSecond", .double(writesPerSecond.rounded())),
            ("cpuMicrosecondsPerWrite", .double((cpuPerWrite * 1000).rounded() / 1000)),
        ]
        if !latencies.isEmpty {
            fields.append(("latencyMicroseconds", .object([
                ("p50", .double(percentile(50)!)), ("p90", .double(percentile(90)!)),
                ("p99", .double(percentile(99)!)), ("max", .double(percentile(100)!)),
            ])))
        }
        if let blockedNanoseconds, let blockedWaits {
            fields.append(("backpressure", .object([("seconds", .double(Double(blockedNanoseconds) / 1e9)),
                                                     ("waits", .int(blockedWaits))])))
        }
        fields.append(("confirmed", confirmed.map { .int($0) } ?? .null))
        if let bareRate = bareWritesPerSecond, let ratio {
            fields.append(("bare", .object([
                ("writes", .int(bare.reduce(0) { $0 + $1.writes })),
                ("bytesPerSecond", .double((bareRate * Double(size)).rounded())),
                ("writesPerSecond", .double(bareRate.rounded())),
                ("cpuMicrosecondsPerWrite", .double(((bareCPUPerWrite ?? 0) * 1000).rounded() / 1000)),
                ("confirmed", bareConfirmed.map { .int($0) } ?? .null),
            ])))
            fields.append(("ratioToBare", .double((ratio * 1000).rounded() / 1000)))
            if let bareCPU = bareCPUPerWrite, bareCPU > 0 {
                fields.append(("cpuRatioToBare", .double((cpuPerWrite / bareCPU * 1000).rounded() / 1000)))
            }
        }
        if let ceiling { fields.append(("ceiling", ceiling.json)) }
        if let bearers { fields.append(("bearers", bearers.json(writesPerSecond: writesPerSecond))) }
        if let spread { fields.append(("roundSpread", spread.json)) }
        fields.append(("series", series.json(size: size)))
        return .object(fields)
    }

    var text: [String] {
        let title = mode == .withResponse ? "with response (Write Request):" : "without response (Write Command):"
        var line = "\(title) \(rate(bytesPerSecond))/s, \(Int(writesPerSecond.rounded())) writes/s (\(writes) writes in \(seconds3(seconds)) s)"
        if let confirmed { line += ", peer confirmed \(confirmed)" }
        var lines = [line]
        if !latencies.isEmpty {
            lines.append("  round trip: p50 \(micro(percentile(50)!)), p90 \(micro(percentile(90)!)), p99 \(micro(percentile(99)!)), max \(micro(percentile(100)!))")
        }
        if let blockedNanoseconds, let blockedWaits {
            lines.append("  waiting on backpressure: \(seconds3(Double(blockedNanoseconds) / 1e9)) s (\(blockedWaits) send\(blockedWaits == 1 ? "" : "s") found the socket full)")
        }
        if let bearers { lines += bearers.text(writesPerSecond: writesPerSecond) }
        lines.append("  CPU per write: \(format2(cpuPerWrite)) µs (this process, every thread)")
        if let bareRate = bareWritesPerSecond, let ratio {
            var bareLine = "  bare socket loop: \(rate(bareRate * Double(size)))/s, \(Int(bareRate.rounded())) writes/s; mirror/bare = \(format2(ratio))"
            if let bareCPU = bareCPUPerWrite {
                bareLine += "; CPU per write \(format2(bareCPU)) µs, mirror/bare = \(format2(cpuPerWrite / max(bareCPU, 0.001)))"
            }
            if let bareConfirmed { bareLine += "; peer confirmed \(bareConfirmed)" }
            lines.append(bareLine)
        }
        if let spread { lines.append(spread.text) }
        if let warning = series.tooShortWarning { lines.append("  " + warning) }
        if let ceiling { lines.append(ceiling.text) }
        return lines
    }
}

/// Where `mirror bench` runs its bare socket loop.
enum BareLoopPlacement: String, Sendable {
    /// unix: targets: a second connection to the same peer, its rounds alternating with the CLI's.
    case secondConnection = "second-connection"
    /// LE targets: the same connection's socket, lent by the GATT client's bearer for each of the loop's turns.
    case sameConnection = "same-connection"

    var describe: String {
        switch self {
        case .secondConnection: return "a second connection to the same peer, rounds alternating with mirror's"
        case .sameConnection: return "this connection's socket, lent by mirror's bearer round by round (an LE link takes one ATT socket)"
        }
    }
}

/// The figures of one run.
struct BenchResult: Sendable {
    var target: String
    var handle: UInt16
    var size: Int
    var mtu: Int
    var warmup: Int
    var rounds: Int
    /// Where the bare socket loop ran; nil when it did not.
    var bareLoop: BareLoopPlacement?
    /// What the ceilings were computed for (each mode's `ceiling`).
    var radio: BenchRadio
    var modes: [ModeFigures]
    /// The link the bench ran on (Session.linkJSON), read before the first write.
    var link: JSONValue = .null
    /// "link: handle 0x002A, 1M, 27-octet data length, 50 ms interval" or why it is not known.
    var linkLine: String?
    /// What the size probe found when the default size was refused; nil otherwise.
    var sizeProbe: SizeProbe?
    /// The signal that ended the run early ("SIGINT", "SIGTERM"): the figures are those of the rounds done.
    var interruptedBy: String?

    var json: JSONValue {
        .object([
            ("target", .string(target)), ("handle", .int(Int(handle))), ("size", .int(size)), ("mtu", .int(mtu)),
            ("warmup", .int(warmup)), ("rounds", .int(rounds)),
            ("bareLoop", bareLoop.map { .string($0.rawValue) } ?? .null), ("modes", .array(modes.map(\.json))),
            ("link", link),
        ] + (sizeProbe.map { [("sizeProbe", $0.json)] } ?? [])
          + (interruptedBy.map { [("interrupted", .object([("signal", .string($0)), ("roundsDone", .int(roundsDone))]))] } ?? []))
    }

    /// Rounds measured, over every mode.
    var roundsDone: Int { modes.reduce(0) { $0 + $1.rounds.count } }

    var text: [String] {
        ["bench \(target) handle \(ATTHex.handle(handle)): \(size)-byte values, MTU \(mtu), \(warmup) warm-up writes, median of \(rounds) round\(rounds == 1 ? "" : "s")"]
            + (interruptedBy.map { ["interrupted by \($0) after \(roundsDone) round\(roundsDone == 1 ? "" : "s") (of \(rounds) per mode): the figures are those of the rounds done"] } ?? [])
            + (linkLine.map { [$0] } ?? [])
            + (bareLoop.map { ["bare socket loop: \($0.describe)"] } ?? [])
            + modes.flatMap(\.text)
    }
}

/// The rounds measured so far, recorded after each one: what an interrupted bench prints (README: SIGINT and SIGTERM).
final class BenchProgress: Sendable {
    private let last = Lock<BenchResult?>(nil)
    func record(_ r: BenchResult) { last.withLock { $0 = r } }
    var result: BenchResult? { last.current }
}

/// A bench phase that failed ("the Write Request warm-up", "Write Command round 2 of 3"): the error as it is,
/// said to have happened there, with what to do where the bench knows.
struct PhaseError: Error, Sendable {
    var phase: String
    var underlying: any Error
    var hint: String?
}

/// What the size probe found: the default size `tried`, `refused` by the peer with 0x0D (nil when accepted), and
/// the largest size it accepted, which the bench then uses.
struct SizeProbe: Sendable, Equatable {
    var tried: Int
    var refused: Int?
    var chosen: Int

    func text(handle: UInt16) -> String {
        "the peer refused \(tried)-byte values on \(ATTHex.handle(handle)) (ATT error 0x0D Invalid Attribute Value Length, its own limit); benching with \(chosen)-byte values, the largest it accepted (give --size to choose)"
    }

    var json: JSONValue {
        .object([("tried", .int(tried)), ("refused", refused.map { .int($0) } ?? .null), ("chosen", .int(chosen))])
    }
}

/// The bench's line about its link: what the ceiling is computed for, or which value is missing for one.
func benchLinkLine(_ s: LinkState, ceilingInput: LinkParameters?) -> String {
    let handle = s.handle.value.map { "handle \(ATTHex.handle($0)), " } ?? ""
    if let c = ceilingInput { return "link: \(handle)\(c.description)" }
    let missing = [("interval", s.intervalMilliseconds.unknownReason), ("TX PHY", s.txPHY.unknownReason),
                   ("data length", s.dataLength.unknownReason)].compactMap { name, why in why.map { "\(name) unknown (\($0))" } }
    return "link: \(handle)" + (missing.isEmpty ? "not known" : missing.joined(separator: "; "))
}

/// How far a mode's rounds disagree: the fastest round's writes/s over the slowest's. Above `limit` the median
/// stands on rounds that measured different things (a busy host, a link that changed), and the run says so.
struct RoundSpread: Sendable, Equatable {
    static let limit = 1.5
    var slowest: Double
    var fastest: Double
    var ratio: Double { slowest > 0 ? fastest / slowest : .infinity }
    var flagged: Bool { ratio > Self.limit }

    /// Nil for fewer than two rounds: one round has no spread.
    init?(_ rates: [Double]) {
        guard rates.count >= 2, let lo = rates.min(), let hi = rates.max() else { return nil }
        slowest = lo
        fastest = hi
    }

    var json: JSONValue {
        .object([("slowestWritesPerSecond", .double(slowest.rounded())), ("fastestWritesPerSecond", .double(fastest.rounded())),
                 ("ratio", ratio.isFinite ? .double((ratio * 1000).rounded() / 1000) : .null), ("limit", .double(Self.limit)),
                 ("flagged", .bool(flagged))])
    }

    var text: String {
        let r = ratio.isFinite ? format2(ratio) + "x" : "unbounded (a round wrote nothing)"
        var line = "  rounds: slowest \(Int(slowest.rounded())), fastest \(Int(fastest.rounded())) writes/s, spread \(r)"
        if flagged {
            line += ": over \(format2(Self.limit))x, the rounds disagree (a busy host or a changing link): the median is not a steady figure; run again or longer (--duration)"
        }
        return line
    }
}

enum Bench {
    /// `link`: the LE link's PHY, data length and interval as measured (its MTU is replaced by the session's);
    /// nil when they are not known. The ceilings come from it (never for a unix: target: no radio).
    /// `handle` and `counter` (--handle, --counter), when given, replace the plan's, resolved on the connection.
    static func run(target: TargetArgument, plan: BenchPlan, inv: Invocation, link: LinkParameters? = nil,
                    handle: CharacteristicReference? = nil, counter: CharacteristicReference? = nil,
                    progress: BenchProgress? = nil) async throws -> BenchResult {
        // The same-connection bare loop borrows the bearer's socket for each turn (`ATTBearer.lend`).
        let session = try await Session.open(target, inv)
        defer { session.close() }
        var plan = plan
        if let handle { plan.handle = try await session.resolve(handle, command: "bench") }
        if let counter { plan.counter = try await session.resolve(counter, command: "bench") }
        do {
            return try await run(session, target: target, plan: plan, inv: inv, link: link, progress: progress)
        } catch let error as GATTError {
            throw await session.labelled(error)
        }
    }

    static func run(_ session: Session, target: TargetArgument, plan: BenchPlan, inv: Invocation,
                    link: LinkParameters? = nil, progress: BenchProgress? = nil) async throws -> BenchResult {
        let client = session.client
        // Every bearer takes the default size: the budget of the smallest open bearer's MTU (Part F §3.4.5.1).
        var size = plan.size ?? ATTMTU.writeValueLimit(client.bearers.filter { !$0.isClosed }.map(\.mtu).min() ?? session.mtu)
        // Without --size, the warm-up's first Write Request tries that default: a peer that refuses it with 0x0D
        // (a characteristic's own length limit, as the mirror's cloudToken) gets the largest size it accepts.
        var sizeProbe: SizeProbe?
        var warmupDone = 0
        if plan.size == nil, plan.mode != .withoutResponse, plan.warmup > 0 {
            let probe = try await phase("the size probe (the warm-up's first Write Request)", session) {
                try await probeSize(client, handle: plan.handle, size: size)
            }
            if probe.refused != nil {
                sizeProbe = probe
                size = probe.chosen
                inv.console.err("bench: \(probe.text(handle: plan.handle))")
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
                    inv.console.err("bench: \(probe.text(handle: plan.handle))")
                }
            } catch let error as GATTError where error.attributeError?.rejectedBy == .peer {
            } catch {
                throw PhaseError(phase: "the size probe (one Write Request before the Write Commands)", underlying: error, hint: nil)
            }
        }
        // The link it runs on, read once before the first write (LE Read PHY goes out here, not during a round).
        let linkState = session.link?.state()
        let link = link ?? linkState?.ceilingInput(mtu: session.mtu)
        let linkJSON = session.linkJSON(linkState)
        let linkLine = linkState.map { benchLinkLine($0, ceilingInput: link) }
        let value = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        // The bare loop's rounds alternate with the CLI's. For unix: targets it has its own connection to the same
        // peer, with the same MTU. An LE link takes one ATT socket only (a second connect on CID 4 to the same peer
        // is EBUSY: the kernel's l2cap_chan_connect finds the fixed channel taken), so there the bearer lends the
        // GATT client's own socket to the bare loop for each of its turns: one owner at a time.
        let choice = plan.bareLoop ?? (target.isUnix ? .secondConnection : .sameConnection)
        var bare: BareSocket?
        var placement: BareLoopPlacement?
        switch choice {
        case .secondConnection:
            guard case .unix(let path) = target.target else {
                throw UsageError("--bare-loop second-connection needs a unix: target: an LE link takes one ATT socket (a second connect on CID 4 to the same peer fails with EBUSY); use same-connection", command: "bench")
            }
            bare = .own(try BareLoop.connect(path: path, clientRxMTU: session.clientRxMTU, timeout: inv.global.timeout))
            placement = .secondConnection
        case .sameConnection:
            guard let bearer = session.transport.inner as? ATTBearer else {
                throw CLIError.unsupported("--bare-loop same-connection needs a socket bearer under the GATT client")
            }
            bare = .lent(bearer, timeout: inv.global.timeout)
            placement = .sameConnection
        case .none:
            break
        }
        defer { bare?.close() }
        let handle = plan.handle, counter = plan.counter, warmup = plan.warmup
        var modes: [ModeFigures] = []
        let radio = BenchRadio(isUnix: target.isUnix, link: link, mtu: session.mtu)
        // The result of the modes and rounds measured so far: at the end, and after each round for an interrupt.
        let result = { (measured: [ModeFigures]) -> BenchResult in
            var ms = measured
            for i in ms.indices {
                ms[i].ceiling = radio.verdict(mode: ms[i].mode, size: size, measuredWritesPerSecond: ms[i].writesPerSecond)
            }
            return BenchResult(target: target.description, handle: plan.handle, size: size, mtu: session.mtu,
                               warmup: plan.warmup, rounds: plan.rounds, bareLoop: placement, radio: radio, modes: ms,
                               link: linkJSON, linkLine: linkLine, sizeProbe: sizeProbe)
        }
        if plan.mode != .withoutResponse {
            var figures = ModeFigures(mode: .withResponse, size: size)
            // Plain `client.write` calls, as `write`, the shell and `scan` make them, from a task that prefers the
            // link's event loop (as every command's task does): each continues on the loop when its response is read.
            try await phase("the Write Request warm-up", session, size: size, sizeGiven: plan.size != nil) {
                try await withTaskExecutorPreference(client.eventLoop) {
                    for _ in warmupDone..<plan.warmup { try await client.write(handle: plan.handle, value: value) }
                }
            }
            if let bare {
                _ = try await phase("the bare loop's Write Request warm-up", session, size: size, sizeGiven: plan.size != nil) {
                    try await bare.run { try $0.requests(handle: handle, value: value, writes: warmup) }
                }
            }
            // --bearers N: one writer per open bearer at once, each round followed by one of a single writer.
            let writers = client.openBearerCount
            if writers > 1 { figures.bearers = BearerFigures(writers: writers, perBearer: client.bearers.map { _ in 0 }) }
            for index in 0..<plan.rounds {
              try await phase("Write Request round \(index + 1) of \(plan.rounds)", session, size: size, sizeGiven: plan.size != nil) {
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
                if let bare {
                    figures.bare.append(try await bare.run { try $0.requests(handle: handle, value: value, writes: round.writes) })
                }
                var sofar = figures
                sofar.confirmed = sofar.writes
                progress?.record(result(modes + [sofar]))
              }
            }
            figures.confirmed = figures.writes
            // Each bare Write Request counts only once its Write Response arrived.
            if bare != nil { figures.bareConfirmed = figures.bare.reduce(0) { $0 + $1.writes } }
            modes.append(figures)
        }
        if plan.mode != .withResponse {
            var figures = ModeFigures(mode: .withoutResponse, size: size)
            try await phase("the Write Command warm-up", session, size: size, sizeGiven: plan.size != nil) {
                try await withTaskExecutorPreference(client.eventLoop) {
                    for _ in 0..<plan.warmup { try await client.writeWithoutResponse(handle: plan.handle, value: value, timeout: session.timeout) }
                }
                if let bare { _ = try await bare.run { try $0.commands(handle: handle, value: value, writes: warmup, counter: counter) } }
            }
            let before = try await drain(client, plan: plan)
            let observedBefore = session.transport.observations
            var bareCounted: Int? = counter == nil ? nil : 0
            for index in 0..<plan.rounds {
              try await phase("Write Command round \(index + 1) of \(plan.rounds)", session, size: size, sizeGiven: plan.size != nil) {
                try await measureCommands(session, plan: plan, value: value, into: &figures)
                if let bare {
                    let writes = figures.rounds.last!.writes
                    let (round, counted) = try await bare.run { try $0.commands(handle: handle, value: value, writes: writes, counter: counter) }
                    figures.bare.append(round)
                    if let counted, let sum = bareCounted { bareCounted = sum + counted }
                }
                progress?.record(result(modes + [figures]))
              }
            }
            let observedAfter = session.transport.observations
            figures.blockedNanoseconds = observedAfter.blockedNanoseconds - observedBefore.blockedNanoseconds
            figures.blockedWaits = observedAfter.wouldBlockCount - observedBefore.wouldBlockCount
            if bare != nil { figures.bareConfirmed = bareCounted }
            // The counter counts the bare loop's commands too (same handle, same peer): take them out.
            if let after = try await drain(client, plan: plan), let before {
                figures.confirmed = after - before - (figures.bareConfirmed ?? 0)
            }
            modes.append(figures)
        }
        return result(modes)
    }

    /// Runs `body` as the bench's `name`d phase: an error from it says which phase failed, and an ATT 0x0D on a
    /// size the user gave says what to pass instead (GATT errors are labelled with the handle's name first).
    static func phase<T>(_ name: String, _ session: Session, size: Int? = nil, sizeGiven: Bool = false,
                         _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as GATTError {
            var hint: String?
            if let e = error.attributeError, e.code == .invalidAttributeValueLength, let size, sizeGiven {
                hint = e.rejectedBy == .peer
                    ? "the characteristic refused \(size)-byte values: pass a smaller --size (or leave --size out: bench then finds the largest size it accepts)"
                    : "pass a --size within the budget\(e.budget.map { " of \($0) bytes" } ?? "")"
            }
            throw PhaseError(phase: name, underlying: await session.labelled(error), hint: hint)
        } catch let error as PhaseError {
            throw error
        } catch {
            throw PhaseError(phase: name, underlying: error, hint: nil)
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
        guard accepted > 0 else {
            throw CLIError.failure("the peer refused every length from 1 to \(size) bytes on \(ATTHex.handle(handle)) with ATT error 0x0D Invalid Attribute Value Length: bench finds no size to write; check the handle, or give --size")
        }
        return SizeProbe(tried: size, refused: size, chosen: accepted)
    }

    /// Reads the peer's write counter (little-endian, 1-8 bytes).
    static func readCounter(_ client: GATTClient, _ handle: UInt16?) async throws -> Int? {
        guard let handle else { return nil }
        let bytes = try await client.read(handle: handle)
        return bytes.prefix(8).enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
    }

    /// One round of Write Requests, each awaited: its rate and every round trip.
    static func measureRequests(_ client: GATTClient, plan: BenchPlan, value: [UInt8]) async throws -> (RoundFigures, [UInt64]) {
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
    static func measureCommands(_ session: Session, plan: BenchPlan, value: [UInt8], into figures: inout ModeFigures) async throws {
        let client = session.client
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
                try await client.writeWithoutResponse(handle: plan.handle, value: value, timeout: session.timeout)
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

/// Where the bare loop's socket comes from: a connection of its own (unix:), or the GATT client's socket, lent by
/// the bearer for each turn (an LE link takes one ATT socket). One owner at a time either way.
enum BareSocket {
    case own(BareLoop)
    case lent(ATTBearer, timeout: Double)

    /// Runs one turn of the bare loop: at once on its own socket, or on the bearer's event loop while the bearer
    /// reads nothing and sends nothing (`ATTBearer.lend`).
    func run<T: Sendable>(_ body: @escaping @Sendable (BareLoop) throws -> T) async throws -> T {
        switch self {
        case .own(let loop):
            return try body(loop)
        case .lent(let bearer, let timeout):
            return try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
                bearer.lend { fd in
                    guard let fd else {
                        return c.resume(throwing: CLIError.connection("the connection to \(bearer.label) ended before the bare socket loop's turn"))
                    }
                    // The loop borrows the socket: it never closes it.
                    c.resume(with: Result { try body(BareLoop(borrowing: fd, label: bearer.label, timeout: timeout)) })
                }
            }
        }
    }

    /// Closes the bare loop's own connection (a lent socket stays the bearer's).
    func close() {
        if case .own(let loop) = self { loop.close() }
    }
}

/// The bare loop's turns as `mirror bench` times them; its failures become the CLI's errors (`cliError`).
extension BareLoop {
    /// A second connection to a unix: peer, with the same MTU as the GATT client's, so the peer takes the same values.
    static func connect(path: String, clientRxMTU: Int, timeout: Double) throws -> BareLoop {
        try bareATT {
            let loop = try BareLoop(connectingTo: path, timeout: timeout)
            do { try loop.exchangeMTU(clientRxMTU: UInt16(clientRxMTU)) } catch {
                loop.close()
                throw error
            }
            return loop
        }
    }

    /// The same Write Requests as the CLI's, timed: send, then poll and receive, each awaited.
    @discardableResult
    func requests(handle: UInt16, value: [UInt8], writes: Int) throws -> RoundFigures {
        let watch = Stopwatch()
        try bareATT { try writeRequests(handle: handle, value: value, count: writes) }
        return RoundFigures(writes: writes, watch.elapsed())
    }

    /// Write Commands, then one Read Request whose answer proves they were handled (the peer handles PDUs in order):
    /// of the counter when there is one (then also read just before, untimed, and the increase returned), else of
    /// `handle`.
    @discardableResult
    func commands(handle: UInt16, value: [UInt8], writes: Int, counter: UInt16? = nil) throws -> (RoundFigures, counted: Int?) {
        try bareATT {
            let before = try counter.map { try readCounter(handle: $0) }
            let watch = Stopwatch()
            try writeCommands(handle: handle, value: value, count: writes)
            var counted: Int?
            if let counter, let before {
                counted = try readCounter(handle: counter) - before
            } else {
                try readAnyAnswer(handle: handle)
            }
            return (RoundFigures(writes: writes, watch.elapsed()), counted)
        }
    }
}

/// Runs a call of the bare loop or the loopback peer, its failure thrown as the CLI's error.
func bareATT<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch let error as BareATTError { throw error.cliError }
}

extension BareATTError {
    /// The error `mirror bench` reports for a failure of its bare loop or loopback peer: a SocketError for a
    /// syscall, else a CLIError (each with the text, JSON keys and exit status the bench has always had).
    var cliError: any Error {
        switch self {
        case .syscall(let name, let errno, let step):
            switch step {
            case .openingListener:
                return SocketError(syscall: name, errno: errno, context: "opening the loopback peer's socket")
            case .listening(let path):
                return SocketError(syscall: "bind/listen", errno: errno, context: "listening at \(path) for the loopback peer")
            case .settingUpPeer:
                return SocketError(syscall: name, errno: errno, context: "setting up the loopback peer")
            case .openingSocket, .connecting, .sending, .receiving:
                return SocketError(syscall: name, errno: errno, context: step.description)
            }
        case .timeout(let wait, let seconds):
            return CLIError.timeout(what: wait.description, seconds: seconds)
        case .closedByPeer:
            return CLIError.connection(description)
        case .unexpectedAnswer:
            return CLIError.protocolViolation(description)
        case .encoding:
            return CLIError.failure(description)
        }
    }
}

extension PlainPeer {
    /// `mirror bench --loopback`: the plain peer in this process, on a private unix socket.
    /// With `enhancedATT` (--bearers N > 1) it serves Enhanced ATT bearers at PATH.eatt too.
    static func loopback(enhancedATT: Bool = false) throws -> PlainPeer {
        try bareATT { try PlainPeer(path: "/tmp/mirror-bench-\(getpid()).sock", enhancedATT: enhancedATT) }
    }
}

func seconds3(_ s: Double) -> String {
    let ms = Int((s * 1000).rounded())
    let frac = String(ms % 1000)
    return "\(ms / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
}

func format2(_ v: Double) -> String {
    let hundredths = Int((v * 100).rounded())
    let frac = String(hundredths % 100)
    return "\(hundredths / 100).\(String(repeating: "0", count: 2 - frac.count))\(frac)"
}

/// "1.23 MB/s"-style figure: bytes per second in B, kB, MB (decimal).
func rate(_ bytesPerSecond: Double) -> String {
    if bytesPerSecond >= 1e6 { return "\(format2(bytesPerSecond / 1e6)) MB" }
    if bytesPerSecond >= 1e3 { return "\(format2(bytesPerSecond / 1e3)) kB" }
    return "\(Int(bytesPerSecond.rounded())) B"
}

/// "190 µs", "1.25 ms"
func micro(_ us: Double) -> String {
    us >= 1000 ? "\(format2(us / 1000)) ms" : "\(Int(us.rounded())) µs"
}
