// Every error form of the issue, produced by the built `mirror` against the scripted peer: the exact sentence,
// the JSON fields, and the exit status that tells them apart.
import TestSupport
import ATTStack
import XCTest
import MirrorCommandLine

final class ErrorFormTests: XCTestCase {
    var peer: GATTPeer!

    override func setUpWithError() throws {
        peer = try GATTPeer()
    }

    override func tearDown() {
        peer.close()
    }

    func restart(_ behaviour: GATTPeer.Behaviour) throws {
        peer.close()
        peer = try GATTPeer(behaviour: behaviour)
    }

    func testPeerRejectsAtTheApplicationLayer() throws {
        let token = String(repeating: "41", count: 41)
        let run = try MirrorProcess.run(["write", peer.target, peer.hexHandle("cloudToken"), token])
        XCTAssertEqual(run.status, 3)
        XCTAssertEqual(run.stdout, "")
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: ATT error 0x0D Invalid Attribute Value Length from the peer, on Write Request to handle \(peer.hexHandle("cloudToken")) (cloudToken): 41-byte value, within the 244-byte budget of MTU 247, so the peripheral rejected it at the application layer")

        let json = try MirrorProcess.run(["write", peer.target, peer.hexHandle("cloudToken"), token, "--json"])
        XCTAssertEqual(json.status, 3)
        let e = try json.json()["error"]
        XCTAssertEqual(e?["kind"], "att")
        XCTAssertEqual(e?["code"], 0x0D)
        XCTAssertEqual(e?["name"], "Invalid Attribute Value Length")
        XCTAssertEqual(e?["requestOpcode"], 0x12)
        XCTAssertEqual(e?["request"], "Write Request")
        XCTAssertEqual(e?["handle"], .int(Int(peer.handle("cloudToken"))))
        XCTAssertEqual(e?["handleName"], "cloudToken")
        XCTAssertEqual(e?["rejectedBy"], "peer")
        XCTAssertEqual(e?["valueLength"], 41)
        XCTAssertEqual(e?["budget"], 244)
        XCTAssertEqual(e?["mtu"], 247)
        XCTAssertEqual(e?["exitStatus"], 3)
    }

    func testLocalLimitIsNotSent() throws {
        let value = String(repeating: "00", count: 600)
        let before = peer.counters.writeRequests
        let run = try MirrorProcess.run(["write", peer.target, peer.hexHandle("sink"), value])
        XCTAssertEqual(run.status, 4)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: not sent: 600-byte value exceeds the 244-byte budget of MTU 247 (local limit)")
        XCTAssertEqual(peer.counters.writeRequests, before, "nothing reached the peer")

        let json = try MirrorProcess.run(["write", peer.target, peer.hexHandle("sink"), value, "--json"])
        XCTAssertEqual(json.status, 4)
        let e = try json.json()["error"]
        XCTAssertEqual(e?["kind"], "local")
        XCTAssertEqual(e?["rejectedBy"], "local")
        XCTAssertEqual(e?["valueLength"], 600)
        XCTAssertEqual(e?["budget"], 244)
        XCTAssertEqual(e?["mtu"], 247)
        XCTAssertEqual(e?["requestOpcode"], 0x12)

        // A long write has the 512-byte attribute limit as its budget.
        let long = try MirrorProcess.run(["write", peer.target, peer.hexHandle("sink"), value, "--long", "--json"])
        XCTAssertEqual(long.status, 4, long.stderr)
        XCTAssertEqual(try long.json()["error"]?["budget"], 512)
    }

