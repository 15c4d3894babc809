// Why an ATT PDU cannot be encoded: Core Spec 5.4 Vol 3 Part F §3.4 (PDU formats).

/// Why a PDU or a PDU list cannot be encoded (Core Spec 5.4 Vol 3 Part F §3.4): the buffer is too small,
/// or a field holds something the PDU format cannot carry.
public enum ATTEncodeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The caller's buffer is shorter than the encoded PDU.
    case bufferTooSmall(opcode: ATTOpcode, needed: Int, available: Int)
    /// A field the format cannot carry. `opcode` is nil when a list was built on its own.
    case invalidField(opcode: ATTOpcode?, field: ATTPDUField, problem: ATTPDUProblem)

    public var description: String {
        switch self {
        case .bufferTooSmall(let opcode, let needed, let available):
            return "\(opcode.name): buffer too small: needs \(needed) bytes, has \(available)"
        case .invalidField(let opcode, let field, let problem):
            return "\(opcode?.name ?? "ATT list"): \(field): \(problem)"
        }
    }
}
