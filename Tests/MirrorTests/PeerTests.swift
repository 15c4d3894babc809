// GATTPeer, the front door, in-process against the simulator over a unix: socket: what Examples/embed does, and the
// lookups' errors, each asserted on the values (the CLI's subprocess tests cover what it prints).
import GATTPeer
import Mirror
import MirrorSimulator
import XCTest

final class PeerTests: XCTestCase {
    func options() -> Peer.Options {
        var o = Peer.Options()
        o.names = CharacteristicNames(MirrorProfile.bundled.characteristics)
        o.transactionTimeout = .seconds(5)
        return o
    }

    /// Connect (MTU 517 exchanged before it returns), discover, read by UUID and by name, write, subscribe with
    /// three notifications, and the peer's exact error: the embedding example's steps, asserted.
    func testTheFrontDoorConnectsReadsWritesSubscribesAndGivesThePeersError() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { peer.close() }
        XCTAssertEqual(peer.mtu, 517)
        let services = try await peer.discover()
        XCTAssertEqual(services.map(\.uuid), [.bit16(0x1800), .bit16(0x1801), MirrorProfile.bundled.service])
        let deviceName = try await peer.read(.uuid(.bit16(0x2A00)))
        XCTAssertEqual(String(decoding: deviceName, as: UTF8.self), "mirror-sim")
        let byName = try await peer.read(.name("scanState")), byHandle = try await peer.read(.handle(0x000C))
        XCTAssertEqual(byName, [0x00])
        XCTAssertEqual(byHandle, [0x00])
        try await peer.write(.name("cloudToken"), Array("http://127.0.0.1:9/peer".utf8))
        XCTAssertEqual(h.sim.snapshot.cloudToken, "http://127.0.0.1:9/peer")
        let (value, states) = try await peer.subscribe(.name("scanState"))
        XCTAssertEqual(value, [0x00], "the value read after the CCCD write")
        try await peer.write(.name("scannerAction"), [MirrorProfile.bundled.initDeviceForScanCommand])
        var seen: [[UInt8]] = []
        for try await n in states {
            XCTAssertEqual(n.handle, 0x000C)
            seen.append(n.value)
            if seen.count == 3 { break }
        }
        XCTAssertEqual(seen, [[0x01], [0x02], [0x03]])
        do {
            try await peer.write(.name("cloudToken"), Array(repeating: 0x41, count: 41))
            XCTFail("41 bytes over the simulator's 40")
        } catch let e as GATTError {
            let a = try XCTUnwrap(e.attributeError)
            XCTAssertEqual(a.code, .invalidAttributeValueLength)
            XCTAssertEqual(a.rejectedBy, .peer)
            XCTAssertEqual(a.handle, 0x0012)
            XCTAssertEqual(e.description, "ATT error 0x0D Invalid Attribute Value Length from the peer, on Write Request to handle 0x0012 (cloudToken): 41-byte value, within the 512-byte budget of MTU 517, so the peripheral rejected it at the application layer")
        }
        // A raw handle's error is named after the fact, from a discovery around it (a new connection: no name known).
        let second = try await Peer.connect(to: .unix(path: h.path), options: options())
        defer { second.close() }
        do {
            try await second.write(.handle(0x0012), Array(repeating: 0x41, count: 41))
            XCTFail("41 bytes to 0x0012")
        } catch let e as GATTError {
            XCTAssertEqual(e.attributeError?.handleName, "cloudToken", "\(e)")
        }
        // A value over the Write Request budget is a long write (Prepare Write + Execute Write), refused whole.
        do {
            try await peer.write(.name("cloudToken"), Array(repeating: 0x41, count: 600))
            XCTFail("600 bytes")
        } catch let e as GATTError {
            XCTAssertNotNil(e.attributeError, "\(e)")
        }
    }

    /// No Exchange MTU when asked for none: ATT_MTU stays 23 (Part F §3.2.8).
    func testNoMTUAskedKeepsTheDefault() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        var o = options()
        o.mtu = nil
        let peer = try await Peer.connect(to: .unix(path: h.path), options: o)
        defer { peer.close() }
        XCTAssertEqual(peer.mtu, 23)
        let status = try await peer.read(.name("wifiConnectionStatus"))
        XCTAssertEqual(status, [0x02])
    }

    /// A name that is no characteristic's lists the names known; a profile name whose UUID the server lacks says
    /// so; a handle that is no characteristic's says that; the error is typed, not a string.
    func testLookupsThatFindNothingSayWhatIsKnown() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        var o = options()
        o.names.byName["weight"] = .bit16(0x2A98)
        let peer = try await Peer.connect(to: .unix(path: h.path), options: o)
        defer { peer.close() }
        func lookupError(_ r: CharacteristicReference) async throws -> CharacteristicLookupError {
            do {
                _ = try await peer.characteristic(r)
            } catch let e as CharacteristicLookupError {
                return e
            }
            struct NoError: Error {}
            XCTFail("no error for \(r)")
            throw NoError()
        }
        let server = "unix:\(h.path)"
        let none = try await lookupError(.name("nosuch"))
        XCTAssertEqual(none.description, "no characteristic of \(server) is named \"nosuch\"; names known: scanState, scanError, cloudToken, scannerAction, wifiNumNetworks, wifiNetworkSSIDEnum, wifiSetSSID, wifiConnectionStatus")
        let profile = try await lookupError(.name("weight"))
        XCTAssertEqual(profile.profileUUID, .bit16(0x2A98))
        XCTAssertTrue(profile.description.hasPrefix("\"weight\" is the profile's name for 2a98, and no characteristic of \(server) has that UUID"), profile.description)
        let handle = try await lookupError(.handle(0x0009))
        XCTAssertEqual(handle.description, "handle 0x0009 is not a characteristic of \(server)")
        // A declaration handle names its characteristic too.
        let declaration = try await peer.characteristic(.handle(0x000B))
        XCTAssertEqual(declaration.profileName, "scanState")
        let anyCase = try await peer.characteristic(.name("SCANSTATE"))
        XCTAssertEqual(anyCase.characteristic.valueHandle, 0x000C, "a name ignoring case")
        let wellKnown = try await peer.characteristic(.name("Device Name"))
        XCTAssertEqual(wellKnown.characteristic.valueHandle, 0x0003, "the well-known UUID's name")
    }
}
