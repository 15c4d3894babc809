// The SMP keys on the management interface (BlueZ doc/mgmt-api.txt, now doc/mgmt-protocol.rst; the kernel side
// net/bluetooth/mgmt.c): the New Long Term Key / IRK / CSRK events a pairing ends with, and the Load Long Term
// Keys / Load Identity Resolving Keys commands that give a stored bond back to the kernel (Vol 3 Part H §3.6).
// Addresses are bdaddr_t on the wire (least significant octet first); key values are as SMP sends them.

import ATTStack

/// mgmt's Key_Type of a Long Term Key (mgmt-api.txt "New Long Term Key").
public enum LongTermKeyType: UInt8, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    case unauthenticatedLegacy = 0x00
    case authenticatedLegacy = 0x01
    case unauthenticatedP256 = 0x02
    case authenticatedP256 = 0x03
    /// Made with the debug P-256 key pair (Vol 3 Part H §2.3.5.6.1): never secure.
    case debugP256 = 0x04

    /// Authenticated: MITM protection by Passkey Entry, Numeric Comparison or OOB (Vol 3 Part H §2.3.1).
    public var isAuthenticated: Bool { self == .authenticatedLegacy || self == .authenticatedP256 }
    /// LE Secure Connections (P-256) rather than LE legacy pairing (Vol 3 Part H §2.3.5.6).
    public var isSecureConnections: Bool { rawValue >= 0x02 }

    public var description: String {
        switch self {
        case .unauthenticatedLegacy: "unauthenticated legacy"
        case .authenticatedLegacy: "authenticated legacy"
        case .unauthenticatedP256: "unauthenticated P-256"
        case .authenticatedP256: "authenticated P-256"
        case .debugP256: "debug P-256"
        }
    }
}

/// An LTK (Vol 3 Part H §2.4.2): legacy pairing gives one per role (`central`: the key used when this host is
/// central, with the EDIV and Rand the peer distributed), Secure Connections one for both with EDIV and Rand 0.
public struct LongTermKey: Sendable, Equatable {
    /// The peer's identity address (public or static random), as the kernel reports it.
    public var address: BluetoothAddress
    public var addressType: LEAddressType
    public var type: LongTermKeyType
    /// mgmt's Central field: 1 for the key this host uses as central, 0 for the one it uses as peripheral.
    public var central: Bool
    /// The negotiated encryption key size, 7...16 octets (Vol 3 Part H §2.3.4).
    public var encryptionSize: UInt8
    public var ediv: UInt16
    public var rand: UInt64
    /// 16 octets, least significant first (as SMP's Encryption Information carries it).
    public var value: [UInt8]

    public init(address: BluetoothAddress, addressType: LEAddressType, type: LongTermKeyType, central: Bool,
                encryptionSize: UInt8, ediv: UInt16, rand: UInt64, value: [UInt8]) {
        self.address = address
        self.addressType = addressType
        self.type = type
        self.central = central
        self.encryptionSize = encryptionSize
        self.ediv = ediv
        self.rand = rand
        self.value = value
    }

    /// The entry's size in Load Long Term Keys and New Long Term Key: 6 + 1 + 1 + 1 + 1 + 2 + 8 + 16.
    public static let entrySize = 36
}

/// An IRK (Vol 3 Part H §2.4.2.1) with the identity address it resolves to.
public struct IdentityResolvingKey: Sendable, Equatable {
    public var address: BluetoothAddress
    public var addressType: LEAddressType
    /// 16 octets, least significant first (as SMP's Identity Information carries it).
    public var value: [UInt8]

    public init(address: BluetoothAddress, addressType: LEAddressType, value: [UInt8]) {
        self.address = address
        self.addressType = addressType
        self.value = value
    }

    /// The entry's size in Load Identity Resolving Keys and New IRK: 6 + 1 + 16.
    public static let entrySize = 23
}

/// mgmt's Type of a CSRK (mgmt-api.txt "New Signature Resolving Key"): local keys sign, remote keys verify.
public enum SignatureResolvingKeyType: UInt8, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    case unauthenticatedLocal = 0x00
    case unauthenticatedRemote = 0x01
    case authenticatedLocal = 0x02
    case authenticatedRemote = 0x03

    public var isAuthenticated: Bool { rawValue >= 0x02 }
    public var isLocal: Bool { rawValue & 1 == 0 }

    public var description: String {
        (isAuthenticated ? "authenticated " : "unauthenticated ") + (isLocal ? "local" : "remote")
    }
}

/// A CSRK (Vol 3 Part H §2.4.2.2), for ATT Signed Write (Vol 3 Part C §10.4).
public struct SignatureResolvingKey: Sendable, Equatable {
    public var address: BluetoothAddress
    public var addressType: LEAddressType
    public var type: SignatureResolvingKeyType
    /// 16 octets, least significant first.
    public var value: [UInt8]

    public init(address: BluetoothAddress, addressType: LEAddressType, type: SignatureResolvingKeyType, value: [UInt8]) {
        self.address = address
        self.addressType = addressType
        self.type = type
        self.value = value
    }
}

// MARK: - Commands

extension ManagementCommand {
    /// At most this many keys fit the 16-bit parameter length of Load Long Term Keys: (65535 - 2) / 36.
    public static let maximumLongTermKeys = (Int(UInt16.max) - 2) / LongTermKey.entrySize
    /// At most this many keys fit the 16-bit parameter length of Load Identity Resolving Keys: (65535 - 2) / 23.
    public static let maximumIdentityResolvingKeys = (Int(UInt16.max) - 2) / IdentityResolvingKey.entrySize

