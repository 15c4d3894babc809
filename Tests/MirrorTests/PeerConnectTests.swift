// GATTPeer's connect recipe in-process over unix: (LinkSetup, PeerBearers): the progress events in order, the
// privilege hook's moments, the trace, the capture, the link options a unix: link cannot take, no Exchange MTU when
// the caller sends its own, the Enhanced ATT bearers (Vol 3 Part F §3.2.11). The CLI's subprocess tests pin its words.
import Foundation
import GATTPeer
import LinkCore
import Mirror
import MirrorSimulator
import XCTest

final class PeerConnectTests: XCTestCase {
    /// What a connect told its callbacks.
    final class Told: Sendable {
        let events = Lock<[PeerProgress]>([])
        let drops = Lock<[String]>([])
        let trace = Lock<[String]>([])
    }

    func options(_ told: Told) -> Peer.Options {
        var o = Peer.Options()
        o.names = CharacteristicNames(MirrorProfile.bundled.characteristics)
        o.transactionTimeout = .seconds(5)
        o.progress = { e in told.events.withLock { $0.append(e) } }
        o.dropPrivileges = { why in told.drops.withLock { $0.append(why) } }
        o.trace = { line in told.trace.withLock { $0.append(line) } }
        return o
    }

    /// The steps' events in order (the link options' outcome, then the bearers'), the privileges dropped at the
    /// connect and after it, every PDU traced (bearers named), and the btsnoop file opened and closed with the peer.
    func testTheConnectTellsItsStepsTracesCapturesAndOpensEnhancedBearers() async throws {
        let h = try SimHarness { $0.eatt = true }
        defer { h.stop() }
        let told = Told()
        var o = options(told)
        o.tracing = true
        o.enhancedBearers = 3
        let file = NSTemporaryDirectory() + "peer-\(UInt32.random(in: 0...UInt32.max)).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: file) }
        o.capture = .file(file)
        let peer = try await Peer.connect(to: .unix(path: h.path), options: o)
        XCTAssertEqual(peer.mtu, 517)
        XCTAssertNil(peer.link, "a unix: socket has no radio link")
        XCTAssertNil(peer.pairing)
        XCTAssertEqual(told.drops.withLock { $0 }, ["at the connect (a unix: target needs none)", "after the connect"])
        let events = told.events.withLock { $0 }
        XCTAssertEqual(events.count, 2, "\(events)")
        guard case .linkRequests(let requests)? = events.first, case .bearers(let outcome)? = events.last else {
            return XCTFail("\(events)")
        }
        XCTAssertEqual(requests.count, 0, "none asked")
        XCTAssertEqual(outcome.requested, 3)
        XCTAssertEqual(outcome.opened.count, 2, "\(outcome.problems)")
        XCTAssertEqual(peer.enhancedLinks.map(\.index), outcome.opened)
        XCTAssertEqual(peer.enhancedBearerOutcome, outcome)
        XCTAssertEqual(peer.client.bearers.count, 3)
        let trace = told.trace.withLock { $0 }
        XCTAssertTrue(trace.contains { $0.contains("Exchange MTU Request") }, "\(trace)")
        XCTAssertTrue(trace.contains { $0.contains("[") && $0.contains("Read By Type Request") || $0.contains("Write Request") }, "\(trace)")
        XCTAssertTrue(peer.snoop?.path == file)
        peer.setTracing(false)
        let before = told.trace.withLock { $0.count }
        _ = try await peer.read(.uuid(.bit16(0x2A00)))
        XCTAssertEqual(told.trace.withLock { $0.count }, before, "trace off: no line")
        peer.close()
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: file)[.size] as? Int)
        XCTAssertGreaterThan(size, 16, "the btsnoop header and the PDUs")
    }

    /// Link options over unix: are not asked, each saying why; a caller that sends its own Exchange MTU gets none
    /// sent (ATT_MTU stays 23, Part F §3.2.8) and no Enhanced ATT bearer.
    func testUnixLinksTakeNoLinkOptionsAndTheCallersOwnExchangeMTUIsLeftToIt() async throws {
        let h = try SimHarness { $0.eatt = true }
        defer { h.stop() }
        let told = Told()
        var o = options(told)
        o.linkRequests.interval = 15...30
        o.linkRequests.phy = .le2M
        o.exchangesMTU = false
        o.enhancedBearers = 2
        let peer = try await Peer.connect(to: .unix(path: h.path), options: o)
        defer { peer.close() }
        XCTAssertEqual(peer.mtu, 23)
        XCTAssertNil(peer.enhancedBearerOutcome)
        XCTAssertEqual(peer.linkRequests.map(\.asked), ["--interval 15-30", "--phy 2m"])
        XCTAssertEqual(peer.linkRequests.map(\.result), [.notAsked, .notAsked])
        XCTAssertEqual(peer.linkRequests.first?.text, "--interval 15-30: not asked: unix:\(h.path) is a unix socket, with no radio link")
        let events = told.events.withLock { $0 }
        XCTAssertEqual(events.count, 1, "\(events)")
        if case .linkRequests(let r)? = events.first { XCTAssertEqual(r.map(\.asked), peer.linkRequests.map(\.asked)) } else { XCTFail("\(events)") }
    }

    /// A writer of the caller's: captured into from the connect, switched off and on, never closed by the peer.
    func testACallersCaptureWriterIsUsedAndLeftOpen() async throws {
        let h = try SimHarness()
        defer { h.stop() }
        let file = NSTemporaryDirectory() + "peer-\(UInt32.random(in: 0...UInt32.max)).btsnoop"
        defer { try? FileManager.default.removeItem(atPath: file) }
        let writer = try BTSnoopWriter(path: file)
        defer { writer.close() }
        var o = options(Told())
        o.capture = .writer(writer)
        o.pairing = Pairing.AgentSetup(io: .noInputNoOutput, prompts: PairingPrompts(confirm: { _, _ in false }, passkey: { _ in nil }, display: { _, _ in }),
                                       say: { line in XCTFail("no agent over unix: \(line)") })
        let peer = try await Peer.connect(to: .unix(path: h.path), options: o)
        XCTAssertNil(peer.pairing, "no agent for a unix: target")
        XCTAssertTrue(peer.snoop === writer)
        peer.stopCapture()
        XCTAssertNil(peer.snoop)
        peer.startCapture(writer)
        XCTAssertTrue(peer.snoop === writer)
        peer.close()
        XCTAssertTrue(peer.snoop === writer, "the caller's writer outlives the connection")
    }

    /// The words of a drop's Disconnection Complete reason (Vol 1 Part F §1.3), and the HCI records' lines
    /// following the sink's switch.
    func testTheDropsReasonIsNamedAndTheRecordsFollowTheirSwitch() {
        XCTAssertEqual(PeerLink.describeDrop(0x13), "the peer disconnected: 0x13 Remote User Terminated Connection")
        XCTAssertEqual(PeerLink.describeDrop(0x16), "this host disconnected: 0x16 Connection Terminated By Local Host")
        XCTAssertEqual(PeerLink.describeDrop(0x08), "the link was lost: 0x08 Connection Timeout")
        XCTAssertTrue(PeerLink.describeDrop(0x05).hasPrefix("the link ended: 0x05 "))
        let lines = Lock<[String]>([])
        let sink = LinkRecordSink(tracing: false) { line in lines.withLock { $0.append(line) } }
        let record = HCILinkRecord(kind: .event(.disconnectionComplete(status: 0, handle: 0x0040, reason: 0x13)),
                                   packet: [0x04, 0x05, 0x04, 0x00, 0x40, 0x00, 0x13], timestampMicroseconds: 1_700_000_000_000_000)
        sink.take(record)
        sink.setTracing(true)
        sink.take(record)
        sink.setTracing(false)
        sink.take(record)
        XCTAssertEqual(lines.withLock { $0.count }, 1)
        XCTAssertTrue(lines.withLock { $0.first?.contains("HCI < ") ?? false }, "\(lines.withLock { $0 })")
    }

    /// The link options' one cross-field rule (Vol 6 Part B §4.5.2): the supervision timeout must exceed
    /// (1 + latency) x interval max x 2; checked only when both the timeout and the interval are asked.
    func testTheSupervisionTimeoutMustExceedTwiceTheLatencyTimesTheIntervalMax() {
        var o = LinkRequestOptions()
        o.supervisionTimeoutMilliseconds = 100
        XCTAssertNil(o.inconsistency, "no interval asked")
        o.interval = 7.5...30
        o.latency = 1
        XCTAssertEqual(o.inconsistency, "--supervision-timeout: 100 ms must be larger than (1 + latency 1) x interval max 30 ms x 2 = 120 ms (Core Spec Vol 6 Part B §4.5.2)")
        o.supervisionTimeoutMilliseconds = 130
        XCTAssertNil(o.inconsistency)
        o.interval = 7.5...7.5
        o.latency = nil
        o.supervisionTimeoutMilliseconds = 10
        XCTAssertEqual(o.inconsistency, "--supervision-timeout: 10 ms must be larger than (1 + latency 0) x interval max 7.5 ms x 2 = 15 ms (Core Spec Vol 6 Part B §4.5.2)")
    }
}
