import TestSupport
import XCTest
@testable import ATTStack

/// Every class of malformed input returns a typed error naming the PDU, the field and the problem.
final class ATTPDUMalformedTests: XCTestCase {
    private func err(_ op: ATTOpcode?, _ field: ATTPDUField, _ problem: ATTPDUProblem) -> ATTDecodeError {
        ATTDecodeError(opcode: op, field: field, problem: problem)
    }

    func testEmptyInput() {
        assertDecodeError([], err(nil, .opcode, .empty))
        assertDecodeError([UInt8](), ATTDecodeError(opcode: nil, field: .opcode, problem: .empty))
        XCTAssertEqual(err(nil, .opcode, .empty).description, "empty input: opcode: empty (an ATT PDU has at least a 1-byte opcode)")
        XCTAssertNil(err(nil, .opcode, .empty).opcodeByte)
    }

    func testUnknownOpcode() {
        assertDecodeError(hex("3f 01 02"), err(ATTOpcode(0x3f), .opcode, .unknownOpcode))
        assertDecodeError(hex("00"), err(ATTOpcode(0x00), .opcode, .unknownOpcode))
        // 0x14 and 0x15 are gaps in the table; 0x92 is a signed form of a request nobody defines.
        for raw: UInt8 in [0x14, 0x15, 0x1a, 0x1c, 0x1f, 0x22, 0x24, 0x7f, 0x92, 0xff] {
            assertDecodeError([raw, 1, 0, 1], err(ATTOpcode(raw), .opcode, .unknownOpcode))
        }
        let e = err(ATTOpcode(0x3f), .opcode, .unknownOpcode)
        XCTAssertEqual(e.description, "Unknown Opcode 0x3F: opcode: unknown opcode (not defined by Core Spec 5.4 Vol 3 Part F §3.4)")
        XCTAssertEqual(e.opcodeByte, 0x3f)
        // A server answers an unknown request with Request Not Supported, and drops an unknown command.
        XCTAssertEqual(e.serverErrorCode, .requestNotSupported)
        XCTAssertNil(err(ATTOpcode(0x7f), .opcode, .unknownOpcode).serverErrorCode)
        XCTAssertNil(err(ATTOpcode(0x7f), .opcode, .unknownOpcode).serverErrorResponse)
        XCTAssertEqual(e.serverErrorResponse, .errorResponse(requestOpcode: ATTOpcode(0x3f), handle: 0, error: .requestNotSupported))
    }

