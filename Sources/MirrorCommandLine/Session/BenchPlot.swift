// `mirror bench --plot FILE.svg`: throughput over time for both modes (bytes/s per 100 ms bucket, the ceilings
// dashed) and the Write Request round-trip histogram. Hand-written SVG: Debian's -dev packages have no maintained
// SVG library worth a C shim for two line plots and a histogram, and SVG is plain XML text.
import BenchMeasurement
import Glibc
import LinkCore

enum BenchPlot {
    static let width = 960.0, height = 760.0
    /// The plot areas (left, top, right, bottom) of the two panels.
    static let throughputArea = (x0: 100.0, y0: 128.0, x1: 920.0, y1: 410.0)
    static let latencyArea = (x0: 100.0, y0: 512.0, x1: 920.0, y1: 695.0)
    static let requestColour = "#1f77b4", commandColour = "#e8590c"

    /// The whole drawing for one run.
    static func svg(_ result: BenchResult) -> String {
        var svg = SVG(width: width, height: height)
        svg.text(x: width / 2, y: 30, "mirror bench \(result.target): MTU \(result.mtu), \(result.size)-byte values, \(result.rounds) round\(result.rounds == 1 ? "" : "s") per mode",
                 size: 17, anchor: "middle", weight: "bold")
        svg.text(x: width / 2, y: 52, "ceiling: " + ceilingCaption(result.radio), size: 13, anchor: "middle", colour: "#444")
        throughput(result, into: &svg)
        latency(result, into: &svg)
        return svg.finished
    }

    static func ceilingCaption(_ radio: BenchRadio) -> String {
        switch radio {
        case .unixSocket: return "none, no radio: unix socket"
        case .unknownLink: return "unknown (interval, PHY or data length not known)"
        case .link(let link): return "\(link.description), dashed (docs/LINK-CEILING.md)"
        }
    }

    /// Panel 1: bytes/s of each mode per bucket against measured time, rounds end to end.
    static func throughput(_ result: BenchResult, into svg: inout SVG) {
        let a = throughputArea
        // A mode whose rounds last under WriteSeries.minimumBuckets buckets gets no line (a dot is not a series).
        let modes = result.modes.map { (mode: $0, rates: $0.series.isTooShort ? [] : $0.series.bytesPerSecond(size: $0.size)) }
        let ceilings = result.modes.compactMap { m in m.ceiling?.ceiling.map { (mode: m.mode, bytesPerSecond: $0.bytesPerSecond) } }
        let peak = (modes.flatMap(\.rates) + ceilings.map(\.bytesPerSecond)).max() ?? 0
        let unit = ByteRateUnit(peak)
        let y = Axis(max: peak / unit.divisor)
        let seconds = result.modes.map { Double($0.series.nanoseconds) / 1e9 }.max() ?? 0
        let x = Axis(max: seconds)
        svg.text(x: a.x0, y: a.y0 - 14, "Throughput over time (100 ms buckets)", size: 14, weight: "bold")
        svg.frame(a, x: x, y: y, xLabel: "measured time (s), each mode's rounds end to end", yLabel: "throughput (\(unit.name))")
        let short = modes.filter(\.mode.series.isTooShort).map { $0.mode.mode == .withResponse ? "Write Request" : "Write Command" }
        if !short.isEmpty {
            svg.text(x: (a.x0 + a.x1) / 2, y: (a.y0 + a.y1) / 2, "\(short.joined(separator: " and ")): run too short for a series (under \(WriteSeries.minimumBuckets) buckets; --duration)",
                     size: 13, anchor: "middle", colour: "#444")
        }
        for (mode, rates) in modes where !rates.isEmpty {
            let colour = mode.mode == .withResponse ? requestColour : commandColour
            let points = rates.enumerated().map { i, r in
                (a.x0 + (min(Double(i) + 0.5, seconds * 10) / 10) / x.top * (a.x1 - a.x0), a.y1 - r / unit.divisor / y.top * (a.y1 - a.y0))
            }
            svg.polyline(points, colour: colour, markers: points.count <= 60)
        }
        // Each known ceiling: a dashed line in its mode's colour, labelled at opposite ends so the two never overlap.
        for c in ceilings {
            let yy = a.y1 - c.bytesPerSecond / unit.divisor / y.top * (a.y1 - a.y0)
            let request = c.mode == .withResponse
            svg.line(a.x0, yy, a.x1, yy, colour: request ? requestColour : commandColour, width: 1.5, dash: "7 5")
            svg.text(x: request ? a.x0 + 6 : a.x1 - 6, y: yy - 5, "\(request ? "Write Request" : "Write Command") ceiling \(rate(c.bytesPerSecond))/s",
                     size: 11, anchor: request ? "start" : "end", colour: request ? requestColour : commandColour)
        }
        legend(result, into: &svg, y: 78)
    }

