import TestSupport
import CBlueZSocket
import Dispatch
import Foundation
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

/// The unix: equivalent of an ECRED channel on SPSM 0x0027, over real AF_UNIX sockets: the 4-octet request and
/// answer, the smaller MTU, the CIDs 0x0040 + n, a refusal named by its L2CAP result, and the named handshake limits.
final class EnhancedUnixBearerTests: XCTestCase {
    /// A CID 4 listener at a fresh PATH with its client connected, and a listener at PATH.eatt.
    struct Peer {
        let path: String
        let cid4: ATTBearerListener
        let eatt: ATTBearerListener
        let client: ATTBearer
        let served: ATTBearer
    }

    func makePeer(_ name: String) throws -> Peer {
        let path = temporarySocketPath(name)
        let cid4 = try ATTBearerListener.unix(path: path)
        let eatt = try ATTBearerListener.unixEnhanced(forUnixPath: path)
        XCTAssertEqual(eatt.label, "unix:\(path).eatt")
        let client = try ATTBearer.connect(unixPath: path)
        let served = try cid4.accept(timeout: 5)
        XCTAssertNil(client.channelIDs, "CID 4 has no ECRED channel IDs")
        return Peer(path: path, cid4: cid4, eatt: eatt, client: client, served: served)
    }

    /// Runs `body` on another thread (the peer's side) and returns what it gave, within 10 s.
    func onPeerThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) -> () throws -> T {
        let result = Lock<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let r = Result { try body() }
            result.withLock { $0 = r }
            done.signal()
        }
        return {
            guard done.wait(timeout: .now() + 10) == .success else { throw TransportError.closedLocally(reason: "the peer's side did not finish in 10 s") }
            return try result.withLock { $0! }.get()
        }
    }

    func testTheHandshakeOpensNumberedBearersWithTheSmallerMTUAndPDUsFlow() throws {
        let p = try makePeer("eatt-ok")
        defer { p.cid4.close(); p.eatt.close(); p.client.close(reason: "done") }
        let eatt = p.eatt
        let accepted = onPeerThread { () -> (UInt16, Int, ATTBearer) in
            let request = try eatt.acceptEnhancedRequest(timeout: 5)
            return (request.spsm, request.clientMTU, try request.accept(mtu: 80, bearer: 1))
        }
        let bearer = try ATTBearer.connectEnhanced(unixPath: p.path, mtu: 100, timeout: 5)
        let (spsm, clientMTU, served) = try accepted()
        XCTAssertEqual(spsm, 0x0027)
        XCTAssertEqual(clientMTU, 100)
        XCTAssertEqual(try bearer.enhancedMTU(), 80, "the smaller of 100 and 80 (Vol 3 Part F §3.2.8)")
        XCTAssertEqual(try served.enhancedMTU(), 80)
        XCTAssertEqual(bearer.channelIDs?.local, 0x0041)
        XCTAssertEqual(bearer.channelIDs?.remote, 0x0041)
        XCTAssertEqual(served.channelIDs?.local, 0x0041)
        XCTAssertEqual(bearer.label, "unix:\(p.path).eatt.1")
        XCTAssertEqual(bearer.endpoint, .unix(path: p.path + ".eatt"))

        // ATT PDUs flow as on CID 4, both ways.
        let clientSink = RecordingSink(), servedSink = RecordingSink()
        bearer.start(clientSink)
        served.start(servedSink)
        XCTAssertEqual(try send(bearer, [0x0A, 0x03, 0x00]), .sent)
        servedSink.waitForPDUs(1)
        XCTAssertEqual(servedSink.pdus, [[0x0A, 0x03, 0x00]])
        XCTAssertEqual(try send(served, [0x0B, 0x61]), .sent)
        clientSink.waitForPDUs(1)
        XCTAssertEqual(clientSink.pdus, [[0x0B, 0x61]])

        // The second bearer of the same CID 4 connection is 0x0042; the server's larger MTU leaves the client's.
        let second = onPeerThread { try eatt.acceptEnhancedRequest(timeout: 5).accept(mtu: 517, bearer: 2) }
        let b2 = try ATTBearer.connectEnhanced(unixPath: p.path, mtu: 64, timeout: 5)
        let served2 = try second()
        XCTAssertEqual(b2.channelIDs?.local, 0x0042)
        XCTAssertEqual(served2.channelIDs?.remote, 0x0042)
        XCTAssertEqual(try b2.enhancedMTU(), 64)
        XCTAssertEqual(try served2.enhancedMTU(), 64)

        // A new CID 4 connection at PATH starts the numbering again.
        let again = try ATTBearer.connect(unixPath: p.path)
        let third = onPeerThread { try eatt.acceptEnhancedRequest(timeout: 5).accept(mtu: 517, bearer: 1) }
        let b3 = try ATTBearer.connectEnhanced(unixPath: p.path, timeout: 5)
        _ = try third()
        XCTAssertEqual(b3.channelIDs?.local, 0x0041)
        XCTAssertEqual(try b3.enhancedMTU(), 517)
        for b in [bearer, served, b2, served2, again, b3] { b.close(reason: "done") }
        servedSink.waitForClose()
    }

    func testARefusalNamesItsL2CAPResult() throws {
        let p = try makePeer("eatt-refused")
        defer { p.cid4.close(); p.eatt.close(); p.client.close(reason: "done") }
        let eatt = p.eatt
        for result in [L2CAPConnectionResult.spsmNotSupported, .noResourcesAvailable, .insufficientAuthentication] {
            let refused = onPeerThread { try eatt.acceptEnhancedRequest(timeout: 5).refuse(result) }
            XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: p.path, timeout: 5)) { error in
                XCTAssertEqual(error as? TransportError, .enhancedBearerRefused(peer: "unix:\(p.path).eatt", result: result))
            }
            try refused()
        }
        let error = TransportError.enhancedBearerRefused(peer: "unix:/tmp/s.eatt", result: .spsmNotSupported)
        XCTAssertEqual(error.description, "unix:/tmp/s.eatt refused the Enhanced ATT bearer: L2CAP result 0x0002 SPSM not supported")
        XCTAssertEqual(L2CAPConnectionResult.noResourcesAvailable.description, "0x0004 no resources available")
        XCTAssertEqual(L2CAPConnectionResult(rawValue: 0x0042).name, "reserved")
    }

    func testAPeerThatNeverAnswersTheHandshakeTimesOutNamingTheAnswer() throws {
        let p = try makePeer("eatt-silent")
        defer { p.cid4.close(); p.eatt.close(); p.client.close(reason: "done") }
        let eatt = p.eatt
        // The peer reads the request and keeps the connection open without answering.
        let silent = onPeerThread { try eatt.acceptEnhancedRequest(timeout: 5) }
        let started = ContinuousClock.now
        XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: p.path, timeout: 0.3)) { error in
            guard case .handshakeTimedOut(let peer, let waitingFor, let seconds)? = error as? TransportError else { return XCTFail("\(error)") }
            XCTAssertEqual(peer, "unix:\(p.path).eatt")
            XCTAssertEqual(waitingFor, "the answer to the Enhanced ATT bearer request (SPSM 0x0027)")
            XCTAssertEqual(seconds, 0.3)
            XCTAssertEqual("\(error)", "the answer to the Enhanced ATT bearer request (SPSM 0x0027) did not come from unix:\(p.path).eatt in 0.3 s")
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5))
        let request = try silent()
        XCTAssertEqual(request.spsm, 0x0027)
        XCTAssertEqual(request.clientMTU, ATTMTU.maximum)
    }

    func testAClientThatNeverSendsItsRequestTimesOutAtTheListener() throws {
        let p = try makePeer("eatt-mute")
        defer { p.cid4.close(); p.eatt.close(); p.client.close(reason: "done") }
        let fd = cbz_unix_socket()
        defer { _ = cbz_close(fd) }
        XCTAssertEqual(cbz_unix_connect(fd, p.path + ".eatt"), 0)
        XCTAssertThrowsError(try p.eatt.acceptEnhancedRequest(timeout: 5, requestTimeout: 0.1)) { error in
            XCTAssertEqual("\(error)", "an Enhanced ATT bearer request (SPSM, MTU) did not come from a client of unix:\(p.path).eatt in 0.1 s")
        }
    }

    func testAMalformedAnswerAndAMissingListenerAreNamedSocketErrors() throws {
        let p = try makePeer("eatt-bad")
        defer { p.cid4.close(); p.eatt.close(); p.client.close(reason: "done") }
        let eatt = p.eatt
        // A peer that reads the request and answers 3 octets.
        let short = onPeerThread { () -> Void in
            let fd = try eatt.acceptSocket(timeout: 5).fd
            defer { _ = cbz_close(fd) }
            var revents: Int16 = 0
            _ = cbz_poll_one(fd, CBZ_POLLIN, 5000, &revents)
            var buffer = [UInt8](repeating: 0, count: 8), truncated: Int32 = 0
            _ = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
            let answer: [UInt8] = [0x00, 0x00, 0x40]
            _ = answer.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }
        }
        XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: p.path, timeout: 5)) { error in
            guard case .socket(let s)? = error as? TransportError else { return XCTFail("\(error)") }
            XCTAssertEqual(s.syscall, "recv")
            XCTAssertEqual(s.errno.name, "EPROTO")
            XCTAssertEqual(s.context, "unix:\(p.path).eatt sent 3 octets (00 00 40) as the answer to the Enhanced ATT bearer request (SPSM 0x0027), which has 4")
        }
        try short()
        let noListener = temporarySocketPath("eatt-none")
        XCTAssertThrowsError(try ATTBearer.connectEnhanced(unixPath: noListener, timeout: 1)) { error in
            guard case .socket(let s)? = error as? TransportError else { return XCTFail("\(error)") }
            XCTAssertEqual(s.syscall, "connect")
            XCTAssertEqual(s.errno, .noSuchFileOrDirectory)
            XCTAssertEqual(s.context, "connecting an Enhanced ATT bearer to unix:\(noListener).eatt")
        }
    }

    func testAnECREDConnectsRefusalAndResetSayWhatTheyMeanOverLE() {
        let peer = "00:AA:01:01:00:01 (LE public)"
        func error(_ code: Int32) -> TransportError {
            .socket(SocketError(syscall: "connect", errno: Errno(code), context: "connecting to \(peer) via hci0 (Enhanced ATT bearer, PSM 0x0027)"))
        }
        guard case .socket(let refused) = ATTBearer.enhancedConnectError(error(ECONNREFUSED), peer: peer) else { return XCTFail() }
        XCTAssertEqual(refused.advice, "\(peer) refused the ECRED channel on PSM 0x0027: Linux reports every L2CAP refusal result this way (btmon shows which; with no listener there it is 0x0002 SPSM not supported): the peer serves no Enhanced ATT bearer")
        guard case .socket(let reset) = ATTBearer.enhancedConnectError(error(ECONNRESET), peer: peer) else { return XCTFail() }
        XCTAssertTrue(reset.advice.contains("[GATT] Channels"), reset.advice)
        XCTAssertEqual(ATTBearer.enhancedConnectError(error(ETIMEDOUT), peer: peer), error(ETIMEDOUT), "other errors are left as they are")
    }
}
