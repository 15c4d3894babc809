import TestSupport
import XCTest
@testable import ATTStack

/// Byte-exact vectors for every PDU of Core Spec 5.4 Vol 3 Part F §3.4. Most come from BlueZ's
/// unit/test-gatt.c (the test name is given); the PDUs BlueZ's tests do not exchange are built from the
/// spec's field tables.
final class ATTPDUVectorTests: XCTestCase {
    func testErrorResponse() throws {
        // SERVICE_DATA_1_PDUS: Read By Group Type answered with Attribute Not Found.
        assertVector(hex("01 10 09 00 0a"), .errorResponse(requestOpcode: .readByGroupTypeRequest, handle: 0x0009,
                                                           error: .attributeNotFound))
        // /TP/GAR/CL/BI-34-C: an application error keeps its raw value.
        assertVector(hex("01 0a 03 00 80"), .errorResponse(requestOpcode: .readRequest, handle: 0x0003, error: ATTErrorCode(0x80)))
        // /TP/GAR/CL/BI-01-C: the error for handle 0x0000.
        assertVector(hex("01 0a 00 00 01"), .errorResponse(requestOpcode: .readRequest, handle: 0, error: .invalidHandle))
    }

    func testExchangeMTU() {
        // MTU_EXCHANGE_CLIENT_PDUS and SERVER_MTU_EXCHANGE_PDU.
        assertVector(hex("02 00 02"), .exchangeMTURequest(clientRxMTU: 512))
        assertVector(hex("03 00 02"), .exchangeMTUResponse(serverRxMTU: 512))
        assertVector(hex("02 17 00"), .exchangeMTURequest(clientRxMTU: 23))
    }

    func testFindInformation() throws {
        // SERVICE_DATA_1_PDUS.
        assertVector(hex("04 04 00 04 00"), .findInformationRequest(ATTHandleRange(start: 4, end: 4)))
        assertVector(hex("05 01 04 00 01 29"),
                     .findInformationResponse(try ATTFindInformationList([(handle: 4, type: .bit16(0x2901))])))
        // DESCRIPTOR_DISC_SMALL_DB: two 16-bit pairs.
        let two = try ATTFindInformationList([(handle: 4, type: .bit16(0x2902)), (handle: 5, type: .bit16(0x2901))])
        assertVector(hex("05 01 04 00 02 29 05 00 01 29"), .findInformationResponse(two))
        XCTAssertEqual(two.count, 2)
        XCTAssertEqual(two[1].handle, 5)
        XCTAssertEqual(two[0].type, .clientCharacteristicConfiguration)
        // /TP/GAD/SR/BV-06-C/large-1: the 128-bit format.
        let uuid = try XCTUnwrap(BluetoothUUID(string: "0000d5d4-0000-0000-0123-456789abcdef"))
        let long = try ATTFindInformationList([(handle: 0x76, type: uuid)])
        XCTAssertEqual(long.format, ATTFindInformationList.format128)
        assertVector(hex("05 02 76 00 ef cd ab 89 67 45 23 01 00 00 00 00 d4 d5 00 00"), .findInformationResponse(long))
        XCTAssertEqual(long[0].type, uuid)
    }

    func testFindByTypeValue() throws {
        // /TP/GAD/CL/BV-02-C-1: discover the primary service 0x1800 by UUID.
        assertVector(hex("06 01 00 ff ff 00 28 00 18"),
                     .findByTypeValueRequest(range: .all, type: 0x2800, value: slice([0x00, 0x18])))
        let list = try ATTHandlesInformationList([(found: 1, groupEnd: 7)])
        assertVector(hex("07 01 00 07 00"), .findByTypeValueResponse(list))
        XCTAssertEqual(list[0].found, 1)
        XCTAssertEqual(list[0].groupEnd, 7)
        // /TP/GAD/CL/BV-02-C-2: a 128-bit value.
        assertVector(hex("06 01 00 ff ff 00 28 fb 34 9b 5f 80 00 00 80 00 10 00 00 0d 18 00 00"),
                     .findByTypeValueRequest(range: .all, type: 0x2800,
                                             value: slice(BluetoothUUID.bit16(0x180D).bit128LittleEndian)))
    }

