// The bench's ceiling verdicts and its drawing for a known link, in process: no radio here, so the link is given.
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import JSON
import LinkCeiling
import LinuxBluetooth
@testable import BenchMeasurement
@testable import MirrorCommandLine
import XCTest

final class BenchCeilingTests: XCTestCase {
    /// 1M, 251 B, 7.5 ms: 3 packets of 2468 µs per event (docs/LINK-CEILING.md): Write Commands 400 writes/s,
    /// 244 B each 97600 B/s; Write Requests 1 per 15 ms, 66.7 writes/s.
    let link = LinkParameters(phy: .le1M, dataLength: 251, intervalMilliseconds: 7.5, mtu: 247)!

    /// The link as read becomes the ceiling's input (BenchMeasurement's `LinkState.ceilingInput`) only with its PHY,
    /// interval and data length known; a link watched from its connect without a Data Length Change is at 27 octets.
    func testTheLinkAsReadIsTheCeilingsInputOnlyWhenKnown() {
        var s = LinkState(allUnknown: .notSeen("no LE Connection Complete seen on this link"))
        XCTAssertNil(s.ceilingInput(mtu: 247), "nothing known")
        s.txPHY = .known(.le2M, source: .hciEvent("LE PHY Update Complete"))
        s.intervalMilliseconds = .known(7.5, source: .hciEvent("LE Connection Complete"))
        XCTAssertEqual(s.ceilingInput(mtu: 247), LinkParameters(phy: .le2M, dataLength: 27, intervalMilliseconds: 7.5, mtu: 247))
        s.dataLength = .known(LinkDataLength(maxTxOctets: 251, maxTxTime: 2120, maxRxOctets: 251, maxRxTime: 2120),
                              source: .hciEvent("LE Data Length Change"))
        s.encrypted = .known(true, source: .socketOption("BT_SECURITY"))
        XCTAssertEqual(s.ceilingInput(mtu: 247), LinkParameters(phy: .le2M, dataLength: 251, intervalMilliseconds: 7.5, mtu: 247, encrypted: true))
        s.dataLength = .unknown(.unavailable("not watched"))
        XCTAssertNil(s.ceilingInput(mtu: 247), "a data length not known on a link not watched: no ceiling")
    }

