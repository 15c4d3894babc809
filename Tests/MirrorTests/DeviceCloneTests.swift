// A clone is complete when the hash the device serves is the one computed over what was found: by the Core
// Specification's rule (Vol 3 Part G §7.3.1) in either octet order, or as a BlueZ version computes it (its
// bluetoothd leaves Extended Properties out); any other served hash says it is not.
import Foundation
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
        let address = try BluetoothAddress(parsing: "00:AA:01:01:00:01")
        c.advertising = [.init(eventType: 0, addressType: .public, address: address, data: [0x02, 0x01, 0x06]),
                         .init(eventType: 4, addressType: .random, address: address, data: [])]
        XCTAssertEqual(try DeviceClone(json: c.json), c)
        // The file's form is the one it always had: the PDU type's name, the address as text, its type in words.
        XCTAssertEqual(c.json["advertising"]?.compact, #"[{"kind":"ADV_IND","eventType":0,"address":"00:AA:01:01:00:01","addressType":"public","data":"020106"},{"kind":"SCAN_RSP","eventType":4,"address":"00:AA:01:01:00:01","addressType":"random","data":""}]"#)
    }

    /// A file without "advertising" (written before the key was added) reads as none; a bad one is named.
    func testAdvertisingIsOptionalAndABadOneIsNamed() throws {
        var c = clone(served: nil)
        XCTAssertEqual(try DeviceClone(json: c.json).advertising, [])
        let address = try BluetoothAddress(parsing: "00:AA:01:01:00:01")
        c.advertising = [.init(eventType: 0, addressType: .public, address: address, data: [UInt8](repeating: 1, count: 32))]
        XCTAssertThrowsError(try DeviceClone(json: c.json)) { XCTAssertEqual("\($0)", "advertising: 32 bytes of data, more than a legacy PDU's 31") }
        c.advertising = [.init(eventType: 9, addressType: .public, address: address, data: [])]
        XCTAssertThrowsError(try DeviceClone(json: c.json)) { XCTAssertEqual("\($0)", "advertising: eventType 9 is not 0-4") }
    }

    /// One loader for `mirror clone --diff` and `mirror-sim --from`: what is wrong names the file.
    func testTheDeviceFileLoaderNamesTheFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("deviceclone-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = dir.appendingPathComponent("good.json").path, bad = dir.appendingPathComponent("bad.json").path
        try clone(served: nil).json.pretty.write(toFile: good, atomically: true, encoding: .utf8)
        try "{\"format\": \"other/1\"}".write(toFile: bad, atomically: true, encoding: .utf8)
        XCTAssertEqual(try DeviceClone(contentsOf: good), clone(served: nil))
        XCTAssertThrowsError(try DeviceClone(contentsOf: bad)) {
            XCTAssertEqual("\($0)", "device file \(bad): format \"other/1\", this mirror reads \"mirror-device/1\"")
        }
        XCTAssertThrowsError(try DeviceClone(contentsOf: dir.appendingPathComponent("none.json").path)) {
            XCTAssertTrue("\($0)".hasPrefix("cannot read the device file "), "\($0)")
        }
    }

    /// A list of handles names a value by its name and a descriptor by its type's and its characteristic's.
    func testADescriptorIsNamedByItsTypeAndItsCharacteristic() {
        var c = clone(served: nil)
        c.names = [3: "Battery Level"]
        XCTAssertEqual(c.label(of: 3), "Battery Level")
        XCTAssertEqual(c.label(of: 4), "Characteristic Extended Properties of Battery Level")
        c.names = [:]
        XCTAssertEqual(c.label(of: 4), "Characteristic Extended Properties of Battery Level", "the SIG's name of 0x2A19")
        XCTAssertNil(c.label(of: 2), "a declaration")
    }
}
