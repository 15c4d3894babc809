// `mirror bench` against the scripted peer: both modes in one run, the figures' shape, the peer's counts, and the
// ratio to the bare socket loop.
import BenchMeasurement
import LinuxBluetooth
import LinkCore
import Foundation
import JSON
import TestSupport
import XCTest
@testable import MirrorCommandLine

final class BenchCommandTests: XCTestCase {
    var peer: GATTPeer!

    override func setUpWithError() throws { peer = try GATTPeer() }
    override func tearDown() { peer.close() }

    func testBothModesInOneRunAsJSON() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "300",
                                         "--warmup", "20", "--size", "100", "--counter", peer.hexHandle("writeCount"), "--rounds", "2", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        XCTAssertEqual(json["size"], 100)
        XCTAssertEqual(json["mtu"], 247)
        XCTAssertEqual(json["rounds"], 2)
        XCTAssertEqual(json["bareLoop"], "second-connection")
        let request = json["modes"]?[0]
        let command = json["modes"]?[1]
        XCTAssertEqual(request?["mode"], "with-response")
        XCTAssertEqual(request?["writes"], 600)
        XCTAssertEqual(request?["bytes"], 60000)
        XCTAssertEqual(request?["confirmed"], 600)
        for key in ["p50", "p90", "p99", "max"] {
            guard let v = request?["latencyMicroseconds"]?[key]?.number else { return XCTFail("latency \(key): \(run.stdout)") }
            XCTAssertGreaterThan(v, 0)
        }
        XCTAssertEqual(command?["mode"], "without-response")
        XCTAssertEqual(command?["writes"], 600)
        XCTAssertEqual(command?["confirmed"], 600, "the peer counted every Write Command")
        XCTAssertNotNil(command?["backpressure"]?["seconds"])
        for mode in [request, command] {
            guard let ratio = mode?["ratioToBare"]?.number else { return XCTFail("no ratio: \(run.stdout)") }
            XCTAssertGreaterThan(ratio, 0)
            XCTAssertEqual(mode?["bare"]?["writes"], 600)
        }
        XCTAssertEqual(request?["bare"]?["confirmed"], 600, "each bare Write Request got its Write Response")
        XCTAssertEqual(command?["bare"]?["confirmed"], 600, "the counter read around each bare round")
        // Everything the CLI and the bare loop sent arrived: warm-ups, measured writes and the bare loop's own.
        XCTAssertEqual(peer.counters.writeCommands, 20 + 600 + 20 + 600)
    }

    /// --batch (issue 38 point 4): a round through one `write(handle:contentsOf:)` / `writeWithoutResponse(handle:
    /// contentsOf:)` call after each round, under its own JSON key and lines; the plain figures and counts unchanged.
    func testBatchCallsGetTheirOwnFigures() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "300",
                                         "--warmup", "20", "--size", "100", "--counter", peer.hexHandle("writeCount"), "--rounds", "2",
                                         "--batch", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        for (i, api) in ["write(handle:contentsOf:)", "writeWithoutResponse(handle:contentsOf:)"].enumerated() {
            let mode = json["modes"]?[i]
            XCTAssertEqual(mode?["writes"], 600)
            XCTAssertEqual(mode?["confirmed"], 600, "the plain writes' count leaves the batch rounds out")
            XCTAssertEqual(mode?["bare"]?["writes"], 600)
            let batch = mode?["batch"]
            XCTAssertEqual(batch?["api"], .string(api))
            XCTAssertEqual(batch?["writes"], 600, "as many writes as the plain rounds")
            XCTAssertEqual(batch?["confirmed"], 600, "\(api): every write confirmed (Write Responses, or the counter)")
            XCTAssertGreaterThan(batch?["writesPerSecond"]?.number ?? 0, 0)
            XCTAssertGreaterThan(batch?["cpuRatioToBare"]?.number ?? 0, 0)
            XCTAssertNotNil(batch?["ratioToPlain"]?.number)
        }
        XCTAssertNotNil(json["modes"]?[1]?["batch"]?["backpressure"]?["waits"])
        XCTAssertEqual(peer.counters.writeCommands, 20 + 600 + 600 + 20 + 600)

        let text = try MirrorProcess.run(["bench", "--loopback", "--count", "200", "--warmup", "10", "--size", "20", "--rounds", "1", "--batch"])
        XCTAssertEqual(text.status, 0, text.stderr)
        let lines = text.stdout.split(separator: "\n").map(String.init)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("batch calls (--batch: ") }) else { return XCTFail(text.stdout) }
        XCTAssertGreaterThan(header, lines.lastIndex { $0.hasPrefix("  bare socket loop: ") } ?? .max, "after the modes' lines")
        XCTAssertTrue(lines[header + 1].hasPrefix("with response, one write(handle:contentsOf:) call per round: "), text.stdout)
        XCTAssertTrue(lines[header + 1].contains("(200 writes in "), text.stdout)
        XCTAssertTrue(lines[header + 2].hasPrefix("  CPU per write: ") && lines[header + 2].contains("batch/bare CPU = "), text.stdout)
        XCTAssertTrue(lines[header + 3].hasPrefix("without response, one writeWithoutResponse(handle:contentsOf:) call per round: "), text.stdout)
        XCTAssertTrue(lines[header + 3].hasSuffix("peer confirmed 200"), text.stdout)
        XCTAssertTrue(lines[header + 4].hasPrefix("  waiting on backpressure: "), text.stdout)

        let plain = try MirrorProcess.run(["bench", "--loopback", "--count", "100", "--warmup", "10", "--rounds", "1", "--json"])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertNil(try plain.json()["modes"]?[0]?["batch"], "no batch rounds without --batch")
    }

    func testTextAndDurationAndSingleMode() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--duration", "0.3",
                                         "--mode", "without-response"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines[0].hasPrefix("bench \(peer.target) handle \(peer.hexHandle("sink")): 244-byte values, MTU 247, 100 warm-up writes, median of 3 rounds"), run.stdout)
        XCTAssertEqual(lines[1], "bare socket loop: a second connection to the same peer, rounds alternating with mirror's")
        // Issue 37: the figures at a glance first, a column per mode, then each mode's detail.
        XCTAssertEqual(lines[2].trimmingCharacters(in: .whitespaces), "without response", run.stdout)
        for (i, row) in ["writes/s", "throughput", "round trip p50", "round trip p99", "CPU per write", "bare loop writes/s",
                         "mirror/bare writes/s", "mirror/bare CPU"].enumerated() {
            XCTAssertTrue(lines[3 + i].hasPrefix(row + "  "), "\(row): \(run.stdout)")
        }
        XCTAssertTrue(lines[5].hasSuffix(" -") && lines[6].hasSuffix(" -"), "no round trip without responses: \(run.stdout)")
        XCTAssertEqual(lines[11], "details:")
        XCTAssertTrue(lines[12].hasPrefix("without response (Write Command): "), run.stdout)
        let rate = lines[12].components(separatedBy: ", ")[1]  // "N writes/s (..."
        XCTAssertTrue(lines[3].hasSuffix(" " + rate.components(separatedBy: " ")[0]), "the table's writes/s is the detail's: \(lines[3]) / \(lines[12])")
        XCTAssertFalse(run.stdout.contains("with response (Write Request)"))
        XCTAssertTrue(lines.contains { $0.hasPrefix("  waiting on backpressure: ") }, run.stdout)
        XCTAssertTrue(lines.contains { $0.hasPrefix("  bare socket loop: ") && $0.contains("mirror/bare = ") }, run.stdout)
    }

    func testBenchRefusesAValueOverTheBudget() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--size", "300", "--mtu", "100"])
        XCTAssertEqual(run.status, 4, run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: not sent: 300-byte value exceeds the 97-byte budget of MTU 100 (local limit)")
    }

    func testLoopbackNeedsNoTarget() throws {
        let run = try MirrorProcess.run(["bench", "--loopback", "--count", "500", "--size", "20", "--rounds", "1", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        XCTAssertEqual(json["mtu"], 517)
        XCTAssertEqual(json["handle"], 0x12)
        XCTAssertEqual(json["modes"]?[0]?["confirmed"], 500)
        XCTAssertEqual(json["modes"]?[1]?["confirmed"], 500, "the loopback peer counted every Write Command")
        XCTAssertNotNil(json["modes"]?[1]?["ratioToBare"])
        let both = try MirrorProcess.run(["bench", "--loopback", "unix:/tmp/x"])
        XCTAssertEqual(both.status, 2)
        XCTAssertEqual(both.stderr.split(separator: "\n").first, "mirror: --loopback runs its own peer: no TARGET (\"unix:/tmp/x\" was given)")
        let neither = try MirrorProcess.run(["bench"])
        XCTAssertEqual(neither.status, 2)
    }

    /// The bare loop as it runs over LE (one ATT socket per link): on the GATT client's own socket, lent by its
    /// bearer for each round, with the same counts.
    func testSameConnectionBareLoopAsOverLE() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "200",
                                         "--warmup", "10", "--size", "50", "--counter", peer.hexHandle("writeCount"),
                                         "--rounds", "2", "--bare-loop", "same-connection", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        XCTAssertEqual(json["bareLoop"], "same-connection")
        XCTAssertEqual(peer.counters.connections, 1, "no second connection")
        for (i, name) in ["with-response", "without-response"].enumerated() {
            let mode = json["modes"]?[i]
            XCTAssertEqual(mode?["mode"], .string(name))
            XCTAssertEqual(mode?["writes"], 400)
            XCTAssertEqual(mode?["confirmed"], 400, "\(name): mirror's own writes, the bare loop's not mixed in")
            XCTAssertEqual(mode?["bare"]?["writes"], 400)
            XCTAssertEqual(mode?["bare"]?["confirmed"], 400, "\(name): every bare-loop write confirmed or counted")
            guard let ratio = mode?["ratioToBare"]?.number else { return XCTFail("\(name): no ratio: \(run.stdout)") }
            XCTAssertGreaterThan(ratio, 0)
            switch mode?["bare"]?["writesPerSecond"] {
            case .int(let rate)?: XCTAssertGreaterThan(rate, 0)
            case .double(let rate)?: XCTAssertGreaterThan(rate, 0)
            default: XCTFail("\(name): no bare rate: \(run.stdout)")
            }
        }
        XCTAssertEqual(peer.counters.writeRequests, 10 + 400 + 10 + 400)
        XCTAssertEqual(peer.counters.writeCommands, 10 + 400 + 10 + 400)

        let text = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "50",
                                          "--warmup", "5", "--rounds", "1", "--bare-loop", "same-connection"])
        XCTAssertEqual(text.status, 0, text.stderr)
        let lines = text.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines[1], "bare socket loop: this connection's socket, lent by mirror's bearer round by round (an LE link takes one ATT socket)")
        let bareLines = lines.filter { $0.hasPrefix("  bare socket loop: ") }
        XCTAssertEqual(bareLines.count, 2, text.stdout)
        XCTAssertTrue(bareLines[0].contains("mirror/bare = ") && bareLines[0].hasSuffix("; peer confirmed 50"), text.stdout)
    }

    func testBareLoopNoneAndItsLimits() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "50",
                                         "--warmup", "5", "--rounds", "1", "--bare-loop", "none", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        XCTAssertEqual(json["bareLoop"], .null)
        XCTAssertNil(json["modes"]?[0]?["ratioToBare"])
        XCTAssertNil(json["modes"]?[1]?["bare"])
        XCTAssertEqual(peer.counters.connections, 1)

        let le = try MirrorProcess.run(["bench", "00:AA:01:01:00:01", "--handle", "0x0012", "--bare-loop", "second-connection"])
        XCTAssertEqual(le.status, 2, le.stderr)
        XCTAssertEqual(le.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: --bare-loop second-connection needs a unix: target: an LE link takes one ATT socket (a second connect on CID 4 to the same peer fails with EBUSY); use same-connection")
        let bad = try MirrorProcess.run(["bench", peer.target, "--handle", "0x0012", "--bare-loop", "elsewhere"])
        XCTAssertEqual(bad.status, 2, bad.stderr)
        XCTAssertEqual(bad.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: --bare-loop: invalid bare loop placement \"elsewhere\": expected one of second-connection, same-connection, none")
    }

    /// Each mode's `ceiling` (a unix: target has no radio: no figures, and it says so) and its `series`: writes per
    /// 100 ms bucket that add up to the measured writes, bytes = writes × size.
    func testJSONHasTheCeilingAndTheSeries() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--duration", "0.25",
                                         "--warmup", "10", "--size", "40", "--rounds", "2", "--bare-loop", "none", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        for i in 0..<2 {
            let mode = json["modes"]?[i]
            let name = mode?["mode"]?.string ?? "mode \(i)"
            let ceiling = mode?["ceiling"]
            XCTAssertEqual(ceiling?["bytesPerSecond"], .null, name)
            XCTAssertEqual(ceiling?["writesPerSecond"], .null, name)
            XCTAssertEqual(ceiling?["fraction"], .null, name)
            XCTAssertEqual(ceiling?["basis"], "unix socket", name)
            XCTAssertEqual(ceiling?["note"], "no radio: unix socket", name)
            let series = mode?["series"]
            XCTAssertEqual(series?["bucketMilliseconds"], 100, name)
            let writes = try XCTUnwrap(series?["writes"]?.items?.compactMap(\.integer), name)
            let bytes = try XCTUnwrap(series?["bytes"]?.items?.compactMap(\.integer), name)
            let measured = try XCTUnwrap(mode?["writes"]?.integer, name)
            XCTAssertGreaterThan(measured, 0, name)
            XCTAssertEqual(writes.reduce(0, +), measured, "\(name): the series counts every measured write once")
            XCTAssertEqual(bytes, writes.map { $0 * 40 }, name)
            XCTAssertTrue(writes.allSatisfy { $0 >= 0 }, name)
            // Two rounds of 0.25 s end to end: 5 or 6 buckets (the drain after the last Write Command adds a little).
            let seconds = try XCTUnwrap(mode?["seconds"]?.number, name)
            // The last Write Command's drain can cross into one more 100 ms than the last write's bucket.
            XCTAssertTrue([Int(seconds * 10), Int(seconds * 10) + 1].contains(writes.count), "\(name): one bucket per 100 ms of \(seconds) s: \(writes)")
            XCTAssertGreaterThan(writes.filter { $0 > 0 }.count, 3, "\(name): writes in most buckets: \(writes)")
        }
        let text = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "50",
                                          "--warmup", "5", "--rounds", "1", "--bare-loop", "none"])
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertEqual(text.stdout.split(separator: "\n").filter { $0 == "  ceiling: no radio: unix socket" }.count, 2, text.stdout)
    }

    /// Each mode's rounds' spread: the slowest and fastest round and their ratio, flagged over 1.5x, in JSON and text.
    func testTheRoundsSpreadIsPrintedAndJudged() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "100",
                                         "--warmup", "5", "--rounds", "3", "--bare-loop", "none", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        for i in 0..<2 {
            let spread = try XCTUnwrap(json["modes"]?[i]?["roundSpread"], run.stdout)
            let slowest = try XCTUnwrap(spread["slowestWritesPerSecond"]?.number)
            let fastest = try XCTUnwrap(spread["fastestWritesPerSecond"]?.number)
            let ratio = try XCTUnwrap(spread["ratio"]?.number)
            XCTAssertLessThanOrEqual(slowest, fastest)
            XCTAssertEqual(ratio, fastest / slowest, accuracy: 0.01 * ratio + 0.002)
            XCTAssertEqual(spread["limit"]?.number, 1.5)
            XCTAssertEqual(spread["flagged"], .bool(ratio > 1.5))
        }
        let one = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "50",
                                         "--warmup", "5", "--rounds", "1", "--bare-loop", "none"])
        XCTAssertEqual(one.status, 0, one.stderr)
        XCTAssertFalse(one.stdout.contains("  rounds: slowest"), "one round has no spread: \(one.stdout)")
        let text = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "50",
                                          "--warmup", "5", "--rounds", "2", "--bare-loop", "none"])
        XCTAssertEqual(text.status, 0, text.stderr)
        let lines = text.stdout.split(separator: "\n").filter { $0.hasPrefix("  rounds: slowest ") }
        XCTAssertEqual(lines.count, 2, text.stdout)
        XCTAssertTrue(lines.allSatisfy { $0.contains(" writes/s, spread ") && $0.contains("x") }, text.stdout)
    }

    /// The `--help` example `mirror bench unix:/tmp/mirror-sim.sock --handle 0x0012` against a simulator whose
    /// cloudToken takes at most 40 bytes (`--token-limit 40`, as the bundled profile's own limit; the upload URL's
    /// secret): without --size the bench finds that size and says so; with a --size
    /// the characteristic refuses, the error names the phase and what to pass.
    func testTheHelpExampleFindsTheSizeTheCharacteristicAccepts() throws {
        let path = temporarySocketPath("bench-sim")
        let sim = try BackgroundTool("mirror-sim", ["unix:\(path)", "--token-limit", "40"], readyWhen: "listening on unix:\(path)", stderrToo: true)
        defer { sim.stop() }
        let run = try MirrorProcess.run(["bench", "unix:\(path)", "--handle", "0x0012", "--count", "50", "--warmup", "10",
                                         "--rounds", "1", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        XCTAssertEqual(json["size"], 40, run.stdout)
        XCTAssertEqual(json["sizeProbe"]?["tried"], 512)
        XCTAssertEqual(json["sizeProbe"]?["refused"], 512)
        XCTAssertEqual(json["sizeProbe"]?["chosen"], 40)
        XCTAssertEqual(json["modes"]?[0]?["writes"], 50)
        XCTAssertTrue(run.stderr.contains("bench: the peer refused 512-byte values on 0x0012 (ATT error 0x0D Invalid Attribute Value Length, its own limit); benching with 40-byte values, the largest it accepted (give --size to choose)"), run.stderr)

        let refused = try MirrorProcess.run(["bench", "unix:\(path)", "--handle", "0x0012", "--size", "100", "--count", "10"])
        XCTAssertEqual(refused.status, 3, refused.stderr)
        XCTAssertTrue(refused.stderr.hasPrefix("mirror: ATT error 0x0D Invalid Attribute Value Length from the peer, on Write Request to handle 0x0012 (cloudToken): 100-byte value"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("\nbench stopped in the Write Request warm-up: the characteristic refused 100-byte values: pass a smaller --size"), refused.stderr)
        let refusedJSON = try MirrorProcess.run(["bench", "unix:\(path)", "--handle", "0x0012", "--size", "100", "--count", "10", "--json"])
        XCTAssertEqual(try refusedJSON.json()["error"]?["phase"], "the Write Request warm-up", refusedJSON.stdout)
        XCTAssertEqual(try refusedJSON.json()["error"]?["code"], 13)
    }

    /// SIGINT or SIGTERM during a run: the rounds done are printed (text and JSON say it was interrupted) and the
    /// exit status is 130 or 143. The signal is sent once the peer has seen the second round's first write, so the
    /// first round was recorded before it.
    func testASignalPrintsTheRoundsDoneAndExitsWithItsStatus() throws {
        for (signal, status, name, json) in [(SIGINT, Int32(130), "SIGINT", false), (SIGTERM, Int32(143), "SIGTERM", true)] {
            let before = peer.counters.writeRequests
            let process = Process()
            process.executableURL = MirrorProcess.executable
            process.arguments = ["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "200", "--warmup", "10",
                                 "--rounds", "1000", "--bare-loop", "none", "--mode", "with-response"] + (json ? ["--json"] : [])
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            let watchdog = ProcessWatchdog(process, "mirror bench")
            let deadline = Date().addingTimeInterval(30)
            while peer.counters.writeRequests < before + 10 + 200 + 1 {
                XCTAssertTrue(process.isRunning, "bench ended before its second round")
                XCTAssertLessThan(Date(), deadline, "the peer saw no second round within 30 s")
                if !process.isRunning || Date() >= deadline { break }
                usleep(2000)
            }
            kill(process.processIdentifier, signal)
            let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            _ = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            XCTAssertNil(watchdog.end())
            XCTAssertEqual(process.terminationStatus, status, "\(name): \(stdout)")
            if json {
                let result = try parseJSON(stdout)
                XCTAssertEqual(result["interrupted"]?["signal"], .string(name), stdout)
                let done = try XCTUnwrap(result["interrupted"]?["roundsDone"]?.integer)
                XCTAssertGreaterThanOrEqual(done, 1)
                XCTAssertEqual(result["modes"]?[0]?["writes"]?.integer, done * 200, "the figures are the rounds done")
            } else {
                XCTAssertTrue(stdout.contains("interrupted by \(name) after "), stdout)
                XCTAssertTrue(stdout.contains("with response (Write Request): "), stdout)
            }
        }
    }

    /// The one stopwatch both benches time with: the wall clock and the process's CPU time over the same stretch.
    func testTheStopwatchReadsTheWallClockAndTheProcessCPUTime() {
        let watch = Stopwatch()
        var spin: UInt64 = 0
        while monotonicNanoseconds() - watch.wallStart < 20_000_000 { spin &+= 1 }
        let e = watch.elapsed()
        XCTAssertGreaterThanOrEqual(e.wallNanoseconds, 20_000_000)
        XCTAssertGreaterThan(e.cpuNanoseconds, 5_000_000, "a 20 ms busy loop (\(spin) turns) spends CPU time")
        XCTAssertEqual(watch.elapsed(at: watch.wallStart + 7).wallNanoseconds, 7, "a wall reading the caller took")
    }

    /// The spread's judgement and the true median, computed apart from any run.
    func testMedianAndSpreadArithmetic() {
        XCTAssertEqual(median([1, 3]), 2, "an even count's median is the mean of the middle two, not the larger")
        XCTAssertEqual(median([4, 1, 3, 2]), 2.5)
        XCTAssertEqual(median([5, 1, 3]), 3)
        XCTAssertEqual(median([]), 0)
        XCTAssertNil(RoundSpread([1000]))
        let wide = RoundSpread([1000, 2300])!
        XCTAssertEqual(wide.ratio, 2.3, accuracy: 1e-9)
        XCTAssertTrue(wide.flagged)
        XCTAssertTrue(wide.text.contains("spread 2.30x: over 1.50x, the rounds disagree"), wide.text)
        XCTAssertFalse(RoundSpread([1000, 1400, 1200])!.flagged)
    }

    /// A run shorter than WriteSeries.minimumBuckets buckets: a warning in text and JSON, and no line in the plot.
    func testARunTooShortForASeriesSaysSoAndDrawsNoLine() throws {
        let path = NSTemporaryDirectory() + "mirror-bench-short-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).svg"
        defer { unlink(path) }
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "20",
                                         "--warmup", "5", "--rounds", "1", "--bare-loop", "none", "--plot", path])
        XCTAssertEqual(run.status, 0, run.stderr)
        let warnings = run.stdout.split(separator: "\n").filter { $0.hasPrefix("  series: the measured rounds lasted ") }
        XCTAssertEqual(warnings.count, 2, run.stdout)
        XCTAssertTrue(warnings.allSatisfy { $0.contains("under 5 buckets of 100 ms: no throughput-over-time line") }, run.stdout)
        let parsed = try SVGSummary(String(contentsOfFile: path, encoding: .utf8))
        XCTAssertEqual(parsed.count("polyline"), 0, "no line from a dot per mode")
        XCTAssertTrue(parsed.texts.contains { $0.hasPrefix("Write Request and Write Command: run too short for a series") }, "\(parsed.texts)")
        let json = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "20",
                                          "--warmup", "5", "--rounds", "1", "--bare-loop", "none", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertTrue(try json.json()["modes"]?[0]?["series"]?["warning"]?.string?.contains("under 5 buckets") ?? false, json.stdout)
    }

    /// --plot draws both panels, the legend and the axes' labels, as well-formed XML.
    func testPlotWritesAnSVG() throws {
        let path = NSTemporaryDirectory() + "mirror-bench-plot-\(getpid()).svg"
        defer { unlink(path) }
        // 0.6 s: six 100 ms buckets, over WriteSeries.minimumBuckets, so each mode draws its line.
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--duration", "0.6",
                                         "--warmup", "5", "--rounds", "1", "--bare-loop", "none", "--plot", path])
        XCTAssertEqual(run.status, 0, run.stderr)
        let svg = try String(contentsOfFile: path, encoding: .utf8)
        let parsed = try SVGSummary(svg)
        XCTAssertEqual(parsed.root, "svg")
        for words in ["mirror bench \(peer.target): MTU 247, 244-byte values, 1 round per mode",
                      "ceiling: none, no radio: unix socket",
                      "Throughput over time (100 ms buckets)", "Write Request round trip",
                      "measured time (s), each mode's rounds end to end",
                      "Write Request (with response), ", "Write Command (without response), ", "writes"] {
            XCTAssertTrue(parsed.texts.contains { $0.hasPrefix(words) }, "no text \(words): \(parsed.texts)")
        }
        XCTAssertTrue(parsed.texts.contains { $0.hasPrefix("throughput (") && $0.hasSuffix("B/s)") }, "\(parsed.texts)")
        // µs over a socketpair, ms once the 99th percentile reaches 2 ms (a loaded machine): the unit follows the data.
        XCTAssertTrue(parsed.texts.contains { $0.hasPrefix("round trip (µs), bins of ") || $0.hasPrefix("round trip (ms), bins of ") }, "\(parsed.texts)")
        XCTAssertEqual(parsed.count("polyline"), 2, "one line per mode")
        XCTAssertGreaterThan(parsed.count("rect"), 2, "the background and the histogram's bars")
        XCTAssertFalse(svg.contains("stroke-dasharray"), "no ceiling line without a radio")
    }

    /// A --plot path that cannot be created fails at once, as the tool's other file errors (exit 1), before connecting.
    func testPlotToAnUnwritablePathFailsCleanly() throws {
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--plot", "/nonexistent-dir/plot.svg"])
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: creating the plot file /nonexistent-dir/plot.svg: open failed with ENOENT (No such file or directory)")
        XCTAssertEqual(peer.counters.connections, 0, "nothing was measured")
        let json = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--plot", "/nonexistent-dir/plot.svg", "--json"])
        XCTAssertEqual(json.status, 1)
        XCTAssertEqual(try json.json()["error"]?["syscall"], "open")
        let empty = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--plot", ""])
        XCTAssertEqual(empty.status, 2)
        // A run that fails leaves no file behind.
        let path = NSTemporaryDirectory() + "mirror-bench-failed-\(getpid()).svg"
        let failed = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--size", "300", "--mtu", "100", "--plot", path])
        XCTAssertEqual(failed.status, 4, failed.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        // A path that was there before is the user's (an older plot, a device): written, never removed.
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("older".utf8)))
        defer { unlink(path) }
        let again = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--size", "300", "--mtu", "100", "--plot", path])
        XCTAssertEqual(again.status, 4, again.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
    }

    /// A peer that is also a GATT client (bluetoothd is) sends requests of its own: the engine answers them during
    /// mirror's rounds, the bare loop during its own (Request Not Supported), so the link is not dropped.
    func testPeerRequestsAreAnsweredByTheEngineAndTheBareLoop() throws {
        peer.close()
        var behaviour = GATTPeer.Behaviour()
        behaviour.peerRequestEvery = 30
        peer = try GATTPeer(behaviour: behaviour)
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "100",
                                         "--warmup", "0", "--rounds", "1", "--mode", "with-response",
                                         "--bare-loop", "same-connection", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try run.json()["modes"]?[0]?["bare"]?["confirmed"], 100)
        XCTAssertEqual(peer.counters.writeRequests, 200)
        XCTAssertEqual(peer.counters.peerRequestsSent, 6)
        XCTAssertEqual(peer.counters.peerRequestsAnswered, 6, "3 answered by the engine, 3 by the bare loop")
    }

    /// A bare-loop turn on the lent socket is bounded by --timeout: a peer that stops answering after mirror's
    /// round fails the run naming what the bare loop waited for, and the bearer's close still comes.
    func testABareLoopTurnThatGetsNoAnswerTimesOutNamingIt() throws {
        peer.close()
        var behaviour = GATTPeer.Behaviour()
        behaviour.silentAfterWriteRequests = 10
        peer = try GATTPeer(behaviour: behaviour)
        let run = try MirrorProcess.run(["bench", peer.target, "--handle", peer.hexHandle("sink"), "--count", "10",
                                         "--warmup", "0", "--rounds", "1", "--mode", "with-response",
                                         "--bare-loop", "same-connection", "--timeout", "1"])
        XCTAssertEqual(run.status, 5, run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init), "mirror: timed out after 1 s waiting for a response in the bare loop")
        XCTAssertEqual(peer.counters.writeRequests, 11, "mirror's 10 answered, the bare loop's first never")
    }
}