    func testReadByType() throws {
        // SERVICE_DATA_1_PDUS: characteristic discovery.
        assertVector(hex("08 01 00 04 00 03 28"), .readByTypeRequest(range: ATTHandleRange(start: 1, end: 4), type: .characteristic))
        let list = try ATTAttributeDataList([(handle: 2, value: hex("02 03 00 00 2a"))])
        assertVector(hex("09 07 02 00 02 03 00 00 2a"), .readByTypeResponse(list))
        XCTAssertEqual(list.valueLength, 5)
        XCTAssertEqual(Array(list[0].value), hex("02 03 00 00 2a"))
        // /TP/GAR/CL/BV-03-C-2: a 128-bit type.
        let type128 = try XCTUnwrap(BluetoothUUID(string: "00010203-0405-0607-0809-0a0b0c0d0e0f"))
        assertVector(hex("08 01 00 ff ff 0f 0e 0d 0c 0b 0a 09 08 07 06 05 04 03 02 01 00"),
                     .readByTypeRequest(range: .all, type: type128))
        assertVector(hex("09 05 0a 00 01 02 03"), .readByTypeResponse(try ATTAttributeDataList([(handle: 0x0a, value: hex("01 02 03"))])))
        // /TP/GAD/SR/BV-04-C/large-1: three characteristic declarations.
        let three = try ATTAttributeDataList([
            (handle: 0x22, value: hex("02 23 00 01 b0")),
            (handle: 0x24, value: hex("0a 25 00 02 b0")),
            (handle: 0x26, value: hex("08 27 00 02 b0")),
        ])
        assertVector(hex("09 07 22 00 02 23 00 01 b0 24 00 0a 25 00 02 b0 26 00 08 27 00 02 b0"), .readByTypeResponse(three))
        XCTAssertEqual(three.map(\.handle), [0x22, 0x24, 0x26])
        // CHARACTERISTIC_DISC_SMALL_DB: a declaration with a 128-bit characteristic UUID (21-byte elements).
        assertVector(hex("09 15 14 f0 82 15 f0 ef cd ab 89 67 45 23 01 00 00 00 00 09 b0 00 00"),
                     .readByTypeResponse(try ATTAttributeDataList([
                         (handle: 0xf014, value: hex("82 15 f0 ef cd ab 89 67 45 23 01 00 00 00 00 09 b0 00 00")),
                     ])))
        // /TP/GAR/SR/BV-03-C/small: a 1-byte value.
        assertVector(hex("09 03 15 f0 09"), .readByTypeResponse(try ATTAttributeDataList([(handle: 0xf015, value: [0x09])])))
    }

    func testReadAndReadBlob() {
        // /TP/GAR/CL/BV-01-C.
        assertVector(hex("0a 03 00"), .readRequest(handle: 3))
        assertVector(hex("0b 01 02 03"), .readResponse(value: slice([1, 2, 3])))
        // /TP/GAR/SR/BV-01-C/small: "BlueZ".
        assertVector(hex("0b 42 6c 75 65 5a"), .readResponse(value: slice(Array("BlueZ".utf8))))
        // /TP/GAR/CL/BV-07-C/512B: Read Blob at offset 511, a 1-byte part, and an empty part.
        assertVector(hex("0c 04 00 ff 01"), .readBlobRequest(handle: 4, offset: 511))
        assertVector(hex("0d ff"), .readBlobResponse(value: slice([0xff])))
        assertVector(hex("0d"), .readBlobResponse(value: []))
        assertVector(hex("0b"), .readResponse(value: []))
    }

    func testReadMultiple() throws {
        // /TP/GAR/CL/BV-05-C.
        let handles = try ATTHandleList([3, 7])
        assertVector(hex("0e 03 00 07 00"), .readMultipleRequest(handles))
        XCTAssertEqual(Array(handles), [3, 7])
        assertVector(hex("0f 01 02 03"), .readMultipleResponse(values: slice([1, 2, 3])))
    }

