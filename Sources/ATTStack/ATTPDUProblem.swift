// What can be wrong with an ATT PDU's bytes or fields: Core Spec 5.4 Vol 3 Part F §3.4 (PDU formats).

/// What was wrong with a field of an ATT PDU (Core Spec 5.4 Vol 3 Part F §3.4). Every case is a plain
/// value (no strings, no allocation), so a typed throw of an error holding one does not allocate.
public enum ATTPDUProblem: Sendable, Hashable, CustomStringConvertible {
    /// No bytes at all: an ATT PDU has at least its opcode.
    case empty
    /// The opcode is not one the Core Spec 5.4 defines.
    case unknownOpcode
    /// Fewer bytes than the format needs.
    case truncated(needed: Int, actual: Int)
    /// A fixed-size PDU or field of the wrong size.
    case wrongLength(expected: Int, actual: Int)
    /// A UUID field that is neither 2 nor 16 bytes long.
    case wrongUUIDLength(actual: Int)
    /// A list whose byte count is not a multiple of its element size.
    case oddListLength(listLength: Int, elementLength: Int)
    /// A list with no element where the spec requires at least one.
    case emptyList
    /// A list with fewer elements than the spec requires.
    case tooFewElements(count: Int, minimum: Int)
    /// A Format byte that is neither 0x01 nor 0x02.
    case invalidFormat(UInt8)
    /// Execute Write flags other than 0x00 and 0x01.
    case invalidFlags(UInt8)
    /// A Length field below what one element needs.
    case invalidLengthField(value: Int, minimum: Int)
    /// A handle of 0x0000 where the spec forbids it.
    case zeroHandle
    /// A length prefix that declares more bytes than remain.
    case valueOverrun(declared: Int, available: Int)
    /// List elements whose values differ in length where one Length field covers them all.
    case mixedValueLengths(first: Int, other: Int)
    /// A value longer than its length field (or the list's Length byte) can express.
    case tooLong(actual: Int, maximum: Int)

    public var description: String {
        switch self {
        case .empty: return "empty (an ATT PDU has at least a 1-byte opcode)"
        case .unknownOpcode: return "unknown opcode (not defined by Core Spec 5.4 Vol 3 Part F §3.4)"
        case .truncated(let needed, let actual): return "truncated: \(actual) bytes, needs at least \(needed)"
        case .wrongLength(let expected, let actual): return "wrong length: \(actual) bytes, expected \(expected)"
        case .wrongUUIDLength(let actual): return "wrong length: \(actual) bytes, expected a 2- or 16-byte UUID"
        case .oddListLength(let listLength, let elementLength):
            return "odd list length: \(listLength) bytes is not a multiple of the \(elementLength)-byte element"
        case .emptyList: return "empty list (at least one element is required)"
        case .tooFewElements(let count, let minimum):
            return "too few elements: \(count), the spec requires at least \(minimum)"
        case .invalidFormat(let f): return "invalid format \(ATTHex.byte(f)) (expected 0x01 or 0x02)"
        case .invalidFlags(let f): return "invalid flags \(ATTHex.byte(f)) (expected 0x00 or 0x01)"
        case .invalidLengthField(let value, let minimum):
            return "invalid length field \(value) (an element needs at least \(minimum) bytes)"
        case .zeroHandle: return "zero handle (the spec forbids handle 0x0000)"
        case .valueOverrun(let declared, let available):
            return "length \(declared) overruns the PDU: only \(available) bytes remain"
        case .mixedValueLengths(let first, let other):
            return "values of different lengths (\(first) and \(other)) under one length field"
        case .tooLong(let actual, let maximum): return "too long: \(actual) bytes, at most \(maximum)"
        }
    }
}
