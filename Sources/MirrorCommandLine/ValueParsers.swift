// Parsers for the values on a command line. Each refuses with the exact token that was wrong.

import ATTStack
import GATTPeer
import GATTVocabulary
import LinuxBluetooth
import LinkCore

/// A TARGET: a Bluetooth device address with its type, or `unix:PATH` (a simulator's AF_UNIX SOCK_SEQPACKET socket).
public struct TargetArgument: Sendable, Equatable, CustomStringConvertible {
    /// Where to connect (parsed by the bearer's own `BearerTarget`).
    public var target: BearerTarget
    /// The LE address type for a device address (`--type`, default public).
    public var addressType: LEAddressType

    public init(target: BearerTarget, addressType: LEAddressType = .public) {
        self.target = target
        self.addressType = addressType
    }

    public var description: String {
        switch target {
        case .bluetooth(let a): return "\(a) (LE \(addressType))"
        case .unix(let p): return "unix:\(p)"
        }
    }

    /// Whether this is a unix: socket target.
    public var isUnix: Bool {
        if case .unix = target { return true }
        return false
    }
}

/// Parses a TARGET: "unix:/tmp/sim.sock" or "AA:BB:CC:DD:EE:FF" (the type comes from `--type`, default public).
/// `global` refuses the options that only apply to a Bluetooth device (--type, --adapter, --security) on a unix: target.
public func parseTarget(_ token: String, global: GlobalOptions) throws(UsageError) -> TargetArgument {
    let target = try parseTarget(token, type: global.addressType)
    if target.isUnix {
        if global.adapter != nil {
            throw UsageError("--adapter applies to a device address, not to the unix socket target \"\(token)\"", token: token)
        }
        if global.security != nil {
            throw UsageError("--security applies to a Bluetooth link, not to the unix socket target \"\(token)\"", token: token)
        }
        if global.pair {
            throw UsageError("--pair applies to a Bluetooth link, not to the unix socket target \"\(token)\"", token: token)
        }
        if global.repair {
            throw UsageError("--repair applies to a Bluetooth link, not to the unix socket target \"\(token)\"", token: token)
        }
    }
    return target
}

/// Parses a TARGET with an optional address type.
public func parseTarget(_ token: String, type: AddressType?) throws(UsageError) -> TargetArgument {
    let target: BearerTarget
    do {
        target = try BearerTarget(parsing: token)
    } catch {
        throw UsageError(error.description, token: token)
    }
    switch target {
    case .unix:
        if type != nil {
            throw UsageError("--type applies to a device address, not to the unix socket target \"\(token)\"", token: token)
        }
        return TargetArgument(target: target)
    case .bluetooth:
        return TargetArgument(target: target, addressType: type == .random ? .random : .public)
    }
}

/// Parses a device address "AA:BB:CC:DD:EE:FF" into its uppercase printed form.
public func parseAddress(_ token: String) throws(UsageError) -> BluetoothAddress {
    do {
        return try BluetoothAddress(parsing: token)
    } catch {
        throw UsageError(error.description.replacingPrefix("invalid target", with: "invalid address"), token: token)
    }
}

extension String {
    func replacingPrefix(_ prefix: String, with replacement: String) -> String {
        hasPrefix(prefix) ? replacement + dropFirst(prefix.count) : self
    }
}

/// Parses an attribute handle: decimal ("18") or hex with 0x ("0x0012"), 0x0001-0xFFFF.
public func parseHandle(_ token: String) throws(UsageError) -> UInt16 {
    guard let value = ValueEncoder.integer(token) else {
        throw UsageError("invalid handle \"\(token)\": expected a decimal number or 0x hex, as in 18 or 0x0012", token: token)
    }
    guard value != 0 else {
        throw UsageError("invalid handle \"\(token)\": handle 0x0000 is reserved (handles are 0x0001-0xFFFF)", token: token)
    }
    guard value <= 0xFFFF else {
        throw UsageError("invalid handle \"\(token)\": larger than 0xFFFF", token: token)
    }
    return UInt16(value)
}

