// The watch on a socket bearer (GATTPeer's ObservedTransport, a tap the bearer calls, not a decorator): the trace's
// lines and their order, an Enhanced ATT bearer's name on them, the close watch, the diversion and the backpressure.
import Foundation
import GATTPeer
import LinkCore
import LinuxBluetooth
import XCTest

/// The trace's lines as they are given, and a wait for the n-th.
private final class Lines: @unchecked Sendable {
    // @unchecked: `lines` is guarded by `lock`; `arrived` is a semaphore.
    private let lock = Lock<[String]>([])
    private let arrived = DispatchSemaphore(value: 0)
    /// Held before a sent PDU's line is taken: the peer's answer arrives meanwhile.
    let holdSent: Bool
    init(holdSent: Bool = false) { self.holdSent = holdSent }

    var take: @Sendable (String) -> Void {
        { [self] line in
            if holdSent, line.dropFirst(16).hasPrefix(">") { usleep(150_000) }
            lock.withLock { $0.append(line) }
            arrived.signal()
        }
    }

    /// The first `count` lines without their 16-character time stamp, once given (at most 5 s each).
    func first(_ count: Int) -> [String] {
        while lock.withLock({ $0.count }) < count, arrived.wait(timeout: .now() + 5) == .success {}
        return lock.withLock { $0 }.prefix(count).map { String($0.dropFirst(16)) }
    }
}

/// A sink that keeps what it is given and signals its close.
private final class KeepingSink: ATTTransportSink, @unchecked Sendable {
    // @unchecked: `got` is guarded by its lock; `closed` is a semaphore.
    let got = Lock<[[UInt8]]>([])
    let reasons = Lock<[String]>([])
    let received = DispatchSemaphore(value: 0)
    let closed = DispatchSemaphore(value: 0)
    /// What the sink sends back on `answerOn` when a PDU arrives (a fast peer), if anything.
    var answer: (bytes: [UInt8], on: ATTBearer)?
    func transport(didReceive pdu: [UInt8]) {
        got.withLock { $0.append(pdu) }
        if let answer { _ = try? answer.bytes.withUnsafeBytes { b throws(TransportError) in try answer.on.trySend(b) } }
        received.signal()
    }
    func transport(didCloseWith reason: TransportError) {
        reasons.withLock { $0.append("\(reason)") }
        closed.signal()
    }
}

private func send(_ bytes: [UInt8], on bearer: ATTBearer) throws -> ATTSendResult {
    try bytes.withUnsafeBytes { b throws(TransportError) in try bearer.trySend(b) }
}

final class BearerTapTests: XCTestCase {
    func testTheBearerNameFollowsTheDirectionOnlyWhenGiven() {
        XCTAssertEqual(ObservedTransport.bearerName(index: 1, localCID: 0x0041), "b1 cid 0x0041")
        XCTAssertEqual(ObservedTransport.bearerName(index: 2, localCID: nil), "b2")
        let plain = traceLine(direction: ">", bytes: [0x0A, 0x03, 0x00], at: 0)
        let named = traceLine(direction: ">", bytes: [0x0A, 0x03, 0x00], at: 0, bearer: "b1 cid 0x0041")
        XCTAssertEqual(String(plain.dropFirst(16)), "> Read Request handle 0x0003")
        XCTAssertEqual(String(named.dropFirst(16)), "> [b1 cid 0x0041] Read Request handle 0x0003")
        XCTAssertEqual(plain.prefix(16), named.prefix(16))
    }

