import Foundation
import XCTest
@testable import LinuxBluetooth
import LinkCore

/// The management protocol's bytes (BlueZ doc/mgmt-api.txt), and a command's answer over a socketpair standing in for
/// the kernel's HCI_CHANNEL_CONTROL socket.
final class ManagementTests: XCTestCase {
    func testDiscoveryCommandsAreTheDocumentedPackets() {
        // mgmt-api.txt: Start Discovery, Command Code 0x0023, Controller Index <controller id>, Command Parameters
        // Address_Type (1 octet; bit 1 LE Public, bit 2 LE Random). Header fields little-endian.
        XCTAssertEqual(ManagementCommand.startDiscovery(index: 1).packet, [0x23, 0x00, 0x01, 0x00, 0x01, 0x00, 0x06])
        XCTAssertEqual(ManagementCommand.stopDiscovery(index: 0).packet, [0x24, 0x00, 0x00, 0x00, 0x01, 0x00, 0x06])
    }

    func testDeviceFoundCarriesAddressTypeRSSIConnectableAndTheMergedData() {
        // Device Found, Event Code 0x0012: Address (6 octets, least significant first), Address_Type (1: LE Public),
        // RSSI (-60), Flags (4 octets; bit 2 Not Connectable), EIR_Data_Length (2), EIR_Data.
        let eir: [UInt8] = [0x02, 0x01, 0x06, 0x0B, 0x09] + Array("mirror-sim".utf8)
        var params: [UInt8] = [0x01, 0x00, 0x01, 0x01, 0xAA, 0x00, 0x01, 0xC4, 0x00, 0x00, 0x00, 0x00]
        params += [UInt8(eir.count), 0x00] + eir
        let packet: [UInt8] = [0x12, 0x00, 0x00, 0x00, UInt8(params.count), 0x00] + params
        guard case .deviceFound(let index, let r)? = ManagementEvent.parse(packet) else { return XCTFail("not parsed") }
        XCTAssertEqual(index, 0)
        XCTAssertEqual(r.address.description, "00:AA:01:01:00:01")
        XCTAssertEqual(r.addressType, .public)
        XCTAssertEqual(r.rssi, -60)
        XCTAssertTrue(r.isConnectable)
        XCTAssertEqual(r.localName, "mirror-sim")

        var notConnectable = packet
        notConnectable[6 + 8] = 0x04
        guard case .deviceFound(_, let n)? = ManagementEvent.parse(notConnectable) else { return XCTFail("not parsed") }
        XCTAssertFalse(n.isConnectable)
        // Shorter than its length field says: not an event.
        XCTAssertNil(ManagementEvent.parse(Array(packet.dropLast())))
        // Discovering, 0x0013: Address_Type, Discovering.
        XCTAssertEqual(ManagementEvent.parse([0x13, 0x00, 0x02, 0x00, 0x02, 0x00, 0x06, 0x00]), .discovering(index: 2, on: false))
    }

    func testARefusedCommandNamesTheStatusAndWhatToDo() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds), 0)
        let kernel = fds[1]
        defer { close(kernel) }
        let socket = ManagementSocket(adopting: fds[0], adapter: "hci0")
        // The kernel's side: a Device Found first (handed to `other`), then Command Status 0x0A Busy for 0x0023.
        let found: [UInt8] = [0x12, 0x00, 0x00, 0x00, 0x0E, 0x00, 1, 0, 1, 1, 0xAA, 0, 1, 0x7F, 0, 0, 0, 0, 0, 0]
        let busy: [UInt8] = [0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x23, 0x00, 0x0A]
        XCTAssertEqual(write(kernel, found, found.count), found.count)
        XCTAssertEqual(write(kernel, busy, busy.count), busy.count)
        var others: [ManagementEvent] = []
        XCTAssertThrowsError(try socket.run(.startDiscovery(index: 0), other: { others.append($0) })) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("Start Discovery (Bluetooth management) on hci0 failed with status 0x0A Busy"), text)
            XCTAssertTrue(text.contains("another discovery runs on hci0"), text)
        }
        XCTAssertEqual(others.count, 1)
        // What was sent is the command's packet.
        var sent = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(read(kernel, &sent, sent.count), 7)
        XCTAssertEqual(Array(sent.prefix(7)), ManagementCommand.startDiscovery(index: 0).packet)
    }

    func testASilentKernelIsATimeoutThatSaysWhatWasAwaited() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds), 0)
        defer { close(fds[1]) }
        let socket = ManagementSocket(adopting: fds[0], adapter: "hci0")
        XCTAssertThrowsError(try socket.run(.stopDiscovery(index: 0), timeout: 0.2)) { error in
            XCTAssertEqual("\(error)", "Stop Discovery (Bluetooth management) on hci0 failed: no Command Complete or Command Status from the kernel within 0.2 s")
        }
    }
}