    func testTruncated() {
        assertDecodeError(hex("12 07"), err(.writeRequest, .attributeHandle, .truncated(needed: 3, actual: 2)))
        assertDecodeError(hex("12"), err(.writeRequest, .attributeHandle, .truncated(needed: 3, actual: 1)))
        assertDecodeError(hex("01 10 09 00"), err(.errorResponse, .errorCode, .truncated(needed: 5, actual: 4)))
        assertDecodeError(hex("01 10 09"), err(.errorResponse, .attributeHandleInError, .truncated(needed: 4, actual: 3)))
        assertDecodeError(hex("01"), err(.errorResponse, .requestOpcodeInError, .truncated(needed: 2, actual: 1)))
        assertDecodeError(hex("02 17"), err(.exchangeMTURequest, .clientRxMTU, .truncated(needed: 3, actual: 2)))
        assertDecodeError(hex("03"), err(.exchangeMTUResponse, .serverRxMTU, .truncated(needed: 3, actual: 1)))
        assertDecodeError(hex("04 01 00 ff"), err(.findInformationRequest, .endingHandle, .truncated(needed: 5, actual: 4)))
        assertDecodeError(hex("06 01 00 ff ff 00"), err(.findByTypeValueRequest, .attributeType, .truncated(needed: 7, actual: 6)))
        assertDecodeError(hex("08 01 00 ff ff"), err(.readByTypeRequest, .attributeType, .truncated(needed: 7, actual: 5)))
        assertDecodeError(hex("08 01 00 ff ff 00"), err(.readByTypeRequest, .attributeType, .truncated(needed: 7, actual: 6)))
        assertDecodeError(hex("0c 04 00 01"), err(.readBlobRequest, .valueOffset, .truncated(needed: 5, actual: 4)))
        assertDecodeError(hex("16 03 00 00"), err(.prepareWriteRequest, .valueOffset, .truncated(needed: 5, actual: 4)))
        assertDecodeError(hex("17 03 00"), err(.prepareWriteResponse, .valueOffset, .truncated(needed: 5, actual: 3)))
        assertDecodeError(hex("18"), err(.executeWriteRequest, .flags, .truncated(needed: 2, actual: 1)))
        assertDecodeError(hex("09"), err(.readByTypeResponse, .length, .truncated(needed: 2, actual: 1)))
        assertDecodeError(hex("11"), err(.readByGroupTypeResponse, .length, .truncated(needed: 2, actual: 1)))
        assertDecodeError(hex("05"), err(.findInformationResponse, .format, .truncated(needed: 2, actual: 1)))
        assertDecodeError(hex("1b 03"), err(.handleValueNotification, .attributeHandle, .truncated(needed: 3, actual: 2)))
        assertDecodeError(hex("1d"), err(.handleValueIndication, .attributeHandle, .truncated(needed: 3, actual: 1)))
        assertDecodeError(hex("52 07"), err(.writeCommand, .attributeHandle, .truncated(needed: 3, actual: 2)))
        // A signed write needs its 12-byte signature.
        assertDecodeError(hex("d2 07 00 01 02 03 00 00 00 00 31 1f 0a cd"),
                          err(.signedWriteCommand, .authenticationSignature, .truncated(needed: 15, actual: 14)))
        assertDecodeError(hex("d2 07 00 01 02"), err(.signedWriteCommand, .authenticationSignature, .truncated(needed: 15, actual: 5)))
        assertDecodeError(hex("21 03"), err(.readMultipleVariableResponse, .lengthValueTupleList, .truncated(needed: 2, actual: 1)))
        // A tuple header cut short in a Multiple Handle Value Notification.
        assertDecodeError(hex("23 03 00 01 00 05 07"),
                          err(.multipleHandleValueNotification, .handleLengthValueTupleList, .truncated(needed: 4, actual: 1)))
        XCTAssertEqual(err(.writeRequest, .attributeHandle, .truncated(needed: 3, actual: 2)).description,
                       "Write Request: handle: truncated: 2 bytes, needs at least 3")
    }

    func testWrongLengthForFixedSizePDUs() {
        assertDecodeError(hex("13 00"), err(.writeResponse, .pdu, .wrongLength(expected: 1, actual: 2)))
        assertDecodeError(hex("19 00 00"), err(.executeWriteResponse, .pdu, .wrongLength(expected: 1, actual: 3)))
        assertDecodeError(hex("1e 01"), err(.handleValueConfirmation, .pdu, .wrongLength(expected: 1, actual: 2)))
        assertDecodeError(hex("02 17 00 00"), err(.exchangeMTURequest, .pdu, .wrongLength(expected: 3, actual: 4)))
        assertDecodeError(hex("03 17 00 00"), err(.exchangeMTUResponse, .pdu, .wrongLength(expected: 3, actual: 4)))
        assertDecodeError(hex("0a 03 00 00"), err(.readRequest, .pdu, .wrongLength(expected: 3, actual: 4)))
        assertDecodeError(hex("0c 03 00 00 00 00"), err(.readBlobRequest, .pdu, .wrongLength(expected: 5, actual: 6)))
        assertDecodeError(hex("04 01 00 ff ff 00"), err(.findInformationRequest, .pdu, .wrongLength(expected: 5, actual: 6)))
        assertDecodeError(hex("01 10 09 00 0a 00"), err(.errorResponse, .pdu, .wrongLength(expected: 5, actual: 6)))
        assertDecodeError(hex("18 01 00"), err(.executeWriteRequest, .pdu, .wrongLength(expected: 2, actual: 3)))
        XCTAssertEqual(err(.writeResponse, .pdu, .wrongLength(expected: 1, actual: 2)).description,
                       "Write Response: PDU: wrong length: 2 bytes, expected 1")
    }

