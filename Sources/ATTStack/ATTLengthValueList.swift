// The Length Value Tuple List of the Read Multiple Variable Length Response:
// Core Spec 5.4 Vol 3 Part F §3.4.4.12.

/// The Length Value Tuple List of a Read Multiple Variable Length Response (Core Spec 5.4 Vol 3 Part F
/// §3.4.4.12): a 2-byte little-endian length, then that many value bytes, per tuple. The server cuts the
/// list at ATT_MTU-1 bytes, so the last tuple may be truncated (`isTruncated`; its value is what arrived,
/// and a lone length byte gives an empty value). A view: iterating does not allocate.
public struct ATTLengthValueList: Sequence, Sendable, Equatable, CustomStringConvertible {
    public typealias Element = ArraySlice<UInt8>

    /// The list's bytes.
    public let bytes: ArraySlice<UInt8>

    @usableFromInline init(unchecked bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    /// Builds a list from values, cut to `limit` bytes when given (a server passes ATT_MTU-1).
    /// Throws for an empty list, a value over 65535 bytes, or a limit below 2.
    /// The same, from array values.
    public init(_ values: [[UInt8]], limit: Int? = nil) throws(ATTEncodeError) {
        try self.init(values.map { $0[...] }, limit: limit)
    }

    public init(_ values: [ArraySlice<UInt8>], limit: Int? = nil) throws(ATTEncodeError) {
        let op = ATTOpcode.readMultipleVariableResponse
        guard !values.isEmpty else { throw .invalidField(opcode: op, field: .lengthValueTupleList, problem: .emptyList) }
        var b = ATTListBuilder(capacity: values.reduce(0) { $0 + 2 + $1.count })
        for v in values {
            guard v.count <= 0xFFFF else {
                throw .invalidField(opcode: op, field: .lengthValueTupleList, problem: .tooLong(actual: v.count, maximum: 0xFFFF))
            }
            b.le16(UInt16(v.count))
            b.append(v)
        }
        if let limit {
            guard limit >= 2 else {
                throw .invalidField(opcode: op, field: .lengthValueTupleList, problem: .truncated(needed: 2, actual: limit))
            }
            if b.bytes.count > limit { b.bytes.removeLast(b.bytes.count - limit) }
        }
        self.init(unchecked: b.bytes[...])
    }

    @usableFromInline
    static func decode(_ data: ArraySlice<UInt8>) throws(ATTDecodeError) -> Self {
        guard data.count >= 2 else {
            throw ATTDecodeError(opcode: .readMultipleVariableResponse, field: .lengthValueTupleList,
                                 problem: data.isEmpty ? .emptyList : .truncated(needed: 2, actual: data.count))
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

        @inlinable public mutating func next() -> ArraySlice<UInt8>? {
            let end = bytes.endIndex
            guard i < end else { return nil }
            if end - i < 2 {
                i = end
                return bytes[end..<end]
            }
            let declared = Int(bytes.attLE16(at: i))
            let start = i + 2
            let stop = Swift.min(end, start + declared)
            i = stop
            return bytes[start..<stop]
        }
    }

    @inlinable public func makeIterator() -> Iterator { Iterator(bytes: bytes) }

    /// The number of tuples, counting a truncated last one.
    public var count: Int {
        var n = 0
        for _ in self { n += 1 }
        return n
    }

    /// Whether the last tuple was cut short (its declared length exceeds the bytes that arrived).
    public var isTruncated: Bool {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes.endIndex - i < 2 { return true }
            let next = i + 2 + Int(bytes.attLE16(at: i))
            if next > bytes.endIndex { return true }
            i = next
        }
        return false
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.bytes == rhs.bytes }

    public var description: String {
        "[" + map { ATTHex.bytes($0) }.joined(separator: ", ") + "]" + (isTruncated ? " (truncated)" : "")
    }
}