    /// Load Long Term Keys (0x0013): Key_Count, then each key's entry; it replaces the kernel's list. Nil for
    /// more than `maximumLongTermKeys` or a value that is not 16 octets.
    public static func loadLongTermKeys(index: Int, keys: [LongTermKey]) -> ManagementCommand? {
        guard keys.count <= maximumLongTermKeys, keys.allSatisfy({ $0.value.count == 16 }) else { return nil }
        var p = le16(UInt16(keys.count))
        for k in keys { p += longTermKeyEntry(k) }
        return ManagementCommand(opcode: 0x0013, index: UInt16(index), name: "Load Long Term Keys", parameters: p)
    }

    /// Load Identity Resolving Keys (0x0030): Key_Count, then address, type and value per key. Nil for more
    /// than `maximumIdentityResolvingKeys` or a value that is not 16 octets.
    public static func loadIdentityResolvingKeys(index: Int, keys: [IdentityResolvingKey]) -> ManagementCommand? {
        guard keys.count <= maximumIdentityResolvingKeys, keys.allSatisfy({ $0.value.count == 16 }) else { return nil }
        var p = le16(UInt16(keys.count))
        for k in keys { p += managementAddress(k.address, k.addressType) + k.value }
        return ManagementCommand(opcode: 0x0030, index: UInt16(index), name: "Load Identity Resolving Keys", parameters: p)
    }

    /// Unpair Device (0x001B): address, address type, Disconnect (1: end any link to it first); the kernel drops
    /// its LTK, IRK and CSRK for the peer.
    public static func unpairDevice(index: Int, address: BluetoothAddress, addressType: LEAddressType,
                                    disconnect: Bool = true) -> ManagementCommand {
        ManagementCommand(opcode: 0x001B, index: UInt16(index), name: "Unpair Device",
                          parameters: managementAddress(address, addressType) + [disconnect ? 1 : 0])
    }

    /// Address (6 octets, least significant first) and Address_Type: mgmt's struct mgmt_addr_info.
    static func managementAddress(_ address: BluetoothAddress, _ type: LEAddressType) -> [UInt8] {
        address.bytes.reversed() + [type.rawValue]
    }

    /// One mgmt_ltk_info: address, type, Key_Type, Central, Encryption_Size, EDIV, Rand (8, little-endian), Value.
    static func longTermKeyEntry(_ k: LongTermKey) -> [UInt8] {
        var e = managementAddress(k.address, k.addressType)
        e += [k.type.rawValue, k.central ? 1 : 0, k.encryptionSize]
        e += le16(k.ediv)
        e += (0..<8).map { UInt8(truncatingIfNeeded: k.rand >> (8 * UInt64($0))) }
        return e + k.value
    }
}

// MARK: - Events

extension ManagementEvent {
    /// New Long Term Key (0x000A), New IRK (0x0018) and New CSRK (0x0019) from their parameters `d`; nil for
    /// another code, `d` shorter than the event, or a field out of its documented range.
    static func parseKeyEvent(code: UInt16, index: UInt16, _ d: [UInt8]) -> ManagementEvent? {
        switch code {
        case 0x000A where d.count >= 1 + LongTermKey.entrySize:
            // Store_Hint, then mgmt_ltk_info.
            guard let key = longTermKey(d, at: 1) else { return nil }
            return .newLongTermKey(index: index, storeHint: d[0] != 0, key: key)
        case 0x0018 where d.count >= 1 + 6 + IdentityResolvingKey.entrySize:
            // Store_Hint, Random_Address (00:00:00:00:00:00 when the peer used its identity address), mgmt_irk_info.
            guard let (address, type) = managementAddress(d, at: 7) else { return nil }
            let key = IdentityResolvingKey(address: address, addressType: type, value: Array(d[14..<30]))
            return .newIdentityResolvingKey(index: index, storeHint: d[0] != 0,
                                            randomAddress: BluetoothAddress(uncheckedBytes: d[1..<7].reversed()), key: key)
        case 0x0019 where d.count >= 1 + 7 + 1 + 16:
            // Store_Hint, address, address type, Type, Value.
            guard let (address, type) = managementAddress(d, at: 1),
                  let kind = SignatureResolvingKeyType(rawValue: d[8]) else { return nil }
            return .newSignatureResolvingKey(index: index, storeHint: d[0] != 0,
                                             key: SignatureResolvingKey(address: address, addressType: type, type: kind,
                                                                        value: Array(d[9..<25])))
        default:
            return nil
        }
    }

    /// mgmt_addr_info at `i`: an LE address type only (0x01 public, 0x02 random); nil for BR/EDR or another.
    static func managementAddress(_ d: [UInt8], at i: Int) -> (BluetoothAddress, LEAddressType)? {
        guard let type = LEAddressType(rawValue: d[i + 6]) else { return nil }
        return (BluetoothAddress(uncheckedBytes: d[i..<(i + 6)].reversed()), type)
    }

    /// mgmt_ltk_info at `i` (the caller checked that 36 octets are there).
    static func longTermKey(_ d: [UInt8], at i: Int) -> LongTermKey? {
        guard let (address, addressType) = managementAddress(d, at: i),
              let type = LongTermKeyType(rawValue: d[i + 7]), d[i + 8] <= 1 else { return nil }
        let rand = (0..<8).reduce(UInt64(0)) { $0 | UInt64(d[i + 12 + $1]) << (8 * UInt64($1)) }
        return LongTermKey(address: address, addressType: addressType, type: type, central: d[i + 8] == 1,
                           encryptionSize: d[i + 9], ediv: d.littleEndianUInt16(at: i + 10), rand: rand,
                           value: Array(d[(i + 20)..<(i + 36)]))
    }
}
