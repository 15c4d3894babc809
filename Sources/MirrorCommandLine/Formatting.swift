// Output formatting: the GATT database (text and the `--json` shape other tools rely on), values as hex
// and printable text, characteristic properties, timestamps.

import ATTStack
import LinkCore
import CBlueZSocket
import GATTClient

#if canImport(Glibc)
import Glibc
import JSON
import GATTVocabulary
#endif

/// A discovered GATT database as `mirror gatt` prints it (Core Spec Vol 3 Part G §3: services, includes,
/// characteristic declarations and descriptors).
public struct DatabaseModel: Sendable, Equatable {
    public var mtu: Int
    public var services: [Service]
    /// Names for UUIDs that are not well known (the mirror profile's), by canonical UUID; text output only.
    public var names: [String: String]
    /// What each value read means (ValueFormatter), by its handle; `--read` fills it.
    public var decoded: [UInt16: String] = [:]

    public init(mtu: Int, services: [Service], names: [String: String] = [:]) {
        self.mtu = mtu
        self.services = services
        self.names = names
    }

    /// A service and what it contains.
    public struct Service: Sendable, Equatable {
        /// Canonical lowercase UUID: 4 hex digits for 16-bit, the full form for 128-bit.
        public var uuid: String
        public var start: UInt16
        public var end: UInt16
        public var primary: Bool
        public var includes: [Include]
        public var characteristics: [Characteristic]

        public init(uuid: String, start: UInt16, end: UInt16, primary: Bool = true, includes: [Include] = [],
                    characteristics: [Characteristic] = []) {
            self.uuid = uuid
            self.start = start
            self.end = end
            self.primary = primary
            self.includes = includes
            self.characteristics = characteristics
        }
    }

    /// An include declaration (Core Spec Vol 3 Part G §3.2).
    public struct Include: Sendable, Equatable {
        public var handle: UInt16
        public var start: UInt16
        public var end: UInt16
        /// Nil when the included service has a 128-bit UUID not in the declaration and it was not read.
        public var uuid: String?

        public init(handle: UInt16, start: UInt16, end: UInt16, uuid: String?) {
            self.handle = handle
            self.start = start
            self.end = end
            self.uuid = uuid
        }
    }

    /// A characteristic declaration with its descriptors (Core Spec Vol 3 Part G §3.3).
    public struct Characteristic: Sendable, Equatable {
        public var uuid: String
        /// The declaration's handle.
        public var handle: UInt16
        public var valueHandle: UInt16
        /// The properties byte (Core Spec Vol 3 Part G §3.3.1.1).
        public var properties: UInt8
        public var descriptors: [Descriptor]
        /// The value, when `--read` read it.
        public var value: ReadOutcome?

        public init(uuid: String, handle: UInt16, valueHandle: UInt16, properties: UInt8,
                    descriptors: [Descriptor] = [], value: ReadOutcome? = nil) {
            self.uuid = uuid
            self.handle = handle
            self.valueHandle = valueHandle
            self.properties = properties
            self.descriptors = descriptors
            self.value = value
        }
    }

    /// A characteristic descriptor.
    public struct Descriptor: Sendable, Equatable {
        public var uuid: String
        public var handle: UInt16
        public var value: ReadOutcome?

        public init(uuid: String, handle: UInt16, value: ReadOutcome? = nil) {
            self.uuid = uuid
            self.handle = handle
            self.value = value
        }
    }

    /// What reading a value gave.
    public enum ReadOutcome: Sendable, Equatable {
        case value([UInt8])
        case error(ATTErrorFacts)
    }

    /// The `--json` shape: {"mtu", "services": [{"uuid", "start", "end", "primary", "characteristics":
    /// [{"uuid", "handle", "valueHandle", "properties", "descriptors": [{"uuid", "handle"}]}]}]}.
    /// "includes" appears on a service only when it has include declarations; "value"/"text" (or
    /// "readError") only after `--read`, with "decoded" when the value means something; "name" last on each
    /// service, include, characteristic and descriptor the text names.
    public var json: JSONValue {
        // "name" last, where the text shows one (the profile's name, else the well-known one).
        func named(_ uuid: String?) -> [(String, JSONValue)] {
            uuid.flatMap { names[$0] ?? wellKnownName($0) }.map { [("name", JSONValue.string($0))] } ?? []
        }
        return .object([
            ("mtu", .int(mtu)),
            ("services", .array(services.map { service in
                var fields: [(String, JSONValue)] = [
                    ("uuid", .string(service.uuid)), ("start", .int(Int(service.start))),
                    ("end", .int(Int(service.end))), ("primary", .bool(service.primary)),
                ]
                if !service.includes.isEmpty {
                    fields.append(("includes", .array(service.includes.map { inc in
                        .object([("handle", .int(Int(inc.handle))), ("start", .int(Int(inc.start))),
                                 ("end", .int(Int(inc.end))), ("uuid", inc.uuid.map { .string($0) } ?? .null)] + named(inc.uuid))
                    })))
                }
                fields.append(("characteristics", .array(service.characteristics.map { c in
                    var cf: [(String, JSONValue)] = [
                        ("uuid", .string(c.uuid)), ("handle", .int(Int(c.handle))),
                        ("valueHandle", .int(Int(c.valueHandle))),
                        ("properties", .array(propertyNames(c.properties).map { .string($0) })),
                        ("descriptors", .array(c.descriptors.map { d in
                            var df: [(String, JSONValue)] = [("uuid", .string(d.uuid)), ("handle", .int(Int(d.handle)))]
                            if let v = d.value { df += readOutcomeJSON(v, decoded: decoded[d.handle]) }
                            return .object(df + named(d.uuid))
                        })),
                    ]
                    if let v = c.value { cf += readOutcomeJSON(v, decoded: decoded[c.valueHandle]) }
                    return .object(cf + named(c.uuid))
                })))
                return .object(fields + named(service.uuid))
            })),
        ])
    }

