import TestSupport
import Foundation
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

/// btsnoop files that a real decoder (Debian's tshark) reads back as the ATT PDUs that crossed the bearer.
final class BTSnoopTests: XCTestCase {
    private func tshark(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/tshark")
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let watchdog = ProcessWatchdog(p, "tshark")
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertNil(watchdog.end())
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }

    func testHeaderAndRecordLayout() throws {
        let path = FileManager.default.temporaryDirectory.path + "/snoop-layout-\(getpid()).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let w = try BTSnoopWriter(path: path)
        let idx = w.addIndex(label: "test", address: BluetoothAddress(bytes: [0, 0xAA, 1, 1, 0, 1])!)
        XCTAssertEqual(idx, 0)
        [UInt8]([0x0A, 0x03, 0x00]).withUnsafeBytes { w.write(index: idx, direction: .sent, pdu: $0, timestamp: 1_000_000) }
        w.close()
        XCTAssertNil(w.failure)
        let d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        XCTAssertEqual(Array(d[0..<8]), Array("btsnoop".utf8) + [0])
        XCTAssertEqual(Array(d[8..<16]), [0, 0, 0, 1, 0, 0, 0x07, 0xD1]) // version 1, datalink 2001
        // First record: new index, 16 bytes, flags = index 0 << 16 | opcode 0; bdaddr little-endian.
        XCTAssertEqual(Array(d[16..<28]), [0, 0, 0, 16, 0, 0, 0, 16, 0, 0, 0, 0])
        XCTAssertEqual(Array(d[40..<56]), [0, 0, 1, 0, 1, 1, 0xAA, 0] + Array("att0".utf8) + [0, 0, 0, 0])
        // Last record: ACL TX (opcode 4), 11 bytes: handle 0x0000 with PB 10 (0x2000), ACL length 7, L2CAP length 3, CID 4, PDU.
        let last = Array(d[(d.count - 24 - 11)...])
        XCTAssertEqual(Array(last[0..<12]), [0, 0, 0, 11, 0, 0, 0, 11, 0, 0, 0, 4])
        let ts = last[16..<24].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        XCTAssertEqual(ts, 1_000_000 + 0x00DC_DDB3_0F2F_8000)
        XCTAssertEqual(Array(last[24...]), [0x00, 0x20, 7, 0, 3, 0, 4, 0, 0x0A, 0x03, 0x00])
    }

    func testTsharkDecodesTheATTOpcodesAndHandlesABearerCarried() throws {
        let path = FileManager.default.temporaryDirectory.path + "/snoop-\(getpid()).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try BTSnoopWriter(path: path)
        let (client, server) = try ATTBearer.pair(labels: ("client", "server"))
        client.capture(into: writer)
        let serverSink = RecordingSink(onPDU: { pdu in
            // Answer a Read Request (0x0A) with a Read Response, a Write Request (0x12) with a Write Response.
            switch pdu.first {
            case 0x0A: _ = try? send(server, [0x0B, 0x42, 0x61])
            case 0x12: _ = try? send(server, [0x13])
            default: break
            }
        })
        server.start(serverSink)
        let clientSink = RecordingSink()
        client.start(clientSink)
        // Raw ATT PDUs: Exchange MTU Request, Read Request 0x0003, Write Request 0x0010, Write Command 0x0025,
        // Handle Value Notification 0x002A (sent by "the peer" here only to cover the received direction).
        XCTAssertEqual(try send(client, [0x02, 0x05, 0x02]), .sent)
        XCTAssertEqual(try send(client, [0x0A, 0x03, 0x00]), .sent)
        clientSink.waitForPDUs(1)
        XCTAssertEqual(try send(client, [0x12, 0x10, 0x00, 0x01, 0x00]), .sent)
        clientSink.waitForPDUs(2)
        XCTAssertEqual(try send(client, [0x52, 0x25, 0x00, 0xFF]), .sent)
        XCTAssertEqual(try send(server, [0x1B, 0x2A, 0x00, 0x07]), .sent)
        clientSink.waitForPDUs(3)
        serverSink.waitForPDUs(4)
        client.close(reason: "capture done")
        clientSink.waitForClose()
        writer.close()
        XCTAssertNil(writer.failure)

        let r = try tshark(["-r", path, "-Y", "btatt", "-T", "fields", "-E", "separator=;",
                            "-e", "frame.number", "-e", "btatt.opcode", "-e", "btatt.handle"])
        XCTAssertEqual(r.status, 0, r.err)
        let rows = r.out.split(separator: "\n").map { $0.split(separator: ";", omittingEmptySubsequences: false).dropFirst().map(String.init) }
        XCTAssertEqual(rows, [
            ["0x02", ""],          // Exchange MTU Request
            ["0x0a", "0x0003"],    // Read Request
            ["0x0b", "0x0003"],    // Read Response (received; tshark pairs it with the request's handle)
            ["0x12", "0x0010"],    // Write Request
            ["0x13", "0x0010"],    // Write Response (received, paired likewise)
            ["0x52", "0x0025"],    // Write Command
            ["0x1b", "0x002a"],    // Notification (received)
        ], r.out)
        // Direction: monitor opcode 4 is ACL TX (sent), 5 is ACL RX (received).
        let dir = try tshark(["-r", path, "-Y", "btatt", "-T", "fields", "-e", "hci_mon.opcode"])
        XCTAssertEqual(dir.out.split(separator: "\n").map(String.init), ["4", "4", "5", "4", "5", "4", "5"])

        // A socketpair has no radio: the link opens, before its first ACL packet, with a synthesized LE Connection
        // Complete (Vol 4 Part E §7.7.65.1) on the handle its ACL packets carry (LinkOpening.noRadio), which btmon
        // needs to decode them.
        let opening = try tshark(["-r", path, "-Y", "bthci_evt || bthci_acl", "-T", "fields", "-E", "separator=;",
                                  "-e", "bthci_evt.le_meta_subevent", "-e", "bthci_evt.status", "-e", "bthci_evt.connection_handle",
                                  "-e", "bthci_evt.role", "-e", "bthci_evt.le_peer_address_type", "-e", "bthci_evt.bd_addr",
                                  "-e", "bthci_evt.le_con_interval", "-e", "bthci_evt.le_con_latency",
                                  "-e", "bthci_evt.le_supv_timeout", "-e", "bthci_acl.chandle"])
        let rowsWithEvent = opening.out.split(separator: "\n").map(String.init)
        XCTAssertEqual(rowsWithEvent.first, "0x01;0x00;0x0000;0x00;0x01;c2:00:00:00:00:01;24;0;42;", opening.out)
        XCTAssertEqual(Set(rowsWithEvent.dropFirst()), [";;;;;;;;;0x0000"], "every ACL packet on the event's handle")
        let reading = try CaptureReading.read(path)
        XCTAssertEqual(reading.problems, [])
        XCTAssertEqual(reading.btmonATTOpcodes, ["0x02", "0x0a", "0x0b", "0x12", "0x13", "0x52", "0x1b"], reading.btmon.stdout)
    }

