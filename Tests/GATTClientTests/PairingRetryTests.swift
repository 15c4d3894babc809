// The security retry while pairing runs: after BT_SECURITY is raised the kernel refuses sends with ENOTCONN (the
// socket is in BT_CONFIG) and reports POLLOUT once the link is encrypted; the retry waits for that, bounded and named.
import TestSupport
import ATTStack
import LinuxBluetooth
import LinkCore
import Dispatch
import Foundation
import XCTest
@testable import GATTClient

#if canImport(Glibc)
import Glibc
import GATTVocabulary
#endif

/// A transport for a link whose pairing the test controls. Reads of 0x0003 are answered with Insufficient
/// Encryption until the link is encrypted, then with the value [1]. While pairing runs, every send fails with
/// ENOTCONN and POLLOUT waiters are held; `finishPairing()` encrypts the link and wakes them.
final class PairingTransport: ATTTransport, @unchecked Sendable {
    // @unchecked: every mutable property lives in `state`, guarded by its lock.
    struct State {
        var sink: (any ATTTransportSink)?
        var pairing = false
        var encrypted = false
        /// Sends refused with ENOTCONN, and requests the peer received.
        var notConnected = 0
        var received: [[UInt8]] = []
        var writableWaiters: [@Sendable () -> Void] = []
        var writableRequests = 0
    }
    let state = Lock(State())
    let queue = DispatchQueue(label: "pairing.reader")
    let label = "pairing"
    /// When pairing ends on its own: as soon as someone waits for POLLOUT (the kernel's state change), or never.
    let completesWhenWaitedOn: Bool
    /// ENOTCONN even after pairing (a link that stays unusable: POLLOUT comes, sends still fail).
    let neverUsable: Bool
    /// Finished when the first POLLOUT waiter registers.
    let waitedOn = OnceBox<Void>()

    /// The ATT error the peer answers an unencrypted read with (0x0F Insufficient Encryption by default).
    let refusal: UInt8

    init(completesWhenWaitedOn: Bool = true, neverUsable: Bool = false, pairingFromTheStart: Bool = false, refusal: UInt8 = 0x0F) {
        self.refusal = refusal
        self.completesWhenWaitedOn = completesWhenWaitedOn
        self.neverUsable = neverUsable
        state.withLock { $0.pairing = pairingFromTheStart }
    }

    func start(_ sink: any ATTTransportSink) { state.withLock { $0.sink = sink } }

    /// What BT_SECURITY does on an LE link that is not encrypted enough: pairing starts.
    func raise(to level: BTSecurityLevel) { state.withLock { $0.pairing = true } }

