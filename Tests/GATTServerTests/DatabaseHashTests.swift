// The Database Hash (Core Spec 5.4 Vol 3 Part G §7.3) and the AES-CMAC under it: RFC 4493's vectors, the spec's
// example database (Part G Appendix B), hand-built databases against openssl's CMAC over bytes assembled here
// independently, and the client's hash of what it discovered over a socket equal to the server's.
import ATTStack
import Foundation
import GATTClient
import GATTServer
import LinuxBluetooth
import LinkCore
import TestSupport
import XCTest
import GATTVocabulary

final class DatabaseHashTests: XCTestCase {
    func testAESCMACMatchesTheRFC4493Vectors() throws {
        let key = packed("2b7e151628aed2a6abf7158809cf4f3c")
        let m = packed("6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51 30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710")
        XCTAssertEqual(show(try AESCMAC.mac(key: key, message: [])), show(packed("bb1d6929e95937287fa37d129b756746")))
        XCTAssertEqual(show(try AESCMAC.mac(key: key, message: Array(m[0..<16]))), show(packed("070a16b46b4d4144f79bdd9dd04a287c")))
        XCTAssertEqual(show(try AESCMAC.mac(key: key, message: Array(m[0..<40]))), show(packed("dfa66747de9ae63030ca32611497c827")))
        XCTAssertEqual(show(try AESCMAC.mac(key: key, message: m)), show(packed("51f0bebf7e3b9d92fc49741779363cfe")))
    }

    /// The example of Vol 3 Part G Appendix B: GAP, GATT (Service Changed, Client Supported Features, Database
    /// Hash), Glucose including the secondary Battery service, a characteristic with Extended Properties.
    static let specExample = AttributeDatabase { db in
        db.service(.genericAccess)                                              // 0x0001
        db.characteristic(.deviceName, [.read, .write])                         // 0x0002-0x0003
        db.characteristic(.appearance, [.read])                                 // 0x0004-0x0005
        db.service(.genericAttribute)                                           // 0x0006
        db.characteristic(.serviceChanged, [.indicate])                         // 0x0007-0x0009 (CCCD)
        db.characteristic(.clientSupportedFeatures, [.read, .write])            // 0x000A-0x000B
        db.characteristic(.databaseHash, [.read])                               // 0x000C-0x000D
        db.service(.bit16(0x1808))                                              // 0x000E Glucose
        db.include(start: 0x0014, end: 0x0016, uuid: .batteryService)           // 0x000F
        db.characteristic(.bit16(0x2A18), [.read, .indicate, .extendedProperties]) // 0x0010-0x0012 (CCCD)
        db.descriptor(.characteristicExtendedProperties, value: [0x00, 0x00])   // 0x0013
        db.service(.batteryService, primary: false)                             // 0x0014
        db.characteristic(.batteryLevel, [.read])                               // 0x0015-0x0016
    }

    func testTheSpecExampleDatabaseHashesToAppendixBsValue() throws {
        // Appendix B's message, attribute by attribute (handle, type, value where §7.3.1 says so).
        let expected = packed("""
            0100 0028 0018  0200 0328 0a0300002a  0400 0328 0205 00012a  0600 0028 0118
            0700 0328 200800052a  0900 0229  0a00 0328 0a0b00292b  0c00 0328 020d002a2b
            0e00 0028 0818  0f00 0228 140016000f18  1000 0328 a21100182a  1200 0229  1300 0029 0000
            1400 0128 0f18  1500 0328 021600192a
            """)
        let attributes = Self.specExample.attributes.map { GATTHashAttribute(handle: $0.handle, type: $0.type, value: $0.value) }
        XCTAssertEqual(show(GATTDatabaseHash.message(attributes)), show(expected))
        XCTAssertEqual(show(try Self.specExample.databaseHash()), show(packed("f1ca2d48ecf58bac8a8830bbb9fba990")))
        XCTAssertEqual(try Self.specExample.databaseHash(), try openSSLCMAC(expected))
    }

