// The project's one JSON mechanism (RFC 8259): a value with ordered object keys, its writer and its parser.
// `--json` output, the doctor's and adapters' reports, profiles and simulator scenarios all go through it; the
// key order is the order the fields were given in, so output is stable from run to run.
import ATTStack

/// A JSON value whose objects keep their keys in the order given.
public enum JSONValue: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByFloatLiteral {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    /// Keys in output order; a key given twice is written twice (callers do not).
    case object([(String, JSONValue)])

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(floatLiteral value: Double) { self = .double(value) }

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y
        case (.string(let x), .string(let y)): return x == y
        case (.array(let x), .array(let y)): return x == y
        case (.object(let x), .object(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// An object with its keys in byte order (as Foundation's JSONEncoder writes `.sortedKeys`): the reports of
    /// `mirror doctor --json` and `mirror adapters --json`.
    public static func sortedObject(_ fields: [(String, JSONValue)]) -> JSONValue {
        .object(fields.sorted { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) })
    }

    /// The value of `key` in an object; nil for a missing key or a non-object. Setting replaces the (first) key's value
    /// in place (or appends the key); setting nil removes it; setting on a non-object does nothing.
    public subscript(key: String) -> JSONValue? {
        get {
            guard case .object(let fields) = self else { return nil }
            return fields.first { $0.0 == key }?.1
        }
        set {
            guard case .object(var fields) = self else { return }
            if let newValue {
                if let i = fields.firstIndex(where: { $0.0 == key }) { fields[i].1 = newValue } else { fields.append((key, newValue)) }
            } else {
                fields.removeAll { $0.0 == key }
            }
            self = .object(fields)
        }
    }

    /// An object's fields in document order, each key once (a repeated key keeps its last value, at its
    /// first place); nil for a non-object.
    public var fields: [(String, JSONValue)]? {
        guard case .object(let all) = self else { return nil }
        var out: [(String, JSONValue)] = []
        for (key, value) in all {
            if let i = out.firstIndex(where: { $0.0 == key }) { out[i].1 = value } else { out.append((key, value)) }
        }
        return out
    }

    /// An array's elements; nil for a non-array.
    public var items: [JSONValue]? {
        guard case .array(let items) = self else { return nil }
        return items
    }

    /// A string's text; nil for a non-string.
    public var string: String? {
        guard case .string(let s) = self else { return nil }
        return s
    }

    /// A number as an integer (a fraction truncated toward zero); nil for a non-number or one out of Int's range.
    public var integer: Int? {
        switch self {
        case .int(let i): return i
        case .double(let d): return Int(exactly: d.rounded(.towardZero))
        default: return nil
        }
    }

    /// A number (integer or not) as a Double; nil for a non-number.
    public var number: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// A value as a setting's text: a string as it is, anything else in compact form.
    public var text: String {
        if case .string(let s) = self { return s }
        return compact
    }

    /// The element at `index` of an array; nil out of range or for a non-array.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let items) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }

    /// Compact form on one line (for streams: one object per line).
    public var compact: String {
        var out = ""
        write(into: &out, indent: nil, level: 0)
        return out
    }

    /// Indented form, two spaces a level.
    public var pretty: String {
        var out = ""
        write(into: &out, indent: "  ", level: 0)
        return out
    }

    private func write(into out: inout String, indent: String?, level: Int) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += JSONValue.format(d)
        case .string(let s): JSONValue.escape(s, into: &out)
        case .array(let items):
            if items.isEmpty { out += "[]"; return }
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                if let indent { out += "\n" + String(repeating: indent, count: level + 1) }
                item.write(into: &out, indent: indent, level: level + 1)
            }
            if let indent { out += "\n" + String(repeating: indent, count: level) }
            out += "]"
        case .object(let fields):
            if fields.isEmpty { out += "{}"; return }
            out += "{"
            for (i, (key, value)) in fields.enumerated() {
                if i > 0 { out += "," }
                if let indent { out += "\n" + String(repeating: indent, count: level + 1) }
                JSONValue.escape(key, into: &out)
                out += indent == nil ? ":" : ": "
                value.write(into: &out, indent: indent, level: level + 1)
            }
            if let indent { out += "\n" + String(repeating: indent, count: level) }
            out += "}"
        }
    }

    /// Numbers: integers without a fraction, others with up to 6 significant decimals; non-finite as null.
    static func format(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        if d == d.rounded(), abs(d) < 1e15 { return String(Int(d)) }
        var s = String(d)
        if s.contains("e") { return s }
        // Trim float noise: keep at most 6 decimals.
        if let dot = s.firstIndex(of: ".") {
            let decimals = s.distance(from: dot, to: s.endIndex) - 1
            if decimals > 6 {
                let scaled = (d * 1_000_000).rounded() / 1_000_000
                s = String(scaled)
            }
        }
        return s
    }

    static func escape(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            // RFC 8259 §7 requires only C0 escaped; DEL, C1 and the bidi and line controls are escaped too
            // (TerminalText.isUnsafe), so JSON printed on a terminal is as safe as text and still exact.
            case let c where TerminalText.isUnsafe(c):
                out += "\\u" + ATTHex.fixed(UInt64(c.value), digits: 4, lowercase: true)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// Parses JSON text into a `JSONValue` (keys in document order): profile and scenario files, and tests.
public func parseJSON(_ text: String) throws(JSONParseError) -> JSONValue {
    try parseJSON(bytes: Array(text.utf8))
}

/// Parses JSON from UTF-8 bytes (a file's contents).
public func parseJSON(bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
    var parser = JSONParser(bytes: bytes)
    parser.skipSpace()
    let value = try parser.value()
    parser.skipSpace()
    guard parser.index == parser.bytes.count else { throw JSONParseError(offset: parser.index, problem: "trailing characters") }
    return value
}

/// How deep arrays and objects may nest: the parser recurses once per level, and 100,000 `[` would overflow the
/// stack (RFC 8259 §9 lets a parser limit nesting). No file mirror reads comes near it.
public let jsonMaximumNestingDepth = 512

/// Where JSON text was malformed.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var offset: Int
    public var problem: String
    public var description: String { "invalid JSON at byte \(offset): \(problem)" }
}

