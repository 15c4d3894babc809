// Every capture mirror writes opens in the two readers a user has, btmon -r (BlueZ 5.66) and tshark -r (issue 24,
// item 8): a unix: capture starts with a synthesized LE Connection Complete on the made-up handle 0x0000
// (BTSnoopWriter.LinkOpening). Before, btmon was killed by SIGSEGV at the first Read By Type Request for 0x2803.
import Foundation
import GATTPeer
import LinuxBluetooth
import LinkCore
@testable import MirrorCommandLine
import TestSupport
import XCTest

/// Fails the test unless btmon and tshark both read `path` and decode its ATT PDUs; returns what they made of it.
@discardableResult
func assertReadersOpen(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws -> CaptureReading {
    let reading = try CaptureReading.read(path)
    XCTAssertEqual(reading.problems, [], "btmon -r / tshark -r \(path)", file: file, line: line)
    return reading
}

final class CaptureReadersTests: XCTestCase {
    var sim: SimulatorProcess!
    var dir = ""

    override func setUpWithError() throws {
        sim = try SimulatorProcess(["--eatt", "yes"])
        dir = NSTemporaryDirectory() + "mirror-captures-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        sim.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// btmon's lines that say the capture's link opened: the synthesized event, marked as such by the note before it.
    func assertSynthesizedLink(_ reading: CaptureReading, count: Int = 1, file: StaticString = #filePath, line: UInt = #line) {
        let out = reading.btmon.stdout
        XCTAssertEqual(out.components(separatedBy: "      LE Connection Complete (0x01)\n").count - 1, count, out, file: file, line: line)
        XCTAssertEqual(out.components(separatedBy: "= Note: synthesized LE Connection Complete for handle 0x00").count - 1, count, out, file: file, line: line)
        // btmon 5.66 prints handle 0's connection record beside it: a free one, all zero (BTSnoopWriter.aclHandle).
        XCTAssertTrue(out.contains("        Handle: 0 Address: 00:00:00:00:00:00 (OUI 00-00-00)\n        Role: Central (0x00)\n"
                                   + "        Peer address type: Random (0x01)\n        Peer address: C2:00:00:00:00:01 (Static)\n"),
                      out, file: file, line: line)
    }

    func testOneShotReadAndGATTCapturesOpenInBtmonAndTshark() throws {
        let read = dir + "/read.btsnoop", gatt = dir + "/gatt.btsnoop"
        let r = try MirrorProcess.run(["read", sim.target, "scanState", "--btsnoop", read])
        XCTAssertEqual(r.status, 0, r.stderr)
        let g = try MirrorProcess.run(["gatt", sim.target, "--read", "--btsnoop", gatt])
        XCTAssertEqual(g.status, 0, g.stderr)
        for path in [read, gatt] {
            let reading = try assertReadersOpen(path)
            assertSynthesizedLink(reading)
            // Both decode every ATT PDU, in the same order (all on CID 4).
            XCTAssertEqual(reading.btmonATTOpcodes, reading.tsharkATT.map { $0[1] }, reading.btmon.stdout)
            XCTAssertEqual(Set(reading.tsharkATT.map { $0[0] }), ["0x0004"])
        }
        let discovery = try CaptureReading.read(gatt).btmon.stdout
        XCTAssertTrue(discovery.contains("      ATT: Read By Type Request (0x08) len 6\n        Handle range: 0x0001-0x"), discovery)
        XCTAssertTrue(discovery.contains("        Attribute type: Characteristic (0x2803)\n"), discovery)
        XCTAssertTrue(try CaptureReading.read(read).btmon.stdout.contains("ATT: Read Response (0x0b) len 1\n"))
    }

    /// The shell's btsnoop FILE from the middle of a connection, across a reconnect: each connection's index opens
    /// with its own synthesized event.
    func testAShellCaptureAcrossAReconnectOpensInBtmonAndTshark() throws {
        let path = dir + "/shell.btsnoop"
        let run = try MirrorProcess.run(["shell", sim.target],
                                        input: "read scanState\nbtsnoop \(path)\ngatt\ndisconnect\nconnect\ngatt\nread scanState\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        let reading = try assertReadersOpen(path)
        assertSynthesizedLink(reading, count: 2)
        XCTAssertEqual(reading.btmonATTOpcodes, reading.tsharkATT.map { $0[1] }, reading.btmon.stdout)
        XCTAssertTrue(reading.btmon.stdout.contains("        Attribute type: Characteristic (0x2803)\n"), reading.btmon.stdout)
    }

    /// Three bearers against `mirror-sim --eatt yes`: CID 4 and two Enhanced ATT channels on the same link. btmon 5.66
    /// keeps one dynamic channel on handle 0 (BTSnoopWriter.aclHandle): it decodes CID 4's PDUs and one channel's.
    func testAnEnhancedATTCaptureOpensInBtmonAndTshark() throws {
        let path = dir + "/eatt.btsnoop"
        let run = try MirrorProcess.run(["gatt", sim.target, "--read", "--bearers", "3", "--btsnoop", path])
        XCTAssertEqual(run.status, 0, run.stderr)
        let reading = try assertReadersOpen(path)
        assertSynthesizedLink(reading)
        let byCID = Dictionary(grouping: reading.tsharkATT, by: { $0[0] }).mapValues { $0.map { $0[1] } }
        XCTAssertEqual(Set(byCID.keys), ["0x0004", "0x0041", "0x0042"], reading.tshark.stdout)
        let cid4 = byCID["0x0004"] ?? []
        XCTAssertTrue([cid4.count + (byCID["0x0041"]?.count ?? 0), cid4.count + (byCID["0x0042"]?.count ?? 0)]
                        .contains(reading.btmonATTOpcodes.count), "btmon: CID 4's ATT PDUs and one channel's: \(reading.btmon.stdout)")
        XCTAssertTrue(reading.btmon.stdout.contains("[PSM 39 mode LE Flow Control (0x80)] {chan 0}\n      ATT: Read Re"), reading.btmon.stdout)
    }

    /// An LE link's synthesized event (no CAP_NET_RAW, or the shell's btsnoop FILE after the connect) carries the
    /// kernel's handle and role and the monitor's values in the event's units (7.5 ms: 6 units of 1.25 ms; 2000 ms:
    /// 200 units of 10 ms); what nothing saw is Linux's default (30 ms, 0, 420 ms), the handle the made-up 0x0000.
    func testAnLELinksSynthesizedEventCarriesTheValuesSeenAndDefaultsForTheRest() throws {
        var link = LinkState(allUnknown: .unavailable("not read in this test"))
        link.handle = .known(0x0041, source: .socketOption("L2CAP_CONNINFO"))
        link.role = .known(.peripheral, source: .ioctl("HCIGETCONNINFO"))
        var events = LinkState(allUnknown: .unavailable("not seen in this test"))
        events.intervalMilliseconds = .known(7.5, source: .hciEvent("LE Connection Update Complete"))
        events.peripheralLatency = .known(4, source: .hciEvent("LE Connection Update Complete"))
        events.supervisionTimeoutMilliseconds = .known(2000, source: .hciEvent("LE Connection Update Complete"))
        let peer = BluetoothAddress(bytes: [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC])!
        let seen = PeerLink.linkOpening(peer: peer, type: .public, link: link, events: events, why: "seen")
        let unseen = PeerLink.linkOpening(peer: peer, type: .random, link: LinkState(allUnknown: .unavailable("none")),
                                         events: nil, why: "unseen")
        let path = dir + "/le.btsnoop"
        let writer = try BTSnoopWriter(path: path)
        for opening in [seen, unseen] {
            let index = writer.addIndex(label: opening.reason, address: peer)
            writer.openLink(index: index, opening)
            [UInt8]([0x02, 0x05, 0x02]).withUnsafeBytes { writer.write(index: index, direction: .sent, pdu: $0) }
        }
        writer.close()
        XCTAssertNil(writer.failure)
        let r = try ToolProcess.run(executable: URL(fileURLWithPath: "/usr/bin/tshark"),
                                    ["-r", path, "-Y", "bthci_evt || btatt", "-T", "fields", "-E", "separator=;",
                                     "-e", "bthci_evt.connection_handle", "-e", "bthci_evt.role", "-e", "bthci_evt.le_peer_address_type",
                                     "-e", "bthci_evt.bd_addr", "-e", "bthci_evt.le_con_interval", "-e", "bthci_evt.le_con_latency",
                                     "-e", "bthci_evt.le_supv_timeout", "-e", "bthci_acl.chandle"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout.split(separator: "\n").map(String.init), [
            "0x0041;0x01;0x00;12:34:56:78:9a:bc;6;4;200;", ";;;;;;;0x0041",
            "0x0000;0x00;0x01;12:34:56:78:9a:bc;24;0;42;", ";;;;;;;0x0000",
        ], r.stdout)
        let reading = try assertReadersOpen(path)
        XCTAssertEqual(reading.btmonATTOpcodes, ["0x02", "0x02"])
        // btmon cuts a note at 80 columns off a terminal.
        XCTAssertTrue(reading.btmon.stdout.contains("= Note: synthesized LE Connection Complete for handle 0x004.."), reading.btmon.stdout)
        XCTAssertTrue(reading.btmon.stdout.contains("Peer address: 12:34:56:78:9A:BC"), reading.btmon.stdout)
    }
}
