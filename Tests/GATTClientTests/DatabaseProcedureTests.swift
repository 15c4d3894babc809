// The procedures over the whole database that GATTClient offers beyond the single ATT ones: every service
// with the secondary ones (Part G §4.5.1), Read Using Characteristic UUID with long values read whole
// (§4.8.2, §4.8.3), and subscribing to a discovered characteristic (§4.10, §4.11), against scripted peers.
import TestSupport
import ATTStack
import XCTest
@testable import GATTClient
import GATTVocabulary

final class DatabaseProcedureTests: XCTestCase {
    // MARK: discoverDatabase

    /// Two primary services include the same secondary service, which sits below them in handle space: it is
    /// discovered once, with its characteristics, marked secondary, and listed first (handle order).
    func testDiscoverDatabaseAddsEachIncludedSecondaryServiceOnceInHandleOrder() async throws {
        let peer = ScriptedPeer(
            raw("10 01 00 ff ff 00 28", "11 06 10 00 12 00 0d 18 20 00 21 00 0a 18")
            + raw("10 22 00 ff ff 00 28", "01 10 22 00 0a")
            // 0x0010-0x0012: an include of 0x0001-0x0003 (0x180F) at 0x0011, no characteristics.
            + raw("08 10 00 12 00 02 28", "09 08 11 00 01 00 03 00 0f 18")
            + raw("08 12 00 12 00 02 28", "01 08 12 00 0a")
            + raw("08 10 00 12 00 03 28", "01 08 10 00 0a")
            // 0x0020-0x0021: the same include at 0x0021 (the range's end: no further Read By Type).
            + raw("08 20 00 21 00 02 28", "09 08 21 00 01 00 03 00 0f 18")
            + raw("08 20 00 21 00 03 28", "01 08 20 00 0a")
            // The secondary service 0x0001-0x0003: one characteristic (read, notify) with its value at 0x0003.
            + raw("08 01 00 03 00 03 28", "09 07 02 00 12 03 00 19 2a")
            + raw("08 03 00 03 00 03 28", "01 08 03 00 0a"))
        let client = try await makeClient(peer)
        let db = try await within { try await client.discoverDatabase() }
        XCTAssertEqual(db.map(\.startHandle), [0x01, 0x10, 0x20])
        XCTAssertEqual(db.map(\.isPrimary), [false, true, true])
        XCTAssertEqual(db[0].uuid, .bit16(0x180F))
        XCTAssertEqual(db[0].endHandle, 0x03)
        XCTAssertEqual(db[0].characteristics.map(\.valueHandle), [0x03])
        XCTAssertEqual(db[0].characteristics[0].properties, [.read, .notify])
        XCTAssertEqual(db[0].characteristics[0].uuid, .bit16(0x2A19))
        XCTAssertEqual(db[1].includedServices,
                       [GATTIncludedService(declarationHandle: 0x11, startHandle: 0x01, endHandle: 0x03, uuid: .bit16(0x180F))])
        XCTAssertEqual(db[2].includedServices.map(\.declarationHandle), [0x21])
        peer.assertScriptDone()
    }

    // MARK: readLong(uuid:)

    /// At ATT_MTU 23 a Read By Type pair holds 19 value bytes: the value that filled it is read again with Read
    /// Long (Read Request, then Read Blob after the 22-byte part), the shorter one is kept as it came.
    func testReadLongByUUIDReadsAValueThatFilledItsPairAgainWhole() async throws {
        let long = Array(0..<25).map { UInt8($0) }
        let peer = ScriptedPeer(
            raw("08 01 00 ff ff 00 2a", "09 15 03 00 " + show(Array(long[0..<19])))
            + raw("08 04 00 ff ff 00 2a", "09 04 07 00 41 42")
            + raw("08 08 00 ff ff 00 2a", "01 08 08 00 0a")
            + raw("0a 03 00", "0b " + show(Array(long[0..<22])))
            + raw("0c 03 00 16 00", "0d " + show(Array(long[22...]))))
        let client = try await makeClient(peer)
        let values = try await within { try await client.readLong(uuid: .bit16(0x2A00)) }
        XCTAssertEqual(values.map(\.handle), [0x03, 0x07])
        XCTAssertEqual(values.map(\.value), [long, [0x41, 0x42]])
        peer.assertScriptDone()
    }

