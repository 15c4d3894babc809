// Small hexadecimal formatting helpers shared by the codec's descriptions (no Foundation).

/// Lower-level hex formatting used by `description`s in ATTStack.
@usableFromInline
enum ATTHex {
    @usableFromInline static let digits: [Character] = Array("0123456789ABCDEF")
    @usableFromInline static let lowerDigits: [Character] = Array("0123456789abcdef")

    /// `0x0D`
    @usableFromInline static func byte(_ b: UInt8) -> String {
        "0x" + String(digits[Int(b >> 4)]) + String(digits[Int(b & 0xF)])
    }

    /// `0x002A`
    @usableFromInline static func handle(_ h: UInt16) -> String {
        "0x" + fixed(UInt64(h), digits: 4, lowercase: false)
    }

    /// `value` as exactly `digits` hex digits.
    static func fixed(_ value: UInt64, digits count: Int, lowercase: Bool) -> String {
        let table = lowercase ? lowerDigits : digits
        var out = ""
        out.reserveCapacity(count)
        var shift = (count - 1) * 4
        while shift >= 0 {
            out.append(table[Int((value >> UInt64(shift)) & 0xF)])
            shift -= 4
        }
        return out
    }

    /// `01 02 ff` (lowercase, space separated), cut after `limit` bytes with "…".
    static func bytes<C: Collection>(_ bytes: C, limit: Int = 32) -> String where C.Element == UInt8 {
        var out = ""
        var n = 0
        for b in bytes {
            if n == limit { out += " …"; break }
            if n > 0 { out.append(" ") }
            out.append(lowerDigits[Int(b >> 4)])
            out.append(lowerDigits[Int(b & 0xF)])
            n += 1
        }
        return out
    }
}