    func finishPairing() {
        let waiters: [@Sendable () -> Void] = state.withLock { s in
            s.pairing = false
            s.encrypted = true
            defer { s.writableWaiters = [] }
            return s.writableWaiters
        }
        for w in waiters { queue.async { w() } }
    }

    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        let bytes = [UInt8](pdu)
        let outcome: (answer: [UInt8]?, sink: (any ATTTransportSink)?, refused: Bool) = state.withLock { s in
            if s.pairing || neverUsable && s.encrypted {
                s.notConnected += 1
                return (nil, nil, true)
            }
            s.received.append(bytes)
            guard bytes == [0x0A, 0x03, 0x00] else { return ([0x01, bytes[0], 0, 0, 0x06], s.sink, false) }
            return (s.encrypted ? [0x0B, 0x01] : [0x01, 0x0A, 0x03, 0x00, refusal], s.sink, false)
        }
        if outcome.refused {
            throw .socket(SocketError(syscall: "send", errno: .notConnected, context: "sending a \(bytes.count)-byte PDU to \(label)"))
        }
        if let answer = outcome.answer, let sink = outcome.sink { queue.async { sink.transport(didReceive: answer) } }
        return .sent
    }

    func whenWritable(_ callback: @escaping @Sendable () -> Void) {
        let (now, first): (Bool, Bool) = state.withLock { s in
            s.writableRequests += 1
            if !s.pairing { return (true, s.writableRequests == 1) }
            s.writableWaiters.append(callback)
            return (false, s.writableRequests == 1)
        }
        if first { waitedOn.finish(.success(())) }
        if now {
            queue.async { callback() }
        } else if completesWhenWaitedOn {
            queue.async { [self] in finishPairing() }
        }
    }

    func close(reason: String) {
        let sink: (any ATTTransportSink)? = state.withLock { s in
            defer { s.sink = nil }
            return s.sink
        }
        if let sink { queue.async { sink.transport(didCloseWith: .closedLocally(reason: reason)) } }
    }

    /// The pairing fails and the link ends (the kernel's Authentication Failure): the close, then POLLOUT's waiters
    /// woken by the end, as the bearer gives them.
    func failPairingAndEndTheLink() {
        let (sink, waiters): ((any ATTTransportSink)?, [@Sendable () -> Void]) = state.withLock { s in
            defer { s.sink = nil; s.writableWaiters = [] }
            return (s.sink, s.writableWaiters)
        }
        queue.async {
            sink?.transport(didCloseWith: .closedByPeer)
            for w in waiters { w() }
        }
    }

    var counts: (notConnected: Int, received: Int, writableRequests: Int) {
        state.withLock { ($0.notConnected, $0.received.count, $0.writableRequests) }
    }
}

final class PairingRetryTests: XCTestCase {
    func client(_ transport: PairingTransport, clock: ManualClock = ManualClock(), retry: Bool = true,
                initial: BTSecurityLevel = .low, raiseLimit: BTSecurityLevel? = nil) async throws -> GATTClient {
        var c = GATTClient.Configuration()
        c.clock = clock
        c.initialSecurityLevel = initial
        c.raiseLimit = raiseLimit
        c.retryAfterRaisingSecurity = retry
        c.setSecurityLevel = { level in transport.raise(to: level) }
        return try await GATTClient.connect(transport: transport, configuration: c)
    }

    func testASendRefusedWithENOTCONNWhilePairingWaitsForPOLLOUTAndGoesAgain() async throws {
        let transport = PairingTransport()
        let c = try await client(transport)
        defer { c.close() }
        let value = try await within(10) { try await c.read(handle: 3) }
        XCTAssertEqual(value, [1])
        XCTAssertEqual(c.securityLevel, .medium)
        let counts = transport.counts
        XCTAssertEqual(counts.notConnected, 1, "the first retry met pairing")
        XCTAssertEqual(counts.writableRequests, 1, "one wait for POLLOUT")
        XCTAssertEqual(counts.received, 2, "the peer saw the refused read and the retry after pairing")
        XCTAssertFalse(c.isClosed)
    }

    func testPairingThatNeverEndsTimesOutNamingTheLinkAndTheLevel() async throws {
        let clock = ManualClock()
        let transport = PairingTransport(completesWhenWaitedOn: false)
        let c = try await client(transport, clock: clock)
        defer { c.close() }
        let read = Task { try await c.read(handle: 3) }
        // The deadline is armed before the POLLOUT wait registers: once it has, time can move.
        try await within(10, "the retry's wait for POLLOUT") { try await transport.waitedOn.value() }
        clock.advance(by: .seconds(30))
        do {
            _ = try await read.value
            XCTFail("a read got through a link that never finished pairing")
        } catch {
            XCTAssertEqual("\(error)", "timed out after 30 s waiting for the link to take data again after raising security to medium (pairing)")
        }
        XCTAssertEqual(transport.counts.notConnected, 1)
        XCTAssertFalse(c.isClosed, "the wait fails the one request, not the bearer")
    }

