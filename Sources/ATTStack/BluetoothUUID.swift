// Bluetooth UUIDs: Core Spec 5.4 Vol 3 Part B §2.5.1 (UUID and the Bluetooth Base UUID) and
// Vol 3 Part F §3.2.1 (attribute types: 16-bit and 128-bit UUIDs on the ATT wire).

/// A Bluetooth UUID of 16, 32 or 128 bits (Core Spec 5.4 Vol 3 Part B §2.5.1). Short forms stand for
/// values on the Bluetooth Base UUID 00000000-0000-1000-8000-00805F9B34FB, so `.bit16(0x2A00)` equals
/// `.bit128` of 00002a00-0000-1000-8000-00805f9b34fb, and hashes the same.
/// A `.bit128` value holds the UUID as one big-endian number: its most significant byte is the first
/// pair of hex digits of the string form.
public enum BluetoothUUID: Sendable, Hashable, CustomStringConvertible, LosslessStringConvertible {
    case bit16(UInt16)
    case bit32(UInt32)
    case bit128(UInt128)

    /// 00000000-0000-1000-8000-00805F9B34FB.
    public static let baseUUID: UInt128 = 0x0000_0000_0000_1000_8000_0080_5F9B_34FB

    /// The full 128-bit value, short forms placed on the Base UUID (value << 96 + base).
    @inlinable public var uuid128: UInt128 {
        switch self {
        case .bit16(let v): return (UInt128(v) << 96) | Self.baseUUID
        case .bit32(let v): return (UInt128(v) << 96) | Self.baseUUID
        case .bit128(let v): return v
        }
    }

    /// The 32-bit alias when this UUID lies on the Base UUID.
    @inlinable public var uuid32: UInt32? {
        let v = uuid128
        guard v & ((UInt128(1) << 96) - 1) == Self.baseUUID else { return nil }
        return UInt32(truncatingIfNeeded: v >> 96)
    }

    /// The 16-bit alias when this UUID lies on the Base UUID with a 16-bit value.
    @inlinable public var uuid16: UInt16? {
        guard let v = uuid32, v <= 0xFFFF else { return nil }
        return UInt16(v)
    }

    /// The narrowest form: `.bit16` or `.bit32` when on the Base UUID, else `.bit128`.
    public var shortest: BluetoothUUID {
        if let v = uuid16 { return .bit16(v) }
        if let v = uuid32 { return .bit32(v) }
        return self
    }

    @inlinable public static func == (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool {
        lhs.uuid128 == rhs.uuid128
    }

    @inlinable public func hash(into hasher: inout Hasher) {
        hasher.combine(uuid128)
    }

    // MARK: Wire forms

    /// From 2, 4 or 16 little-endian wire bytes (the order ATT, GATT declarations and advertising use).
    public init?<C: Collection>(littleEndian bytes: C) where C.Element == UInt8 {
        switch bytes.count {
        case 2:
            var i = bytes.startIndex
            let lo = bytes[i]; bytes.formIndex(after: &i)
            self = .bit16(UInt16(lo) | UInt16(bytes[i]) << 8)
        case 4:
            var v: UInt32 = 0
            var shift: UInt32 = 0
            for b in bytes { v |= UInt32(b) << shift; shift += 8 }
            self = .bit32(v)
        case 16:
            var v: UInt128 = 0
            var shift = 0
            for b in bytes { v |= UInt128(b) << shift; shift += 8 }
            self = .bit128(v)
        default:
            return nil
        }
    }

    /// The case's own width in little-endian order: 2, 4 or 16 bytes.
    public var littleEndianBytes: [UInt8] {
        switch self {
        case .bit16(let v): return [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)]
        case .bit32(let v): return (0..<4).map { UInt8(truncatingIfNeeded: v >> ($0 * 8)) }
        case .bit128(let v): return (0..<16).map { UInt8(truncatingIfNeeded: v >> ($0 * 8)) }
        }
    }

    /// How many bytes this UUID takes in an ATT PDU: 2 when it has a 16-bit alias, else 16
    /// (ATT carries no 32-bit UUIDs, Core Spec 5.4 Vol 3 Part F §3.2.1).
    @inlinable public var attWireLength: Int { uuid16 != nil ? 2 : 16 }

