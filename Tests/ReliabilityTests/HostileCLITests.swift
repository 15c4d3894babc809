// The built `mirror` against the built `hostile-peer`, both as subprocesses on a unix: socket: each hostile
// scenario ends the command with the right exit status and a message that names what went wrong.
import Foundation
import JSON
import TestSupport
import LinkCore
import XCTest

/// `hostile-peer SCENARIO unix:PATH ...` running in the background until `stop()`.
final class HostilePeerProcess {
    let path: String
    let tool: BackgroundTool
    var target: String { "unix:\(path)" }
    var process: Process { tool.process }

    init(_ scenario: String, _ extra: [String] = []) throws {
        path = freshSocketPath("cli-" + scenario)
        // It prints its "listening" line once the socket accepts: read up to that line, no sleeping.
        tool = try BackgroundTool("hostile-peer", [scenario, "unix:\(path)"] + extra, readyWhen: "listening on unix:\(path)")
    }

    /// `hostile-peer --fault RULE-ID unix:PATH ...`: the scenario that breaks that `mirror check` rule.
    init(fault rule: String, _ extra: [String] = []) throws {
        path = freshSocketPath("cli-" + rule)
        tool = try BackgroundTool("hostile-peer", ["--fault", rule, "unix:\(path)"] + extra, readyWhen: "listening on unix:\(path)")
    }

    func stop() { tool.stop() }
}

final class HostileCLITests: XCTestCase {
    /// Runs `mirror ARGS` against `hostile-peer SCENARIO` and checks the exit status and that stderr has `message`.
    func check(_ scenario: String, _ peerArgs: [String] = [], _ args: [String], status: Int32, message: String,
               within seconds: Double = 10, file: StaticString = #filePath, line: UInt = #line) throws {
        let peer = try HostilePeerProcess(scenario, peerArgs)
        defer { peer.stop() }
        let started = Date()
        let run = try ToolProcess.run("mirror", args.map { $0 == "TARGET" ? peer.target : $0 })
        let took = Date().timeIntervalSince(started)
        XCTAssertEqual(run.status, status, "\(scenario): mirror \(args.joined(separator: " ")): \(run.stderr)", file: file, line: line)
        XCTAssertTrue(run.stderr.contains(message), "\(scenario): expected \(message) in: \(run.stderr)", file: file, line: line)
        XCTAssertLessThan(took, seconds, "\(scenario): took \(took) s", file: file, line: line)
    }

    /// SIGTERM sent the moment the peer says it is listening (as every test here does) ends it: the signal stays
    /// blocked from its first line until its sigwait takes it, so none is lost and no run hangs.
    func testASIGTERMRightAfterTheListeningLineEndsThePeerEveryTime() throws {
        for i in 0..<20 {
            let peer = try HostilePeerProcess("silent")
            let ended = DispatchSemaphore(value: 0)
            peer.process.terminationHandler = { _ in ended.signal() }
            peer.process.terminate()
            if ended.wait(timeout: .now() + 10) == .timedOut {
                kill(peer.process.processIdentifier, SIGKILL)
                XCTFail("run \(i): hostile-peer did not end within 10 s of SIGTERM sent right after its listening line")
                return
            }
            XCTAssertEqual(peer.process.terminationReason, .exit, "run \(i)")
            XCTAssertEqual(peer.process.terminationStatus, 0, "run \(i)")
        }
    }

    func testWrongOpcodeIsAProtocolViolation() throws {
        try check("wrong-opcode", [], ["read", "TARGET", "0x0003"], status: 8,
                  message: "mirror: protocol violation by the peer: a 0x0D Read Blob Response while 0x0A Read Request is in flight")
    }

    func testErrorForAnotherRequestIsAProtocolViolation() throws {
        // --no-cache: discovery's first request, as before the GATT cache; with the cache the first is the
        // Database Hash's Read By Type, and the violation is caught there the same way.
        try check("error-for-other-request", [], ["gatt", "TARGET", "--no-cache"], status: 8,
                  message: "an Error Response for 0x0A Read Request while 0x10 Read By Group Type Request is in flight")
        try check("error-for-other-request", [], ["gatt", "TARGET"], status: 8,
                  message: "an Error Response for 0x0A Read Request while 0x08 Read By Type Request is in flight")
    }

    func testSilencePeerTimesOutNamingTheResponse() throws {
        try check("silent", [], ["read", "TARGET", "0x0003", "--timeout", "1"], status: 5,
                  message: "mirror: timed out after 1 s waiting for Exchange MTU Response")
    }

    func testALateResponseTimesOut() throws {
        try check("late-response", ["--delay-ms", "3000"], ["write", "TARGET", "0x000B", "0102", "--timeout", "1"], status: 5,
                  message: "mirror: timed out after 1 s waiting for Write Response on handle 0x000B")
    }

    func testClosingMidDiscoveryIsAConnectionError() throws {
        try check("close", ["--on", "0x08", "--nth", "2"], ["gatt", "TARGET", "--mtu", "23"], status: 6,
                  message: "disconnected during Read By Type Request")
        try check("close", ["--on", "0x08"], ["gatt", "TARGET"], status: 6, message: "the peer closed the connection")
    }

    func testAPDUOverTheReceiveBufferIsAConnectionError() throws {
        try check("over-buffer", [], ["read", "TARGET", "3"], status: 6,
                  message: "received a 2000-byte PDU, larger than the 1024-byte receive buffer")
    }

