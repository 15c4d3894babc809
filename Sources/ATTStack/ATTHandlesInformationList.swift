// The Handles Information List of the Find By Type Value Response: Core Spec 5.4 Vol 3 Part F §3.4.3.4.

/// The Handles Information List of a Find By Type Value Response (Core Spec 5.4 Vol 3 Part F §3.4.3.4):
/// Found Attribute Handle and Group End Handle pairs, 4 bytes each. A view: iterating does not allocate.
public struct ATTHandlesInformationList: RandomAccessCollection, Sendable, Equatable, CustomStringConvertible {
    public typealias Element = (found: UInt16, groupEnd: UInt16)
    public typealias Index = Int

    /// The list's bytes.
    public let bytes: ArraySlice<UInt8>

    @usableFromInline init(unchecked bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    /// Builds a list; throws for an empty list or a zero handle.
    public init(_ elements: [Element]) throws(ATTEncodeError) {
        guard !elements.isEmpty else {
            throw .invalidField(opcode: .findByTypeValueResponse, field: .handlesInformationList, problem: .emptyList)
        }
        var b = ATTListBuilder(capacity: elements.count * 4)
        for e in elements {
            guard e.found != 0, e.groupEnd != 0 else {
                throw .invalidField(opcode: .findByTypeValueResponse, field: .handlesInformationList, problem: .zeroHandle)
            }
            b.le16(e.found)
            b.le16(e.groupEnd)
        }
        self.init(unchecked: b.bytes[...])
    }

    @usableFromInline
    static func decode(_ data: ArraySlice<UInt8>) throws(ATTDecodeError) -> Self {
        let op = ATTOpcode.findByTypeValueResponse
        guard !data.isEmpty else { throw ATTDecodeError(opcode: op, field: .handlesInformationList, problem: .emptyList) }
        guard data.count % 4 == 0 else {
            throw ATTDecodeError(opcode: op, field: .handlesInformationList,
                                 problem: .oddListLength(listLength: data.count, elementLength: 4))
        }
        var i = data.startIndex
        while i < data.endIndex {
            guard data.attLE16(at: i) != 0, data.attLE16(at: i + 2) != 0 else {
                throw ATTDecodeError(opcode: op, field: .handlesInformationList, problem: .zeroHandle)
            }
            i += 4
        }
        return Self(unchecked: data)
    }

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { bytes.count / 4 }

    @inlinable public subscript(position: Int) -> Element {
        precondition(position >= 0 && position < endIndex, "ATTHandlesInformationList index out of range")
        let o = bytes.startIndex + position * 4
        return (bytes.attLE16(at: o), bytes.attLE16(at: o + 2))
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.bytes == rhs.bytes }

    public var description: String {
        "[" + map { "\(ATTHex.handle($0.found))-\(ATTHex.handle($0.groupEnd))" }.joined(separator: ", ") + "]"
    }
}