    /// Writes the ATT wire form (2 or 16 little-endian bytes) at `offset`; returns the byte count.
    @inlinable
    func writeATT(to buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        if let v = uuid16 {
            buffer[offset] = UInt8(truncatingIfNeeded: v)
            buffer[offset + 1] = UInt8(truncatingIfNeeded: v >> 8)
            return 2
        }
        let v = uuid128
        for i in 0..<16 { buffer[offset + i] = UInt8(truncatingIfNeeded: v >> (i * 8)) }
        return 16
    }

    // MARK: Strings

    /// Parses "2a00", "0x2A00" (16-bit), "0000180d", "0x0000180D" (32-bit),
    /// "00002a00-0000-1000-8000-00805f9b34fb" or the same 32 digits without dashes (128-bit).
    /// Hex digits may be either case; surrounding whitespace is not accepted.
    public init?(string: String) {
        var s = Substring(string)
        if s.hasPrefix("0x") || s.hasPrefix("0X") { s = s.dropFirst(2) }
        let utf8 = Array(s.utf8)
        switch utf8.count {
        case 4:
            guard let v = Self.hexValue(utf8[...]) else { return nil }
            self = .bit16(UInt16(v))
        case 8:
            guard let v = Self.hexValue(utf8[...]) else { return nil }
            self = .bit32(UInt32(v))
        case 32 where s.count == string.count:
            guard let hi = Self.hexValue(utf8[0..<16]), let lo = Self.hexValue(utf8[16..<32]) else { return nil }
            self = .bit128(UInt128(hi) << 64 | UInt128(lo))
        case 36 where s.count == string.count:
            // 8-4-4-4-12
            for dash in [8, 13, 18, 23] where utf8[dash] != UInt8(ascii: "-") { return nil }
            let digits = utf8.enumerated().filter { ![8, 13, 18, 23].contains($0.offset) }.map(\.element)
            guard let hi = Self.hexValue(digits[0..<16]), let lo = Self.hexValue(digits[16..<32]) else { return nil }
            self = .bit128(UInt128(hi) << 64 | UInt128(lo))
        default:
            return nil
        }
    }

    /// `LosslessStringConvertible`: the same forms as `init?(string:)`.
    public init?(_ description: String) { self.init(string: description) }

    private static func hexValue(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var v: UInt64 = 0
        for c in digits {
            let d: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            v = v << 4 | UInt64(d)
        }
        return v
    }

    /// Lowercase: "2a00" for a 16-bit UUID on the Base UUID, else the 36-character form
    /// "0000fe59-0000-1000-8000-00805f9b34fb" (32-bit ones too).
    public var description: String {
        if let v = uuid16 { return ATTHex.fixed(UInt64(v), digits: 4, lowercase: true) }
        return uuidString
    }

    /// The full 36-character lowercase form, whatever the width.
    public var uuidString: String {
        let v = uuid128
        let hi = UInt64(truncatingIfNeeded: v >> 64)
        let lo = UInt64(truncatingIfNeeded: v)
        return ATTHex.fixed(hi >> 32, digits: 8, lowercase: true) + "-"
            + ATTHex.fixed((hi >> 16) & 0xFFFF, digits: 4, lowercase: true) + "-"
            + ATTHex.fixed(hi & 0xFFFF, digits: 4, lowercase: true) + "-"
            + ATTHex.fixed(lo >> 48, digits: 4, lowercase: true) + "-"
            + ATTHex.fixed(lo & 0xFFFF_FFFF_FFFF, digits: 12, lowercase: true)
    }

    /// The Bluetooth SIG's name for a well-known 16-bit UUID ("Device Name"), or nil.
    public var name: String? {
        guard let v = uuid16 else { return nil }
        return BluetoothUUID.wellKnownNames[v]
    }
}