    func testTheServedValueMatchesInEitherOctetOrder() throws {
        // Appendix B's value (AES-CMAC's output, checked above against `openssl mac ... CMAC`) as bluetoothd serves it,
        // and reversed, as Zephyr serves it (gatt.c db_hash_gen: "PTS expects hash to be in little endianness").
        let t = packed("f1ca2d48ecf58bac8a8830bbb9fba990")
        XCTAssertEqual(GATTDatabaseHash.order(computed: t, served: t), .bluez)
        XCTAssertEqual(GATTDatabaseHash.order(computed: t, served: packed("90a9fbb9bb30888aac8bf5ec482dcaf1")), .pts)
        XCTAssertEqual(GATTHashOrder.pts.served(t), packed("90a9fbb9bb30888aac8bf5ec482dcaf1"))
        XCTAssertNil(GATTDatabaseHash.order(computed: t, served: packed("f1ca2d48ecf58bac8a8830bbb9fba991")))
    }

    func testValuesOutsideTheDeclarationsDoNotChangeTheHashAndHandlesDo() throws {
        // A 128-bit service and characteristic, a user description and a presentation format (handle and type
        // only), a characteristic value (not hashed at all).
        let service = BluetoothUUID(string: "6d697272-6f72-7369-6d00-000000000000")!
        let char = BluetoothUUID(string: "6d697272-6f72-7369-6d00-000000000001")!
        func build(description: String, value: [UInt8], padFirst: Bool) -> AttributeDatabase {
            AttributeDatabase { db in
                if padFirst { db.service(.genericAccess) }
                db.service(service)
                db.characteristic(char, [.read, .notify], value: value)
                db.descriptor(.characteristicUserDescription, value: Array(description.utf8))
                db.descriptor(.characteristicPresentationFormat, value: [0x04, 0x00, 0x27, 0x00, 0x01, 0x00, 0x00])
                db.descriptor(.bit16(0x2A00), value: [1, 2, 3])
            }
        }
        let a = build(description: "one", value: [1], padFirst: false)
        let b = build(description: "another", value: [2, 3], padFirst: false)
        let moved = build(description: "one", value: [1], padFirst: true)
        // Assembled here: 0x0001 service (128-bit UUID, little endian), 0x0002 declaration (notify|read, value
        // 0x0003), 0x0004 CCCD, 0x0005 user description, 0x0006 presentation format; 0x0007 is not hashed.
        let uuid = Array(packed("6d6972726f7273696d00000000000000").reversed())
        let charUUID = Array(packed("6d6972726f7273696d00000000000001").reversed())
        let m = packed("0100 0028") + uuid + packed("0200 0328 12 0300") + charUUID + packed("0400 0229 0500 0129 0600 0429")
        XCTAssertEqual(try a.databaseHash(), try openSSLCMAC(m))
        XCTAssertEqual(try a.databaseHash(), try b.databaseHash())
        XCTAssertNotEqual(try a.databaseHash(), try moved.databaseHash())
    }

    func testBlueZsRulesLeaveOutExtendedPropertiesAndLaterTheDescriptors() async throws {
        // What bluetoothd serves (src/shared/gatt-db.c gen_hash_m: never Extended Properties, and since 5.80 only
        // stored values), over a database discovered over a socket, against messages assembled here.
        let service = BluetoothUUID(string: "6d697272-6f72-7369-6d00-000000000000")!
        let char = BluetoothUUID(string: "6d697272-6f72-7369-6d00-000000000001")!
        let database = AttributeDatabase { db in
            db.service(service)                                                     // 0x0001
            db.characteristic(char, [.read, .notify, .extendedProperties], value: [1]) // 0x0002-0x0004 (CCCD)
            db.descriptor(.characteristicExtendedProperties, value: [0x01, 0x00])   // 0x0005
            db.descriptor(.characteristicUserDescription, value: Array("one".utf8)) // 0x0006
        }
        let services = try await discoveredForTheHash(database)
        let uuid = Array(packed("6d6972726f7273696d00000000000000").reversed())
        let charUUID = Array(packed("6d6972726f7273696d00000000000001").reversed())
        let declarations = packed("0100 0028") + uuid + packed("0200 0328 92 0300") + charUUID
        XCTAssertEqual(try GATTDatabaseHash.compute(services: services),
                       try openSSLCMAC(declarations + packed("0400 0229 0500 0029 0100 0600 0129")), "§7.3's")
        let bluez = try XCTUnwrap(try GATTDatabaseHash.blueZHashes(services: services))
        XCTAssertEqual(bluez.map(\.versions), ["BlueZ 5.79 and earlier", "BlueZ 5.80 and later"])
        XCTAssertEqual(bluez[0].hash, try openSSLCMAC(declarations + packed("0400 0229 0600 0129")), "without Extended Properties")
        XCTAssertEqual(bluez[1].hash, try openSSLCMAC(declarations), "the declarations alone")
    }