/// Parses a count or size: a decimal or 0x-hex integer within `range`.
public func parseCount(_ token: String, in range: ClosedRange<Int>, what: String) throws(UsageError) -> Int {
    guard let value = ValueEncoder.integer(token) else {
        throw UsageError("invalid \(what) \"\(token)\": expected a whole number", token: token)
    }
    guard value <= UInt64(Int.max), range.contains(Int(value)) else {
        throw UsageError("invalid \(what) \"\(token)\": must be \(range.lowerBound)-\(range.upperBound)", token: token)
    }
    return Int(value)
}

/// Parses an ATT MTU for `--mtu`: 23-517 (Core Spec Vol 3 Part F §3.2.8; 517 holds a 512-byte value).
public func parseMTU(_ token: String) throws(UsageError) -> Int {
    try parseCount(token, in: 23...517, what: "MTU")
}

/// Parses a duration in seconds: "5", "0.5", "2.5s", "250ms".
public func parseSeconds(_ token: String) throws(UsageError) -> Double {
    var text = Substring(token)
    var scale = 1.0
    if text.hasSuffix("ms") {
        text = text.dropLast(2)
        scale = 0.001
    } else if text.hasSuffix("s") {
        text = text.dropLast()
    }
    guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
          let value = Double(text), value.isFinite, value > 0 else {
        throw UsageError("invalid duration \"\(token)\": expected seconds greater than 0, as in 5, 0.5 or 250ms", token: token)
    }
    return value * scale
}

/// Parses an adapter name: "hci0" (or just "0").
public func parseAdapter(_ token: String) throws(UsageError) -> String {
    let digits = token.hasPrefix("hci") ? token.dropFirst(3) : Substring(token)
    guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
        throw UsageError("invalid adapter \"\(token)\": expected hciN, as in hci0", token: token)
    }
    return "hci\(Int(digits)!)"
}

/// Parses one of an enum's raw values.
public func parseChoice<T: RawRepresentable & CaseIterable>(_ token: String, _ type: T.Type, what: String) throws(UsageError) -> T
where T.RawValue == String {
    guard let value = T(rawValue: token) else {
        let choices = T.allCases.map(\.rawValue).joined(separator: ", ")
        throw UsageError("invalid \(what) \"\(token)\": expected one of \(choices)", token: token)
    }
    return value
}

extension UsageError {
    /// A typed value the library refused, with its words and token unchanged.
    init(_ error: ValueEncodingError) {
        self.init(error.message, token: error.token)
    }
}

/// Parses a hex value (GATTVocabulary's `ValueEncoder.hex`: "0102ff", "0x0102ff", "01:02:ff", "01 02 ff"; "" is
/// the empty value); values too long for the MTU are left to the GATT client, which refuses them with the budget.
public func parseHexValue(_ token: String) throws(UsageError) -> [UInt8] {
    do {
        return try ValueEncoder.hex(token)
    } catch {
        throw UsageError(error)
    }
}

/// A value to write as the command line gives it: bytes, or a name from the profile's table for the characteristic
/// written (`write TARGET scannerAction initDeviceForScan`), which only the characteristic resolves.
public enum WriteValue: Sendable, Equatable {
    case bytes([UInt8])
    case enumName(String)
}

/// Parses a value to write: a typed value (`ValueEncoder.typed`: text:, hex:, u8:...i32:), bare hex, or a name
/// (letters first, not hex) from the profile's table for the characteristic. `valueNames`: the names the profile
/// gives the characteristic's values when the characteristic was named (empty: none), nil when it is not known yet
/// (a handle or a UUID); the error suggests only those.
public func parseWriteValue(_ token: String, valueNames: [String]? = nil) throws(UsageError) -> WriteValue {
    do {
        if let bytes = try ValueEncoder.typed(token) { return .bytes(bytes) }
    } catch {
        throw UsageError(error)
    }
    do {
        return .bytes(try ValueEncoder.hex(token))
    } catch {
        // Letters first and not hex: a name from the characteristic's table, resolved once the characteristic is known.
        if let first = token.first, first.isLetter, token.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) {
            return .enumName(token)
        }
        let names: String
        switch valueNames {
        case nil: names = ", or a name the profile gives this characteristic's values"
        case let n? where n.isEmpty: names = ""
        case let n?: names = ", or one of the names the profile gives its values: " + n.joined(separator: ", ")
        }
        throw UsageError("\(error.message); or give text:STRING, u8:N, u16:N, u32:N, i8:N, i16:N, i32:N" + names, token: token)
    }
}

