// The one table from an error to what `mirror` prints and how it exits: (message, JSON object, exit status).
// Every error any command can end with passes through `ErrorReport.init(_:)`.

import ATTStack
import JSON

/// How `mirror` exits. Scripts can tell a peer's ATT error from a local refusal, a timeout, a connection
/// failure and bad usage.
public enum ExitStatus: Int32, Sendable, CaseIterable {
    /// The command did what was asked.
    case success = 0
    /// Something else failed (a file could not be written, an unexpected internal state).
    case failure = 1
    /// Bad usage: an unknown command or option, a malformed address, handle, UUID, hex value or number, or a
    /// characteristic name or UUID that names no characteristic or several (the user's token is wrong).
    case usage = 2
    /// The peer answered with an ATT Error Response (Core Spec Vol 3 Part F §3.4.1.1).
    case peerError = 3
    /// This host refused to send: the value exceeds what the MTU or the spec allows.
    case localRefusal = 4
    /// Nothing came back in time: an ATT response (30 s transaction timeout) or a connection.
    case timeout = 5
    /// The connection could not be made, or was lost: socket errors, the peer closing.
    case connection = 6
    /// This machine cannot do it: no Bluetooth in the kernel (EAFNOSUPPORT), a missing capability (EPERM).
    case unsupported = 7
    /// The peer broke the protocol: a malformed PDU, an unexpected response.
    case protocolViolation = 8
    /// `mirror check`: the server broke a SHALL of the Core Specification (the report says which).
    case nonconformant = 9
    /// SIGINT (Ctrl-C) ended the command before it finished (128 + 2, as a shell reports it); what it had done
    /// is printed (README: what SIGINT and SIGTERM do per command).
    case interrupted = 130
    /// SIGTERM ended the command (128 + 15): a supervisor or `kill` asked it to stop; the link is closed first.
    case terminated = 143

    /// The word used in JSON ("kind") for errors with this status.
    public var kind: String {
        switch self {
        case .success: return "success"
        case .failure: return "failure"
        case .usage: return "usage"
        case .peerError: return "att"
        case .localRefusal: return "local"
        case .timeout: return "timeout"
        case .connection: return "connection"
        case .unsupported: return "unsupported"
        case .protocolViolation: return "protocol"
        case .nonconformant: return "nonconformant"
        case .interrupted: return "interrupted"
        case .terminated: return "terminated"
        }
    }

    /// One line for the exit status table in `--help`.
    public var meaning: String {
        switch self {
        case .success: return "success"
        case .failure: return "other failure (a file, a --btsnoop file that could not be written to the end, an internal error)"
        case .usage: return "bad usage: unknown command or option, malformed address, handle, UUID, hex or number, a NAME or UUID naming no characteristic or several"
        case .peerError: return "the peer answered with an ATT Error Response"
        case .localRefusal: return "refused locally, not sent (the value exceeds the MTU's budget or 512 bytes)"
        case .timeout: return "timeout: no ATT response or no connection in time"
        case .connection: return "connection failed or lost"
        case .unsupported: return "not possible on this machine: no Bluetooth in the kernel, or a missing capability"
        case .protocolViolation: return "the peer broke the protocol (malformed or unexpected PDU)"
        case .nonconformant: return "mirror check: the server broke a SHALL of the Core Specification"
        case .interrupted: return "interrupted by SIGINT (Ctrl-C) before the command finished (listen and a shell at a terminal end 0 on it instead)"
        case .terminated: return "terminated by SIGTERM (listen and shell included); the link is closed first"
        }
    }
}

/// Who refused an ATT operation.
public enum RejectedBy: String, Sendable {
    /// The peer sent an ATT Error Response.
    case peer
    /// This host refused before sending.
    case local
}

/// Everything a user needs about an ATT error, from the peer or a local refusal (Core Spec Vol 3 Part F §3.4.1.1).
public struct ATTErrorFacts: Sendable, Equatable {
    /// The error code byte; nil for a local refusal that has no ATT code.
    public var code: UInt8?
    /// The spec's name for the code ("Invalid Attribute Value Length"), or how the code is classed
    /// ("application error", "reserved", "common profile error") when the spec names no single meaning.
    public var name: String
    public var requestOpcode: UInt8
    /// "Write Request"
    public var requestName: String
    public var handle: UInt16
    /// A name for the handle when known ("cloudToken", "Device Name").
    public var handleLabel: String?
    public var rejectedBy: RejectedBy
    /// The length of the value that was sent (writes), when there was one.
    public var valueLength: Int?
    /// The value bytes the request could carry at this MTU (MTU-3 for a Write Request).
    public var budget: Int?
    public var mtu: Int?

