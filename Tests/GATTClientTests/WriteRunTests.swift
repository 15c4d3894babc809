// write(handle:contentsOf:) and writeWithoutResponse(handle:contentsOf:) (issue 38, point 4): the values in order, one
// request at a time on the wire (Part F §3.3.2), and an error that says how many went through before it.
import ATTStack
import TestSupport
import XCTest
@testable import GATTClient

final class WriteRunTests: XCTestCase {
    func testWriteRequestsOfARunGoInOrderEachAfterTheAnswerToTheLast() async throws {
        let peer = ScriptedPeer(raw("12 12 00 01", "13") + raw("12 12 00 02 02", "13") + raw("12 12 00 03", "13"))
        let client = try await makeClient(peer)
        try await client.write(handle: 0x12, contentsOf: [[1], [2, 2], [3]])
        peer.assertScriptDone()
    }

    func testARunOfWriteRequestsStopsAtTheFirstErrorAndSaysHowManyWereConfirmed() async throws {
        // The second value is refused: the third is never sent (the script has no step for it).
        let peer = ScriptedPeer(raw("12 12 00 01", "13") + raw("12 12 00 02", "01 12 12 00 03"))
        let client = try await makeClient(peer)
        do { try await client.write(handle: 0x12, contentsOf: [[1], [2], [3]]); XCTFail("the run did not fail") } catch {
            XCTAssertEqual(error.completed, 1)
            XCTAssertEqual(error.total, 3)
            XCTAssertEqual(error.mode, .request)
            XCTAssertEqual(error.error.attributeError?.code, .writeNotPermitted)
            XCTAssertEqual(error.error.attributeError?.rejectedBy, .peer)
            XCTAssertTrue(error.description.hasSuffix(
                "(value 2 of 3: 1 Write Request confirmed by a Write Response before it, 1 not sent)"), error.description)
        }
        XCTAssertEqual(peer.sent.count, 2, "a value after the refused one was sent")
        peer.assertScriptDone()
    }

    func testAnEmptyRunSendsNothing() async throws {
        let peer = ScriptedPeer([])
        let client = try await makeClient(peer)
        try await client.write(handle: 0x12, contentsOf: [])
        try await client.writeWithoutResponse(handle: 0x12, contentsOf: [])
        XCTAssertEqual(peer.sent.count, 0)
        peer.assertScriptDone()
    }

    func testWriteCommandsOfARunAreSentInOrder() async throws {
        let peer = ScriptedPeer([.client(hex("52 12 00 01")), .client(hex("52 12 00 02 02")), .client(hex("52 12 00 03"))])
        let client = try await makeClient(peer)
        try await client.writeWithoutResponse(handle: 0x12, contentsOf: [[1], [2, 2], [3]])
        peer.assertScriptDone()
    }

    func testARunOfWriteCommandsStopsAtAValueOverTheBudgetAndSaysHowManyWereSent() async throws {
        // MTU 23: a Write Command carries at most 20 bytes; the second value is refused locally, the third not sent.
        let peer = ScriptedPeer([.client(hex("52 12 00 01"))])
        let client = try await makeClient(peer)
        do {
            try await client.writeWithoutResponse(handle: 0x12, contentsOf: [[1], [UInt8](repeating: 0, count: 21), [3]])
            XCTFail("the run did not fail")
        } catch {
            XCTAssertEqual(error.completed, 1)
            XCTAssertEqual(error.total, 3)
            XCTAssertEqual(error.mode, .command)
            XCTAssertEqual(error.error.attributeError?.rejectedBy, .local)
            XCTAssertEqual(error.error.attributeError?.requestOpcode, .writeCommand)
            XCTAssertTrue(error.description.hasSuffix("(value 2 of 3: 1 Write Command sent before it, 1 not sent)"),
                          error.description)
        }
        XCTAssertEqual(peer.sent.count, 1)
        peer.assertScriptDone()
    }
}
