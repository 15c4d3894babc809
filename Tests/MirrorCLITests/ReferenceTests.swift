// The man page and the bash completion: the committed files are what the generator prints from the command table,
// the page renders without a warning and covers every command, option, exit status and example, and the completion
// completes commands, options and enumerated values when bash runs it.
import Foundation
import Mirror
import MirrorCommandLine
import MirrorReference
import TestSupport
import XCTest

/// The repository's root (this file is Tests/MirrorCLITests/ReferenceTests.swift).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Runs a system program by name through /usr/bin/env (PATH decides, as in a shell).
func runProgram(_ arguments: [String], input: String? = nil, timeout: Double = 60) throws -> ToolRun {
    try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/env"), arguments, input: input, timeout: timeout)
}

/// The first line where `actual` differs from `expected` ("line 12: ... instead of ..."), or nil when they are equal.
func firstDifference(_ actual: String, _ expected: String) -> String? {
    let a = actual.components(separatedBy: "\n"), e = expected.components(separatedBy: "\n")
    for i in 0..<max(a.count, e.count) where i >= a.count || i >= e.count || a[i] != e[i] {
        return "line \(i + 1): \(i < a.count ? a[i] : "(end)") instead of \(i < e.count ? e[i] : "(end)")"
    }
    return nil
}

/// Text with every run of white space one space: rendered roff is justified and wrapped.
func collapsingSpace(_ s: String) -> String {
    s.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).joined(separator: " ")
}

final class ReferenceTests: XCTestCase {
    let specs = commandTable.map(\.spec)
    let manFile = repositoryRoot.appendingPathComponent("docs/mirror.1")
    let completionFile = repositoryRoot.appendingPathComponent("tools/completion/mirror.bash")

    func testCommittedManPageIsTheGeneratedOne() throws {
        let committed = try String(contentsOf: manFile, encoding: .utf8)
        XCTAssertNil(firstDifference(committed, manPage(specs)), "docs/mirror.1 is not what the command table gives: run tools/mirror-docs.sh")
    }

    /// docs/cli.md's interrupt table (the README points there) is the man page's SIGNALS section, row for row
    /// (interruptTable).
    func testTheReferencesInterruptTableIsTheOneTheManPagePrints() throws {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/cli.md"), encoding: .utf8)
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| ") && $0.hasSuffix(" |") }.map(String.init)
        for row in interruptTable {
            XCTAssertTrue(rows.contains("| \(row.commands) | \(row.sigint) | \(row.sigterm) |"), "docs/cli.md lacks the interrupt row for \(row.commands)")
        }
        XCTAssertTrue(manPage(specs).contains(".SH \"SIGNALS\""))
    }

    func testCommittedCompletionIsTheGeneratedOne() throws {
        let committed = try String(contentsOf: completionFile, encoding: .utf8)
        XCTAssertNil(firstDifference(committed, bashCompletion(specs)), "tools/completion/mirror.bash is not what the command table gives: run tools/mirror-docs.sh")
    }

    func testManPageRendersWithoutWarnings() throws {
        let groff = try runProgram(["groff", "-man", "-Tutf8", "-ww", "-z", manFile.path])
        XCTAssertEqual(groff.status, 0, groff.stderr)
        XCTAssertEqual(groff.stderr, "", "groff -ww warns")
        let man = try runProgram(["MANWIDTH=100", "man", "-P", "cat", "--warnings", "-l", manFile.path])
        XCTAssertEqual(man.status, 0, man.stderr)
        XCTAssertEqual(man.stderr, "", "man --warnings warns")
        XCTAssertTrue(man.stdout.hasPrefix("MIRROR(1)"), man.stdout)
    }