    func testReadByGroupType() throws {
        // SERVICE_DATA_1_PDUS: primary service discovery.
        assertVector(hex("10 01 00 ff ff 00 28"), .readByGroupTypeRequest(range: .all, type: .primaryService))
        assertVector(hex("11 06 01 00 04 00 01 18"),
                     .readByGroupTypeResponse(try ATTGroupAttributeDataList([(handle: 1, endGroup: 4, value: hex("01 18"))])))
        // PRIMARY_DISC_LARGE_DB_1: three services, then a 128-bit service.
        let three = try ATTGroupAttributeDataList([
            (handle: 0x10, endGroup: 0x13, value: hex("01 18")),
            (handle: 0x20, endGroup: 0x29, value: hex("0a a0")),
            (handle: 0x30, endGroup: 0x32, value: hex("0b a0")),
        ])
        assertVector(hex("11 06 10 00 13 00 01 18 20 00 29 00 0a a0 30 00 32 00 0b a0"), .readByGroupTypeResponse(three))
        XCTAssertEqual(three.map(\.endGroup), [0x13, 0x29, 0x32])
        let long = hex("ef cd ab 89 67 45 23 01 00 00 00 00 0c a0 00 00")
        let one = try ATTGroupAttributeDataList([(handle: 0x90, endGroup: 0x96, value: long)])
        assertVector(hex("11 14 90 00 96 00 ef cd ab 89 67 45 23 01 00 00 00 00 0c a0 00 00"), .readByGroupTypeResponse(one))
        XCTAssertEqual(BluetoothUUID(littleEndian: one[0].value), BluetoothUUID(string: "0000a00c-0000-0000-0123-456789abcdef"))
        // SECONDARY_DISC_SMALL_DB.
        assertVector(hex("10 01 00 ff ff 01 28"), .readByGroupTypeRequest(range: .all, type: .secondaryService))
    }

    func testWrites() {
        // /TP/GAW/CL/BV-03-C, /TP/GAW/CL/BV-01-C.
        assertVector(hex("12 07 00 01 02 03"), .writeRequest(handle: 7, value: slice([1, 2, 3])))
        assertVector(hex("13"), .writeResponse)
        assertVector(hex("52 07 00 01 02 03"), .writeCommand(handle: 7, value: slice([1, 2, 3])))
        // A CCCD write (/TP/GAN/CL/BV-01-C).
        assertVector(hex("12 04 00 03 00"), .writeRequest(handle: 4, value: slice([3, 0])))
        // /TP/GAW/CL/BV-02-C: a signed write, counter 0 and an 8-byte MAC.
        assertVector(hex("d2 07 00 01 02 03 00 00 00 00 31 1f 0a cd 1c 3a 5b 0a"),
                     .signedWriteCommand(handle: 7, value: slice([1, 2, 3]),
                                         signature: slice(hex("00 00 00 00 31 1f 0a cd 1c 3a 5b 0a"))))
    }

    func testQueuedWrites() {
        // /TP/GAW/SR/BV-07-C/small.
        assertVector(hex("16 03 00 00 00 01 02 03"), .prepareWriteRequest(handle: 3, offset: 0, value: slice([1, 2, 3])))
        assertVector(hex("17 03 00 00 00 01 02 03"), .prepareWriteResponse(handle: 3, offset: 0, value: slice([1, 2, 3])))
        assertVector(hex("18 00"), .executeWriteRequest(flags: .cancelAll))
        assertVector(hex("18 01"), .executeWriteRequest(flags: .writeAll))
        assertVector(hex("19"), .executeWriteResponse)
        assertVector(hex("16 07 00 12 00 ff"), .prepareWriteRequest(handle: 7, offset: 18, value: slice([0xff])))
    }

    func testServerInitiated() {
        // /TP/GAN/CL/BV-01-C, /TP/GAI/CL/BV-01-C.
        assertVector(hex("1b 03 00 01 02 03"), .handleValueNotification(handle: 3, value: slice([1, 2, 3])))
        assertVector(hex("1d 03 00 01 02 03"), .handleValueIndication(handle: 3, value: slice([1, 2, 3])))
        assertVector(hex("1e"), .handleValueConfirmation)
        // Service Changed indication for the whole range (Core Spec 5.4 Vol 3 Part G §7.1).
        assertVector(hex("1d 03 00 01 00 ff ff"), .handleValueIndication(handle: 3, value: slice(hex("01 00 ff ff"))))
    }