    func testAnEndlessLongReadIsAProtocolViolation() throws {
        try check("endless-blob", [], ["read", "TARGET", "0x0008", "--mtu", "23"], status: 8, message: "past the 512-byte maximum")
    }

    func testADifferentPrepareWriteEchoFailsAReliableWrite() throws {
        try check("prepare-echo-differs", [], ["write", "TARGET", "0x0008", String(repeating: "ab", count: 30), "--reliable", "--mtu", "23"],
                  status: 8, message: "the echo of a reliable write differs from what was sent")
    }

    func testHandlesThatRepeatEndDiscovery() throws {
        try check("handles-repeat", [], ["gatt", "TARGET", "--mtu", "23"], status: 8, message: "a handle going backwards or out of range")
    }

    func testMTUsOutOfRangeAreClamped() throws {
        let below = try HostilePeerProcess("mtu-below-23")
        defer { below.stop() }
        let r1 = try ToolProcess.run("mirror", ["read", below.target, "0x0008"])
        XCTAssertEqual(r1.status, 0, r1.stderr)
        XCTAssertTrue(r1.stdout.hasPrefix("0x0008: 00 01 02"), r1.stdout)
        let above = try HostilePeerProcess("mtu-above-517")
        defer { above.stop() }
        let r2 = try ToolProcess.run("mirror", ["gatt", above.target, "--json"])
        XCTAssertEqual(r2.status, 0, r2.stderr)
        XCTAssertTrue(r2.stdout.contains("\"mtu\": 517"), r2.stdout)
    }

    /// The JSON error object `mirror ... --json` printed on stdout.
    func jsonError(_ run: ToolRun, file: StaticString = #filePath, line: UInt = #line) -> JSONValue {
        guard let error = (try? parseJSON(run.stdout))?["error"], error.fields != nil else {
            XCTFail("no JSON error object on stdout: \(run.stdout)", file: file, line: line)
            return .object([])
        }
        return error
    }

    /// Runs `mirror bench TARGET ARGS --timeout 2 --json` against `hostile-peer SCENARIO` and checks that the bare
    /// loop's wait ends it: exit 5 after at least the 2 s bound, the sentence on stderr and the JSON fields naming
    /// `waitingFor`.
    func checkBareLoopTimeout(_ scenario: String, _ args: [String], waitingFor: String,
                              file: StaticString = #filePath, line: UInt = #line) throws {
        let peer = try HostilePeerProcess(scenario)
        defer { peer.stop() }
        let started = Date()
        let run = try ToolProcess.run("mirror", ["bench", peer.target] + args + ["--timeout", "2", "--json"], timeout: 30)
        let took = Date().timeIntervalSince(started)
        let message = "timed out after 2 s waiting for \(waitingFor)"
        XCTAssertEqual(run.status, 5, run.stderr, file: file, line: line)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init), "mirror: " + message, file: file, line: line)
        let error = jsonError(run, file: file, line: line)
        XCTAssertEqual(error["kind"]?.string, "timeout", file: file, line: line)
        XCTAssertEqual(error["message"]?.string, message, file: file, line: line)
        XCTAssertEqual(error["waitingFor"]?.string, waitingFor, file: file, line: line)
        XCTAssertEqual(error["seconds"]?.number, 2, file: file, line: line)
        XCTAssertEqual(error["exitStatus"]?.integer, 5, file: file, line: line)
        XCTAssertGreaterThanOrEqual(took, 2, "the bound is --timeout", file: file, line: line)
        XCTAssertLessThan(took, 15, file: file, line: line)
    }

    func testTheBenchsBareLoopTimesOutNamingTheResponseItWaitedFor() throws {
        // The GATT connection is answered; the bare loop's own connection is read but never answered, so its
        // Exchange MTU waits for a response until --timeout.
        try checkBareLoopTimeout("later-connections-silent",
                                 ["--handle", "0x000B", "--size", "2", "--count", "10", "--rounds", "1"],
                                 waitingFor: "a response in the bare loop")
    }

    func testTheBenchsBareLoopTimesOutNamingTheSocketThatTookNoMoreData() throws {
        // The bare loop's connection gets its Exchange MTU answered, then is never read: its Write Commands fill
        // the socket, and the loop waits for POLLOUT until --timeout.
        try checkBareLoopTimeout("later-connections-stop-reading",
                                 ["--handle", "0x000B", "--size", "200", "--mode", "without-response", "--warmup", "5000",
                                  "--count", "10", "--rounds", "1"],
                                 waitingFor: "the bare loop's socket to take more data")
    }

    func testListenDuringANotificationFloodStopsAtItsCount() throws {
        let peer = try HostilePeerProcess("notification-flood", ["--count", "200000"])
        defer { peer.stop() }
        let run = try ToolProcess.run("mirror", ["listen", peer.target, "0x0008", "--count", "500"], timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout.split(separator: "\n").count, 500)
        XCTAssertTrue(run.stderr.contains("received 500 notifications and indications"), run.stderr)
    }

    func testListenDuringAnIndicationStormStopsAtItsCount() throws {
        let peer = try HostilePeerProcess("indication-storm", ["--count", "20000"])
        defer { peer.stop() }
        let run = try ToolProcess.run("mirror", ["listen", peer.target, "0x0008", "--indicate", "--count", "100"], timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout.split(separator: "\n").filter { $0.contains("indication") }.count, 100)
    }
}
