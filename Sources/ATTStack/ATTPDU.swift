// Every ATT PDU of Core Spec 5.4 Vol 3 Part F §3.4, as one enum.

/// One ATT PDU (Core Spec 5.4 Vol 3 Part F §3.4), one case per PDU. Variable parts are `ArraySlice<UInt8>`
/// views into the decoded buffer and lists are view structs over its bytes, so decoding copies nothing.
/// Equality compares contents (not slice indices). Multi-octet fields are little-endian on the wire.
public enum ATTPDU: Sendable, Equatable, CustomStringConvertible {
    /// §3.4.1.1 (0x01).
    case errorResponse(requestOpcode: ATTOpcode, handle: UInt16, error: ATTErrorCode)
    /// §3.4.2.1 (0x02).
    case exchangeMTURequest(clientRxMTU: UInt16)
    /// §3.4.2.2 (0x03).
    case exchangeMTUResponse(serverRxMTU: UInt16)
    /// §3.4.3.1 (0x04).
    case findInformationRequest(ATTHandleRange)
    /// §3.4.3.2 (0x05).
    case findInformationResponse(ATTFindInformationList)
    /// §3.4.3.3 (0x06): `type` is a 16-bit UUID; `value` the attribute value to match.
    case findByTypeValueRequest(range: ATTHandleRange, type: UInt16, value: ArraySlice<UInt8>)
    /// §3.4.3.4 (0x07).
    case findByTypeValueResponse(ATTHandlesInformationList)
    /// §3.4.4.1 (0x08): `type` goes on the wire as 2 bytes for `.bit16`, else 16 bytes.
    case readByTypeRequest(range: ATTHandleRange, type: BluetoothUUID)
    /// §3.4.4.2 (0x09).
    case readByTypeResponse(ATTAttributeDataList)
    /// §3.4.4.3 (0x0A).
    case readRequest(handle: UInt16)
    /// §3.4.4.4 (0x0B).
    case readResponse(value: ArraySlice<UInt8>)
    /// §3.4.4.5 (0x0C).
    case readBlobRequest(handle: UInt16, offset: UInt16)
    /// §3.4.4.6 (0x0D).
    case readBlobResponse(value: ArraySlice<UInt8>)
    /// §3.4.4.7 (0x0E).
    case readMultipleRequest(ATTHandleList)
    /// §3.4.4.8 (0x0F): the values concatenated, with no lengths.
    case readMultipleResponse(values: ArraySlice<UInt8>)
    /// §3.4.4.9 (0x10): `type` goes on the wire as 2 bytes for `.bit16`, else 16 bytes.
    case readByGroupTypeRequest(range: ATTHandleRange, type: BluetoothUUID)
    /// §3.4.4.10 (0x11).
    case readByGroupTypeResponse(ATTGroupAttributeDataList)
    /// §3.4.5.1 (0x12).
    case writeRequest(handle: UInt16, value: ArraySlice<UInt8>)
    /// §3.4.5.2 (0x13).
    case writeResponse
    /// §3.4.5.3 (0x52).
    case writeCommand(handle: UInt16, value: ArraySlice<UInt8>)
    /// §3.4.5.4 (0xD2): `signature` is the 12-byte Authentication Signature.
    case signedWriteCommand(handle: UInt16, value: ArraySlice<UInt8>, signature: ArraySlice<UInt8>)
    /// §3.4.6.1 (0x16).
    case prepareWriteRequest(handle: UInt16, offset: UInt16, value: ArraySlice<UInt8>)
    /// §3.4.6.2 (0x17).
    case prepareWriteResponse(handle: UInt16, offset: UInt16, value: ArraySlice<UInt8>)
    /// §3.4.6.3 (0x18).
    case executeWriteRequest(flags: ATTExecuteWriteFlags)
    /// §3.4.6.4 (0x19).
    case executeWriteResponse
    /// §3.4.4.11 (0x20).
    case readMultipleVariableRequest(ATTHandleList)
    /// §3.4.4.12 (0x21).
    case readMultipleVariableResponse(ATTLengthValueList)
    /// §3.4.7.4 (0x23).
    case multipleHandleValueNotification(ATTHandleLengthValueList)
    /// §3.4.7.1 (0x1B).
    case handleValueNotification(handle: UInt16, value: ArraySlice<UInt8>)
    /// §3.4.7.2 (0x1D).
    case handleValueIndication(handle: UInt16, value: ArraySlice<UInt8>)
    /// §3.4.7.3 (0x1E).
    case handleValueConfirmation

    /// The Authentication Signature length of a Signed Write Command (§3.4.5.4).
    public static let signatureLength = 12

