// Values typed as a user thinks of them, as the bytes GATT carries: text, little-endian integers (Vol 3 Part F
// §3.3), hex. Each refusal names the exact token that was wrong.

/// Why a typed value has no bytes: `message` is the sentence, `token` the text it is about.
public struct ValueEncodingError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var token: String

    public init(_ message: String, token: String) {
        self.message = message
        self.token = token
    }

    public var description: String { message }
}

public enum ValueEncoder {
    /// A decimal or 0x-hex non-negative integer; nil when it is neither.
    public static func integer(_ token: String) -> UInt64? {
        if token.hasPrefix("0x") || token.hasPrefix("0X") {
            let digits = token.dropFirst(2)
            guard !digits.isEmpty, digits.count <= 16, digits.allSatisfy(\.isHexDigit) else { return nil }
            return UInt64(digits, radix: 16)
        }
        guard !token.isEmpty, token.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt64(token)
    }

    /// A hex value: "0102ff", "0x0102ff", "01:02:ff", "01 02 ff"; "" is the empty value. Values longer than an
    /// attribute can hold (512 bytes) or than the MTU allows are left to the GATT client. At most 65535 bytes.
    public static func hex(_ token: String) throws(ValueEncodingError) -> [UInt8] {
        var digits: [UInt8] = []
        var text = Substring(token)
        if text.hasPrefix("0x") || text.hasPrefix("0X") { text = text.dropFirst(2) }
        let separated = text.contains(":") || text.contains(" ") || text.contains("-")
        var position = token.count - text.count
        var bytes: [UInt8] = []
        for ch in text {
            position += 1
            if separated && (ch == ":" || ch == " " || ch == "-") {
                if digits.count == 1 {
                    throw ValueEncodingError("invalid hex value \"\(token)\": the byte before position \(position) has one hex digit (each byte is two)", token: token)
                }
                continue
            }
            guard let nibble = ch.hexDigitValue, ch.isASCII else {
                throw ValueEncodingError("invalid hex value \"\(token)\": \"\(ch)\" at position \(position) is not a hex digit", token: token)
            }
            digits.append(UInt8(nibble))
            if digits.count == 2 {
                bytes.append(digits[0] << 4 | digits[1])
                digits.removeAll(keepingCapacity: true)
            }
        }
        guard digits.isEmpty else {
            throw ValueEncodingError("invalid hex value \"\(token)\": odd number of hex digits (each byte is two digits)", token: token)
        }
        guard bytes.count <= 65535 else {
            throw ValueEncodingError("invalid hex value \"\(token.prefix(16))...\": \(bytes.count) bytes, more than an ATT value can ever be", token: token)
        }
        return bytes
    }

    /// A typed value: `text:STRING` (its UTF-8), `hex:HEX` (`hex(_:)`), `u8:N`, `u16:N`, `u32:N`, `i8:N`, `i16:N`,
    /// `i32:N` (decimal or 0x hex, little-endian as GATT carries numbers); nil when the token has no such prefix.
    public static func typed(_ token: String) throws(ValueEncodingError) -> [UInt8]? {
        if token.hasPrefix("text:") { return Array(token.dropFirst(5).utf8) }
        if token.hasPrefix("hex:") { return try hex(String(token.dropFirst(4))) }
        let integerKinds: [(prefix: String, bytes: Int, signed: Bool)] = [
            ("u8:", 1, false), ("u16:", 2, false), ("u32:", 4, false), ("i8:", 1, true), ("i16:", 2, true), ("i32:", 4, true),
        ]
        guard let kind = integerKinds.first(where: { token.hasPrefix($0.prefix) }) else { return nil }
        let text = String(token.dropFirst(kind.prefix.count))
        let bits = 8 * kind.bytes
        let range: ClosedRange<Int64> = kind.signed ? -(Int64(1) << (bits - 1))...((Int64(1) << (bits - 1)) - 1) : 0...((Int64(1) << bits) - 1)
        let negative = text.hasPrefix("-")
        let magnitude = integer(negative ? String(text.dropFirst()) : text)
        guard let magnitude, magnitude <= UInt64(Int64.max) else {
            throw ValueEncodingError("invalid value \"\(token)\": \"\(text)\" is not a decimal or 0x hex integer", token: token)
        }
        let v = negative ? -Int64(magnitude) : Int64(magnitude)
        guard range.contains(v) else {
            throw ValueEncodingError("invalid value \"\(token)\": \(v) is outside \(kind.prefix.dropLast())'s range \(range.lowerBound)...\(range.upperBound)", token: token)
        }
        let u = UInt64(bitPattern: v)
        return (0..<kind.bytes).map { UInt8(truncatingIfNeeded: u >> (8 * UInt64($0))) }
    }
}
