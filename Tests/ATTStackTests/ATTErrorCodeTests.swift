import TestSupport
import XCTest
@testable import ATTStack

final class ATTErrorCodeTests: XCTestCase {
    func testDefinedCodes() {
        let expected: [(UInt8, String)] = [
            (0x01, "Invalid Handle"), (0x02, "Read Not Permitted"), (0x03, "Write Not Permitted"), (0x04, "Invalid PDU"),
            (0x05, "Insufficient Authentication"), (0x06, "Request Not Supported"), (0x07, "Invalid Offset"),
            (0x08, "Insufficient Authorization"), (0x09, "Prepare Queue Full"), (0x0A, "Attribute Not Found"),
            (0x0B, "Attribute Not Long"), (0x0C, "Encryption Key Size Too Short"), (0x0D, "Invalid Attribute Value Length"),
            (0x0E, "Unlikely Error"), (0x0F, "Insufficient Encryption"), (0x10, "Unsupported Group Type"),
            (0x11, "Insufficient Resources"), (0x12, "Database Out Of Sync"), (0x13, "Value Not Allowed"),
            (0xFC, "Write Request Rejected"), (0xFD, "Client Characteristic Configuration Descriptor Improperly Configured"),
            (0xFE, "Procedure Already In Progress"), (0xFF, "Out Of Range"),
        ]
        for (raw, name) in expected {
            let code = ATTErrorCode(raw)
            XCTAssertEqual(code.name, name)
            XCTAssertFalse(code.meaning.isEmpty)
            XCTAssertNotEqual(code.meaning, ATTErrorCode(0x14).meaning)
        }
        XCTAssertEqual(ATTErrorCode.allNamed.map(\.rawValue), expected.map(\.0))
        XCTAssertEqual(ATTErrorCode.invalidAttributeValueLength.description, "0x0D Invalid Attribute Value Length")
        XCTAssertEqual(ATTErrorCode.insufficientEncryption.rawValue, 0x0F)
        XCTAssertEqual(ATTErrorCode.cccdImproperlyConfigured.rawValue, 0xFD)
        XCTAssertEqual(ATTErrorCode.databaseOutOfSync.category, .defined)
        XCTAssertEqual(ATTErrorCode.outOfRange.category, .commonProfile)
    }

    func testEveryByteIsRepresentable() {
        var counts: [ATTErrorCode.Category: Int] = [:]
        for raw in 0...255 {
            let code = ATTErrorCode(UInt8(raw))
            counts[code.category, default: 0] += 1
            XCTAssertFalse(code.name.isEmpty)
            XCTAssertTrue(code.description.hasPrefix("0x"))
        }
        XCTAssertEqual(counts[.defined], 19)
        XCTAssertEqual(counts[.application], 32)
        XCTAssertEqual(counts[.commonProfile], 4)
        XCTAssertEqual(counts[.reserved], 256 - 19 - 32 - 4)
    }

    func testApplicationAndReservedRanges() {
        XCTAssertEqual(ATTErrorCode(0x80).category, .application)
        XCTAssertEqual(ATTErrorCode(0x9F).category, .application)
        XCTAssertEqual(ATTErrorCode(0x80).rawValue, 0x80)
        XCTAssertEqual(ATTErrorCode(0x80).description, "0x80 Application Error")
        XCTAssertEqual(ATTErrorCode(0x9F).name, "Application Error")
        XCTAssertEqual(ATTErrorCode(0xA0).category, .reserved)
        XCTAssertEqual(ATTErrorCode(0xFB).category, .reserved)
        XCTAssertEqual(ATTErrorCode(0x14).description, "0x14 Reserved")
        XCTAssertEqual(ATTErrorCode(0x7F).category, .reserved)
        XCTAssertEqual(ATTErrorCode(0x00).category, .reserved)
        XCTAssertEqual(ATTErrorCode(0xE0).name, "Reserved")
        // An error response with an application error survives a round trip untouched.
        assertVector(hex("01 12 2a 00 9e"), .errorResponse(requestOpcode: .writeRequest, handle: 0x2a, error: ATTErrorCode(0x9E)))
    }
}