extension BluetoothUUID {
    // GATT attribute types (Core Spec 5.4 Vol 3 Part G §3).
    public static let primaryService = BluetoothUUID.bit16(0x2800)
    public static let secondaryService = BluetoothUUID.bit16(0x2801)
    public static let include = BluetoothUUID.bit16(0x2802)
    public static let characteristic = BluetoothUUID.bit16(0x2803)
    public static let characteristicExtendedProperties = BluetoothUUID.bit16(0x2900)
    public static let characteristicUserDescription = BluetoothUUID.bit16(0x2901)
    public static let clientCharacteristicConfiguration = BluetoothUUID.bit16(0x2902)
    public static let serverCharacteristicConfiguration = BluetoothUUID.bit16(0x2903)
    public static let characteristicPresentationFormat = BluetoothUUID.bit16(0x2904)
    public static let characteristicAggregateFormat = BluetoothUUID.bit16(0x2905)
    // Services.
    public static let genericAccess = BluetoothUUID.bit16(0x1800)
    public static let genericAttribute = BluetoothUUID.bit16(0x1801)
    public static let deviceInformation = BluetoothUUID.bit16(0x180A)
    public static let heartRate = BluetoothUUID.bit16(0x180D)
    public static let batteryService = BluetoothUUID.bit16(0x180F)
    // Characteristics.
    public static let deviceName = BluetoothUUID.bit16(0x2A00)
    public static let appearance = BluetoothUUID.bit16(0x2A01)
    public static let serviceChanged = BluetoothUUID.bit16(0x2A05)
    public static let clientSupportedFeatures = BluetoothUUID.bit16(0x2B29)
    public static let databaseHash = BluetoothUUID.bit16(0x2B2A)
    public static let serverSupportedFeatures = BluetoothUUID.bit16(0x2B3A)
    public static let batteryLevel = BluetoothUUID.bit16(0x2A19)
    public static let heartRateMeasurement = BluetoothUUID.bit16(0x2A37)

    /// Names of common 16-bit UUIDs from the Bluetooth SIG's Assigned Numbers.
    static let wellKnownNames: [UInt16: String] = [
        // Services
        0x1800: "Generic Access",
        0x1801: "Generic Attribute",
        0x1802: "Immediate Alert",
        0x1803: "Link Loss",
        0x1804: "Tx Power",
        0x1805: "Current Time",
        0x1808: "Glucose",
        0x1809: "Health Thermometer",
        0x180A: "Device Information",
        0x180D: "Heart Rate",
        0x180F: "Battery",
        0x1810: "Blood Pressure",
        0x1812: "Human Interface Device",
        0x1816: "Cycling Speed and Cadence",
        0x1818: "Cycling Power",
        0x1819: "Location and Navigation",
        0x181A: "Environmental Sensing",
        0x181C: "User Data",
        0x181D: "Weight Scale",
        0x1826: "Fitness Machine",
        0xFE59: "Nordic DFU",
        // GATT declarations
        0x2800: "Primary Service",
        0x2801: "Secondary Service",
        0x2802: "Include",
        0x2803: "Characteristic",
        // Descriptors
        0x2900: "Characteristic Extended Properties",
        0x2901: "Characteristic User Description",
        0x2902: "Client Characteristic Configuration",
        0x2903: "Server Characteristic Configuration",
        0x2904: "Characteristic Presentation Format",
        0x2905: "Characteristic Aggregate Format",
        0x2906: "Valid Range",
        0x2907: "External Report Reference",
        0x2908: "Report Reference",
        // Characteristics
        0x2A00: "Device Name",
        0x2A01: "Appearance",
        0x2A02: "Peripheral Privacy Flag",
        0x2A03: "Reconnection Address",
        0x2A04: "Peripheral Preferred Connection Parameters",
        0x2A05: "Service Changed",
        0x2A06: "Alert Level",
        0x2A07: "Tx Power Level",
        0x2A19: "Battery Level",
        0x2A23: "System ID",
        0x2A24: "Model Number String",
        0x2A25: "Serial Number String",
        0x2A26: "Firmware Revision String",
        0x2A27: "Hardware Revision String",
        0x2A28: "Software Revision String",
        0x2A29: "Manufacturer Name String",
        0x2A2B: "Current Time",
        0x2A2A: "IEEE 11073-20601 Regulatory Certification Data List",
        0x2A37: "Heart Rate Measurement",
        0x2A38: "Body Sensor Location",
        0x2A39: "Heart Rate Control Point",
        0x2A4D: "Report",
        0x2A50: "PnP ID",
        0x2A6E: "Temperature",
        0x2A9D: "Weight Measurement",
        0x2A9E: "Weight Scale Feature",
        0x2AA6: "Central Address Resolution",
        0x2AC9: "Resolvable Private Address Only",
        0x2B29: "Client Supported Features",
        0x2B2A: "Database Hash",
        0x2B3A: "Server Supported Features",
    ]
}

extension BluetoothUUID {
    /// The UUID as an attribute value carries it: 2 bytes when it has a 16-bit alias, else 16 (Vol 3 Part F §3.2.1).
    public var attWireBytes: [UInt8] {
        if let short = uuid16 { return BluetoothUUID.bit16(short).littleEndianBytes }
        return BluetoothUUID.bit128(uuid128).littleEndianBytes
    }
}
