// The simulator's GATT caching (`--caching yes`): the Database Hash it serves (Core Spec 5.4 Vol 3 Part G §7.3)
// equals the client's computation over what it discovers, Client Supported Features (§7.2) is kept per
// connection, and without the option the database is the one the README documents.
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Foundation
import GATTClient
import GATTServer
import Mirror
@testable import MirrorSimulator
import XCTest
import GATTVocabulary

final class SimulatorCachingTests: XCTestCase {
    func makeSim(caching: Bool) -> SimulatedMirror {
        var options = SimOptions()
        options.caching = caching
        return SimulatedMirror(options: options)
    }

    func peer(_ sim: SimulatedMirror) -> ScriptedPeer {
        let t = ScriptedPeer(unscripted: "test-double")
        sim.attach(t)
        return t
    }

    func testTheServedHashIsTheOneTheClientComputesOverWhatItDiscovers() async throws {
        let h = try SimHarness { $0.caching = true }
        defer { h.stop() }
        let client = try await h.connect()
        defer { client.close(reason: "test over") }
        let served = try await client.read(uuid: .databaseHash)
        XCTAssertEqual(served.map(\.handle), [0x000D], "GATT service: Service Changed 0x07-0x09, features 0x0A-0x0B, hash 0x0C-0x0D")
        var services = try await client.discoverDatabase()
        try await client.readHashedValues(&services)
        let computed = try XCTUnwrap(try GATTDatabaseHash.compute(services: services))
        // Served least significant octet first by default (PTS order); the client's §7.3 value is AES-CMAC's output.
        XCTAssertEqual(served.first?.value, Array(computed.reversed()))
        XCTAssertEqual(GATTDatabaseHash.order(computed: computed, served: served.first?.value ?? []), .pts)
        XCTAssertEqual(computed, try h.sim.database.databaseHash())
        XCTAssertEqual(computed.count, 16)
    }

    func testHashOrderBlueZServesAESCMACsOutputAsItComes() async throws {
        let h = try SimHarness { $0.caching = true; $0.hashOrder = .bluez }
        defer { h.stop() }
        let client = try await h.connect()
        defer { client.close(reason: "test over") }
        let served = try await client.read(uuid: .databaseHash)
        var services = try await client.discoverDatabase()
        try await client.readHashedValues(&services)
        let computed = try XCTUnwrap(try GATTDatabaseHash.compute(services: services))
        XCTAssertEqual(served.first?.value, computed)
        XCTAssertEqual(GATTDatabaseHash.order(computed: computed, served: computed), .bluez)
        XCTAssertNil(GATTDatabaseHash.order(computed: computed, served: Array(computed.dropFirst()) + [computed[0] ^ 1]))
    }

    func testTheMirrorServiceMovesUpByFourWithCachingAndStaysPutWithout() throws {
        let plain = makeSim(caching: false), caching = makeSim(caching: true)
        XCTAssertEqual(plain.valueHandle("scanState"), 0x000C, "the README's handle")
        XCTAssertEqual(caching.valueHandle("scanState"), 0x0010)
        XCTAssertNil(plain.database.handle(AttributeDatabase.databaseHashName))
        let t = peer(plain)
        // Read By Type 0x2B2A over the whole range: Attribute Not Found (0x0A) without caching.
        XCTAssertEqual(show(t.request(hex("08 01 00 ff ff 2a 2b"))), "01 08 01 00 0a")
        XCTAssertNotEqual(try plain.database.databaseHash(), try caching.database.databaseHash())
    }

    func testClientSupportedFeaturesIsPerConnectionAndABitSetStaysSet() throws {
        let sim = makeSim(caching: true)
        defer { sim.disconnectAll(reason: "test over") }
        let a = peer(sim), b = peer(sim)
        XCTAssertEqual(show(a.request(hex("0a 0b 00"))), "0b 00")
        XCTAssertEqual(show(a.request(hex("12 0b 00 01"))), "13", "robust caching on")
        XCTAssertEqual(show(a.request(hex("0a 0b 00"))), "0b 01")
        XCTAssertEqual(show(b.request(hex("0a 0b 00"))), "0b 00", "the other connection's own value")
        XCTAssertEqual(show(a.request(hex("12 0b 00 00"))), "01 12 0b 00 13", "clearing a bit: Value Not Allowed")
        XCTAssertEqual(show(a.request(hex("12 0b 00 03"))), "13", "setting one more")
        XCTAssertEqual(show(a.request(hex("0a 0b 00"))), "0b 03")
        // The hash itself is read only.
        XCTAssertEqual(show(a.request(hex("12 0d 00 00"))), "01 12 0d 00 03")
    }

    func testChangeDatabaseMovesHandlesIndicatesServiceChangedAndAnswersOutOfSyncToRobustClients() throws {
        var options = SimOptions()
        options.caching = true
        options.faults = [SimFault(.changeDatabase, "cloudToken")]
        let sim = SimulatedMirror(options: options)
        defer { sim.disconnectAll(reason: "test over") }
        let oldHash = try sim.database.databaseHash()
        let token = try XCTUnwrap(sim.valueHandle("cloudToken"))
        let a = peer(sim), b = peer(sim), c = peer(sim)
        // a: indications of Service Changed and robust caching; b: neither; c: robust caching only.
        XCTAssertEqual(show(a.request(hex("12 09 00 02 00"))), "13")
        XCTAssertEqual(show(a.request(hex("12 0b 00 01"))), "13")
        XCTAssertEqual(show(c.request(hex("12 0b 00 01"))), "13")
        // a's read of cloudToken triggers the change: Service Changed for 0x000E-0xFFFF, then 0x12 for the read.
        XCTAssertEqual(show(a.request([0x0A] + le16(token))), "1d 08 00 0e 00 ff ff")
        XCTAssertEqual(show(a.next()), show([0x01, 0x0A] + le16(token) + [0x12]))
        XCTAssertEqual(sim.valueHandle("cloudToken"), token + 2, "the mirror's handles moved up by 2")
        XCTAssertEqual(sim.valueHandle("simAdded"), 0x0010)
        // b did not enable robust caching: served (whatever the handle is now), no indication.
        XCTAssertEqual(b.request([0x0A] + le16(token + 2))?.first, 0x0B)
        // c stays out of sync until it reads the hash; the hash read is answered, with the new hash.
        XCTAssertEqual(show(c.request([0x0A] + le16(token + 2))), show([0x01, 0x0A] + le16(token + 2) + [0x12]))
        let newHash = try sim.database.databaseHash()
        XCTAssertNotEqual(newHash, oldHash)
        XCTAssertEqual(show(c.request(hex("08 01 00 ff ff 2a 2b"))), show([0x09, 0x12, 0x0D, 0x00] + newHash.reversed()))
        XCTAssertEqual(c.request([0x0A] + le16(token + 2))?.first, 0x0B)
        // a confirms the indication: change-aware again, served.
        a.inject(hex("1e"))
        XCTAssertEqual(a.request([0x0A] + le16(token + 2))?.first, 0x0B)
    }
}