/// The note for a reference that reads two ways: four decimal digits are taken as a handle (decimal), but are a
/// 16-bit UUID's digits too. Nil for any other token, and for `handle:` and `uuid:`, which say which is meant.
public func referenceAmbiguity(_ token: String) -> String? {
    guard token.count == 4, token.allSatisfy({ $0.isASCII && $0.isNumber }), let h = UInt16(token) else { return nil }
    return "note: \(token) taken as handle \(h) (\(ATTHex.handle(h))); for the 16-bit UUID 0x\(token) write uuid:\(token) (handle:\(token) takes the handle without this note)"
}

/// Parses a UUID: "2a00", "0x2A00", "uuid:1234", "0000180d" (32-bit), or the 36-character form.
public func parseUUID(_ token: String) throws(UsageError) -> BluetoothUUID {
    let text = token.hasPrefix("uuid:") ? String(token.dropFirst(5)) : token
    guard let uuid = BluetoothUUID(string: text) else {
        throw UsageError("invalid UUID \"\(token)\": expected 4 or 8 hex digits (2a00) or the 36-character form (0000180a-0000-1000-8000-00805f9b34fb)", token: token)
    }
    return uuid.shortest
}

/// What `mirror read` reads: one handle, or every attribute of a characteristic type.
public enum AttributeSelector: Sendable, Equatable {
    case handle(UInt16)
    case uuid(BluetoothUUID)
}

/// Parses HANDLE|UUID: digits or 0x-hex is a handle; 4 or 8 hex digits with a letter, "uuid:..." or the
/// 36-character form is a UUID (so "uuid:1234" reads UUID 0x1234, "1234" reads handle 1234).
public func parseHandleOrUUID(_ token: String) throws(UsageError) -> AttributeSelector {
    if token.hasPrefix("uuid:") { return .uuid(try parseUUID(token)) }
    if token.hasPrefix("0x") || token.hasPrefix("0X") || token.allSatisfy({ $0.isASCII && $0.isNumber }) {
        return .handle(try parseHandle(token))
    }
    do {
        return .uuid(try parseUUID(token))
    } catch {
        throw UsageError("invalid HANDLE or UUID \"\(token)\": expected a handle (18, 0x0012) or a UUID (2a00, uuid:1234, or the 36-character form)", token: token)
    }
}

/// How a characteristic is named (GATTPeer's): by handle, UUID or name.
public typealias CharacteristicReference = GATTPeer.CharacteristicReference

/// Parses HANDLE|UUID|NAME: a handle and a UUID as `parseHandleOrUUID` (so "1234" is a handle, "2a00" a UUID,
/// "0x12g" a malformed handle), anything else a name; "name:X" is the name X even where X reads as a UUID.
public func parseCharacteristicReference(_ token: String) throws(UsageError) -> CharacteristicReference {
    if token.hasPrefix("handle:") { return .handle(try parseHandle(String(token.dropFirst(7)))) }
    if token.hasPrefix("name:") {
        let name = String(token.dropFirst(5))
        guard !name.isEmpty else { throw UsageError("invalid name \"\(token)\": nothing after \"name:\"", token: token) }
        return .name(name)
    }
    if token.hasPrefix("uuid:") || token.hasPrefix("0x") || token.hasPrefix("0X") || token.allSatisfy({ $0.isASCII && $0.isNumber }) {
        switch try parseHandleOrUUID(token) {
        case .handle(let h): return .handle(h)
        case .uuid(let u): return .uuid(u)
        }
    }
    if let uuid = try? parseUUID(token) { return .uuid(uuid) }
    return .name(token)
}