    /// What `man -l` shows has every command with its synopsis, summary and examples, every option it takes (typed
    /// as ASCII), every global option and every exit status with its meaning.
    func testManPageCoversEveryCommandOptionExitStatusAndExample() throws {
        let rendered = try runProgram(["MANWIDTH=100", "man", "-P", "cat", "-l", manFile.path])
        XCTAssertEqual(rendered.status, 0, rendered.stderr)
        let text = collapsingSpace(rendered.stdout)
        let sections = ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "SHELL COMMANDS", "GLOBAL OPTIONS", "TARGETS", "EXIT STATUS", "EXAMPLES", "SEE ALSO"]
        for name in sections { XCTAssertTrue(rendered.stdout.contains("\n\(name)\n"), "no section \(name)") }
        // Each command's part: from its subsection heading to the next one.
        let commandsPart = try XCTUnwrap(rendered.stdout.components(separatedBy: "\nCOMMANDS\n").last?.components(separatedBy: "\nSHELL COMMANDS\n").first)
        var parts: [String: String] = [:]
        var current: String?
        for line in commandsPart.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("   ") && !line.hasPrefix("    "), let name = specs.first(where: { line == "   \($0.name)" })?.name {
                current = name
                continue
            }
            if let current { parts[current, default: ""] += line + "\n" }
        }
        XCTAssertEqual(Set(parts.keys), Set(specs.map(\.name)), "a subsection per command")
        for spec in specs {
            let part = collapsingSpace(parts[spec.name] ?? "")
            XCTAssertTrue(part.contains(spec.synopsis), "\(spec.name): synopsis \(spec.synopsis)")
            XCTAssertTrue(part.lowercased().contains(spec.summary.lowercased()), "\(spec.name): summary")
            for option in spec.options {
                XCTAssertTrue(part.contains(collapsingSpace("\(option.name)\(option.valueName.map { " " + $0 } ?? "") \(option.help)")),
                              "\(spec.name): option \(option.name)")
            }
            for global in spec.globals {
                XCTAssertTrue(part.contains(global.rawValue), "\(spec.name): global option \(global.rawValue)")
            }
            XCTAssertFalse(spec.examples.isEmpty, "\(spec.name) has no example")
            for example in spec.examples {
                XCTAssertTrue(part.contains(collapsingSpace(example.command)), "\(spec.name): example \(example.command)")
                XCTAssertTrue(part.contains("# " + collapsingSpace(example.comment)), "\(spec.name): example comment \(example.comment)")
            }
        }
        let globalPart = collapsingSpace(try XCTUnwrap(rendered.stdout.components(separatedBy: "\nGLOBAL OPTIONS\n").last?.components(separatedBy: "\nTARGETS\n").first))
        for option in GlobalOptions.specs + toolOptions {
            XCTAssertTrue(globalPart.contains(collapsingSpace("\(option.name)\(option.valueName.map { " " + $0 } ?? "") \(option.help)")), "global option \(option.name)")
        }
        XCTAssertTrue(globalPart.contains("--version"))
        let exitPart = collapsingSpace(try XCTUnwrap(rendered.stdout.components(separatedBy: "\nEXIT STATUS\n").last?.components(separatedBy: "\nEXAMPLES\n").first))
        for status in ExitStatus.allCases {
            XCTAssertTrue(exitPart.contains("\(status.rawValue) \(collapsingSpace(status.meaning))"), "exit status \(status.rawValue)")
        }
        XCTAssertTrue(text.contains("mirror - " + String(toolSummary.dropLast())), "NAME")
    }

    /// An option whose value name lists its values ("public|random") takes exactly those, and parsing accepts each.
    func testEnumeratedOptionsListTheValuesTheyParse() throws {
        for option in GlobalOptions.specs + specs.flatMap(\.options) {
            guard let value = option.valueName, value.contains("|") else { continue }
            XCTAssertEqual(option.choices, value.split(separator: "|").map(String.init), option.name)
        }
        for option in GlobalOptions.specs where !option.choices.isEmpty {
            for choice in option.choices {
                XCTAssertNoThrow(try parseCommandLine(["gatt", "unix:/tmp/x.sock", option.name, choice], commands: specs), "\(option.name) \(choice)")
            }
            XCTAssertThrowsError(try parseCommandLine(["gatt", "unix:/tmp/x.sock", option.name, "nonesuch"], commands: specs))
        }
        let bench = try XCTUnwrap(specs.first { $0.name == "bench" })
        XCTAssertEqual(bench.options.first { $0.name == "--mode" }?.choices, ["with-response", "without-response", "both"])
        XCTAssertEqual(bench.options.first { $0.name == "--bare-loop" }?.choices, ["second-connection", "same-connection", "none"])
    }

    /// Runs `_mirror` in bash for each line of words (COMP_WORDS as bash would split them) and returns COMPREPLY each.
    func complete(_ cases: [[String]]) throws -> [[String]] {
        func quoted(_ w: String) -> String { "'" + w.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        var script = "source \(quoted(completionFile.path))\n"
        for words in cases {
            script += "COMP_WORDS=(\(words.map(quoted).joined(separator: " "))); COMP_CWORD=\(words.count - 1); COMPREPLY=(); _mirror\n"
            script += "printf '%s\\n' \"${COMPREPLY[@]}\"; echo @@\n"
        }
        let run = try runProgram(["bash", "--norc", "--noprofile", "-c", script])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stderr, "")
        var replies = run.stdout.components(separatedBy: "@@\n").map { $0.split(separator: "\n").map(String.init) }
        replies.removeLast()
        XCTAssertEqual(replies.count, cases.count)
        return replies
    }

    func testCompletionOfCommandsOptionsAndValues() throws {
        let benchModes = ["with-response", "without-response", "both"]
        let names = MirrorProfile.bundled.characteristics.keys.sorted()
        XCTAssertTrue(names.contains("scanState") && names.contains("cloudToken"), "\(names)")
        let cases: [([String], [String])] = [
            (["mirror", "re"], ["read"]),
            (["mirror", ""], specs.map(\.name) + ["help"]),
            (["mirror", "help", "sh"], ["shell"]),
            (["mirror", "--js"], ["--json"]),
            (["mirror", "--ver"], ["--version"]),
            (["mirror", "write", "--no"], ["--no-response", "--no-cache"]),
            (["mirror", "read", "--ty"], ["--type"]),
            (["mirror", "gatt", "--type", ""], ["public", "random"]),
            (["mirror", "--type", "r"], ["random"]),
            (["mirror", "--type", "random", "g"], ["gatt"]),
            (["mirror", "link", "--phy", ""], ["1m", "2m", "coded"]),
            (["mirror", "gatt", "--security", "h"], ["high"]),
            (["mirror", "bench", "--mode", ""], benchModes),
            (["mirror", "bench", "--mode", "with"], ["with-response", "without-response"]),
            // --name=value, whole (no '=' in COMP_WORDBREAKS) and as bash splits it.
            (["mirror", "bench", "--bare-loop=s"], ["--bare-loop=second-connection", "--bare-loop=same-connection"]),
            (["mirror", "bench", "--bare-loop", "=", "s"], ["second-connection", "same-connection"]),
            (["mirror", "wifi", ""], ["list", "status", "join"]),
            (["mirror", "wifi", "--wait", "5", "st"], ["status"]),
            (["mirror", "read", "--timeout", "5", "unix:/tmp/x.sock", "--"], try options(of: "read")),
            (["mirror", "doctor", "--"], ["--json", "--help"]),
            (["mirror", "read", "u"], ["unix:"]),
            (["mirror", "read", "--", "--ty"], []),
            // A characteristic: the bundled profile's names.
            (["mirror", "read", "unix:/tmp/x.sock", "scan"], names.filter { $0.hasPrefix("scan") }),
            (["mirror", "write", "unix:/tmp/x.sock", ""], names),
            (["mirror", "write", "unix:/tmp/x.sock", "cloudToken", ""], []),
            (["mirror", "listen", "unix:/tmp/x.sock", "scanState", "scanE"], ["scanError"]),
            (["mirror", "bench", "--handle", "cl"], names.filter { $0.hasPrefix("cl") }),
            (["mirror", "bench", "--counter", "wifiN"], names.filter { $0.hasPrefix("wifiN") }),
        ]
        let replies = try complete(cases.map(\.0))
        for ((words, expected), reply) in zip(cases, replies) {
            XCTAssertEqual(reply, expected, words.joined(separator: " "))
        }
    }

    func testCompletionIsRegisteredForMirror() throws {
        let run = try runProgram(["bash", "--norc", "--noprofile", "-c", "source '\(completionFile.path)'; complete -p mirror"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "complete -F _mirror mirror\n")
    }

    /// Every command completes exactly its options, the global options it takes and --help; every enumerated
    /// option its values.
    func testCompletionFollowsTheCommandTable() throws {
        var cases: [([String], [String])] = []
        for spec in specs {
            cases.append((["mirror", spec.name, "--"], try options(of: spec.name)))
            let globals = GlobalOptions.specs.filter { GlobalOptionName(rawValue: $0.name).map(spec.globals.contains) ?? false }
            for option in spec.options + globals where !option.choices.isEmpty {
                cases.append((["mirror", spec.name, option.name, ""], option.choices))
            }
        }
        cases.append((["mirror", "--"], (GlobalOptions.specs + toolOptions).map(\.name) + ["--version"]))
        let replies = try complete(cases.map(\.0))
        for ((words, expected), reply) in zip(cases, replies) {
            XCTAssertEqual(reply, expected, words.joined(separator: " "))
        }
    }

    /// A unix: TARGET completes the socket's path, whole and split at ':' as bash splits it.
    func testCompletionOfAUnixTarget() throws {
        let path = temporarySocketPath("completion")
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let stem = String(path.dropLast(4))
        let replies = try complete([
            ["mirror", "read", "unix:" + stem],
            ["mirror", "read", "unix", ":", stem],
            ["mirror", "--json", "gatt", "unix:" + stem],
        ])
        XCTAssertEqual(replies[0], ["unix:" + path])
        XCTAssertEqual(replies[1], [path])
        XCTAssertEqual(replies[2], ["unix:" + path])
    }

    /// What `mirror COMMAND --` should complete: its options, the global options it takes, --help.
    func options(of command: String) throws -> [String] {
        let spec = try XCTUnwrap(specs.first { $0.name == command })
        let globals = GlobalOptions.specs.filter { GlobalOptionName(rawValue: $0.name).map(spec.globals.contains) ?? false }
        return (spec.options + globals + toolOptions).map(\.name)
    }
}
