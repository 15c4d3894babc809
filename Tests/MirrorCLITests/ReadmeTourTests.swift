// The README's five-minute tour prints what it shows: each `$ mirror ...` line of its transcript runs, in order,
// against one fresh simulator, and its stdout and stderr are the lines below it, word for word.
import Foundation
import TestSupport
import XCTest

final class ReadmeTourTests: XCTestCase {
    func testTheToursTranscriptIsWhatTheToolPrints() throws {
        guard let (_, steps) = try ReadmeTranscript.section("## A five-minute tour") else { return XCTFail("the README has no tour") }
        XCTAssertGreaterThanOrEqual(steps.count, 5, "the tour's transcript")
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        for (command, expected) in steps {
            let words = command.split(separator: " ").dropFirst().map { String($0).replacingOccurrences(of: "unix:/tmp/mirror-sim.sock", with: sim.target) }
            let run = try MirrorProcess.run(words)
            XCTAssertEqual(run.status, 0, "\(command): \(run.stderr)")
            XCTAssertEqual((run.stdout + run.stderr).split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init), expected, command)
        }
    }
}

/// A README section's transcripts: each `$ mirror ...` (or `$ printf ... | mirror ...`) line inside a fenced block,
/// with the lines below it up to the next such line or the block's end (the tour's and the Conformance check's tests read them so).
enum ReadmeTranscript {
    /// The section under `heading` (up to the next `## `), and its (command, expected lines) in order; nil when the
    /// README has no such heading.
    static func section(_ heading: String) throws -> (body: Substring, steps: [(command: String, lines: [String])])? {
        let readme = try String(contentsOf: ExamplesTests.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = readme.range(of: heading) else { return nil }
        let section = readme[start.upperBound...]
        let body = section.range(of: "\n## ").map { section[..<$0.lowerBound] } ?? section
        var steps: [(command: String, lines: [String])] = []
        var inBlock = false
        var inStep = false  // a block's lines belong to a command only below its `$` line, in the same block
        for line in body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("```") { inBlock.toggle(); inStep = false; continue }
            guard inBlock else { continue }
            if line.hasPrefix("$ mirror ") || line.hasPrefix("$ printf ") {
                steps.append((String(line.dropFirst(2)), []))
                inStep = true
            } else if inStep {
                steps[steps.count - 1].lines.append(line)
            }
        }
        return (body, steps)
    }
}