    func testApplicationErrorShowsItsRawValue() throws {
        let run = try MirrorProcess.run(["write", peer.target, peer.hexHandle("appError"), "01", "--json"])
        XCTAssertEqual(run.status, 3)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: ATT error 0x85 application error (raw value 0x85, defined by the peripheral's application) from the peer, on Write Request to handle \(peer.hexHandle("appError")): 1-byte value, within the 244-byte budget of MTU 247")
        let e = try run.json()["error"]
        XCTAssertEqual(e?["code"], 0x85)
        XCTAssertEqual(e?["name"], "application error")
    }

    func testReadRefusedByThePeer() throws {
        let run = try MirrorProcess.run(["read", peer.target, peer.hexHandle("secret")])
        XCTAssertEqual(run.status, 3)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: ATT error 0x05 Insufficient Authentication from the peer, on Read Request to handle \(peer.hexHandle("secret"))")
    }

    func testReadByUUIDWithNoMatch() throws {
        let run = try MirrorProcess.run(["read", peer.target, "2a99"])
        XCTAssertEqual(run.status, 3)
        XCTAssertEqual(run.stderr.split(separator: "\n").first.map(String.init),
                       "mirror: ATT error 0x0A Attribute Not Found from the peer, on Read By Type Request to handle 0x0001 (no attribute of type 2a99)")
    }

    func testTimeout() throws {
        try restart(.init(silentOn: [ATTOpcode.writeRequest.rawValue]))
        let run = try MirrorProcess.run(["write", peer.target, peer.hexHandle("sink"), "01", "--timeout", "0.3", "--json"])
        XCTAssertEqual(run.status, 5, run.stderr)
        let e = try run.json()["error"]
        XCTAssertEqual(e?["kind"], "timeout")
        XCTAssertTrue(run.stderr.hasPrefix("mirror: timed out after "), run.stderr)
        XCTAssertTrue(run.stderr.contains("Write Response"), run.stderr)
    }

    func testConnectionFailures() throws {
        let missing = NSTemporaryDirectory() + "mirror-cli-nobody-\(getpid()).sock"
        let run = try MirrorProcess.run(["gatt", "unix:\(missing)", "--json"])
        XCTAssertEqual(run.status, 6)
        let e = try run.json()["error"]
        XCTAssertEqual(e?["kind"], "connection")
        XCTAssertEqual(e?["errnoName"], "ENOENT")
        XCTAssertEqual(e?["syscall"], "connect")
        XCTAssertTrue(run.stderr.contains("start the simulator"), run.stderr)

        try restart(.init(closeOn: [ATTOpcode.readRequest.rawValue]))
        let closed = try MirrorProcess.run(["read", peer.target, "3"])
        XCTAssertEqual(closed.status, 6, closed.stderr)
        XCTAssertTrue(closed.stderr.hasPrefix("mirror: disconnected during "), closed.stderr)
    }

    func testAFileThatCannotBeWrittenIsNotAConnectionFailure() throws {
        let run = try MirrorProcess.run(["read", peer.target, "3", "--btsnoop", "/nonexistent-dir/x.btsnoop", "--json"])
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertEqual(try run.json()["error"]?["kind"], "failure")
        XCTAssertEqual(try run.json()["error"]?["errnoName"], "ENOENT")
        XCTAssertTrue(run.stderr.hasPrefix("mirror: creating the btsnoop file /nonexistent-dir/x.btsnoop: open failed with ENOENT"), run.stderr)
    }

    func testProtocolViolation() throws {
        try restart(.init(garbageOn: [ATTOpcode.writeRequest.rawValue]))
        let run = try MirrorProcess.run(["write", peer.target, peer.hexHandle("sink"), "01", "--json"])
        XCTAssertEqual(run.status, 8, run.stderr)
        XCTAssertEqual(try run.json()["error"]?["kind"], "protocol")
    }

    func testDiscoverWithoutBluetoothSaysSo() throws {
        let run = try MirrorProcess.run(["discover", "--duration", "0.2", "--json"])
        // This machine has no Bluetooth in its kernel; a machine with an adapter and no capabilities says EPERM.
        XCTAssertEqual(run.status, 7, run.stderr)
        let e = try run.json()["error"]
        XCTAssertEqual(e?["kind"], "unsupported")
        let errnoName = e?["errnoName"].flatMap { if case .string(let s) = $0 { s } else { nil } } ?? ""
        let message = e?["message"].flatMap { if case .string(let s) = $0 { s } else { nil } } ?? ""
        XCTAssertTrue(["EAFNOSUPPORT", "EPERM", "EACCES"].contains(errnoName) || message.contains("cap_net_raw"), run.stdout)
    }
}
