// `mirror shell`: script mode over a pipe against the scripted peer (one connection for every command) and the
// simulator (a write that triggers a notification), --json lines, the stop at the first failure and --keep-going;
// one session in a real pseudo-terminal (Tests/LineEditorTests/pty-drive.py); the word splitter.
import Foundation
import JSON
import MirrorCommandLine
import TestSupport
import XCTest

final class ShellTests: XCTestCase {
    var peer: GATTPeer!
    /// The simulators started here, kept (as SimulatorTests keeps its own) so that their pipes are released with
    /// the test case, never in the middle of another test that counts descriptors.
    var simulators: [SimulatorProcess] = []

    func simulator(_ extra: [String] = []) throws -> SimulatorProcess {
        let sim = try SimulatorProcess(extra)
        simulators.append(sim)
        return sim
    }

    override func setUpWithError() throws { peer = try GATTPeer() }
    override func tearDown() { peer.close() }

    func testScriptModeRunsEveryCommandOnOneConnectionAndEchoesEach() throws {
        let script = """
            # a comment, then a blank line

            read \(peer.hexHandle("deviceName"))
            write \(peer.hexHandle("deviceName")) 414243
            read 2a00
            write \(peer.hexHandle("sink")) 0102 --no-response
            write \(peer.hexHandle("long")) 00112233 --long
            mtu
            gatt
            link
            """
        let run = try MirrorProcess.run(["shell", peer.target], input: script + "\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(peer.counters.connections, 1, "every command on the shell's one connection")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "connected to \(peer.target): MTU 247")
        let echoes = lines.filter { $0.hasPrefix("> ") }
        XCTAssertEqual(echoes, ["> read \(peer.hexHandle("deviceName"))", "> write \(peer.hexHandle("deviceName")) 414243",
                                "> read 2a00", "> write \(peer.hexHandle("sink")) 0102 --no-response",
                                "> write \(peer.hexHandle("long")) 00112233 --long",
                                "> mtu", "> gatt", "> link"], "comments and blank lines are skipped, each command echoed")
        // Each result right after its echo.
        let read = try XCTUnwrap(lines.firstIndex(of: "> read \(peer.hexHandle("deviceName"))"))
        XCTAssertTrue(lines[read + 1].hasPrefix("\(peer.hexHandle("deviceName")): "), lines[read + 1])
        XCTAssertTrue(lines[read + 1].contains("\"Scripted Peer\""), lines[read + 1])
        let byUUID = try XCTUnwrap(lines.firstIndex(of: "> read 2a00"))
        // Issue 37: a read by UUID is named and decoded as a read by name.
        XCTAssertTrue(lines[byUUID + 1].hasPrefix("\(peer.hexHandle("deviceName")) Device Name: \"ABC\"  [41 42 43]"), lines[byUUID + 1])
        XCTAssertTrue(run.stdout.contains("(Write Command, not confirmed)"), run.stdout)
        XCTAssertTrue(run.stdout.contains("(long write: Prepare Write + Execute Write, confirmed)"), run.stdout)
        XCTAssertTrue(run.stdout.contains("client Rx MTU 517, server Rx MTU 247: MTU 247"), run.stdout)
        XCTAssertTrue(run.stdout.contains("link to \(peer.target): none (a unix socket has no radio link)"), run.stdout)
        XCTAssertEqual(peer.value("deviceName"), [0x41, 0x42, 0x43])
        XCTAssertEqual(Array(peer.value("long").prefix(4)), [0x00, 0x11, 0x22, 0x33])
    }

    func testScriptModeStopsAtTheFirstFailureWithItsStatus() throws {
        let device = peer.hexHandle("deviceName"), secret = peer.hexHandle("secret")
        let script = "read \(device)\nread \(secret)\nread \(device)\n"
        let run = try MirrorProcess.run(["shell", peer.target], input: script)
        XCTAssertEqual(run.status, 3, "the failing read's status (the peer's ATT error)")
        XCTAssertTrue(run.stdout.contains("> read \(secret)"), run.stdout)
        XCTAssertEqual(run.stdout.components(separatedBy: "> read \(device)").count - 1, 1, "nothing runs after the failure")
        XCTAssertTrue(run.stderr.contains("mirror: ATT error 0x05 Insufficient Authentication"), run.stderr)

        let usage = try MirrorProcess.run(["shell", peer.target], input: "read \(device)\nreed 0x0003\nread \(device)\n")
        XCTAssertEqual(usage.status, 2, "an unknown command is bad usage, as one-shot")
        XCTAssertTrue(usage.stderr.contains("mirror: unknown command \"reed\" (did you mean read?)"), usage.stderr)
        XCTAssertEqual(usage.stdout.components(separatedBy: "> read \(device)").count - 1, 1)

        let missing = try MirrorProcess.run(["shell", peer.target], input: "write 0x0003\n")
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.stderr.contains("mirror: missing HEX (the value in hex (0102ff, 01:02:ff))"),
                      "the one-shot command's own error: \(missing.stderr)")
    }