    /// The text form, one line per attribute, indented by level.
    public var text: [String] {
        func nameSuffix(_ uuid: String) -> String {
            (names[uuid] ?? wellKnownName(uuid)).map { " \($0)" } ?? ""
        }
        var lines = ["MTU \(mtu)"]
        for s in services {
            lines.append("\(s.primary ? "Primary" : "Secondary") service \(s.uuid)\(nameSuffix(s.uuid))  handles \(ATTHex.handle(s.start))-\(ATTHex.handle(s.end))")
            for inc in s.includes {
                lines.append("  Include \(ATTHex.handle(inc.handle)): service \(inc.uuid ?? "(128-bit)")\(inc.uuid.map(nameSuffix) ?? "")  handles \(ATTHex.handle(inc.start))-\(ATTHex.handle(inc.end))")
            }
            for c in s.characteristics {
                lines.append("  Characteristic \(c.uuid)\(nameSuffix(c.uuid))  handle \(ATTHex.handle(c.handle))  value handle \(ATTHex.handle(c.valueHandle))  [\(propertyNames(c.properties).joined(separator: ", "))]")
                if let v = c.value { lines.append("    value: " + readOutcomeText(v, decoded: decoded[c.valueHandle])) }
                for d in c.descriptors {
                    lines.append("    Descriptor \(d.uuid)\(nameSuffix(d.uuid))  handle \(ATTHex.handle(d.handle))")
                    if let v = d.value { lines.append("      value: " + readOutcomeText(v, decoded: decoded[d.handle])) }
                }
            }
        }
        return lines
    }
}

func readOutcomeJSON(_ outcome: DatabaseModel.ReadOutcome, decoded: String? = nil) -> [(String, JSONValue)] {
    switch outcome {
    case .value(let bytes):
        return [("value", .string(ATTHex.string(bytes))), ("text", .string(printableText(bytes)))] + (decoded.map { [("decoded", .string($0))] } ?? [])
    case .error(let facts): return [("readError", .object(facts.jsonFields))]
    }
}

func readOutcomeText(_ outcome: DatabaseModel.ReadOutcome, decoded: String? = nil) -> String {
    switch outcome {
    case .value(let bytes): return valueText(bytes, decoded: decoded)
    case .error(let facts): return "(not read: " + TerminalText.escaped(facts.message) + ")"
    }
}

/// "4d 69 72 (3 bytes) "Mir"": hex, length and printable text.
public func valueText(_ bytes: [UInt8]) -> String {
    if bytes.isEmpty { return "(empty)" }
    return "\(ATTHex.string(bytes, separator: " "))  \"\(printableText(bytes))\"  (\(bytes.count) byte\(bytes.count == 1 ? "" : "s"))"
}

/// The text form with the decoded meaning first: "error  [09]  (1 byte)"; without one, `valueText`'s form.
func valueText(_ bytes: [UInt8], decoded: String?) -> String {
    guard let decoded, !bytes.isEmpty else { return valueText(bytes) }
    return "\(decoded)  [\(ATTHex.string(bytes, separator: " "))]  (\(bytes.count) byte\(bytes.count == 1 ? "" : "s"))"
}

/// The bytes as text: valid UTF-8 with every terminal control (C0, DEL, C1, bidi: TerminalText) shown as "."; otherwise printable ASCII with "."
/// for every other byte.
public func printableText(_ bytes: [UInt8]) -> String {
    if let s = String(validating: bytes, as: UTF8.self) {
        return TerminalText.masked(s)
    }
    return String(decoding: bytes.map { (0x20..<0x7F).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
}

/// " NAME" after a handle, or "": a characteristic's label for a text line, escaped (TerminalText) since it may be
/// the peer's User Description (0x2901). JSON keeps the label exact.
func labelSuffix(_ label: String?) -> String {
    label.map { " " + TerminalText.escaped($0) } ?? ""
}

/// The characteristic properties as words (Core Spec Vol 3 Part G §3.3.1.1), in bit order.
/// The library's names (GATTCharacteristicProperties.names) in the JSON and text contract's kebab case:
/// "writeWithoutResponse" is "write-without-response".
public func propertyNames(_ properties: UInt8) -> [String] {
    GATTCharacteristicProperties(rawValue: properties).names.map { name in
        String(name.flatMap { $0.isUppercase ? ["-", Character($0.lowercased())] : [$0] })
    }
}

/// Names of well-known 16-bit UUIDs (Bluetooth Assigned Numbers): declarations, services, characteristics,
/// descriptors. `uuid` is the canonical lowercase form.
public func wellKnownName(_ uuid: String) -> String? {
    BluetoothUUID(string: uuid)?.name
}
