// The simulator's attribute security (Core Spec 5.4 Vol 3 Part F §3.2.5, §3.4.1.1): the profile's `security` and
// `--secure`, served byte for byte, over unix: with the link the simulator plays, and the options' parsing.
import TestSupport
import ATTStack
import GATTVocabulary
import LinuxBluetooth
import LinkCore
import Dispatch
import Foundation
import GATTClient
import JSON
import Mirror
@testable import MirrorSimulator
import XCTest

final class SimulatorSecurityTests: XCTestCase {
    func testSecureNamesACharacteristicALevelAndAKeySizeAndRefusesAnythingElse() throws {
        var o = SimOptions()
        try o.set("secure", "cloudToken")
        try o.set("secure", "scannerAction:authenticated")
        try o.set("secure", "wifiSetSSID:encrypted:12")
        try o.set("secure", "deviceName:authenticated:16")
        XCTAssertEqual(o.secure, ["cloudToken": .encrypted, "scannerAction": .authenticated,
                                  "wifiSetSSID": GATTSecurityRequirement(level: .medium, minimumKeySize: 12),
                                  "deviceName": GATTSecurityRequirement(level: .high, minimumKeySize: 16)])
        for (value, problem) in [("nothing", #"no characteristic "nothing""#), ("cloudToken:secret", "secret is neither encrypted or authenticated nor a key size (7...16)"),
                                 ("cloudToken:encrypted:6", "6 is neither"), ("", "not CHAR[:LEVEL[:KEYSIZE]]"),
                                 ("cloudToken:encrypted:16:1", "not CHAR[:LEVEL[:KEYSIZE]]")] {
            XCTAssertThrowsError(try o.set("secure", value), value) { error in
                let text = (error as? SimOptionsError)?.problem ?? ""
                XCTAssertTrue(text.hasPrefix("--secure \(value): ") && text.contains(problem), text)
                XCTAssertTrue(text.hasSuffix("(expected CHAR[:encrypted|authenticated][:KEYSIZE])"), text)
            }
        }
        try o.set("unix-security", "encrypted:7")
        XCTAssertEqual(o.unixSecurity, .encrypted(keySize: 7))
        try o.set("unix-security", "authenticated")
        XCTAssertEqual(o.unixSecurity, .authenticated(keySize: 16))
        try o.set("unix-security", "none")
        XCTAssertEqual(o.unixSecurity, .unencrypted)
        for bad in ["none:16", "encrypted:5", "high", "authenticated:16:1"] {
            XCTAssertThrowsError(try o.set("unix-security", bad), bad)
        }
        // A scenario file takes them as the flags do; --secure goes over the profile's own.
        var s = SimOptions()
        try s.apply(scenario: Data(#"{"secure":["cloudToken:authenticated","scanState"],"unix-security":"encrypted"}"#.utf8), source: "test")
        XCTAssertEqual(s.secure, ["cloudToken": .authenticated, "scanState": .encrypted])
        XCTAssertEqual(s.unixSecurity, .encrypted())
        s.profile.security = ["cloudToken": .encrypted, "wifiSetSSID": .encrypted]
        XCTAssertEqual(s.effectiveSecurity, ["cloudToken": .authenticated, "scanState": .encrypted, "wifiSetSSID": .encrypted])
    }

    func makeSim(_ configure: (inout SimOptions) -> Void) -> (SimulatedMirror, ScriptedPeer, LineLog) {
        var options = SimOptions()
        configure(&options)
        let log = LineLog()
        let sim = SimulatedMirror(options: options, log: { log.append($0) })
        let t = ScriptedPeer(unscripted: "test-double")
        sim.attach(t)
        return (sim, t, log)
    }

    func testSecuredValuesAreRefusedOnAnUnencryptedLinkAndServedOnceItSuffices() throws {
        let (sim, t, log) = makeSim { o in
            o.secure = ["cloudToken": .encrypted, "scannerAction": .authenticated, "scanState": .encrypted,
                        "deviceName": .encrypted, "wifiSetSSID": GATTSecurityRequirement(level: .medium, minimumKeySize: 16)]
            o.initialScanState = 9
            o.initialScanError = 5
        }
        defer { withExtendedLifetime(sim) {} }
        let token = sim.valueHandle("cloudToken")!, action = sim.valueHandle("scannerAction")!
        let state = sim.valueHandle("scanState")!, ssid = sim.valueHandle("wifiSetSSID")!
        XCTAssertEqual(sim.valueHandle("deviceName"), 0x0003)
        XCTAssertEqual(show(t.request([0x0A, 0x03, 0x00])), "01 0a 03 00 0f")
        XCTAssertEqual(show(t.request([0x0A] + le16(token))), show([0x01, 0x0A] + le16(token) + [0x0F]))
        XCTAssertEqual(show(t.request([0x12] + le16(token) + [0x41])), show([0x01, 0x12] + le16(token) + [0x0F]))
        XCTAssertEqual(show(t.request([0x12] + le16(action) + [0x36])), show([0x01, 0x12] + le16(action) + [0x05]))
        XCTAssertEqual(show(t.request([0x12] + le16(state + 1) + [0x01, 0x00])), show([0x01, 0x12] + le16(state + 1) + [0x0F]),
                       "a subscription to a secured value needs its security")
        // The Write Command (cancelScan) has no answer and no effect: the latched ERROR stays.
        t.inject([0x52] + le16(action) + [0x36])
        XCTAssertEqual(show(t.request([0x0A] + le16(state))), show([0x01, 0x0A] + le16(state) + [0x0F]))
        XCTAssertEqual(sim.snapshot.scanState, 9)
        XCTAssertTrue(log.all.contains { $0.hasSuffix("conn 1: Error Response 0x0F Insufficient Encryption to Read Request handle 0x3 (link: low)") },
                      log.all.joined(separator: "\n"))
        XCTAssertTrue(log.all.contains { $0.contains("conn 1: Write Command to handle \(ATTHex.short(action)) dropped: 0x05 Insufficient Authentication (link: low)") },
                      log.all.joined(separator: "\n"))

        sim.setLinkSecurity(.encrypted(keySize: 7))
        XCTAssertEqual(show(t.request([0x0A, 0x03, 0x00])), show([0x0B] + Array("mirror-sim".utf8)))
        XCTAssertEqual(show(t.request([0x12] + le16(token) + [0x41])), "13")
        XCTAssertEqual(show(t.request([0x12] + le16(ssid) + Array("Guest".utf8))), show([0x01, 0x12] + le16(ssid) + [0x0C]))
        XCTAssertEqual(show(t.request([0x12] + le16(action) + [0x36])), show([0x01, 0x12] + le16(action) + [0x05]))
        sim.setLinkSecurity(.authenticated())
        t.inject([0x52] + le16(action) + [0x36])
        XCTAssertEqual(show(t.request([0x0A] + le16(state))), "0b 00", "cancelScan applied once the link is authenticated")
        XCTAssertEqual(show(t.request([0x12] + le16(ssid) + Array("Guest".utf8))), "13")
        // Unsecured values were never refused.
        XCTAssertEqual(show(t.request([0x0A] + le16(sim.valueHandle("scanError")!))), "0b 00")
    }

    func testTheProfilesSecurityIsServedAndTheOptionsGoOverIt() throws {
        var root = try parseJSON(MirrorProfile.bundledJSON)
        root["characteristics"]?["cloudToken"] = .object([("uuid", "6d697272-6f72-7369-6d00-000000000003"), ("security", "authenticated")])
        let profile = try MirrorProfile.parse(Data(root.compact.utf8), source: "secure.json")
        let (sim, t, _) = makeSim { $0.profile = profile }
        let token = sim.valueHandle("cloudToken")!
        XCTAssertEqual(show(t.request([0x0A] + le16(token))), show([0x01, 0x0A] + le16(token) + [0x05]))
        let (sim2, t2, _) = makeSim { $0.profile = profile; $0.secure["cloudToken"] = .encrypted; $0.unixSecurity = .encrypted() }
        XCTAssertEqual(show(t2.request([0x0A] + le16(sim2.valueHandle("cloudToken")!))), "0b", "--secure over the profile's: encrypted is enough")
        // The bundled profile asks for nothing.
        XCTAssertEqual(MirrorProfile.bundled.security, [:])
        let (sim3, t3, _) = makeSim { _ in }
        XCTAssertEqual(show(t3.request([0x0A] + le16(sim3.valueHandle("cloudToken")!))), "0b")
    }

    /// Over unix: the GATT client gets the peer's typed error for each code, the simulator playing the link.
    func testOverUnixTheClientSeesEachCodeAndTheLinkTheSimulatorPlays() async throws {
        let harness = try SimHarness { o in
            o.secure = ["cloudToken": .authenticated, "wifiSetSSID": GATTSecurityRequirement(level: .medium, minimumKeySize: 16),
                        "scanState": .encrypted]
        }
        defer { harness.stop() }
        let client = try await harness.connect()
        defer { client.close() }
        let token = harness.sim.valueHandle("cloudToken")!, ssid = harness.sim.valueHandle("wifiSetSSID")!
        let state = harness.sim.valueHandle("scanState")!
        func code(_ body: () async throws -> Void) async -> ATTErrorCode? {
            do { try await body(); return nil } catch { return (error as? GATTError)?.attributeError?.code }
        }
        let readState = await code { _ = try await client.read(handle: state) }
        XCTAssertEqual(readState, .insufficientEncryption)
        let subscribe = await code { try await client.write(handle: state + 1, value: [0x01, 0x00]) }
        XCTAssertEqual(subscribe, .insufficientEncryption)
        let readToken = await code { _ = try await client.read(handle: token) }
        XCTAssertEqual(readToken, .insufficientAuthentication)
        harness.sim.setLinkSecurity(.encrypted(keySize: 10))
        let writeSSID = await code { try await client.write(handle: ssid, value: Array("Guest".utf8)) }
        XCTAssertEqual(writeSSID, .encryptionKeySizeTooShort)
        let stillToken = await code { try await client.write(handle: token, value: Array("http://h/".utf8)) }
        XCTAssertEqual(stillToken, .insufficientAuthentication)
        try await client.write(handle: state + 1, value: [0x01, 0x00])
        harness.sim.setLinkSecurity(.authenticated())
        try await client.write(handle: ssid, value: Array("Guest".utf8))
        let value = try await client.read(handle: token)
        XCTAssertEqual(value, [])

        // --unix-security: every unix: connection plays that link from its start.
        let authenticated = try SimHarness { o in o.secure = ["cloudToken": .authenticated]; o.unixSecurity = .authenticated() }
        defer { authenticated.stop() }
        let second = try await authenticated.connect()
        defer { second.close() }
        let served = try await second.read(handle: authenticated.sim.valueHandle("cloudToken")!)
        XCTAssertEqual(served, [])
    }
}
