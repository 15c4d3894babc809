// Every example the tool prints (each command's --help examples) and every `mirror ...` command the README shows
// against the simulator is run here against a fresh `mirror-sim`, so a broken example fails CI. Examples that need
// an adapter (an LE address) are run by the VM's `examples` scenario instead.
import Foundation
import LinuxBluetooth
import MirrorCommandLine
import TestSupport
import XCTest

final class ExamplesTests: XCTestCase {
    /// The simulator's socket as the examples spell it.
    static let examplePath = "/tmp/mirror-sim.sock"

    /// The examples of every command's --help.
    static var helpExamples: [String] {
        commandTable.flatMap { $0.spec.examples.map(\.command) }
    }

    /// Every `mirror ...` in backticks, and every `$ mirror ...` line, of the README.
    static func readmeExamples() throws -> [String] {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        var found: [String] = []
        var rest = Substring(readme)
        while let open = rest.range(of: "`mirror ") {
            let after = rest[open.upperBound...]
            guard let close = after.firstIndex(of: "`") else { break }
            found.append("mirror " + after[..<close])
            rest = after[after.index(after: close)...]
        }
        for line in readme.split(separator: "\n") where line.hasPrefix("$ mirror ") {
            found.append(String(line.dropFirst(2)))
        }
        return found
    }

    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// An example runs here when it needs no adapter: a unix: target (the simulator's), --loopback, or no target.
    static func runsHere(_ example: String) -> Bool {
        example.contains("unix:\(examplePath)") || example.contains("--loopback")
            || ["mirror cache list", "mirror cache clear"].contains(example)
    }

    func testEveryExampleIsRunHereOrNeedsAnAdapter() throws {
        let all = Self.helpExamples + (try Self.readmeExamples())
        XCTAssertGreaterThan(all.count, 30)
        for example in all where !Self.runsHere(example) {
            // The rest name an LE address (or are not a command run against a peer: doctor, adapters, discover).
            let words = example.split(separator: " ").map(String.init)
            let le = words.contains { (try? BluetoothAddress(parsing: $0)) != nil }
            let local = ["doctor", "adapters", "discover"].contains(words.dropFirst().first ?? "")
            XCTAssertTrue(le || local || example.contains("unix:/tmp/peer.sock") || example.contains("unix:/tmp/sim.sock"),
                          "example neither run here nor an LE one: \(example)")
        }
    }

    func testEveryExampleAgainstTheSimulatorWorks() throws {
        let examples = Array(Set(Self.helpExamples.filter(Self.runsHere) + (try Self.readmeExamples()).filter(Self.runsHere))).sorted()
        XCTAssertGreaterThan(examples.count, 15, "\(examples)")
        var failures: [String] = []
        for example in examples {
            if let failure = try run(example) { failures.append("\(example)\n    \(failure)") }
        }
        XCTAssertTrue(failures.isEmpty, "examples that fail against mirror-sim:\n" + failures.joined(separator: "\n"))
    }

    /// Runs one example against a fresh simulator, with a private cache and state directory; nil when it worked.
    private func run(_ example: String) throws -> String? {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("examples-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = temporarySocketPath("example")
        let sim = try BackgroundTool("mirror-sim", ["unix:\(path)"], readyWhen: "listening on unix:\(path)", stderrToo: true)
        defer { sim.stop() }
        var words = example.split(separator: " ").map(String.init)
        guard words.first == "mirror" else { return "not a mirror command" }
        words.removeFirst()
        words = words.map { w in
            w.replacingOccurrences(of: Self.examplePath, with: path)
                .replacingOccurrences(of: "bench.svg", with: dir.appendingPathComponent("bench.svg").path)
        }
        let environment = ["XDG_CACHE_HOME": dir.appendingPathComponent("cache").path,
                           "XDG_STATE_HOME": dir.appendingPathComponent("state").path]
        if words.first == "listen" && !words.contains("--count") && !words.contains("--duration") {
            return try runUntilInterrupted(words, environment: environment)
        }
        let r = try ToolProcess.run("mirror", words, input: words.first == "shell" ? "" : nil, environment: environment, timeout: 90)
        return r.status == 0 ? nil : "exit \(r.status): \(r.stderr.prefix(400))"
    }

    /// A streaming example (listen until Ctrl-C): started, interrupted once it has subscribed, and it must end 0.
    private func runUntilInterrupted(_ words: [String], environment: [String: String]) throws -> String? {
        let process = Process()
        process.executableURL = MirrorProcess.executable
        process.arguments = words
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, given in given }
        let err = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = err
        try process.run()
        var seen = Data()
        let handle = err.fileHandleForReading
        while !String(decoding: seen, as: UTF8.self).contains("subscribed") {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
        }
        kill(process.processIdentifier, SIGINT)
        seen.append(handle.readDataToEndOfFile())
        process.waitUntilExit()
        return process.terminationStatus == 0 ? nil : "exit \(process.terminationStatus) after SIGINT: \(String(decoding: seen, as: UTF8.self).prefix(400))"
    }
}
