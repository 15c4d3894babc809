// A clone is complete when the hash the device serves is the one computed over what was found: by the Core
// Specification's rule (Vol 3 Part G §7.3.1) in either octet order, or as a BlueZ version computes it (its
// bluetoothd leaves Extended Properties out); any other served hash says it is not.
import GATTPeer
import XCTest

final class DeviceCloneTests: XCTestCase {
    func clone(served: [UInt8]?) -> DeviceClone {
        var c = GATTCharacteristic(uuid: .bit16(0x2A19), declarationHandle: 2, valueHandle: 3,
                                   properties: [.read, .extendedProperties], endHandle: 4)
        c.descriptors = [GATTDescriptor(handle: 4, uuid: .characteristicExtendedProperties, value: [0x01, 0x00])]
        let s = GATTService(uuid: .bit16(0x180F), startHandle: 1, endHandle: 4, characteristics: [c])
        return DeviceClone(name: "t", source: "test", mtu: 23, services: [s], readings: [:], names: [:], servedHash: served)
    }

    func testCompletenessByTheSpecsHashOrBlueZsAndNothingElse() throws {
        let spec = try XCTUnwrap(clone(served: nil).computedHash)
        XCTAssertNil(clone(served: nil).isComplete)
        XCTAssertEqual(clone(served: spec).isComplete, true)
        XCTAssertEqual(clone(served: spec.reversed()).isComplete, true)
        let blueZ = try XCTUnwrap(try GATTDatabaseHash.blueZHashes(services: clone(served: nil).services)).first { $0.hash != spec }
        XCTAssertEqual(clone(served: try XCTUnwrap(blueZ).hash).isComplete, true, "the hash BlueZ serves without Extended Properties")
        XCTAssertEqual(clone(served: [UInt8](repeating: 0xAB, count: 16)).isComplete, false)
    }

    func testTheDeviceFileRoundTrips() throws {
        var c = clone(served: [UInt8](repeating: 1, count: 16))
        c.readings = [3: .value([0x55]), 4: .refused(.readNotPermitted)]
        c.behaviours = [.init(handle: 3, value: [1], withResponse: true, refusal: .writeNotPermitted,
                              then: [.init(after: 1500, handle: 3, value: [2], indication: true)])]
        XCTAssertEqual(try DeviceClone(json: c.json), c)
    }
}
