// The simulator's GATT caching (`--caching yes`): the Database Hash it serves (Core Spec 5.4 Vol 3 Part G §7.3)
// equals the client's computation over what it discovers, Client Supported Features (§7.2) is kept per
// connection, and without the option the database is the one the README documents.
import TestSupport
import ATTStack
import LinuxBluetooth
import Foundation
import GATTClient
import GATTServer
import Mirror
@testable import MirrorSimulator
import XCTest

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
        XCTAssertEqual(served.first?.value, computed)
        XCTAssertEqual(computed, try h.sim.database.databaseHash())
        XCTAssertEqual(computed.count, 16)
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
}