    func testAnEnhancedBearersTraceLinesNameItAndTheUnenhancedOnesDoNot() throws {
        let lines = Lines()
        let (cid4, cid4Peer) = try ATTBearer.pair()
        let (eatt, eattPeer) = try ATTBearer.pair()
        let plain = ObservedTransport(cid4, tracing: true, lines: lines.take)
        let named = ObservedTransport(eatt, tracing: true, name: ObservedTransport.bearerName(index: 1, localCID: 0x0041), lines: lines.take)
        cid4.start(KeepingSink())
        eatt.start(KeepingSink())
        defer { for b in [cid4, cid4Peer, eatt, eattPeer] { b.close(reason: "test over") } }
        XCTAssertEqual(try send([0x0A, 0x03, 0x00], on: plain.bearer), .sent)
        XCTAssertEqual(try send([0x0B, 0x01], on: cid4Peer), .sent)
        XCTAssertEqual(lines.first(2).count, 2)
        XCTAssertEqual(try send([0x0A, 0x03, 0x00], on: named.bearer), .sent)
        XCTAssertEqual(try send([0x0B, 0x02], on: eattPeer), .sent)
        XCTAssertEqual(lines.first(4).count, 4)
        named.bearer.close(reason: "test over")
        XCTAssertEqual(lines.first(5), [
            "> Read Request handle 0x0003",
            "< Read Response [01]",
            "> [b1 cid 0x0041] Read Request handle 0x0003",
            "< [b1 cid 0x0041] Read Response [02]",
            "- [b1 cid 0x0041] closed: closed by this host: test over",
        ])
    }

