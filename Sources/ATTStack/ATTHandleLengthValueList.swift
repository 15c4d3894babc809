// The Handle Length Value Tuple List of the Multiple Handle Value Notification:
// Core Spec 5.4 Vol 3 Part F §3.4.7.4.

/// The Handle Length Value Tuple List of a Multiple Handle Value Notification (Core Spec 5.4 Vol 3
/// Part F §3.4.7.4): two or more tuples of a non-zero handle, a 2-byte length and that many value bytes.
/// A view: iterating does not allocate; values are slices of the PDU.
public struct ATTHandleLengthValueList: Sequence, Sendable, Equatable, CustomStringConvertible {
    public typealias Element = (handle: UInt16, value: ArraySlice<UInt8>)

    /// The spec requires at least two tuples.
    public static let minimumCount = 2

    /// The list's bytes.
    public let bytes: ArraySlice<UInt8>

    @usableFromInline init(unchecked bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    /// Builds a list; throws for fewer than two tuples, a zero handle or a value over 65535 bytes.
    /// The same, from array values.
    public init(_ elements: [(handle: UInt16, value: [UInt8])]) throws(ATTEncodeError) {
        try self.init(elements.map { (handle: $0.handle, value: $0.value[...]) })
    }

    public init(_ elements: [(handle: UInt16, value: ArraySlice<UInt8>)]) throws(ATTEncodeError) {
        let op = ATTOpcode.multipleHandleValueNotification
        guard elements.count >= Self.minimumCount else {
            throw .invalidField(opcode: op, field: .handleLengthValueTupleList,
                                problem: .tooFewElements(count: elements.count, minimum: Self.minimumCount))
        }
        var b = ATTListBuilder(capacity: elements.reduce(0) { $0 + 4 + $1.value.count })
        for e in elements {
            guard e.handle != 0 else {
                throw .invalidField(opcode: op, field: .handleLengthValueTupleList, problem: .zeroHandle)
            }
            guard e.value.count <= 0xFFFF else {
                throw .invalidField(opcode: op, field: .handleLengthValueTupleList,
                                    problem: .tooLong(actual: e.value.count, maximum: 0xFFFF))
            }
            b.le16(e.handle)
            b.le16(UInt16(e.value.count))
            b.append(e.value)
        }
        self.init(unchecked: b.bytes[...])
    }

    @usableFromInline
    static func decode(_ data: ArraySlice<UInt8>) throws(ATTDecodeError) -> Self {
        let op = ATTOpcode.multipleHandleValueNotification
        let field = ATTPDUField.handleLengthValueTupleList
        var i = data.startIndex
        var n = 0
        while i < data.endIndex {
            let remaining = data.endIndex - i
            guard remaining >= 4 else {
                throw ATTDecodeError(opcode: op, field: field, problem: .truncated(needed: 4, actual: remaining))
            }
            guard data.attLE16(at: i) != 0 else { throw ATTDecodeError(opcode: op, field: field, problem: .zeroHandle) }
            let declared = Int(data.attLE16(at: i + 2))
            guard declared <= remaining - 4 else {
                throw ATTDecodeError(opcode: op, field: field,
                                     problem: .valueOverrun(declared: declared, available: remaining - 4))
            }
            i += 4 + declared
            n += 1
        }
        guard n >= minimumCount else {
            throw ATTDecodeError(opcode: op, field: field, problem: .tooFewElements(count: n, minimum: minimumCount))
        }
        return Self(unchecked: data)
    }

    /// Walks the tuples in order without copying (values are slices of the list's bytes).
    public struct Iterator: IteratorProtocol {
        @usableFromInline let bytes: ArraySlice<UInt8>
        @usableFromInline var i: Int

        @inlinable init(bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            self.i = bytes.startIndex
        }

        @inlinable public mutating func next() -> Element? {
            // The list was validated when it was built or decoded, so every tuple is whole.
            guard bytes.endIndex - i >= 4 else { return nil }
            let handle = bytes.attLE16(at: i)
            let start = i + 4
            let stop = Swift.min(bytes.endIndex, start + Int(bytes.attLE16(at: i + 2)))
            i = stop
            return (handle, bytes[start..<stop])
        }
    }

    @inlinable public func makeIterator() -> Iterator { Iterator(bytes: bytes) }

    /// The number of tuples.
    public var count: Int {
        var n = 0
        for _ in self { n += 1 }
        return n
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.bytes == rhs.bytes }

    public var description: String {
        "[" + map { "\(ATTHex.handle($0.handle)): \(ATTHex.bytes($0.value))" }.joined(separator: ", ") + "]"
    }
}
