import TestSupport
import XCTest
@testable import ATTStack

/// Generated PDUs of every kind survive encode then decode, byte for byte.
final class ATTPDURoundTripTests: XCTestCase {
    func testGeneratedPDUsRoundTrip() throws {
        var gen = ATTPDUGenerator(seed: 0x5EED_0001)
        var opcodesSeen = Set<UInt8>()
        for i in 0..<20_000 {
            let pdu = gen.make(kind: i % ATTPDUGenerator.kindCount)
            opcodesSeen.insert(pdu.opcode.rawValue)
            XCTAssertNoThrow(try pdu.validate(), "\(pdu)")
            let bytes = pdu.bytes
            XCTAssertEqual(bytes.count, pdu.encodedLength)
            XCTAssertEqual(bytes.first, pdu.opcode.rawValue)
            let decoded: ATTPDU
            do { decoded = try ATTPDU.decode(bytes) } catch {
                XCTFail("\(pdu) → \(bytes) failed to decode: \(error)")
                continue
            }
            XCTAssertEqual(decoded, pdu)
            XCTAssertEqual(decoded.bytes, bytes)
            if decoded != pdu { break }
        }
        XCTAssertEqual(opcodesSeen, Set(ATTOpcode.allDefined.map(\.rawValue)), "the generator covers every PDU")
    }

    /// The same PDU encodes identically into a buffer, appended to an array, and as `bytes`.
    func testEncodersAgree() throws {
        var gen = ATTPDUGenerator(seed: 42)
        var buffer = [UInt8](repeating: 0, count: 600)
        for _ in 0..<3_000 {
            let pdu = gen.make()
            let n = try buffer.withUnsafeMutableBytes { p throws(ATTEncodeError) in try pdu.encode(into: p) }
            var appended: [UInt8] = [0xFF]
            pdu.encode(appendingTo: &appended)
            XCTAssertEqual(Array(buffer[..<n]), pdu.bytes)
            XCTAssertEqual(Array(appended.dropFirst()), pdu.bytes)
            // Exactly `encodedLength` bytes are enough for the validated path the engine sends with.
            var exact = [UInt8](repeating: 0, count: pdu.encodedLength)
            let m = exact.withUnsafeMutableBytes { pdu.encode(validatedInto: $0) }
            XCTAssertEqual(m, n)
            XCTAssertEqual(exact, pdu.bytes)
        }
    }

    /// `encoded` (the one heap object a request waits in) makes the bytes `bytes` makes, for every kind of PDU.
    func testEncodedMakesTheBytesOfEveryPDU() {
        var gen = ATTPDUGenerator(seed: 7)
        for _ in 0..<500 {
            let pdu = gen.make()
            let encoded = pdu.encoded
            XCTAssertEqual(encoded.bytes, pdu.bytes)
            XCTAssertEqual(encoded.count, pdu.encodedLength)
        }
        let long = [UInt8](repeating: 0xAB, count: 300)
        XCTAssertEqual(ATTPDU.writeRequest(handle: 0x15, value: long[...]).encoded.bytes, [0x12, 0x15, 0x00] + long)
    }

    func testBufferTooSmall() {
        let pdu = ATTPDU.writeRequest(handle: 7, value: [1, 2, 3])
        var buffer = [UInt8](repeating: 0, count: 5)
        XCTAssertThrowsError(try buffer.withUnsafeMutableBytes { p throws(ATTEncodeError) in try pdu.encode(into: p) }) { error in
            XCTAssertEqual(error as? ATTEncodeError, .bufferTooSmall(opcode: .writeRequest, needed: 6, available: 5))
            XCTAssertEqual((error as? ATTEncodeError)?.description, "Write Request: buffer too small: needs 6 bytes, has 5")
        }
        XCTAssertEqual(buffer, [0, 0, 0, 0, 0], "nothing written on failure")
    }

    func testEncodeValidation() {
        func check(_ pdu: ATTPDU, _ expected: ATTEncodeError, line: UInt = #line) {
            XCTAssertThrowsError(try pdu.validate(), line: line) { XCTAssertEqual($0 as? ATTEncodeError, expected, line: line) }
            var buffer = [UInt8](repeating: 0, count: 64)
            XCTAssertThrowsError(try buffer.withUnsafeMutableBytes { p throws(ATTEncodeError) in try pdu.encode(into: p) }, line: line) {
                XCTAssertEqual($0 as? ATTEncodeError, expected, line: line)
            }
        }
        check(.signedWriteCommand(handle: 1, value: [1], signature: [1, 2, 3]),
              .invalidField(opcode: .signedWriteCommand, field: .authenticationSignature, problem: .wrongLength(expected: 12, actual: 3)))
        check(.writeRequest(handle: 0, value: [1]), .invalidField(opcode: .writeRequest, field: .attributeHandle, problem: .zeroHandle))
        check(.handleValueNotification(handle: 0, value: []),
              .invalidField(opcode: .handleValueNotification, field: .attributeHandle, problem: .zeroHandle))
        check(.readByTypeRequest(range: ATTHandleRange(start: 0, end: 9), type: .characteristic),
              .invalidField(opcode: .readByTypeRequest, field: .startingHandle, problem: .zeroHandle))
        check(.executeWriteRequest(flags: ATTExecuteWriteFlags(rawValue: 7)),
              .invalidField(opcode: .executeWriteRequest, field: .flags, problem: .invalidFlags(7)))
        XCTAssertEqual(ATTEncodeError.invalidField(opcode: .writeRequest, field: .attributeHandle, problem: .zeroHandle).description,
                       "Write Request: handle: zero handle (the spec forbids handle 0x0000)")
    }

