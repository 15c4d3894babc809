// Scripts driving `mirror` (issue 24 item 5) and the smaller first-hour findings (item 9), each run as the built
// binaries against mirror-sim or the scripted peer: listen --duration and its subscribed event; the shell's sleep,
// wait, per-line --timeout, help in the shell's form and unsubscribe's answer; mtu's 512-byte cap; adapters' error
// shape; mirror-sim's unknown option. Every wait is bounded (the runs' own timeouts, the line's --timeout).
import Foundation
import JSON
import LineEditor
import LinuxBluetooth
import LinkCore
@testable import MirrorCommandLine
import TestSupport
import XCTest

final class ScriptDrivingTests: XCTestCase {
    var simulators: [SimulatorProcess] = []

    func simulator(_ extra: [String] = []) throws -> SimulatorProcess {
        let sim = try SimulatorProcess(extra)
        simulators.append(sim)
        return sim
    }

    override func tearDown() { for sim in simulators { sim.stop() } }

    func testListenDurationEndsWithTheSummaryAndSaysWhenItIsArmed() throws {
        let sim = try simulator()
        // Nothing changes on the simulator: without --duration this listen would wait until a signal.
        let run = try MirrorProcess.run(["listen", sim.target, "scanState", "--duration", "0.3"], timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stderr.split(separator: "\n").map(String.init)
        let each = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("subscribed to 0x000C ") }, run.stderr)
        let armed = try XCTUnwrap(lines.firstIndex(of: "subscribed: 1 characteristic armed, listening"), run.stderr)
        XCTAssertLessThan(each, armed, "the subscribed event comes after every CCCD write")
        XCTAssertEqual(lines.last, "received 0 notifications and indications", run.stderr)

