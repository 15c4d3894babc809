// The SMP codes and Pairing Failed reasons against the Core Spec's tables (Vol 3 Part H Table 3.4, Table 3.7), a
// Pairing Failed PDU read from an ACL packet (as btmon decoded the VM's wrong-passkey pairing), and the watch.
import LinkCore
@testable import LinuxBluetooth
import CBlueZSocket
import Dispatch
import XCTest

final class SMPTests: XCTestCase {
    func testTheCommandCodesAreTable3_4() {
        let table: [UInt8: String] = [
            0x01: "Pairing Request", 0x02: "Pairing Response", 0x03: "Pairing Confirm", 0x04: "Pairing Random",
            0x05: "Pairing Failed", 0x06: "Encryption Information", 0x07: "Central Identification",
            0x08: "Identity Information", 0x09: "Identity Address Information", 0x0A: "Signing Information",
            0x0B: "Security Request", 0x0C: "Pairing Public Key", 0x0D: "Pairing DHKey Check",
            0x0E: "Pairing Keypress Notification",
        ]
        for code in UInt8.min...UInt8.max { XCTAssertEqual(SMP.commandName(code), table[code], "code \(code)") }
    }

    func testThePairingFailedReasonsAreTable3_7() {
        let table: [UInt8: String] = [
            0x01: "Passkey Entry Failed", 0x02: "OOB Not Available", 0x03: "Authentication Requirements",
            0x04: "Confirm Value Failed", 0x05: "Pairing Not Supported", 0x06: "Encryption Key Size",
            0x07: "Command Not Supported", 0x08: "Unspecified Reason", 0x09: "Repeated Attempts",
            0x0A: "Invalid Parameters", 0x0B: "DHKey Check Failed", 0x0C: "Numeric Comparison Failed",
            0x0D: "BR/EDR pairing in progress", 0x0E: "Cross-transport Key Derivation/Generation not allowed",
            0x0F: "Key Rejected",
        ]
        for reason in UInt8.min...UInt8.max { XCTAssertEqual(SMP.reasonName(reason), table[reason], "reason \(reason)") }
        XCTAssertEqual(SMP.describeReason(0x04), "0x04 Confirm Value Failed")
        XCTAssertEqual(SMP.describeReason(0x00), "0x00 (reserved)")
    }

    /// btmon: "ACL Data RX: Handle 42 flags 0x02 dlen 6 / SMP: Pairing Failed (0x05) len 1 / Reason: Confirm value failed (0x04)".
    let confirmValueFailed: [UInt8] = [0x02, 0x2A, 0x20, 0x06, 0x00, 0x02, 0x00, 0x06, 0x00, 0x05, 0x04]

    func testAPairingFailedPDUIsReadWithItsHandleReasonAndSender() {
        XCTAssertEqual(SMPPairingFailed.parse(aclPacket: confirmValueFailed, incoming: true),
                       SMPPairingFailed(handle: 42, reason: 0x04, sentBy: .peer))
        let sent = SMPPairingFailed.parse(aclPacket: [0x02, 0x2A, 0x00, 0x06, 0x00, 0x02, 0x00, 0x06, 0x00, 0x05, 0x01], incoming: false)
        XCTAssertEqual(sent, SMPPairingFailed(handle: 42, reason: 0x01, sentBy: .thisHost))
        XCTAssertEqual(sent?.description, "SMP Pairing Failed reason 0x01 Passkey Entry Failed, sent by this host's kernel")
        // Another SMP command (Pairing Random), another channel (ATT, 0x0004), a continuing fragment, an event: none.
        XCTAssertNil(SMPPairingFailed.parse(aclPacket: [0x02, 0x2A, 0x20, 0x06, 0x00, 0x02, 0x00, 0x06, 0x00, 0x04, 0x04], incoming: true))
        XCTAssertNil(SMPPairingFailed.parse(aclPacket: [0x02, 0x2A, 0x20, 0x06, 0x00, 0x02, 0x00, 0x04, 0x00, 0x05, 0x04], incoming: true))
        XCTAssertNil(SMPPairingFailed.parse(aclPacket: [0x02, 0x2A, 0x10, 0x06, 0x00, 0x02, 0x00, 0x06, 0x00, 0x05, 0x04], incoming: true))
        XCTAssertNil(SMPPairingFailed.parse(aclPacket: hciEvent(0x05, [0x00, 0x2A, 0x00, 0x13]), incoming: true))
        XCTAssertNil(SMPPairingFailed.parse(aclPacket: Array(confirmValueFailed.prefix(10)), incoming: true))
    }

