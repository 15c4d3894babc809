// `mirror gatt`, `read`, `write`, `mtu`, `listen` against the scripted peer over a unix: socket: text and JSON.
import TestSupport
import ATTStack
import JSON
import LinkCore
import XCTest
import MirrorCommandLine

final class GATTCommandTests: XCTestCase {
    var peer: GATTPeer!

    override func setUpWithError() throws {
        peer = try GATTPeer()
    }

    override func tearDown() {
        peer.close()
    }

    func testGATTJSONHasTheDocumentedShape() throws {
        let run = try MirrorProcess.run(["gatt", peer.target, "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.json()
        XCTAssertEqual(json["mtu"], 247)
        guard case .array(let services)? = json["services"] else { return XCTFail("no services: \(run.stdout)") }
        XCTAssertEqual(services.count, 3)
        // Generic Access first, exactly the documented keys in order.
        guard case .object(let ga) = services[0] else { return XCTFail() }
        // Issue 37: "name" added last where the text names it (never a key renamed).
        XCTAssertEqual(ga.map(\.0), ["uuid", "start", "end", "primary", "characteristics", "name"])
        XCTAssertEqual(services[0]["name"], "Generic Access")
        XCTAssertEqual(services[0]["uuid"], "1800")
        XCTAssertEqual(services[0]["start"], 1)
        XCTAssertEqual(services[0]["end"], 5)
        XCTAssertEqual(services[0]["primary"], true)
        guard case .array(let chars)? = services[0]["characteristics"], case .object(let name) = chars[0] else { return XCTFail() }
        XCTAssertEqual(name.map(\.0), ["uuid", "handle", "valueHandle", "properties", "descriptors", "name"])
        XCTAssertEqual(chars[0]["name"], "Device Name")
        XCTAssertEqual(chars[0]["uuid"], "2a00")
        XCTAssertEqual(chars[0]["handle"], 2)
        XCTAssertEqual(chars[0]["valueHandle"], .int(Int(peer.handle("deviceName"))))
        XCTAssertEqual(chars[0]["properties"], ["read", "write"])
        XCTAssertEqual(chars[0]["descriptors"], [])
        // The secondary battery service, reached through the include.
        XCTAssertEqual(services[1]["uuid"], "180f")
        XCTAssertEqual(services[1]["primary"], false)
        guard case .array(let battery)? = services[1]["characteristics"] else { return XCTFail() }
        XCTAssertEqual(battery[0]["properties"], ["read", "notify"])
        XCTAssertEqual(battery[0]["descriptors"], [.object([("uuid", "2902"), ("handle", .int(Int(peer.handle("batteryCCCD")))),
                                                                ("name", "Client Characteristic Configuration")])])
        // The 128-bit service: full lowercase UUID, and its include.
        XCTAssertEqual(services[2]["uuid"], "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
        XCTAssertEqual(services[2]["includes"]?.compact, #"[{"handle":11,"start":6,"end":9,"uuid":"180f","name":"Battery"}]"#)
    }

    func testGATTTextWithReadShowsValuesNamesAndErrors() throws {
        let run = try MirrorProcess.run(["gatt", peer.target, "--read"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "MTU 247")
        XCTAssertTrue(lines.contains("Primary service 1800 Generic Access  handles 0x0001-0x0005"), run.stdout)
        XCTAssertTrue(lines.contains("Secondary service 180f Battery  handles 0x0006-0x0009"), run.stdout)
        XCTAssertTrue(lines.contains("  Characteristic 2a00 Device Name  handle 0x0002  value handle 0x0003  [read, write]"), run.stdout)
        XCTAssertTrue(lines.contains("    value: \"Scripted Peer\"  [53 63 72 69 70 74 65 64 20 50 65 65 72]  (13 bytes)"), run.stdout)
        XCTAssertTrue(lines.contains("  Include 0x000B: service 180f Battery  handles 0x0006-0x0009"), run.stdout)
        XCTAssertTrue(lines.contains("    Descriptor 2902 Client Characteristic Configuration  handle \(peer.hexHandle("batteryCCCD"))"), run.stdout)
        let secret = peer.hexHandle("secret")
        XCTAssertTrue(lines.contains("    value: (not read: ATT error 0x05 Insufficient Authentication from the peer, on Read Request to handle \(secret))"), run.stdout)
        // The 300-byte value was read in full (Read Request + Read Blob).
        XCTAssertTrue(run.stdout.contains("(300 bytes)"), run.stdout)
    }

    func testGATTReadJSONCarriesValuesAndReadErrors() throws {
        let run = try MirrorProcess.run(["gatt", peer.target, "--read", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        guard case .array(let services)? = try run.json()["services"] else { return XCTFail() }
        XCTAssertEqual(services[0]["characteristics"]?[0]?["text"], "Scripted Peer")
        XCTAssertEqual(services[0]["characteristics"]?[0]?["value"], .string(ATTHex.string(Array("Scripted Peer".utf8))))
        guard case .array(let custom)? = services[2]["characteristics"] else { return XCTFail() }
        let secret = custom.first { $0["valueHandle"] == .int(Int(peer.handle("secret"))) }
        XCTAssertEqual(secret?["readError"]?["code"], 5)
        XCTAssertEqual(secret?["readError"]?["rejectedBy"], "peer")
    }

    func testReadByHandleAndByUUID() throws {
        let run = try MirrorProcess.run(["read", peer.target, peer.hexHandle("deviceName")])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "\(peer.hexHandle("deviceName")): 53 63 72 69 70 74 65 64 20 50 65 65 72  \"Scripted Peer\"  (13 bytes)\n")
        let long = try MirrorProcess.run(["read", peer.target, String(peer.handle("long")), "--json", "--mtu", "23"])
        XCTAssertEqual(long.status, 0, long.stderr)
        let json = try long.json()
        XCTAssertEqual(json["length"], 300)
        XCTAssertEqual(json["value"], .string(ATTHex.string((0..<300).map { UInt8($0 & 0xFF) })))
        let byUUID = try MirrorProcess.run(["read", peer.target, "2a00", "--json"])
        XCTAssertEqual(byUUID.status, 0, byUUID.stderr)
        XCTAssertEqual(try byUUID.json().compact,
                       #"{"values":[{"handle":3,"value":"5363726970746564205065657","text":"Scripted Peer","length":13,"decoded":"\"Scripted Peer\"","name":"Device Name"}]}"#
                           .replacingOccurrences(of: "5363726970746564205065657", with: ATTHex.string(Array("Scripted Peer".utf8))))
    }

    func testWriteRequestCommandLongAndReliable() throws {
        let sink = peer.hexHandle("sink")
        var run = try MirrorProcess.run(["write", peer.target, sink, "0102ff"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "wrote 3 bytes to \(sink) (Write Request, confirmed)\n")
        XCTAssertEqual(peer.value("sink"), [1, 2, 0xFF])
        run = try MirrorProcess.run(["write", peer.target, sink, "aa:bb", "--no-response"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "wrote 2 bytes to \(sink) (Write Command, not confirmed)\n")
        let long = (0..<400).map { UInt8($0 % 251) }
        run = try MirrorProcess.run(["write", peer.target, sink, ATTHex.string(long), "--long", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try run.json().compact, #"{"handle":\#(peer.handle("sink")),"length":400,"mode":"long","mtu":247,"confirmed":true}"#)
        XCTAssertEqual(peer.value("sink"), long)
        let reliable = Array(long.reversed())
        run = try MirrorProcess.run(["write", peer.target, sink, ATTHex.string(reliable), "--reliable"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(peer.value("sink"), reliable)
    }

    func testMTU() throws {
        var run = try MirrorProcess.run(["mtu", peer.target, "--mtu", "100"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "client Rx MTU 100, server Rx MTU 247: MTU 100\nbudgets: write/notify 97 bytes, prepare write part 95, read blob part 99\n")
        run = try MirrorProcess.run(["mtu", peer.target, "--json"])
        // The keys it always had, exactly, then the link object (over unix: no radio link, each value says so).
        guard case .object(var fields) = try run.json() else { return XCTFail(run.stdout) }
        let link = fields.last
        XCTAssertEqual(link?.0, "link")
        fields.removeLast()
        XCTAssertEqual(JSONValue.object(fields).compact,
                       #"{"clientRxMTU":517,"serverRxMTU":247,"mtu":247,"writeBudget":244,"prepareWriteBudget":242,"readBlobBudget":246}"#)
        XCTAssertEqual(link?.1["attMTU"]?["value"], 247)
        XCTAssertEqual(link?.1["attMTU"]?["source"], "Exchange MTU")
        XCTAssertEqual(link?.1["intervalMs"]?["unknown"]?.string, "not an LE link (\(peer.target) has no radio)")
        XCTAssertEqual(link?.1["requests"], .array([]))
    }

    func testMTUNotSupportedStaysAt23() throws {
        peer.close()
        peer = try GATTPeer(behaviour: .init(mtuNotSupported: true))
        let run = try MirrorProcess.run(["mtu", peer.target, "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try run.json()["serverRxMTU"], .null)
        XCTAssertEqual(try run.json()["mtu"], 23)
    }

    func testListenPrintsNotificationsAndIndications() throws {
        let counter = peer.hexHandle("counter")
        var run = try MirrorProcess.run(["listen", peer.target, counter, "--count", "3"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 3, run.stdout)
        for (i, line) in lines.enumerated() {
            // "22:41:07.123  notification 0x0017: 01 74 69 63 6b 20 31  ".tick 1"  (7 bytes)"
            XCTAssertTrue(line.contains("  notification \(counter): "), String(line))
            XCTAssertTrue(line.hasSuffix("tick \(i + 1)\"  (7 bytes)"), String(line))
            XCTAssertEqual(line.split(separator: " ")[0].count, "00:00:00.000".count)
        }
        XCTAssertTrue(run.stderr.contains("subscribed to \(counter) 6e400007-b5a3-f393-e0a9-e50e24dcca9e (notifications), current value: 00"), run.stderr)
        run = try MirrorProcess.run(["listen", peer.target, counter, "--count", "3", "--indicate", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let objects = try run.jsonLines()
        XCTAssertEqual(objects.first?["event"], "subscribed", "the subscribed event first: \(run.stdout)")
        let events = Array(objects.dropFirst().dropLast())  // the last line: {"received", "dropped"}
        XCTAssertEqual(events.count, 3)
        XCTAssertEqual(events.map { $0["kind"] }, ["indication", "indication", "indication"])
        XCTAssertEqual(events.map { $0["text"] }, [".tick 1", ".tick 2", ".tick 3"])
        if let t = events.first?["time"]?.number { XCTAssertEqual(t, Date().timeIntervalSince1970, accuracy: 60) } else { XCTFail("time") }
        XCTAssertEqual(peer.counters.confirmations, 3)
    }

    func testListenEndsWithTheConnectionErrorAsOneMoreJSONLine() throws {
        peer.close()
        peer = try GATTPeer(behaviour: .init(closeAfterNotifying: true))
        let run = try MirrorProcess.run(["listen", peer.target, peer.hexHandle("counter"), "--json"])
        XCTAssertEqual(run.status, 6, run.stderr)
        let lines = try run.jsonLines()
        XCTAssertEqual(lines.count, 4, run.stdout)
        // The link ended before the read after the CCCD write was answered: no subscribed event, what came is printed.
        XCTAssertEqual(lines.prefix(3).map { $0["kind"] }, ["notification", "notification", "notification"])
        XCTAssertEqual(lines.last?["error"]?["kind"], "connection")
    }

    func testListenToEverythingThatNotifies() throws {
        let run = try MirrorProcess.run(["listen", peer.target, "--count", "6", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let handles = Set(try run.jsonLines().compactMap { if case .int(let h)? = $0["handle"] { h } else { nil } })
        XCTAssertEqual(handles, [Int(peer.handle("battery")), Int(peer.handle("counter"))])
    }

    func testTraceAndBTSnoop() throws {
        let snoop = NSTemporaryDirectory() + "mirror-cli-\(getpid()).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: snoop) }
        let run = try MirrorProcess.run(["read", peer.target, "3", "--trace", "--btsnoop", snoop])
        XCTAssertEqual(run.status, 0, run.stderr)
        let trace = run.stderr.split(separator: "\n").map(String.init)
        XCTAssertTrue(trace.contains { $0.hasSuffix(" > Exchange MTU Request client Rx MTU 517") }, run.stderr)
        XCTAssertTrue(trace.contains { $0.hasSuffix(" < Exchange MTU Response server Rx MTU 247") }, run.stderr)
        XCTAssertTrue(trace.contains { $0.hasSuffix(" > Read Request handle 0x0003") }, run.stderr)
        XCTAssertTrue(trace.contains { $0.contains(" < Read Response [53 63 72") }, run.stderr)
        let data = try Data(contentsOf: URL(fileURLWithPath: snoop))
        XCTAssertEqual(Array(data.prefix(8)), Array("btsnoop\0".utf8))
        XCTAssertGreaterThan(data.count, 16 + 4 * 24)
        XCTAssertEqual(try assertReadersOpen(snoop).btmonATTOpcodes, ["0x02", "0x03", "0x0a", "0x0b"])
    }

    /// The runner's bound: `mirror listen` without --count runs until stopped, so a run with a 1 s limit is
    /// terminated and the test is told which command did not finish.
    func testARunThatDoesNotEndInTimeIsTerminatedAndNamed() throws {
        let started = Date()
        XCTAssertThrowsError(try MirrorProcess.run(["listen", peer.target, peer.hexHandle("counter")], timeout: 1)) { error in
            XCTAssertEqual("\(error)", "mirror listen \(peer.target) \(peer.hexHandle("counter")) did not finish in 1.0 s")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 7)
    }

    func testARunThatIgnoresTheTerminationIsWaitedForAtMostFiveSecondsMore() throws {
        // A shell that ignores SIGTERM outlives the 5 s given to a terminated tool (it closed its output at once).
        let script = "trap '' TERM; exec >/dev/null 2>&1; sleep 12"
        let started = Date()
        XCTAssertThrowsError(try ToolProcess.run(executable: URL(fileURLWithPath: "/bin/sh"), ["-c", script], timeout: 0.2)) { error in
            XCTAssertEqual("\(error)", "sh -c \(script) did not finish in 0.2 s")
        }
        // The run's 0.2 s, then the 5 s for the terminated tool, not the shell's 12 s.
        let took = Date().timeIntervalSince(started)
        XCTAssertGreaterThanOrEqual(took, 5, "the terminated tool was not waited for")
        XCTAssertLessThan(took, 11, "the wait for the terminated tool passed its 5 s")
    }

    func testListenEndsCleanlyOnCtrlC() throws {
        let process = Process()
        process.executableURL = MirrorProcess.executable
        process.arguments = ["listen", peer.target, peer.hexHandle("counter")]
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let watchdog = ProcessWatchdog(process, "mirror \(process.arguments?.first ?? "")")
        // A second signal, or one to a command that is not listening, ends the process at once with 128 + signal.
        defer { if process.isRunning { process.terminate() } }
        var seen = ""
        while seen.split(separator: "\n").count < 3 {
            let chunk = out.fileHandleForReading.availableData
            XCTAssertFalse(chunk.isEmpty, "listen ended early: \(seen)")
            if chunk.isEmpty { return }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        process.interrupt()
        if exited.wait(timeout: .now() + 10) == .timedOut {
            process.terminate()
            XCTFail("listen did not end on SIGINT")
        }
        process.waitUntilExit()
        XCTAssertNil(watchdog.end())
        XCTAssertEqual(process.terminationStatus, 0)
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(stderr.hasSuffix("received 3 notifications and indications\n"), stderr)
    }

    func testCtrlCEndsOtherCommandsWithTheSignalStatus() throws {
        peer.close()
        peer = try GATTPeer(behaviour: .init(silentOn: [0x0A]))
        let process = Process()
        process.executableURL = MirrorProcess.executable
        process.arguments = ["read", peer.target, "3", "--trace"]
        let err = Pipe()
        process.standardError = err
        process.standardOutput = Pipe()
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        let watchdog = ProcessWatchdog(process, "mirror \(process.arguments?.first ?? "")")
        // Wait until the Read Request went out (the trace says so), then interrupt the wait for its answer.
        var seen = ""
        while !seen.contains("> Read Request") {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { return XCTFail("read ended early: \(seen)") }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        process.interrupt()
        if exited.wait(timeout: .now() + 10) == .timedOut {
            process.terminate()
            XCTFail("read did not end on SIGINT")
        }
        process.waitUntilExit()
        XCTAssertNil(watchdog.end())
        XCTAssertEqual(process.terminationStatus, 128 + SIGINT)
    }
}
