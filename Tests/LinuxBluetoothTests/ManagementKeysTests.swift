import XCTest
@testable import LinuxBluetooth

/// The key events and commands of the management protocol (BlueZ doc/mgmt-api.txt / mgmt-protocol.rst), byte by
/// byte from the documented layouts: addresses least significant octet first, multi-octet fields little-endian.
final class ManagementKeysTests: XCTestCase {
    let peer = try! BluetoothAddress(parsing: "C4:F2:17:1A:1D:BB")
    let value: [UInt8] = Array(0x00...0x0F)

    /// A management event packet: Event Code, Controller Index, Parameter Length (little-endian), parameters.
    func event(_ code: UInt16, index: UInt16 = 0, _ params: [UInt8]) -> [UInt8] {
        [UInt8(code & 0xFF), UInt8(code >> 8), UInt8(index & 0xFF), UInt8(index >> 8),
         UInt8(params.count & 0xFF), UInt8(params.count >> 8)] + params
    }

    func testNewLongTermKeyIsDecodedFieldByField() {
        let params: [UInt8] = [0x01]                              // Store_Hint
            + [0xBB, 0x1D, 0x1A, 0x17, 0xF2, 0xC4]                // Address C4:F2:17:1A:1D:BB, least significant first
            + [0x01]                                              // Address_Type: LE Public
            + [0x01]                                              // Key_Type: authenticated legacy key
            + [0x00]                                              // Central: 0 (the key used as peripheral)
            + [0x10]                                              // Encryption Size: 16
            + [0x34, 0x12]                                        // Enc. Diversifier 0x1234
            + [0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01]    // Random Number 0x0102030405060708
            + value                                               // Value (16 octets)
        XCTAssertEqual(params.count, 37)
        let expected = LongTermKey(address: peer, addressType: .public, type: .authenticatedLegacy, central: false,
                                   encryptionSize: 16, ediv: 0x1234, rand: 0x0102_0304_0506_0708, value: value)
        XCTAssertEqual(ManagementEvent.parse(event(0x000A, index: 1, params)),
                       .newLongTermKey(index: 1, storeHint: true, key: expected))
        XCTAssertTrue(expected.type.isAuthenticated)
        XCTAssertFalse(expected.type.isSecureConnections)
    }

    func testNewIRKCarriesTheResolvedRandomAddressAndTheIdentity() {
        let params: [UInt8] = [0x00]                              // Store_Hint: do not store
            + [0xAA, 0xFB, 0x0D, 0x94, 0x81, 0x70]                // Random_Address 70:81:94:0D:FB:AA
            + [0x06, 0x05, 0x04, 0x03, 0x02, 0xC1]                // Address C1:02:03:04:05:06 (static random)
            + [0x02]                                              // Address_Type: LE Random
            + value                                               // Value
        XCTAssertEqual(params.count, 30)
        let identity = try! BluetoothAddress(parsing: "C1:02:03:04:05:06")
        XCTAssertEqual(ManagementEvent.parse(event(0x0018, params)),
                       .newIdentityResolvingKey(index: 0, storeHint: false,
                                                randomAddress: try! BluetoothAddress(parsing: "70:81:94:0D:FB:AA"),
                                                key: IdentityResolvingKey(address: identity, addressType: .random, value: value)))
    }

    func testNewCSRKCarriesItsType() {
        let params: [UInt8] = [0x01]                              // Store_Hint
            + [0xBB, 0x1D, 0x1A, 0x17, 0xF2, 0xC4]                // Address
            + [0x01]                                              // Address_Type: LE Public
            + [0x03]                                              // Type: authenticated remote CSRK
            + value                                               // Value
        XCTAssertEqual(params.count, 25)
        let key = SignatureResolvingKey(address: peer, addressType: .public, type: .authenticatedRemote, value: value)
        XCTAssertEqual(ManagementEvent.parse(event(0x0019, index: 2, params)),
                       .newSignatureResolvingKey(index: 2, storeHint: true, key: key))
        XCTAssertEqual(key.type.description, "authenticated remote")
    }

    func testLoadLongTermKeysIsKeyCountThenEntries() throws {
        let central = LongTermKey(address: peer, addressType: .public, type: .unauthenticatedP256, central: true,
                                  encryptionSize: 16, ediv: 0, rand: 0, value: value)
        let legacy = LongTermKey(address: peer, addressType: .random, type: .authenticatedLegacy, central: false,
                                 encryptionSize: 7, ediv: 0xBEEF, rand: 0x1122_3344_5566_7788, value: value.reversed())
        let command = try XCTUnwrap(ManagementCommand.loadLongTermKeys(index: 0, keys: [central, legacy]))
        let expected: [UInt8] = [0x13, 0x00, 0x00, 0x00, 74, 0x00]    // Command Code 0x0013, index 0, length 2 + 2 * 36
            + [0x02, 0x00]                                            // Key_Count
            + [0xBB, 0x1D, 0x1A, 0x17, 0xF2, 0xC4, 0x01]              // Address, Address_Type LE Public
            + [0x02, 0x01, 0x10]                                      // Key_Type, Central, Encryption_Size
            + [0x00, 0x00] + [UInt8](repeating: 0, count: 8)          // Encryption_Diversifier, Random_Number
            + value                                                   // Value
            + [0xBB, 0x1D, 0x1A, 0x17, 0xF2, 0xC4, 0x02]              // Address, Address_Type LE Random
            + [0x01, 0x00, 0x07]                                      // Key_Type, Central 0, Encryption_Size 7
            + [0xEF, 0xBE]                                            // Encryption_Diversifier 0xBEEF
            + [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]        // Random_Number
            + value.reversed()
        XCTAssertEqual(command.packet, expected)
        XCTAssertEqual(command.name, "Load Long Term Keys")
        // Round trip: each entry, behind a Store_Hint, is a New Long Term Key event of the same key.
        for (offset, key) in [(8, central), (8 + 36, legacy)] {
            let entry = Array(command.packet[offset..<(offset + 36)])
            XCTAssertEqual(ManagementEvent.parse(event(0x000A, [1] + entry)), .newLongTermKey(index: 0, storeHint: true, key: key))
        }
        XCTAssertEqual(ManagementCommand.loadLongTermKeys(index: 3, keys: [])?.packet, [0x13, 0x00, 0x03, 0x00, 0x02, 0x00, 0x00, 0x00])
        var short = central
        short.value = [1, 2, 3]
        XCTAssertNil(ManagementCommand.loadLongTermKeys(index: 0, keys: [short]), "a value of 3 octets")
        XCTAssertNil(ManagementCommand.loadLongTermKeys(index: 0, keys: Array(repeating: central, count: ManagementCommand.maximumLongTermKeys + 1)))
        XCTAssertNotNil(ManagementCommand.loadLongTermKeys(index: 0, keys: Array(repeating: central, count: ManagementCommand.maximumLongTermKeys)))
    }

