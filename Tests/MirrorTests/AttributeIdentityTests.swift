// Issue 37 point 2: a value is named and decoded by what it is, not by how it was asked for (GATTPeer's
// AttributeIdentity): the pure decision over a database and names, and the lookup against the simulator, where a raw
// handle read sends no discovery.
import GATTPeer
import Mirror
import MirrorSimulator
import XCTest

final class AttributeIdentityTests: XCTestCase {
    let names = CharacteristicNames(MirrorProfile.bundled.characteristics)
    var scanStateUUID: BluetoothUUID { MirrorProfile.bundled.characteristics["scanState"]! }

    /// The mirror's scanState (value 0x000C, CCCD 0x000D) and GAP's Device Name (0x0003), as a database known.
    func database(_ source: AttributeIdentity.Source) -> DatabaseWithoutTraffic {
        let cccd = GATTDescriptor(handle: 0x000D, uuid: .bit16(0x2902))
        let state = GATTCharacteristic(uuid: scanStateUUID, declarationHandle: 0x000B, valueHandle: 0x000C,
                                       properties: [.read, .notify], endHandle: 0x000D, descriptors: [cccd])
        let name = GATTCharacteristic(uuid: .bit16(0x2A00), declarationHandle: 0x0002, valueHandle: 0x0003, properties: [.read], endHandle: 0x0003)
        return DatabaseWithoutTraffic(services: [
            GATTService(uuid: .bit16(0x1800), startHandle: 1, endHandle: 3, characteristics: [name]),
            GATTService(uuid: MirrorProfile.bundled.service, startHandle: 0x000A, endHandle: 0x000D, characteristics: [state]),
        ], source: source)
    }

    func identify(_ h: UInt16, _ reference: CharacteristicReference, _ known: DatabaseWithoutTraffic?) -> Result<AttributeIdentity, AttributeNotIdentified> {
        CharacteristicLookup.identify(h, readAs: reference, in: known, names: names)
    }

    func testAHandleIsIdentifiedFromTheDatabaseKnownElseNotWithTheReason() {
        // By handle and by name alike, from the database known (the cache's copy says so).
        for reference in [CharacteristicReference.handle(0x000C), .name("scanState")] {
            XCTAssertEqual(try identify(0x000C, reference, database(.cache)).get(),
                           AttributeIdentity(handle: 0x000C, uuid: scanStateUUID, label: "scanState", source: .cache))
        }
        // A descriptor is named with its characteristic.
        XCTAssertEqual(try identify(0x000D, .handle(0x000D), database(.connection)).get(),
                       AttributeIdentity(handle: 0x000D, uuid: .bit16(0x2902), label: "Client Characteristic Configuration of scanState",
                                         isDescriptor: true, characteristicHandle: 0x000C, source: .connection))
        // Nothing known: raw, saying why; a declaration's handle is no value or descriptor.
        XCTAssertEqual(identify(0x000C, .handle(0x000C), nil), .failure(.noDatabase(handle: 0x000C)))
        XCTAssertEqual(identify(0x000B, .handle(0x000B), database(.cache)), .failure(.notInDatabase(handle: 0x000B, source: .cache)))
    }

    func testAUUIDReadIsIdentifiedByItsUUIDWithOrWithoutADatabase() {
        XCTAssertEqual(try identify(0x000C, .uuid(scanStateUUID), nil).get(),
                       AttributeIdentity(handle: 0x000C, uuid: scanStateUUID, label: "scanState", source: .uuid))
        XCTAssertEqual(try identify(0x0003, .uuid(.bit16(0x2A00)), nil).get().label, "Device Name")
        // A descriptor type without a database: decoded by its type, no characteristic to name.
        XCTAssertEqual(try identify(0x000D, .uuid(.bit16(0x2902)), nil).get(),
                       AttributeIdentity(handle: 0x000D, uuid: .bit16(0x2902), label: "Client Characteristic Configuration", isDescriptor: true, source: .uuid))
        // With one, its characteristic named; a database whose handle holds another type (stale) yields to the UUID.
        XCTAssertEqual(try identify(0x000D, .uuid(.bit16(0x2902)), database(.cache)).get().label, "Client Characteristic Configuration of scanState")
        XCTAssertEqual(try identify(0x0003, .uuid(.bit16(0x2A01)), database(.cache)).get(),
                       AttributeIdentity(handle: 0x0003, uuid: .bit16(0x2A01), label: "Appearance", source: .uuid))
        XCTAssertTrue(BluetoothUUID.bit16(0x2902).isDescriptorType)
        XCTAssertTrue(BluetoothUUID(string: "00002901-0000-1000-8000-00805f9b34fb")!.isDescriptorType)
        XCTAssertFalse(BluetoothUUID.bit16(0x2A00).isDescriptorType)
        XCTAssertFalse(scanStateUUID.isDescriptorType)
    }

    /// Against the simulator: a raw handle read is identified from nothing (no discovery sent); after the database is
    /// discovered on the connection it is; a descriptor UUID read names its characteristics.
    func testTheLookupSendsNothingForAHandleAndNamesDescriptorsOfAUUIDRead() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        var o = Peer.Options()
        o.names = names
        o.transactionTimeout = .seconds(5)
        let peer = try await Peer.connect(to: .unix(path: h.path), options: o)
        defer { peer.close() }
        let state = try XCTUnwrap(h.sim.valueHandle("scanState"))
        XCTAssertNil(peer.lookup.databaseWithoutTraffic())
        let raw = await peer.lookup.identify([state], readAs: .handle(state))
        XCTAssertEqual(raw, [.failure(.noDatabase(handle: state))])
        XCTAssertNil(peer.lookup.database.known, "a handle read discovers nothing")
        let cccds = try await peer.lookup.read(uuid: .bit16(0x2902)).map(\.handle)
        let named = await peer.lookup.identify(cccds, readAs: .uuid(.bit16(0x2902)))
        XCTAssertTrue(named.contains { (try? $0.get().label) == "Client Characteristic Configuration of scanState" }, "\(named)")
        // Now the database is known on the connection: the handle is named.
        let known = await peer.lookup.identify([state], readAs: .handle(state))
        XCTAssertEqual(try known[0].get().label, "scanState")
        XCTAssertEqual(try known[0].get().source, .connection)
    }
}