    func testKeepGoingRunsOnAndExitsWithTheFirstFailure() throws {
        let device = peer.hexHandle("deviceName"), secret = peer.hexHandle("secret")
        let script = "read \(secret)\nread 0x9999\nread \(device)\n"
        let run = try MirrorProcess.run(["shell", peer.target, "--keep-going"], input: script)
        XCTAssertEqual(run.status, 3, "the first failure's status")
        XCTAssertTrue(run.stdout.contains("> read \(device)\n\(device): "), run.stdout)
        XCTAssertTrue(run.stderr.contains("Invalid Handle"), run.stderr)
        XCTAssertEqual(peer.counters.connections, 1)

        let usageFirst = try MirrorProcess.run(["shell", peer.target, "--keep-going"], input: "bogus\nread \(secret)\n")
        XCTAssertEqual(usageFirst.status, 2)
    }

    func testJSONModeIsOneObjectPerLine() throws {
        let script = "read \(peer.hexHandle("deviceName"))\nwrite \(peer.hexHandle("sink")) 41\nread 0x9999\n"
        let run = try MirrorProcess.run(["shell", peer.target, "--json", "--keep-going"], input: script)
        XCTAssertEqual(run.status, 3)
        let lines = try run.jsonLines()
        XCTAssertEqual(lines.count, 7, run.stdout)
        XCTAssertEqual(lines[0]["connected"], .string(peer.target))
        XCTAssertEqual(lines[0]["mtu"], 247)
        XCTAssertEqual(lines[1], .object([("command", .string("read \(peer.hexHandle("deviceName"))"))]))
        XCTAssertEqual(lines[2]["handle"], .int(Int(peer.handle("deviceName"))))
        XCTAssertEqual(lines[2]["text"], "Scripted Peer")
        XCTAssertEqual(lines[3], .object([("command", .string("write \(peer.hexHandle("sink")) 41"))]))
        XCTAssertEqual(lines[4]["mode"], "request")
        XCTAssertEqual(lines[5], .object([("command", .string("read 0x9999"))]))
        XCTAssertEqual(lines[6]["error"]?["exitStatus"], 3)
    }

    func testALineMayNotChangeTheConnectionsOptions() throws {
        let run = try MirrorProcess.run(["shell", peer.target], input: "read 0x0003 --mtu 23\n")
        XCTAssertEqual(run.status, 2)
        XCTAssertTrue(run.stderr.contains("the connection's options"), run.stderr)
    }

    func testDisconnectAndConnectInAScript() throws {
        let device = peer.hexHandle("deviceName")
        let script = "disconnect\nread \(device)\n"
        let run = try MirrorProcess.run(["shell", peer.target, "--keep-going"], input: script + "connect\nread \(device)\n")
        XCTAssertEqual(run.status, 6, "a command while disconnected fails as a lost connection does")
        XCTAssertTrue(run.stdout.contains("disconnected from \(peer.target)"), run.stdout)
        XCTAssertTrue(run.stderr.contains("not connected"), run.stderr)
        XCTAssertTrue(run.stdout.hasSuffix("> read \(device)\n\(device): 53 63 72 69 70 74 65 64 20 50 65 65 72  \"Scripted Peer\"  (13 bytes)\n"), run.stdout)
        XCTAssertEqual(peer.counters.connections, 2)
    }

    func testALostConnectionIsSaidAtOnceAndCommandsAfterItSayNotConnected() throws {
        peer.close()
        var behaviour = GATTPeer.Behaviour()
        behaviour.closeOn = [0x12]  // the peer closes on a Write Request
        peer = try GATTPeer(behaviour: behaviour)
        let device = peer.hexHandle("deviceName")
        let run = try MirrorProcess.run(["shell", peer.target, "--keep-going"], input: "write \(device) 41\nread \(device)\nconnect\nread \(device)\n")
        XCTAssertEqual(run.status, 6, "the write's lost connection")
        XCTAssertTrue(run.stderr.contains("mirror: connection lost: "), run.stderr)
        XCTAssertTrue(run.stderr.contains("not connected (the connection was closed or lost): connect [TARGET] first"), run.stderr)
        XCTAssertTrue(run.stdout.hasSuffix("> read \(device)\n\(device): 53 63 72 69 70 74 65 64 20 50 65 65 72  \"Scripted Peer\"  (13 bytes)\n"),
                      "connect opens it again: \(run.stdout)")
        XCTAssertEqual(peer.counters.connections, 2)
    }

