// `mirror shell` running the mirror's procedures on its one connection, against the simulator over unix:: scan
// and wifi again and again with a background subscription printing beside them, each procedure seeing only the
// notifications from its own start; their errors and exit statuses those of the one-shot commands.
import Foundation
import JSON
import MirrorCommandLine
import TestSupport
import XCTest

extension ShellTests {
    /// A directory of its own for a test, removed by the caller.
    func scratchDirectory() throws -> String {
        let dir = NSTemporaryDirectory() + "mirror-shell-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// The JSON lines of a `--json` shell run cut at each command's echo: [command line: the lines after it].
    func segments(_ lines: [JSONValue]) -> [(command: String, lines: [JSONValue])] {
        var out: [(command: String, lines: [JSONValue])] = []
        for line in lines {
            if case .string(let c)? = line["command"], line.fields?.count == 1 {
                out.append((c, []))
            } else if !out.isEmpty {
                out[out.count - 1].lines.append(line)
            }
        }
        return out
    }

    func testScanRunsInTheShellAgainAndAgainBesideABackgroundSubscription() throws {
        // Latched at ERROR: the cancelScan before the scans notifies scanState, which no scan may see as its own.
        let sim = try simulator(["--latched-error"])
        defer { sim.stop() }
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let scan = "scan --upload-dir \(dir) --upload-port 0 --settle 0.05"
        let script = "subscribe scanState\nwrite scannerAction 36\n\(scan)\n\(scan)\nread scanState\n"
        let run = try MirrorProcess.run(["shell", sim.target, "--json"], input: script, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        let parts = segments(try run.jsonLines())
        XCTAssertEqual(parts.map(\.command), ["subscribe scanState", "write scannerAction 36", scan, scan, "read scanState"])
        let steps = ["alignScale", "warmingUp", "waitingForWeight", "countDown", "preCheck", "scanning", "postCheck", "complete"]
        // The scan's own log of scanState (handle 0x000C): every notification it saw, named or not yet.
        func scanNotifications(_ lines: [JSONValue]) -> [String] {
            lines.compactMap { line -> String? in
                guard line["event"] == "notification", line["handle"] == 12 else { return nil }
                return line["decoded"]?.string ?? "unnamed \(line["value"]?.string ?? "?")"
            }
        }
        // Each scan logs the notifications from its own start: the first not the cancelScan's before it, the
        // second not the first's eight steps.
        XCTAssertEqual(scanNotifications(parts[2].lines), steps, "\(parts[2].lines.map(\.compact))")
        XCTAssertEqual(scanNotifications(parts[3].lines), ["invalid"] + steps, "its own reset, then its steps")
        for (index, part) in parts[2...3].enumerated() {
            let result = try XCTUnwrap(part.lines.last { $0["event"] == "result" }, "scan \(index + 1)")
            XCTAssertEqual(result["outcome"], "complete")
            XCTAssertEqual(result["sawAnyScanState"], true)
            XCTAssertNotEqual(result["upload"], .null)
        }
        XCTAssertEqual(parts[3].lines.last { $0["event"] == "result" }?["resetWorked"], true,
                       "the second scan found the first's COMPLETE and reset it")
        // The background subscription printed every value of both scans as it came.
        let background = parts.flatMap(\.lines).filter { $0["kind"] == "notification" && $0["name"] == "scanState" }
        XCTAssertEqual(background.filter { $0["value"] == "08" }.count, 2, "both COMPLETEs: \(background.map(\.compact))")
        XCTAssertGreaterThanOrEqual(background.count, 2 + 2 * steps.count)
        XCTAssertEqual(parts[4].lines.first?["value"], "08")
    }

    func testScanInTheShellFailsAsTheOneShotScanDoes() throws {
        let sim = try simulator(["--scale", "misaligned"])
        defer { sim.stop() }
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let scan = "scan --upload-dir \(dir) --upload-port 0 --settle 0.05"
        let run = try MirrorProcess.run(["shell", sim.target, "--keep-going"], input: "\(scan)\nscan --settle soon\nmtu\n", timeout: 60)
        XCTAssertEqual(run.status, 1, "the misaligned scan's status, as one-shot: \(run.stderr)")
        XCTAssertTrue(run.stdout.contains(": error: scanState error, scanError scaleAlignment (0x0B): the scale is not where the mirror expects it"), run.stdout)
        XCTAssertTrue(run.stdout.contains("> mtu\nclient Rx MTU 517"), "the shell goes on: \(run.stdout)")
        let oneShot = try MirrorProcess.run(["scan", sim.target, "--settle", "soon"])
        XCTAssertEqual(oneShot.status, 2)
        XCTAssertTrue(run.stderr.contains(oneShot.stderr), "the one-shot's error, word for word: \(oneShot.stderr) in \(run.stderr)")
    }

    func testWiFiRunsInTheShellAgainAndAgainWithTheOneShotsErrors() throws {
        let sim = try simulator(["--wifi", "offline", "--networks", "alpha,beta"])
        defer { sim.stop() }
        let script = "subscribe wifiConnectionStatus\nwifi list\nwifi join beta\nwifi join alpha\nwifi status\n"
        let run = try MirrorProcess.run(["shell", sim.target], input: script, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("> wifi list\n2 networks\n  alpha\n  beta\n"), run.stdout)
        XCTAssertTrue(run.stdout.contains("wifiConnectionStatus connected, SSID beta\n"), run.stdout)
        XCTAssertTrue(run.stdout.contains("wifiConnectionStatus connected, SSID alpha\n"), "the second join waits on its own stream: \(run.stdout)")
        XCTAssertTrue(run.stdout.contains("> wifi status\n") && run.stdout.hasSuffix("wifiConnectionStatus connected, SSID alpha\n"), run.stdout)
        // Each join logs its own connecting and connected (stderr), not the one before it.
        XCTAssertEqual(run.stderr.components(separatedBy: "NOTIFY wifiConnectionStatus = connecting (01)").count - 1, 2, run.stderr)
        let background = run.stdout.split(separator: "\n").filter { $0.contains("wifiConnectionStatus: connected  [02]") && $0.contains("notification ") }
        XCTAssertEqual(background.count, 2, "the background subscription printed both connected: \(run.stdout)")

        // The one-shot command's errors and statuses, word for word.
        for (line, arguments, status) in [("wifi", ["wifi"], 2), ("wifi join", ["wifi", "join", sim.target], 2),
                                          ("wifi scan", ["wifi", "scan", sim.target], 2),
                                          ("wifi status extra", ["wifi", "status", sim.target, "extra"], 2),
                                          ("wifi join nowhere", ["wifi", "join", sim.target, "nowhere"], 1)] {
            let shell = try MirrorProcess.run(["shell", sim.target], input: line + "\n", timeout: 60)
            let oneShot = try MirrorProcess.run(arguments)
            XCTAssertEqual(shell.status, Int32(status), "\(line): \(shell.stderr)")
            XCTAssertEqual(oneShot.status, Int32(status), "\(arguments): \(oneShot.stderr)")
            if status == 2 {
                XCTAssertTrue(shell.stderr.hasSuffix(oneShot.stderr), "\(line): \(shell.stderr) against \(oneShot.stderr)")
            } else {
                XCTAssertTrue(shell.stdout.contains("wifiConnectionStatus failed"), shell.stdout)
            }
        }
    }
}

extension ShellTests {
    func testCtrlCCancelsAScanAtTheTerminalAndTheShellGoesOn() throws {
        // A realistic pace: the scan takes about 20 s, so Ctrl-C comes while it waits.
        let sim = try simulator(["--pace", "realistic"])
        defer { sim.stop() }
        let home = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let prompt = "mirror \(sim.target)> "
        func step(_ kind: String, _ text: String, _ seconds: Double? = nil) -> JSONValue {
            .array([.string(kind), .string(text)] + (seconds.map { [.double($0)] } ?? []))
        }
        let scan = "scan --upload-dir \(home) --upload-port 0 --settle 0.05"
        let json = try pty([
            step("expect", prompt, 10), step("send", "subscribe scanState\r"), step("expect", "subscribed to 0x000C", 5),
            step("expect", prompt, 5), step("send", scan + "\r"), step("expect", "waiting up to 90.0 seconds", 10),
            step("expect", "notification 0x000C scanState: alignScale  [01]", 10), step("send", "\u{3}"),
            // The interrupted scan sends cancelScan (the mirror stops) before its result.
            step("expect", "write scannerAction = cancelScan (36) [interrupt]", 10),
            step("expect", ": interrupted: interrupted while waiting for scanState complete", 10), step("expect", prompt, 10),
            // Again, on the same connection: cancelScan left the mirror at invalid, and the second scan runs to its wait.
            step("send", scan + "\r"), step("expect", "read scanState = invalid (00) [preflight]", 10), step("expect", "waiting up to 90.0 seconds", 10),
            step("send", "\u{3}"), step("expect", "interrupted while waiting", 10), step("expect", prompt, 10),
            step("send", "read 0x0003\r"), step("expect", "\"mirror-sim\"", 5), step("expect", prompt, 5),
            step("send", "quit\r"), .array([.string("exit"), .double(10)]),
        ], home: home, target: sim.target)
        XCTAssertEqual(json["status"]?.integer, 0)
    }
}
