// What a value means beside its bytes, for any peer: the formats a peer declares (Characteristic Presentation
// Format, Core Spec Vol 3 Part G §3.3.3.5) and the well-known characteristics (GATT Specification Supplement).
import ATTStack

public enum ValueFormatter {
    /// The decoded form of `bytes`, the value of the characteristic (or descriptor) `uuid`; nil when nothing is
    /// known about it. `presentation` is the characteristic's 0x2904 descriptor value, when it was read.
    public static func decode(_ bytes: [UInt8], uuid: BluetoothUUID?, presentation: [UInt8]? = nil) -> String? {
        if let presentation, let d = presentationFormat(bytes, presentation) { return d }
        guard let uuid else { return nil }
        switch uuid {
        case .bit16(0x2A00): return String(validating: bytes, as: UTF8.self).map { "\"\(TerminalText.escaped($0))\"" }
        case .bit16(0x2A01): return appearance(bytes)
        case .bit16(0x2902): return cccd(bytes)
        case .bit16(0x2A19): return bytes.count == 1 && bytes[0] <= 100 ? "\(bytes[0]) %" : nil
        case .bit16(0x2A50): return pnpID(bytes)
        case .bit16(0x2A05): return bytes.count == 4 ? "handles \(ATTHex.handle(bytes.littleEndianUInt16(at: 0)))-\(ATTHex.handle(bytes.littleEndianUInt16(at: 2)))" : nil
        default: return nil
        }
    }

    /// A value in the format its Characteristic Presentation Format declares (§3.3.3.5: format, exponent, unit):
    /// the unsigned and signed integers with the exponent applied, and UTF-8 strings.
    public static func presentationFormat(_ bytes: [UInt8], _ p: [UInt8]) -> String? {
        guard p.count >= 4 else { return nil }
        let exponent = Int(Int8(bitPattern: p[1]))
        let unit = unitSymbol(p.littleEndianUInt16(at: 2))
        func number(_ raw: Int) -> String {
            var text: String
            if exponent >= 0 {
                var v = raw
                for _ in 0..<exponent { v *= 10 }
                text = String(v)
            } else {
                let digits = String(abs(raw)), places = -exponent
                let padded = String(repeating: "0", count: max(0, places + 1 - digits.count)) + digits
                text = (raw < 0 ? "-" : "") + padded.dropLast(places) + "." + padded.suffix(places)
            }
            return unit.map { "\(text) \($0)" } ?? text
        }
        func unsigned(_ n: Int) -> Int? { bytes.count == n ? (0..<n).reduce(0) { $0 | Int(bytes[$1]) << (8 * $1) } : nil }
        func signed(_ n: Int) -> Int? {
            guard let u = unsigned(n) else { return nil }
            let bits = 8 * n
            return u >= 1 << (bits - 1) ? u - (1 << bits) : u
        }
        switch p[0] {
        case 0x04: return unsigned(1).map(number)
        case 0x06: return unsigned(2).map(number)
        case 0x07: return unsigned(3).map(number)
        case 0x08: return unsigned(4).map(number)
        case 0x0C: return signed(1).map(number)
        case 0x0E: return signed(2).map(number)
        case 0x10: return signed(4).map(number)
        case 0x19: return String(validating: bytes, as: UTF8.self).map { "\"\(TerminalText.escaped($0))\"" }
        default: return nil
        }
    }

    /// A few units of the Assigned Numbers' "Units" list (§3.5), by their symbols; nil for unitless (0x2700) and
    /// others. 0x27A7 is velocity in mi/h and 0x2781 pressure in mmHg (this table said bpm and dBm); beats per
    /// minute is 0x27AF.
    public static func unitSymbol(_ unit: UInt16) -> String? {
        [0x2701: "m", 0x2702: "kg", 0x2703: "s", 0x2704: "A", 0x2705: "K", 0x2722: "Hz", 0x2724: "Pa", 0x2725: "J",
         0x2726: "W", 0x2728: "V", 0x272F: "°C", 0x2781: "mmHg", 0x27A6: "km/h", 0x27A7: "mi/h", 0x27AC: "°F",
         0x27AD: "%", 0x27AF: "bpm"][unit]
    }

    /// Appearance (0x2A01): category (bits 15-6) and subcategory (bits 5-0), by name for the common ones.
    public static func appearance(_ bytes: [UInt8]) -> String? {
        guard bytes.count == 2 else { return nil }
        let v = bytes.littleEndianUInt16(at: 0)
        let names: [UInt16: String] = [
            0x0000: "Unknown", 0x0040: "Generic Phone", 0x0080: "Generic Computer", 0x00C0: "Generic Watch",
            0x0140: "Generic Display", 0x0180: "Generic Remote Control", 0x0200: "Generic Tag",
            0x0340: "Generic Heart Rate Sensor", 0x03C0: "Generic Human Interface Device", 0x03C1: "Keyboard",
            0x03C2: "Mouse", 0x0C80: "Generic Weight Scale",
        ]
        return names[v] ?? "category \(v >> 6), subcategory \(v & 0x3F)"
    }

    /// Client Characteristic Configuration (0x2902, §3.3.3.3): bit 0 notifications, bit 1 indications.
    public static func cccd(_ bytes: [UInt8]) -> String? {
        guard bytes.count == 2 else { return nil }
        let v = bytes.littleEndianUInt16(at: 0)
        var parts = ["notifications \(v & 1 != 0 ? "on" : "off")", "indications \(v & 2 != 0 ? "on" : "off")"]
        if v & ~3 != 0 { parts.append("reserved bits \(ATTHex.short(v & ~3))") }
        return parts.joined(separator: ", ")
    }

    /// PnP ID (0x2A50): vendor ID source (1 Bluetooth SIG, 2 USB-IF), vendor, product, version.
    public static func pnpID(_ bytes: [UInt8]) -> String? {
        guard bytes.count == 7 else { return nil }
        let source = bytes[0] == 1 ? "Bluetooth SIG" : bytes[0] == 2 ? "USB-IF" : "source \(bytes[0])"
        return "vendor \(ATTHex.handle(bytes.littleEndianUInt16(at: 1))) (\(source)), product \(ATTHex.handle(bytes.littleEndianUInt16(at: 3))), version \(ATTHex.handle(bytes.littleEndianUInt16(at: 5)))"
    }
}
