// The --json record of a run (`mirror bench --json`): the figures with their ratios, spread, series and ceiling as
// the keys tools read (tools/vm/bench_table.py, perfprobe); rounded as recorded. The CLI words the text and the plot.
import JSON

extension BearerFigures {
    public func json(writesPerSecond: Double) -> JSONValue {
        .object([
            ("writers", .int(writers)),
            ("perBearer", .array(perBearer.enumerated().map { .object([("index", .int($0)), ("writes", .int($1))]) })),
            ("total", .int(total)),
            ("peerCounted", peerCounted.map { .int($0) } ?? .null),
            ("oneBearer", .object([("writes", .int(oneBearerWrites)),
                                   ("writesPerSecond", .double(oneBearerWritesPerSecond.rounded()))])),
            ("ratioToOneBearer", ratioToOneBearer(writesPerSecond).map { .double(($0 * 1000).rounded() / 1000) } ?? .null),
        ])
    }
}

extension ModeFigures {
    public var json: JSONValue {
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
                ("writes", .int(bareWrites)),
                ("bytesPerSecond", .double((bareRate * Double(size)).rounded())),
                ("writesPerSecond", .double(bareRate.rounded())),
                ("cpuMicrosecondsPerWrite", .double(((bareCPUPerWrite ?? 0) * 1000).rounded() / 1000)),
                ("confirmed", bareConfirmed.map { .int($0) } ?? .null),
            ])))
            fields.append(("ratioToBare", .double((ratio * 1000).rounded() / 1000)))
            if let cpuRatioToBare { fields.append(("cpuRatioToBare", .double((cpuRatioToBare * 1000).rounded() / 1000))) }
        }
        if let ceiling { fields.append(("ceiling", ceiling.json)) }
        if let bearers { fields.append(("bearers", bearers.json(writesPerSecond: writesPerSecond))) }
        if let batch { fields.append(("batch", batchJSON(batch))) }
        if let spread { fields.append(("roundSpread", spread.json)) }
        fields.append(("series", series.json(size: size)))
        return .object(fields)
    }

    public func batchJSON(_ b: BatchFigures) -> JSONValue {
        let r = batchRatios(b)
        func ratio(_ v: Double?) -> JSONValue { v.map { .double(($0 * 1000).rounded() / 1000) } ?? .null }
        var fields: [(String, JSONValue)] = [
            ("api", .string(BatchFigures.api(mode))), ("writes", .int(b.writes)), ("bytes", .int(b.writes * size)),
            ("seconds", .double(b.seconds)), ("writesPerSecond", .double(b.writesPerSecond.rounded())),
            ("bytesPerSecond", .double((b.writesPerSecond * Double(size)).rounded())),
            ("cpuMicrosecondsPerWrite", .double((b.cpuPerWrite * 1000).rounded() / 1000)),
        ]
        if let ns = b.blockedNanoseconds, let waits = b.blockedWaits {
            fields.append(("backpressure", .object([("seconds", .double(Double(ns) / 1e9)), ("waits", .int(waits))])))
        }
        fields += [("confirmed", b.confirmed.map { .int($0) } ?? .null), ("ratioToPlain", ratio(r.toPlainRate)),
                   ("cpuRatioToPlain", ratio(r.toPlainCPU)), ("cpuRatioToBare", ratio(r.toBareCPU))]
        return .object(fields)
    }
}

extension BenchResult {
    public var json: JSONValue {
        .object([
            ("target", .string(target)), ("handle", .int(Int(handle))), ("size", .int(size)), ("mtu", .int(mtu)),
            ("warmup", .int(warmup)), ("rounds", .int(rounds)),
            ("bareLoop", bareLoop.map { .string($0.rawValue) } ?? .null), ("modes", .array(modes.map(\.json))),
            ("link", link),
        ] + (sizeProbe.map { [("sizeProbe", $0.json)] } ?? [])
          + (interruptedBy.map { [("interrupted", .object([("signal", .string($0)), ("roundsDone", .int(roundsDone))]))] } ?? []))
    }
}

extension SizeProbe {
    public var json: JSONValue {
        .object([("tried", .int(tried)), ("refused", refused.map { .int($0) } ?? .null), ("chosen", .int(chosen))])
    }
}

extension RoundSpread {
    public var json: JSONValue {
        .object([("slowestWritesPerSecond", .double(slowest.rounded())), ("fastestWritesPerSecond", .double(fastest.rounded())),
                 ("ratio", ratio.isFinite ? .double((ratio * 1000).rounded() / 1000) : .null), ("limit", .double(Self.limit)),
                 ("flagged", .bool(flagged))])
    }
}

extension WriteSeries {
    /// "series: ... under 5 buckets ...", or nil when the run is long enough to draw.
    public var tooShortWarning: String? {
        guard isTooShort else { return nil }
        let ms = Int(Self.bucketNanoseconds / 1_000_000)
        return "series: the measured rounds lasted \(Int((Double(nanoseconds) / 1e6).rounded())) ms, under \(Self.minimumBuckets) buckets of \(ms) ms: no throughput-over-time line is drawn for this mode (run longer: --duration)"
    }

    public func json(size: Int) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("bucketMilliseconds", .int(Int(Self.bucketNanoseconds / 1_000_000))),
            ("writes", .array(writes.map { .int($0) })), ("bytes", .array(writes.map { .int($0 * size) })),
        ]
        if let tooShortWarning { fields.append(("warning", .string(tooShortWarning))) }
        return .object(fields)
    }
}

extension CeilingVerdict {
    public var json: JSONValue {
        .object([
            ("bytesPerSecond", ceiling.map { .double($0.bytesPerSecond.rounded()) } ?? .null),
            ("writesPerSecond", ceiling.map { .double(($0.writesPerSecond * 10).rounded() / 10) } ?? .null),
            ("fraction", fraction.map { .double(($0 * 1000).rounded() / 1000) } ?? .null),
            ("basis", .string(basis)), ("note", .string(note)),
        ])
    }
}
