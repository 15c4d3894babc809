// ATT opcodes and the facts about them: Core Spec 5.4 Vol 3 Part F §3.3.1 (opcode format) and §3.4.8 (summary).

/// An ATT PDU opcode byte (Core Spec 5.4 Vol 3 Part F §3.3.1): bits 0-5 the method, bit 6 the command
/// flag, bit 7 the authentication signature flag. Any byte is representable; `name` says whether it is defined.
public struct ATTOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8

    @inlinable public init(rawValue: UInt8) { self.rawValue = rawValue }
    @inlinable public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    /// What role a PDU with this opcode plays in the protocol (Core Spec 5.4 Vol 3 Part F §3.3).
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case request, response, command, notification, indication, confirmation, unknown
    }

    // §3.4.1 Error handling
    public static let errorResponse = ATTOpcode(0x01)
    // §3.4.2 MTU exchange
    public static let exchangeMTURequest = ATTOpcode(0x02)
    public static let exchangeMTUResponse = ATTOpcode(0x03)
    // §3.4.3 Find information
    public static let findInformationRequest = ATTOpcode(0x04)
    public static let findInformationResponse = ATTOpcode(0x05)
    public static let findByTypeValueRequest = ATTOpcode(0x06)
    public static let findByTypeValueResponse = ATTOpcode(0x07)
    // §3.4.4 Reading attributes
    public static let readByTypeRequest = ATTOpcode(0x08)
    public static let readByTypeResponse = ATTOpcode(0x09)
    public static let readRequest = ATTOpcode(0x0A)
    public static let readResponse = ATTOpcode(0x0B)
    public static let readBlobRequest = ATTOpcode(0x0C)
    public static let readBlobResponse = ATTOpcode(0x0D)
    public static let readMultipleRequest = ATTOpcode(0x0E)
    public static let readMultipleResponse = ATTOpcode(0x0F)
    public static let readByGroupTypeRequest = ATTOpcode(0x10)
    public static let readByGroupTypeResponse = ATTOpcode(0x11)
    public static let readMultipleVariableRequest = ATTOpcode(0x20)
    public static let readMultipleVariableResponse = ATTOpcode(0x21)
    // §3.4.5 Writing attributes
    public static let writeRequest = ATTOpcode(0x12)
    public static let writeResponse = ATTOpcode(0x13)
    public static let writeCommand = ATTOpcode(0x52)
    public static let signedWriteCommand = ATTOpcode(0xD2)
    // §3.4.6 Queued writes
    public static let prepareWriteRequest = ATTOpcode(0x16)
    public static let prepareWriteResponse = ATTOpcode(0x17)
    public static let executeWriteRequest = ATTOpcode(0x18)
    public static let executeWriteResponse = ATTOpcode(0x19)
    // §3.4.7 Server initiated
    public static let handleValueNotification = ATTOpcode(0x1B)
    public static let handleValueIndication = ATTOpcode(0x1D)
    public static let handleValueConfirmation = ATTOpcode(0x1E)
    public static let multipleHandleValueNotification = ATTOpcode(0x23)

    /// Every opcode the Core Spec 5.4 defines, in numeric order.
    public static let allDefined: [ATTOpcode] = [
        .errorResponse, .exchangeMTURequest, .exchangeMTUResponse, .findInformationRequest,
        .findInformationResponse, .findByTypeValueRequest, .findByTypeValueResponse, .readByTypeRequest,
        .readByTypeResponse, .readRequest, .readResponse, .readBlobRequest, .readBlobResponse,
        .readMultipleRequest, .readMultipleResponse, .readByGroupTypeRequest, .readByGroupTypeResponse,
        .writeRequest, .writeResponse, .prepareWriteRequest, .prepareWriteResponse, .executeWriteRequest,
        .executeWriteResponse, .handleValueNotification, .handleValueIndication, .handleValueConfirmation,
        .readMultipleVariableRequest, .readMultipleVariableResponse, .multipleHandleValueNotification,
        .writeCommand, .signedWriteCommand,
    ]

    /// Bits 0-5: the method.
    @inlinable public var method: UInt8 { rawValue & 0x3F }
    /// Bit 6: a command, which is never answered.
    @inlinable public var isCommand: Bool { rawValue & 0x40 != 0 }
    /// Bit 7: the PDU ends with a 12-byte authentication signature.
    @inlinable public var hasSignature: Bool { rawValue & 0x80 != 0 }

    /// Whether the Core Spec 5.4 defines this opcode.
    public var isDefined: Bool { Self.info(rawValue) != nil }

    /// The spec's name ("Write Request"), or "Unknown Opcode" for an undefined byte.
    public var name: String { Self.info(rawValue)?.name ?? "Unknown Opcode" }

    /// The role a PDU with this opcode plays.
    public var kind: Kind { Self.info(rawValue)?.kind ?? .unknown }

    /// A request's success response, or an indication's confirmation; nil otherwise.
    public var responseOpcode: ATTOpcode? {
        switch self {
        case .exchangeMTURequest: return .exchangeMTUResponse
        case .findInformationRequest: return .findInformationResponse
        case .findByTypeValueRequest: return .findByTypeValueResponse
        case .readByTypeRequest: return .readByTypeResponse
        case .readRequest: return .readResponse
        case .readBlobRequest: return .readBlobResponse
        case .readMultipleRequest: return .readMultipleResponse
        case .readByGroupTypeRequest: return .readByGroupTypeResponse
        case .writeRequest: return .writeResponse
        case .prepareWriteRequest: return .prepareWriteResponse
        case .executeWriteRequest: return .executeWriteResponse
        case .readMultipleVariableRequest: return .readMultipleVariableResponse
        case .handleValueIndication: return .handleValueConfirmation
        default: return nil
        }
    }

    /// The inverse of `responseOpcode`: the request a success response answers (or the indication a
    /// confirmation answers); nil otherwise (also for `.errorResponse`, which carries its request opcode).
    public var requestOpcode: ATTOpcode? {
        switch self {
        case .exchangeMTUResponse: return .exchangeMTURequest
        case .findInformationResponse: return .findInformationRequest
        case .findByTypeValueResponse: return .findByTypeValueRequest
        case .readByTypeResponse: return .readByTypeRequest
        case .readResponse: return .readRequest
        case .readBlobResponse: return .readBlobRequest
        case .readMultipleResponse: return .readMultipleRequest
        case .readByGroupTypeResponse: return .readByGroupTypeRequest
        case .writeResponse: return .writeRequest
        case .prepareWriteResponse: return .prepareWriteRequest
        case .executeWriteResponse: return .executeWriteRequest
        case .readMultipleVariableResponse: return .readMultipleVariableRequest
        case .handleValueConfirmation: return .handleValueIndication
        default: return nil
        }
    }

    /// Whether a PDU with opcode `answer` completes this request: its success response, or an Error
    /// Response (for requests only; an indication is answered only by a confirmation).
    public func isAnswered(by answer: ATTOpcode) -> Bool {
        guard let response = responseOpcode else { return false }
        if answer == response { return true }
        return kind == .request && answer == .errorResponse
    }

    /// `0x12 Write Request`.
    public var description: String { "\(ATTHex.byte(rawValue)) \(name)" }

    @usableFromInline
    static func info(_ raw: UInt8) -> (name: String, kind: Kind)? {
        switch raw {
        case 0x01: return ("Error Response", .response)
        case 0x02: return ("Exchange MTU Request", .request)
        case 0x03: return ("Exchange MTU Response", .response)
        case 0x04: return ("Find Information Request", .request)
        case 0x05: return ("Find Information Response", .response)
        case 0x06: return ("Find By Type Value Request", .request)
        case 0x07: return ("Find By Type Value Response", .response)
        case 0x08: return ("Read By Type Request", .request)
        case 0x09: return ("Read By Type Response", .response)
        case 0x0A: return ("Read Request", .request)
        case 0x0B: return ("Read Response", .response)
        case 0x0C: return ("Read Blob Request", .request)
        case 0x0D: return ("Read Blob Response", .response)
        case 0x0E: return ("Read Multiple Request", .request)
        case 0x0F: return ("Read Multiple Response", .response)
        case 0x10: return ("Read By Group Type Request", .request)
        case 0x11: return ("Read By Group Type Response", .response)
        case 0x12: return ("Write Request", .request)
        case 0x13: return ("Write Response", .response)
        case 0x16: return ("Prepare Write Request", .request)
        case 0x17: return ("Prepare Write Response", .response)
        case 0x18: return ("Execute Write Request", .request)
        case 0x19: return ("Execute Write Response", .response)
        case 0x1B: return ("Handle Value Notification", .notification)
        case 0x1D: return ("Handle Value Indication", .indication)
        case 0x1E: return ("Handle Value Confirmation", .confirmation)
        case 0x20: return ("Read Multiple Variable Length Request", .request)
        case 0x21: return ("Read Multiple Variable Length Response", .response)
        case 0x23: return ("Multiple Handle Value Notification", .notification)
        case 0x52: return ("Write Command", .command)
        case 0xD2: return ("Signed Write Command", .command)
        default: return nil
        }
    }
}