    func testAFailedConnectEndsTheShellWithItsStatus() throws {
        let run = try MirrorProcess.run(["shell", "unix:/nonexistent/mirror-shell.sock"], input: "read 0x0003\n")
        XCTAssertEqual(run.status, 6, run.stderr)
        XCTAssertFalse(run.stdout.contains("> read"), "no command runs without the connection")
    }

    func testSubscribeInScriptModePrintsTheNotificationAWriteTriggers() throws {
        // Latched at ERROR: cancelScan (0x36 to scannerAction) resets scanState, which the simulator notifies.
        let sim = try simulator(["--latched-error"])
        defer { sim.stop() }
        let script = "subscribe scanState\nwrite scannerAction 36\nread scanState\nunsubscribe scanState\n"
        let run = try MirrorProcess.run(["shell", sim.target], input: script)
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains { $0.hasPrefix("subscribed to 0x000C ") && $0.contains(" scanState (notifications), current value: error  [09]  (1 byte)") }, run.stdout)
        let notification = try XCTUnwrap(lines.first { $0.contains("notification 0x000C scanState: invalid  [00]  (1 byte)") }, run.stdout)
        // "HH:MM:SS.mmm  notification ...": a timestamp first.
        XCTAssertNotNil(notification.range(of: #"^\d\d:\d\d:\d\d\.\d{3}  notification"#, options: .regularExpression), notification)
        XCTAssertTrue(lines.contains("unsubscribed from 0x000C scanState"), run.stdout)

        // A mirror latched at ERROR again (the first one's scanState is reset now: no change, no notification).
        let latched = try simulator(["--latched-error"])
        defer { latched.stop() }
        let json = try MirrorProcess.run(["shell", latched.target, "--json"], input: "subscribe scanState\nwrite scannerAction 36\n")
        XCTAssertEqual(json.status, 0, json.stderr)
        let objects = try json.jsonLines()
        XCTAssertTrue(objects.contains { $0["subscribed"] == 12 && $0["name"] == "scanState" }, json.stdout)
        // The script ends right after the write, still subscribed: the notification it triggered is printed, not
        // lost to the shell's end.
        XCTAssertTrue(objects.contains { $0["kind"] == "notification" && $0["handle"] == 12 && $0["value"] == "00" }, json.stdout)
    }

    /// A subscription whose stream overflowed before the CCCD's Write Response says so when it ends (disconnect).
    func testASubscriptionsDropsAreSaidAtItsEnd() throws {
        let dropping = try GATTPeer(behaviour: .init(notificationsPerSubscription: 0, notificationsBeforeCCCDAnswer: 1100))
        defer { dropping.close() }
        let counter = dropping.hexHandle("counter")
        let run = try MirrorProcess.run(["shell", dropping.target], input: "subscribe \(counter)\ndisconnect\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout.split(separator: "\n").filter { $0.contains("notification \(counter)") }.count, 1024)
        XCTAssertTrue(run.stderr.contains("\(counter): 76 notifications dropped (output fell behind: 0; before the subscription completed: 76)"), run.stderr)
        let json = try MirrorProcess.run(["shell", dropping.target, "--json"], input: "subscribe \(counter)\ndisconnect\n")
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertTrue(try json.jsonLines().contains(.object([("dropped", .object([("total", 76), ("outputFellBehind", 0), ("beforeSubscribed", 76)])),
                                                            ("handle", .int(Int(dropping.handle("counter"))))])), json.stdout)
    }

    func testSeveralSubscriptionsAtOnce() throws {
        // The peer notifies each subscription three times; two subscriptions stay up together.
        let script = "subscribe \(peer.hexHandle("counter")) \(peer.hexHandle("battery"))\nread 0x0003\nunsubscribe\n"
        let run = try MirrorProcess.run(["shell", peer.target], input: script)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("subscribed to \(peer.hexHandle("counter"))"), run.stdout)
        XCTAssertTrue(run.stdout.contains("subscribed to \(peer.hexHandle("battery"))"), run.stdout)
        XCTAssertTrue(run.stdout.contains("notification \(peer.hexHandle("counter"))"), run.stdout)
        XCTAssertTrue(run.stdout.contains("unsubscribed from \(peer.hexHandle("counter"))"), run.stdout)
        XCTAssertTrue(run.stdout.contains("unsubscribed from \(peer.hexHandle("battery"))"), run.stdout)
        let bad = try MirrorProcess.run(["shell", peer.target], input: "subscribe nosuchname\n")
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("is named \"nosuchname\""), bad.stderr)
    }

