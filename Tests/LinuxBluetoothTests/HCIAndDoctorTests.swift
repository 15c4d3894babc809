import TestSupport
import Foundation
import JSON
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

/// HCI command bytes, event parsing and capabilities (the doctor's findings: HostEnvironmentTests).
final class HCICommandTests: XCTestCase {
    func testLECommandEncodings() {
        let p = HCICommand.leSetAdvertisingParameters(intervalMilliseconds: 100)
        XCTAssertEqual(p.opcode, 0x2006)
        XCTAssertEqual(p.parameters, [0xA0, 0x00, 0xA0, 0x00, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0x07, 0x00])
        let d = HCICommand.leSetAdvertisingData(HCICommand.advertisingData(name: "mirror"))
        XCTAssertEqual(d.opcode, 0x2008)
        XCTAssertEqual(d.parameters.count, 32)
        XCTAssertEqual(Array(d.parameters.prefix(12)), [11, 0x02, 0x01, 0x06, 0x07, 0x09] + Array("mirror".utf8))
        XCTAssertEqual(HCICommand.leSetAdvertisingEnable(true).opcode, 0x200A)
        // The scan response is laid out as the advertising data: its length, then 31 octets, zero-padded or cut.
        let r = HCICommand.leSetScanResponseData([0x02, 0x0A, 0x00])
        XCTAssertEqual(r.opcode, 0x2009)
        XCTAssertEqual(r.parameters, [3, 0x02, 0x0A, 0x00] + [UInt8](repeating: 0, count: 28))
        XCTAssertEqual(HCICommand.leSetScanResponseData([UInt8](repeating: 7, count: 40)).parameters, [31] + [UInt8](repeating: 7, count: 31))
        XCTAssertEqual(HCICommand.leSetScanResponseData([]).parameters, [UInt8](repeating: 0, count: 32))
        XCTAssertEqual(HCICommand.leSetScanParameters(active: true).parameters, [1, 0x10, 0, 0x10, 0, 0, 0])
        XCTAssertEqual(HCICommand.leSetScanEnable(true).opcode, 0x200C)
        // A name too long for 31 bytes becomes a Shortened Local Name.
        let long = HCICommand.advertisingData(name: String(repeating: "n", count: 40))
        XCTAssertEqual(long.count, 31)
        XCTAssertEqual(long[4], 0x08)
    }

    func testEventParsing() {
        XCTAssertEqual(HCIEvent.parse([0x04, 0x0E, 0x04, 0x01, 0x06, 0x20, 0x00]),
                       .commandComplete(opcode: 0x2006, returnParameters: [0x00]))
        XCTAssertEqual(HCIEvent.parse([0x04, 0x0F, 0x04, 0x0C, 0x01, 0x0A, 0x20]), .commandStatus(opcode: 0x200A, status: 0x0C))
        XCTAssertNil(HCIEvent.parse([0x04, 0x0E, 0x05, 0x01]))
        XCTAssertNil(HCIEvent.parse([0x02, 0x0E, 0x00]))
        // Two reports: ADV_IND from 00:AA:01:01:00:01 (public) named "sim", and a scan response (random).
        let ad: [UInt8] = [0x02, 0x01, 0x06, 0x04, 0x09] + Array("sim".utf8)
        var p: [UInt8] = [0x02, 0x02]
        p += [0x00, 0x00, 0x01, 0x00, 0x01, 0x01, 0xAA, 0x00, UInt8(ad.count)] + ad + [0xC4]
        p += [0x04, 0x01, 0x06, 0x05, 0x04, 0x03, 0x02, 0xC1, 0x00, 0x7F]
        guard case .leAdvertisingReports(let reports)? = HCIEvent.parse([0x04, 0x3E, UInt8(p.count)] + p) else { return XCTFail() }
        XCTAssertEqual(reports.count, 2)
        XCTAssertEqual(reports[0].address.description, "00:AA:01:01:00:01")
        XCTAssertEqual(reports[0].addressType, .public)
        XCTAssertEqual(reports[0].localName, "sim")
        XCTAssertEqual(reports[0].rssi, -60)
        XCTAssertTrue(reports[0].isConnectable)
        XCTAssertEqual(reports[1].address.description, "C1:02:03:04:05:06")
        XCTAssertEqual(reports[1].addressType, .random)
        XCTAssertFalse(reports[1].isConnectable)
        XCTAssertNil(reports[1].localName)
        // Cut short: no report is made up.
        XCTAssertNil(HCIEvent.parse([0x04, 0x3E, 0x05, 0x02, 0x01, 0x00, 0x00, 0x01]))
    }
}

