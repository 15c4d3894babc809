// The one ATT server, byte for byte (Core Spec 5.4 Vol 3 Part F §3.4): the requests the simulator and the peers do
// not exercise, the per-connection CCCDs (Part G §3.3.3.3), indications one at a time, and the fault layer.
import ATTStack
import LinuxBluetooth
import LinkCore
import GATTClient
import GATTServer
import TestSupport
import XCTest

final class ATTServerTests: XCTestCase {
    /// 0x0001 GAP, 0x0002-0x0003 Device Name "dev", 0x0004 service 0xFFF0, 0x0005-0x0006 "a" (read, write, notify,
    /// indicate; CCCD 0x0007), 0x0008-0x0009 "b" (read only), 0x000A-0x000B "c" (write only).
    let database = AttributeDatabase { db in
        db.service(.genericAccess)
        db.characteristic(.deviceName, [.read], value: Array("dev".utf8))
        db.service(.bit16(0xFFF0))
        db.characteristic(.bit16(0xFFF1), [.read, .write, .notify, .indicate], value: [1, 2, 3, 4, 5], name: "a")
        db.characteristic(.bit16(0xFFF2), [.read], value: [9], name: "b")
        db.characteristic(.bit16(0xFFF3), [.write], name: "c")
    }

    func answer(_ server: inout ATTServer, _ session: inout ATTSession, _ request: String) -> String {
        switch server.answer(bytes: hex(request), session: &session) {
        case .none: return "none"
        case .now(let pdu): return show(pdu.bytes)
        case .later(let ms, let pdu): return "\(ms) ms: " + show(pdu.bytes)
        }
    }

    func testTheDatabaseBuilderLaysOutDeclarationsInHandleOrder() {
        XCTAssertEqual(database.attributes.count, 0x0B)
        XCTAssertEqual(database.attribute(0x0001)?.role, .service(end: 0x0003))
        XCTAssertEqual(database.attribute(0x0004)?.role, .service(end: 0x000B))
        XCTAssertEqual(database.attribute(0x0005)?.value, [0x3A, 0x06, 0x00, 0xF1, 0xFF])
        XCTAssertEqual(database.attribute(0x0007)?.role, .cccd(valueHandle: 0x0006))
        XCTAssertEqual(database.handle("aCCCD"), 0x0007)
        XCTAssertEqual(database.attribute(0x000B)?.permissions, [.write])
    }

    func testReadsOfEveryKindAndTheirErrors() {
        var server = ATTServer(database: database)
        var s = ATTSession()
        XCTAssertEqual(answer(&server, &s, "0e 06 00 09 00"), "0f 01 02 03 04 05 09")             // Read Multiple
        XCTAssertEqual(answer(&server, &s, "20 06 00 09 00"), "21 05 00 01 02 03 04 05 01 00 09") // Read Multiple Variable
        XCTAssertEqual(answer(&server, &s, "20 06 00 0b 00"), "01 20 0b 00 02")                   // Read Not Permitted
        XCTAssertEqual(answer(&server, &s, "0e 06 00 40 00"), "01 0e 40 00 01")                   // Invalid Handle
        XCTAssertEqual(answer(&server, &s, "0c 06 00 05 00"), "0d")                               // at the end: empty
        XCTAssertEqual(answer(&server, &s, "0c 06 00 06 00"), "01 0c 06 00 07")                   // past it: Invalid Offset
        XCTAssertEqual(answer(&server, &s, "08 01 00 ff ff 02 29"), "09 04 07 00 00 00")          // the CCCD by type
        XCTAssertEqual(answer(&server, &s, "10 01 00 ff ff 03 28"), "01 10 01 00 10")             // Unsupported Group Type
        XCTAssertEqual(answer(&server, &s, "3f 00"), "01 3f 00 00 06")                            // unknown request
        XCTAssertEqual(answer(&server, &s, "7f 00"), "none")                                      // unknown command
        XCTAssertEqual(answer(&server, &s, "0b 01"), "none")                                      // a response is not answered
    }

