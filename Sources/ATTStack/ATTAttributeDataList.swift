// The Length and Attribute Data List of the Read By Type Response: Core Spec 5.4 Vol 3 Part F §3.4.4.2.

/// The Attribute Data List of a Read By Type Response (Core Spec 5.4 Vol 3 Part F §3.4.4.2): handle and
/// value pairs, every element `elementLength` bytes (the PDU's Length byte, 2-255: a 2-byte handle and a
/// value of the same length for all). A view: iterating does not allocate; values are slices of the PDU.
public struct ATTAttributeDataList: RandomAccessCollection, Sendable, Equatable, CustomStringConvertible {
    public typealias Element = (handle: UInt16, value: ArraySlice<UInt8>)
    public typealias Index = Int

    /// The Length field: bytes per element (handle + value).
    public let elementLength: Int
    /// The Attribute Data List bytes (after the Length byte).
    public let bytes: ArraySlice<UInt8>

    /// The value length of every element.
    @inlinable public var valueLength: Int { elementLength - 2 }

    @usableFromInline init(unchecked elementLength: Int, bytes: ArraySlice<UInt8>) {
        self.elementLength = elementLength
        self.bytes = bytes
    }

    /// Builds a list; throws for an empty list, a zero handle, values of different lengths, or a value
    /// longer than 253 bytes (the Length byte covers handle + value).
    /// The same, from array values.
    public init(_ elements: [(handle: UInt16, value: [UInt8])]) throws(ATTEncodeError) {
        try self.init(elements.map { (handle: $0.handle, value: $0.value[...]) })
    }

    public init(_ elements: [(handle: UInt16, value: ArraySlice<UInt8>)]) throws(ATTEncodeError) {
        let op = ATTOpcode.readByTypeResponse
        guard let first = elements.first else {
            throw .invalidField(opcode: op, field: .attributeDataList, problem: .emptyList)
        }
        let valueLength = first.value.count
        guard valueLength <= 253 else {
            throw .invalidField(opcode: op, field: .attributeDataList, problem: .tooLong(actual: valueLength, maximum: 253))
        }
        var b = ATTListBuilder(capacity: elements.count * (valueLength + 2))
        for e in elements {
            guard e.handle != 0 else { throw .invalidField(opcode: op, field: .attributeDataList, problem: .zeroHandle) }
            guard e.value.count == valueLength else {
                throw .invalidField(opcode: op, field: .attributeDataList,
                                    problem: .mixedValueLengths(first: valueLength, other: e.value.count))
            }
            b.le16(e.handle)
            b.append(e.value)
        }
        self.init(unchecked: valueLength + 2, bytes: b.bytes[...])
    }

    @usableFromInline
    static func decode(length: UInt8, data: ArraySlice<UInt8>) throws(ATTDecodeError) -> Self {
        let op = ATTOpcode.readByTypeResponse
        let len = Int(length)
        guard len >= 2 else {
            throw ATTDecodeError(opcode: op, field: .length, problem: .invalidLengthField(value: len, minimum: 2))
        }
        try data.attValidateFixedList(opcode: op, field: .attributeDataList, elementLength: len)
        return Self(unchecked: len, bytes: data)
    }

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { bytes.count / elementLength }

    @inlinable public subscript(position: Int) -> Element {
        precondition(position >= 0 && position < endIndex, "ATTAttributeDataList index out of range")
        let o = bytes.startIndex + position * elementLength
        return (bytes.attLE16(at: o), bytes[(o + 2)..<(o + elementLength)])
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.elementLength == rhs.elementLength && lhs.bytes == rhs.bytes
    }

    public var description: String {
        "[" + map { "\(ATTHex.handle($0.handle)): \(ATTHex.bytes($0.value))" }.joined(separator: ", ") + "]"
    }
}
