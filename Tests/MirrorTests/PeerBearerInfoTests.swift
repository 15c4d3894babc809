// GATTPeer's list of a peer's ATT bearers (`Peer.bearerInfo`, what `mirror mtu` and `mirror link` print with
// --bearers) in-process against the simulator serving Enhanced ATT over unix: (PATH.eatt); a unix: peer's link.
import GATTPeer
import Mirror
import MirrorSimulator
import XCTest

final class PeerBearerInfoTests: XCTestCase {
    func testCID4FirstThenEachEnhancedBearerWithItsChannelIDs() async throws {
        let h = try SimHarness { $0.eatt = true }
        defer { h.stop() }
        var o = Peer.Options()
        o.transactionTimeout = .seconds(5)
        o.enhancedBearers = 3
        let peer = try await Peer.connect(to: .unix(path: h.path), options: o)
        defer { peer.close() }
        let rows = peer.bearerInfo()
        XCTAssertEqual(rows.map(\.index), [0, 1, 2])
        XCTAssertEqual(rows.map(\.enhanced), [false, true, true])
        XCTAssertEqual(rows.map(\.open), [true, true, true])
        XCTAssertEqual(rows.map { $0.cids?.local }, [0x0004, 0x0041, 0x0042])
        XCTAssertEqual(rows.map { $0.cids?.remote }, [0x0004, 0x0041, 0x0042])
        XCTAssertEqual(rows[0].mtu, 517)
        XCTAssertEqual(rows[0].credits, .unknown(.unavailable("none: the ATT fixed channel has no credit-based flow control")))
        XCTAssertEqual(rows[1].credits, .unknown(.unavailable("not reported: no socket option gives an ECRED channel's credits")))
        XCTAssertEqual(peer.enhancedBearerOutcome?.requested, 3)
    }

    func testOneBearerIsCID4Alone() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: Peer.Options())
        defer { peer.close() }
        let rows = peer.bearerInfo()
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows.first?.enhanced, false)
        XCTAssertNil(peer.enhancedBearerOutcome)
    }

    /// A unix: peer's link (`Peer.linkState`): every value unknown, saying there is no radio.
    func testAUnixPeersLinkIsUnknownWithWhy() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let peer = try await Peer.connect(to: .unix(path: h.path), options: Peer.Options())
        defer { peer.close() }
        let s = peer.linkState()
        XCTAssertNil(s.handle.value)
        XCTAssertNil(s.txPHY.value)
        XCTAssertTrue(s.intervalMilliseconds.unknownReason?.description.hasPrefix("not an LE link") == true, "\(s.intervalMilliseconds)")
    }
}