private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    /// Arrays and objects open around the current position, bounded by `jsonMaximumNestingDepth`.
    var depth = 0

    /// Enters one more array or object, failing past the nesting limit instead of recursing further.
    mutating func enter() throws(JSONParseError) {
        guard depth < jsonMaximumNestingDepth else {
            throw fail("arrays and objects nested deeper than the limit of \(jsonMaximumNestingDepth) levels")
        }
        depth += 1
    }

    mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    func fail(_ problem: String) -> JSONParseError { JSONParseError(offset: index, problem: problem) }

    mutating func expect(_ literal: String) throws(JSONParseError) {
        for b in literal.utf8 {
            guard index < bytes.count, bytes[index] == b else { throw fail("expected \(literal)") }
            index += 1
        }
    }

    mutating func value() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            try enter()
            defer { depth -= 1 }
            index += 1
            var fields: [(String, JSONValue)] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(fields) }
            while true {
                skipSpace()
                guard case .string(let key) = try value() else { throw fail("expected a string key") }
                skipSpace()
                try expect(":")
                skipSpace()
                fields.append((key, try value()))
                skipSpace()
                guard index < bytes.count else { throw fail("unexpected end in object") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(fields) }
                throw fail("expected , or }")
            }
        case UInt8(ascii: "["):
            try enter()
            defer { depth -= 1 }
            index += 1
            var items: [JSONValue] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            while true {
                skipSpace()
                items.append(try value())
                skipSpace()
                guard index < bytes.count else { throw fail("unexpected end in array") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                throw fail("expected , or ]")
            }
        case UInt8(ascii: "\""):
            index += 1
            var scalars = String.UnicodeScalarView()
            var raw: [UInt8] = []
            func flush() { scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars); raw.removeAll() }
            while true {
                guard index < bytes.count else { throw fail("unterminated string") }
                let b = bytes[index]
                index += 1
                if b == UInt8(ascii: "\"") { flush(); return .string(String(scalars)) }
                if b != UInt8(ascii: "\\") { raw.append(b); continue }
                guard index < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[index]
                index += 1
                flush()
                switch e {
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "u"):
                    guard index + 4 <= bytes.count, let v = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
                    else { throw fail("bad \\u escape") }
                    index += 4
                    scalars.append(UnicodeScalar(v) ?? "\u{FFFD}")
                default: scalars.append(UnicodeScalar(e))
                }
            }
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        default:
            let start = index
            while index < bytes.count, "+-0123456789.eE".utf8.contains(bytes[index]) { index += 1 }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if let i = Int(text) { return .int(i) }
            if let d = Double(text) { return .double(d) }
            index = start
            throw fail("unexpected character")
        }
    }
}
