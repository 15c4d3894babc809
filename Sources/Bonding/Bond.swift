// One bond: the keys SMP distributed between this adapter and a peer (Core Spec 5.4 Vol 3 Part H §3.6, §2.4) and
// how it was made, and its file's JSON. Key values are hex in the order SMP and mgmt carry them (least significant
// octet first), as bluetoothd's info files write them.
import ATTStack
import JSON
import LinuxBluetooth
import Glibc

/// The association model a bond was made with, as its file records it (Vol 3 Part H §2.3.5.1); `unknown` for a
/// bond read from bluetoothd. The pairing agent's `PairingMethod` (LinuxBluetooth) says which one a pairing used.
public enum BondMethod: String, Sendable, Equatable, CaseIterable {
    case justWorks = "just-works"
    case passkeyEntry = "passkey-entry"
    case numericComparison = "numeric-comparison"
    case outOfBand = "out-of-band"
    case unknown

    /// The method a pairing used.
    public init(_ method: PairingMethod) {
        switch method {
        case .justWorks: self = .justWorks
        case .passkeyEntry: self = .passkeyEntry
        case .numericComparison: self = .numericComparison
        }
    }
}

/// The keys shared with one peer, by this adapter's identity address and the peer's.
public struct Bond: Sendable, Equatable {
    /// This adapter's identity address (the bond is the adapter's, not the machine's).
    public var adapter: BluetoothAddress
    /// The peer's identity address (public or static random) and its type.
    public var peer: BluetoothAddress
    public var peerType: LEAddressType
    /// Legacy pairing: up to one per role (`central`); Secure Connections: one, used in both.
    public var longTermKeys: [LongTermKey]
    /// The peer's IRK (Vol 3 Part H §2.4.2.1), 16 octets least significant first; nil when it sent none.
    public var identityResolvingKey: [UInt8]?
    /// CSRKs, local and remote (Vol 3 Part H §2.4.2.2).
    public var signatureResolvingKeys: [SignatureResolvingKey]
    /// When the bond was made, in seconds since the Unix epoch (UTC).
    public var bondedAt: Int
    public var method: BondMethod
    /// The encryption key size negotiated, 7...16 octets (Vol 3 Part H §2.3.4).
    public var keySize: Int
    /// Made with MITM protection (Vol 3 Part H §2.3.1).
    public var authenticated: Bool

    public init(adapter: BluetoothAddress, peer: BluetoothAddress, peerType: LEAddressType, longTermKeys: [LongTermKey] = [],
                identityResolvingKey: [UInt8]? = nil, signatureResolvingKeys: [SignatureResolvingKey] = [], bondedAt: Int,
                method: BondMethod, keySize: Int, authenticated: Bool) {
        self.adapter = adapter
        self.peer = peer
        self.peerType = peerType
        self.longTermKeys = longTermKeys
        self.identityResolvingKey = identityResolvingKey
        self.signatureResolvingKeys = signatureResolvingKeys
        self.bondedAt = bondedAt
        self.method = method
        self.keySize = keySize
        self.authenticated = authenticated
    }

    /// The IRK as Load Identity Resolving Keys takes it; nil without one.
    public var identityResolvingKeyEntry: IdentityResolvingKey? {
        identityResolvingKey.map { IdentityResolvingKey(address: peer, addressType: peerType, value: $0) }
    }

    /// "LTK (central, peripheral), IRK, CSRK (local)": what the bond holds, for a listing.
    public var keySummary: String {
        var parts: [String] = []
        if !longTermKeys.isEmpty {
            let roles = longTermKeys.map { k in k.type.isSecureConnections ? "both roles" : (k.central ? "central" : "peripheral") }
            parts.append("LTK (\(roles.joined(separator: ", ")))")
        }
        if identityResolvingKey != nil { parts.append("IRK") }
        if !signatureResolvingKeys.isEmpty {
            parts.append("CSRK (\(signatureResolvingKeys.map { $0.type.isLocal ? "local" : "remote" }.joined(separator: ", ")))")
        }
        return parts.isEmpty ? "no keys" : parts.joined(separator: ", ")
    }
}

// MARK: - The file's JSON

extension Bond {
    /// The file format; a file with another one is reported, never read as this one.
    public static let formatVersion = 1

