// The errors of the GATT client: each carries what a user needs to act (Core Spec 5.4 Vol 3 Part F §3.4.1.1
// for ATT error codes, §3.3.3 for the transaction timeout, Part G §4 for the procedures that fail).
import ATTStack
import LinkCore

/// Every way a GATT client operation fails. The CLI maps each case to a message, a JSON object and an exit status.
public enum GATTError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The peer answered with an ATT Error Response, or the value was refused locally before sending.
    case attribute(GATTAttributeError)
    /// A named wait ran past its limit (the ATT transaction timeout, a permit wait, a caller's deadline).
    case timeout(GATTTimeoutError)
    /// The bearer closed (or the client closed it) while the operation waited.
    case disconnected(GATTDisconnectedError)
    /// The peer broke the protocol: a mismatched, malformed or unsolicited PDU.
    case protocolViolation(GATTProtocolViolation)
    /// The caller's task was cancelled while the operation waited.
    case cancelled(operation: String)
    /// Sending a PDU failed in the transport (a syscall error).
    case transport(TransportError, operation: String)
    /// The procedure cannot run on what the server has (e.g. no CCCD to subscribe with); says what is missing.
    case unsupported(String)

    public var description: String {
        switch self {
        case .attribute(let e): return e.description
        case .timeout(let e): return e.description
        case .disconnected(let e): return e.description
        case .protocolViolation(let e): return e.description
        case .cancelled(let op): return "cancelled: \(op)"
        case .transport(let e, let op): return "\(op): \(e.description)"
        case .unsupported(let s): return s
        }
    }

    /// A send the transport refused with ENOTCONN (on an LE link: pairing still runs after a BT_SECURITY raise).
    var isNotConnectedSend: Bool {
        guard case .transport(.socket(let e), _) = self else { return false }
        return e.syscall == "send" && e.errno == .notConnected
    }

    /// The ATT error, when this is one.
    public var attributeError: GATTAttributeError? {
        if case .attribute(let e) = self { return e }
        return nil
    }

    /// A send that failed in the transport: a closed transport is a disconnect, and so is a send that raced the
    /// peer's close (EPIPE, ECONNRESET: the reader has not seen the end of file yet) or the kernel's end of the link on
    /// an Authentication Failure (EACCES: `SocketError.isAuthenticationFailure`); anything else a transport error.
    static func sendFailure(_ e: TransportError, operation: String) -> GATTError {
        switch e {
        case .closedByPeer, .closedLocally:
            return .disconnected(GATTDisconnectedError(reason: e.description, during: operation))
        case .socket(let s) where (s.syscall == "send" && (s.errno == .brokenPipe || s.errno == .connectionReset)) || s.isAuthenticationFailure:
            return .disconnected(GATTDisconnectedError(reason: e.description, during: operation))
        default:
            return .transport(e, operation: operation)
        }
    }

    /// Maps whatever a continuation threw to a `GATTError` (a `CancellationError` becomes `.cancelled`).
    static func from(_ error: any Error, operation: @autoclosure () -> String) -> GATTError {
        if let e = error as? GATTError { return e }
        if error is CancellationError { return .cancelled(operation: operation()) }
        if let e = error as? TransportError { return .transport(e, operation: operation()) }
        return .unsupported("\(operation()): \(error)")
    }
}

/// Who refused an attribute operation: the peer (an ATT Error Response) or this host before sending.
public enum GATTRejectedBy: String, Sendable, Equatable {
    case peer
    case local
}

