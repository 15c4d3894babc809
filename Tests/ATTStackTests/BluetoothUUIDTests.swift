import TestSupport
import XCTest
@testable import ATTStack

final class BluetoothUUIDTests: XCTestCase {
    func testParsesTheUsualForms() throws {
        XCTAssertEqual(BluetoothUUID(string: "2a00"), .bit16(0x2A00))
        XCTAssertEqual(BluetoothUUID(string: "2A00"), .bit16(0x2A00))
        XCTAssertEqual(BluetoothUUID(string: "0x2A00"), .bit16(0x2A00))
        XCTAssertEqual(BluetoothUUID(string: "0X2a00"), .bit16(0x2A00))
        XCTAssertEqual(BluetoothUUID(string: "0000180d"), .bit32(0x180D))
        XCTAssertEqual(BluetoothUUID(string: "0x12345678"), .bit32(0x1234_5678))
        let full = try XCTUnwrap(BluetoothUUID(string: "00002a00-0000-1000-8000-00805f9b34fb"))
        guard case .bit128(let v) = full else { return XCTFail("\(full)") }
        XCTAssertEqual(v, 0x00002A00_0000_1000_8000_00805F9B34FB)
        XCTAssertEqual(BluetoothUUID(string: "00002A00-0000-1000-8000-00805F9B34FB"), full)
        XCTAssertEqual(BluetoothUUID(string: "00002a0000001000800000805f9b34fb"), full)
        XCTAssertEqual(BluetoothUUID("2a05"), .serviceChanged)
    }

    func testRejectsMalformedStrings() {
        for s in ["", "2a0", "2a000", "0x", "0x2a0g", "zzzz", " 2a00", "2a00 ", "00002a00-0000-1000-8000-00805f9b34f",
                  "00002a00-0000-1000-8000_00805f9b34fb", "00002a000000-1000-8000-00805f9b34fb", "0x00002a00-0000-1000-8000-00805f9b34fb",
                  "+2a0", "-2a0", "00002a00-0000-1000-8000-00805f9b34fg"] {
            XCTAssertNil(BluetoothUUID(string: s), s)
        }
    }

    func testEqualityAndHashAcrossWidths() throws {
        let full = try XCTUnwrap(BluetoothUUID(string: "00002a00-0000-1000-8000-00805f9b34fb"))
        XCTAssertEqual(BluetoothUUID.bit16(0x2A00), full)
        XCTAssertEqual(BluetoothUUID.bit32(0x2A00), .bit16(0x2A00))
        XCTAssertEqual(BluetoothUUID.bit32(0x2A00), full)
        XCTAssertNotEqual(BluetoothUUID.bit16(0x2A00), .bit16(0x2A01))
        XCTAssertNotEqual(BluetoothUUID.bit32(0x0001_2A00), .bit16(0x2A00))
        XCTAssertEqual(Set([BluetoothUUID.bit16(0x2A00), .bit32(0x2A00), full]).count, 1)
        var table: [BluetoothUUID: String] = [.deviceName: "name"]
        XCTAssertEqual(table[full], "name")
        table[.bit32(0x2A00)] = "again"
        XCTAssertEqual(table.count, 1)
        XCTAssertEqual(full.hashValue, BluetoothUUID.bit16(0x2A00).hashValue)
        XCTAssertEqual(full.uuid16, 0x2A00)
        XCTAssertEqual(full.shortest, .bit16(0x2A00))
        XCTAssertEqual(BluetoothUUID.bit32(0x1234_5678).uuid16, nil)
        XCTAssertEqual(BluetoothUUID.bit32(0x1234_5678).uuid32, 0x1234_5678)
        let vendor = try XCTUnwrap(BluetoothUUID(string: "6e400001-b5a3-f393-e0a9-e50e24dcca9e"))
        XCTAssertNil(vendor.uuid16)
        XCTAssertNil(vendor.uuid32)
        XCTAssertEqual(vendor.shortest, vendor)
    }

    func testBaseUUID() {
        XCTAssertEqual(BluetoothUUID.bit128(BluetoothUUID.baseUUID).uuidString, "00000000-0000-1000-8000-00805f9b34fb")
        XCTAssertEqual(BluetoothUUID.bit16(0).uuid128, BluetoothUUID.baseUUID)
    }