    /// The legend, one row under the captions: a swatch per mode that ran, and the ceiling's dash.
    static func legend(_ result: BenchResult, into svg: inout SVG, y: Double) {
        var entries: [(String, String, String?)] = []
        for m in result.modes {
            let measured = "\(rate(m.bytesPerSecond))/s median"
            entries.append(m.mode == .withResponse ? ("Write Request (with response), \(measured)", requestColour, nil)
                                                   : ("Write Command (without response), \(measured)", commandColour, nil))
        }
        if case .link = result.radio { entries.append(("ceiling of the mode", "#555", "7 5")) }
        // Swatch 24 px, gap 6, then the text (about 6.3 px a character at 12 px), 24 px between entries.
        let widths = entries.map { 24 + 6 + Double($0.0.count) * 6.3 }
        var x = (width - widths.reduce(0, +) - 24 * Double(entries.count - 1)) / 2
        for (i, entry) in entries.enumerated() {
            svg.line(x, y - 4, x + 24, y - 4, colour: entry.1, width: 2.5, dash: entry.2)
            svg.text(x: x + 30, y: y, entry.0, size: 12)
            x += widths[i] + 24
        }
    }

    /// Panel 2: how many Write Requests took each round trip, up to the 99th percentile (the rest counted in a note).
    static func latency(_ result: BenchResult, into svg: inout SVG) {
        let a = latencyArea
        svg.text(x: a.x0, y: a.y0 - 14, "Write Request round trip", size: 14, weight: "bold")
        guard let figures = result.modes.first(where: { $0.mode == .withResponse }), !figures.latencies.isEmpty,
              let p99 = figures.percentile(99), let maximum = figures.percentile(100) else {
            svg.frame(a, x: Axis(max: 1), y: Axis(max: 1), xLabel: "round trip (µs)", yLabel: "writes")
            svg.text(x: (a.x0 + a.x1) / 2, y: (a.y0 + a.y1) / 2, "no Write Requests in this run (--mode without-response)",
                     size: 13, anchor: "middle", colour: "#444")
            return
        }
        // Round trips over a radio are milliseconds (two connection events), over unix: microseconds; 5 % of room
        // keeps a bar at the 99th percentile off the panel's edge.
        let (unit, divisor) = p99 >= 2000 ? ("ms", 1000.0) : ("µs", 1.0)
        let x = Axis(max: max(p99 / divisor * 1.05, 1 / divisor))
        let bins = 50
        let binWidth = x.top / Double(bins)
        let (counts, above) = figures.latencyHistogram(top: x.top, bins: bins, divisor: divisor)
        let y = Axis(max: Double(counts.max() ?? 1))
        svg.frame(a, x: x, y: y, xLabel: "round trip (\(unit)), bins of \(shortNumber(binWidth)) \(unit)", yLabel: "writes")
        let pxPerBin = (a.x1 - a.x0) / Double(bins)
        for (i, n) in counts.enumerated() where n > 0 {
            let h = Double(n) / y.top * (a.y1 - a.y0)
            svg.rect(x: a.x0 + Double(i) * pxPerBin + 0.5, y: a.y1 - h, width: max(pxPerBin - 1, 0.5), height: h, colour: requestColour)
        }
        var note = "\(figures.latencies.count) round trips; p50 \(micro(figures.percentile(50)!)), p99 \(micro(p99)), max \(micro(maximum))"
        if above > 0 { note += "; \(above) above \(micro(x.top * divisor)) not drawn" }
        svg.text(x: a.x1, y: a.y0 - 14, note, size: 12, anchor: "end", colour: "#444")
    }
}

/// B/s, kB/s or MB/s (decimal, as `rate`) for an axis whose largest value is `peak` bytes/s.
struct ByteRateUnit {
    let name: String
    let divisor: Double
    init(_ peak: Double) {
        if peak >= 1e6 { (name, divisor) = ("MB/s", 1e6) } else if peak >= 1e3 { (name, divisor) = ("kB/s", 1e3) } else { (name, divisor) = ("B/s", 1) }
    }
}

/// A linear axis from 0: the smallest step of 1, 2 or 5 × 10^k that needs at most 8 intervals, and the top tick
/// at or above `max` (so the data fills most of the panel).
struct Axis {
    let step: Double
    let top: Double
    init(max: Double) {
        let m = max > 0 ? max : 1
        let magnitude = pow(10, log10(m / 8).rounded(.down))
        // 10 × magnitude > m / 8 always fits; the smaller ones when they do.
        let step = [1.0, 2, 5].map { $0 * magnitude }.first { (m / $0).rounded(.up) <= 8 } ?? 10 * magnitude
        self.step = step
        self.top = (m / step).rounded(.up) * step
    }
    var ticks: [Double] { (0...Int((top / step).rounded())).map { Double($0) * step } }
}

