// The README's five-minute tour prints what it shows: each `$ mirror ...` line of its transcript runs, in order,
// against one fresh simulator, and its stdout and stderr are the lines below it, word for word.
import Foundation
import TestSupport
import XCTest

final class ReadmeTourTests: XCTestCase {
    func testTheToursTranscriptIsWhatTheToolPrints() throws {
        let readme = try String(contentsOf: ExamplesTests.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = readme.range(of: "## A five-minute tour") else { return XCTFail("the README has no tour") }
        let section = readme[start.upperBound...].prefix { _ in true }
        let body = section.range(of: "\n## ").map { section[..<$0.lowerBound] } ?? section
        // (command, expected output) in the order shown.
        var steps: [(String, [String])] = []
        var inBlock = false
        for line in body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("```") { inBlock.toggle(); continue }
            guard inBlock else { continue }
            if line.hasPrefix("$ mirror ") {
                steps.append((String(line.dropFirst(2)), []))
            } else if !steps.isEmpty {
                steps[steps.count - 1].1.append(line)
            }
        }
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