    func testTheWordSplitter() throws {
        XCTAssertEqual(try splitShellWords("  read   0x0003 "), ["read", "0x0003"])
        XCTAssertEqual(try splitShellWords("write name 'a b' \"c \\\"d\\\" e\" f\\ g"), ["write", "name", "a b", "c \"d\" e", "f g"])
        XCTAssertEqual(try splitShellWords("write x '' # a comment"), ["write", "x", ""])
        XCTAssertEqual(try splitShellWords("# only a comment"), [])
        XCTAssertEqual(try splitShellWords("a#b"), ["a#b"], "# inside a word is not a comment")
        XCTAssertThrowsError(try splitShellWords("write 'open")) { error in
            XCTAssertEqual((error as? UsageError)?.message, "unterminated ' quote in \"write 'open\"")
        }
        XCTAssertThrowsError(try splitShellWords("write \"open"))
        XCTAssertThrowsError(try splitShellWords("write x\\"))
    }

    // MARK: a real terminal

    /// Runs `mirror shell` on the peer in a real pseudo-terminal through `steps` (pty-drive.py's; each step bounded),
    /// with HOME and XDG_STATE_HOME under `home`; what the driver reports, the step that failed reported as a failure.
    func pty(_ steps: [JSONValue], home: String, target: String? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        let driver = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../LineEditorTests/pty-drive.py").standardizedFileURL.path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [driver, JSONValue.array(steps).text, MirrorProcess.executable.path, "shell", target ?? peer.target]
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        environment["XDG_STATE_HOME"] = home + "/state"
        environment["TERM"] = "xterm"
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let watchdog = ProcessWatchdog(process, "the pty driver of mirror shell")
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertNil(watchdog.end())
        let json = try parseJSON(String(decoding: data, as: UTF8.self))
        XCTAssertEqual(json["ok"], .bool(true), "step \(json["failed"]?.integer ?? -1) waited for \(json["waited"]?.string ?? "?"): \(json["transcript"]?.string ?? "")",
                       file: file, line: line)
        return json
    }

    func testANotificationOverAHalfTypedLineLeavesTheLineIntact() throws {
        // A scan steps scanState every 300 ms: notifications come while a line is being typed.
        let sim = try simulator(["--step-ms", "300"])
        defer { sim.stop() }
        let home = NSTemporaryDirectory() + "mirror-shell-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let prompt = "mirror \(sim.target)> "
        func step(_ kind: String, _ text: String, _ seconds: Double? = nil) -> JSONValue {
            .array([.string(kind), .string(text)] + (seconds.map { [.double($0)] } ?? []))
        }
        let json = try pty([
            step("expect", prompt, 10), step("send", "subscribe scanState\r"), step("expect", "subscribed to 0x000C", 5),
            step("expect", prompt, 5), step("send", "write cloudToken 41\r"), step("expect", prompt, 5),
            step("send", "write scannerAction 32\r"), step("expect", "wrote 1 byte to 0x0014", 5), step("expect", prompt, 5),
            step("send", "read 0x00"), step("expect", "read 0x00", 5),
            step("expect", "notification 0x000C scanState: ", 5), step("expect", prompt + "read 0x00", 5),
            step("send", "03\r"), step("expect", "0x0003 Device Name: \"mirror-sim\"  [6d 69 72 72 6f 72 2d 73 69 6d]", 5),
            step("send", "quit\r"), .array([.string("exit"), .double(10)]),
        ], home: home, target: sim.target)
        XCTAssertEqual(json["status"]?.integer, 0)
    }

    func testTheHistorySurvivesARestart() throws {
        let home = NSTemporaryDirectory() + "mirror-shell-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let prompt = "mirror \(peer.target)> "
        _ = try pty([
            .array([.string("expect"), .string(prompt), .double(10)]), .array([.string("send"), .string("mtu\r")]),
            .array([.string("expect"), .string("client Rx MTU 517"), .double(5)]), .array([.string("expect"), .string(prompt), .double(5)]),
            .array([.string("send"), .string("quit\r")]), .array([.string("exit"), .double(10)]),
        ], home: home)
        // Up twice: "quit", then "mtu" from the first session (redrawn after the prompt's column), run again.
        let json = try pty([
            .array([.string("expect"), .string(prompt), .double(10)]), .array([.string("send"), .string("\u{1b}[A\u{1b}[A")]),
            .array([.string("expect"), .string("Gmtu"), .double(5)]), .array([.string("send"), .string("\r")]),
            .array([.string("expect"), .string("client Rx MTU 517"), .double(5)]), .array([.string("expect"), .string(prompt), .double(5)]),
            .array([.string("send"), .string("quit\r")]), .array([.string("exit"), .double(10)]),
        ], home: home)
        XCTAssertEqual(json["status"]?.integer, 0)
    }

