// The README as a user's manual, kept true by tests. Which test keeps each part:
//  - the quick start's two commands: CI runs them (.ci/run, tools/run.sh's own scan in ScanCommandTests' demo);
//  - the tour's transcript: ReadmeTourTests; every `mirror ...` it names: ExamplesTests (here or in the VM);
//  - the commands table, the options it names, the files it points to, the exit statuses and the example errors:
//    this file; the task sections' transcripts: ReadmeTasksTests; the interrupt table (docs/cli.md): ReferenceTests;
//  - the permissions (who holds which capability, until when): the VM's `caps` scenario and CapabilityDropTests.
import Foundation
import MirrorCommandLine
import TestSupport
import XCTest

final class ReadmeTests: XCTestCase {
    let readme = (try? String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)) ?? ""

    /// Every file or directory the README points to (docs/..., tools/..., profiles/...) is there.
    func testEveryFileTheREADMENamesExists() throws {
        let pattern = try NSRegularExpression(pattern: #"(?<![A-Za-z0-9_./-])((?:docs|tools|profiles)/[A-Za-z0-9_./-]*[A-Za-z0-9_-])"#)
        let found = pattern.matches(in: readme, range: NSRange(readme.startIndex..., in: readme)).compactMap {
            Range($0.range(at: 1), in: readme).map { String(readme[$0]) }
        }
        XCTAssertGreaterThan(found.count, 8, "\(found)")
        for path in Set(found) {
            XCTAssertTrue(FileManager.default.fileExists(atPath: repositoryRoot.appendingPathComponent(path).path), "README names \(path), which is not in the repository")
        }
    }

    /// The commands table lists exactly the commands `mirror --help` lists, each with an example of itself.
    func testTheCommandsTableIsEveryCommand() throws {
        guard let start = readme.range(of: "| command | what it does | example |") else { return XCTFail("no commands table") }
        let rows = readme[start.upperBound...].split(separator: "\n").dropFirst().prefix { $0.hasPrefix("| `") }
        let named = rows.map { row -> (String, String) in
            let cells = row.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let command = cells[1].dropFirst().split(whereSeparator: { $0 == " " || $0 == "`" }).first.map(String.init) ?? ""
            return (command, cells.last(where: { $0.hasPrefix("`mirror ") }) ?? "")
        }
        XCTAssertEqual(named.map(\.0).sorted(), commandTable.map(\.spec.name).sorted(), "the README's commands table")
        for (command, example) in named {
            XCTAssertTrue(example.hasPrefix("`mirror \(command) ") || example == "`mirror \(command)`", "the example of \(command): \(example)")
        }
    }

    /// Every `--option` the README names is one `mirror`, `mirror-sim` or tools/run.sh takes.
    func testEveryOptionTheREADMENamesIsTaken() throws {
        var known = Set(commandTable.flatMap(\.spec.options).map(\.name) + GlobalOptions.specs.map(\.name) + ["--help", "--version"])
        let simHelp = try ToolProcess.run("mirror-sim", ["--help"])
        let pattern = try NSRegularExpression(pattern: #"--[a-z][a-z0-9-]*"#)
        func options(_ text: String) -> [String] {
            pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { Range($0.range, in: text).map { String(text[$0]) } }
        }
        known.formUnion(options(simHelp.stdout + simHelp.stderr))
        known.formUnion(["--product"])  // `swift build -c release --product mirror` in the install steps
        let named = Set(options(readme))
        XCTAssertGreaterThan(named.count, 20)
        XCTAssertEqual(named.subtracting(known).sorted(), [], "options the README names that no tool takes")
    }

    /// The exit status table is ExitStatus, value for value.
    func testTheExitStatusTableIsExitStatus() throws {
        guard let start = readme.range(of: "| exit status | meaning |") else { return XCTFail("no exit status table") }
        let rows = readme[start.upperBound...].split(separator: "\n").dropFirst().prefix { $0.hasPrefix("| ") }
        let values = rows.compactMap { Int32($0.split(separator: "|").first?.trimmingCharacters(in: .whitespaces) ?? "") }
        XCTAssertEqual(values, ExitStatus.allCases.map(\.rawValue))
    }

    /// The three example errors are what `mirror` prints against the simulator, word for word (the timeout's
    /// 30 s is the default --timeout, here 1 s so the test is short), and the JSON has the fields named.
    func testTheExampleErrorsAreWhatTheToolPrints() throws {
        guard let start = readme.range(of: "Exact errors, for example:\n```\n"),
              let end = readme[start.upperBound...].range(of: "```") else { return XCTFail("no example errors") }
        let lines = readme[start.upperBound..<end.lowerBound].split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 3)
        let sim = try SimulatorProcess(["--token-limit", "40", "--fault", "drop:scannerAction"])
        defer { sim.stop() }
        let long = try MirrorProcess.run(["write", sim.target, "cloudToken", "text:" + String(repeating: "a", count: 41), "--mtu", "247"])
        XCTAssertEqual(long.status, 3)
        XCTAssertEqual(long.stderr, "mirror: \(lines[0])\n")
        let json = try MirrorProcess.run(["write", sim.target, "cloudToken", "text:" + String(repeating: "a", count: 41), "--mtu", "247", "--json"])
        for field in ["code", "name", "requestOpcode", "handle", "rejectedBy", "valueLength", "budget", "mtu"] {
            XCTAssertTrue(json.stdout.contains("\"\(field)\":"), "the ATT error's JSON lacks \(field): \(json.stdout)")
        }
        let tooLong = try MirrorProcess.run(["write", sim.target, "cloudToken", String(repeating: "00", count: 600), "--mtu", "247"])
        XCTAssertEqual(tooLong.status, 4)
        XCTAssertEqual(tooLong.stderr, "mirror: \(lines[1])\n")
        let silent = try MirrorProcess.run(["write", sim.target, "scannerAction", "cancelScan", "--timeout", "1"])
        XCTAssertEqual(silent.status, 5)
        XCTAssertEqual(silent.stderr, "mirror: \(lines[2].replacingOccurrences(of: "after 30 s", with: "after 1 s"))\n")
    }
}