    /// At ATT_MTU 517 a pair still holds at most 253 value bytes (its length is one octet, Part F §3.4.4.2):
    /// a 253-byte value is read again whole.
    func testReadLongByUUIDCapsThePairAt253BytesAtALargeMTU() async throws {
        let value = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        let peer = ScriptedPeer(
            raw("02 05 02", "03 05 02")
            + raw("08 01 00 ff ff 00 2a", "09 ff 03 00 " + show(Array(value[0..<253])))
            + raw("08 04 00 ff ff 00 2a", "01 08 04 00 0a")
            + raw("0a 03 00", "0b " + show(value)))
        let client = try await makeClient(peer)
        let mtu = try await within { try await client.exchangeMTU() }
        XCTAssertEqual(mtu, 517)
        let values = try await within { try await client.readLong(uuid: .bit16(0x2A00)) }
        XCTAssertEqual(values.map(\.handle), [0x03])
        XCTAssertEqual(values.first?.value, value)
        peer.assertScriptDone()
    }

    // MARK: subscribe(to:preferIndications:)

    private let both = GATTCharacteristic(uuid: .bit16(0x2A05), declarationHandle: 0x0D, valueHandle: 0x0E,
                                          properties: [.notify, .indicate], endHandle: 0x0F,
                                          descriptors: [GATTDescriptor(handle: 0x0F, uuid: .clientCharacteristicConfiguration)])

    func testSubscribeToACharacteristicThatDoesBothNotifiesUnlessIndicationsArePreferred() async throws {
        let peer = ScriptedPeer(raw("12 0f 00 01 00", "13") + raw("12 0f 00 02 00", "13"))
        let client = try await makeClient(peer)
        let both = self.both
        let (first, _) = try await within { try await client.subscribe(to: both) }
        XCTAssertNil(first, "the characteristic is not readable: no read after the CCCD write")
        _ = try await within { try await client.subscribe(to: both, preferIndications: true) }
        peer.assertScriptDone()
        XCTAssertEqual(GATTSubscriptionMode(for: [.notify, .indicate]), .notify)
        XCTAssertEqual(GATTSubscriptionMode(for: [.notify, .indicate], preferIndications: true), .indicate)
        XCTAssertEqual(GATTSubscriptionMode(for: [.indicate]), .indicate)
        XCTAssertEqual(GATTSubscriptionMode(for: [.notify], preferIndications: true), .notify)
        XCTAssertNil(GATTSubscriptionMode(for: [.read, .write]))
    }

    func testSubscribeRefusesACharacteristicThatNeitherNotifiesNorIndicatesBeforeSendingAnything() async throws {
        let peer = ScriptedPeer([])
        let client = try await makeClient(peer)
        let c = GATTCharacteristic(uuid: .bit16(0x2A00), declarationHandle: 0x02, valueHandle: 0x03,
                                   properties: [.read, .write], endHandle: 0x04,
                                   descriptors: [GATTDescriptor(handle: 0x04, uuid: .clientCharacteristicConfiguration)])
        do { _ = try await client.subscribe(to: c); XCTFail("subscribed") } catch {
            XCTAssertEqual(error.description, "characteristic 2a00 at 0x0003 neither notifies nor indicates (properties: read|write)")
        }
        XCTAssertEqual(peer.sent, [])
    }

    /// Descriptors already discovered without a CCCD: the client says so and does not discover them again.
    func testSubscribeRefusesACharacteristicWithoutACCCD() async throws {
        let peer = ScriptedPeer([])
        let client = try await makeClient(peer)
        let c = GATTCharacteristic(uuid: .bit16(0x2A37), declarationHandle: 0x0D, valueHandle: 0x0E,
                                   properties: [.notify], endHandle: 0x0F,
                                   descriptors: [GATTDescriptor(handle: 0x0F, uuid: .characteristicUserDescription)])
        do { _ = try await client.subscribe(to: c, preferIndications: true); XCTFail("subscribed") } catch {
            XCTAssertEqual(error.description, "characteristic 2a37 at 0x000E has no Client Characteristic Configuration descriptor (0x2902)")
        }
        XCTAssertEqual(peer.sent, [])
    }
}
