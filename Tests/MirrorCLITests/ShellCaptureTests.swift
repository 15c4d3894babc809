// `mirror shell`'s btsnoop FILE|off and trace on|off: a capture of the connection from the moment it is asked for,
// read back by Debian's tshark (as BTSnoopTests do), across a reconnect; the trace switched on and off in a session;
// the link's HCI records behind the same switches (LinkRecordSink: a unix: target has no link monitor to feed it).
import Foundation
import JSON
import GATTPeer
import LinuxBluetooth
import LinkCore
@testable import MirrorCommandLine
import TestSupport
import XCTest

extension ShellTests {
    /// The ATT PDUs of a btsnoop file as tshark decodes them: [adapter index, ATT opcode, handle] per PDU.
    func tsharkATT(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws -> [[String]] {
        let run = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/tshark"),
                                      ["-r", path, "-Y", "btatt", "-T", "fields", "-E", "separator=;",
                                       "-e", "hci_mon.adapter_id", "-e", "btatt.opcode", "-e", "btatt.handle"])
        XCTAssertEqual(run.status, 0, run.stderr, file: file, line: line)
        return run.stdout.split(separator: "\n")
            .map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
    }

    func testBTSnoopCapturesTheConnectionFromThenOnUntilOffAndAcrossAReconnect() throws {
        let dir = try scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let device = peer.hexHandle("deviceName"), sink = peer.hexHandle("sink")
        let first = dir + "/first.btsnoop", second = dir + "/second.btsnoop"
        let script = """
            read \(device)
            btsnoop \(first)
            read \(device)
            write \(sink) 41
            btsnoop off
            read \(device)
            btsnoop \(second)
            disconnect
            connect
            read \(device)
            btsnoop off
            btsnoop off

            """
        let run = try MirrorProcess.run(["shell", peer.target], input: script)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("> btsnoop \(first)\nbtsnoop: writing \(first) from now on\n"), run.stdout)
        XCTAssertTrue(run.stdout.contains("> btsnoop off\nbtsnoop: \(first) closed\n"), run.stdout)
        XCTAssertTrue(run.stdout.hasSuffix("> btsnoop off\nbtsnoop: off (no capture was being written)\n"), run.stdout)
        let d = String(format: "0x%04x", Int(peer.handle("deviceName"))), s = String(format: "0x%04x", Int(peer.handle("sink")))
        // Only what crossed between btsnoop FILE and btsnoop off: the second read and the write, nothing before or after.
        XCTAssertEqual(try tsharkATT(first), [["0", "0x0a", d], ["0", "0x0b", d], ["0", "0x12", s], ["0", "0x13", s]])
        // The capture outlives the connection: the next one is in the same file under an index of its own, from
        // its Exchange MTU on.
        XCTAssertEqual(try tsharkATT(second), [["1", "0x02", ""], ["1", "0x03", ""], ["1", "0x0a", d], ["1", "0x0b", d]])
        XCTAssertEqual(peer.counters.connections, 2)

        // The shell's --btsnoop is that capture from the start: a reconnect does not truncate it.
        let whole = dir + "/whole.btsnoop"
        let again = try MirrorProcess.run(["shell", peer.target, "--btsnoop", whole], input: "read \(device)\ndisconnect\nconnect\nread \(device)\n")
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(try tsharkATT(whole).map { $0.prefix(2) }.map(Array.init),
                       [["0", "0x02"], ["0", "0x03"], ["0", "0x0a"], ["0", "0x0b"], ["1", "0x02"], ["1", "0x03"], ["1", "0x0a"], ["1", "0x0b"]])
        for path in [first, second, whole] { try assertReadersOpen(path) }
    }

    func testBTSnoopErrorsAreTheOneShotOptionsErrors() throws {
        let bad = "/nonexistent-dir/x.btsnoop"
        let run = try MirrorProcess.run(["shell", peer.target, "--json", "--keep-going"], input: "btsnoop \(bad)\nbtsnoop ''\nbtsnoop\n")
        let oneShot = try MirrorProcess.run(["read", peer.target, "3", "--btsnoop", bad])
        XCTAssertEqual(run.status, oneShot.status, "the file's error status, as one-shot: \(run.stderr)")
        XCTAssertTrue(run.stderr.hasPrefix(oneShot.stderr), "\(run.stderr) against \(oneShot.stderr)")
        XCTAssertTrue(run.stderr.contains("mirror: btsnoop: empty file name\n"), run.stderr)
        XCTAssertTrue(run.stderr.contains("mirror: missing FILE|off (the capture file, or off)\n"), run.stderr)
        let errors = try run.jsonLines().filter { $0["error"] != nil }
        XCTAssertEqual(errors.map { $0["error"]?["exitStatus"] }, [.int(Int(oneShot.status)), 2, 2])
    }

    func testTraceOnAndOffInASession() throws {
        let device = peer.hexHandle("deviceName"), sink = peer.hexHandle("sink")
        let run = try MirrorProcess.run(["shell", peer.target], input: "read \(device)\ntrace on\nwrite \(sink) 4142\ntrace off\nread \(device)\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        let traced = run.stderr.split(separator: "\n").filter { $0.range(of: #"^\d\d:\d\d:\d\d\.\d{6} [<>] "#, options: .regularExpression) != nil }
        // In this order: the request's line before its response's (ObservedTransport's traceOrder).
        XCTAssertEqual(traced.map { String($0.dropFirst(16)) }, ["> Write Request handle \(sink) value [41 42]", "< Write Response"],
                       "only the PDUs between trace on and trace off: \(run.stderr)")
        XCTAssertEqual(traced.count, 2, run.stderr)
    }

    func testTheLinksHCIRecordsFollowTheTraceAndCaptureSwitches() throws {
        // The sink a link monitor feeds (an LE link; a unix: target has none): its lines follow trace on|off.
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]) }
        let console = Console(outFD: fds[1], errFD: fds[1])
        let records = LinkRecordSink(tracing: false) { console.err($0) }
        let event = HCILinkRecord(kind: .event(.disconnectionComplete(status: 0, handle: 0x0040, reason: 0x13)),
                                  packet: [0x04, 0x05, 0x04, 0x00, 0x40, 0x00, 0x13], timestampMicroseconds: 1_700_000_000_000_000)
        records.take(event)
        records.setTracing(true)
        records.take(event)
        records.setTracing(false)
        records.take(event)
        close(fds[1])
        let text = String(decoding: FileHandle(fileDescriptor: fds[0]).readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(text.split(separator: "\n").count, 1, "one line, while tracing: \(text)")
        XCTAssertTrue(text.contains("HCI < "), text)
    }
}
