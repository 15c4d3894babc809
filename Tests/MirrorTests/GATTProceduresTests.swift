// GATTPeer's procedures in-process against the simulator over a unix: socket: reads by handle and by UUID (Vol 3
// Part G §4.8), each write mode (§4.9), every value of a database, subscriptions and their 0x12 retry (§2.5.2.1),
// the database's changes against a stored copy; asserted on values (the CLI's subprocess tests cover its words).
import GATTPeer
import Mirror
import MirrorSimulator
import XCTest

final class GATTProceduresTests: XCTestCase {
    func options() -> Peer.Options {
        var o = Peer.Options()
        o.names = CharacteristicNames(MirrorProfile.bundled.characteristics)
        o.transactionTimeout = .seconds(5)
        return o
    }

    func handle(_ h: SimHarness, _ name: String) throws -> UInt16 { try XCTUnwrap(h.sim.valueHandle(name)) }

    /// A read by UUID gives every value of the type; an absent type is `AttributeTypeNotFound`, not an empty list.
    func testReadsByHandleAndByUUIDAndAnAbsentTypeIsAnError() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { peer.close() }
        let names = try await peer.lookup.read(uuid: .bit16(0x2A00))
        XCTAssertEqual(names.map(\.handle), [0x0003])
        XCTAssertEqual(names.map { String(decoding: $0.value, as: UTF8.self) }, ["mirror-sim"])
        do {
            _ = try await peer.lookup.read(uuid: .bit16(0x2A98))
            XCTFail("no Weight characteristic in the simulator")
        } catch let e as AttributeTypeNotFound {
            XCTAssertEqual(e, AttributeTypeNotFound(uuid: .bit16(0x2A98)))
            XCTAssertEqual(e.description, "no attribute of type 2a98")
        }
        let state = try await peer.lookup.read(handle: try handle(h, "scanState"))
        XCTAssertEqual(state, [0x00])
    }

    /// Each mode reaches the simulator; the peer's refusal at a raw handle is named after the fact.
    func testEachWriteModeAndTheRefusalNamedAfterTheFact() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { peer.close() }
        let token = try handle(h, "cloudToken")
        try await peer.lookup.write(handle: token, value: Array("request".utf8), mode: .request)
        XCTAssertEqual(h.sim.snapshot.cloudToken, "request")
        try await peer.lookup.write(handle: token, value: Array("command".utf8), mode: .command, timeout: .seconds(5))
        // A Write Command is not answered: a read after it is answered after it was applied.
        _ = try await peer.lookup.read(handle: try handle(h, "scanState"))
        XCTAssertEqual(h.sim.snapshot.cloudToken, "command")
        let long = String(repeating: "L", count: 36)
        try await peer.lookup.write(handle: token, value: Array(long.utf8), mode: .long)
        XCTAssertEqual(h.sim.snapshot.cloudToken, long)
        try await peer.lookup.write(handle: token, value: Array("reliable".utf8), mode: .reliable)
        XCTAssertEqual(h.sim.snapshot.cloudToken, "reliable")
        XCTAssertEqual(GATTWriteMode.allCases.map(\.rawValue), ["request", "command", "long", "reliable"])
        do {
            try await peer.lookup.write(handle: token, value: Array(repeating: 0x41, count: 41), mode: .request)
            XCTFail("41 bytes over the simulator's 40")
        } catch let e as GATTError {
            let a = try XCTUnwrap(e.attributeError)
            XCTAssertEqual(a.code, .invalidAttributeValueLength)
            XCTAssertEqual(a.handleName, "cloudToken", "found by a discovery around the handle")
        }
    }

    /// Every readable value and every descriptor, in database order, each the bytes or the peer's error.
    func testEveryValueIsReadInDatabaseOrderWithItsDescriptors() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { peer.close() }
        let services = try await peer.discover()
        let values = try await peer.lookup.readEveryValue(of: services)
        XCTAssertEqual(values.map(\.count), services.map(\.characteristics.count))
        for (s, list) in zip(services, values) {
            for (c, read) in zip(s.characteristics, list) {
                XCTAssertEqual(read.characteristic, c)
                XCTAssertEqual(read.value == nil, !c.properties.contains(.read), "\(c.uuid)")
                XCTAssertEqual(read.descriptors.count, c.descriptors.count, "\(c.uuid)")
            }
        }
        let all = values.flatMap { $0 }
        let deviceName = try XCTUnwrap(all.first { $0.characteristic.uuid == .bit16(0x2A00) }?.value)
        XCTAssertEqual(try deviceName.get(), Array("mirror-sim".utf8))
        let state = try XCTUnwrap(all.first { $0.characteristic.valueHandle == (try? handle(h, "scanState")) })
        let cccd = try XCTUnwrap(state.characteristic.descriptors.firstIndex { $0.uuid == .clientCharacteristicConfiguration })
        XCTAssertEqual(try state.descriptors[cccd].get(), [0x00, 0x00], "not subscribed")
        XCTAssertNil(state.presentationFormat)
    }

    /// `mirror gatt --read`'s readings: every outcome by handle, each value decoded with its characteristic's label
    /// (a descriptor's with none), and the profile's names for the UUIDs that are not well known.
    func testEveryValueByHandleIsDecodedWithItsLabelAndTheProfileNamesItsUUIDs() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { peer.close() }
        let services = try await peer.discover()
        let (outcomes, decoded) = try await peer.lookup.readEveryValueByHandle(of: services) { v, uuid, name, _ in
            name == "scanState" ? "state \(v)" : nil
        }
        let state = try handle(h, "scanState")
        XCTAssertEqual(decoded[state], "state [0]")
        XCTAssertEqual(decoded.count, 1, "only what decode named")
        let deviceName = try XCTUnwrap(services.flatMap(\.characteristics).first { $0.uuid == .bit16(0x2A00) })
        XCTAssertEqual(try outcomes[deviceName.valueHandle]?.get(), Array("mirror-sim".utf8))
        let cccd = try XCTUnwrap(services.flatMap(\.characteristics).first { $0.valueHandle == state }?.descriptors.first)
        XCTAssertEqual(try outcomes[cccd.handle]?.get(), [0x00, 0x00])
        let names = MirrorProfile.bundled.names(in: services)
        XCTAssertEqual(names[MirrorProfile.bundled.service.description], "mirror service")
        XCTAssertEqual(names[MirrorProfile.bundled.characteristics["scanState"]!.description], "scanState")
        XCTAssertNil(names[BluetoothUUID.bit16(0x2A00).description], "a well-known UUID is not the profile's")
    }

    /// A characteristic's Presentation Format is its 0x2904 descriptor's value, when that was read.
    func testThePresentationFormatIsThe2904DescriptorsValue() {
        let c = GATTCharacteristic(uuid: .batteryLevel, declarationHandle: 2, valueHandle: 3, properties: [.read], endHandle: 5,
                                   descriptors: [GATTDescriptor(handle: 4, uuid: .clientCharacteristicConfiguration),
                                                 GATTDescriptor(handle: 5, uuid: .bit16(0x2904))])
        let format: [UInt8] = [0x04, 0x00, 0xAD, 0x27, 0x01, 0x00, 0x00]
        let read = CharacteristicValues(characteristic: c, value: .success([0x64]), descriptors: [.success([0, 0]), .success(format)])
        XCTAssertEqual(read.presentationFormat, format)
        let refused = GATTAttributeError(code: .readNotPermitted, requestOpcode: .readRequest, handle: 5, rejectedBy: .peer, mtu: 23)
        XCTAssertNil(CharacteristicValues(characteristic: c, value: nil, descriptors: [.success([0, 0]), .failure(refused)]).presentationFormat)
    }

    /// What is at a handle, from what the connection knows: nothing before discovery, then values and descriptors.
    func testKnownAttributesNeedTheDatabaseAndSendNothing() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { peer.close() }
        let state = try handle(h, "scanState")
        XCTAssertNil(peer.lookup.knownAttribute(at: state), "nothing discovered yet")
        _ = try await peer.discover()
        guard case .value(let entry)? = peer.lookup.knownAttribute(at: state) else { return XCTFail("scanState's value") }
        XCTAssertEqual(entry.label, "scanState")
        XCTAssertEqual(entry.profileName, "scanState")
        let cccd = try XCTUnwrap(entry.characteristic.descriptors.first { $0.uuid == .clientCharacteristicConfiguration })
        guard case .descriptor(let d, let of)? = peer.lookup.knownAttribute(at: cccd.handle) else { return XCTFail("its CCCD") }
        XCTAssertEqual(d, cccd)
        XCTAssertEqual(of.valueHandle, state)
        XCTAssertNil(peer.lookup.knownAttribute(at: 0xFFF0))
    }

    /// No reference: every characteristic that notifies or indicates; a handle that is no characteristic's lists those.
    func testSubscriptionTargetsAndTheirRefusals() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { peer.close() }
        let all = try await peer.lookup.subscriptionTargets([])
        XCTAssertFalse(all.isEmpty)
        XCTAssertTrue(all.allSatisfy { $0.characteristic.properties.contains(.notify) || $0.characteristic.properties.contains(.indicate) })
        XCTAssertTrue(all.contains { $0.label == "scanState" })
        let named = try await peer.lookup.subscriptionTargets([.name("scanError"), .handle(try handle(h, "scanState"))])
        XCTAssertEqual(named.map(\.label), ["scanError", "scanState"])
        do {
            _ = try await peer.lookup.subscriptionTargets([.handle(0x0009)])
            XCTFail("0x0009 is no characteristic")
        } catch let e as GATTError {
            let list = all.map { ATTHex.handle($0.characteristic.valueHandle) }.joined(separator: ", ")
            XCTAssertEqual(e, .unsupported("handle 0x0009 is not a characteristic of unix:\(h.path); value handles that notify or indicate: \(list)"))
        }
        // Issue 37: a named characteristic that cannot notify is named as given, with those that can.
        do {
            _ = try await peer.lookup.subscriptionTargets([.name("cloudToken")])
            XCTFail("cloudToken neither notifies nor indicates")
        } catch let e as CharacteristicNotSubscribable {
            XCTAssertEqual(e.reference, "cloudToken")
            XCTAssertEqual(e.subscribable, all.map { "\($0.label ?? $0.characteristic.uuid.description) (\(ATTHex.handle($0.characteristic.valueHandle)))" })
            XCTAssertTrue(e.description.hasPrefix("cloudToken (0x0012) neither notifies nor indicates (properties: read|write); those that do: "), e.description)
            XCTAssertTrue(e.subscribable.contains("scanState (0x000C)"), "\(e.subscribable)")
        }
    }

    /// Subscribed with the mode and the value read after the CCCD write; the stream gets the values.
    func testSubscribeTellsTheModeAndTheValueRead() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { peer.close() }
        var told: [(String?, GATTSubscriptionMode, [UInt8]?)] = []
        var targetings = 0
        let targets = try await peer.lookup.subscribingResynchronized([.name("scanState")], preferIndications: false,
                                                                      targeted: { _ in targetings += 1 },
                                                                      subscribed: { told.append(($0.label, $1, $2)) })
        XCTAssertEqual(targets.map(\.label), ["scanState"])
        XCTAssertEqual(targetings, 1)
        XCTAssertEqual(told.map(\.0), ["scanState"])
        XCTAssertEqual(told.map(\.1), [.notify])
        XCTAssertEqual(told.map(\.2), [[0x00]])
    }

    /// Database Out Of Sync (0x12) while subscribing by name: resynchronized, resolved at the moved handle and
    /// subscribed once more; by a raw handle: refused, the handle not remapped.
    func testSubscribeAfterDatabaseOutOfSyncResolvesAgainOnlyByName() async throws {
        func harness() throws -> SimHarness {
            try SimHarness {
                $0.caching = true
                $0.clientFeaturesAtConnect = 1
                $0.faults = [SimFault(.changeDatabase, "scanState")]
            }
        }
        let h = try harness()
        defer { h.stop() }
        let before = try handle(h, "scanState")
        let peer = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { peer.close() }
        var targetings: [[UInt16]] = [], resyncs = 0
        let targets = try await peer.lookup.subscribingResynchronized([.name("scanState")], preferIndications: false,
                                                                      targeted: { targetings.append($0.map(\.characteristic.valueHandle)) },
                                                                      resynchronizing: { resyncs += 1 },
                                                                      subscribed: { _, _, _ in })
        let after = try handle(h, "scanState")
        XCTAssertNotEqual(after, before, "the simulator moved its handles")
        XCTAssertEqual(targetings, [[before], [after]])
        XCTAssertEqual(resyncs, 1)
        XCTAssertEqual(targets.map(\.characteristic.valueHandle), [after])

        let raw = try harness()
        defer { raw.stop() }
        let second = try await Peer.connect(to: .unix(path: raw.path), options: options())
        defer { second.close() }
        let at = try handle(raw, "scanState")
        do {
            _ = try await second.lookup.subscribingResynchronized([.handle(at)], preferIndications: false, subscribed: { _, _, _ in })
            XCTFail("a raw handle after 0x12")
        } catch {
            XCTAssertTrue(GATTDatabaseCache.isOutOfSync(error), "\(error)")
            XCTAssertTrue("\(error)".contains("\(ATTHex.handle(at)) was given as a raw handle and is not remapped"), "\(error)")
        }
    }

    /// Items are known by UUID, parent and rank: a new handle is a move, not a removal and an addition.
    func testTheDiffKnowsMovesByUUIDAndRank() {
        let (a, b) = (Self.genericAttribute, Self.battery)
        var bMoved = b
        bMoved.startHandle = 8
        bMoved.endHandle = 12
        bMoved.characteristics[0].declarationHandle = 9
        bMoved.characteristics[0].valueHandle = 10
        bMoved.characteristics.append(GATTCharacteristic(uuid: .batteryLevel, declarationHandle: 11, valueHandle: 12,
                                                         properties: [.read], endHandle: 12))
        let changes = GATTDatabaseChange.between([a, b], [bMoved])
        XCTAssertEqual(changes.map(\.description), [
            "moved service 180f from 0x0005 to 0x0008",
            "moved characteristic 2a19 from 0x0007 to 0x000A in service 180f",
            "added characteristic 2a19 at 0x000C in service 180f",
            "removed service 1801 from 0x0001",
            "removed characteristic 2a05 from 0x0003 in service 1801",
            "removed descriptor 2902 from 0x0004 in characteristic 2a05 of service 1801",
        ])
        XCTAssertEqual(GATTDatabaseChange.between([a, b], [a, b]), [])
    }

    /// What changed since the stored copy, against the simulator: none for the same database, the simulator's
    /// whole database as added for a stored copy with nothing in it, and no stored copy at first.
    func testChangesSinceStoredAgainstTheSimulator() async throws {
        let h = try SimHarness { $0.caching = true }
        defer { h.stop() }
        let store = MemoryStore()
        var o = options()
        o.cache = store
        let peer = try await Peer.connect(to: .unix(path: h.path), options: o)
        defer { peer.close() }
        let first = try await peer.database.changesSinceStored()
        XCTAssertNil(first.stored)
        XCTAssertEqual(first.changes, [])
        let hash = try XCTUnwrap(first.peerHash)
        let served = try XCTUnwrap(store.kept.withLock { $0 }).services
        let again = try await peer.database.changesSinceStored()
        XCTAssertEqual(again.stored?.services, served)
        XCTAssertEqual(again.changes, [])
        store.kept.withLock { $0 = GATTCachedDatabase(target: "unix:\(h.path)", adapter: nil, databaseHash: hash, services: [Self.battery]) }
        let changed = try await peer.database.changesSinceStored()
        XCTAssertEqual(changed.changes, GATTDatabaseChange.between([Self.battery], served))
        XCTAssertTrue(changed.changes.contains { $0.change == .removed && $0.uuid == .batteryService })
    }

    static let genericAttribute = GATTService(uuid: .genericAttribute, startHandle: 1, endHandle: 4, characteristics: [
        GATTCharacteristic(uuid: .serviceChanged, declarationHandle: 2, valueHandle: 3, properties: [.indicate], endHandle: 4,
                           descriptors: [GATTDescriptor(handle: 4, uuid: .clientCharacteristicConfiguration)]),
    ])
    static let battery = GATTService(uuid: .batteryService, startHandle: 5, endHandle: 7, characteristics: [
        GATTCharacteristic(uuid: .batteryLevel, declarationHandle: 6, valueHandle: 7, properties: [.read], endHandle: 7),
    ])
}

/// A `DatabaseStore` that keeps one database in memory.
final class MemoryStore: DatabaseStore {
    let kept = Lock<GATTCachedDatabase?>(nil)
    func load(target: String, adapter: String?) throws(DatabaseStoreError) -> GATTCachedDatabase? { kept.withLock { $0 } }
    func store(_ database: GATTCachedDatabase) throws(DatabaseStoreError) { kept.withLock { $0 = database } }
    func clear(target: String, adapter: String?) throws(DatabaseStoreError) -> [String] { kept.withLock { $0 = nil }; return [] }
}