    func testTheClientsHashOfWhatItDiscoveredEqualsTheServersOverASocket() async throws {
        let (host, client) = try await connected(to: Self.specExample)
        defer { withExtendedLifetime(host) {} }
        defer { client.close(reason: "test over") }
        var services = try await client.discoverDatabase()
        XCTAssertNil(try GATTDatabaseHash.compute(services: services), "the Extended Properties value is not read yet")
        try await client.readHashedValues(&services)
        XCTAssertEqual(try GATTDatabaseHash.compute(services: services), try Self.specExample.databaseHash())
    }

    func testASecondaryServiceNoIncludeReachesIsFoundForTheHash() async throws {
        let database = AttributeDatabase { db in
            db.service(.genericAccess)
            db.characteristic(.deviceName, [.read], value: [0x41])
            db.service(.batteryService, primary: false)
            db.characteristic(.batteryLevel, [.read, .notify], value: [50])
            db.service(.heartRate)
            db.characteristic(.heartRateMeasurement, [.notify])
        }
        let (host, client) = try await connected(to: database)
        defer { withExtendedLifetime(host) {} }
        defer { client.close(reason: "test over") }
        var services = try await client.discoverDatabase()
        XCTAssertEqual(services.map(\.uuid), [.genericAccess, .heartRate], "no include reaches the battery service")
        try await client.readHashedValues(&services)
        XCTAssertEqual(services.map(\.uuid), [.genericAccess, .batteryService, .heartRate])
        XCTAssertEqual(services[1].isPrimary, false)
        XCTAssertEqual(services[1].characteristics.first?.descriptors.map(\.uuid), [.clientCharacteristicConfiguration])
        XCTAssertEqual(try GATTDatabaseHash.compute(services: services), try database.databaseHash())
    }

    /// A client connected over a socket pair to a server of `database` (MTU 23); the server lives as long as `host`.
    func connected(to database: AttributeDatabase) async throws -> (host: GATTServerHost, client: GATTClient) {
        let host = GATTServerHost(database: database, serverRxMTU: 23)
        let (a, b) = try ATTBearer.pair()
        _ = host.attach(b)
        return (host, try await GATTClient.connect(transport: a))
    }

    /// `database` as a client discovers it over a socket, with the values the hash reads.
    func discoveredForTheHash(_ database: AttributeDatabase) async throws -> [GATTService] {
        let (host, client) = try await connected(to: database)
        defer { withExtendedLifetime(host) {} }
        defer { client.close(reason: "test over") }
        var services = try await client.discoverDatabase()
        try await client.readHashedValues(&services)
        return services
    }

    /// openssl's CMAC (its CLI, a separate implementation path) over `message`, with a zero key.
    func openSSLCMAC(_ message: [UInt8]) throws -> [UInt8] {
        let path = NSTemporaryDirectory() + "db-hash-\(UInt32.random(in: 0...UInt32.max)).bin"
        try Data(message).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["openssl", "mac", "-cipher", "AES-128-CBC", "-macopt", "hexkey:" + String(repeating: "00", count: 16),
                       "-in", path, "CMAC"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let watchdog = ProcessWatchdog(p, "openssl mac")
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertNil(watchdog.end())
        XCTAssertEqual(p.terminationStatus, 0, "openssl mac")
        return packed(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// "0a03 002a" -> [0x0A, 0x03, 0x00, 0x2A]: hex digits in pairs, whitespace ignored.
private func packed(_ s: String) -> [UInt8] {
    let digits = Array(s.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}