    func testLoadIdentityResolvingKeysAndUnpairDevice() throws {
        let irk = IdentityResolvingKey(address: peer, addressType: .public, value: value)
        let load = try XCTUnwrap(ManagementCommand.loadIdentityResolvingKeys(index: 1, keys: [irk]))
        XCTAssertEqual(load.packet, [0x30, 0x00, 0x01, 0x00, 25, 0x00]    // Command Code 0x0030, index 1, length 2 + 23
                       + [0x01, 0x00]                                   // Key_Count
                       + [0xBB, 0x1D, 0x1A, 0x17, 0xF2, 0xC4, 0x01]     // Address, Address_Type
                       + value)                                         // Value
        // Round trip through New IRK: Store_Hint, Random_Address 00:00:00:00:00:00, the entry.
        XCTAssertEqual(ManagementEvent.parse(event(0x0018, index: 1, [1] + [UInt8](repeating: 0, count: 6) + Array(load.packet[8...]))),
                       .newIdentityResolvingKey(index: 1, storeHint: true, randomAddress: .any, key: irk))
        let unpair = ManagementCommand.unpairDevice(index: 0, address: peer, addressType: .random)
        XCTAssertEqual(unpair.packet, [0x1B, 0x00, 0x00, 0x00, 0x08, 0x00]   // Command Code 0x001B, length 8
                       + [0xBB, 0x1D, 0x1A, 0x17, 0xF2, 0xC4, 0x02]        // Address, Address_Type LE Random
                       + [0x01])                                           // Disconnect
        XCTAssertEqual(ManagementCommand.unpairDevice(index: 0, address: peer, addressType: .public, disconnect: false).parameters.last, 0)
    }

    func testShortOrOutOfRangeKeyEventsAreNotKeysAndNeverCrash() {
        let ltk: [UInt8] = [0x01, 0xBB, 0x1D, 0x1A, 0x17, 0xF2, 0xC4, 0x01, 0x00, 0x01, 0x10, 0, 0] + [UInt8](repeating: 0, count: 8) + value
        XCTAssertNotNil(ManagementEvent.parse(event(0x000A, ltk)))
        // Every truncation: within its length field, an event too short is `.other`; beyond it, nil.
        for n in 0..<ltk.count {
            XCTAssertEqual(ManagementEvent.parse(event(0x000A, Array(ltk.prefix(n)))), .other(code: 0x000A, index: 0), "\(n) octets")
            XCTAssertNil(ManagementEvent.parse(Array(event(0x000A, ltk).prefix(6 + n))), "packet cut at \(6 + n)")
        }
        for (code, size): (UInt16, Int) in [(0x0018, 30), (0x0019, 25)] {
            for n in 0..<size {
                XCTAssertEqual(ManagementEvent.parse(event(code, [UInt8](repeating: 1, count: n))), .other(code: code, index: 0), "\(n) octets")
            }
            XCTAssertNotEqual(ManagementEvent.parse(event(code, [UInt8](repeating: 1, count: size))), .other(code: code, index: 0))
        }
        // A BR/EDR address type (0), an unknown Key_Type (5), a Central of 2, an unknown CSRK Type (4).
        var bredr = ltk; bredr[7] = 0x00
        var keyType = ltk; keyType[8] = 0x05
        var centralTwo = ltk; centralTwo[9] = 0x02
        for bad in [bredr, keyType, centralTwo] {
            XCTAssertEqual(ManagementEvent.parse(event(0x000A, bad)), .other(code: 0x000A, index: 0))
        }
        let csrk: [UInt8] = [0x01, 0xBB, 0x1D, 0x1A, 0x17, 0xF2, 0xC4, 0x01, 0x04] + value
        XCTAssertEqual(ManagementEvent.parse(event(0x0019, csrk)), .other(code: 0x0019, index: 0))
        // Random bytes of every length under every key code: no crash.
        var rng = SystemRandomNumberGenerator()
        for code: UInt16 in [0x000A, 0x0018, 0x0019] {
            for n in 0..<64 {
                let p = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
                _ = ManagementEvent.parse(event(code, p))
            }
        }
    }
}