    public init(code: UInt8?, name: String, requestOpcode: UInt8, requestName: String, handle: UInt16,
                handleLabel: String? = nil, rejectedBy: RejectedBy, valueLength: Int? = nil, budget: Int? = nil,
                mtu: Int? = nil) {
        self.code = code
        self.name = name
        self.requestOpcode = requestOpcode
        self.requestName = requestName
        self.handle = handle
        self.handleLabel = handleLabel
        self.rejectedBy = rejectedBy
        self.valueLength = valueLength
        self.budget = budget
        self.mtu = mtu
    }

    /// The facts with the spec's names for the code and the request (Core Spec Vol 3 Part F §3.4.1.1, §3.4.8).
    public init(code: ATTErrorCode?, request: ATTOpcode, handle: UInt16, handleLabel: String? = nil,
                rejectedBy: RejectedBy, valueLength: Int? = nil, budget: Int? = nil, mtu: Int? = nil,
                localReason: String = "refused locally") {
        self.init(code: code?.rawValue, name: code?.name ?? localReason, requestOpcode: request.rawValue,
                  requestName: request.name, handle: handle, handleLabel: handleLabel, rejectedBy: rejectedBy,
                  valueLength: valueLength, budget: budget, mtu: mtu)
    }

    /// Whether the code is an application error (0x80-0x9F), defined by the peripheral's application.
    public var isApplicationError: Bool { code.map { (0x80...0x9F).contains($0) } ?? false }

    /// The sentence: "ATT error 0x0D Invalid Attribute Value Length from the peer, on Write Request to handle
    /// 0x0012 (cloudToken): 41-byte value, within the 244-byte budget of MTU 247, so the peripheral rejected
    /// it at the application layer", or "not sent: 600-byte value exceeds the 244-byte budget of MTU 247 (local limit)".
    public var message: String {
        if rejectedBy == .local {
            if let length = valueLength, let budget, let mtu {
                return "not sent: \(length)-byte value exceeds the \(budget)-byte budget of MTU \(mtu) (local limit)"
            }
            var s = "not sent: \(name), on \(requestName) to handle \(ATTHex.handle(handle))"
            if let handleLabel { s += " (\(handleLabel))" }
            return s + " (local limit)"
        }
        var s = "ATT error "
        if let code {
            s += ATTHex.byte(code) + " "
            if isApplicationError {
                s += "application error (raw value \(ATTHex.byte(code)), defined by the peripheral's application)"
            } else {
                s += name
            }
        } else {
            s += name
        }
        s += " from the peer, on \(requestName) to handle \(ATTHex.handle(handle))"
        if let handleLabel { s += " (\(handleLabel))" }
        if let length = valueLength {
            s += ": \(length)-byte value"
            if let budget, let mtu {
                if length <= budget {
                    s += ", within the \(budget)-byte budget of MTU \(mtu)"
                    if code == 0x0D { s += ", so the peripheral rejected it at the application layer" }
                } else {
                    s += ", over the \(budget)-byte budget of MTU \(mtu)"
                }
            }
        }
        return s
    }

    /// The JSON fields, in this order: code, name, requestOpcode, request, handle, handleName,
    /// rejectedBy, valueLength, budget, mtu (absent facts are null).
    public var jsonFields: [(String, JSONValue)] {
        [
            ("code", code.map { .int(Int($0)) } ?? .null),
            ("name", .string(isApplicationError ? "application error" : name)),
            ("requestOpcode", .int(Int(requestOpcode))),
            ("request", .string(requestName)),
            ("handle", .int(Int(handle))),
            ("handleName", handleLabel.map { .string($0) } ?? .null),
            ("rejectedBy", .string(rejectedBy.rawValue)),
            ("valueLength", valueLength.map { .int($0) } ?? .null),
            ("budget", budget.map { .int($0) } ?? .null),
            ("mtu", mtu.map { .int($0) } ?? .null),
        ]
    }
}

/// The errors the CLI itself raises, after the libraries' own.
public enum CLIError: Error, Sendable, CustomStringConvertible {
    /// An ATT error from the peer or a local refusal.
    case att(ATTErrorFacts)
    /// Waited for `what` for `seconds` and nothing came.
    case timeout(what: String, seconds: Double)
    /// Could not connect, or the connection ended.
    case connection(String)
    /// This machine cannot do it (no Bluetooth in the kernel, missing capability).
    case unsupported(String)
    /// The peer sent something the protocol does not allow.
    case protocolViolation(String)
    /// Anything else, with its sentence.
    case failure(String)

    public var description: String { ErrorReport(self).message }
}