/// Arbitrary input never crashes the parsers, and what they accept round-trips (seeded, so failures repeat).
final class ParserRobustnessTests: XCTestCase {
    func testRandomHCIEventsAndTargets() {
        var rng = SplitMix64(seed: 0x5EED)
        var reports = 0
        for _ in 0..<20_000 {
            var packet: [UInt8]
            if Bool.random(using: &rng) {
                // Well-formed advertising reports, then maybe cut short or with the length byte changed.
                var p: [UInt8] = [0x02, UInt8.random(in: 1...2, using: &rng)]
                for _ in 0..<Int(p[1]) {
                    let data = (0..<Int.random(in: 0...31, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    p += [UInt8.random(in: 0...4, using: &rng), UInt8.random(in: 0...3, using: &rng)]
                    p += (0..<6).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    p += [UInt8(data.count)] + data + [UInt8.random(in: 0...255, using: &rng)]
                }
                if Bool.random(using: &rng) { p = Array(p.prefix(Int.random(in: 0...p.count, using: &rng))) }
                if Bool.random(using: &rng), p.count > 10 { p[10] = UInt8.random(in: 0...255, using: &rng) }
                packet = [0x04, 0x3E, UInt8(truncatingIfNeeded: p.count)] + p
            } else {
                packet = [0x04, [0x0E, 0x0F, 0x3E, 0x05].randomElement(using: &rng)!]
                let body = (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                packet.append(UInt8(truncatingIfNeeded: Bool.random(using: &rng) ? body.count : Int.random(in: 0...255, using: &rng)))
                packet += body
            }
            if case .leAdvertisingReports(let r)? = HCIEvent.parse(packet) {
                reports += r.count
                for report in r { _ = report.localName }
            }
        }
        XCTAssertGreaterThan(reports, 0, "some random packets are valid reports")
        let alphabet = Array("0123456789abcdefABCDEFG:-/ unix\u{00e9}")
        var accepted = 0
        for _ in 0..<20_000 {
            var chars: [Character]
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: // an address, maybe with one character replaced, dropped or added
                chars = Array(ATTHex.string((0..<6).map { _ in UInt8.random(in: 0...255, using: &rng) }, separator: ":", uppercase: true))
                let i = Int.random(in: 0..<chars.count, using: &rng)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: chars[i] = alphabet.randomElement(using: &rng)!
                case 1: chars.remove(at: i)
                case 2: chars.insert(alphabet.randomElement(using: &rng)!, at: i)
                default: break
                }
            case 1: chars = Array("unix:") + (0..<Int.random(in: 0...8, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            default: chars = (0..<Int.random(in: 0...20, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            }
            let text = String(chars)
            do {
                let t = try BearerTarget(parsing: text)
                accepted += 1
                XCTAssertEqual(try BearerTarget(parsing: t.description), t)
            } catch {
                if let p = error.position { XCTAssertTrue(p >= 1 && p <= text.count + 1, "\(text): \(error)") }
            }
        }
        XCTAssertGreaterThan(accepted, 0)
    }
}

final class CapabilityTests: XCTestCase {
    private func capEff(_ status: String) -> UInt64? {
        for line in status.split(separator: "\n") where line.hasPrefix("CapEff:") {
            return UInt64(line.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16)
        }
        return nil
    }

    func testLibcapAgreesWithProcStatus() throws {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        XCTAssertEqual(try Capabilities.process().effective.rawValue, capEff(status))
        XCTAssertEqual(CapabilitySet.rawHCI.names, ["cap_net_admin", "cap_net_raw"])
        XCTAssertEqual(CapabilitySet(rawValue: 0).description, "none")
        XCTAssertTrue(Capabilities.executablePath().hasPrefix("/"))
        XCTAssertNil(try Capabilities.file("/bin/sh"), "/bin/sh carries no file capabilities")
        XCTAssertThrowsError(try Capabilities.file("/nonexistent/binary"))
    }

    /// Drops every capability in a child process (bearer-e2e drop-caps) and reads its CapEff before and after.
    func testDropAllInAChildProcessEndsWithNoCapabilities() throws {
        let ownBefore = capEff(try String(contentsOfFile: "/proc/self/status", encoding: .utf8))
        let testBinary = URL(fileURLWithPath: Capabilities.executablePath())
        let tool = testBinary.deletingLastPathComponent().appendingPathComponent("bearer-e2e")
        guard FileManager.default.isExecutableFile(atPath: tool.path) else {
            return XCTFail("\(tool.path) is missing: build it with `swift build --product bearer-e2e`")
        }
        let p = Process()
        p.executableURL = tool
        p.arguments = ["drop-caps"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let watchdog = ProcessWatchdog(p, "bearer-e2e drop-caps")
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertNil(watchdog.end())
        XCTAssertEqual(p.terminationStatus, 0, String(decoding: data, as: UTF8.self))
        let json = try parseJSON(bytes: Array(data))
        let before = try XCTUnwrap(json["before"]?.fields.map { Dictionary(uniqueKeysWithValues: $0.map { ($0.0, $0.1.string) }) })
        let after = try XCTUnwrap(json["after"]?.fields.map { Dictionary(uniqueKeysWithValues: $0.map { ($0.0, $0.1.string) }) })
        // The child starts with what this process has (root here: non-zero) and ends with nothing.
        XCTAssertEqual(UInt64((before["CapEff"] ?? nil) ?? "", radix: 16), ownBefore)
        if getuid() == 0 { XCTAssertNotEqual(before["CapEff"], "0000000000000000", "run as root, the child starts privileged") }
        XCTAssertEqual(after["CapEff"], "0000000000000000")
        XCTAssertEqual(after["CapPrm"], "0000000000000000")
        XCTAssertEqual(after["CapInh"], "0000000000000000")
        XCTAssertEqual(after["CapAmb"], "0000000000000000")
        XCTAssertEqual(json["libcap_effective_after"]?.string, "none")
        // This process keeps its own.
        XCTAssertEqual(capEff(try String(contentsOfFile: "/proc/self/status", encoding: .utf8)), ownBefore)
    }
}

/// The service UUIDs of advertising data (Core Spec Supplement Part A §1.1), `mirror discover`'s services column.
final class AdvertisingDataTests: XCTestCase {
    func testAdvertisedServices() {
        // Flags, complete 16-bit list (180d, 180f), complete 128-bit list, name.
        let uuid128 = BluetoothUUID(string: "6e400001-b5a3-f393-e0a9-e50e24dcca9e")!
        let data: [UInt8] = [2, 0x01, 0x06, 5, 0x03, 0x0D, 0x18, 0x0F, 0x18, 17, 0x07] + uuid128.littleEndianBytes
            + [4, 0x09, 0x41, 0x42, 0x43]
        XCTAssertEqual(LEAdvertisingReport.serviceUUIDs(in: data).map(\.description), ["180d", "180f", "6e400001-b5a3-f393-e0a9-e50e24dcca9e"])
        XCTAssertEqual(LEAdvertisingReport.serviceUUIDs(in: [5, 0x03, 0x0D]), [], "a truncated structure is ignored")
        let report = LEAdvertisingReport(eventType: 0, addressType: .public, address: BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6])!, data: data, rssi: -40)
        XCTAssertEqual(report.serviceUUIDs, LEAdvertisingReport.serviceUUIDs(in: data))
    }

    /// An RSSI of 127 is "not available" (Vol 4 Part E §7.7.65.2): `mirror discover`'s null, not 127 dBm.
    func testRSSI127IsNotAvailable() {
        var report = LEAdvertisingReport(eventType: 0, addressType: .public, address: BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6])!, data: [], rssi: -40)
        XCTAssertEqual(report.knownRSSI, -40)
        report.rssi = 127
        XCTAssertNil(report.knownRSSI)
        report.rssi = 126
        XCTAssertEqual(report.knownRSSI, 126)
    }
}
