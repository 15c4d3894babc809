// LineEditor through lineedit-demo: in a real pseudo-terminal (pty-drive.py, Python's pty module) typing, a
// notification over a half-typed line, Tab, Ctrl-C, Ctrl-D, history across a restart, setPrompt and the named
// timeout; over a pipe, plain lines with no escape codes, stop() and the timeout off a terminal.
import Foundation
import JSON
import LineEditor
import LinkCore
import TestSupport
import XCTest

/// What pty-drive.py reports: whether every step passed, the step that failed and what it waited for, the exit
/// status, and every byte the terminal got.
struct PTYRun {
    var ok: Bool
    var failed: Int?
    var waited: String?
    var status: Int?
    var transcript: String
}

/// One step of a pty script.
enum Step {
    case send(String)
    case expect(String, seconds: Double = 5)
    case pause(Double)
    case exit(seconds: Double = 5)

    var json: JSONValue {
        switch self {
        case .send(let s): return .array([.string("send"), .string(s)])
        case .expect(let s, let seconds): return .array([.string("expect"), .string(s), .double(seconds)])
        case .pause(let seconds): return .array([.string("pause"), .double(seconds)])
        case .exit(let seconds): return .array([.string("exit"), .double(seconds)])
        }
    }
}

final class LineEditorTests: XCTestCase {
    var home = ""

    override func setUpWithError() throws {
        home = NSTemporaryDirectory() + "lineedit-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: home)
    }

    var environment: [String: String] {
        var e = ProcessInfo.processInfo.environment
        e["HOME"] = home
        e["XDG_STATE_HOME"] = home + "/state"
        e["TERM"] = "xterm"
        return e
    }

    /// Runs the demo with `arguments` in a pty through `steps` (the driver's own limits bound every step; the
    /// whole run is bounded by `ToolProcess`-style termination after 60 s).
    func pty(_ arguments: [String], _ steps: [Step], file: StaticString = #filePath, line: UInt = #line) throws -> PTYRun {
        let driver = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("pty-drive.py").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [driver, JSONValue.array(steps.map(\.json)).text, ToolProcess.url("lineedit-demo").path] + arguments
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let watchdog = ProcessWatchdog(process, "lineedit-demo")
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertNil(watchdog.end())
        let json = try parseJSON(String(decoding: data, as: UTF8.self))
        let run = PTYRun(ok: json["ok"] == .bool(true), failed: json["failed"]?.integer, waited: json["waited"]?.string,
                         status: json["status"]?.integer, transcript: json["transcript"]?.string ?? "")
        if !run.ok {
            XCTFail("step \(run.failed ?? -1) did not see \(run.waited ?? "?"); the terminal got: \(run.transcript.debugDescription)", file: file, line: line)
        }
        return run
    }