/// What `mirror` prints for an error and how it exits.
public struct ErrorReport: Sendable {
    public var status: ExitStatus
    /// The sentence on stderr (after "mirror: ").
    public var message: String
    /// An extra line on stderr: what to do about it.
    public var hint: String?
    /// The fields of the JSON `error` object, after "kind" and "message".
    public var fields: [(String, JSONValue)]

    public init(status: ExitStatus, message: String, hint: String? = nil, fields: [(String, JSONValue)] = []) {
        self.status = status
        self.message = message
        self.hint = hint
        self.fields = fields
    }

    /// The report as `mirror shell` says it: a usage hint for one of the shell's own commands, or for the tool,
    /// names the shell's help ("see: help sleep", "see: help"), since `mirror sleep --help` does not exist; a one-shot
    /// command's hint stays its own (`mirror read --help` exists, and a line's errors are the one-shot's word for word).
    var inShell: ErrorReport {
        guard let hint, hint.hasPrefix("see: mirror "), hint.hasSuffix(" --help") else { return self }
        let command = String(hint.dropFirst("see: mirror ".count).dropLast(" --help".count))
        guard command.isEmpty || !commandTable.contains(where: { $0.spec.name == command }) else { return self }
        var copy = self
        copy.hint = command.isEmpty ? "see: help" : "see: help \(command)"
        return copy
    }

    /// `{"error": {"kind": ..., "message": ..., <fields>..., "exitStatus": N}}`
    public var json: JSONValue {
        var object: [(String, JSONValue)] = [("kind", .string(status.kind)), ("message", .string(message))]
        object += fields
        if let hint { object.append(("hint", .string(hint))) }
        object.append(("exitStatus", .int(Int(status.rawValue))))
        return .object([("error", .object(object))])
    }

    /// The table: every error type a command may throw, mapped to its report.
    public init(_ error: any Error) {
        switch error {
        case let e as UsageError:
            self.init(status: .usage, message: e.message, hint: e.hint,
                      fields: [("token", e.token.map { .string($0) } ?? .null)])
        case let e as CLIError:
            self.init(cliError: e)
        case let e as PhaseError:
            // The underlying error's report as it is (its message is a contract), and a hint naming the phase.
            self = ErrorReport(e.underlying)
            fields.append(("phase", .string(e.phase)))
            hint = "bench stopped in \(e.phase)" + (e.hint.map { ": " + $0 } ?? "")
        default:
            if let report = ErrorReport.libraryReport(error) {
                self = report
            } else {
                self.init(status: .failure, message: String(describing: error))
            }
        }
    }

    /// What 0x05 adds: a Just Works key never makes an authenticated link (Vol 3 Part H §2.3.5.1).
    public static let authenticatedLinkHint = "; an authenticated link needs a key from Passkey Entry or Numeric Comparison (mirror pair TARGET --io keyboard-display): a Just Works bond is not enough"

    init(cliError e: CLIError) {
        switch e {
        case .att(let facts):
            var hint: String?
            if facts.rejectedBy == .local, let length = facts.valueLength, facts.budget != nil, length <= 512,
               facts.requestOpcode == 0x12 || facts.requestOpcode == 0x52 {
                hint = "a value longer than the budget needs a long write: mirror write TARGET HANDLE HEX --long"
            } else if facts.isApplicationError {
                hint = "application errors 0x80-0x9F are defined by the peripheral's own profile"
            } else if facts.rejectedBy == .peer, let code = facts.code, [0x05, 0x0C, 0x0F].contains(code) {
                // Raised only with an agent or a bond (Session.open): a raise no process answers ends in SMP's 30 s timeout.
                hint = "the peer wants an encrypted (0x0F, 0x0C) or authenticated (0x05) link: pair with it (mirror pair TARGET), or give --pair to pair on this connection"
                    + (code == 0x05 ? Self.authenticatedLinkHint : "")
            }
            self.init(status: facts.rejectedBy == .peer ? .peerError : .localRefusal, message: facts.message,
                      hint: hint, fields: facts.jsonFields)
        case .timeout(let what, let seconds):
            self.init(status: .timeout, message: "timed out after \(formatSeconds(seconds)) waiting for \(what)",
                      fields: [("waitingFor", .string(what)), ("seconds", .double(seconds))])
        case .connection(let s): self.init(status: .connection, message: s)
        case .unsupported(let s): self.init(status: .unsupported, message: s)
        case .protocolViolation(let s): self.init(status: .protocolViolation, message: s)
        case .failure(let s): self.init(status: .failure, message: s)
        }
    }
}

/// "30 s", "0.5 s"
public func formatSeconds(_ s: Double) -> String {
    s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
}