    func testWrongUUIDLength() {
        // Only 2- and 16-byte UUIDs travel in ATT: a 32-bit one is malformed (Vol 3 Part F §3.2.1).
        assertDecodeError(hex("08 01 00 ff ff 0d 18 00 00"), err(.readByTypeRequest, .attributeType, .wrongUUIDLength(actual: 4)))
        assertDecodeError(hex("10 01 00 ff ff 00 28 00"), err(.readByGroupTypeRequest, .attributeType, .wrongUUIDLength(actual: 3)))
        assertDecodeError(hex("10 01 00 ff ff") + [UInt8](repeating: 0, count: 17),
                          err(.readByGroupTypeRequest, .attributeType, .wrongUUIDLength(actual: 17)))
    }

    func testOddListLengths() {
        assertDecodeError(hex("05 01 04 00 01"), err(.findInformationResponse, .informationData, .oddListLength(listLength: 3, elementLength: 4)))
        assertDecodeError(hex("05 02 04 00 01 29"), err(.findInformationResponse, .informationData, .oddListLength(listLength: 4, elementLength: 18)))
        assertDecodeError(hex("07 01 00 07"), err(.findByTypeValueResponse, .handlesInformationList, .oddListLength(listLength: 3, elementLength: 4)))
        assertDecodeError(hex("09 07 02 00 02 03 00 00"), err(.readByTypeResponse, .attributeDataList, .oddListLength(listLength: 6, elementLength: 7)))
        assertDecodeError(hex("09 07 02 00 02 03 00 00 2a 03"), err(.readByTypeResponse, .attributeDataList, .oddListLength(listLength: 8, elementLength: 7)))
        assertDecodeError(hex("11 06 01 00 04 00 01"), err(.readByGroupTypeResponse, .attributeDataList, .oddListLength(listLength: 5, elementLength: 6)))
        assertDecodeError(hex("0e 03 00 07"), err(.readMultipleRequest, .setOfHandles, .oddListLength(listLength: 3, elementLength: 2)))
        assertDecodeError(hex("20 03 00 07 00 08"), err(.readMultipleVariableRequest, .setOfHandles, .oddListLength(listLength: 5, elementLength: 2)))
        XCTAssertEqual(err(.readByTypeResponse, .attributeDataList, .oddListLength(listLength: 6, elementLength: 7)).description,
                       "Read By Type Response: attribute data list: odd list length: 6 bytes is not a multiple of the 7-byte element")
    }

    func testEmptyAndShortLists() {
        assertDecodeError(hex("05 01"), err(.findInformationResponse, .informationData, .emptyList))
        assertDecodeError(hex("07"), err(.findByTypeValueResponse, .handlesInformationList, .emptyList))
        assertDecodeError(hex("09 07"), err(.readByTypeResponse, .attributeDataList, .emptyList))
        assertDecodeError(hex("11 06"), err(.readByGroupTypeResponse, .attributeDataList, .emptyList))
        assertDecodeError(hex("21"), err(.readMultipleVariableResponse, .lengthValueTupleList, .emptyList))
        // The Set Of Handles holds two or more handles (§3.4.4.7, §3.4.4.11).
        assertDecodeError(hex("0e"), err(.readMultipleRequest, .setOfHandles, .tooFewElements(count: 0, minimum: 2)))
        assertDecodeError(hex("0e 03 00"), err(.readMultipleRequest, .setOfHandles, .tooFewElements(count: 1, minimum: 2)))
        assertDecodeError(hex("20 03 00"), err(.readMultipleVariableRequest, .setOfHandles, .tooFewElements(count: 1, minimum: 2)))
        // A Multiple Handle Value Notification carries two or more tuples (§3.4.7.4).
        assertDecodeError(hex("23"), err(.multipleHandleValueNotification, .handleLengthValueTupleList, .tooFewElements(count: 0, minimum: 2)))
        assertDecodeError(hex("23 03 00 01 00 05"), err(.multipleHandleValueNotification, .handleLengthValueTupleList, .tooFewElements(count: 1, minimum: 2)))
    }

