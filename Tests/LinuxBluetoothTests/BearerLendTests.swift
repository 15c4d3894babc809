import TestSupport
import CBlueZSocket
import Dispatch
import Foundation
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

/// `ATTBearer.lend`: the loop thread runs a body with the connected socket; meanwhile the bearer reads nothing
/// and sends nothing, and afterwards it goes on as before.
final class BearerLendTests: XCTestCase {
    /// One datagram from a non-blocking socket, waiting at most 10 s.
    private static func receive(_ fd: Int32) -> [UInt8]? {
        var revents: Int16 = 0
        guard cbz_poll_one(fd, CBZ_POLLIN, 10_000, &revents) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 1024)
        var truncated: Int32 = 0
        let n = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
        return n > 0 ? Array(buffer[..<n]) : nil
    }

    private static func sendRaw(_ fd: Int32, _ pdu: [UInt8]) -> Int {
        pdu.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }
    }

    func testTheBodyOwnsTheSocketWhileTheBearerWaitsThenGoesOn() throws {
        // AF_UNIX: the loop waits in epoll_wait, which the loan's eventfd wakes.
        let (a, b) = try ATTBearer.pair()
        try bodyOwnsTheSocket(a, b)
    }

    func testTheBodyOwnsTheSocketOfABearerOnASocketThatIsNotAFUnix() throws {
        // A datagram socket of another family (UDP, as L2CAP is not AF_UNIX): the same loop, the same wake-up.
        let (a, b) = try udpBearerPair()
        try bodyOwnsTheSocket(a, b)
        b.close(reason: "done")
    }

    func testLoanAfterLoanOnABlockedReaderEachRunsOnce() throws {
        // Many loans while the loop waits: each wakes it, each body runs once, in order.
        let (a, b) = try ATTBearer.pair()
        let sinkA = RecordingSink()
        a.start(sinkA)
        let order = Lock<[Int]>([])
        for i in 0..<200 {
            let ran = DispatchSemaphore(value: 0)
            a.lend { fd in
                XCTAssertNotNil(fd)
                order.withLock { $0.append(i) }
                ran.signal()
            }
            XCTAssertEqual(ran.wait(timeout: .now() + 10), .success, "loan \(i) ran")
        }
        XCTAssertEqual(order.withLock { $0 }, Array(0..<200))
        XCTAssertEqual(try send(b, [0x1B, 0x01, 0x00]), .sent)
        sinkA.waitForPDUs(1)
        XCTAssertEqual(sinkA.pdus, [[0x1B, 0x01, 0x00]], "and the reader goes on reading")
        a.close(reason: "done")
        XCTAssertEqual(sinkA.waitForClose(), .closedLocally(reason: "done"))
        b.close(reason: "done")
    }

    func testALoanWhileTheLoopIsHeldInADeliveryRunsOnceItReturnsAndTheBearerGoesOn() throws {
        // The loop is held inside the sink (not in its wait): `lend` returns at once, and the body runs, with the
        // socket, as soon as the delivery returns (the eventfd keeps the wake-up; no signal, no time limit).
        let release = DispatchSemaphore(value: 0), held = DispatchSemaphore(value: 0), ran = DispatchSemaphore(value: 0)
        let (a, b) = try ATTBearer.pair()
        let sinkA = RecordingSink(onPDU: { pdu in
            guard pdu == [0x1B, 0x01, 0x00] else { return }
            held.signal()
            _ = release.wait(timeout: .now() + 10)
        })
        a.start(sinkA)
        XCTAssertEqual(try send(b, [0x1B, 0x01, 0x00]), .sent)
        XCTAssertEqual(held.wait(timeout: .now() + 10), .success)
        let got = Lock<[String]>([])
        let started = ContinuousClock.now
        a.lend { fd in
            got.withLock { $0.append(fd == nil ? "nil" : currentThreadName()) }
            ran.signal()
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1), "lend does not wait for the loop")
        XCTAssertEqual(got.withLock { $0 }, [], "not while the delivery holds the loop")
        release.signal()
        XCTAssertEqual(ran.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(got.withLock { $0 }, ["att-bearer"], "run once, with the socket, on the loop")
        XCTAssertEqual(try send(b, [0x1B, 0x02, 0x00]), .sent)
        sinkA.waitForPDUs(2)
        XCTAssertEqual(sinkA.pdus, [[0x1B, 0x01, 0x00], [0x1B, 0x02, 0x00]])
        XCTAssertEqual(got.withLock { $0 }, ["att-bearer"], "the body never runs again")
        a.close(reason: "done")
        XCTAssertEqual(sinkA.waitForClose(), .closedLocally(reason: "done"))
        b.close(reason: "done")
    }

    private func bodyOwnsTheSocket(_ a: ATTBearer, _ b: ATTBearer) throws {
        let sinkA = RecordingSink(), sinkB = RecordingSink()
        a.start(sinkA)
        b.start(sinkB)
        XCTAssertEqual(try send(b, [0x13]), .sent)
        sinkA.waitForPDUs(1)

        let entered = DispatchSemaphore(value: 0), proceed = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        let seen = Lock<(thread: String, answer: [UInt8]?)>(("", nil))
        a.lend { fd in
            guard let fd else { return XCTFail("no socket lent") }
            entered.signal()
            _ = proceed.wait(timeout: .now() + 10)
            // The body's request, and the peer's answer read by the body, not by the bearer's sink.
            XCTAssertEqual(Self.sendRaw(fd, [0x12, 0x12, 0x00, 0xAA]), 4)
            let answer = Self.receive(fd)
            seen.withLock { $0 = (currentThreadName(), answer) }
            done.signal()
        }
        XCTAssertEqual(entered.wait(timeout: .now() + 10), .success)
        // During the loan the bearer sends nothing: its sender waits for POLLOUT, which comes after the loan.
        XCTAssertEqual(try send(a, [0x52, 0x01, 0x00]), .wouldBlock)
        let writable = DispatchSemaphore(value: 0)
        a.whenWritable { writable.signal() }
        proceed.signal()
        sinkB.waitForPDUs(1)
        XCTAssertEqual(sinkB.pdus, [[0x12, 0x12, 0x00, 0xAA]])
        XCTAssertEqual(try send(b, [0x13]), .sent)
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(seen.withLock { $0.answer }, [0x13])
        XCTAssertEqual(seen.withLock { $0.thread }, "att-bearer", "the loan runs on the bearer's loop thread")
        XCTAssertEqual(writable.wait(timeout: .now() + 10), .success, "the waiting sender wakes after the loan")
        XCTAssertEqual(try send(a, [0x52, 0x01, 0x00]), .sent)
        sinkB.waitForPDUs(2)
        // And the bearer reads again.
        XCTAssertEqual(try send(b, [0x1B, 0x03, 0x00, 0x01]), .sent)
        sinkA.waitForPDUs(2)
        XCTAssertEqual(sinkA.pdus, [[0x13], [0x1B, 0x03, 0x00, 0x01]], "the answer the body read never reached the sink")
        XCTAssertTrue(sinkA.closes.isEmpty)
        a.close(reason: "done")
        XCTAssertEqual(sinkA.waitForClose(), .closedLocally(reason: "done"))
    }

    func testACloseDuringALoanWaitsForItsEnd() throws {
        let (a, b) = try ATTBearer.pair()
        let sinkA = RecordingSink(), sinkB = RecordingSink()
        a.start(sinkA)
        b.start(sinkB)
        let entered = DispatchSemaphore(value: 0), proceed = DispatchSemaphore(value: 0)
        a.lend { fd in
            guard let fd else { return XCTFail("no socket lent") }
            entered.signal()
            _ = proceed.wait(timeout: .now() + 10)
            XCTAssertEqual(Self.sendRaw(fd, [0x52, 0x01, 0x00, 0x07]), 4, "the socket stays open until the loan ends")
        }
        XCTAssertEqual(entered.wait(timeout: .now() + 10), .success)
        a.close(reason: "closing under a loan")
        XCTAssertTrue(sinkA.closes.isEmpty, "the close waits for the loan")
        proceed.signal()
        XCTAssertEqual(sinkA.waitForClose(), .closedLocally(reason: "closing under a loan"))
        sinkB.waitForPDUs(1)
        XCTAssertEqual(sinkB.pdus, [[0x52, 0x01, 0x00, 0x07]])
        XCTAssertEqual(sinkB.waitForClose(), .closedByPeer)
    }

    func testAnInterruptingCloseEndsALoanBlockedOnItsPeer() throws {
        let (a, b) = try ATTBearer.pair()
        let sinkA = RecordingSink(), sinkB = RecordingSink()
        a.start(sinkA)
        b.start(sinkB)
        let entered = DispatchSemaphore(value: 0)
        let woke = Lock<Int16?>(nil)
        a.lend { fd in
            guard let fd else { return XCTFail("no socket lent") }
            entered.signal()
            // Blocked on the peer's hang-up, which never comes: only the interrupting close's shutdown wakes it.
            var revents: Int16 = 0
            _ = cbz_poll_one(fd, 0, 10_000, &revents)
            woke.withLock { $0 = revents }
        }
        XCTAssertEqual(entered.wait(timeout: .now() + 10), .success)
        let started = ContinuousClock.now
        a.close(reason: "interrupted", interruptingLoan: true)
        XCTAssertEqual(sinkA.waitForClose(), .closedLocally(reason: "interrupted"))
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "the loan ended at the shutdown, not at its 10 s poll")
        XCTAssertNotEqual(woke.withLock { $0 } ?? 0, 0, "the poll saw the shutdown")
        XCTAssertEqual(sinkB.waitForClose(), .closedByPeer)
    }

    func testNoLoanFromABearerThatIsNotRunning() throws {
        let (a, b) = try ATTBearer.pair()
        let got = Lock<[Int32?]>([])
        a.lend { fd in got.withLock { $0.append(fd) } }
        XCTAssertEqual(got.withLock { $0 }, [nil], "not started: nothing to lend")
        let sinkA = RecordingSink()
        a.start(sinkA)
        b.close(reason: "peer gone")
        XCTAssertEqual(sinkA.waitForClose(), .closedByPeer)
        a.lend { fd in got.withLock { $0.append(fd) } }
        XCTAssertEqual(got.withLock { $0 }, [nil, nil], "ended: nothing to lend")
    }
}
