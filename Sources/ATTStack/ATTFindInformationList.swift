// The Format and Information Data of the Find Information Response: Core Spec 5.4 Vol 3 Part F §3.4.3.2.

/// The Information Data of a Find Information Response (Core Spec 5.4 Vol 3 Part F §3.4.3.2): handle and
/// type pairs, all 16-bit UUIDs (format 0x01, 4-byte elements) or all 128-bit (format 0x02, 18-byte
/// elements). A view over the PDU's bytes: iterating does not allocate.
public struct ATTFindInformationList: RandomAccessCollection, Sendable, Equatable, CustomStringConvertible {
    public typealias Element = (handle: UInt16, type: BluetoothUUID)
    public typealias Index = Int

    /// Format 0x01: handle + 16-bit UUID.
    public static let format16 = UInt8(0x01)
    /// Format 0x02: handle + 128-bit UUID.
    public static let format128 = UInt8(0x02)

    /// 0x01 or 0x02.
    public let format: UInt8
    /// The Information Data bytes (after the Format byte).
    public let bytes: ArraySlice<UInt8>

    /// 4 for format 0x01, 18 for 0x02.
    @inlinable public var elementLength: Int { format == Self.format16 ? 4 : 18 }

    @usableFromInline init(unchecked format: UInt8, bytes: ArraySlice<UInt8>) {
        self.format = format
        self.bytes = bytes
    }

    /// Builds a list from pairs: format 0x01 when every type has a 16-bit alias, else format 0x02 (16-bit
    /// types written as 128-bit). Throws for an empty list or a zero handle.
    public init(_ elements: [Element]) throws(ATTEncodeError) {
        guard !elements.isEmpty else {
            throw .invalidField(opcode: .findInformationResponse, field: .informationData, problem: .emptyList)
        }
        let short = elements.allSatisfy { $0.type.uuid16 != nil }
        var b = ATTListBuilder(capacity: elements.count * (short ? 4 : 18))
        for e in elements {
            guard e.handle != 0 else {
                throw .invalidField(opcode: .findInformationResponse, field: .informationData, problem: .zeroHandle)
            }
            b.le16(e.handle)
            if short, let v = e.type.uuid16 {
                b.le16(v)
            } else {
                let v = e.type.uuid128
                for i in 0..<16 { b.bytes.append(UInt8(truncatingIfNeeded: v >> (i * 8))) }
            }
        }
        self.init(unchecked: short ? Self.format16 : Self.format128, bytes: b.bytes[...])
    }

    /// Validates the Format byte and Information Data of a received PDU.
    @usableFromInline
    static func decode(format: UInt8, data: ArraySlice<UInt8>) throws(ATTDecodeError) -> Self {
        let op = ATTOpcode.findInformationResponse
        let len: Int
        switch format {
        case format16: len = 4
        case format128: len = 18
        default: throw ATTDecodeError(opcode: op, field: .format, problem: .invalidFormat(format))
        }
        try data.attValidateFixedList(opcode: op, field: .informationData, elementLength: len)
        return Self(unchecked: format, bytes: data)
    }

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { bytes.count / elementLength }

    @inlinable public subscript(position: Int) -> Element {
        precondition(position >= 0 && position < endIndex, "ATTFindInformationList index out of range")
        let len = elementLength
        let o = bytes.startIndex + position * len
        let handle = bytes.attLE16(at: o)
        let type = BluetoothUUID(littleEndian: bytes[(o + 2)..<(o + len)])!
        return (handle, type)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.format == rhs.format && lhs.bytes == rhs.bytes }

    public var description: String {
        "[" + map { "\(ATTHex.handle($0.handle)): \($0.type)" }.joined(separator: ", ") + "]"
    }
}
