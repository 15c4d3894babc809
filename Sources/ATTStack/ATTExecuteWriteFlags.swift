// The Flags parameter of the Execute Write Request: Core Spec 5.4 Vol 3 Part F §3.4.6.3.

/// The Flags of an Execute Write Request (Core Spec 5.4 Vol 3 Part F §3.4.6.3): 0x00 cancels every
/// prepared write, 0x01 writes them all. Other values are reserved; the decoder rejects them.
public struct ATTExecuteWriteFlags: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    @inlinable public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// 0x00: cancel all prepared writes.
    public static let cancelAll = ATTExecuteWriteFlags(rawValue: 0x00)
    /// 0x01: immediately write all pending prepared values.
    public static let writeAll = ATTExecuteWriteFlags(rawValue: 0x01)

    /// Whether the value is one the spec defines.
    @inlinable public var isDefined: Bool { rawValue <= 0x01 }

    public var description: String {
        switch rawValue {
        case 0x00: return "0x00 Cancel All"
        case 0x01: return "0x01 Write All"
        default: return "\(ATTHex.byte(rawValue)) Reserved"
        }
    }
}
