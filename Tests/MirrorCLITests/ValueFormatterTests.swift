// Values decoded where a user reads them, and values typed as a user thinks of them (issue 24 items 2 and 3).
import Foundation
import TestSupport
import XCTest
@testable import MirrorCommandLine
import ATTStack
import GATTVocabulary
import Mirror

final class ValueFormatterTests: XCTestCase {
    let profile = MirrorProfile.bundled

    func testTheProfilesEnumsByUUIDOrName() {
        let scanState = profile.characteristics["scanState"]!
        XCTAssertEqual(ValueFormatter.decode([9], uuid: scanState, name: nil, profile: profile), "error")
        XCTAssertEqual(ValueFormatter.decode([5], uuid: nil, name: "scanError", profile: profile), "processorBusy")
        XCTAssertEqual(ValueFormatter.decode([2], uuid: nil, name: "wifiConnectionStatus", profile: profile), "connected")
        XCTAssertEqual(ValueFormatter.decode([0x32], uuid: nil, name: "scannerAction", profile: profile), "initDeviceForScan")
        XCTAssertEqual(ValueFormatter.decode([0x77], uuid: scanState, name: nil, profile: profile), "unknown(0x77)")
        XCTAssertNil(ValueFormatter.decode([9, 9], uuid: scanState, name: nil, profile: profile), "an enum is one byte")
    }

    func testWellKnownCharacteristicsAndDescriptors() {
        func d(_ bytes: [UInt8], _ u: UInt16) -> String? { ValueFormatter.decode(bytes, uuid: .bit16(u), name: nil, profile: profile) }
        XCTAssertEqual(d(Array("mirror".utf8), 0x2A00), "\"mirror\"")
        XCTAssertEqual(d([0xC1, 0x03], 0x2A01), "Keyboard")
        XCTAssertEqual(d([0x41, 0x0C], 0x2A01), "category 49, subcategory 1")
        XCTAssertEqual(d([0x01, 0x00], 0x2902), "notifications on, indications off")
        XCTAssertEqual(d([0x02, 0x00], 0x2902), "notifications off, indications on")
        XCTAssertEqual(d([87], 0x2A19), "87 %")
        XCTAssertNil(d([187], 0x2A19), "not a percentage")
        XCTAssertEqual(d([0x02, 0x6B, 0x1D, 0x46, 0x02, 0x37, 0x05], 0x2A50), "vendor 0x1D6B (USB-IF), product 0x0246, version 0x0537")
        XCTAssertEqual(d([0x01, 0x00, 0xFF, 0xFF], 0x2A05), "handles 0x0001-0xFFFF")
        // A hostile Device Name is escaped.
        let hostile = d(Array("\u{1b}]0;x\u{07}".utf8), 0x2A00) ?? ""
        XCTAssertFalse(hostile.unicodeScalars.contains { $0.value < 0x20 }, hostile)
    }

    func testPresentationFormat() {
        // §3.3.3.5: format sint16 (0x0E), exponent -2, unit °C (0x272F): 0x0929 = 2345 -> 23.45 °C.
        XCTAssertEqual(ValueFormatter.presentationFormat([0x29, 0x09], [0x0E, 0xFE, 0x2F, 0x27, 0x01, 0x00, 0x00]), "23.45 °C")
        XCTAssertEqual(ValueFormatter.presentationFormat([0xFB, 0xFF], [0x0E, 0xFF, 0x00, 0x27, 0x01, 0x00, 0x00]), "-0.5")
        XCTAssertEqual(ValueFormatter.presentationFormat([50], [0x04, 0x00, 0xAD, 0x27, 0x01, 0x00, 0x00]), "50 %")
        XCTAssertEqual(ValueFormatter.presentationFormat([3], [0x04, 0x02, 0x00, 0x27, 0x01, 0x00, 0x00]), "300")
        XCTAssertEqual(ValueFormatter.presentationFormat(Array("ok".utf8), [0x19, 0x00, 0x00, 0x27, 0x01, 0x00, 0x00]), "\"ok\"")
        XCTAssertNil(ValueFormatter.presentationFormat([1, 2, 3], [0x06, 0x00, 0x00, 0x27, 0x01, 0x00, 0x00]), "uint16 is two bytes")
    }