    func testWritesPrepareQueueAndExecute() {
        var server = ATTServer(database: database)
        server.prepareQueueLimit = 2
        var s = ATTSession()
        XCTAssertEqual(answer(&server, &s, "12 09 00 01"), "01 12 09 00 03")                      // Write Not Permitted
        XCTAssertEqual(answer(&server, &s, "12 0b 00 07 07"), "13")
        XCTAssertEqual(server.database.attribute(0x000B)?.value, [7, 7])
        XCTAssertEqual(answer(&server, &s, "52 09 00 01"), "none")                                // a command: never an error
        XCTAssertEqual(answer(&server, &s, "16 06 00 00 00 aa"), "17 06 00 00 00 aa")
        XCTAssertEqual(answer(&server, &s, "16 06 00 01 00 bb"), "17 06 00 01 00 bb")
        XCTAssertEqual(answer(&server, &s, "16 06 00 02 00 cc"), "01 16 06 00 09")                // Prepare Queue Full
        XCTAssertEqual(answer(&server, &s, "18 01"), "19")
        // The executed octets from offset 0 go over the stored value; its tail stays (Vol 3 Part F §3.4.6.3).
        XCTAssertEqual(server.database.attribute(0x0006)?.value, [0xAA, 0xBB, 3, 4, 5])
        XCTAssertEqual(answer(&server, &s, "16 06 00 00 00 01"), "17 06 00 00 00 01")
        XCTAssertEqual(answer(&server, &s, "18 00"), "19")                                        // cancelled
        XCTAssertEqual(server.database.attribute(0x0006)?.value, [0xAA, 0xBB, 3, 4, 5])
        // A part at an offset inside the value goes over it there (§3.4.6.3): BlueZ's gatt-db writes it the same way.
        XCTAssertEqual(answer(&server, &s, "16 06 00 03 00 01"), "17 06 00 03 00 01")
        XCTAssertEqual(answer(&server, &s, "16 06 00 04 00 02"), "17 06 00 04 00 02")
        XCTAssertEqual(answer(&server, &s, "18 01"), "19")
        XCTAssertEqual(server.database.attribute(0x0006)?.value, [0xAA, 0xBB, 3, 1, 2])
        // At the value's end it appends; past it (here, or past what the earlier parts made) is Invalid Offset.
        XCTAssertEqual(answer(&server, &s, "16 06 00 05 00 06"), "17 06 00 05 00 06")
        XCTAssertEqual(answer(&server, &s, "18 01"), "19")
        XCTAssertEqual(server.database.attribute(0x0006)?.value, [0xAA, 0xBB, 3, 1, 2, 6])
        XCTAssertEqual(answer(&server, &s, "16 06 00 07 00 01"), "17 06 00 07 00 01")
        XCTAssertEqual(answer(&server, &s, "18 01"), "01 18 06 00 07")
        XCTAssertEqual(answer(&server, &s, "16 06 00 00 00 01"), "17 06 00 00 00 01")
        XCTAssertEqual(answer(&server, &s, "16 06 00 02 00 02"), "17 06 00 02 00 02")
        XCTAssertEqual(answer(&server, &s, "18 01"), "01 18 06 00 07")
        XCTAssertEqual(server.database.attribute(0x0006)?.value, [0xAA, 0xBB, 3, 1, 2, 6], "nothing written")
    }

    func testCCCDsAreKeptPerConnectionAndHandlersSeeEveryWrite() {
        var server = ATTServer(database: database)
        var one = ATTSession(), two = ATTSession()
        XCTAssertEqual(answer(&server, &one, "12 07 00 01"), "01 12 07 00 0d")                    // a CCCD takes 2 bytes
        XCTAssertEqual(answer(&server, &one, "12 07 00 02 00"), "13")
        XCTAssertTrue(one.subscribed(0x0006, indications: true))
        XCTAssertEqual(answer(&server, &one, "0a 07 00"), "0b 02 00")
        XCTAssertEqual(answer(&server, &two, "0a 07 00"), "0b 00 00")
        var seen: [ATTOpcode] = []
        let reply = server.answer(bytes: hex("12 06 00 01"), session: &one, read: { _ in .stored }) { w in
            seen.append(w.opcode)
            return .accepted(responseAfterMilliseconds: 40)
        }
        XCTAssertEqual(reply, .later(milliseconds: 40, .writeResponse))
        XCTAssertEqual(seen, [.writeRequest])
        XCTAssertEqual(server.database.attribute(0x0006)?.value, [1, 2, 3, 4, 5], "accepted by the handler: not stored")
    }

    func testTheHostSendsOneIndicationAtATimeAndItsFaultLayerDropsDelaysAndCloses() throws {
        var hooks = GATTServerHost.Hooks()
        hooks.inbound = { bytes, _ in
            switch bytes.first {
            case 0x0E: return .drop
            case 0x20: return .reply([0x21])
            case 0x0C: return .delay(milliseconds: 50)
            case 0x04: return .close(reason: "fault: close")
            default: return .serve
            }
        }
        let host = GATTServerHost(database: database, serverRxMTU: 23, hooks: hooks)
        let peer = ScriptedPeer(unscripted: "server-test")
        let connection = host.attach(peer)
        XCTAssertEqual(show(peer.request(hex("12 07 00 02 00"))), "13")
        connection.indicate(handle: 0x0006, value: [1])
        connection.indicate(handle: 0x0006, value: [2])
        XCTAssertEqual(show(peer.next()), "1d 06 00 01")
        XCTAssertNil(peer.next(timeout: 0.1), "the second waits for the first one's confirmation")
        peer.inject(hex("1e"))
        XCTAssertEqual(show(peer.next()), "1d 06 00 02")
        XCTAssertNil(peer.request(hex("0e 06 00 09 00"), timeout: 0.1), "dropped")
        XCTAssertEqual(show(peer.request(hex("20 06 00 09 00"))), "21")
        XCTAssertEqual(show(peer.request(hex("0c 06 00 01 00"))), "0d 02 03 04 05")
        host.notifySubscribers(handle: 0x0006, value: [7])
        XCTAssertNil(peer.next(timeout: 0.1), "indications enabled, not notifications")
        XCTAssertNil(peer.request(hex("04 01 00 ff ff")))
        XCTAssertEqual(peer.closeReason, "fault: close")
    }
}