    public var json: JSONValue {
        .object([
            ("format", .int(Self.formatVersion)),
            ("adapter", .string(adapter.description)),
            ("peer", .string(peer.description)),
            ("peerType", .string(peerType.description)),
            ("bondedAt", .int(bondedAt)),
            ("bonded", .string(utcDateTime(unixSeconds: bondedAt))),
            ("method", .string(method.rawValue)),
            ("keySize", .int(keySize)),
            ("authenticated", .bool(authenticated)),
            ("longTermKeys", .array(longTermKeys.map { k in
                .object([("central", .bool(k.central)), ("type", .int(Int(k.type.rawValue))), ("typeName", .string(k.type.description)),
                         ("encryptionSize", .int(Int(k.encryptionSize))), ("ediv", .int(Int(k.ediv))),
                         ("rand", .string(ATTHex.fixed(k.rand, digits: 16, lowercase: true))), ("value", .string(ATTHex.string(k.value)))])
            })),
            ("identityResolvingKey", identityResolvingKey.map { .string(ATTHex.string($0)) } ?? .null),
            ("signatureResolvingKeys", .array(signatureResolvingKeys.map { k in
                .object([("type", .int(Int(k.type.rawValue))), ("typeName", .string(k.type.description)), ("value", .string(ATTHex.string(k.value)))])
            })),
        ])
    }

    /// A file's JSON as a bond; throws what is wrong with it, in words.
    public init(json: JSONValue) throws(BondFileProblem) {
        guard json.fields != nil else { throw BondFileProblem("not a JSON object") }
        guard let format = json["format"]?.integer else { throw BondFileProblem("no \"format\"") }
        guard format == Self.formatVersion else { throw BondFileProblem("format \(format), this mirror reads format \(Self.formatVersion)") }
        let adapter = try Self.address(json, "adapter")
        let peer = try Self.address(json, "peer")
        let typeName = try Self.field(json, "peerType", \.string)
        guard let peerType = LEAddressType(name: typeName) else { throw BondFileProblem("\"peerType\" \"\(typeName)\" is not public or random") }
        let methodName = try Self.field(json, "method", \.string)
        guard let method = BondMethod(rawValue: methodName) else { throw BondFileProblem("\"method\" \"\(methodName)\" is not a pairing method") }
        let keySize = try Self.field(json, "keySize", \.integer)
        guard (7...16).contains(keySize) else { throw BondFileProblem("\"keySize\" \(keySize) is not 7 to 16") }
        let authenticated = try Self.field(json, "authenticated") { v in if case .bool(let b) = v { b } else { nil } }
        let ltks = try Self.field(json, "longTermKeys", \.items).map { (k: JSONValue) throws(BondFileProblem) -> LongTermKey in
            let raw = try Self.field(k, "type", \.integer)
            guard let type = UInt8(exactly: raw).flatMap(LongTermKeyType.init(rawValue:)) else { throw BondFileProblem("LTK type \(raw) is not 0 to 4") }
            let size = try Self.field(k, "encryptionSize", \.integer)
            let ediv = try Self.field(k, "ediv", \.integer)
            guard let encryptionSize = UInt8(exactly: size), (7...16).contains(size) else { throw BondFileProblem("LTK encryptionSize \(size) is not 7 to 16") }
            guard let e = UInt16(exactly: ediv) else { throw BondFileProblem("LTK ediv \(ediv) is not 16 bits") }
            let randText = try Self.field(k, "rand", \.string)
            guard randText.utf8.count == 16, let rand = UInt64(randText, radix: 16) else { throw BondFileProblem("LTK rand \"\(randText)\" is not 16 hex digits") }
            return LongTermKey(address: peer, addressType: peerType, type: type,
                               central: try Self.field(k, "central") { v in if case .bool(let b) = v { b } else { nil } },
                               encryptionSize: encryptionSize, ediv: e, rand: rand, value: try Self.key(k, "value"))
        }
        let irk: [UInt8]? = switch json["identityResolvingKey"] {
        case nil, .null?: nil
        default: try Self.key(json, "identityResolvingKey")
        }
        let csrks = try Self.field(json, "signatureResolvingKeys", \.items).map { (k: JSONValue) throws(BondFileProblem) -> SignatureResolvingKey in
            let raw = try Self.field(k, "type", \.integer)
            guard let type = UInt8(exactly: raw).flatMap(SignatureResolvingKeyType.init(rawValue:)) else { throw BondFileProblem("CSRK type \(raw) is not 0 to 3") }
            return SignatureResolvingKey(address: peer, addressType: peerType, type: type, value: try Self.key(k, "value"))
        }
        self.init(adapter: adapter, peer: peer, peerType: peerType, longTermKeys: ltks, identityResolvingKey: irk,
                  signatureResolvingKeys: csrks, bondedAt: try Self.field(json, "bondedAt", \.integer), method: method,
                  keySize: keySize, authenticated: authenticated)
    }