    func testAKnownLinkGivesTheFractionReached() throws {
        let radio = BenchRadio(isUnix: false, link: link, mtu: 247)
        XCTAssertEqual(radio, .link(link))
        let command = radio.verdict(mode: .withoutResponse, size: 244, measuredWritesPerSecond: 300)
        XCTAssertEqual(command.ceiling?.writesPerSecond ?? 0, 400, accuracy: 1e-9)
        XCTAssertEqual(command.ceiling?.bytesPerSecond ?? 0, 97_600, accuracy: 1e-6)
        XCTAssertEqual(command.fraction ?? 0, 0.75, accuracy: 1e-12)
        XCTAssertEqual(command.basis, "1M, 251 B, 7.5 ms, MTU 247")
        XCTAssertEqual(command.note, "reached 75.0 % of the ceiling")
        XCTAssertEqual(command.text, "  ceiling: 97.60 kB/s, 400.0 writes/s on 1M, 251 B, 7.5 ms, MTU 247 (docs/LINK-CEILING.md); reached 75.0 % of the ceiling")
        XCTAssertEqual(command.json.compact, #"{"bytesPerSecond":97600,"writesPerSecond":400,"fraction":0.75,"basis":"1M, 251 B, 7.5 ms, MTU 247","note":"reached 75.0 % of the ceiling"}"#)
        let request = radio.verdict(mode: .withResponse, size: 244, measuredWritesPerSecond: 50)
        XCTAssertEqual(request.ceiling?.writesPerSecond ?? 0, 1 / 0.015, accuracy: 1e-9)
        XCTAssertEqual(request.fraction ?? 0, 50 * 0.015, accuracy: 1e-12)
    }

    /// The session's MTU decides (the link's own is replaced), and --size: 20-byte values on MTU 247 are 27-octet
    /// PDUs, one packet of 296 µs, 7500 / 676 = 11 a event: 1466.7 writes/s.
    func testTheSessionsMTUAndTheValueSizeDecide() throws {
        let radio = BenchRadio(isUnix: false, link: LinkParameters(phy: .le1M, dataLength: 251, intervalMilliseconds: 7.5, mtu: 23)!, mtu: 247)
        XCTAssertEqual(radio, .link(link))
        let small = radio.verdict(mode: .withoutResponse, size: 20, measuredWritesPerSecond: 1000)
        XCTAssertEqual(small.ceiling?.writesPerSecond ?? 0, 11 / 0.0075, accuracy: 1e-9)
        XCTAssertEqual(small.ceiling?.bytesPerSecond ?? 0, 11 / 0.0075 * 20, accuracy: 1e-6)
    }

    /// Above the ceiling (btvirt moves packets as fast as the host): no fraction over 100 %, "not radio-limited".
    func testAboveTheCeilingIsNotRadioLimited() {
        let v = BenchRadio.link(link).verdict(mode: .withoutResponse, size: 244, measuredWritesPerSecond: 1280)
        XCTAssertNil(v.fraction)
        XCTAssertNotNil(v.ceiling)
        XCTAssertEqual(v.note, "not radio-limited: measured 3.20x the ceiling (no radio timing, as under an emulated controller such as btvirt)")
        XCTAssertFalse(v.text.contains("%"), v.text)
        XCTAssertEqual(v.json["fraction"], .null)
        XCTAssertEqual(v.json["bytesPerSecond"]?.number, 97_600)
    }

    /// Unknown link parameters, or a unix: target, give no ceiling at all, and say why.
    func testNoCeilingWithoutARadioOrALink() {
        let unknown = BenchRadio(isUnix: false, link: nil, mtu: 247)
        XCTAssertEqual(unknown, .unknownLink)
        let u = unknown.verdict(mode: .withResponse, size: 244, measuredWritesPerSecond: 10)
        XCTAssertNil(u.ceiling)
        XCTAssertNil(u.fraction)
        XCTAssertEqual(u.text, "  ceiling: unknown link (interval, PHY or data length not known)")
        XCTAssertEqual(u.json.compact, #"{"bytesPerSecond":null,"writesPerSecond":null,"fraction":null,"basis":"unknown link","note":"unknown link (interval, PHY or data length not known)"}"#)
        // A unix: target has no radio, whatever link is passed.
        XCTAssertEqual(BenchRadio(isUnix: true, link: link, mtu: 247), .unixSocket)
        XCTAssertEqual(BenchRadio.unixSocket.verdict(mode: .withoutResponse, size: 20, measuredWritesPerSecond: 1).text, "  ceiling: no radio: unix socket")
        // An MTU the link cannot have (the session's, out of range for LinkParameters) is an unknown link, not a guess.
        XCTAssertEqual(BenchRadio(isUnix: false, link: link, mtu: 600), .unknownLink)
    }

    /// Coded S=8 with 251-octet packets at 7.5 ms: one packet is longer than the interval.
    func testACeilingOfZeroSaysWhy() {
        let coded = LinkParameters(phy: .codedS8, dataLength: 251, intervalMilliseconds: 7.5, mtu: 247)!
        let v = BenchRadio.link(coded).verdict(mode: .withoutResponse, size: 244, measuredWritesPerSecond: 10)
        XCTAssertNil(v.fraction)
        XCTAssertEqual(v.note, "no packet fits in one connection interval on this link")
    }

    /// The drawing with a known link: both ceilings dashed in their mode's colour and named; text escaped for XML.
    func testThePlotDrawsTheCeilingsAndEscapesText() throws {
        var request = ModeFigures(mode: .withResponse, size: 244)
        // 34 round trips of 15 ms: 510 ms, over WriteSeries.minimumBuckets buckets, so the mode draws its line.
        request.rounds = [RoundFigures(writes: 34, nanoseconds: 510_000_000, cpuNanoseconds: 1_000_000)]
        request.latencies = [UInt64](repeating: 15_000_000, count: 34)
        request.series.addRound(latencies: request.latencies)
        var command = ModeFigures(mode: .withoutResponse, size: 244)
        command.rounds = [RoundFigures(writes: 180, nanoseconds: 500_000_000, cpuNanoseconds: 1_000_000)]
        for i in 1...5 { command.series.sample(writesSoFar: 36 * i, elapsed: UInt64(i) * 100_000_000 - 1) }
        command.series.closeRound(nanoseconds: 500_000_000)
        XCTAssertEqual(command.series.writes, [36, 36, 36, 36, 36])
        let radio = BenchRadio.link(link)
        request.ceiling = radio.verdict(mode: .withResponse, size: 244, measuredWritesPerSecond: request.writesPerSecond)
        command.ceiling = radio.verdict(mode: .withoutResponse, size: 244, measuredWritesPerSecond: command.writesPerSecond)
        let result = BenchResult(target: "unix:/tmp/a&b<c>.sock", handle: 0x12, size: 244, mtu: 247, warmup: 0, rounds: 1,
                                 bareLoop: nil, radio: radio, modes: [request, command])
        let svg = BenchPlot.svg(result)
        let parsed = try SVGSummary(svg)
        XCTAssertTrue(parsed.texts.contains("mirror bench unix:/tmp/a&b<c>.sock: MTU 247, 244-byte values, 1 round per mode"), "\(parsed.texts)")
        XCTAssertTrue(svg.contains("unix:/tmp/a&amp;b&lt;c&gt;.sock"))
        XCTAssertTrue(parsed.texts.contains("ceiling: 1M, 251 B, 7.5 ms, MTU 247, dashed (docs/LINK-CEILING.md)"), "\(parsed.texts)")
        XCTAssertTrue(parsed.texts.contains("Write Request ceiling 16.27 kB/s"), "\(parsed.texts)")
        XCTAssertTrue(parsed.texts.contains("Write Command ceiling 97.60 kB/s"), "\(parsed.texts)")
        XCTAssertTrue(parsed.texts.contains("ceiling of the mode"), "the legend names the dash")
        XCTAssertEqual(svg.components(separatedBy: "stroke-dasharray=\"7 5\"").count - 1, 3, "two ceiling lines and the legend's dash")
        XCTAssertEqual(parsed.count("polyline"), 2)

        let unknown = BenchResult(target: "00:AA:01:01:00:01", handle: 0x12, size: 244, mtu: 247, warmup: 0, rounds: 1,
                                  bareLoop: nil, radio: .unknownLink, modes: [command])
        let u = try SVGSummary(BenchPlot.svg(unknown))
        XCTAssertTrue(u.texts.contains("ceiling: unknown (interval, PHY or data length not known)"), "\(u.texts)")
        XCTAssertTrue(u.texts.contains("no Write Requests in this run (--mode without-response)"), "\(u.texts)")
    }

    /// The ratios the bench reports are BenchMeasurement's: mirror/bare CPU, batch over plain and bare, several bearers
    /// over one; each nil where its divisor is missing or zero.
    func testTheRatiosAreTheFiguresOwn() {
        var m = ModeFigures(mode: .withoutResponse, size: 20)
        m.rounds = [RoundFigures(writes: 1000, nanoseconds: 1_000_000_000, cpuNanoseconds: 4_000_000)]
        XCTAssertNil(m.cpuRatioToBare, "no bare loop")
        m.bare = [RoundFigures(writes: 2000, nanoseconds: 1_000_000_000, cpuNanoseconds: 2_000_000)]
        XCTAssertEqual(try XCTUnwrap(m.cpuRatioToBare), 4, accuracy: 1e-9)
        var b = BatchFigures()
        b.rounds = [RoundFigures(writes: 500, nanoseconds: 250_000_000, cpuNanoseconds: 1_000_000)]
        let r = m.batchRatios(b)
        XCTAssertEqual(try XCTUnwrap(r.toPlainRate), 2, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(r.toPlainCPU), 0.5, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(r.toBareCPU), 2, accuracy: 1e-9)
        XCTAssertNil(ModeFigures(mode: .withResponse, size: 20).batchRatios(BatchFigures()).toBareCPU)
        var bearers = BearerFigures(writers: 3)
        XCTAssertNil(bearers.ratioToOneBearer(900), "no one-bearer round")
        bearers.oneBearer = [RoundFigures(writes: 300, nanoseconds: 1_000_000_000, cpuNanoseconds: 0)]
        XCTAssertEqual(try XCTUnwrap(bearers.ratioToOneBearer(900)), 3, accuracy: 1e-9)
    }

    /// The plot's histogram is BenchMeasurement's: equal bins up to the top, the rest counted above it.
    func testTheRoundTripHistogramBinsUpToItsTopAndCountsTheRest() {
        var m = ModeFigures(mode: .withResponse, size: 20)
        m.latencies = [100_000, 150_000, 990_000, 1_000_000, 2_500_000]   // 100 µs ... 2.5 ms
        let us = m.latencyHistogram(top: 1000, bins: 10)
        XCTAssertEqual(us.counts, [0, 2, 0, 0, 0, 0, 0, 0, 0, 2])
        XCTAssertEqual(us.above, 1)
        let ms = m.latencyHistogram(top: 5, bins: 5, divisor: 1000)
        XCTAssertEqual(ms.counts, [3, 1, 1, 0, 0])
        XCTAssertEqual(ms.above, 0)
    }

    /// The --json record is BenchMeasurement's: each total is the rounds' sum, each ratio rounded to three places.
    func testTheRecordSumsTheRoundsAndRoundsItsRatios() {
        var m = ModeFigures(mode: .withoutResponse, size: 20)
        m.rounds = [RoundFigures(writes: 1000, nanoseconds: 1_000_000_000, cpuNanoseconds: 8_000_000)]
        m.bare = [RoundFigures(writes: 2000, nanoseconds: 1_000_000_000, cpuNanoseconds: 2_000_000),
                  RoundFigures(writes: 1000, nanoseconds: 1_000_000_000, cpuNanoseconds: 1_000_000)]
        XCTAssertEqual(m.bareWrites, 3000)
        XCTAssertEqual(m.json["bare"]?["writes"], 3000)
        XCTAssertEqual(m.json["ratioToBare"], .double(0.667))
        var bearers = BearerFigures(writers: 2)
        bearers.oneBearer = [RoundFigures(writes: 300, nanoseconds: 1_000_000_000, cpuNanoseconds: 0),
                             RoundFigures(writes: 200, nanoseconds: 1_000_000_000, cpuNanoseconds: 0)]
        XCTAssertEqual(bearers.oneBearerWrites, 500)
        XCTAssertEqual(bearers.json(writesPerSecond: 500)["oneBearer"]?["writes"], 500)
        XCTAssertEqual(bearers.json(writesPerSecond: 500)["ratioToOneBearer"], .double(2))
    }

    func testXMLEscaping() {
        XCTAssertEqual(xmlEscaped(#"a&b<c>"d'e"#), "a&amp;b&lt;c&gt;&quot;d&apos;e")
        XCTAssertEqual(xmlEscaped("µs ✓"), "µs ✓")
    }

    /// The smallest 1-2-5 step with at most 8 intervals: 3.016 s → 0.5 (top 3.5, not 4); 1.501 → 0.2 (top 1.6);
    /// 97.6 → 20 (10 would need 10 intervals); 5000 → 1000.
    func testAxesEndOnANiceTick() {
        XCTAssertEqual(Axis(max: 3.016).step, 0.5)
        XCTAssertEqual(Axis(max: 3.016).top, 3.5)
        let a = Axis(max: 1.501)
        XCTAssertEqual(a.step, 0.2, accuracy: 1e-12)
        XCTAssertEqual(a.top, 1.6, accuracy: 1e-12)
        XCTAssertEqual(a.ticks.count, 9)
        XCTAssertEqual(Axis(max: 97.6).step, 20)
        XCTAssertEqual(Axis(max: 97.6).top, 100)
        XCTAssertEqual(Axis(max: 5000).step, 1000)
        XCTAssertEqual(Axis(max: 5000).top, 5000)
        XCTAssertEqual(Axis(max: 0).top, 1)
        XCTAssertEqual(tickLabel(0.5, step: 0.5), "0.5")
        XCTAssertEqual(tickLabel(40, step: 20), "40")
    }
}

/// An SVG document parsed as XML (so a malformed one fails): the root element, every text's characters, and
/// how many elements of each name.
struct SVGSummary {
    var root = ""
    var texts: [String] = []
    var elements: [String: Int] = [:]

    init(_ svg: String) throws {
        let delegate = Collector()
        let parser = XMLParser(data: Data(svg.utf8))
        parser.delegate = delegate
        guard parser.parse() else {
            throw NSError(domain: "SVGSummary", code: 1, userInfo: [NSLocalizedDescriptionKey: "malformed SVG: \(parser.parserError.map { "\($0)" } ?? "?")"])
        }
        root = delegate.root
        texts = delegate.texts
        elements = delegate.elements
    }

    func count(_ name: String) -> Int { elements[name] ?? 0 }

    private final class Collector: NSObject, XMLParserDelegate {
        var root = ""
        var texts: [String] = []
        var elements: [String: Int] = [:]
        private var inText = false
        private var current = ""

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            if root.isEmpty { root = name }
            elements[name, default: 0] += 1
            if name == "text" { inText = true; current = "" }
        }
        func parser(_ parser: XMLParser, foundCharacters string: String) { if inText { current += string } }
        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            if name == "text" { inText = false; texts.append(current) }
        }
    }
}

final class WriteSeriesTests: XCTestCase {
    /// Two rounds of 250 ms end to end: the second's samples start at 250 ms. Commands sampled as the bench does
    /// (writes so far at a time since the round's start); every write lands in exactly one bucket.
    func testRoundsLaidEndToEnd() {
        var s = WriteSeries()
        s.sample(writesSoFar: 0, elapsed: 0)
        s.sample(writesSoFar: 10, elapsed: 50_000_000)     // bucket 0
        s.sample(writesSoFar: 30, elapsed: 150_000_000)    // bucket 1
        s.sample(writesSoFar: 35, elapsed: 240_000_000)    // bucket 2
        s.closeRound(nanoseconds: 250_000_000)
        s.sample(writesSoFar: 8, elapsed: 40_000_000)      // 290 ms: bucket 2
        s.sample(writesSoFar: 20, elapsed: 200_000_000)    // 450 ms: bucket 4
        s.closeRound(nanoseconds: 260_000_000)             // 510 ms in all
        XCTAssertEqual(s.writes, [10, 20, 13, 0, 12])
        XCTAssertEqual(s.nanoseconds, 510_000_000)
        // Bucket 5 (500-510 ms) holds nothing and is not there; with 100-byte values: 10 writes in 100 ms = 10 kB/s.
        XCTAssertEqual(s.bytesPerSecond(size: 100), [10_000, 20_000, 13_000, 0, 12_000])
        XCTAssertEqual(s.json(size: 100).compact, #"{"bucketMilliseconds":100,"writes":[10,20,13,0,12],"bytes":[1000,2000,1300,0,1200]}"#)
    }

    /// Requests from their round trips: 15 ms each, 20 of them: 300 ms, 6.67 a bucket; the last bucket (exactly
    /// the 300 ms answer) is under half a bucket long and is not drawn.
    func testRequestsFromTheirRoundTrips() {
        var s = WriteSeries()
        s.addRound(latencies: [UInt64](repeating: 15_000_000, count: 20))
        XCTAssertEqual(s.writes.reduce(0, +), 20)
        XCTAssertEqual(s.writes, [6, 7, 6, 1])   // answers at 15, 30, ... 90 | 105 ... 195 | 210 ... 285 | 300 ms
        XCTAssertEqual(s.bytesPerSecond(size: 10).count, 3)
        XCTAssertEqual(s.bytesPerSecond(size: 10)[0], 600, accuracy: 1e-9)
    }
}