    func testInvalidFormatFlagsAndLength() {
        assertDecodeError(hex("05 03 04 00 01 29"), err(.findInformationResponse, .format, .invalidFormat(0x03)))
        assertDecodeError(hex("05 00 04 00 01 29"), err(.findInformationResponse, .format, .invalidFormat(0x00)))
        assertDecodeError(hex("18 02"), err(.executeWriteRequest, .flags, .invalidFlags(0x02)))
        assertDecodeError(hex("18 ff"), err(.executeWriteRequest, .flags, .invalidFlags(0xff)))
        assertDecodeError(hex("09 01 02 00"), err(.readByTypeResponse, .length, .invalidLengthField(value: 1, minimum: 2)))
        assertDecodeError(hex("09 00 02 00"), err(.readByTypeResponse, .length, .invalidLengthField(value: 0, minimum: 2)))
        assertDecodeError(hex("11 03 01 00 04"), err(.readByGroupTypeResponse, .length, .invalidLengthField(value: 3, minimum: 4)))
        XCTAssertEqual(err(.findInformationResponse, .format, .invalidFormat(3)).description,
                       "Find Information Response: format: invalid format 0x03 (expected 0x01 or 0x02)")
        XCTAssertEqual(err(.executeWriteRequest, .flags, .invalidFlags(2)).serverErrorCode, .invalidPDU)
        XCTAssertEqual(err(.executeWriteRequest, .flags, .invalidFlags(2)).serverErrorResponse?.bytes, hex("01 18 00 00 04"))
    }

    func testZeroHandles() {
        let write = err(.writeRequest, .attributeHandle, .zeroHandle)
        // /TP/GAW/SR/BI-02-C/small: a server answers with Invalid Handle (01 12 00 00 01).
        assertDecodeError(hex("12 00 00 01 02 03"), write)
        XCTAssertEqual(write.description, "Write Request: handle: zero handle (the spec forbids handle 0x0000)")
        XCTAssertEqual(write.serverErrorCode, .invalidHandle)
        XCTAssertEqual(write.serverErrorResponse?.bytes, hex("01 12 00 00 01"))
        // /TP/GAR/SR/BI-02-C/small.
        assertDecodeError(hex("0a 00 00"), err(.readRequest, .attributeHandle, .zeroHandle))
        assertDecodeError(hex("0c 00 00 00 00"), err(.readBlobRequest, .attributeHandle, .zeroHandle))
        assertDecodeError(hex("52 00 00 01"), err(.writeCommand, .attributeHandle, .zeroHandle))
        XCTAssertNil(err(.writeCommand, .attributeHandle, .zeroHandle).serverErrorCode, "commands are never answered")
        assertDecodeError(hex("d2 00 00") + [UInt8](repeating: 0, count: 12), err(.signedWriteCommand, .attributeHandle, .zeroHandle))
        assertDecodeError(hex("16 00 00 00 00 01"), err(.prepareWriteRequest, .attributeHandle, .zeroHandle))
        assertDecodeError(hex("17 00 00 00 00 01"), err(.prepareWriteResponse, .attributeHandle, .zeroHandle))
        assertDecodeError(hex("1b 00 00 01"), err(.handleValueNotification, .attributeHandle, .zeroHandle))
        assertDecodeError(hex("1d 00 00 01"), err(.handleValueIndication, .attributeHandle, .zeroHandle))
        XCTAssertNil(err(.handleValueIndication, .attributeHandle, .zeroHandle).serverErrorCode)
        // Starting handles (§3.4.3.1: 0x0000 is answered with Invalid Handle).
        assertDecodeError(hex("04 00 00 ff ff"), err(.findInformationRequest, .startingHandle, .zeroHandle))
        assertDecodeError(hex("06 00 00 ff ff 00 28"), err(.findByTypeValueRequest, .startingHandle, .zeroHandle))
        assertDecodeError(hex("08 00 00 ff ff 03 28"), err(.readByTypeRequest, .startingHandle, .zeroHandle))
        assertDecodeError(hex("10 00 00 ff ff 00 28"), err(.readByGroupTypeRequest, .startingHandle, .zeroHandle))
        XCTAssertEqual(err(.readByGroupTypeRequest, .startingHandle, .zeroHandle).serverErrorCode, .invalidHandle)
        // Handles inside lists.
        assertDecodeError(hex("05 01 04 00 01 29 00 00 02 29"), err(.findInformationResponse, .informationData, .zeroHandle))
        assertDecodeError(hex("07 01 00 00 00"), err(.findByTypeValueResponse, .handlesInformationList, .zeroHandle))
        assertDecodeError(hex("09 03 00 00 09"), err(.readByTypeResponse, .attributeDataList, .zeroHandle))
        assertDecodeError(hex("11 06 01 00 00 00 01 18"), err(.readByGroupTypeResponse, .attributeDataList, .zeroHandle))
        assertDecodeError(hex("0e 03 00 00 00"), err(.readMultipleRequest, .setOfHandles, .zeroHandle))
        assertDecodeError(hex("20 00 00 03 00"), err(.readMultipleVariableRequest, .setOfHandles, .zeroHandle))
        assertDecodeError(hex("23 03 00 00 00 00 00 00 00"), err(.multipleHandleValueNotification, .handleLengthValueTupleList, .zeroHandle))
    }

