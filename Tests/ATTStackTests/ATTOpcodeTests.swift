import TestSupport
import XCTest
@testable import ATTStack

final class ATTOpcodeTests: XCTestCase {
    func testValuesAndNames() {
        XCTAssertEqual(ATTOpcode.writeRequest.rawValue, 0x12)
        XCTAssertEqual(ATTOpcode.writeRequest.name, "Write Request")
        XCTAssertEqual(ATTOpcode.writeCommand.rawValue, 0x52)
        XCTAssertEqual(ATTOpcode.signedWriteCommand.rawValue, 0xD2)
        XCTAssertEqual(ATTOpcode.readMultipleVariableRequest.name, "Read Multiple Variable Length Request")
        XCTAssertEqual(ATTOpcode.multipleHandleValueNotification.rawValue, 0x23)
        XCTAssertEqual(ATTOpcode.handleValueConfirmation.description, "0x1E Handle Value Confirmation")
        XCTAssertEqual(ATTOpcode(0x3F).name, "Unknown Opcode")
        XCTAssertFalse(ATTOpcode(0x3F).isDefined)
        XCTAssertEqual(ATTOpcode.allDefined.count, 31)
        XCTAssertEqual(Set(ATTOpcode.allDefined).count, 31)
        for op in ATTOpcode.allDefined { XCTAssertTrue(op.isDefined, op.description) }
    }

    func testCommandAndSignatureBits() {
        XCTAssertTrue(ATTOpcode.writeCommand.isCommand)
        XCTAssertFalse(ATTOpcode.writeCommand.hasSignature)
        XCTAssertTrue(ATTOpcode.signedWriteCommand.isCommand)
        XCTAssertTrue(ATTOpcode.signedWriteCommand.hasSignature)
        XCTAssertEqual(ATTOpcode.signedWriteCommand.method, ATTOpcode.writeRequest.method)
        XCTAssertEqual(ATTOpcode.writeCommand.method, 0x12)
        for op in ATTOpcode.allDefined where op != .writeCommand && op != .signedWriteCommand {
            XCTAssertFalse(op.isCommand, op.description)
            XCTAssertFalse(op.hasSignature, op.description)
        }
    }

    func testKinds() {
        XCTAssertEqual(ATTOpcode.errorResponse.kind, .response)
        XCTAssertEqual(ATTOpcode.readRequest.kind, .request)
        XCTAssertEqual(ATTOpcode.readResponse.kind, .response)
        XCTAssertEqual(ATTOpcode.writeCommand.kind, .command)
        XCTAssertEqual(ATTOpcode.signedWriteCommand.kind, .command)
        XCTAssertEqual(ATTOpcode.handleValueNotification.kind, .notification)
        XCTAssertEqual(ATTOpcode.multipleHandleValueNotification.kind, .notification)
        XCTAssertEqual(ATTOpcode.handleValueIndication.kind, .indication)
        XCTAssertEqual(ATTOpcode.handleValueConfirmation.kind, .confirmation)
        XCTAssertEqual(ATTOpcode(0x7F).kind, .unknown)
        let requests = ATTOpcode.allDefined.filter { $0.kind == .request }
        XCTAssertEqual(requests.count, 12)
    }