    private static func field<T>(_ json: JSONValue, _ key: String, _ get: (JSONValue) -> T?) throws(BondFileProblem) -> T {
        guard let v = json[key], let t = get(v) else { throw BondFileProblem("no valid \"\(key)\"") }
        return t
    }

    private static func address(_ json: JSONValue, _ key: String) throws(BondFileProblem) -> BluetoothAddress {
        let text = try field(json, key, \.string)
        do { return try BluetoothAddress(parsing: text) } catch { throw BondFileProblem("\"\(key)\": \(error.problem)") }
    }

    /// A 16-octet key written as 32 hex digits.
    private static func key(_ json: JSONValue, _ name: String) throws(BondFileProblem) -> [UInt8] {
        let text = try field(json, name, \.string)
        guard let bytes = ATTHex.bytes(parsing: text), bytes.count == 16 else { throw BondFileProblem("\"\(name)\" is not 32 hex digits") }
        return bytes
    }
}

/// "2026-12-04T15:52:26Z": `unixSeconds` in UTC, ISO 8601.
public func utcDateTime(unixSeconds: Int) -> String {
    var t = time_t(unixSeconds)
    var parts = tm()
    gmtime_r(&t, &parts)
    func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
    return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
}

/// What is wrong with a bond file's content.
public struct BondFileProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public var problem: String
    public init(_ problem: String) { self.problem = problem }
    public var description: String { problem }
}

// MARK: - From the kernel's key events

extension Bond {
    /// The bond the key events of a pairing give for the peer identity `peer` (New Long Term Key, New IRK, New CSRK:
    /// mgmt-api.txt; each carries the identity address once the IRK resolved it). Only keys with Store_Hint set
    /// are kept (a "No Bonding" pairing sets none); nil when no LTK is to be stored. A later key of the same role
    /// replaces an earlier one. Key size and authentication are the LTKs'.
    public init?(adapter: BluetoothAddress, peer given: BluetoothAddress, events: [ManagementEvent], method: BondMethod, bondedAt: Int) {
        var ltks: [LongTermKey] = [], irk: IdentityResolvingKey?, csrks: [SignatureResolvingKey] = []
        // Paired through a resolvable private address: the New IRK event names it with the identity the peer gave
        // (Vol 3 Part H §3.6.4-5), and the other keys come under that identity; the bond is the identity's.
        var peer = given
        for case .newIdentityResolvingKey(_, _, let rpa, let k) in events where rpa == given { peer = k.address }
        for event in events {
            switch event {
            case .newLongTermKey(_, true, let k) where k.address == peer:
                ltks.removeAll { $0.central == k.central }
                ltks.append(k)
            case .newIdentityResolvingKey(_, true, _, let k) where k.address == peer:
                irk = k
            case .newSignatureResolvingKey(_, true, let k) where k.address == peer:
                csrks.removeAll { $0.type.isLocal == k.type.isLocal }
                csrks.append(k)
            default:
                continue
            }
        }
        guard let first = ltks.first else { return nil }
        ltks.sort { $0.central && !$1.central }
        self.init(adapter: adapter, peer: peer, peerType: first.addressType, longTermKeys: ltks, identityResolvingKey: irk?.value,
                  signatureResolvingKeys: csrks, bondedAt: bondedAt, method: method,
                  keySize: Int(ltks.map(\.encryptionSize).min() ?? 16), authenticated: ltks.allSatisfy { $0.type.isAuthenticated })
    }
}
