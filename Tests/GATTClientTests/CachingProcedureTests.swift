// The GATT caching procedures byte for byte against scripted peers (Core Spec 5.4 Vol 3 Part G §7.3, §7.1): the
// Database Hash in one Read By Type, the values the hash covers that discovery does not return, and discovery
// of the range a Service Changed indication names.
import TestSupport
import ATTStack
import XCTest
@testable import GATTClient
import GATTVocabulary

final class CachingProcedureTests: XCTestCase {
    func testTheDatabaseHashIsOneReadByTypeAndNilWhenThePeerHasNone() async throws {
        let hash = "f1 ca 2d 48 ec f5 8b ac 8a 88 30 bb b9 fb a9 90"
        let peer = ScriptedPeer(raw("08 01 00 ff ff 2a 2b", "09 12 0d 00 " + hash) + raw("08 01 00 ff ff 2a 2b", "01 08 01 00 0a"))
        let client = try await makeClient(peer)
        let found = try await within { try await client.readDatabaseHash() }
        XCTAssertEqual(found?.handle, 0x000D)
        XCTAssertEqual(found.map { show($0.value) }, hash)
        let none = try await within { try await client.readDatabaseHash() }
        XCTAssertNil(none)
        peer.assertScriptDone()
    }

    /// A secondary service no include reaches (found by Read By Group Type of 0x2801) and an Extended Properties
    /// value (read by a Read Request) complete a discovered database for the hash.
    func testReadHashedValuesFindsUnincludedSecondariesAndReadsExtendedProperties() async throws {
        let peer = ScriptedPeer(
            raw("10 01 00 ff ff 01 28", "11 06 05 00 07 00 0f 18")
            + raw("10 08 00 ff ff 01 28", "01 10 08 00 0a")
            + raw("08 05 00 07 00 03 28", "09 07 06 00 02 07 00 19 2a")
            + raw("08 07 00 07 00 03 28", "01 08 07 00 0a")
            + raw("0a 04 00", "0b 01 00"))
        let client = try await makeClient(peer)
        let services = [GATTService(uuid: .genericAccess, startHandle: 1, endHandle: 4, characteristics: [
            GATTCharacteristic(uuid: .deviceName, declarationHandle: 2, valueHandle: 3, properties: [.read, .extendedProperties],
                               endHandle: 4, descriptors: [GATTDescriptor(handle: 4, uuid: .characteristicExtendedProperties)]),
        ])]
        XCTAssertNil(try GATTDatabaseHash.compute(services: services), "the Extended Properties value is unknown")
        let completed = try await within { () async throws -> [GATTService] in
            var s = services
            try await client.readHashedValues(&s)
            return s
        }
        XCTAssertEqual(completed.map(\.uuid), [.genericAccess, .batteryService])
        XCTAssertEqual(completed[1].isPrimary, false)
        XCTAssertEqual(completed[1].characteristics.map(\.valueHandle), [0x07])
        XCTAssertEqual(completed[0].characteristics[0].descriptors[0].value, [0x01, 0x00])
        XCTAssertNotNil(try GATTDatabaseHash.compute(services: completed))
        peer.assertScriptDone()
    }

    /// Discovery of the range 0x000E-0xFFFF (a Service Changed indication's): the services declared there only.
    func testDiscoverDatabaseInARangeStartsAndEndsThere() async throws {
        let peer = ScriptedPeer(
            raw("10 0e 00 ff ff 00 28", "11 06 0e 00 10 00 0d 18")
            + raw("10 11 00 ff ff 00 28", "01 10 11 00 0a")
            + raw("08 0e 00 10 00 02 28", "01 08 0e 00 0a")
            + raw("08 0e 00 10 00 03 28", "09 07 0f 00 10 10 00 37 2a")
            + raw("08 10 00 10 00 03 28", "01 08 10 00 0a"))
        let client = try await makeClient(peer)
        let found = try await within { try await client.discoverDatabase(in: ATTHandleRange(start: 0x000E, end: 0xFFFF)) }
        XCTAssertEqual(found.map(\.uuid), [.heartRate])
        XCTAssertEqual(found[0].characteristics.map(\.valueHandle), [0x10])
        peer.assertScriptDone()
    }
}
