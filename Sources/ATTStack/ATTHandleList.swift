// The Set Of Handles of the Read Multiple and Read Multiple Variable Length Requests:
// Core Spec 5.4 Vol 3 Part F §3.4.4.7 and §3.4.4.11.

/// The Set Of Handles of a Read Multiple (Variable Length) Request (Core Spec 5.4 Vol 3 Part F §3.4.4.7,
/// §3.4.4.11): two or more non-zero handles, 2 bytes each. A view: iterating does not allocate.
public struct ATTHandleList: RandomAccessCollection, Sendable, Equatable, CustomStringConvertible {
    public typealias Element = UInt16
    public typealias Index = Int

    /// The spec requires at least two handles.
    public static let minimumCount = 2

    /// The list's bytes.
    public let bytes: ArraySlice<UInt8>

    @usableFromInline init(unchecked bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    /// Builds a list; throws for fewer than two handles or a zero handle.
    public init(_ handles: [UInt16]) throws(ATTEncodeError) {
        guard handles.count >= Self.minimumCount else {
            throw .invalidField(opcode: nil, field: .setOfHandles,
                                problem: .tooFewElements(count: handles.count, minimum: Self.minimumCount))
        }
        var b = ATTListBuilder(capacity: handles.count * 2)
        for h in handles {
            guard h != 0 else { throw .invalidField(opcode: nil, field: .setOfHandles, problem: .zeroHandle) }
            b.le16(h)
        }
        self.init(unchecked: b.bytes[...])
    }

    @usableFromInline
    static func decode(_ data: ArraySlice<UInt8>, opcode op: ATTOpcode) throws(ATTDecodeError) -> Self {
        guard data.count % 2 == 0 else {
            throw ATTDecodeError(opcode: op, field: .setOfHandles,
                                 problem: .oddListLength(listLength: data.count, elementLength: 2))
        }
        guard data.count >= 2 * minimumCount else {
            throw ATTDecodeError(opcode: op, field: .setOfHandles,
                                 problem: .tooFewElements(count: data.count / 2, minimum: minimumCount))
        }
        var i = data.startIndex
        while i < data.endIndex {
            guard data.attLE16(at: i) != 0 else {
                throw ATTDecodeError(opcode: op, field: .setOfHandles, problem: .zeroHandle)
            }
            i += 2
        }
        return Self(unchecked: data)
    }

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { bytes.count / 2 }

    @inlinable public subscript(position: Int) -> UInt16 {
        precondition(position >= 0 && position < endIndex, "ATTHandleList index out of range")
        return bytes.attLE16(at: bytes.startIndex + position * 2)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.bytes == rhs.bytes }

    public var description: String { "[" + map { ATTHex.handle($0) }.joined(separator: ", ") + "]" }
}
