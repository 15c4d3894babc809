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
}