    func testDescription() throws {
        XCTAssertEqual(BluetoothUUID.bit16(0x2A00).description, "2a00")
        XCTAssertEqual(BluetoothUUID(string: "00002A00-0000-1000-8000-00805F9B34FB")!.description, "2a00")
        XCTAssertEqual(BluetoothUUID.bit32(0x2A00).description, "2a00")
        XCTAssertEqual(BluetoothUUID.bit32(0x0000_FE59).description, "fe59")
        XCTAssertEqual(BluetoothUUID.bit32(0x1234_5678).description, "12345678-0000-1000-8000-00805f9b34fb")
        XCTAssertEqual(BluetoothUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!.description,
                       "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
        XCTAssertEqual(BluetoothUUID.bit16(0x2902).uuidString, "00002902-0000-1000-8000-00805f9b34fb")
        // Description parses back to an equal UUID.
        for u in [BluetoothUUID.bit16(0x180F), .bit32(0xDEAD_BEEF), BluetoothUUID(string: "6e400001-b5a3-f393-e0a9-e50e24dcca9e")!] {
            XCTAssertEqual(BluetoothUUID(string: u.description), u)
        }
    }

    func testLittleEndianWireForms() throws {
        XCTAssertEqual(BluetoothUUID(littleEndian: [0x00, 0x2A]), .bit16(0x2A00))
        XCTAssertEqual(BluetoothUUID(littleEndian: [0x78, 0x56, 0x34, 0x12]), .bit32(0x1234_5678))
        // CHARACTERISTIC_DISC_SMALL_DB in BlueZ's unit/test-gatt.c carries this 128-bit UUID.
        let wire = hex("ef cd ab 89 67 45 23 01 00 00 00 00 09 b0 00 00")
        let u = try XCTUnwrap(BluetoothUUID(littleEndian: wire))
        XCTAssertEqual(u.description, "0000b009-0000-0000-0123-456789abcdef")
        XCTAssertEqual(u.littleEndianBytes, wire)
        XCTAssertEqual(BluetoothUUID.bit16(0x2A00).littleEndianBytes, [0x00, 0x2A])
        XCTAssertEqual(BluetoothUUID.bit32(0x1234_5678).littleEndianBytes, [0x78, 0x56, 0x34, 0x12])
        XCTAssertEqual(BluetoothUUID.bit16(0x180D).bit128LittleEndian,
                       hex("fb 34 9b 5f 80 00 00 80 00 10 00 00 0d 18 00 00"))
        XCTAssertNil(BluetoothUUID(littleEndian: [0x01]))
        XCTAssertNil(BluetoothUUID(littleEndian: [0x01, 0x02, 0x03]))
        XCTAssertNil(BluetoothUUID(littleEndian: [UInt8](repeating: 0, count: 17)))
        XCTAssertEqual(BluetoothUUID(littleEndian: hex("aa 00 2a bb")[1..<3]), .bit16(0x2A00))
    }

    func testWellKnownNames() {
        XCTAssertEqual(BluetoothUUID.bit16(0x2A00).name, "Device Name")
        XCTAssertEqual(BluetoothUUID.bit16(0x2A01).name, "Appearance")
        XCTAssertEqual(BluetoothUUID.bit16(0x2A05).name, "Service Changed")
        XCTAssertEqual(BluetoothUUID.bit16(0x2902).name, "Client Characteristic Configuration")
        XCTAssertEqual(BluetoothUUID.bit16(0x2803).name, "Characteristic")
        XCTAssertEqual(BluetoothUUID.bit16(0x2800).name, "Primary Service")
        XCTAssertEqual(BluetoothUUID.bit16(0x2801).name, "Secondary Service")
        XCTAssertEqual(BluetoothUUID.bit16(0x2802).name, "Include")
        XCTAssertEqual(BluetoothUUID.bit16(0x1800).name, "Generic Access")
        XCTAssertEqual(BluetoothUUID.bit16(0x1801).name, "Generic Attribute")
        XCTAssertEqual(BluetoothUUID.bit16(0x180F).name, "Battery")
        XCTAssertEqual(BluetoothUUID.bit16(0x2A19).name, "Battery Level")
        XCTAssertEqual(BluetoothUUID.bit16(0x180D).name, "Heart Rate")
        XCTAssertEqual(BluetoothUUID.bit16(0x2A37).name, "Heart Rate Measurement")
        XCTAssertEqual(BluetoothUUID.bit16(0x180A).name, "Device Information")
        XCTAssertEqual(BluetoothUUID(string: "00002a29-0000-1000-8000-00805f9b34fb")?.name, "Manufacturer Name String")
        XCTAssertNil(BluetoothUUID.bit16(0xFFF0).name)
        XCTAssertNil(BluetoothUUID(string: "6e400001-b5a3-f393-e0a9-e50e24dcca9e")!.name)
    }
}