    func testZeroIsAllowedWhereTheSpecAllowsIt() throws {
        // The Error Response names handle 0x0000 when no handle applies; the ending handle may be anything;
        // a start above the end decodes (a server answers Invalid Handle: /TP/GAR/SR/BI-08-C).
        assertVector(hex("01 02 00 00 06"), .errorResponse(requestOpcode: .exchangeMTURequest, handle: 0, error: .requestNotSupported))
        let inverted = try ATTPDU.decode(hex("08 02 00 01 00 00 28"))
        XCTAssertEqual(inverted, .readByTypeRequest(range: ATTHandleRange(start: 2, end: 1), type: .primaryService))
        XCTAssertFalse(ATTHandleRange(start: 2, end: 1).isValid)
        XCTAssertTrue(ATTHandleRange.all.isValid)
        XCTAssertFalse(ATTHandleRange(start: 0, end: 5).isValid)
        XCTAssertTrue(ATTHandleRange(start: 3, end: 5).contains(3))
        XCTAssertTrue(ATTHandleRange(start: 3, end: 5).contains(5))
        XCTAssertFalse(ATTHandleRange(start: 3, end: 5).contains(6))
        XCTAssertFalse(ATTHandleRange(start: 3, end: 5).contains(2))
    }

    func testValueOverrun() {
        assertDecodeError(hex("23 03 00 05 00 01 02"),
                          err(.multipleHandleValueNotification, .handleLengthValueTupleList, .valueOverrun(declared: 5, available: 2)))
        assertDecodeError(hex("23 03 00 01 00 05 07 00 02 00 01"),
                          err(.multipleHandleValueNotification, .handleLengthValueTupleList, .valueOverrun(declared: 2, available: 1)))
        XCTAssertEqual(ATTPDUProblem.valueOverrun(declared: 5, available: 2).description,
                       "length 5 overruns the PDU: only 2 bytes remain")
    }

    func testResponsesAreNotAnsweredByAServer() {
        XCTAssertNil(err(.readByTypeResponse, .length, .invalidLengthField(value: 1, minimum: 2)).serverErrorCode)
        XCTAssertEqual(err(.readByTypeRequest, .attributeType, .wrongUUIDLength(actual: 4)).serverErrorCode, .invalidPDU)
    }

    /// Every opcode byte followed by every short tail: decoding returns or throws, never traps, and what
    /// decodes re-encodes to the same bytes.
    func testNoInputTraps() {
        var rng = SplitMix64(seed: 0xA77)
        var decoded = 0
        for op in 0...255 {
            for length in 0...24 {
                for _ in 0..<6 {
                    var bytes = [UInt8(op)]
                    for _ in 0..<length { bytes.append(UInt8.random(in: 0...3, using: &rng) == 0 ? 0 : UInt8.random(in: 0...255, using: &rng)) }
                    if let pdu = try? ATTPDU.decode(bytes) {
                        decoded += 1
                        XCTAssertEqual(pdu.bytes, bytes)
                    }
                }
            }
        }
        XCTAssertGreaterThan(decoded, 1000)
    }
}
