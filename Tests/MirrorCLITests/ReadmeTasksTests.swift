// The README's task sections print what they show: each `$ mirror ...` (and `$ printf '...' | mirror shell ...`)
// line of a section's transcripts runs, in order, against one fresh simulator per section, and its output is the
// lines below it, as a terminal shows them: standard output and standard error interleaved, each in its own order.
// What differs on every run is compared as its shape (Transcript.masked); a `...` line stands for any lines;
// notification lines, which a shell may print before or after the next command's echo, are compared in their own
// order apart from the rest.
import Foundation
import TestSupport
import XCTest

final class ReadmeTasksTests: XCTestCase {
    func testInspectADevice() throws { try check("## Inspect a device", steps: 1) }
    func testReadAndWrite() throws { try check("## Read and write", steps: 3) }
    func testWatchNotifications() throws { try check("## Watch notifications", steps: 1) }
    func testRunAScan() throws { try check("## Run a scan", steps: 1) }
    func testBenchmarkWrites() throws { try check("## Benchmark writes", steps: 1, numbersAsShape: true) }
    func testCaptureAndTrace() throws { try check("## Capture and trace", steps: 1) }
    func testCloneADevice() throws { try check("## Clone a device", steps: 3) }

    /// The matcher itself: `...` takes any lines, none included; a line that differs fails.
    func testTheMatcherRefusesWhatDiffers() {
        XCTAssertTrue(Transcript.matches(["a", "...", "d"], ["a", "b", "c", "d"]))
        XCTAssertTrue(Transcript.matches(["a", "...", "b"], ["a", "b"]))
        XCTAssertFalse(Transcript.matches(["a", "...", "d"], ["a", "b", "c"]))
        XCTAssertFalse(Transcript.matches(["a", "b"], ["a", "c"]))
        XCTAssertFalse(Transcript.matches(["a"], ["a", "b"]))
        XCTAssertTrue(Transcript.matches(["e", "a", "b"], ["a", "b"], ["e"]))
        XCTAssertFalse(Transcript.matches(["b", "a"], ["a", "b"]))
        XCTAssertEqual(Transcript.masked("  0.151  NOTIFY scanState = complete (08)", numbers: false),
                       "  S.SSS  NOTIFY scanState = complete (08)")
        XCTAssertNotEqual(Transcript.masked("0x000C scanState: invalid  [00]", numbers: false),
                          Transcript.masked("0x000D scanState: invalid  [00]", numbers: false))
    }

    private func check(_ heading: String, steps count: Int, numbersAsShape: Bool = false) throws {
        guard let (_, steps) = try ReadmeTranscript.section(heading) else { return XCTFail("the README has no \(heading)") }
        XCTAssertEqual(steps.count, count, "\(heading)'s transcript: \(steps.map(\.command))")
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("readme-tasks-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: scratch) }
        let environment = ["XDG_CACHE_HOME": scratch.appendingPathComponent("cache").path,
                           "XDG_STATE_HOME": scratch.appendingPathComponent("state").path]
        for (command, expected) in steps {
            var line = command.replacingOccurrences(of: "unix:/tmp/mirror-sim.sock", with: sim.target)
            var input: String?
            if line.hasPrefix("printf '"), let end = line.range(of: "' | ") {
                input = line[line.index(line.startIndex, offsetBy: 8)..<end.lowerBound].replacingOccurrences(of: "\\n", with: "\n")
                line = String(line[end.upperBound...])
            }
            let words = Transcript.words(line)
            XCTAssertEqual(words.first, "mirror", command)
            let run = try ToolProcess.run("mirror", Array(words.dropFirst()), input: input, environment: environment,
                                          directory: scratch, timeout: 90)
            XCTAssertEqual(run.status, 0, "\(command): \(run.stderr)")
            func lines(_ text: String) -> [String] {
                text.replacingOccurrences(of: sim.target, with: "unix:/tmp/mirror-sim.sock")
                    .split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { Transcript.masked(String($0), numbers: numbersAsShape) }
            }
            let (out, err) = (lines(run.stdout), lines(run.stderr))
            let shown = expected.map { Transcript.masked($0, numbers: numbersAsShape) }
            let isNotification = { (l: String) in l.contains("  notification ") }
            XCTAssertTrue(Transcript.matches(shown.filter { !isNotification($0) }, out.filter { !isNotification($0) }, err.filter { !isNotification($0) }),
                          "\(command) printed:\n\((out + ["(standard error:)"] + err).joined(separator: "\n"))\nthe README shows:\n\(shown.joined(separator: "\n"))")
            XCTAssertEqual(shown.filter(isNotification), (out + err).filter(isNotification), "\(command): its notifications")
        }
    }
}

/// How a README transcript is read and compared.
enum Transcript {
    /// A command line's words, as a shell splits it: double-quoted words keep their spaces.
    static func words(_ line: String) -> [String] {
        var words: [String] = []
        var word = ""
        var quoted = false
        var started = false
        for c in line {
            if c == "\"" { quoted.toggle(); started = true; continue }
            if c == " " && !quoted {
                if started { words.append(word) }
                word = ""
                started = false
                continue
            }
            word.append(c)
            started = true
        }
        if started { words.append(word) }
        return words
    }

    /// A line with what differs on every run replaced by its shape: clock times, a scan's elapsed seconds, the upload
    /// URL's secret, a scan's name and the result's digest; with `numbers`, every number and its unit too (a bench).
    static func masked(_ line: String, numbers: Bool) -> String {
        var line = line
            .replacingOccurrences(of: #"\b\d\d:\d\d:\d\d\.\d+\b"#, with: "HH:MM:SS", options: .regularExpression)
            .replacingOccurrences(of: #"^(\s+)\d+\.\d{3}  "#, with: "$1S.SSS  ", options: .regularExpression)
            .replacingOccurrences(of: #"(http://[0-9.]+:\d+/)[A-Za-z0-9_-]+"#, with: "$1SECRET", options: .regularExpression)
            .replacingOccurrences(of: #"\bscan([ -])[0-9a-f]{6}\b"#, with: "scan$1NAME", options: .regularExpression)
            .replacingOccurrences(of: #"\b[0-9a-f]{64}\b"#, with: "SHA256", options: .regularExpression)
        if numbers {
            line = line.replacingOccurrences(of: #"\d+(\.\d+)?( ?(µs|ms|s|kB/s|MB/s)\b)?"#, with: "N", options: .regularExpression)
                .replacingOccurrences(of: #"\s+"#, with: " ", options: .regularExpression)
        }
        return line
    }

    /// Whether `shown` is `out` and `err` interleaved, each line for line in its own order, where a `...` line of
    /// `shown` takes any lines of either (none too).
    static func matches(_ shown: [String], _ out: [String], _ err: [String] = []) -> Bool {
        var seen = Set<[Int]>()  // (shown, out, err) positions already found not to match
        func match(_ s: Int, _ o: Int, _ e: Int) -> Bool {
            if s == shown.count { return o == out.count && e == err.count }
            guard seen.insert([s, o, e]).inserted else { return false }
            if shown[s].trimmingCharacters(in: .whitespaces) == "..." {
                return (o...out.count).contains { o2 in (e...err.count).contains { e2 in match(s + 1, o2, e2) } }
            }
            return (o < out.count && out[o] == shown[s] && match(s + 1, o + 1, e))
                || (e < err.count && err[e] == shown[s] && match(s + 1, o, e + 1))
        }
        return match(0, 0, 0)
    }
}
