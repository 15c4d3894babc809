// Every example the tool prints (each command's --help examples) and every `mirror ...` command the README shows
// against the simulator is run here against a fresh `mirror-sim`, so a broken example fails CI. Examples that need
// an adapter (an LE address) are run by the VM's `examples` scenario instead (tools/vm/examples.py).
import Foundation
import LinuxBluetooth
import LinkCore
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

    /// The README and the pages it sends a user to for a command's detail: their examples are run too.
    static let documents = ["README.md", "docs/cli.md", "docs/security.md", "docs/install.md"]

    /// Every `mirror ...` in backticks, and every `$ mirror ...` line, of the README and `documents`.
    static func readmeExamples() throws -> [String] {
        let readme = try documents.map { try String(contentsOf: packageRoot.appendingPathComponent($0), encoding: .utf8) }.joined(separator: "\n")
        var found: [String] = []
        var rest = Substring(readme)
        while let open = rest.range(of: "`mirror ") {
            let after = rest[open.upperBound...]
            guard let close = after.firstIndex(of: "`") else { break }
            let command = "mirror " + after[..<close]
            // A command line, not a fragment ("`mirror read`", "`mirror COMMAND --help`"): it names a target.
            if command.contains("unix:") || command.contains("--loopback") || command.split(separator: " ").contains(where: { (try? BluetoothAddress(parsing: String($0))) != nil }) {
                found.append(command)
            }
            rest = after[after.index(after: close)...]
        }
        for line in readme.split(separator: "\n") where line.hasPrefix("$ mirror ") || line.hasPrefix("$ printf ") {
            found.append(String(line.dropFirst(2)))
        }
        return found
    }

    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// An example runs here when it needs no adapter: a unix: target (the simulator's), --loopback, or no target.
    static func runsHere(_ example: String) -> Bool {
        example.contains("unix:\(examplePath)") || example.contains("--loopback") || example.hasPrefix("mirror clone --from ")
            || ["mirror cache list", "mirror cache clear", "mirror bonds list", "mirror check --list-rules"].contains(example)
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
        // The shell transcript (docs/cli.md): the commands typed at its prompt, as a script, end 0.
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("docs/cli.md"), encoding: .utf8)
        let typed = readme.split(separator: "\n").compactMap { line -> String? in
            guard let r = line.range(of: "mirror unix:/tmp/mirror-sim.sock> ") else { return nil }
            return String(line[r.upperBound...])
        }
        XCTAssertGreaterThan(typed.count, 5, "docs/cli.md's shell transcript")
        if let failure = try run("printf '" + typed.joined(separator: "\\n").replacingOccurrences(of: "/tmp/session.btsnoop", with: "/dev/null") + "' | mirror shell unix:/tmp/mirror-sim.sock") {
            failures.append("docs/cli.md's shell transcript\n    \(failure)")
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
        // "printf 'SCRIPT' | mirror shell ...": the script on standard input; "mirror shell ... < commands.txt": a
        // one-line script (the README's transcript reads 0x0003). A script with `read 0x9999` ends 3, as the README shows.
        var command = example
        var input: String?
        if command.hasPrefix("printf '"), let end = command.range(of: "' | ") {
            input = command[command.index(command.startIndex, offsetBy: 8)..<end.lowerBound].replacingOccurrences(of: "\\n", with: "\n")
            command = String(command[end.upperBound...])
        }
        if let redirect = command.range(of: " < commands.txt") {
            input = "read 0x0003\n"
            command.removeSubrange(redirect)
        }
        let expected: Int32 = (input ?? "").contains("read 0x9999") ? 3 : 0
        var words = Transcript.words(command)  // `"Device Name"` is one word, as a shell reads it
        guard words.first == "mirror" else { return "not a mirror command" }
        words.removeFirst()
        words = words.map { w in
            w.replacingOccurrences(of: Self.examplePath, with: path)
                .replacingOccurrences(of: "bench.svg", with: dir.appendingPathComponent("bench.svg").path)
        }
        let environment = ["XDG_CACHE_HOME": dir.appendingPathComponent("cache").path,
                           "XDG_STATE_HOME": dir.appendingPathComponent("state").path]
        // `clone --diff FILE` compares with the device file the clone example writes: it is written first.
        if words.contains("--diff"), let file = words.firstIndex(of: "--diff").map({ words[$0 + 1] }), file.hasSuffix(".device.json") {
            let made = try ToolProcess.run("mirror", ["clone", "unix:\(path)", "-o", file], environment: environment, directory: dir)
            guard made.status == 0 else { return "the clone it compares with: exit \(made.status): \(made.stderr.prefix(400))" }
        }
        // `clone --from CAPTURE` reads a capture of a connection to the simulator: it is made first.
        if words.first == "clone", let i = words.firstIndex(of: "--from"), i + 1 < words.count {
            let made = try ToolProcess.run("mirror", ["read", "unix:\(path)", "scanState", "--btsnoop", words[i + 1]], environment: environment, directory: dir)
            guard made.status == 0 else { return "the capture it reads: exit \(made.status): \(made.stderr.prefix(400))" }
        }
        // listen streams until Ctrl-C (the simulator notifies only on a change, so --count may never be reached).
        if words.first == "listen" && !words.contains("--duration") {
            return try runUntilInterrupted(words, environment: environment)
        }
        // In the scratch directory: scan stores its ZIP in the working directory by default.
        let r = try ToolProcess.run("mirror", words, input: input ?? (words.first == "shell" ? "" : nil), environment: environment,
                                    directory: dir, timeout: 90)
        return r.status == expected ? nil : "exit \(r.status) (expected \(expected)): \(r.stderr.prefix(400))"
    }

    /// A streaming example (listen until Ctrl-C): started, interrupted once it has subscribed, and it must end 0.
    private func runUntilInterrupted(_ words: [String], environment: [String: String]) throws -> String? {
        let process = Process()
        process.executableURL = MirrorProcess.executable
        process.arguments = words
        process.currentDirectoryURL = URL(fileURLWithPath: environment["XDG_CACHE_HOME"]!).deletingLastPathComponent()
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, given in given }
        let err = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = err
        try process.run()
        let watchdog = ProcessWatchdog(process, "mirror \(words.joined(separator: " "))")
        let handle = err.fileHandleForReading
        var seen = readUntil(handle, contains: "subscribed")
        kill(process.processIdentifier, SIGINT)
        seen.append(handle.readDataToEndOfFile())
        try? handle.close()
        process.waitUntilExit()
        XCTAssertNil(watchdog.end())
        return process.terminationStatus == 0 ? nil : "exit \(process.terminationStatus) after SIGINT: \(String(decoding: seen, as: UTF8.self).prefix(400))"
    }
}