    /// Runs the demo with `input` on a pipe (written, then closed unless `keepOpen`); its stdout, stderr and status.
    func piped(_ arguments: [String], input: String, keepOpen: Bool = false) throws -> (out: String, err: String, status: Int32) {
        let process = Process()
        process.executableURL = ToolProcess.url("lineedit-demo")
        process.arguments = arguments
        process.environment = environment
        let stdin = Pipe()
        let out = Pipe()
        let err = Pipe()
        process.standardInput = stdin
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let watchdog = ProcessWatchdog(process, "lineedit-demo")
        stdin.fileHandleForWriting.write(Data(input.utf8))
        if !keepOpen { try stdin.fileHandleForWriting.close() }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertNil(watchdog.end())
        if keepOpen { try stdin.fileHandleForWriting.close() }
        return (String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self), process.terminationStatus)
    }

    func testATypedLineIsEchoedAndCtrlDEnds() throws {
        let run = try pty(["--every-ms", "0"], [.expect("demo> "), .send("hello world\r"), .expect("got: hello world"),
                                               .expect("demo> "), .send("\u{4}"), .expect("end"), .exit()])
        XCTAssertEqual(run.status, 0)
    }

    func testANotificationOverAHalfTypedLineLeavesTheLineIntact() throws {
        let run = try pty([], [.expect("demo> "), .send("hello wor"), .expect("hello wor"), .expect("notification "),
                               .expect("demo> hello wor"), .send("ld\r"), .expect("got: hello world"), .send("quit\r"), .exit()])
        XCTAssertEqual(run.status, 0)
        // The first notification after the half-typed line took its own row (the line erased first), and the prompt
        // with the half-typed line came back after it.
        let t = run.transcript
        guard let typed = t.range(of: "hello wor"), let n = t.range(of: "notification ", range: typed.upperBound..<t.endIndex),
              let got = t.range(of: "got: hello world") else { return XCTFail(t.debugDescription) }
        XCTAssertTrue(t[..<n.lowerBound].hasSuffix("\r\u{1B}[J"), t.debugDescription)
        XCTAssertTrue(t[n.upperBound..<got.lowerBound].contains("demo> hello wor"), t.debugDescription)
        XCTAssertFalse(t.contains("hello wornotification"), t.debugDescription)
    }

    func testTabCompletesAUniquePrefixAndListsAnAmbiguousOne() throws {
        let run = try pty(["--every-ms", "0"], [.expect("demo> "), .send("wi\t"), .expect("fi "), .send("on\r"),
                                               .expect("got: wifi on"), .expect("demo> "),
                                               .send("sc\t\t"), .expect("scanner"), .send("\u{15}quit\r"), .exit()])
        XCTAssertEqual(run.status, 0)
        XCTAssertTrue(run.transcript.contains("scan ") && run.transcript.contains("scanner"), run.transcript.debugDescription)
        // A unique completion rings no bell (libedit's own path would); an ambiguous one does.
        guard let got = run.transcript.range(of: "got: wifi on") else { return }
        XCTAssertFalse(run.transcript[..<got.lowerBound].contains("\u{7}"), run.transcript.debugDescription)
        XCTAssertTrue(run.transcript[got.upperBound...].contains("\u{7}"), run.transcript.debugDescription)
    }

    func testCtrlCDropsTheLineAndTheEditorGoesOn() throws {
        let run = try pty(["--every-ms", "0"], [.expect("demo> "), .send("abc"), .expect("abc"), .send("\u{3}"), .expect("^C"),
                                               .expect("interrupted"), .expect("demo> "), .send("after\r"), .expect("got: "),
                                               .send("quit\r"), .exit()])
        XCTAssertEqual(run.status, 0, "Ctrl-C is a key at the prompt, not SIGINT")
        XCTAssertTrue(run.transcript.contains("got: after"), run.transcript.debugDescription)
        XCTAssertFalse(run.transcript.contains("got: abc"), run.transcript.debugDescription)
    }

    func testHistorySurvivesARestartInTheXDGStateDirectory() throws {
        _ = try pty(["--every-ms", "0"], [.expect("demo> "), .send("first session line\r"), .expect("got: first session line"),
                                         .expect("demo> "), .send("\u{4}"), .exit()])
        let file = home + "/state/mirror/history"
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let directory = try FileManager.default.attributesOfItem(atPath: home + "/state/mirror")
        XCTAssertEqual((directory[.posixPermissions] as? NSNumber)?.intValue, 0o700)
        // The second session: Up recalls the first one's line.
        _ = try pty(["--every-ms", "0"], [.expect("demo> "), .send("\u{1B}[A"), .expect("first session line"), .send("\r"),
                                         .expect("got: first session line"), .send("quit\r"), .exit()])
    }

    /// Issue 36: a line read as an answer (the shell's passkey) never reaches the history file; the next is kept.
    func testALineMarkedAsAnAnswerStaysOutOfTheHistory() throws {
        _ = try pty(["--every-ms", "0"], [.expect("demo> "), .send("secret\r"), .expect("got: secret"),
                                         .expect("demo> "), .send("123456\r"), .expect("got: 123456"),
                                         .expect("demo> "), .send("after\r"), .expect("got: after"),
                                         .expect("demo> "), .send("quit\r"), .exit()])
        let lines = try String(contentsOfFile: home + "/state/mirror/history", encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.dropFirst().map(String.init), ["secret", "after", "quit"], "the answer 123456 is not kept")
    }

    func testTheHistoryKeepsItsLimitOfLines() throws {
        _ = try pty(["--every-ms", "0", "--history-limit", "2"], [.expect("demo> "), .send("alpha\r"), .expect("got: alpha"),
                                                                 .expect("demo> "), .send("bravo\r"), .expect("got: bravo"),
                                                                 .expect("demo> "), .send("charlie\r"), .expect("got: charlie"),
                                                                 .expect("demo> "), .send("quit\r"), .exit()])
        let lines = try String(contentsOfFile: home + "/state/mirror/history", encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.dropFirst().map(String.init), ["charlie", "quit"], "libedit's header, then the last two lines")
        // Up twice from the next session reaches "charlie", and a third Up goes no further back.
        let run = try pty(["--every-ms", "0", "--history-limit", "2"], [.expect("demo> "), .send("\u{1B}[A"), .expect("quit"),
                                                                        .send("\u{1B}[A"), .expect("charlie"), .send("\u{1B}[A"),
                                                                        .pause(0.2), .send("\r"), .expect("got: "), .send("quit\r"), .exit()])
        XCTAssertTrue(run.transcript.contains("got: charlie"), run.transcript.debugDescription)
        XCTAssertFalse(run.transcript.contains("bravo"), run.transcript.debugDescription)
    }

    func testALongLineThatWrapsIsRedrawnWholeAfterANotification() throws {
        let long = String(repeating: "abcdefghij", count: 10)
        let run = try pty(["--every-ms", "200"], [.expect("demo> "), .send(long), .expect(String(long.suffix(20))), .expect("notification "),
                                                  .expect(String(long.suffix(20))), .send("Z\r"), .expect("got: " + long + "Z"),
                                                  .send("quit\r"), .exit()])
        XCTAssertEqual(run.status, 0)
        // The cursor was on the line's second row: the erase went up one row first (CUU 1, then ED).
        XCTAssertTrue(run.transcript.contains("\r\u{1B}[1A\u{1B}[J"), run.transcript.debugDescription)
    }

    func testSetPromptChangesTheNextPrompt() throws {
        _ = try pty(["--every-ms", "0"], [.expect("demo> "), .send("prompt other\r"), .expect("got: prompt other"),
                                         .expect("other> "), .send("quit\r"), .exit()])
    }

    func testTheWaitAtATerminalPromptTimesOutNamingWhatItWaitedFor() throws {
        let run = try pty(["--every-ms", "0", "--timeout-ms", "300"], [.expect("demo> "), .expect("timed out after 300 ms waiting for a line at the prompt"), .exit()])
        XCTAssertEqual(run.status, 3)
    }

    func testATimedOutLineDroppedEndsOnItsOwnRowAndTheNextReadStartsAfresh() throws {
        // The half-typed "abc" is dropped at the limit: printed lines go below it, and the next line is "xyz" alone.
        let run = try pty(["--every-ms", "0", "--timeout-ms", "300", "--drop-on-timeout"],
                          [.expect("demo> "), .send("abc"), .expect("abc"), .expect("dropped: timed out after 300 ms waiting for a line at the prompt"),
                           .expect("demo> "), .send("xyz\r"), .expect("got: xyz"), .send("quit\r"), .exit()])
        XCTAssertEqual(run.status, 0)
        XCTAssertFalse(run.transcript.contains("got: abc"), run.transcript.debugDescription)
        // libedit's "\r\n" after the line (the pty's ONLCR makes its \n a \r\n too).
        XCTAssertTrue(run.transcript.contains("abc\r\r\ndropped: ") || run.transcript.contains("abc\r\ndropped: "),
                      "the dropped line ends on its own row: \(run.transcript.debugDescription)")
    }

    func testAPipeReadsPlainLinesWithNoPromptAndNoEscapeCodes() throws {
        let r = try piped(["--every-ms", "0"], input: "one\ntwo\r\nthree")
        XCTAssertEqual(r.out, "got: one\ngot: two\ngot: three\nend\n")
        XCTAssertEqual(r.status, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: home + "/state/mirror/history"), "no history off a terminal")
        // Notifications come as plain lines too.
        let n = try piped(["--every-ms", "50", "--stop-after-ms", "400"], input: "", keepOpen: true)
        XCTAssertTrue(n.out.contains("notification 1\n"), n.out)
        XCTAssertFalse(n.out.contains("\u{1B}") || n.out.contains("demo> "), n.out.debugDescription)
    }

    func testStopEndsAReadOnAnOpenPipe() throws {
        let r = try piped(["--every-ms", "0", "--stop-after-ms", "200"], input: "early\n", keepOpen: true)
        XCTAssertEqual(r.out, "got: early\nend\n")
        XCTAssertEqual(r.status, 0)
    }

    func testTheWaitForPlainInputTimesOutNamingWhatItWaitedFor() throws {
        let r = try piped(["--every-ms", "0", "--timeout-ms", "200"], input: "", keepOpen: true)
        XCTAssertEqual(r.err, "lineedit-demo: timed out after 200 ms waiting for a line of input\n")
        XCTAssertEqual(r.status, 3)
    }

    func testTheDefaultHistoryFileFollowsXDG() {
        XCTAssertEqual(LineEditor.defaultHistoryFile(xdgStateHome: "/x/state", home: "/home/u"), "/x/state/mirror/history")
        XCTAssertEqual(LineEditor.defaultHistoryFile(xdgStateHome: "relative", home: "/home/u"), "/home/u/.local/state/mirror/history")
        XCTAssertEqual(LineEditor.defaultHistoryFile(xdgStateHome: nil, home: "/home/u"), "/home/u/.local/state/mirror/history")
        XCTAssertNil(LineEditor.defaultHistoryFile(xdgStateHome: nil, home: nil))
    }
}
