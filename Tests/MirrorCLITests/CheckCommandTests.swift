// `mirror check` as a process against `mirror-sim`: no finding from the fault-free simulator, and for every rule of
// the catalogue a simulator with the fault of the same name gives exactly that finding, at its level, with its
// citation and exit status 9.
import Conformance
import Foundation
import JSON
import LinkCore
import MirrorCommandLine
import TestSupport
import Glibc
import XCTest

final class CheckCommandTests: XCTestCase {
    /// The finding ids of a `--json` report.
    func findingIDs(_ json: JSONValue) -> [String] {
        guard case .array(let findings)? = json["findings"] else { return [] }
        return findings.compactMap { if case .string(let id)? = $0["id"] { id } else { nil } }
    }

    func testTheFaultFreeSimulatorGivesNoFindingInTextAndJSON() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        // Each first request of a kind is followed by a quiet period that only its limit ends: the check's end shows it.
        let text = try MirrorProcess.run(["check", sim.target])
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertTrue(text.stdout.contains("no finding: every rule checked holds"), text.stdout)
        XCTAssertTrue(text.stdout.hasPrefix("checked \(sim.target): \(ConformanceRule.catalogue.count) rules"), text.stdout)
        let json = try MirrorProcess.run(["check", sim.target, "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let report = try json.json()
        XCTAssertEqual(findingIDs(report), [])
        XCTAssertEqual(report["passes"], .bool(true))
        XCTAssertEqual(report["checked"], .array(ConformanceRule.catalogue.map { .string($0.id) }))
    }

    /// A response later than --timeout is a finding, and the check sends nothing more on the bearer (Vol 3 Part F §3.3.3).
    func testALateResponseStopsTheCheckAtTheTransactionTimeout() throws {
        let sim = try SimulatorProcess(["--fault", "response-within-timeout"])
        defer { sim.stop() }
        let run = try MirrorProcess.run(["check", sim.target, "--timeout", "1"])
        XCTAssertEqual(run.status, 9, run.stderr)
        XCTAssertTrue(run.stdout.contains("\nstopped early: a request got no answer in 1 s, and after a transaction timeout nothing more may be sent on the bearer (Vol 3 Part F §3.3.3)\n"), run.stdout)
        XCTAssertTrue(run.stdout.contains("    seen: no answer to Read Request handle 0x0001 in 1 s\n"), run.stdout)
        // The rules the stop left unchecked are named under its one reason, not each with it (issue 36).
        XCTAssertTrue(run.stdout.contains("\nnot checked:\n"), run.stdout)
        XCTAssertTrue(run.stdout.components(separatedBy: "\n").contains { $0.hasPrefix("  stopped before: ") && $0.contains("invalid-handle-zero") }, run.stdout)
        XCTAssertEqual(run.stdout.components(separatedBy: "nothing more may be sent on the bearer").count, 2, run.stdout)
        let json = try MirrorProcess.run(["check", sim.target, "--timeout", "1", "--json"]).json()
        XCTAssertEqual(json["passes"], .bool(false))
        XCTAssertEqual(json["complete"], .bool(false))
    }

    /// Issue 37: on a terminal the check shows its step and counts on one line that updates, cleared before the
    /// report; on a pipe it prints nothing of the kind (before: nothing for 20 s and more against a slow server).
    func testProgressOnATerminalNeverOnAPipe() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let (status, text) = try runWithStandardErrorOnATerminal(["check", sim.target])
        XCTAssertEqual(status, 0)
        XCTAssertTrue(text.hasPrefix("\r\u{1B}[Kchecking \(sim.target): Exchange MTU, 0 requests, 0 attributes"), text)
        XCTAssertTrue(text.contains(#"attributes"#) && text.hasSuffix("\r\u{1B}[K"), "the line is cleared at the end: \(text)")
        let piped = try MirrorProcess.run(["check", sim.target])
        XCTAssertFalse(piped.stderr.contains("\u{1B}[K"), piped.stderr)
        XCTAssertEqual(piped.stderr, "")
    }

    /// --max-requests and --max-time bound the check whatever the server does: a check that reaches either stops,
    /// does not pass, and exits 5; the defaults are stated in --help (issue 36).
    func testTheRequestBudgetAndTheDeadlineStopTheCheckWithStatus5() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let budget = try MirrorProcess.run(["check", sim.target, "--json", "--max-requests", "12"])
        XCTAssertEqual(budget.status, 5, budget.stderr)
        let report = try budget.json()
        XCTAssertEqual(report["requests"], .int(12))
        XCTAssertEqual(report["passes"], .bool(false))
        XCTAssertEqual(report["complete"], .bool(false))
        XCTAssertEqual(report["stopped"], .string("the check sent its budget of 12 requests (--max-requests) before it ended"))
        let help = try MirrorProcess.run(["check", "--help"])
        XCTAssertTrue(help.stdout.contains("--max-time S"), help.stdout)
        XCTAssertTrue(help.stdout.contains("send at most N requests (default 5000)"), help.stdout)
        let bad = try MirrorProcess.run(["check", sim.target, "--max-requests", "0"])
        XCTAssertEqual(bad.status, 2, bad.stderr)
    }

    /// Nothing is written unless named; what the write probes change is written back.
    func testWritesOnlyWhereNamedAndWrittenBack() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let unnamed = try MirrorProcess.run(["check", sim.target, "--json", "--trace"])
        XCTAssertEqual(unnamed.status, 0, unnamed.stderr)
        XCTAssertFalse(unnamed.stderr.contains(" > Write Request") || unnamed.stderr.contains(" > Prepare Write Request"), unnamed.stderr)
        guard case .array(let skipped)? = try unnamed.json()["notChecked"] else { return XCTFail("notChecked") }
        for rule in ConformanceRule.writeRules {
            XCTAssertTrue(skipped.contains(.object([("id", .string(rule.id)), ("reason", "nothing is written unless named: --writes HANDLE|NAME")])), rule.id)
        }
        let before = try MirrorProcess.run(["read", sim.target, "cloudToken", "--json"]).json()
        let named = try MirrorProcess.run(["check", sim.target, "--json", "--writes", "wifiNumNetworks", "--writes", "cloudToken"])
        XCTAssertEqual(named.status, 0, named.stdout)
        let report = try named.json()
        XCTAssertEqual(findingIDs(report), [])
        XCTAssertEqual(report["notChecked"], .array([.object([("id", "database-hash"), ("reason", "the server has no Database Hash characteristic (0x2B2A)")])]))
        XCTAssertEqual(try MirrorProcess.run(["read", sim.target, "cloudToken", "--json"]).json()["value"], before["value"], "cloudToken as it was")
        let unknown = try MirrorProcess.run(["check", sim.target, "--writes", "noSuchName"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("--writes: no characteristic named \"noSuchName\" in the profile"), unknown.stderr)
    }

    /// With the GATT service's caching characteristics the Database Hash is recomputed too, and agrees.
    func testTheDatabaseHashOfTheSimulatorIsCheckedAndAgrees() throws {
        let sim = try SimulatorProcess(["--caching", "yes"])
        defer { sim.stop() }
        let run = try MirrorProcess.run(["check", sim.target, "--json", "--writes", "wifiNumNetworks,cloudToken"])
        XCTAssertEqual(run.status, 0, run.stdout)
        let report = try run.json()
        XCTAssertEqual(findingIDs(report), [])
        XCTAssertEqual(report["notChecked"], .array([]), "every rule judged, the Database Hash included")
    }

    /// Every rule has its fault (`mirror-sim --list-faults`), and that fault gives exactly that rule's finding.
    func testEveryRuleIsBrokenByItsFaultAndByNothingElse() throws {
        let faults = try ToolProcess.run("mirror-sim", ["--list-faults"])
        XCTAssertEqual(faults.status, 0, faults.stderr)
        let listed = Set(faults.stdout.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) })
        for rule in ConformanceRule.catalogue {
            XCTAssertTrue(listed.contains(rule.id), "rule \(rule.id) has no fault fixture in mirror-sim --list-faults")
            guard listed.contains(rule.id) else { continue }
            let sim = try SimulatorProcess(["--fault", rule.id])
            defer { sim.stop() }
            let run = try MirrorProcess.run(["check", sim.target, "--json", "--timeout", "1", "--writes", "wifiNumNetworks,cloudToken"])
            XCTAssertEqual(run.status, rule.level == .shall ? 9 : 0, "\(rule.id): \(run.stdout) \(run.stderr)")
            let report = try run.json()
            XCTAssertEqual(Set(findingIDs(report)), [rule.id], "\(rule.id): \(report.compact)")
            guard case .array(let findings)? = report["findings"] else { continue }
            for f in findings {
                XCTAssertEqual(f["level"], .string(rule.level.rawValue), rule.id)
                XCTAssertEqual(f["citation"], .string(rule.citation), rule.id)
                XCTAssertEqual(f["advice"], .string(rule.advice), rule.id)
                guard case .array(let evidence)? = f["evidence"] else {
                    XCTFail("\(rule.id): no evidence")
                    continue
                }
                XCTAssertFalse(evidence.isEmpty, "\(rule.id): the exchange that shows it")
            }
        }
    }

    func testTextGroupsAFindingWithItsCitationEvidenceAndFix() throws {
        let sim = try SimulatorProcess(["--fault", "invalid-handle-zero"])
        defer { sim.stop() }
        let run = try MirrorProcess.run(["check", sim.target])
        XCTAssertEqual(run.status, 9, run.stderr)
        let rule = ConformanceRule.invalidHandleZero
        for line in ["SHALL broken:", "  \(rule.id) [SHALL, \(rule.citation)]", "    rule: \(rule.rule)",
                     "    seen: Read Request to 0x0000 was refused with 0x00 Reserved, not 0x01 Invalid Handle",
                     "    fix: \(rule.advice)", "1 SHALL rule broken, 0 SHOULD rules not followed, 0 notes"] {
            XCTAssertTrue(run.stdout.contains(line + "\n"), "\(line) in \(run.stdout)")
        }
        // The exchange, decoded, with the seconds since the check began.
        XCTAssertNotNil(run.stdout.range(of: #"\n      \+\d+\.\d{6} > 0x0A Read Request \[0a 00 00\]"#, options: .regularExpression), run.stdout)
        XCTAssertNotNil(run.stdout.range(of: #"\n      \+\d+\.\d{6} < Error Response to 0x0A Read Request handle 0x0000: 0x00"#, options: .regularExpression), run.stdout)
    }

    func testOnlyAndSkipChooseTheRulesReported() throws {
        let sim = try SimulatorProcess(["--fault", "invalid-handle-zero"])
        defer { sim.stop() }
        let skipped = try MirrorProcess.run(["check", sim.target, "--json", "--skip", "invalid-handle-zero"])
        XCTAssertEqual(skipped.status, 0, skipped.stdout)
        XCTAssertEqual(findingIDs(try skipped.json()), [])
        let other = try MirrorProcess.run(["check", sim.target, "--json", "--only", "error-echo,cccd-present"])
        XCTAssertEqual(other.status, 0, other.stdout)
        XCTAssertEqual(try other.json()["checked"], .array(["error-echo", "cccd-present"]))
        let only = try MirrorProcess.run(["check", sim.target, "--json", "--only", "error-echo", "--only", "invalid-handle-zero"])
        XCTAssertEqual(only.status, 9, only.stdout)
        XCTAssertEqual(findingIDs(try only.json()), ["invalid-handle-zero"])
        let unknown = try MirrorProcess.run(["check", sim.target, "--only", "no-such-rule"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("--only: unknown rule \"no-such-rule\"; the rules: mtu-exchange, "), unknown.stderr)
    }

    func testListRulesPrintsTheCatalogueWithoutATarget() throws {
        let run = try MirrorProcess.run(["check", "--list-rules"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, ConformanceRule.catalogue.count)
        for (line, rule) in zip(lines, ConformanceRule.catalogue) {
            XCTAssertTrue(line.hasPrefix(rule.id + " "), String(line))
            XCTAssertTrue(line.hasSuffix("\(rule.citation): \(rule.rule)"), String(line))
        }
        let json = try MirrorProcess.run(["check", "--list-rules", "--json"]).json()
        guard case .array(let rules) = json else { return XCTFail(json.compact) }
        XCTAssertEqual(rules.map { $0["id"] }, ConformanceRule.catalogue.map { .string($0.id) })
        let missing = try MirrorProcess.run(["check"])
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.stderr.contains("missing TARGET"), missing.stderr)
    }

    /// In the shell the check runs on the open connection (the MTU rules are not checked there), and the shell's GATT
    /// client reads on afterwards.
    func testTheShellChecksItsOwnConnection() throws {
        let sim = try SimulatorProcess(["--fault", "cccd-present"])
        defer { sim.stop() }
        let run = try MirrorProcess.run(["shell", sim.target, "--keep-going"], input: "check\nread 0x0003\n")
        XCTAssertEqual(run.status, 9, run.stdout + run.stderr)
        XCTAssertTrue(run.stdout.contains("  cccd-present [SHALL, \(ConformanceRule.cccdPresent.citation)]\n"), run.stdout)
        XCTAssertTrue(run.stdout.contains("  mtu-exchange: this connection exchanged its MTU when it opened"), run.stdout)
        XCTAssertTrue(run.stdout.contains("0x0003: 6d 69 72 72 6f 72 2d 73 69 6d  \"mirror-sim\""), run.stdout)
    }
}

/// The README's "Check a server" transcripts are what the tool prints: against the simulator, and against one with
/// the fault the README names; the times (which vary) compared as their shape.
final class ReadmeCheckTests: XCTestCase {
    /// A line with each time (`0.835 s`, `+0.632188`) replaced by its shape.
    func masked(_ line: String) -> String {
        line.replacingOccurrences(of: #"\d+\.\d{3} s"#, with: "N.NNN s", options: .regularExpression)
            .replacingOccurrences(of: #"\+\d+\.\d{6}"#, with: "+N.NNNNNN", options: .regularExpression)
    }

    func testTheConformanceTranscriptsAreWhatTheToolPrints() throws {
        guard let (body, steps) = try ReadmeTranscript.section("## Check a server") else {
            return XCTFail("the README has no Check a server section")
        }
        XCTAssertEqual(steps.map(\.0), ["mirror check unix:/tmp/mirror-sim.sock", "mirror check unix:/tmp/sim.sock"])
        guard let fault = body.range(of: #"--fault [a-z-]+"#, options: .regularExpression).map({ String(body[$0].dropFirst(8)) }) else {
            return XCTFail("the fault the README names")
        }
        // The simulators at the paths the README shows, as the transcript's own lines name them.
        for (command, expected) in steps {
            let faulty = command.hasSuffix("unix:/tmp/sim.sock")
            let sim = try SimulatorProcess(faulty ? ["--fault", fault] : [])
            defer { sim.stop() }
            let shown = faulty ? "unix:/tmp/sim.sock" : "unix:/tmp/mirror-sim.sock"
            let run = try MirrorProcess.run(["check", sim.target])
            XCTAssertEqual(run.status, faulty ? 9 : 0, run.stderr)
            let lines = (run.stdout + run.stderr).replacingOccurrences(of: sim.target, with: shown)
                .split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { masked(String($0)) }
            XCTAssertEqual(lines, expected.map(masked), command)
        }
    }
}
