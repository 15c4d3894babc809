// Names of the parameters of ATT PDUs, in the spec's words: Core Spec 5.4 Vol 3 Part F §3.4.

/// A parameter of an ATT PDU (Core Spec 5.4 Vol 3 Part F §3.4), named as in the spec's PDU tables.
/// Used by `ATTDecodeError` and `ATTEncodeError` to say which field was wrong.
public enum ATTPDUField: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The whole PDU (its total length).
    case pdu = "PDU"
    case opcode = "opcode"
    case requestOpcodeInError = "request opcode in error"
    case attributeHandleInError = "attribute handle in error"
    case errorCode = "error code"
    case clientRxMTU = "client Rx MTU"
    case serverRxMTU = "server Rx MTU"
    case startingHandle = "starting handle"
    case endingHandle = "ending handle"
    case format = "format"
    case informationData = "information data"
    case attributeType = "attribute type"
    case attributeValue = "attribute value"
    case handlesInformationList = "handles information list"
    case length = "length"
    case attributeDataList = "attribute data list"
    case attributeHandle = "handle"
    case valueOffset = "value offset"
    case setOfHandles = "set of handles"
    case setOfValues = "set of values"
    case flags = "flags"
    case authenticationSignature = "authentication signature"
    case lengthValueTupleList = "length value tuple list"
    case handleLengthValueTupleList = "handle length value tuple list"

    public var description: String { rawValue }
}