    /// This PDU's opcode.
    @inlinable public var opcode: ATTOpcode {
        switch self {
        case .errorResponse: return .errorResponse
        case .exchangeMTURequest: return .exchangeMTURequest
        case .exchangeMTUResponse: return .exchangeMTUResponse
        case .findInformationRequest: return .findInformationRequest
        case .findInformationResponse: return .findInformationResponse
        case .findByTypeValueRequest: return .findByTypeValueRequest
        case .findByTypeValueResponse: return .findByTypeValueResponse
        case .readByTypeRequest: return .readByTypeRequest
        case .readByTypeResponse: return .readByTypeResponse
        case .readRequest: return .readRequest
        case .readResponse: return .readResponse
        case .readBlobRequest: return .readBlobRequest
        case .readBlobResponse: return .readBlobResponse
        case .readMultipleRequest: return .readMultipleRequest
        case .readMultipleResponse: return .readMultipleResponse
        case .readByGroupTypeRequest: return .readByGroupTypeRequest
        case .readByGroupTypeResponse: return .readByGroupTypeResponse
        case .writeRequest: return .writeRequest
        case .writeResponse: return .writeResponse
        case .writeCommand: return .writeCommand
        case .signedWriteCommand: return .signedWriteCommand
        case .prepareWriteRequest: return .prepareWriteRequest
        case .prepareWriteResponse: return .prepareWriteResponse
        case .executeWriteRequest: return .executeWriteRequest
        case .executeWriteResponse: return .executeWriteResponse
        case .readMultipleVariableRequest: return .readMultipleVariableRequest
        case .readMultipleVariableResponse: return .readMultipleVariableResponse
        case .multipleHandleValueNotification: return .multipleHandleValueNotification
        case .handleValueNotification: return .handleValueNotification
        case .handleValueIndication: return .handleValueIndication
        case .handleValueConfirmation: return .handleValueConfirmation
        }
    }

    /// `Write Request handle 0x0003 value [01 02]`.
    public var description: String {
        let name = opcode.name
        switch self {
        case .errorResponse(let req, let handle, let error):
            return "\(name) to \(req) handle \(ATTHex.handle(handle)): \(error)"
        case .exchangeMTURequest(let mtu): return "\(name) client Rx MTU \(mtu)"
        case .exchangeMTUResponse(let mtu): return "\(name) server Rx MTU \(mtu)"
        case .findInformationRequest(let range): return "\(name) \(range)"
        case .findInformationResponse(let list): return "\(name) \(list)"
        case .findByTypeValueRequest(let range, let type, let value):
            return "\(name) \(range) type \(BluetoothUUID.bit16(type)) value [\(ATTHex.bytes(value))]"
        case .findByTypeValueResponse(let list): return "\(name) \(list)"
        case .readByTypeRequest(let range, let type), .readByGroupTypeRequest(let range, let type):
            return "\(name) \(range) type \(type)"
        case .readByTypeResponse(let list): return "\(name) \(list)"
        case .readRequest(let handle): return "\(name) handle \(ATTHex.handle(handle))"
        case .readResponse(let value), .readBlobResponse(let value), .readMultipleResponse(let value):
            return "\(name) [\(ATTHex.bytes(value))]"
        case .readBlobRequest(let handle, let offset):
            return "\(name) handle \(ATTHex.handle(handle)) offset \(offset)"
        case .readMultipleRequest(let list), .readMultipleVariableRequest(let list): return "\(name) \(list)"
        case .readByGroupTypeResponse(let list): return "\(name) \(list)"
        case .writeRequest(let handle, let value), .writeCommand(let handle, let value),
             .handleValueNotification(let handle, let value), .handleValueIndication(let handle, let value):
            return "\(name) handle \(ATTHex.handle(handle)) value [\(ATTHex.bytes(value))]"
        case .signedWriteCommand(let handle, let value, let signature):
            return "\(name) handle \(ATTHex.handle(handle)) value [\(ATTHex.bytes(value))] signature [\(ATTHex.bytes(signature))]"
        case .prepareWriteRequest(let handle, let offset, let value),
             .prepareWriteResponse(let handle, let offset, let value):
            return "\(name) handle \(ATTHex.handle(handle)) offset \(offset) value [\(ATTHex.bytes(value))]"
        case .executeWriteRequest(let flags): return "\(name) flags \(flags)"
        case .readMultipleVariableResponse(let list): return "\(name) \(list)"
        case .multipleHandleValueNotification(let list): return "\(name) \(list)"
        case .writeResponse, .executeWriteResponse, .handleValueConfirmation: return name
        }
    }
}