    /// Units by the Assigned Numbers' list (§3.5 "Units"), not by this table's own reading: a heart rate in beats per
    /// minute is 0x27AF; 0x27A7 is a velocity in miles per hour and 0x2781 a pressure in millimetres of mercury.
    func testUnitsAreTheAssignedNumbers() {
        XCTAssertEqual(ValueFormatter.presentationFormat([72], [0x04, 0x00, 0xAF, 0x27, 0x01, 0x00, 0x00]), "72 bpm")
        XCTAssertEqual(ValueFormatter.unitSymbol(0x27A7), "mi/h")
        XCTAssertEqual(ValueFormatter.unitSymbol(0x2781), "mmHg")
        XCTAssertEqual(ValueFormatter.unitSymbol(0x27AC), "°F")
        XCTAssertEqual(ValueFormatter.unitSymbol(0x2724), "Pa")
        XCTAssertNil(ValueFormatter.unitSymbol(0x2700), "unitless")
    }

    func testTypedValues() throws {
        XCTAssertEqual(try parseWriteValue("text:hi there"), .bytes(Array("hi there".utf8)))
        XCTAssertEqual(try parseWriteValue("hex:0102"), .bytes([1, 2]))
        XCTAssertEqual(try parseWriteValue("0102ff"), .bytes([1, 2, 0xFF]))
        XCTAssertEqual(try parseWriteValue("u8:255"), .bytes([0xFF]))
        XCTAssertEqual(try parseWriteValue("u16:0x1234"), .bytes([0x34, 0x12]), "little-endian, as GATT")
        XCTAssertEqual(try parseWriteValue("u32:1"), .bytes([1, 0, 0, 0]))
        XCTAssertEqual(try parseWriteValue("i16:-2"), .bytes([0xFE, 0xFF]))
        XCTAssertEqual(try parseWriteValue("i8:-128"), .bytes([0x80]))
        XCTAssertEqual(try parseWriteValue("initDeviceForScan"), .enumName("initDeviceForScan"))
        XCTAssertEqual(try parseWriteValue("cafe"), .bytes([0xCA, 0xFE]), "hex wins where a token is both")
        for (bad, words) in [("u8:256", "outside u8's range 0...255"), ("i16:40000", "outside i16's range -32768...32767"),
                             ("u16:x", "is not a decimal or 0x hex integer"), ("0x1g", "text:STRING")] {
            XCTAssertThrowsError(try parseWriteValue(bad)) { e in
                XCTAssertTrue("\(e)".contains(words), "\(bad): \(e)")
            }
        }
    }

    /// Issue 37: a bad value suggests only the names of the characteristic written (before: `write TARGET cloudToken
    /// 6g` suggested initDeviceForScan, a value of scannerAction).
    func testABadValueSuggestsOnlyThisCharacteristicsNames() throws {
        let plain = try MirrorProcess.run(["write", "unix:/tmp/nowhere.sock", "cloudToken", "6g"])
        XCTAssertEqual(plain.status, 2)
        XCTAssertTrue(plain.stderr.contains("or give text:STRING, u8:N, u16:N, u32:N, i8:N, i16:N, i32:N\n"), plain.stderr)
        XCTAssertFalse(plain.stderr.contains("initDeviceForScan"), plain.stderr)
        let named = try MirrorProcess.run(["write", "unix:/tmp/nowhere.sock", "scannerAction", "6g"])
        XCTAssertTrue(named.stderr.contains("or one of the names the profile gives its values: wifiScan, initDeviceForScan, reboot, cancelScan"), named.stderr)
        XCTAssertThrowsError(try parseWriteValue("6g")) { e in
            XCTAssertTrue("\(e)".hasSuffix("or a name the profile gives this characteristic's values"), "\(e)")
        }
    }

