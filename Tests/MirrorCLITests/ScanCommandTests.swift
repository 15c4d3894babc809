// `mirror scan` and `mirror wifi` as a user runs them: the built `mirror` against the built `mirror-sim`,
// both subprocesses, on a unix: socket (SimulatorProcess is in SimulatorTests.swift).
import TestSupport
import Foundation
import JSON
import MirrorCommandLine
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class ScanCommandTests: XCTestCase {
    var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "scan-cli-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }
    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    func scan(_ sim: SimulatorProcess, _ extra: [String] = []) throws -> (MirrorRun, [JSONValue]) {
        let run = try MirrorProcess.run(["scan", sim.target, "--json", "--upload-dir", directory, "--upload-port", "0",
                                         "--settle", "0.05"] + extra, timeout: 60)
        return (run, try run.jsonLines())
    }

    /// Issue 34 as a user sees it: a simulator whose firmware takes 36 bytes though the bundled profile says 40. The
    /// 40-byte URL (an ephemeral port, a 17-character secret) meets 0x0D; the 35-byte retry is taken; the scan
    /// completes and reports the limit it found, in JSON (`cloudTokenLimit`) and in text. At 30 even the retry is
    /// refused: writeFailed, exit 3 (the peer's error), and the result says the limit is below 35.
    func testAMirrorsLowerCloudTokenLimitIsLearnedAndReported() throws {
        let sim = try SimulatorProcess(["--token-limit", "36"])
        defer { sim.stop() }
        let (run, lines) = try scan(sim)
        XCTAssertEqual(run.status, 0, run.stderr)
        let result = try XCTUnwrap(lines.last)
        XCTAssertEqual(result["outcome"], "complete", run.stdout)
        XCTAssertEqual(result["cloudTokenLimit"]?["accepted"], 35, run.stdout)
        XCTAssertEqual(result["cloudTokenLimit"]?["refused"], 40, run.stdout)
        XCTAssertEqual(result["uploadURL"]?.string?.utf8.count, 35, run.stdout)
        XCTAssertTrue(lines.contains { ($0["detail"]?.string ?? "").hasPrefix("the mirror refused a 40-byte cloudToken with 0x0D Invalid Attribute Value Length although the profile allows 40") }, run.stdout)

        let text = try MirrorProcess.run(["scan", sim.target, "--upload-dir", directory, "--upload-port", "0", "--settle", "0.05"], timeout: 60)
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertTrue(text.stdout.contains("\n  cloudToken: the mirror took 35 bytes and refused 40: its cloudToken limit is 35 to 39 bytes; put \"cloudTokenMaxLength\": 35 in the profile (--profile)\n"), text.stdout)

        let small = try SimulatorProcess(["--token-limit", "30"])
        defer { small.stop() }
        let (refused, refusedLines) = try scan(small)
        XCTAssertEqual(refused.status, 3, refused.stderr)
        let r = try XCTUnwrap(refusedLines.last)
        XCTAssertEqual(r["outcome"], "writeFailed", refused.stdout)
        XCTAssertEqual(r["rejectedBy"], "peer", refused.stdout)
        XCTAssertEqual(r["cloudTokenLimit"]?["accepted"], .null, refused.stdout)
        XCTAssertEqual(r["cloudTokenLimit"]?["refused"], 35, refused.stdout)
        XCTAssertTrue((r["failure"]?.string ?? "").hasSuffix("; the mirror refused even the shortest upload URL (35 bytes, a 72-bit secret): its cloudToken limit is below 35 bytes; a shorter --upload-host or --upload-port would shorten the URL"), refused.stdout)
    }

    /// SIGINT or SIGTERM once the scan has started (initDeviceForScan answered, the simulator's slow pace): the scan
    /// sends cancelScan, reads the final state, prints its result (outcome interrupted, cancelScanSent) and exits 130
    /// or 143; the simulator is back at invalid, so it posts nothing to the receiver that is gone.
    func testASignalDuringTheScanSendsCancelScanThenExitsWithItsStatus() throws {
        for (signal, status, json) in [(SIGINT, Int32(130), false), (SIGTERM, Int32(143), true)] {
            let sim = try SimulatorProcess(["--pace", "realistic"])
            defer { sim.stop() }
            let process = Process()
            process.executableURL = MirrorProcess.executable
            process.arguments = ["scan", sim.target, "--upload-dir", directory, "--upload-port", "0", "--settle", "0.05"] + (json ? ["--json"] : [])
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            let watchdog = ProcessWatchdog(process, "mirror scan")
            // Read until the Write Response to initDeviceForScan: the scan has started on the mirror.
            let handle = out.fileHandleForReading
            var seen = readUntil(handle, contains: json ? "\"purpose\":\"afterWrites\"" : "[afterWrites]")
            XCTAssertTrue(process.isRunning, "the scan ended before it could be interrupted: \(String(decoding: seen, as: UTF8.self))")
            kill(process.processIdentifier, signal)
            seen.append(handle.readDataToEndOfFile())
            process.waitUntilExit()
            XCTAssertNil(watchdog.end())
            let stdout = String(decoding: seen, as: UTF8.self)
            XCTAssertEqual(process.terminationStatus, status, stdout)
            if json {
                let lines = try stdout.split(separator: "\n").map { try parseJSON(String($0)) }
                let result = try XCTUnwrap(lines.last)
                XCTAssertEqual(result["outcome"], "interrupted", stdout)
                XCTAssertEqual(result["cancelScanSent"], .bool(true), stdout)
                XCTAssertEqual(result["scanState"], "invalid", "cancelScan reset the simulator: \(stdout)")
                XCTAssertTrue(lines.contains { $0["purpose"] == "interrupt" && ($0["value"]?.string ?? "").hasPrefix("36") }, stdout)
            } else {
                XCTAssertTrue(stdout.contains("write scannerAction = cancelScan (36) [interrupt]"), stdout)
                XCTAssertTrue(stdout.contains(": interrupted: interrupted while waiting for scanState complete"), stdout)
                XCTAssertTrue(stdout.contains("cancelScan sent after the interrupt: the mirror stops"), stdout)
            }
        }
    }

    func testCompleteScanPrintsEventsAndTheResultAndExitsZero() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let (run, lines) = try scan(sim)
        XCTAssertEqual(run.status, 0, run.stderr)
        let result = try XCTUnwrap(lines.last)
        XCTAssertEqual(result["event"], "result")
        XCTAssertEqual(result["outcome"], "complete")
        XCTAssertEqual(result["scanState"], "complete")
        XCTAssertEqual(result["scanError"], "noError")
        XCTAssertEqual(result["sawAnyScanState"], true)
        XCTAssertEqual(result["preflightScanState"], "invalid")
        XCTAssertEqual(result["resetAttempted"], false)
        XCTAssertEqual(result["resetWorked"], .null)
        // The notifications dropped (none here), always in the result: before scanState and scanError were
        // subscribed, and after (the output fell behind).
        XCTAssertEqual(result["dropped"], .object([("total", 0), ("outputFellBehind", 0), ("beforeSubscribed", 0)]))
        // Issue 37: a unix: link has no radio; the reason is said once, not once per value, and every key is kept.
        let link = try XCTUnwrap(result["link"])
        XCTAssertEqual(link["unknown"], .string("not an LE link (\(sim.target) has no radio)"))
        for key in ["handle", "role", "intervalMs", "peripheralLatency", "supervisionTimeoutMs", "txPHY", "rxPHY", "dataLength",
                    "securityLevel", "encrypted", "adapterLEBuffers"] {
            XCTAssertEqual(link[key], .null, key)
        }
        XCTAssertEqual(link["attMTU"]?["value"], 517)
        XCTAssertEqual(lines.last?.compact.components(separatedBy: "has no radio").count, 2, "said once: \(lines.last?.compact ?? "")")
        let upload = try XCTUnwrap(result["upload"])
        guard case .string(let path)? = upload["path"], case .string(let sha)? = upload["sha256"], case .int(let bytes)? = upload["bytes"] else {
            return XCTFail("upload: \(upload)")
        }
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(data.count, bytes)
        XCTAssertEqual(sha.count, 64)
        XCTAssertEqual(upload["entries"], ["mesh.ply", "measurements.json"])
        // One object per event: every notification, read and write is there.
        let kinds = lines.compactMap { line -> String? in if case .string(let s)? = line["event"] { return s }; return nil }
        // The scanState notifications are the eight steps, in order, each once; scanError said noError first.
        func decoded(_ characteristic: String) -> [String] {
            lines.compactMap { line -> String? in
                guard line["event"] == "notification", line["characteristic"] == .string(characteristic),
                      case .string(let d)? = line["decoded"] else { return nil }
                return d
            }
        }
        XCTAssertEqual(decoded("scanState"), ["alignScale", "warmingUp", "waitingForWeight", "countDown", "preCheck",
                                              "scanning", "postCheck", "complete"])
        XCTAssertEqual(decoded("scanError").first, "noError")
        XCTAssertFalse(decoded("scanError").contains { $0 != "noError" }, "\(decoded("scanError"))")
        XCTAssertTrue(kinds.contains("read") && kinds.contains("write") && kinds.contains("writeResult") && kinds.contains("upload"))
    }

    func testMisalignedScaleExitsNonZeroWithScaleAlignment() throws {
        let sim = try SimulatorProcess(["--scale", "misaligned"])
        defer { sim.stop() }
        let (run, lines) = try scan(sim)
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(lines.last?["outcome"], "error")
        XCTAssertEqual(lines.last?["scanError"], "scaleAlignment")
        XCTAssertEqual(lines.last?["upload"], .null)
    }

    func testScenarioFileDrivesTheSimulator() throws {
        let scenario = directory + "/scenario.json"
        try Data(#"{"scale": "misaligned", "faults": ["delay:cloudToken:100"]}"#.utf8).write(to: URL(fileURLWithPath: scenario))
        let sim = try SimulatorProcess(["--scenario", scenario])
        defer { sim.stop() }
        let (run, lines) = try scan(sim)
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(lines.last?["scanError"], "scaleAlignment")
    }

    func testLatchedErrorResetAndTheMirrorsOwnTokenLimit() throws {
        let sim = try SimulatorProcess(["--latched-error", "--token-limit", "20"])
        defer { sim.stop() }
        let (run, lines) = try scan(sim)
        XCTAssertEqual(run.status, 3, "the peer's ATT error")
        let result = try XCTUnwrap(lines.last)
        XCTAssertEqual(result["outcome"], "writeFailed")
        XCTAssertEqual(result["rejectedBy"], "peer")
        XCTAssertEqual(result["preflightScanState"], "error")
        XCTAssertEqual(result["resetAttempted"], true)
        XCTAssertEqual(result["resetWorked"], true)
    }

    func testTimeoutOptionIsTheScanDeadline() throws {
        let sim = try SimulatorProcess(["--step-ms", "5000"])
        defer { sim.stop() }
        let (run, lines) = try scan(sim, ["--timeout", "0.5"])
        XCTAssertEqual(run.status, 5)
        XCTAssertEqual(lines.last?["outcome"], "timeout")
    }

    func testTheStatusLineRedrawsEverySecondOnATerminalAndStopsWithTheScan() throws {
        // Each scan step takes 5 s, so after the first events nothing happens: what stderr shows after that is the
        // once-a-second redraw (the time left going down). When the 3 s scan deadline passes, the scan ends and the
        // redraw task with it: mirror exits at once and the line is cleared.
        let sim = try SimulatorProcess(["--step-ms", "5000"])
        defer { sim.stop() }
        let started = Date()
        let (status, text) = try runWithStandardErrorOnATerminal(["scan", sim.target, "--upload-dir", directory, "--upload-port", "0", "--settle", "0.05", "--timeout", "3"])
        let took = Date().timeIntervalSince(started)
        XCTAssertEqual(status, 5, "the scan timed out")
        let lefts = Set(text.components(separatedBy: "\u{1B}[K").compactMap { line -> String? in
            guard let r = line.range(of: #"\d+ s left"#, options: .regularExpression) else { return nil }
            return String(line[r])
        })
        XCTAssertTrue(lefts.contains("3 s left"), "\(lefts): \(text)")
        XCTAssertTrue(lefts.contains("1 s left") || lefts.contains("0 s left"), "no redraw while nothing happened: \(lefts)")
        XCTAssertTrue(text.hasSuffix("\r\u{1B}[K") || text.contains("\r\u{1B}[K"), "the line is cleared: \(text)")
        XCTAssertLessThan(took, 10, "mirror took \(took) s: the redraw task held it")
    }

    func testWiFiListJoinStatus() throws {
        let sim = try SimulatorProcess(["--wifi", "offline", "--networks", "alpha,beta"])
        defer { sim.stop() }
        let list = try MirrorProcess.run(["wifi", "list", sim.target, "--json"])
        XCTAssertEqual(list.status, 0, list.stderr)
        XCTAssertEqual(try list.jsonLines().last?["networks"], ["alpha", "beta"])
        XCTAssertTrue(try list.jsonLines().contains { $0["event"] == "read" && $0["decoded"] == "beta" })
        let join = try MirrorProcess.run(["wifi", "join", sim.target, "beta", "--json"])
        XCTAssertEqual(join.status, 0, join.stderr)
        XCTAssertEqual(try join.jsonLines().last?["status"], "connected")
        XCTAssertTrue(try join.jsonLines().contains { $0["event"] == "notification" && $0["decoded"] == "connecting" })
        let status = try MirrorProcess.run(["wifi", "status", sim.target])
        XCTAssertEqual(status.status, 0)
        XCTAssertTrue(status.stdout.contains("wifiConnectionStatus connected, SSID beta"), status.stdout)
        let bad = try MirrorProcess.run(["wifi", "join", sim.target, "nowhere"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stdout.contains("failed"), bad.stdout)
        XCTAssertEqual(try MirrorProcess.run(["wifi", "join", sim.target]).status, 2)
    }
}

/// Runs `mirror` with its standard error on a pseudo-terminal (stdin and stdout /dev/null): its exit status and
/// all it wrote to the terminal, read until it is gone (read then fails with EIO).
func runWithStandardErrorOnATerminal(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> (status: Int32, text: String) {
    guard let (master, slave) = openPseudoTerminal() else { throw POSIXError(.ENOTTY) }
    let process = Process()
    process.executableURL = MirrorProcess.executable
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let watchdog = ProcessWatchdog(process, "mirror \(arguments.first ?? "")")
    close(slave)
    var terminal = Data()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(master, &buffer, buffer.count)
        if n <= 0 { break }
        terminal.append(contentsOf: buffer[0..<n])
    }
    close(master)
    process.waitUntilExit()
    XCTAssertNil(watchdog.end(), file: file, line: line)
    return (process.terminationStatus, String(decoding: terminal, as: UTF8.self))
}

/// A pseudo-terminal (master, slave), through glibc's posix_openpt, grantpt, unlockpt and ptsname_r: the Glibc
/// module does not import them (they need _XOPEN_SOURCE), so they are looked up by name.
func openPseudoTerminal() -> (master: Int32, slave: Int32)? {
    typealias IntOfInt = @convention(c) (Int32) -> Int32
    typealias Name = @convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32
    func symbol<T>(_ name: String, as: T.Type) -> T? {
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), name).map { unsafeBitCast($0, to: T.self) }
    }
    guard let openpt = symbol("posix_openpt", as: IntOfInt.self), let grant = symbol("grantpt", as: IntOfInt.self),
          let unlock = symbol("unlockpt", as: IntOfInt.self), let ptsname = symbol("ptsname_r", as: Name.self) else { return nil }
    let master = openpt(O_RDWR | O_NOCTTY)
    guard master >= 0 else { return nil }
    var name = [CChar](repeating: 0, count: 128)
    guard grant(master) == 0, unlock(master) == 0, ptsname(master, &name, name.count) == 0 else {
        close(master)
        return nil
    }
    let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let slave = open(path, O_RDWR | O_NOCTTY)
    guard slave >= 0 else {
        close(master)
        return nil
    }
    return (master, slave)
}