    func testAPairingErrorNamesTheSMPReasonItsSenderAndTheDisconnectionReason() {
        let peer = BluetoothAddress(uncheckedBytes: [0x00, 0xAA, 0x01, 0x00, 0x00, 0x00])
        var e = PairingError(address: peer, peer: "00:AA:01:00:00:00 (public)", adapter: "hci0")
        e.status = 0x05
        e.method = .passkeyEntry
        e.smpFailure = SMPPairingFailed(handle: 42, reason: 0x04, sentBy: .peer)
        e.linkLossReason = 0x13
        e.disconnectReason = 0x03
        XCTAssertTrue(e.description.hasPrefix("pairing with 00:AA:01:00:00:00 (public) on hci0 failed: Pair Device answered 0x05 Authentication Failed (method Passkey Entry; SMP Pairing Failed reason 0x04 Confirm Value Failed, sent by the peer; the link dropped: Disconnection Complete reason 0x13 Remote User Terminated Connection)"), e.description)
    }

    func testTheWatchFindsThePeersPairingFailedAndItsDisconnectionWithinItsLimit() throws {
        let pair = try SocketPair()
        pair.handOverA()
        let watch = try XCTUnwrap(SMPFailureWatch(adopting: pair.a, adapter: "hci0", seesACL: true))
        defer { watch.close() }
        let peer = BluetoothAddress(uncheckedBytes: [1, 2, 3, 4, 5, 6])
        let other = BluetoothAddress(uncheckedBytes: [6, 5, 4, 3, 2, 1])
        XCTAssertNil(watch.pairingFailed(peer: peer, limit: .milliseconds(100)), "none yet: nil at the limit")
        // LE Connection Complete: handle 0x2A to 01:02:03:04:05:06 (peer address little-endian), 0x2B to another.
        pair.sendB(hciEvent(0x3E, [0x01, 0x00, 0x2A, 0x00, 0x00, 0x00, 6, 5, 4, 3, 2, 1, 0x18, 0x00, 0x00, 0x00, 0x48, 0x00, 0x00]))
        pair.sendB(hciEvent(0x3E, [0x01, 0x00, 0x2B, 0x00, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 0x18, 0x00, 0x00, 0x00, 0x48, 0x00, 0x00]))
        // A Pairing Failed on the other link is not the peer's.
        pair.sendB([0x02, 0x2B, 0x20, 0x06, 0x00, 0x02, 0x00, 0x06, 0x00, 0x05, 0x08])
        XCTAssertEqual(watch.pairingFailed(peer: other, limit: .seconds(5))?.reason, 0x08)
        XCTAssertNil(watch.pairingFailed(peer: peer, limit: .milliseconds(50)))
        XCTAssertNil(watch.disconnectReason(peer: peer))
        // Disconnection Complete (handle 0x2A, 0x13), then the peer's Pairing Failed: found once it arrives, and the
        // event before it on the socket has been read too.
        pair.sendB(hciEvent(0x05, [0x00, 0x2A, 0x00, 0x13]))
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { [b = pair.b, p = confirmValueFailed] in sendDatagram(b, p) }
        XCTAssertEqual(watch.pairingFailed(peer: peer, limit: .seconds(5)), SMPPairingFailed(handle: 0x2A, reason: 0x04, sentBy: .peer))
        XCTAssertEqual(watch.disconnectReason(peer: peer), 0x13)
        XCTAssertNil(watch.disconnectReason(peer: other))
    }

    func testAWatchThatCannotSeeACLWaitsForNothing() throws {
        let pair = try SocketPair()
        pair.handOverA()
        let watch = try XCTUnwrap(SMPFailureWatch(adopting: pair.a, adapter: "hci0", seesACL: false))
        defer { watch.close() }
        XCTAssertNil(watch.pairingFailed(peer: BluetoothAddress(uncheckedBytes: [1, 2, 3, 4, 5, 6]), limit: .seconds(5)))
    }
}
