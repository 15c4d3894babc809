import TestSupport
import XCTest
@testable import ATTStack

final class ATTMTUTests: XCTestCase {
    func testLimits() {
        XCTAssertEqual(ATTMTU.minimumLE, 23)
        XCTAssertEqual(ATTMTU.maximum, 517)
        XCTAssertEqual(ATTMTU.maximumAttributeValue, 512)
        XCTAssertEqual(ATTMTU.maximum - 5, ATTMTU.maximumAttributeValue, "517 is the MTU whose Prepare Write part holds 512 bytes")
    }

    func testBudgets() {
        XCTAssertEqual(ATTMTU.writeValueBudget(23), 20)
        XCTAssertEqual(ATTMTU.prepareWritePartBudget(23), 18)
        XCTAssertEqual(ATTMTU.readBlobPartBudget(23), 22)
        XCTAssertEqual(ATTMTU.writeValueBudget(247), 244)
        XCTAssertEqual(ATTMTU.writeValueBudget(517), 514)
        // What one Write Request or Command may carry: MTU-3, never past the 512-byte attribute maximum.
        XCTAssertEqual(ATTMTU.writeValueLimit(23), 20)
        XCTAssertEqual(ATTMTU.writeValueLimit(515), 512)
        XCTAssertEqual(ATTMTU.writeValueLimit(517), 512)
        XCTAssertEqual(ATTMTU.prepareWritePartBudget(517), 512)
        XCTAssertEqual(ATTMTU.readBlobPartBudget(UInt16(185)), 184)
        // Each part is also at most an attribute's 512 bytes (§3.2.9): what `mirror mtu` prints.
        XCTAssertEqual(ATTMTU.readPartLimit(517), 512)
        XCTAssertEqual(ATTMTU.readPartLimit(185), 184)
        XCTAssertEqual(ATTMTU.prepareWritePartLimit(517), 512)
        XCTAssertEqual(ATTMTU.prepareWritePartLimit(64), 59)
        // Below the LE minimum counts as 23.
        XCTAssertEqual(ATTMTU.writeValueBudget(0), 20)
        XCTAssertEqual(ATTMTU.writeValueBudget(UInt16(10)), 20)
        // The budget is what fits: a notification of exactly MTU bytes.
        let pdu = ATTPDU.handleValueNotification(handle: 1, value: ArraySlice(repeating: 0, count: ATTMTU.writeValueBudget(23)))
        XCTAssertEqual(pdu.encodedLength, 23)
        let part = ATTPDU.prepareWriteRequest(handle: 1, offset: 0, value: ArraySlice(repeating: 0, count: ATTMTU.prepareWritePartBudget(64)))
        XCTAssertEqual(part.encodedLength, 64)
        let blob = ATTPDU.readBlobResponse(value: ArraySlice(repeating: 0, count: ATTMTU.readBlobPartBudget(100)))
        XCTAssertEqual(blob.encodedLength, 100)
    }

    /// A Read By Type pair is opcode, length and handle short of the MTU, and its one-octet length caps it at
    /// 253 value bytes (Part F §3.4.4.2).
    func testReadByTypeValueBudget() {
        XCTAssertEqual(ATTMTU.readByTypeValueBudget(23), 19)
        XCTAssertEqual(ATTMTU.readByTypeValueBudget(10), 19, "an LE ATT_MTU is never below 23")
        XCTAssertEqual(ATTMTU.readByTypeValueBudget(UInt16(247)), 243)
        XCTAssertEqual(ATTMTU.readByTypeValueBudget(257), 253)
        XCTAssertEqual(ATTMTU.readByTypeValueBudget(517), 253)
    }

    /// A Read By Group Type entry is opcode, length, handle and end group handle short of the MTU, and its
    /// one-octet length caps it at 251 value bytes (Part F §3.4.4.10).
    func testReadByGroupTypeValueBudget() {
        XCTAssertEqual(ATTMTU.readByGroupTypeValueBudget(23), 17)
        XCTAssertEqual(ATTMTU.readByGroupTypeValueBudget(0), 17, "an LE ATT_MTU is never below 23")
        XCTAssertEqual(ATTMTU.readByGroupTypeValueBudget(UInt16(247)), 241)
        XCTAssertEqual(ATTMTU.readByGroupTypeValueBudget(257), 251)
        XCTAssertEqual(ATTMTU.readByGroupTypeValueBudget(517), 251)
    }

    func testNegotiated() {
        XCTAssertEqual(ATTMTU.negotiated(clientRxMTU: 517, serverRxMTU: 247), 247)
        XCTAssertEqual(ATTMTU.negotiated(clientRxMTU: UInt16(185), serverRxMTU: UInt16(517)), 185)
        XCTAssertEqual(ATTMTU.negotiated(clientRxMTU: 517, serverRxMTU: 10), 23)
        XCTAssertEqual(ATTMTU.negotiated(clientRxMTU: 23, serverRxMTU: 23), 23)
        XCTAssertEqual(ATTMTU.negotiated(clientRxMTU: UInt16.max, serverRxMTU: UInt16.max), 65535)
    }
}
