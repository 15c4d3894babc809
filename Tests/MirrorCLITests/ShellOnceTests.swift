// Issue 37 point 4: in the shell, a notification held by both a background subscription and a running `listen` is
// printed once: by the listen while it holds it, by the subscription after. Decided as each value is delivered
// (GATTPeer's NotificationRouter on the link's loop), not by when the listen ends, so the outcome is the same
// whatever the threads' timing (run under ThreadSanitizer too).
import Foundation
import Glibc
import TestSupport
import XCTest

final class ShellOnceTests: XCTestCase {
    /// `mirror shell` on a simulator latched at ERROR: cancelScan (0x36), written by a second client, resets
    /// scanState to invalid (one notification); initDeviceForScan (0x32) then latches it at error again (another).
    final class Shell {
        let sim: SimulatorProcess
        let process = Process()
        let out = Pipe(), err = Pipe(), input = Pipe()
        let watchdog: ProcessWatchdog
        var stderr = Data()

        init() throws {
            sim = try SimulatorProcess(["--latched-error"])
            process.executableURL = MirrorProcess.executable
            process.arguments = ["shell", sim.target]
            process.standardOutput = out
            process.standardError = err
            process.standardInput = input
            try process.run()
            watchdog = ProcessWatchdog(process, "mirror shell")
        }

        func type(_ lines: String) throws { try input.fileHandleForWriting.write(contentsOf: Data(lines.utf8)) }
        func waitForStderr(_ marker: String) { stderr.append(readUntil(err.fileHandleForReading, contains: marker)) }
        func write(_ byte: String) throws {
            let run = try MirrorProcess.run(["write", sim.target, "scannerAction", byte])
            XCTAssertEqual(run.status, 0, run.stderr)
        }

        /// Ends the script; what the shell printed on stdout, and its status.
        func end() throws -> (stdout: String, status: Int32, stderr: String) {
            try input.fileHandleForWriting.close()
            let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            stderr.append(err.fileHandleForReading.readDataToEndOfFile())
            process.waitUntilExit()
            XCTAssertNil(watchdog.end())
            sim.stop()
            return (stdout, process.terminationStatus, String(decoding: stderr, as: UTF8.self))
        }
    }

    func lines(_ stdout: String, endingWith suffix: String) -> Int {
        stdout.components(separatedBy: "\n").filter { $0.hasSuffix(suffix) }.count
    }

    /// Before: the same notification line twice, once by the listen and once by the subscription.
    func testANotificationHeldByASubscriptionAndAListenIsPrintedOnce() throws {
        let shell = try Shell()
        try shell.type("subscribe scanState\nlisten scanState --count 1\n")
        shell.waitForStderr("listening")
        try shell.write("36")
        let (stdout, status, stderr) = try shell.end()
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(lines(stdout, endingWith: "notification 0x000C scanState: invalid  [00]  (1 byte)"), 1, stdout)
        XCTAssertTrue(stderr.contains("received 1 notification and indication"), stderr)
    }

    /// After the listen has its count, the next value is the subscription's, printed once (not lost to the listen's
    /// end, nor printed by both), and `wait` counts it.
    func testAfterTheListenTheSubscriptionPrintsTheNextValueOnce() throws {
        let shell = try Shell()
        try shell.type("subscribe scanState\nlisten --count 1\n")
        shell.waitForStderr("listening")
        try shell.write("36")
        shell.waitForStderr("received 1 notification and indication")
        try shell.write("32")
        try shell.type("wait --timeout 10\n")
        let (stdout, status, stderr) = try shell.end()
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(lines(stdout, endingWith: "notification 0x000C scanState: invalid  [00]  (1 byte)"), 1, stdout)
        XCTAssertEqual(lines(stdout, endingWith: "notification 0x000C scanState: error  [09]  (1 byte)"), 1, stdout)
        XCTAssertTrue(stdout.contains("waited for 1 value"), stdout)
    }
}
