// `mirror bench`'s words for BenchMeasurement's figures: the text lines of a run, a mode, its bearers, spread,
// series and ceiling, and the numbers in them (the --json record is BenchMeasurement's BenchRecord.swift).
import ATTStack
import BenchMeasurement

extension BearerFigures {
    func text(writesPerSecond: Double) -> [String] {
        let counts = perBearer.enumerated().map { "bearer \($0) \($1)" }.joined(separator: ", ")
        return ["  \(writers) writers at once on \(perBearer.count) bearers: \(counts); total \(total)"
                    + (peerCounted.map { ", peer counted \($0)" } ?? ""),
                "  one writer, one bearer (same run): \(Int(oneBearerWritesPerSecond.rounded())) writes/s; \(writers) bearers / one = "
                    + (ratioToOneBearer(writesPerSecond).map(format2) ?? "unknown")]
    }
}

extension ModeFigures {
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

/// --batch: the batch calls' rounds, worded apart from the mode's plain writes (they are not its figures).
extension ModeFigures {
    /// "with response, one write(handle:contentsOf:) call per round: ..." and its detail lines; empty without --batch.
    var batchText: [String] {
        guard let b = batch else { return [] }
        let r = batchRatios(b)
        let name = mode == .withResponse ? "with response" : "without response"
        var line = "\(name), one \(BatchFigures.api(mode)) call per round: \(rate(b.writesPerSecond * Double(size)))/s, \(Int(b.writesPerSecond.rounded())) writes/s (\(b.writes) writes in \(seconds3(b.seconds)) s)"
        if let confirmed = b.confirmed { line += ", peer confirmed \(confirmed)" }
        var lines = [line]
        if let ns = b.blockedNanoseconds, let waits = b.blockedWaits {
            lines.append("  waiting on backpressure: \(seconds3(Double(ns) / 1e9)) s (\(waits) send\(waits == 1 ? "" : "s") found the socket full)")
        }
        var cpu = "  CPU per write: \(format2(b.cpuPerWrite)) µs; batch/plain writes/s = \(r.toPlainRate.map(format2) ?? "-"), CPU = \(r.toPlainCPU.map(format2) ?? "-")"
        if let bare = r.toBareCPU { cpu += "; batch/bare CPU = \(format2(bare))" }
        lines.append(cpu)
        return lines
    }
}

extension BareLoopPlacement {
    var describe: String {
        switch self {
        case .secondConnection: return "a second connection to the same peer, rounds alternating with mirror's"
        case .sameConnection: return "this connection's socket, lent by mirror's bearer round by round (an LE link takes one ATT socket)"
        }
    }
}

extension BenchResult {
    var text: [String] {
        ["bench \(target) handle \(ATTHex.handle(handle)): \(size)-byte values, MTU \(mtu), \(warmup) warm-up writes, median of \(rounds) round\(rounds == 1 ? "" : "s")"]
            + (interruptedBy.map { ["interrupted by \($0) after \(roundsDone) round\(roundsDone == 1 ? "" : "s") (of \(rounds) per mode): the figures are those of the rounds done"] } ?? [])
            + (linkLine.map { [$0] } ?? [])
            + (bareLoop.map { ["bare socket loop: \($0.describe)"] } ?? [])
            + table
            + modes.flatMap(\.text)
            + batchLines
    }

    /// --batch: the batch calls' lines, after every mode's own (not the plain-write figures).
    var batchLines: [String] {
        let lines = modes.flatMap(\.batchText)
        guard !lines.isEmpty else { return [] }
        return ["batch calls (--batch: a round of as many writes through one call after each round; not the plain-write figures above):"] + lines
    }

    /// The figures at a glance, a column per mode (issue 37); the lines after it give each mode's detail.
    var table: [String] {
        guard !modes.isEmpty else { return [] }
        let dash = "-"
        func ratio(_ r: Double?) -> String { r.map(format2) ?? dash }
        let rows: [(String, (ModeFigures) -> String)] = [
            ("writes/s", { "\(Int($0.writesPerSecond.rounded()))" }),
            ("throughput", { "\(rate($0.bytesPerSecond))/s" }),
            ("round trip p50", { $0.percentile(50).map(micro) ?? dash }),
            ("round trip p99", { $0.percentile(99).map(micro) ?? dash }),
            ("CPU per write", { "\(format2($0.cpuPerWrite)) µs" }),
            ("bare loop writes/s", { m in m.bareWritesPerSecond.map { "\(Int($0.rounded()))" } ?? dash }),
            ("mirror/bare writes/s", { ratio($0.ratio) }),
            ("mirror/bare CPU", { ratio($0.cpuRatioToBare) }),
        ]
        let header = [""] + modes.map { $0.mode == .withResponse ? "with response" : "without response" }
        let cells = [header] + rows.map { row in [row.0] + modes.map(row.1) }
        let widths = (0..<header.count).map { c in cells.map { $0[c].count }.max()! + 2 }
        return cells.map { line in
            line.enumerated().map { c, cell in c == line.count - 1 ? cell : cell + String(repeating: " ", count: widths[c] - cell.count) }.joined()
        } + ["details:"]
    }
}

extension SizeProbe {
    func text(handle: UInt16) -> String {
        "the peer refused \(tried)-byte values on \(ATTHex.handle(handle)) (ATT error 0x0D Invalid Attribute Value Length, its own limit); benching with \(chosen)-byte values, the largest it accepted (give --size to choose)"
    }
}

extension RoundSpread {
    var text: String {
        let r = ratio.isFinite ? format2(ratio) + "x" : "unbounded (a round wrote nothing)"
        var line = "  rounds: slowest \(Int(slowest.rounded())), fastest \(Int(fastest.rounded())) writes/s, spread \(r)"
        if flagged {
            line += ": over \(format2(Self.limit))x, the rounds disagree (a busy host or a changing link): the median is not a steady figure; run again or longer (--duration)"
        }
        return line
    }
}

extension CeilingVerdict {
    /// "  ceiling: 97.60 kB/s, 400.0 writes/s on 1M, 251 B, 7.5 ms, MTU 247; reached 62.3 % of the ceiling"
    var text: String {
        guard let ceiling else { return "  ceiling: \(note)" }
        return "  ceiling: \(rate(ceiling.bytesPerSecond))/s, \(tenths(ceiling.writesPerSecond)) writes/s on \(basis) (docs/LINK-CEILING.md); \(note)"
    }
}

/// "400.0"
func tenths(_ v: Double) -> String {
    let t = Int((v * 10).rounded())
    return "\(t / 10).\(t % 10)"
}

func seconds3(_ s: Double) -> String {
    let ms = Int((s * 1000).rounded())
    let frac = String(ms % 1000)
    return "\(ms / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
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
