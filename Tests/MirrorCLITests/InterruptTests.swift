// What SIGINT and SIGTERM do to `listen` and `mirror shell` (interruptTable): the signals sent to real processes
// once they wait on the simulator (which notifies only on a change).
import Foundation
import JSON
import TestSupport
import XCTest

final class InterruptTests: XCTestCase {
    /// Starts `mirror ARGS` with `input` on a pipe kept open, reads stderr until `ready` appears, sends `signal`,
    /// and returns the exit status with what it printed.
    private func signalled(_ arguments: [String], input: String? = nil, readyWhen ready: String, signal: Int32)
        throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = MirrorProcess.executable
        process.arguments = arguments
        let out = Pipe(), err = Pipe(), inPipe = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = inPipe
        try process.run()
        let watchdog = ProcessWatchdog(process, "mirror \(arguments.joined(separator: " "))")
        if let input { try inPipe.fileHandleForWriting.write(contentsOf: Data(input.utf8)) }
        let handle = err.fileHandleForReading
        var seen = readUntil(handle, contains: ready)
        XCTAssertTrue(process.isRunning, "ended before \(ready): \(String(decoding: seen, as: UTF8.self))")
        kill(process.processIdentifier, signal)
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        seen.append(handle.readDataToEndOfFile())
        process.waitUntilExit()
        XCTAssertNil(watchdog.end())
        try? inPipe.fileHandleForWriting.close()
        return (process.terminationStatus, stdout, String(decoding: seen, as: UTF8.self))
    }

    func testListenEndsZeroOnCtrlCAnd143OnSIGTERM() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        for (signal, status) in [(SIGINT, Int32(0)), (SIGTERM, Int32(143))] {
            let r = try signalled(["listen", sim.target, "scanState"], readyWhen: "subscribed to 0x000C", signal: signal)
            XCTAssertEqual(r.status, status, "signal \(signal): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("received 0 notifications and indications"), r.stderr)
        }
    }

    /// Issue 37: under GNU `timeout -s INT` (which sends SIGINT to the child and again to its process group) a
    /// listen always ends 0 with its final count, and a scan always sends cancelScan (before: 5 of 17 listens exited
    /// 130 without the count, 3 of 12 scans sent no cancelScan). `timeout -s TERM` ends them 143, the count printed.
    func testUnderGNUTimeoutTheSignalCountsOnce() throws {
        let sim = try SimulatorProcess(["--step-ms", "5000"])
        defer { sim.stop() }
        let runs = 8
        for i in 0..<runs {
            let r = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/timeout"), ["--preserve-status", "-s", "INT", "0.6", MirrorProcess.executable.path, "listen", sim.target, "scanState"])
            XCTAssertEqual(r.status, 0, "run \(i): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("received 0 notifications and indications"), "run \(i): \(r.stderr)")
        }
        let term = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/timeout"), ["--preserve-status", "-s", "TERM", "0.6", MirrorProcess.executable.path, "listen", sim.target, "scanState"])
        XCTAssertEqual(term.status, 143, term.stderr)
        let directory = NSTemporaryDirectory() + "timeout-scan-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for i in 0..<runs / 2 {
            let r = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/timeout"), ["--preserve-status", "-s", "INT", "1.5", MirrorProcess.executable.path, "scan", sim.target, "--json",
                                                            "--upload-port", "0", "--upload-dir", directory, "--settle", "0.05"])
            XCTAssertEqual(r.status, 130, "run \(i): \(r.stderr)")
            let result = try XCTUnwrap(r.stdout.split(separator: "\n").last.map { try parseJSON(String($0)) }, "run \(i)")
            XCTAssertEqual(result["cancelScanSent"], .bool(true), "run \(i): \(r.stdout)")
        }
    }

    /// A waiting listen reads its signals as a source of its link's loop: no thread of their own ("mirror-signals"),
    /// one loop thread ("att-bearer"); Ctrl-C still ends it cleanly (issue 35).
    func testAWaitingListenReadsItsSignalsOnItsLoopWithNoThreadOfTheirOwn() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let process = Process()
        process.executableURL = MirrorProcess.executable
        process.arguments = ["listen", sim.target, "scanState"]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let watchdog = ProcessWatchdog(process, "mirror listen")
        var seen = readUntil(err.fileHandleForReading, contains: "subscribed to 0x000C")
        let task = "/proc/\(process.processIdentifier)/task"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: task)) ?? []).compactMap {
            try? String(contentsOfFile: "\(task)/\($0)/comm", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        XCTAssertFalse(names.contains("mirror-signals"), "\(names)")
        XCTAssertEqual(names.filter { $0 == "att-bearer" }.count, 1, "\(names)")
        kill(process.processIdentifier, SIGINT)
        _ = out.fileHandleForReading.readDataToEndOfFile()
        seen.append(err.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        XCTAssertNil(watchdog.end())
        XCTAssertEqual(process.terminationStatus, 0, String(decoding: seen, as: UTF8.self))
    }

    /// A script's listen cancelled by SIGTERM ends the shell (143) and the script's next line never runs; by SIGINT
    /// it ends the script (130). Both used to cancel the listen and go on with the script.
    func testASignalEndsTheShellsScript() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        for (signal, status) in [(SIGTERM, Int32(143)), (SIGINT, Int32(130))] {
            let r = try signalled(["shell", sim.target], input: "listen scanState\nread 0x0003\n", readyWhen: "subscribed to 0x000C", signal: signal)
            XCTAssertEqual(r.status, status, "signal \(signal): \(r.stdout) \(r.stderr)")
            XCTAssertTrue(r.stdout.contains("> listen scanState"), r.stdout)
            XCTAssertFalse(r.stdout.contains("> read 0x0003"), "the line after the signal ran: \(r.stdout)")
        }
    }
}