/// A tick's number with as many decimals as the step needs: "0", "2.5", "0.05".
func tickLabel(_ v: Double, step: Double) -> String {
    let decimals = max(0, Int((-log10(step)).rounded(.up)))
    return fixedPoint(v, decimals: decimals)
}

/// At most two decimals, trailing zeros dropped: "5", "0.4", "2.5".
func shortNumber(_ v: Double) -> String {
    var s = fixedPoint(v, decimals: 2)
    while s.hasSuffix("0") { s.removeLast() }
    if s.hasSuffix(".") { s.removeLast() }
    return s
}

/// The SVG document being drawn: shapes and text appended in order (later ones on top).
struct SVG {
    private var body: [String] = []
    let width: Double, height: Double

    init(width: Double, height: Double) {
        self.width = width
        self.height = height
        body.append("<rect x=\"0\" y=\"0\" width=\"\(n(width))\" height=\"\(n(height))\" fill=\"white\"/>")
    }

    var finished: String {
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            + "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(n(width))\" height=\"\(n(height))\" viewBox=\"0 0 \(n(width)) \(n(height))\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n"
            + body.joined(separator: "\n") + "\n</svg>\n"
    }

    mutating func text(x: Double, y: Double, _ s: String, size: Double, anchor: String = "start", weight: String = "normal",
                       colour: String = "#000", rotate: Bool = false) {
        let transform = rotate ? " transform=\"rotate(-90 \(n(x)) \(n(y)))\"" : ""
        body.append("<text x=\"\(n(x))\" y=\"\(n(y))\" font-size=\"\(n(size))\" text-anchor=\"\(anchor)\" font-weight=\"\(weight)\" fill=\"\(colour)\"\(transform)>\(xmlEscaped(s))</text>")
    }

    mutating func line(_ x0: Double, _ y0: Double, _ x1: Double, _ y1: Double, colour: String, width: Double = 1, dash: String? = nil) {
        let d = dash.map { " stroke-dasharray=\"\($0)\"" } ?? ""
        body.append("<line x1=\"\(n(x0))\" y1=\"\(n(y0))\" x2=\"\(n(x1))\" y2=\"\(n(y1))\" stroke=\"\(colour)\" stroke-width=\"\(n(width))\"\(d)/>")
    }

    mutating func rect(x: Double, y: Double, width: Double, height: Double, colour: String) {
        body.append("<rect x=\"\(n(x))\" y=\"\(n(y))\" width=\"\(n(width))\" height=\"\(n(height))\" fill=\"\(colour)\"/>")
    }

    mutating func polyline(_ points: [(Double, Double)], colour: String, markers: Bool) {
        guard !points.isEmpty else { return }
        body.append("<polyline fill=\"none\" stroke=\"\(colour)\" stroke-width=\"2\" stroke-linejoin=\"round\" points=\"\(points.map { "\(n($0.0)),\(n($0.1))" }.joined(separator: " "))\"/>")
        if markers {
            for p in points { body.append("<circle cx=\"\(n(p.0))\" cy=\"\(n(p.1))\" r=\"2.5\" fill=\"\(colour)\"/>") }
        }
    }

    /// The panel's grid, axes, tick labels and axis labels.
    mutating func frame(_ a: (x0: Double, y0: Double, x1: Double, y1: Double), x: Axis, y: Axis, xLabel: String, yLabel: String) {
        for t in y.ticks {
            let yy = a.y1 - t / y.top * (a.y1 - a.y0)
            line(a.x0, yy, a.x1, yy, colour: "#e3e3e3")
            text(x: a.x0 - 8, y: yy + 4, tickLabel(t, step: y.step), size: 11, anchor: "end")
        }
        for t in x.ticks {
            let xx = a.x0 + t / x.top * (a.x1 - a.x0)
            line(xx, a.y1, xx, a.y1 + 5, colour: "#000")
            text(x: xx, y: a.y1 + 19, tickLabel(t, step: x.step), size: 11, anchor: "middle")
        }
        line(a.x0, a.y0, a.x0, a.y1, colour: "#000")
        line(a.x0, a.y1, a.x1, a.y1, colour: "#000")
        text(x: (a.x0 + a.x1) / 2, y: a.y1 + 40, xLabel, size: 12, anchor: "middle")
        text(x: a.x0 - 62, y: (a.y0 + a.y1) / 2, yLabel, size: 12, anchor: "middle", rotate: true)
    }

    /// A coordinate with at most one decimal.
    private func n(_ v: Double) -> String {
        let s = fixedPoint(v, decimals: 1)
        return s.hasSuffix(".0") ? String(s.dropLast(2)) : s
    }
}

/// Text for XML character data and attribute values (XML 1.0 §2.4): the five predefined entities.
func xmlEscaped(_ s: String) -> String {
    var out = ""
    out.reserveCapacity(s.count)
    for c in s {
        switch c {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&apos;"
        default: out.append(c)
        }
    }
    return out
}