    /// On a socket whose link is gone the kernel takes BT_SECURITY and starts nothing (l2cap_sock.c): the wake-up
    /// that follows is the link's end, and the wait says so; never a raise reported done on a dead link.
    func testAWaitWokenByTheLinksEndFailsNamingTheRaise() async throws {
        let transport = PairingTransport(completesWhenWaitedOn: false)
        let c = try await client(transport)
        defer { c.close() }
        try await c.setSecurityLevel(.high)
        let wait = Task { try await c.waitForTheLink(after: .high) }
        try await within(10, "the wait for POLLOUT") { try await transport.waitedOn.value() }
        transport.failPairingAndEndTheLink()
        do {
            try await within(10) { try await wait.value }
            XCTFail("the link's end was taken for the end of pairing")
        } catch let error as GATTError {
            guard case .disconnected(let d) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(d.during, "the pairing raising the link's security to high")
        }
    }

    func testALinkThatStaysUnusableIsRetriedABoundedNumberOfTimes() async throws {
        let transport = PairingTransport(neverUsable: true)
        let c = try await client(transport)
        defer { c.close() }
        do {
            _ = try await within(10) { try await c.read(handle: 3) }
            XCTFail("a read got through a link that refuses every send")
        } catch let error as GATTError {
            XCTAssertTrue(error.isNotConnectedSend, "\(error)")
            XCTAssertTrue(error.description.contains("send failed with ENOTCONN"), error.description)
        }
        let counts = transport.counts
        XCTAssertEqual(counts.notConnected, 1 + GATTClient.pairingSendRetries, "the send and its bounded retries")
        XCTAssertEqual(counts.writableRequests, GATTClient.pairingSendRetries, "one POLLOUT wait before each retry")
    }

    func testENOTCONNWithoutARaiseIsNotRetried() async throws {
        let transport = PairingTransport(pairingFromTheStart: true)
        let c = try await client(transport)
        defer { c.close() }
        do {
            _ = try await within(10) { try await c.read(handle: 3) }
            XCTFail("a read got through a link that refuses every send")
        } catch let error as GATTError {
            XCTAssertTrue(error.isNotConnectedSend, "\(error)")
        }
        XCTAssertEqual(transport.counts.notConnected, 1)
        XCTAssertEqual(transport.counts.writableRequests, 0, "no wait for POLLOUT without a raise")
        XCTAssertEqual(c.securityLevel, .low)
    }

    /// The connect asked for medium, the kernel passed ATT while the peer's SMP still ran (Bumble in the VM), and
    /// the peer answered 0x0F: asking for the same level again holds the retry until the link is encrypted.
    func testInsufficientEncryptionAtTheAskedLevelWaitsForTheEncryptionAndGoesAgain() async throws {
        let transport = PairingTransport()
        let c = try await client(transport, initial: .medium)
        defer { c.close() }
        let value = try await within(10) { try await c.read(handle: 3) }
        XCTAssertEqual(value, [1])
        XCTAssertEqual(c.securityLevel, .medium, "asked again, not raised")
        XCTAssertEqual(transport.counts.received, 2, "the refused read and the one after the encryption")
        XCTAssertEqual(transport.counts.writableRequests, 1, "one wait for the encryption (POLLOUT)")
    }

    /// A bond's unauthenticated key and no agent: a raise to high would start a MITM pairing nobody answers, so the
    /// peer's 0x05 comes back at once, with nothing sent again.
    func testARaiseAboveTheLimitIsNotTriedAndThePeersErrorComesBack() async throws {
        let transport = PairingTransport(refusal: 0x05)
        let c = try await client(transport, initial: .medium, raiseLimit: .medium)
        defer { c.close() }
        do {
            _ = try await within(10) { try await c.read(handle: 3) }
            XCTFail("a read got through a link that needs authentication")
        } catch let error as GATTError {
            XCTAssertEqual(error.attributeError?.code, .insufficientAuthentication, "\(error)")
        }
        XCTAssertEqual(transport.counts.received, 1, "no retry")
        XCTAssertEqual(transport.counts.writableRequests, 0)
        XCTAssertEqual(c.securityLevel, .medium)
    }
}
