import TestSupport
import ATTStack
import Foundation
@testable import Mirror
import XCTest

final class MirrorProfileTests: XCTestCase {
    func testBundledProfileMatchesTheShippedFileAndTheSeedsEnums() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("profiles/mirror-sim.json")
        let text = try String(contentsOf: file, encoding: .utf8)
        XCTAssertEqual(text.trimmingCharacters(in: .whitespacesAndNewlines), MirrorProfile.bundledJSON.trimmingCharacters(in: .whitespacesAndNewlines))
        let p = MirrorProfile.bundled
        XCTAssertEqual(try MirrorProfile.load(path: file.path), p)
        XCTAssertEqual((0...9).map { p.scanStateName($0) },
                       ["invalid", "alignScale", "warmingUp", "waitingForWeight", "countDown", "preCheck", "scanning", "postCheck", "complete", "error"])
        XCTAssertEqual([0, 1, 2, 3, 4, 5, 6, 11].map { p.scanErrorName($0) },
                       ["invalid", "noError", "scaleNotDetected", "scaleNotLevel", "mirrorNotLevel", "processorBusy", "internalError", "scaleAlignment"])
        XCTAssertEqual(p.scanErrorName(7), "unknown(0x07)")
        XCTAssertEqual(p.scanStateName(0xAB), "unknown(0xAB)")
        XCTAssertEqual([p.wifiScanCommand, p.initDeviceForScanCommand, p.rebootCommand, p.cancelScanCommand], [0x31, 0x32, 0x33, 0x36])
        XCTAssertEqual(p.cloudTokenMaxLength, 40)
        XCTAssertEqual(p.characteristicName(p.scanError), "scanError")
    }

    func profileJSON(removing path: [String], adding extra: [String: Any] = [:]) throws -> Data {
        var root = try JSONSerialization.jsonObject(with: Data(MirrorProfile.bundledJSON.utf8)) as! [String: Any]
        if path.count == 1 { root[path[0]] = nil }
        if path.count == 2, var inner = root[path[0]] as? [String: Any] { inner[path[1]] = nil; root[path[0]] = inner }
        for (k, v) in extra { root[k] = v }
        return try JSONSerialization.data(withJSONObject: root)
    }

    func testMissingRequiredEntriesAreNamed() throws {
        for (path, expected) in [(["characteristics", "cloudToken"], "missing required characteristic \"cloudToken\""),
                                 (["commands", "cancelScan"], "missing required command \"cancelScan\""),
                                 (["cloudTokenMaxLength"], "missing \"cloudTokenMaxLength\""),
                                 (["scanStates", "9"], "\"scanStates\" has no \"error\" value"),
                                 (["service"], "missing \"service\"")] {
            XCTAssertThrowsError(try MirrorProfile.parse(profileJSON(removing: path), source: "p.json")) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(error)")
                XCTAssertTrue("\(error)".hasPrefix("profile p.json: "), "\(error)")
            }
        }
        XCTAssertThrowsError(try MirrorProfile.parse(Data("{".utf8), source: "bad.json"))
        XCTAssertThrowsError(try MirrorProfile.load(path: "/nonexistent/profile.json"))
    }

    func testExtraCharacteristicsAndEnumValuesAreAllowed() throws {
        var root = try JSONSerialization.jsonObject(with: Data(MirrorProfile.bundledJSON.utf8)) as! [String: Any]
        var chars = root["characteristics"] as! [String: Any]
        chars["batteryLevel"] = "2a19"
        root["characteristics"] = chars
        var errors = root["scanErrors"] as! [String: Any]
        errors["12"] = "scaleLowBattery"
        root["scanErrors"] = errors
        let p = try MirrorProfile.parse(JSONSerialization.data(withJSONObject: root), source: "extra")
        XCTAssertEqual(p.uuid("batteryLevel"), .bit16(0x2A19))
        XCTAssertEqual(p.scanErrorName(12), "scaleLowBattery")
    }
}