    /// An Enhanced ATT bearer's PDUs on its ECRED channel's CID, after the synthesized channel opening (SPSM 0x0027)
    /// that lets tshark decode the dynamic CID as ATT (Debian's 4.0 knows no EATT PSM: `-d` names it).
    func testTsharkDecodesAnEnhancedBearersPDUsOnItsChannelsCID() throws {
        let path = FileManager.default.temporaryDirectory.path + "/snoop-eatt-\(getpid()).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let w = try BTSnoopWriter(path: path)
        let idx = w.addIndex(label: "link", address: BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6])!)
        func pdu(_ bytes: [UInt8], _ d: BTSnoopWriter.Direction, _ channel: (local: UInt16, remote: UInt16)?) {
            bytes.withUnsafeBytes { b in
                if let channel { w.write(index: idx, direction: d, pdu: b, channel: channel) } else { w.write(index: idx, direction: d, pdu: b) }
            }
        }
        pdu([0x0A, 0x03, 0x00], .sent, nil)                                   // CID 4 as before
        pdu([0x0B, 0x61], .received, nil)                                    // its Read Response
        w.openCreditBasedChannel(index: idx, channel: (local: 0x0041, remote: 0x0045), mtu: 247)
        w.openCreditBasedChannel(index: idx, channel: (local: 0x0042, remote: 0x0046), mtu: 100)
        pdu([0x12, 0x10, 0x00, 0x01], .sent, (0x0041, 0x0045))               // Write Request on bearer 1
        pdu([0x0A, 0x04, 0x00], .sent, (0x0042, 0x0046))                     // Read Request on bearer 2
        pdu([0x13], .received, (0x0041, 0x0045))                             // bearer 1's Write Response
        pdu([0x0B, 0x42], .received, (0x0042, 0x0046))                       // bearer 2's Read Response
        w.close()
        XCTAssertNil(w.failure)
        let r = try tshark(["-r", path, "-d", "btl2cap.psm==0x0027,btatt", "-Y", "btl2cap", "-T", "fields", "-E", "separator=;",
                            "-e", "hci_mon.opcode", "-e", "btl2cap.cid", "-e", "btl2cap.cmd_code", "-e", "btl2cap.le_psm",
                            "-e", "btl2cap.psm", "-e", "btatt.opcode", "-e", "btatt.handle"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out.split(separator: "\n").map(String.init), [
            "4;0x0004;;;;0x0a;0x0003",              // CID 4
            "5;0x0004;;;;0x0b;0x0003",
            "4;0x0005;0x14;0x0027;0x0027;;",        // LE Credit Based Connection Request, SPSM 0x0027 (sent)
            "5;0x0005;0x15;;;;",                    // its Response (received)
            "4;0x0005;0x14;0x0027;0x0027;;",
            "5;0x0005;0x15;;;;",
            "4;0x0045;;;0x0027;0x12;0x0010",        // sent: the peer's CID
            "4;0x0046;;;0x0027;0x0a;0x0004",
            "5;0x0041;;;0x0027;0x13;0x0010",        // received: ours, paired with its request
            "5;0x0042;;;0x0027;0x0b;0x0004",
        ], r.out)
        XCTAssertEqual(try CaptureReading.read(path).problems, [])
    }

    func testTheLinksHCIEventsAndItsATTPDUsShareTheRealHandleInTshark() throws {
        let path = FileManager.default.temporaryDirectory.path + "/snoop-link-\(getpid()).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let w = try BTSnoopWriter(path: path)
        let idx = w.addIndex(label: "link", address: BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6])!)
        w.setConnectionHandle(0x0041, index: idx)
        let conn: [UInt8] = [0x04, 0x3E, 19, 0x01, 0x00, 0x41, 0x00, 0x00, 0x00, 6, 5, 4, 3, 2, 1, 0x18, 0x00, 0x00, 0x00, 0x48, 0x00, 0x00]
        let command = try HCICommand.leSetPHY(handle: 0x41, txPHYs: 2, rxPHYs: 2)
        let packets: [(HCILinkRecord.Kind, [UInt8])] = [
            (.event(HCIEvent.parse(conn)!), conn),
            (.command(command), [0x01, 0x32, 0x20, 7] + command.parameters),
            (.event(.commandStatus(opcode: 0x2032, status: 0)), [0x04, 0x0F, 4, 0x00, 0x01, 0x32, 0x20]),
            (.event(.lePHYUpdateComplete(status: 0, handle: 0x41, txPHY: 2, rxPHY: 2)), [0x04, 0x3E, 6, 0x0C, 0x00, 0x41, 0x00, 0x02, 0x02]),
        ]
        for (kind, packet) in packets { w.write(index: idx, hci: HCILinkRecord(kind: kind, packet: packet, timestampMicroseconds: 1_000_000)) }
        [UInt8]([0x52, 0x25, 0x00, 0xFF]).withUnsafeBytes { w.write(index: idx, direction: .sent, pdu: $0, timestamp: 1_000_001) }
        w.write(index: idx, hci: HCILinkRecord(kind: .event(.numberOfCompletedPackets([HCICompletedPackets(handle: 0x41, count: 1)])),
                                               packet: [0x04, 0x13, 5, 0x01, 0x41, 0x00, 0x01, 0x00], timestampMicroseconds: 1_000_002))
        w.write(index: idx, hci: HCILinkRecord(kind: .event(.disconnectionComplete(status: 0, handle: 0x41, reason: 0x13)),
                                               packet: [0x04, 0x05, 4, 0x00, 0x41, 0x00, 0x13], timestampMicroseconds: 1_000_003))
        w.close()
        XCTAssertNil(w.failure)
        let r = try tshark(["-r", path, "-Y", "bthci_evt || bthci_cmd || btatt", "-T", "fields", "-E", "separator=;",
                            "-e", "hci_mon.opcode", "-e", "bthci_evt.code", "-e", "bthci_evt.le_meta_subevent",
                            "-e", "bthci_cmd.opcode", "-e", "bthci_acl.chandle", "-e", "btatt.opcode", "-e", "bthci_evt.opcode"])
        XCTAssertEqual(r.status, 0, r.err)
        let rows = r.out.split(separator: "\n").map(String.init)
        XCTAssertEqual(rows, [
            "3;0x3e;0x01;;;;",          // LE Connection Complete
            "2;;;0x2032;;;",            // LE Set PHY
            "3;0x0f;;;;;0x2032",        // Command Status
            "3;0x3e;0x0c;;;;",          // LE PHY Update Complete
            "4;;;;0x0041;0x52;",        // the Write Command on the link's real handle
            "3;0x13;;;;;",              // Number Of Completed Packets
            "3;0x05;;;;;",              // Disconnection Complete
        ], r.out)
        let handles = try tshark(["-r", path, "-Y", "bthci_evt.connection_handle", "-T", "fields", "-e", "bthci_evt.connection_handle"])
        XCTAssertEqual(Set(handles.out.split(separator: "\n").map(String.init)), ["0x0041"], handles.out)
        XCTAssertEqual(try CaptureReading.read(path).problems, [])
    }
}
