import TestSupport
import ATTStack
import Foundation
import GATTVocabulary
import JSON
@testable import Mirror
import XCTest

final class MirrorProfileTests: XCTestCase {
    func testBundledProfileMatchesTheShippedFileAndTheMirrorsEnums() throws {
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
        XCTAssertEqual(p.resultEntries, ["mesh.ply", "measurements.json"])
        XCTAssertEqual(p.characteristicName(p.scanError), "scanError")
    }

    func profileJSON(removing path: [String], adding extra: [(String, JSONValue)] = []) throws -> Data {
        var root = try parseJSON(MirrorProfile.bundledJSON)
        if path.count == 1 { root[path[0]] = nil }
        if path.count == 2 { root[path[0]]?[path[1]] = nil }
        for (k, v) in extra { root[k] = v }
        return Data(root.compact.utf8)
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
        XCTAssertThrowsError(try MirrorProfile.parse(Data("{".utf8), source: "bad.json")) { error in
            XCTAssertEqual("\(error)", "profile bad.json: not valid JSON (invalid JSON at byte 1: unexpected end)")
        }
        XCTAssertThrowsError(try MirrorProfile.parse(profileJSON(removing: [], adding: [("commands", .object([("wifiScan", "x")]))]),
                                                     source: "p.json")) { error in
            XCTAssertEqual("\(error)", #"profile p.json: command "wifiScan": x is not a byte (0-255)"#)
        }
        XCTAssertThrowsError(try MirrorProfile.load(path: "/nonexistent/profile.json"))
    }

    /// resultEntries is optional (none: any readable ZIP will do) and must be an array of names.
    func testResultEntriesAreOptionalAndMustBeNames() throws {
        XCTAssertEqual(try MirrorProfile.parse(profileJSON(removing: ["resultEntries"]), source: "p.json").resultEntries, [])
        XCTAssertThrowsError(try MirrorProfile.parse(profileJSON(removing: [], adding: [("resultEntries", .array([.string("a"), .int(1)]))]),
                                                     source: "p.json")) { error in
            XCTAssertEqual("\(error)", #"profile p.json: "resultEntries": ["a",1] is not an array of names"#)
        }
    }

    func testExtraCharacteristicsAndEnumValuesAreAllowed() throws {
        var root = try parseJSON(MirrorProfile.bundledJSON)
        root["characteristics"]?["batteryLevel"] = "2a19"
        root["scanErrors"]?["12"] = "scaleLowBattery"
        let p = try MirrorProfile.parse(Data(root.compact.utf8), source: "extra")
        XCTAssertEqual(p.uuid("batteryLevel"), .bit16(0x2A19))
        XCTAssertEqual(p.scanErrorName(12), "scaleLowBattery")
    }
    /// A characteristic may be an object with its UUID and what its value asks of the link (Vol 3 Part F §3.2.5):
    /// "security" (encrypted, authenticated) and "minKeySize" (7...16; alone, it asks for encryption).
    func testCharacteristicSecurityIsParsedAndABadValueIsRefusedNamingTheFileAndField() throws {
        func profile(_ name: String, _ entry: JSONValue) throws -> MirrorProfile {
            var root = try parseJSON(MirrorProfile.bundledJSON)
            root["characteristics"]?[name] = entry
            return try MirrorProfile.parse(Data(root.compact.utf8), source: "p.json")
        }
        let uuid: JSONValue = "6d697272-6f72-7369-6d00-000000000003"
        let p = try profile("cloudToken", .object([("uuid", uuid), ("security", "authenticated")]))
        XCTAssertEqual(p.cloudToken, MirrorProfile.bundled.cloudToken)
        XCTAssertEqual(p.security, ["cloudToken": .authenticated])
        XCTAssertEqual(try profile("cloudToken", .object([("uuid", uuid), ("minKeySize", 16)])).security,
                       ["cloudToken": GATTSecurityRequirement(level: .medium, minimumKeySize: 16)])
        XCTAssertEqual(try profile("cloudToken", .object([("uuid", uuid), ("security", "authenticated"), ("minKeySize", 7)])).security,
                       ["cloudToken": GATTSecurityRequirement(level: .high, minimumKeySize: 7)])
        XCTAssertEqual(try profile("cloudToken", .object([("uuid", uuid)])).security, [:])
        XCTAssertEqual(MirrorProfile.bundled.security, [:], "the bundled profile asks for nothing")
        let bad: [(JSONValue, String)] = [
            (.object([("uuid", uuid), ("security", "secret")]), #""security": secret is not one of "encrypted", "authenticated""#),
            (.object([("uuid", uuid), ("security", 2)]), #""security": 2 is not one of "encrypted", "authenticated""#),
            (.object([("uuid", uuid), ("minKeySize", 6)]), #""minKeySize": 6 is not a key size in octets (7...16)"#),
            (.object([("uuid", uuid), ("minKeySize", 17)]), #""minKeySize": 17 is not a key size in octets (7...16)"#),
            (.object([("uuid", uuid), ("minKeySize", "16")]), #""minKeySize": 16 is not a key size in octets (7...16)"#),
            (.object([("uuid", uuid), ("securty", "encrypted")]), #"unknown field "securty" ("uuid", "security", "minKeySize")"#),
            (.object([("security", "encrypted")]), #""uuid": missing, expected a UUID string"#),
            (.object([("uuid", "nope")]), #""uuid": nope, expected a UUID string"#),
            (.int(3), "3 is not a UUID string (or an object with \"uuid\")"),
        ]
        for (entry, problem) in bad {
            XCTAssertThrowsError(try profile("cloudToken", entry)) { error in
                XCTAssertEqual("\(error)", #"profile p.json: characteristic "cloudToken": "# + problem)
            }
        }
    }

    /// The values `write` takes by name: each enum the profile names, turned name to byte; none for other characteristics.
    func testNamedValuesAreTheProfilesEnumsByName() {
        let p = MirrorProfile.bundled
        XCTAssertEqual(p.namedValues(of: "scannerAction"), p.commands)
        XCTAssertEqual(p.namedValues(of: "scanState")?["invalid"], p.scanStates.first { $0.value == "invalid" }?.key)
        XCTAssertEqual(p.namedValues(of: "scanError")?.count, p.scanErrors.count)
        XCTAssertEqual(p.namedValues(of: "wifiConnectionStatus").map { Set($0.values) }, Set(p.wifiConnectionStatuses.keys))
        XCTAssertNil(p.namedValues(of: "cloudToken"))
        XCTAssertNil(p.namedValues(of: nil))
    }
}
