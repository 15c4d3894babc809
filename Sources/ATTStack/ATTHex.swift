// The project's one hexadecimal formatter (no Foundation): the codec's descriptions, the GATT client's errors,
// the CLI's text and JSON, the simulator's logs and the digests all print bytes and numbers through it.

/// Hexadecimal text for handles, bytes and byte strings.
public enum ATTHex {
    static let upperDigits: [UInt8] = Array("0123456789ABCDEF".utf8)
    static let lowerDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// `0x0D`
    public static func byte(_ b: UInt8) -> String {
        "0x" + fixed(UInt64(b), digits: 2, lowercase: false)
    }

    /// `0x002A`
    public static func handle(_ h: UInt16) -> String {
        "0x" + fixed(UInt64(h), digits: 4, lowercase: false)
    }

    /// `0x2a`, `0xc`: lowercase, as few digits as the value needs.
    public static func short(_ value: some BinaryInteger) -> String {
        "0x" + String(value, radix: 16)
    }

    /// `value` as exactly `count` hex digits (the low ones).
    public static func fixed(_ value: UInt64, digits count: Int, lowercase: Bool) -> String {
        let table = lowercase ? lowerDigits : upperDigits
        var out: [UInt8] = []
        out.reserveCapacity(count)
        var shift = (count - 1) * 4
        while shift >= 0 {
            out.append(table[Int((value >> UInt64(shift)) & 0xF)])
            shift -= 4
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `0102ff` (lowercase unless `uppercase`), with `separator` between bytes: `01 02 ff`.
    public static func string(_ bytes: some Sequence<UInt8>, separator: String = "", uppercase: Bool = false) -> String {
        let table = uppercase ? upperDigits : lowerDigits
        let sep = Array(separator.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * (2 + sep.count))
        var first = true
        for b in bytes {
            if !first { out.append(contentsOf: sep) }
            first = false
            out.append(table[Int(b >> 4)])
            out.append(table[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// "0102ff" (either case, no separator) as bytes, two digits each; nil for anything else (the inverse of `string`).
    public static func bytes(parsing text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ d: UInt8) -> UInt8? {
            switch d {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let hi = value(digits[i]), let lo = value(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        return out
    }

    /// `01 02 ff` (lowercase, space separated), cut after `limit` bytes with " …": the codec's descriptions.
    public static func bytes<C: Collection>(_ bytes: C, limit: Int = 32) -> String where C.Element == UInt8 {
        string(bytes.prefix(limit), separator: " ") + (bytes.count > limit ? " …" : "")
    }
}
