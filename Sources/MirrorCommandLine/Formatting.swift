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
/// characteristic declarations and descriptors): the GATT client's services, and what `--read` read (GATTPeer's
/// `readEveryValueByHandle(of:decode:)`; a handle absent was not read).
public struct DatabaseListing: Sendable, Equatable {
    public var mtu: Int
    public var services: [GATTService]
    public var readings: [UInt16: Result<[UInt8], GATTAttributeError>]
    /// Names for UUIDs that are not well known (the mirror profile's), by canonical UUID; text output only.
    public var names: [String: String]
    /// What each value read means (ValueFormatter), by its handle; `--read` fills it.
    public var decoded: [UInt16: String] = [:]

    public init(mtu: Int, services: [GATTService], readings: [UInt16: Result<[UInt8], GATTAttributeError>] = [:],
                names: [String: String] = [:]) {
        self.mtu = mtu
        self.services = services
        self.readings = readings
        self.names = names
    }

    /// The `--json` shape: {"mtu", "services": [{"uuid", "start", "end", "primary", "characteristics":
    /// [{"uuid", "handle", "valueHandle", "properties", "descriptors": [{"uuid", "handle"}]}]}]}.
    /// "includes" appears on a service only when it has include declarations; "value"/"text" (or
    /// "readError") only after `--read`, with "decoded" when the value means something; "name" last on each
    /// service, include, characteristic and descriptor the text names.
    public var json: JSONValue {
        // "name" last, where the text shows one (the profile's name, else the well-known one).
        func named(_ uuid: BluetoothUUID) -> [(String, JSONValue)] {
            (names[uuid.description] ?? uuid.name).map { [("name", JSONValue.string($0))] } ?? []
        }
        func read(_ handle: UInt16) -> [(String, JSONValue)] {
            readings[handle].map { readOutcomeJSON($0, decoded: decoded[handle]) } ?? []
        }
        return .object([
            ("mtu", .int(mtu)),
            ("services", .array(services.map { service in
                var fields: [(String, JSONValue)] = [
                    ("uuid", .string(service.uuid.description)), ("start", .int(Int(service.startHandle))),
                    ("end", .int(Int(service.endHandle))), ("primary", .bool(service.isPrimary)),
                ]
                if !service.includedServices.isEmpty {
                    fields.append(("includes", .array(service.includedServices.map { inc in
                        .object([("handle", .int(Int(inc.declarationHandle))), ("start", .int(Int(inc.startHandle))),
                                 ("end", .int(Int(inc.endHandle))), ("uuid", .string(inc.uuid.description))] + named(inc.uuid))
                    })))
                }
                fields.append(("characteristics", .array(service.characteristics.map { c in
                    .object([
                        ("uuid", .string(c.uuid.description)), ("handle", .int(Int(c.declarationHandle))),
                        ("valueHandle", .int(Int(c.valueHandle))),
                        ("properties", .array(propertyNames(c.properties.rawValue).map { .string($0) })),
                        ("descriptors", .array(c.descriptors.map { d in
                            .object([("uuid", .string(d.uuid.description)), ("handle", .int(Int(d.handle)))] + read(d.handle) + named(d.uuid))
                        })),
                    ] + read(c.valueHandle) + named(c.uuid))
                })))
                return .object(fields + named(service.uuid))
            })),
        ])
    }

    /// The text form, one line per attribute, indented by level.
    public var text: [String] {
        func nameSuffix(_ uuid: BluetoothUUID) -> String {
            (names[uuid.description] ?? uuid.name).map { " \($0)" } ?? ""
        }
        var lines = ["MTU \(mtu)"]
        for s in services {
            lines.append("\(s.isPrimary ? "Primary" : "Secondary") service \(s.uuid)\(nameSuffix(s.uuid))  handles \(ATTHex.handle(s.startHandle))-\(ATTHex.handle(s.endHandle))")
            for inc in s.includedServices {
                lines.append("  Include \(ATTHex.handle(inc.declarationHandle)): service \(inc.uuid)\(nameSuffix(inc.uuid))  handles \(ATTHex.handle(inc.startHandle))-\(ATTHex.handle(inc.endHandle))")
            }
            for c in s.characteristics {
                lines.append("  Characteristic \(c.uuid)\(nameSuffix(c.uuid))  handle \(ATTHex.handle(c.declarationHandle))  value handle \(ATTHex.handle(c.valueHandle))  [\(propertyNames(c.properties.rawValue).joined(separator: ", "))]")
                if let v = readings[c.valueHandle] { lines.append("    value: " + readOutcomeText(v, decoded: decoded[c.valueHandle])) }
                for d in c.descriptors {
                    lines.append("    Descriptor \(d.uuid)\(nameSuffix(d.uuid))  handle \(ATTHex.handle(d.handle))")
                    if let v = readings[d.handle] { lines.append("      value: " + readOutcomeText(v, decoded: decoded[d.handle])) }
                }
            }
        }
        return lines
    }
}

func readOutcomeJSON(_ outcome: Result<[UInt8], GATTAttributeError>, decoded: String? = nil) -> [(String, JSONValue)] {
    switch outcome {
    case .success(let bytes):
        return [("value", .string(ATTHex.string(bytes))), ("text", .string(printableText(bytes)))] + (decoded.map { [("decoded", .string($0))] } ?? [])
    case .failure(let e): return [("readError", .object(ATTErrorFacts(e).jsonFields))]
    }
}

func readOutcomeText(_ outcome: Result<[UInt8], GATTAttributeError>, decoded: String? = nil) -> String {
    switch outcome {
    case .success(let bytes): return valueText(bytes, decoded: decoded)
    case .failure(let e): return "(not read: " + TerminalText.escaped(ATTErrorFacts(e).message) + ")"
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