    func testListInitialisersValidate() {
        func check(_ body: () throws -> Void, _ expected: ATTEncodeError, line: UInt = #line) {
            XCTAssertThrowsError(try body(), line: line) { XCTAssertEqual($0 as? ATTEncodeError, expected, line: line) }
        }
        check({ _ = try ATTFindInformationList([]) },
              .invalidField(opcode: .findInformationResponse, field: .informationData, problem: .emptyList))
        check({ _ = try ATTFindInformationList([(handle: 0, type: .deviceName)]) },
              .invalidField(opcode: .findInformationResponse, field: .informationData, problem: .zeroHandle))
        check({ _ = try ATTHandlesInformationList([(found: 1, groupEnd: 0)]) },
              .invalidField(opcode: .findByTypeValueResponse, field: .handlesInformationList, problem: .zeroHandle))
        check({ _ = try ATTAttributeDataList([(handle: 1, value: [1, 2]), (handle: 2, value: [1])]) },
              .invalidField(opcode: .readByTypeResponse, field: .attributeDataList, problem: .mixedValueLengths(first: 2, other: 1)))
        check({ _ = try ATTAttributeDataList([(handle: 1, value: [UInt8](repeating: 0, count: 254))]) },
              .invalidField(opcode: .readByTypeResponse, field: .attributeDataList, problem: .tooLong(actual: 254, maximum: 253)))
        check({ _ = try ATTGroupAttributeDataList([(handle: 1, endGroup: 2, value: [UInt8](repeating: 0, count: 252))]) },
              .invalidField(opcode: .readByGroupTypeResponse, field: .attributeDataList, problem: .tooLong(actual: 252, maximum: 251)))
        check({ _ = try ATTGroupAttributeDataList([(handle: 1, endGroup: 2, value: [1]), (handle: 3, endGroup: 4, value: [])]) },
              .invalidField(opcode: .readByGroupTypeResponse, field: .attributeDataList, problem: .mixedValueLengths(first: 1, other: 0)))
        check({ _ = try ATTHandleList([5]) }, .invalidField(opcode: nil, field: .setOfHandles, problem: .tooFewElements(count: 1, minimum: 2)))
        check({ _ = try ATTHandleList([5, 0]) }, .invalidField(opcode: nil, field: .setOfHandles, problem: .zeroHandle))
        check({ _ = try ATTLengthValueList([[UInt8]]()) },
              .invalidField(opcode: .readMultipleVariableResponse, field: .lengthValueTupleList, problem: .emptyList))
        check({ _ = try ATTHandleLengthValueList([(handle: 1, value: [1])]) },
              .invalidField(opcode: .multipleHandleValueNotification, field: .handleLengthValueTupleList,
                            problem: .tooFewElements(count: 1, minimum: 2)))
        check({ _ = try ATTHandleLengthValueList([(handle: 1, value: [1]), (handle: 0, value: [])]) },
              .invalidField(opcode: .multipleHandleValueNotification, field: .handleLengthValueTupleList, problem: .zeroHandle))
        // The largest values that fit the Length byte are accepted.
        XCTAssertNoThrow(try ATTAttributeDataList([(handle: 1, value: [UInt8](repeating: 0, count: 253))]))
        XCTAssertNoThrow(try ATTGroupAttributeDataList([(handle: 1, endGroup: 1, value: [UInt8](repeating: 0, count: 251))]))
        // A mix of 16-bit and 128-bit types uses format 0x02 for all.
        let mixed = try? ATTFindInformationList([(handle: 1, type: .deviceName),
                                                 (handle: 2, type: BluetoothUUID(string: "6e400001-b5a3-f393-e0a9-e50e24dcca9e")!)])
        XCTAssertEqual(mixed?.format, 0x02)
        XCTAssertEqual(mixed?[0].type, .deviceName)
        XCTAssertEqual(mixed?.bytes.count, 36)
    }
}
