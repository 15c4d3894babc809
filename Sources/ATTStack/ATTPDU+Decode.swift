// Decoding ATT PDUs from a borrowed byte buffer: Core Spec 5.4 Vol 3 Part F §3.4 (PDU formats).
// Never traps: every malformed input throws an ATTDecodeError naming the PDU, the field and the problem.

extension ATTPDU {
    /// Decodes one whole ATT PDU. Variable parts of the result are slices of `bytes` (no copy).
    /// Throws for an empty input, an unknown opcode, a PDU of the wrong length for its format, an odd
    /// list length, an invalid format or flags byte, or a zero handle where the spec forbids one.
    public static func decode(_ bytes: ArraySlice<UInt8>) throws(ATTDecodeError) -> ATTPDU {
        try decodeBuffer(bytes)
    }

    /// Decodes one whole ATT PDU from an array; variable parts are slices of it (no copy).
    public static func decode(_ bytes: [UInt8]) throws(ATTDecodeError) -> ATTPDU {
        try decodeBuffer(bytes)
    }

    /// The decoder, specialized for arrays and slices (an array is decoded without first making a slice of
    /// the whole of it, which would cost a retain and a release).
    @inline(__always)
    static func decodeBuffer<B: RandomAccessCollection>(_ bytes: B) throws(ATTDecodeError) -> ATTPDU
    where B.Element == UInt8, B.Index == Int, B.SubSequence == ArraySlice<UInt8> {
        guard let first = bytes.first else {
            throw ATTDecodeError(opcode: nil, field: .opcode, problem: .empty)
        }
        let d = Decoder(opcode: ATTOpcode(first))
        let s = bytes.startIndex
        switch first {
        case 0x01:
            try d.need(bytes, 2, .requestOpcodeInError)
            try d.need(bytes, 4, .attributeHandleInError)
            try d.need(bytes, 5, .errorCode)
            try d.exact(bytes, 5)
            return .errorResponse(requestOpcode: ATTOpcode(bytes[s + 1]), handle: bytes.attLE16(at: s + 2),
                                  error: ATTErrorCode(bytes[s + 4]))
        case 0x02:
            try d.need(bytes, 3, .clientRxMTU)
            try d.exact(bytes, 3)
            return .exchangeMTURequest(clientRxMTU: bytes.attLE16(at: s + 1))
        case 0x03:
            try d.need(bytes, 3, .serverRxMTU)
            try d.exact(bytes, 3)
            return .exchangeMTUResponse(serverRxMTU: bytes.attLE16(at: s + 1))
        case 0x04:
            let range = try d.range(bytes)
            try d.exact(bytes, 5)
            return .findInformationRequest(range)
        case 0x05:
            try d.need(bytes, 2, .format)
            return .findInformationResponse(try ATTFindInformationList.decode(format: bytes[s + 1], data: bytes[(s + 2)...]))
        case 0x06:
            let range = try d.range(bytes)
            try d.need(bytes, 7, .attributeType)
            return .findByTypeValueRequest(range: range, type: bytes.attLE16(at: s + 5), value: bytes[(s + 7)...])
        case 0x07:
            return .findByTypeValueResponse(try ATTHandlesInformationList.decode(bytes[(s + 1)...]))
        case 0x08:
            let range = try d.range(bytes)
            return .readByTypeRequest(range: range, type: try d.uuid(bytes, at: 5))
        case 0x09:
            try d.need(bytes, 2, .length)
            return .readByTypeResponse(try ATTAttributeDataList.decode(length: bytes[s + 1], data: bytes[(s + 2)...]))
        case 0x0A:
            let handle = try d.handle(bytes, at: 1)
            try d.exact(bytes, 3)
            return .readRequest(handle: handle)
        case 0x0B:
            return .readResponse(value: bytes[(s + 1)...])
        case 0x0C:
            let handle = try d.handle(bytes, at: 1)
            try d.need(bytes, 5, .valueOffset)
            try d.exact(bytes, 5)
            return .readBlobRequest(handle: handle, offset: bytes.attLE16(at: s + 3))
        case 0x0D:
            return .readBlobResponse(value: bytes[(s + 1)...])
        case 0x0E:
            return .readMultipleRequest(try ATTHandleList.decode(bytes[(s + 1)...], opcode: .readMultipleRequest))
        case 0x0F:
            return .readMultipleResponse(values: bytes[(s + 1)...])
        case 0x10:
            let range = try d.range(bytes)
            return .readByGroupTypeRequest(range: range, type: try d.uuid(bytes, at: 5))
        case 0x11:
            try d.need(bytes, 2, .length)
            return .readByGroupTypeResponse(
                try ATTGroupAttributeDataList.decode(length: bytes[s + 1], data: bytes[(s + 2)...]))
        case 0x12:
            let handle = try d.handle(bytes, at: 1)
            return .writeRequest(handle: handle, value: bytes[(s + 3)...])
        case 0x13:
            try d.exact(bytes, 1)
            return .writeResponse
        case 0x52:
            let handle = try d.handle(bytes, at: 1)
            return .writeCommand(handle: handle, value: bytes[(s + 3)...])
        case 0xD2:
            let handle = try d.handle(bytes, at: 1)
            try d.need(bytes, 3 + ATTPDU.signatureLength, .authenticationSignature)
            let signatureStart = bytes.endIndex - ATTPDU.signatureLength
            return .signedWriteCommand(handle: handle, value: bytes[(s + 3)..<signatureStart],
                                       signature: bytes[signatureStart...])
        case 0x16:
            let handle = try d.handle(bytes, at: 1)
            try d.need(bytes, 5, .valueOffset)
            return .prepareWriteRequest(handle: handle, offset: bytes.attLE16(at: s + 3), value: bytes[(s + 5)...])
        case 0x17:
            let handle = try d.handle(bytes, at: 1)
            try d.need(bytes, 5, .valueOffset)
            return .prepareWriteResponse(handle: handle, offset: bytes.attLE16(at: s + 3), value: bytes[(s + 5)...])
        case 0x18:
            try d.need(bytes, 2, .flags)
            try d.exact(bytes, 2)
            let flags = ATTExecuteWriteFlags(rawValue: bytes[s + 1])
            guard flags.isDefined else { throw d.error(.flags, .invalidFlags(flags.rawValue)) }
            return .executeWriteRequest(flags: flags)
        case 0x19:
            try d.exact(bytes, 1)
            return .executeWriteResponse
        case 0x1B:
            let handle = try d.handle(bytes, at: 1)
            return .handleValueNotification(handle: handle, value: bytes[(s + 3)...])
        case 0x1D:
            let handle = try d.handle(bytes, at: 1)
            return .handleValueIndication(handle: handle, value: bytes[(s + 3)...])
        case 0x1E:
            try d.exact(bytes, 1)
            return .handleValueConfirmation
        case 0x20:
            return .readMultipleVariableRequest(
                try ATTHandleList.decode(bytes[(s + 1)...], opcode: .readMultipleVariableRequest))
        case 0x21:
            return .readMultipleVariableResponse(try ATTLengthValueList.decode(bytes[(s + 1)...]))
        case 0x23:
            return .multipleHandleValueNotification(try ATTHandleLengthValueList.decode(bytes[(s + 1)...]))
        default:
            throw d.error(.opcode, .unknownOpcode)
        }
    }