    func testTabCompletesACommandANameAndAnOption() throws {
        let home = NSTemporaryDirectory() + "mirror-shell-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let prompt = "mirror \(peer.target)> "
        // "cloudToken" is the peer's User Description, discovered in the background after the connect.
        let json = try pty([
            .array([.string("expect"), .string(prompt), .double(10)]),
            .array([.string("pause"), .double(0.5)]),
            .array([.string("send"), .string("subsc\t")]),
            .array([.string("expect"), .string("subscribe "), .double(5)]),
            .array([.string("send"), .string("\u{3}")]),
            .array([.string("send"), .string("read cloudTo\t")]),
            .array([.string("expect"), .string("read cloudToken "), .double(5)]),
            .array([.string("send"), .string("--js\t")]),
            .array([.string("expect"), .string("read cloudToken --json "), .double(5)]),
            .array([.string("send"), .string("\r")]),
            .array([.string("expect"), .string("\"handle\": \(peer.handle("cloudToken"))"), .double(10)]),
            .array([.string("expect"), .string(prompt), .double(5)]),
            .array([.string("send"), .string("\u{4}")]),
            .array([.string("exit"), .double(10)]),
        ], home: home)
        XCTAssertEqual(json["status"]?.integer, 0, "Ctrl-D ends the shell cleanly")
    }

    /// The history's directory, already there with looser modes, is tightened to 0700 and the file to 0600.
    func testALooserHistoryDirectoryIsTightened() throws {
        let home = NSTemporaryDirectory() + "mirror-shell-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let state = home + "/state/mirror"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        XCTAssertTrue(FileManager.default.createFile(atPath: state + "/history", contents: Data("read 3\n".utf8), attributes: [.posixPermissions: 0o644]))
        defer { try? FileManager.default.removeItem(atPath: home) }
        let prompt = "mirror \(peer.target)> "
        _ = try pty([
            .array([.string("expect"), .string(prompt), .double(10)]),
            .array([.string("send"), .string("quit\r")]),
            .array([.string("exit"), .double(10)]),
        ], home: home)
        func mode(_ path: String) throws -> Int? { (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue }
        XCTAssertEqual(try mode(state), 0o700)
        XCTAssertEqual(try mode(state + "/history"), 0o600)
    }

    func testATerminalSessionReadsCancelsAListenAndQuits() throws {
        let home = NSTemporaryDirectory() + "mirror-shell-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let prompt = "mirror \(peer.target)> "
        let counter = peer.hexHandle("counter")
        // The peer notifies three values ("tick 1" to "tick 3") on each CCCD write: each listen sees its own three.
        let listen: [JSONValue] = [
            .array([.string("send"), .string("listen \(counter)\r")]),
            .array([.string("expect"), .string("subscribed to \(counter)"), .double(10)]),
            .array([.string("expect"), .string("notification \(counter): 03 74 69 63 6b 20 33  \".tick 3\""), .double(10)]),
            .array([.string("send"), .string("\u{3}")]),
            .array([.string("expect"), .string("received 3 notifications"), .double(10)]),
            .array([.string("expect"), .string(prompt), .double(5)]),
        ]
        let steps: [JSONValue] = [
            .array([.string("expect"), .string(prompt), .double(10)]),
            .array([.string("send"), .string("read 0x0003\r")]),
            .array([.string("expect"), .string("0x0003 Device Name: \"Scripted Peer\"  [53 63 72 69 70 74 65 64 20 50 65 65 72]"), .double(10)]),
            .array([.string("expect"), .string(prompt), .double(5)]),
        ] + listen + listen + [
            .array([.string("send"), .string("quit\r")]),
            .array([.string("exit"), .double(10)]),
        ]
        _ = try pty(steps, home: home)
        XCTAssertTrue(FileManager.default.fileExists(atPath: home + "/state/mirror/history"), "the history is kept under XDG_STATE_HOME")
        XCTAssertEqual(peer.counters.connections, 1)
    }
}