    func testReferencesSayWhichTheyTook() throws {
        XCTAssertEqual(try parseCharacteristicReference("handle:0x0012"), .handle(0x12))
        XCTAssertEqual(try parseCharacteristicReference("uuid:2902"), .uuid(.bit16(0x2902)))
        XCTAssertEqual(try parseCharacteristicReference("Device Name"), .name("Device Name"))
        XCTAssertEqual(referenceAmbiguity("2902"), "note: 2902 taken as handle 2902 (0x0B56); for the 16-bit UUID 0x2902 write uuid:2902 (handle:2902 takes the handle without this note)")
        XCTAssertNil(referenceAmbiguity("18"))
        XCTAssertNil(referenceAmbiguity("handle:2902"))
        XCTAssertNil(referenceAmbiguity("2a00"))
    }

    func testReadListenAndGATTShowTheMeaningBesideTheHex() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        let read = try MirrorProcess.run(["read", sim.target, "scanState"])
        XCTAssertEqual(read.stdout, "0x000C scanState: invalid  [00]  (1 byte)\n", read.stderr)
        let json = try MirrorProcess.run(["read", sim.target, "scanState", "--json"]).json()
        XCTAssertEqual(json["decoded"]?.string, "invalid")
        XCTAssertEqual(json["name"]?.string, "scanState")
        XCTAssertEqual(json["value"]?.string, "00")
        let name = try MirrorProcess.run(["read", sim.target, "Device Name"])
        XCTAssertEqual(name.stdout, "0x0003 Device Name: \"mirror-sim\"  [6d 69 72 72 6f 72 2d 73 69 6d]  (10 bytes)\n", name.stderr)
        let gatt = try MirrorProcess.run(["gatt", sim.target, "--read"])
        XCTAssertTrue(gatt.stdout.contains("    value: Unknown  [00 00]  (2 bytes)\n"), gatt.stdout)
        XCTAssertTrue(gatt.stdout.contains("      value: notifications off, indications off  [00 00]  (2 bytes)\n"), gatt.stdout)
        let listen = try MirrorProcess.run(["listen", sim.target, "scanState", "--duration", "0.2"])
        XCTAssertTrue(listen.stderr.contains("current value: invalid  [00]  (1 byte)"), listen.stderr)
        // The ambiguous handle says which it took.
        // A raw handle discovers nothing: no name, no meaning, only the bytes.
        XCTAssertEqual(try MirrorProcess.run(["read", sim.target, "0x000C"]).stdout, "0x000C: 00  \".\"  (1 byte)\n")
        let ambiguous = try MirrorProcess.run(["read", sim.target, "2902"])
        XCTAssertTrue(ambiguous.stderr.hasPrefix("note: 2902 taken as handle 2902 (0x0B56); for the 16-bit UUID 0x2902 write uuid:2902"), ambiguous.stderr)
    }

    func testWriteTakesTextNumbersAndTheProfilesNames() throws {
        let sim = try SimulatorProcess()
        defer { sim.stop() }
        XCTAssertEqual(try MirrorProcess.run(["write", sim.target, "cloudToken", "text:http://10.0.0.2/u"]).status, 0)
        XCTAssertEqual(try MirrorProcess.run(["read", sim.target, "cloudToken", "--json"]).json()["text"]?.string, "http://10.0.0.2/u")
        // cancelScan by its name lands as 0x36: the mirror resets (scanState invalid), as the profile says.
        let byName = try MirrorProcess.run(["write", sim.target, "scannerAction", "cancelScan"])
        XCTAssertEqual(byName.stdout, "wrote 1 byte to 0x0014 (Write Request, confirmed)\n", byName.stderr)
        let bad = try MirrorProcess.run(["write", sim.target, "scannerAction", "launch"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("not a name of scannerAction's values; the profile names wifiScan (0x31), initDeviceForScan (0x32), reboot (0x33), cancelScan (0x36)"), bad.stderr)
    }
}