    /// The peer answers at once, while the sent line is still being taken: the answer's line waits for it (both are
    /// given under the bearer's lock), so a request's line always precedes its response's.
    func testARequestsLineComesBeforeItsResponseAnsweredDuringTheSend() throws {
        let lines = Lines(holdSent: true)
        let (bearer, peer) = try ATTBearer.pair()
        let traced = ObservedTransport(bearer, tracing: true, lines: lines.take)
        let peerSink = KeepingSink()
        peerSink.answer = ([0x0B, 0x01, 0x02], peer)
        peer.start(peerSink)
        bearer.start(KeepingSink())
        defer { bearer.close(reason: "test over"); peer.close(reason: "test over") }
        XCTAssertEqual(try send([0x0A, 0x03, 0x00], on: traced.bearer), .sent)
        XCTAssertEqual(peerSink.received.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(lines.first(2), ["> Read Request handle 0x0003", "< Read Response [01 02]"])
    }

    func testUntracedNothingIsSaidAndTracingCanBeTurnedOnAndOff() throws {
        let lines = Lines()
        let (bearer, peer) = try ATTBearer.pair()
        let observed = ObservedTransport(bearer, tracing: false, lines: lines.take)
        let sink = KeepingSink()
        bearer.start(sink)
        defer { bearer.close(reason: "test over"); peer.close(reason: "test over") }
        XCTAssertEqual(try send([0x0A, 0x01, 0x00], on: bearer), .sent)
        XCTAssertEqual(try send([0x0B, 0x0A], on: peer), .sent)
        XCTAssertEqual(sink.received.wait(timeout: .now() + 5), .success)
        observed.setTracing(true)
        XCTAssertEqual(try send([0x0A, 0x02, 0x00], on: bearer), .sent)
        XCTAssertEqual(try send([0x0B, 0x0B], on: peer), .sent)
        XCTAssertEqual(sink.received.wait(timeout: .now() + 5), .success)
        observed.setTracing(false)
        XCTAssertEqual(try send([0x0A, 0x03, 0x00], on: bearer), .sent)
        XCTAssertEqual(try send([0x0B, 0x0C], on: peer), .sent)
        XCTAssertEqual(sink.received.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(lines.first(2), ["> Read Request handle 0x0002", "< Read Response [0b]"])
        XCTAssertEqual(sink.got.withLock { $0 }, [[0x0B, 0x0A], [0x0B, 0x0B], [0x0B, 0x0C]])
    }

    /// The shell learns that its connection ended even when the link ended before it asked to be told (a pairing the
    /// kernel failed just after Exchange MTU closed the bearer between the connect and the shell's whenClosed).
    func testAnObserverAfterTheCloseLearnsItsReasonAtOnceAndIsNeverCalled() throws {
        let (bearer, peer) = try ATTBearer.pair()
        let observed = ObservedTransport(bearer, tracing: false) { _ in }
        let sink = KeepingSink()
        bearer.start(sink)
        peer.close(reason: "the peer went")
        XCTAssertEqual(sink.closed.wait(timeout: .now() + 5), .success)
        let calls = Lock(0)
        let reason = observed.whenClosed { _ in calls.withLock { $0 += 1 } }
        XCTAssertEqual(reason.map { "\($0)" }, "\(TransportError.closedByPeer)")
        bearer.close(reason: "again")
        XCTAssertEqual(calls.withLock { $0 }, 0)
    }

    func testAnObserverBeforeTheCloseIsToldOnceBeforeTheSink() throws {
        let (bearer, peer) = try ATTBearer.pair()
        let observed = ObservedTransport(bearer, tracing: false) { _ in }
        let sink = KeepingSink()
        bearer.start(sink)
        let told = Lock<[String]>([])
        XCTAssertNil(observed.whenClosed { reason in
            told.withLock { $0.append("\(reason); sink told \(sink.reasons.withLock { $0.count })") }
        })
        peer.close(reason: "the peer went")
        XCTAssertEqual(sink.closed.wait(timeout: .now() + 5), .success)
        bearer.close(reason: "again")
        XCTAssertEqual(told.withLock { $0 }, ["\(TransportError.closedByPeer); sink told 0"])
        XCTAssertNotNil(observed.whenClosed { _ in XCTFail("told after the close") })
    }

    /// `mirror check`'s diversion: while set, every inbound PDU goes to the probe, none to the client; then to the
    /// client again; the close reaches both.
    func testADiversionTakesEveryInboundPDUUntilItEndsAndTheCloseReachesBoth() throws {
        let (bearer, peer) = try ATTBearer.pair()
        let observed = ObservedTransport(bearer, tracing: false) { _ in }
        let client = KeepingSink(), probe = KeepingSink()
        bearer.start(client)
        defer { peer.close(reason: "test over") }
        observed.divert(to: probe)
        XCTAssertEqual(try send([0x0B, 0x01], on: peer), .sent)
        XCTAssertEqual(try send([0x0B, 0x02], on: peer), .sent)
        for _ in 0..<2 { XCTAssertEqual(probe.received.wait(timeout: .now() + 5), .success) }
        observed.divert(to: nil)
        XCTAssertEqual(try send([0x0B, 0x03], on: peer), .sent)
        XCTAssertEqual(client.received.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(probe.got.withLock { $0 }, [[0x0B, 0x01], [0x0B, 0x02]])
        XCTAssertEqual(client.got.withLock { $0 }, [[0x0B, 0x03]])
        observed.divert(to: probe)
        bearer.close(reason: "done")
        XCTAssertEqual(client.closed.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(probe.reasons.withLock { $0 }, ["\(TransportError.closedLocally(reason: "done"))"])
    }

    /// The bearer counts the sends that found its socket full and the time until it polled writable, traced or not.
    func testSendsThatFindTheSocketFullAreCountedWithTheirWait() throws {
        let (bearer, peer) = try ATTBearer.pair()
        let observed = ObservedTransport(bearer, tracing: false) { _ in }
        bearer.start(KeepingSink())
        defer { bearer.close(reason: "test over") }
        try bearer.setSendBufferSize(4096)
        var sent = 0
        while try send([UInt8](repeating: 0x52, count: 200), on: bearer) == .sent {
            sent += 1
            XCTAssertLessThan(sent, 100_000, "the socket never filled")
            if sent >= 100_000 { return }
        }
        XCTAssertEqual(observed.observations.wouldBlockCount, 1)
        let writable = DispatchSemaphore(value: 0)
        bearer.whenWritable { writable.signal() }
        peer.start(KeepingSink()) // the peer reads: the socket drains
        XCTAssertEqual(writable.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(observed.observations.wouldBlockCount, 1)
        XCTAssertGreaterThan(observed.observations.blockedNanoseconds, 0)
        peer.close(reason: "test over")
    }
}
