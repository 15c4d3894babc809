import CBlueZSocket
import Dispatch
import Foundation
import XCTest
@testable import ATTStack

/// `ATTBearer.detach`: the bearer ends as on close, but its connected socket goes to a new owner, still open.
final class BearerDetachTests: XCTestCase {
    /// Detaches `bearer` and waits (bounded) for the socket it hands over.
    private func detached(_ bearer: ATTBearer, reason: String = "handed over") -> Int32?? {
        let done = DispatchSemaphore(value: 0)
        let handed = LockedValue<Int32??>(nil)
        bearer.detach(reason: reason) { fd in
            handed.withLock { $0 = .some(fd) }
            done.signal()
        }
        guard done.wait(timeout: .now() + 10) == .success else { return nil }
        return handed.withLock { $0 }
    }

    /// One datagram from a non-blocking socket, waiting at most 10 s.
    private func receive(_ fd: Int32) -> [UInt8]? {
        var revents: Int16 = 0
        guard cbz_poll_one(fd, CBZ_POLLIN, 10_000, &revents) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 1024)
        var truncated: Int32 = 0
        let n = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
        return n > 0 ? Array(buffer[..<n]) : nil
    }

    func testDetachHandsOverTheOpenSocketAfterTheReaderStopped() throws {
        let (a, b) = try ATTBearer.pair()
        let sinkA = RecordingSink(), sinkB = RecordingSink()
        a.start(sinkA)
        b.start(sinkB)
        XCTAssertEqual(try send(b, [0x13]), .sent)
        sinkA.waitForPDUs(1)
        guard let handed = detached(a, reason: "bare loop"), let fd = handed else { return XCTFail("no socket handed over") }
        XCTAssertEqual(sinkA.waitForClose(), .closedLocally(reason: "bare loop"), "the sink hears the end as after close")
        XCTAssertThrowsError(try send(a, [0x52]), "the bearer sends nothing after it handed its socket over")
        // The new owner's socket is still connected both ways, and the peer saw no close.
        let write: [UInt8] = [0x12, 0x12, 0x00, 0xAA]
        XCTAssertEqual(write.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }, write.count)
        sinkB.waitForPDUs(1)
        XCTAssertEqual(sinkB.pdus, [write])
        XCTAssertTrue(sinkB.closes.isEmpty)
        XCTAssertEqual(try send(b, [0x13]), .sent)
        XCTAssertEqual(receive(fd), [0x13], "what the peer sends now reaches the new owner, not the old sink")
        XCTAssertEqual(sinkA.pdus.count, 1)
        _ = cbz_close(fd)
        XCTAssertEqual(sinkB.waitForClose(), .closedByPeer, "the new owner's close ends the connection")
    }

    func testDetachBeforeStartHandsOverAtOnce() throws {
        let (a, b) = try ATTBearer.pair()
        let sinkB = RecordingSink()
        b.start(sinkB)
        guard let handed = detached(a), let fd = handed else { return XCTFail("no socket handed over") }
        let sinkA = RecordingSink()
        a.start(sinkA)
        XCTAssertEqual(sinkA.waitForClose(), .closedLocally(reason: "handed over"), "a later start still hears the end once")
        let pdu: [UInt8] = [0x0A, 0x03, 0x00]
        XCTAssertEqual(pdu.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }, pdu.count)
        sinkB.waitForPDUs(1)
        _ = cbz_close(fd)
        sinkB.waitForClose()
    }

    func testDetachOfAnEndedBearerHandsOverNothing() throws {
        let (a, b) = try ATTBearer.pair()
        let sinkA = RecordingSink()
        a.start(sinkA)
        b.close(reason: "peer gone")
        XCTAssertEqual(sinkA.waitForClose(), .closedByPeer)
        guard let handed = detached(a) else { return XCTFail("detach never answered") }
        XCTAssertNil(handed, "a bearer that already ended has no socket to hand over")

        let (c, d) = try ATTBearer.pair()
        let sinkC = RecordingSink()
        c.start(sinkC)
        c.close(reason: "closing")
        guard let second = detached(c) else { return XCTFail("detach never answered") }
        XCTAssertNil(second, "a bearer already closing keeps to its close")
        XCTAssertEqual(sinkC.waitForClose(), .closedLocally(reason: "closing"))
        d.close(reason: "done")
    }
}