    func testRequestResponsePairs() {
        let pairs: [(ATTOpcode, ATTOpcode)] = [
            (.exchangeMTURequest, .exchangeMTUResponse), (.findInformationRequest, .findInformationResponse),
            (.findByTypeValueRequest, .findByTypeValueResponse), (.readByTypeRequest, .readByTypeResponse),
            (.readRequest, .readResponse), (.readBlobRequest, .readBlobResponse),
            (.readMultipleRequest, .readMultipleResponse), (.readByGroupTypeRequest, .readByGroupTypeResponse),
            (.writeRequest, .writeResponse), (.prepareWriteRequest, .prepareWriteResponse),
            (.executeWriteRequest, .executeWriteResponse), (.readMultipleVariableRequest, .readMultipleVariableResponse),
            (.handleValueIndication, .handleValueConfirmation),
        ]
        for (request, response) in pairs {
            XCTAssertEqual(request.responseOpcode, response, request.description)
            XCTAssertEqual(response.requestOpcode, request, response.description)
            XCTAssertTrue(request.isAnswered(by: response))
            // Every request's response is the request's opcode + 1.
            XCTAssertEqual(response.rawValue, request.rawValue + 1)
        }
        // Every request has a response.
        for op in ATTOpcode.allDefined where op.kind == .request { XCTAssertNotNil(op.responseOpcode, op.description) }
        XCTAssertTrue(ATTOpcode.writeRequest.isAnswered(by: .errorResponse))
        XCTAssertFalse(ATTOpcode.writeRequest.isAnswered(by: .readResponse))
        XCTAssertFalse(ATTOpcode.handleValueIndication.isAnswered(by: .errorResponse))
        XCTAssertFalse(ATTOpcode.writeCommand.isAnswered(by: .writeResponse))
        XCTAssertFalse(ATTOpcode.writeCommand.isAnswered(by: .errorResponse))
        XCTAssertNil(ATTOpcode.writeCommand.responseOpcode)
        XCTAssertNil(ATTOpcode.handleValueNotification.responseOpcode)
        XCTAssertNil(ATTOpcode.errorResponse.requestOpcode)
        XCTAssertNil(ATTOpcode.readRequest.requestOpcode)
    }

    /// The values agree with BlueZ's src/shared/att-types.h (BT_ATT_OP_*, BT_ATT_ERROR_*, limits).
    func testAgreesWithBlueZAttTypes() {
        let bluez: [(UInt8, ATTOpcode)] = [
            (0x01, .errorResponse), (0x02, .exchangeMTURequest), (0x03, .exchangeMTUResponse),
            (0x04, .findInformationRequest), (0x05, .findInformationResponse), (0x06, .findByTypeValueRequest),
            (0x07, .findByTypeValueResponse), (0x08, .readByTypeRequest), (0x09, .readByTypeResponse),
            (0x0a, .readRequest), (0x0b, .readResponse), (0x0c, .readBlobRequest), (0x0d, .readBlobResponse),
            (0x0e, .readMultipleRequest), (0x0f, .readMultipleResponse), (0x10, .readByGroupTypeRequest),
            (0x11, .readByGroupTypeResponse), (0x12, .writeRequest), (0x13, .writeResponse), (0x52, .writeCommand),
            (0xD2, .signedWriteCommand), (0x16, .prepareWriteRequest), (0x17, .prepareWriteResponse),
            (0x18, .executeWriteRequest), (0x19, .executeWriteResponse), (0x1B, .handleValueNotification),
            (0x1D, .handleValueIndication), (0x1E, .handleValueConfirmation), (0x20, .readMultipleVariableRequest),
            (0x21, .readMultipleVariableResponse), (0x23, .multipleHandleValueNotification),
        ]
        XCTAssertEqual(bluez.count, ATTOpcode.allDefined.count)
        for (raw, op) in bluez { XCTAssertEqual(op.rawValue, raw, op.name) }
        XCTAssertEqual(ATTErrorCode.encryptionKeySizeTooShort.rawValue, 0x0C)
        XCTAssertEqual(ATTErrorCode.databaseOutOfSync.rawValue, 0x12)
        XCTAssertEqual(ATTErrorCode.valueNotAllowed.rawValue, 0x13)
        XCTAssertEqual(ATTErrorCode.cccdImproperlyConfigured.rawValue, 0xFD)
        XCTAssertEqual(ATTErrorCode.procedureAlreadyInProgress.rawValue, 0xFE)
        XCTAssertEqual(ATTErrorCode.outOfRange.rawValue, 0xFF)
        XCTAssertEqual(ATTMTU.minimumLE, 23)  // BT_ATT_DEFAULT_LE_MTU
        XCTAssertEqual(ATTMTU.maximum, 517)   // BT_ATT_MAX_LE_MTU
        XCTAssertEqual(ATTMTU.maximumAttributeValue, 512)  // BT_ATT_MAX_VALUE_LEN
    }
}
