// `mirror scan` and `mirror wifi` as a user runs them: the built `mirror` against the built `mirror-sim`,
// both subprocesses, on a unix: socket (SimulatorProcess is in SimulatorTests.swift).
import Foundation
import MirrorCommandLine
import XCTest

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
