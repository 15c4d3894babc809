// The Length and Attribute Data List of the Read By Group Type Response: Core Spec 5.4 Vol 3 Part F §3.4.4.10.

/// The Attribute Data List of a Read By Group Type Response (Core Spec 5.4 Vol 3 Part F §3.4.4.10):
/// Attribute Handle, End Group Handle and value, every element `elementLength` bytes (the Length byte,
/// 4-255). A view: iterating does not allocate; values are slices of the PDU.
public struct ATTGroupAttributeDataList: RandomAccessCollection, Sendable, Equatable, CustomStringConvertible {
    public typealias Element = (handle: UInt16, endGroup: UInt16, value: ArraySlice<UInt8>)
    public typealias Index = Int

    /// The Length field: bytes per element (two handles + value).
    public let elementLength: Int
    /// The Attribute Data List bytes (after the Length byte).
    public let bytes: ArraySlice<UInt8>

    /// The value length of every element.
    @inlinable public var valueLength: Int { elementLength - 4 }

    @usableFromInline init(unchecked elementLength: Int, bytes: ArraySlice<UInt8>) {
        self.elementLength = elementLength
        self.bytes = bytes
    }

    /// Builds a list; throws for an empty list, a zero handle, values of different lengths, or a value
    /// longer than 251 bytes (the Length byte covers both handles and the value).
    /// The same, from array values.
    public init(_ elements: [(handle: UInt16, endGroup: UInt16, value: [UInt8])]) throws(ATTEncodeError) {
        try self.init(elements.map { (handle: $0.handle, endGroup: $0.endGroup, value: $0.value[...]) })
    }

    public init(_ elements: [(handle: UInt16, endGroup: UInt16, value: ArraySlice<UInt8>)]) throws(ATTEncodeError) {
        let op = ATTOpcode.readByGroupTypeResponse
        guard let first = elements.first else {
            throw .invalidField(opcode: op, field: .attributeDataList, problem: .emptyList)
        }
        let valueLength = first.value.count
        guard valueLength <= 251 else {
            throw .invalidField(opcode: op, field: .attributeDataList, problem: .tooLong(actual: valueLength, maximum: 251))
        }
        var b = ATTListBuilder(capacity: elements.count * (valueLength + 4))
        for e in elements {
            guard e.handle != 0, e.endGroup != 0 else {
                throw .invalidField(opcode: op, field: .attributeDataList, problem: .zeroHandle)
            }
            guard e.value.count == valueLength else {
                throw .invalidField(opcode: op, field: .attributeDataList,
                                    problem: .mixedValueLengths(first: valueLength, other: e.value.count))
            }
            b.le16(e.handle)
            b.le16(e.endGroup)
            b.append(e.value)
        }
        self.init(unchecked: valueLength + 4, bytes: b.bytes[...])
    }

    @usableFromInline
    static func decode(length: UInt8, data: ArraySlice<UInt8>) throws(ATTDecodeError) -> Self {
        let op = ATTOpcode.readByGroupTypeResponse
        let len = Int(length)
        guard len >= 4 else {
            throw ATTDecodeError(opcode: op, field: .length, problem: .invalidLengthField(value: len, minimum: 4))
        }
        try data.attValidateFixedList(opcode: op, field: .attributeDataList, elementLength: len, secondHandleOffset: 2)
        return Self(unchecked: len, bytes: data)
    }

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { bytes.count / elementLength }

    @inlinable public subscript(position: Int) -> Element {
        precondition(position >= 0 && position < endIndex, "ATTGroupAttributeDataList index out of range")
        let o = bytes.startIndex + position * elementLength
        return (bytes.attLE16(at: o), bytes.attLE16(at: o + 2), bytes[(o + 4)..<(o + elementLength)])
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.elementLength == rhs.elementLength && lhs.bytes == rhs.bytes
    }

    public var description: String {
        "[" + map { "\(ATTHex.handle($0.handle))-\(ATTHex.handle($0.endGroup)): \(ATTHex.bytes($0.value))" }
            .joined(separator: ", ") + "]"
    }
}