        let bad = try MirrorProcess.run(["listen", sim.target, "--duration", "soon"], timeout: 30)
        XCTAssertEqual(bad.status, 2, bad.stderr)
        XCTAssertTrue(bad.stderr.contains("invalid duration \"soon\""), bad.stderr)
    }

    func testListenJSONSaysSubscribedBeforeAnyNotification() throws {
        // The peer notifies three times right after each CCCD write: they are printed after the event, never before,
        // and the counts ({"received", "dropped"}) are the last line.
        let peer = try GATTPeer()
        defer { peer.close() }
        let counter = peer.hexHandle("counter")
        let run = try MirrorProcess.run(["listen", peer.target, counter, "--json", "--count", "3"], timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = try run.jsonLines()
        XCTAssertEqual(lines.count, 5, run.stdout)
        XCTAssertEqual(lines[0]["event"], "subscribed", run.stdout)
        XCTAssertNotNil(lines[0]["time"]?.number, run.stdout)
        let subscriptions = try XCTUnwrap(lines[0]["subscriptions"]?.items, run.stdout)
        XCTAssertEqual(subscriptions.count, 1)
        XCTAssertEqual(subscriptions[0]["handle"], .int(Int(peer.handle("counter"))))
        XCTAssertEqual(subscriptions[0]["mode"], "notifications")
        XCTAssertEqual(lines.last?["received"], 3, "the last line: the counts")
        for line in lines.dropFirst().dropLast() {
            XCTAssertNil(line["event"], "the notification objects keep their keys: \(line.compact)")
            XCTAssertEqual(line["kind"], "notification")
            XCTAssertEqual(line["handle"], .int(Int(peer.handle("counter"))))
        }
    }

    func testShellWaitCountsTheValueAWriteTriggeredAndTimesOutWhenNoneComes() throws {
        // Latched at ERROR: cancelScan (0x36) resets scanState, which the simulator notifies once.
        let sim = try simulator(["--latched-error"])
        let script = "subscribe scanState\nwrite scannerAction 36\nwait --timeout 20\nsleep 0.1\nwait --timeout 0.3\nread 0x0003\n"
        let run = try MirrorProcess.run(["shell", sim.target, "--keep-going"], input: script, timeout: 60)
        XCTAssertEqual(run.status, 5, "the second wait's timeout: \(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        let notification = try XCTUnwrap(lines.firstIndex { $0.contains("notification 0x000C scanState: invalid  [00]  (1 byte)") }, run.stdout)
        let waited = try XCTUnwrap(lines.firstIndex(of: "waited for 1 value"), run.stdout)
        XCTAssertLessThan(notification, waited, run.stdout)
        XCTAssertTrue(run.stderr.contains("mirror: timed out after 0.3 s waiting for 1 value of the background subscriptions (0 came)"),
                      run.stderr)
        // The database the shell discovered for `subscribe scanState` names the handle (issue 37).
        XCTAssertTrue(run.stdout.hasSuffix("> read 0x0003\n0x0003 Device Name: \"mirror-sim\"  [6d 69 72 72 6f 72 2d 73 69 6d]  (10 bytes)\n"),
                      "the shell goes on after the timeout: \(run.stdout)")

        // No subscription and nothing left to count: at once, not after the limit.
        let none = try MirrorProcess.run(["shell", sim.target], input: "wait --timeout 20\n", timeout: 10)
        XCTAssertEqual(none.status, 1, none.stderr)
        XCTAssertTrue(none.stderr.contains("wait: no background subscription to wait on (subscribe first)"), none.stderr)

        let json = try MirrorProcess.run(["shell", sim.target, "--json"], input: "sleep 0.1\n", timeout: 30)
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertEqual(try json.jsonLines().last, .object([("slept", .double(0.1))]), json.stdout)
    }

    func testALinesTimeoutBoundsThatCommandOnly() throws {
        let sim = try simulator()
        // listen --count 1 on a value that never changes: the line's --timeout cancels it, the next line runs.
        let script = "listen scanState --count 1 --timeout 0.5\nread 0x0003 --timeout 5\n"
        let run = try MirrorProcess.run(["shell", sim.target, "--keep-going"], input: script, timeout: 60)
        XCTAssertEqual(run.status, 5, run.stderr)
        XCTAssertTrue(run.stderr.contains("mirror: timed out after 0.5 s waiting for listen to finish (the line's --timeout)"), run.stderr)
        XCTAssertTrue(run.stdout.hasSuffix("> read 0x0003 --timeout 5\n0x0003 Device Name: \"mirror-sim\"  [6d 69 72 72 6f 72 2d 73 69 6d]  (10 bytes)\n"),
                      run.stdout)
        // Without --keep-going the script stops there with the timeout's status.
        let json = try MirrorProcess.run(["shell", sim.target, "--json"], input: script, timeout: 60)
        XCTAssertEqual(json.status, 5, json.stderr)
        let last = try XCTUnwrap(json.jsonLines().last)
        XCTAssertEqual(last["error"]?["kind"], "timeout", json.stdout)
        XCTAssertEqual(last["error"]?["seconds"], .double(0.5), json.stdout)
        // The connection's own options stay refused on a line.
        let mtu = try MirrorProcess.run(["shell", sim.target], input: "read 0x0003 --mtu 23\n", timeout: 30)
        XCTAssertEqual(mtu.status, 2, mtu.stderr)
        XCTAssertTrue(mtu.stderr.contains("a line takes --json and --timeout"), mtu.stderr)
    }

    func testHelpInTheShellSpeaksTheShellsForm() throws {
        let sim = try simulator()
        let run = try MirrorProcess.run(["shell", sim.target], input: "help read\nwrite --help\nhelp wait\n", timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        let help = try XCTUnwrap(run.stdout.components(separatedBy: "> help read\n").last)
        let read = try XCTUnwrap(help.components(separatedBy: "> write --help").first)
        XCTAssertTrue(read.contains("read: read a value"), read)
        XCTAssertTrue(read.contains("Usage: read HANDLE|UUID|NAME [OPTIONS]\n"), read)
        XCTAssertTrue(read.contains("\n  read 0x0003\n"), "the examples as lines: \(read)")
        XCTAssertTrue(read.contains("--timeout S") && read.contains("--json"), "what a line takes: \(read)")
        for word in ["TARGET", "--adapter", "--mtu", "--bearers", "unix:", "Global options", "mirror read"] {
            XCTAssertFalse(help.contains(word), "\(word) in the shell's help: \(help)")
        }
        XCTAssertTrue(help.contains("Usage: write HANDLE|UUID|NAME HEX [OPTIONS]\n"), help)
        XCTAssertTrue(help.contains("Usage: wait [OPTIONS]\n"), help)
        XCTAssertTrue(help.contains("--count N"), help)

        // A shell command's usage error points to the shell's help, not to `mirror sleep --help` (no such command);
        // a one-shot command's stays the one-shot's, word for word.
        let bad = try MirrorProcess.run(["shell", sim.target, "--keep-going"], input: "sleep abc\nwait --count 0\nreed\nread 0xZZ\n", timeout: 30)
        XCTAssertEqual(bad.status, 2, bad.stderr)
        XCTAssertTrue(bad.stderr.contains("invalid duration \"abc\"") && bad.stderr.contains("\nsee: help sleep\n"), bad.stderr)
        XCTAssertTrue(bad.stderr.contains("\nsee: help wait\n"), bad.stderr)
        XCTAssertTrue(bad.stderr.contains("(did you mean read?)\nsee: help\n"), bad.stderr)
        XCTAssertTrue(bad.stderr.contains("\nsee: mirror read --help\n"), bad.stderr)
    }

    func testTabOffersWhatALineTakes() {
        let state = Lock(Shell.State(target: "unix:/nowhere", options: GlobalOptions(), trace: false))
        let read = Shell.complete(Completion(word: "--", before: "read "), state: state)
        XCTAssertTrue(read.contains("--timeout") && read.contains("--json"), "\(read)")
        XCTAssertFalse(read.contains("--mtu"), "a line does not take the connection's options: \(read)")
        XCTAssertEqual(Shell.complete(Completion(word: "--", before: "wait "), state: state), ["--count", "--timeout", "--json", "--help"])
        XCTAssertTrue(Shell.complete(Completion(word: "--", before: "connect "), state: state).contains("--mtu"))
        XCTAssertTrue(Shell.complete(Completion(word: "w", before: ""), state: state).contains("wait"))
    }

    func testUnsubscribeSaysWhatItEnded() throws {
        let sim = try simulator()
        let run = try MirrorProcess.run(["shell", sim.target], input: "unsubscribe\nsubscribe scanState\nunsubscribe\n", timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("> unsubscribe\nunsubscribe: no background subscription to end\n"), run.stdout)
        XCTAssertTrue(run.stdout.hasSuffix("> unsubscribe\nunsubscribed from 0x000C scanState\n"), run.stdout)
        let json = try MirrorProcess.run(["shell", sim.target, "--json"], input: "unsubscribe\n", timeout: 30)
        XCTAssertEqual(try json.jsonLines().last, .object([("unsubscribed", .null), ("name", .null)]), json.stdout)
    }

    func testMTUBudgetsStopAtTheLongestAttributeValue() throws {
        // At MTU 517 a Write Request carries at most 512 value bytes (Core Spec Vol 3 Part F §3.2.9), not 514.
        let sim = try simulator()
        let run = try MirrorProcess.run(["mtu", sim.target], timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "client Rx MTU 517, server Rx MTU 517: MTU 517\nbudgets: write/notify 512 bytes, prepare write part 512, read blob part 512\n")
        let json = try MirrorProcess.run(["mtu", sim.target, "--json"], timeout: 30).json()
        XCTAssertEqual(json["writeBudget"], 512)
        XCTAssertEqual(json["readBlobBudget"], 512)
        // The budget printed is what a write may carry: 512 bytes go, 513 are refused here.
        let fits = try MirrorProcess.run(["write", sim.target, "0x0012", String(repeating: "ab", count: 512), "--no-response"], timeout: 30)
        XCTAssertEqual(fits.status, 0, fits.stderr)
        let over = try MirrorProcess.run(["write", sim.target, "0x0012", String(repeating: "ab", count: 513), "--no-response"], timeout: 30)
        XCTAssertEqual(over.status, 4, over.stderr)
    }

    func testMirrorSimNamesAnUnknownOption() throws {
        for arguments in [["--bogus"], ["--bogus", "x", "unix:/tmp/never-created.sock"]] {
            let run = try ToolProcess.run("mirror-sim", arguments, timeout: 20)
            XCTAssertEqual(run.status, 2, run.stderr)
            XCTAssertTrue(run.stderr.hasPrefix("mirror-sim: unknown option --bogus (mirror-sim --help lists the options)"), run.stderr)
            XCTAssertFalse(run.stderr.contains("needs a value"), run.stderr)
        }
        let missing = try ToolProcess.run("mirror-sim", ["--mtu"], timeout: 20)
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.stderr.hasPrefix("mirror-sim: --mtu needs a value"), missing.stderr)
    }
}