    /// Field-by-field length checks for one PDU. It holds only the opcode: the bytes are passed to each
    /// check (borrowed), so that no check retains the buffer.
    struct Decoder {
        let opcode: ATTOpcode

        @inline(__always) func error(_ field: ATTPDUField, _ problem: ATTPDUProblem) -> ATTDecodeError {
            ATTDecodeError(opcode: opcode, field: field, problem: problem)
        }

        /// The PDU must be at least `n` bytes long to hold `field`.
        @inline(__always) func need<B: RandomAccessCollection>(_ bytes: B, _ n: Int, _ field: ATTPDUField) throws(ATTDecodeError)
        where B.Element == UInt8, B.Index == Int {
            guard bytes.count >= n else { throw error(field, .truncated(needed: n, actual: bytes.count)) }
        }

        /// The PDU must be exactly `n` bytes long (no trailing bytes).
        @inline(__always) func exact<B: RandomAccessCollection>(_ bytes: B, _ n: Int) throws(ATTDecodeError)
        where B.Element == UInt8, B.Index == Int {
            guard bytes.count == n else {
                throw bytes.count < n ? error(.pdu, .truncated(needed: n, actual: bytes.count))
                                      : error(.pdu, .wrongLength(expected: n, actual: bytes.count))
            }
        }

        /// A non-zero Attribute Handle at byte `offset`.
        @inline(__always) func handle<B: RandomAccessCollection>(_ bytes: B, at offset: Int) throws(ATTDecodeError) -> UInt16
        where B.Element == UInt8, B.Index == Int {
            try need(bytes, offset + 2, .attributeHandle)
            let h = bytes.attLE16(at: bytes.startIndex + offset)
            guard h != 0 else { throw error(.attributeHandle, .zeroHandle) }
            return h
        }

        /// Starting Handle (non-zero) and Ending Handle at bytes 1-4.
        @inline(__always) func range<B: RandomAccessCollection>(_ bytes: B) throws(ATTDecodeError) -> ATTHandleRange
        where B.Element == UInt8, B.Index == Int {
            try need(bytes, 3, .startingHandle)
            try need(bytes, 5, .endingHandle)
            let s = bytes.startIndex
            let start = bytes.attLE16(at: s + 1)
            guard start != 0 else { throw error(.startingHandle, .zeroHandle) }
            return ATTHandleRange(start: start, end: bytes.attLE16(at: s + 3))
        }

        /// A 2- or 16-byte Attribute Type from `offset` to the end of the PDU.
        @inline(__always) func uuid<B: RandomAccessCollection>(_ bytes: B, at offset: Int) throws(ATTDecodeError) -> BluetoothUUID
        where B.Element == UInt8, B.Index == Int {
            let n = bytes.count - offset
            let s = bytes.startIndex + offset
            switch n {
            case 2: return .bit16(bytes.attLE16(at: s))
            case 16:
                var v: UInt128 = 0
                var i = bytes.endIndex
                while i > s {
                    i -= 1
                    v = v << 8 | UInt128(bytes[i])
                }
                return .bit128(v)
            case ..<2: throw error(.attributeType, .truncated(needed: offset + 2, actual: bytes.count))
            default: throw error(.attributeType, .wrongUUIDLength(actual: n))
            }
        }
    }
}
