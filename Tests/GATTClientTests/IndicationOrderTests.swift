// An indication's confirmation goes out before its value reaches a consumer (Core Spec 5.4 Vol 3 Part F §3.4.7.2):
// whatever the consumer sends in answer follows the confirmation (Service Changed, Part G §2.5.2.1: the confirmation
// makes a robust-caching client change-aware, and a request before it gets Database Out Of Sync).
import XCTest
import TestSupport
@testable import GATTClient

final class IndicationOrderTests: XCTestCase {
    func testTheConfirmationIsSentBeforeTheConsumerSeesTheIndication() async throws {
        let peer = ScriptedPeer(unscripted: "indicating")
        let client = try await makeClient(peer)
        defer { client.close(reason: "test over") }
        var stream = client.notifications.makeAsyncIterator()
        for round in 0..<200 {
            // Handle Value Indication of 0x0008 (Service Changed's value: 0x000E-0xFFFF).
            peer.inject(hex("1d 08 00 0e 00 ff ff"))
            let got = try await stream.next()
            XCTAssertEqual(got?.handle, 0x0008)
            // Seen by the consumer: the confirmation (0x1E) is already among the PDUs the client sent.
            XCTAssertEqual(peer.sent.filter { $0 == [0x1E] }.count, round + 1, "round \(round)")
        }
    }
}