/// An ATT error on an attribute operation (Core Spec 5.4 Vol 3 Part F §3.4.1.1): the code with its name, the
/// request it answered, the handle, who refused it, and for writes the value's length against the MTU's budget.
public struct GATTAttributeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The ATT error code (for a local refusal, the code the peer would have sent: 0x0D for a length).
    public var code: ATTErrorCode
    /// The request the error answers.
    public var requestOpcode: ATTOpcode
    /// The handle the Error Response names (or the handle written, for a local refusal).
    public var handle: UInt16
    /// The handle's name when known ("cloudToken").
    public var handleName: String?
    /// Who refused.
    public var rejectedBy: GATTRejectedBy
    /// The length of the value written, when the operation carried one.
    public var valueLength: Int?
    /// The value budget the MTU allows for this request (MTU-3 for a Write Request or Command, 512 for a long write).
    public var budget: Int?
    /// The ATT_MTU in effect.
    public var mtu: Int

    public init(code: ATTErrorCode, requestOpcode: ATTOpcode, handle: UInt16, handleName: String? = nil,
                rejectedBy: GATTRejectedBy, valueLength: Int? = nil, budget: Int? = nil, mtu: Int) {
        self.code = code
        self.requestOpcode = requestOpcode
        self.handle = handle
        self.handleName = handleName
        self.rejectedBy = rejectedBy
        self.valueLength = valueLength
        self.budget = budget
        self.mtu = mtu
    }

    /// The code's name in the spec's words ("Invalid Attribute Value Length").
    public var name: String { code.name }

    /// "to handle 0x0012 (cloudToken)" for writes, "of handle 0x0021" otherwise.
    var handleText: String {
        let h = handleName.map { "handle \(ATTHex.handle(handle)) (\($0))" } ?? "handle \(ATTHex.handle(handle))"
        return "\(requestOpcode.preposition) \(h)"
    }

    /// The peer's words:
    /// `ATT error 0x0D Invalid Attribute Value Length from the peer, on Write Request to handle 0x0012 (cloudToken):
    /// 41-byte value, within the 244-byte budget of MTU 247, so the peripheral rejected it at the application layer`;
    /// a local refusal: `not sent: 600-byte value exceeds the 244-byte budget of MTU 247 (local limit)`.
    public var description: String {
        switch rejectedBy {
        case .local:
            let len = valueLength ?? 0
            let b = budget ?? 0
            return "not sent: \(len)-byte value exceeds the \(b)-byte budget of MTU \(mtu) (local limit), "
                + "\(requestOpcode.name) \(handleText)"
        case .peer:
            var s = "ATT error \(ATTHex.byte(code.rawValue)) \(code.name) from the peer, on \(requestOpcode.name) \(handleText)"
            if let valueLength, let budget {
                if code == .invalidAttributeValueLength && valueLength <= budget {
                    s += ": \(valueLength)-byte value, within the \(budget)-byte budget of MTU \(mtu), "
                        + "so the peripheral rejected it at the application layer"
                } else {
                    s += ": \(valueLength)-byte value, \(budget)-byte budget of MTU \(mtu)"
                }
            }
            return s
        }
    }
}

/// The bearer closed while an operation waited: which operation, and why the bearer closed.
public struct GATTDisconnectedError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Why the bearer closed ("the peer closed the connection", "ATT timeout: no Write Response on handle 0x0012").
    public var reason: String
    /// What was waiting: "Write Request to handle 0x0012 (cloudToken)", "notifications of handle 0x0021".
    public var during: String

    public init(reason: String, during: String) {
        self.reason = reason
        self.during = during
    }

    public var description: String { "disconnected during \(during): \(reason)" }
}

/// A PDU from the peer that breaks ATT (Core Spec 5.4 Vol 3 Part F §3.3, §3.4): the bytes received, what was
/// expected instead, and the operation it failed (if any).
public struct GATTProtocolViolation: Error, Sendable, Equatable, CustomStringConvertible {
    /// The PDU as received.
    public var received: [UInt8]
    /// What the client expected: "Write Response (0x13) or Error Response for Write Request".
    public var expected: String
    /// What is wrong with it.
    public var problem: String

    public init(received: [UInt8], expected: String, problem: String) {
        self.received = received
        self.expected = expected
        self.problem = problem
    }

    public var description: String {
        "protocol violation by the peer: \(problem); received [\(ATTHex.string(received, separator: " ", uppercase: true))], expected \(expected)"
    }
}

extension ATTOpcode {
    /// "to" for the PDUs that write a handle, "of" for the others: "Write Request to handle", "Read Request of handle".
    var preposition: String {
        switch self {
        case .writeRequest, .writeCommand, .signedWriteCommand, .prepareWriteRequest: return "to"
        default: return "of"
        }
    }
}

/// A run of writes to one handle (`GATTClient.write(handle:contentsOf:)`, `writeWithoutResponse(handle:contentsOf:)`)
/// that stopped at its first error: how many of the values went through before it, and the error as a single write
/// would have thrown it. The values after the failed one were not sent.
public struct GATTWritesError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Write Requests (Part G §4.9.3) or Write Commands (§4.9.1).
    public enum Mode: String, Sendable, Equatable {
        case request = "Write Request"
        case command = "Write Command"
    }
    /// The error of the value at index `completed`.
    public var error: GATTError
    /// The values that went through first: for Write Requests, each one answered by its Write Response; for Write
    /// Commands, each one handed to the socket (the peer sends no answer to a command, Part F §3.4.5.3).
    public var completed: Int
    /// The values the call was given.
    public var total: Int
    public var mode: Mode

    public init(error: GATTError, completed: Int, total: Int, mode: Mode) {
        self.error = error
        self.completed = completed
        self.total = total
        self.mode = mode
    }

    public var description: String {
        let what = mode == .request ? "confirmed by a Write Response" : "sent"
        return "\(error.description) (value \(completed + 1) of \(total): \(completed) \(mode.rawValue)\(completed == 1 ? "" : "s") \(what) before it, \(total - completed - 1) not sent)"
    }
}
