// Why a byte buffer is not a well-formed ATT PDU: Core Spec 5.4 Vol 3 Part F §3.4 (PDU formats) and
// §3.4.1.1 (a server answers a malformed request with Invalid PDU).

/// A malformed ATT PDU (Core Spec 5.4 Vol 3 Part F §3.4): which PDU, which field, what was wrong.
/// A plain value, so `throws(ATTDecodeError)` does not allocate.
/// `description`: `Write Request: handle: zero handle (the spec forbids handle 0x0000)`.
public struct ATTDecodeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The opcode byte, or nil when the input was empty.
    public var opcode: ATTOpcode?
    /// The field that was wrong.
    public var field: ATTPDUField
    /// What was wrong with it.
    public var problem: ATTPDUProblem

    @inlinable
    public init(opcode: ATTOpcode?, field: ATTPDUField, problem: ATTPDUProblem) {
        self.opcode = opcode
        self.field = field
        self.problem = problem
    }

    /// The opcode byte as received, or nil for an empty input.
    public var opcodeByte: UInt8? { opcode?.rawValue }

    /// The spec's name of the PDU: "Write Request", "Unknown Opcode 0x3F", or "empty input".
    public var pduName: String {
        guard let opcode else { return "empty input" }
        return opcode.isDefined ? opcode.name : "Unknown Opcode \(ATTHex.byte(opcode.rawValue))"
    }

    /// `Write Request: handle: zero handle (the spec forbids handle 0x0000)`.
    public var description: String { "\(pduName): \(field): \(problem)" }

    /// The error code a server answers this malformed request with (Core Spec 5.4 Vol 3 Part F §3.4.1.1,
    /// §3.3.2): Request Not Supported for an unknown request opcode, Invalid Handle for a zero handle,
    /// Invalid PDU otherwise; nil when the PDU is not a request (commands and unknown commands are
    /// dropped, and a client never answers a malformed response).
    public var serverErrorCode: ATTErrorCode? {
        guard let opcode, !opcode.isCommand else { return nil }
        if !opcode.isDefined { return .requestNotSupported }
        guard opcode.kind == .request else { return nil }
        if problem == .zeroHandle { return .invalidHandle }
        return .invalidPDU
    }

    /// The Error Response a server sends for this malformed request (§3.4.1.1): the request's opcode,
    /// handle 0x0000 (no valid handle was received) and `serverErrorCode`; nil when nothing is sent.
    public var serverErrorResponse: ATTPDU? {
        guard let opcode, let code = serverErrorCode else { return nil }
        return .errorResponse(requestOpcode: opcode, handle: 0x0000, error: code)
    }
}