    func testReadMultipleVariableLength() throws {
        // Built from §3.4.4.11 and §3.4.4.12: handles 3 and 7; values 01 02 03 and 04 05.
        assertVector(hex("20 03 00 07 00"), .readMultipleVariableRequest(try ATTHandleList([3, 7])))
        let list = try ATTLengthValueList([hex("01 02 03"), hex("04 05")])
        assertVector(hex("21 03 00 01 02 03 02 00 04 05"), .readMultipleVariableResponse(list))
        XCTAssertEqual(list.map { Array($0) }, [hex("01 02 03"), hex("04 05")])
        XCTAssertEqual(list.count, 2)
        XCTAssertFalse(list.isTruncated)
        // Cut at ATT_MTU-1 by the server: the last value is partial.
        let cut = try ATTLengthValueList([hex("01 02 03"), hex("04 05 06 07")], limit: 8)
        assertVector(hex("21 03 00 01 02 03 04 00 04"), .readMultipleVariableResponse(cut))
        XCTAssertTrue(cut.isTruncated)
        XCTAssertEqual(cut.map { Array($0) }, [hex("01 02 03"), hex("04")])
        // Cut inside the second length field.
        let cutLength = try XCTUnwrap(try? ATTPDU.decode(hex("21 03 00 01 02 03 04")))
        guard case .readMultipleVariableResponse(let l) = cutLength else { return XCTFail("\(cutLength)") }
        XCTAssertTrue(l.isTruncated)
        XCTAssertEqual(l.map { Array($0) }, [hex("01 02 03"), []])
    }

    func testMultipleHandleValueNotification() throws {
        // Built from §3.4.7.4: handle 3 = 01 02 03, handle 7 = 09, handle 9 = empty.
        let list = try ATTHandleLengthValueList([(handle: 3, value: hex("01 02 03")), (handle: 7, value: [0x09]),
                                                 (handle: 9, value: [])])
        assertVector(hex("23 03 00 03 00 01 02 03 07 00 01 00 09 09 00 00 00"), .multipleHandleValueNotification(list))
        XCTAssertEqual(list.map(\.handle), [3, 7, 9])
        XCTAssertEqual(list.map { Array($0.value) }, [hex("01 02 03"), [0x09], []])
        XCTAssertEqual(list.count, 3)
    }

    /// Values decoded from an array are slices of that array, not copies.
    func testValuesAreViewsIntoTheInput() throws {
        let input = hex("aa 1b 2a 00 10 20 30 40")
        let pdu = try ATTPDU.decode(input[1...])
        guard case .handleValueNotification(let handle, let value) = pdu else { return XCTFail("\(pdu)") }
        XCTAssertEqual(handle, 0x2a)
        XCTAssertEqual(value.startIndex, 4)
        XCTAssertEqual(value.endIndex, 8)
        input.withUnsafeBufferPointer { whole in
            value.withUnsafeBufferPointer { view in
                XCTAssertEqual(view.baseAddress, whole.baseAddress! + 4)
            }
        }
        // Equality ignores slice positions.
        XCTAssertEqual(pdu, .handleValueNotification(handle: 0x2a, value: slice(hex("10 20 30 40"))))
    }

    /// Every defined opcode has at least one vector above: this list must name them all.
    func testEveryDefinedOpcodeHasAVector() {
        let covered: Set<UInt8> = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E,
                                   0x0F, 0x10, 0x11, 0x12, 0x13, 0x16, 0x17, 0x18, 0x19, 0x1B, 0x1D, 0x1E, 0x20, 0x21,
                                   0x23, 0x52, 0xD2]
        XCTAssertEqual(Set(ATTOpcode.allDefined.map(\.rawValue)), covered)
    }

    func testDescriptions() throws {
        XCTAssertEqual(ATTPDU.writeRequest(handle: 3, value: slice([1, 0xab])).description,
                       "Write Request handle 0x0003 value [01 ab]")
        XCTAssertEqual(ATTPDU.errorResponse(requestOpcode: .readRequest, handle: 0x2a, error: .readNotPermitted).description,
                       "Error Response to 0x0A Read Request handle 0x002A: 0x02 Read Not Permitted")
        XCTAssertEqual(ATTPDU.readByGroupTypeRequest(range: .all, type: .primaryService).description,
                       "Read By Group Type Request 0x0001-0xFFFF type 2800")
    }
}

extension BluetoothUUID {
    /// The 16 little-endian bytes of the 128-bit form (test helper).
    var bit128LittleEndian: [UInt8] { BluetoothUUID.bit128(uuid128).littleEndianBytes }
}
