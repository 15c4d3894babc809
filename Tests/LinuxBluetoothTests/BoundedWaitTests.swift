// The two waits below the GATT client that need a radio or a controller to reach in use, driven over AF_UNIX
// socketpairs instead: the LE connect's wait for POLLOUT, and a raw HCI command's wait for its answer.
import TestSupport
import CBlueZSocket
import Dispatch
import Foundation
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

#if canImport(Glibc)
import Glibc
#endif

/// A connected AF_UNIX SOCK_SEQPACKET pair (non-blocking), closed at the end of the test unless handed over.
final class SocketPair {
    let a: Int32
    let b: Int32
    private var owned: (a: Bool, b: Bool) = (true, true)

    init(file: StaticString = #filePath, line: UInt = #line) throws {
        var fds: [Int32] = [-1, -1]
        guard cbz_unix_socketpair(&fds) == 0 else {
            throw TransportError.socket(lastSocketError("socketpair", "a test socketpair", .local))
        }
        a = fds[0]
        b = fds[1]
    }

    /// `a` now belongs to someone else (an HCISocket that closes it).
    func handOverA() { owned.a = false }

    func closeB() {
        if owned.b { _ = cbz_close(b) }
        owned.b = false
    }

    deinit {
        if owned.a { _ = cbz_close(a) }
        if owned.b { _ = cbz_close(b) }
    }

    /// Sends 4 KiB datagrams on `a` until the socket says EAGAIN: from then on POLLOUT does not come until `b`
    /// reads (an AF_UNIX datagram socket is writable again only below a quarter of its send buffer). Returns how
    /// many were sent.
    @discardableResult
    func fillA() -> Int {
        let chunk = [UInt8](repeating: 0x5A, count: 4096)
        var sent = 0
        while chunk.withUnsafeBytes({ cbz_send(a, $0.baseAddress, $0.count) }) > 0 { sent += 1 }
        XCTAssertEqual(cbz_errno(), EAGAIN)
        return sent
    }

    /// Reads every datagram queued on `b`.
    func drainB() { drainDatagrams(b) }
    /// The next datagram on `b`.
    func receiveB(seconds: Double = 5) -> [UInt8]? { receiveDatagram(b, seconds: seconds) }
    func sendB(_ bytes: [UInt8]) { sendDatagram(b, bytes) }
}

/// Reads every datagram queued on `fd`.
func drainDatagrams(_ fd: Int32) {
    var buffer = [UInt8](repeating: 0, count: 8192)
    var truncated: Int32 = 0
    while buffer.withUnsafeMutableBytes({ cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }) > 0 {}
}

/// The next datagram on `fd`, waiting at most `seconds` for it (poll, no sleeping).
func receiveDatagram(_ fd: Int32, seconds: Double = 5) -> [UInt8]? {
    var revents: Int16 = 0
    guard cbz_poll_one(fd, CBZ_POLLIN, Int32(seconds * 1000), &revents) > 0 else { return nil }
    var buffer = [UInt8](repeating: 0, count: 300)
    var truncated: Int32 = 0
    let n = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
    return n > 0 ? Array(buffer.prefix(n)) : nil
}

func sendDatagram(_ fd: Int32, _ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertEqual(bytes.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }, bytes.count, file: file, line: line)
}

final class ConnectWaitTests: XCTestCase {
    let label = "C0:FF:EE:00:00:01 (LE random) via hci0"
    let domain = SocketDomain.l2cap(peer: "C0:FF:EE:00:00:01")

    func testTheConnectWaitTimesOutNamingThePeerAndTheLimitWhenPOLLOUTNeverComes() throws {
        let pair = try SocketPair()
        XCTAssertGreaterThan(pair.fillA(), 0)
        let start = ContinuousClock.now
        do {
            try ATTBearer.waitForConnection(fd: pair.a, label: label, timeout: 0.2, domain: domain)
            XCTFail("POLLOUT came on a socket whose send buffer is full")
        } catch {
            XCTAssertEqual(error, .connectTimedOut(peer: label, seconds: 0.2))
            XCTAssertTrue(error.description.hasPrefix("connecting to C0:FF:EE:00:00:01 (LE random) via hci0 got no answer in 0.2 s: "),
                          error.description)
        }
        let took = ContinuousClock.now - start
        XCTAssertGreaterThanOrEqual(took, .milliseconds(195), "returned before its limit")
        XCTAssertLessThan(took, .seconds(2))
    }

    func testTheConnectWaitEndsAsSoonAsTheSocketTakesData() throws {
        let pair = try SocketPair()
        pair.fillA()
        // The other end reads everything a little later, from another thread: POLLOUT then ends the wait long
        // before its 10 s limit, with no error (SO_ERROR is 0).
        let drained = DispatchSemaphore(value: 0)
        let b = pair.b
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) {
            drainDatagrams(b)
            drained.signal()
        }
        let start = ContinuousClock.now
        XCTAssertNoThrow(try ATTBearer.waitForConnection(fd: pair.a, label: label, timeout: 10, domain: domain))
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(5))
        drained.wait()
        // A socket that is writable from the start does not wait at all.
        XCTAssertNoThrow(try ATTBearer.waitForConnection(fd: pair.a, label: label, timeout: 0, domain: domain))
    }

    func testTheConnectWaitReportsTheSocketErrorWhenTheAttemptFails() throws {
        let pair = try SocketPair()
        pair.fillA()
        // Closing the other end with our data unread sets ECONNRESET on this one (and wakes poll): the wait reports
        // it as the connect's failure, as it would a refused LE connection.
        pair.closeB()
        do {
            try ATTBearer.waitForConnection(fd: pair.a, label: label, timeout: 5, domain: domain)
            XCTFail("no error from a socket whose peer is gone")
        } catch {
            guard case .socket(let e) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(e.syscall, "connect")
            XCTAssertEqual(e.errnoName, "ECONNRESET")
            XCTAssertEqual(e.context, "connecting to \(label)")
        }
    }
}

/// The same wait as a source of the link's loop (what `Peer.connect` and the commands use): the task suspends on
/// the loop, whose thread keeps serving its other sources and timers, and nothing blocks in poll.
final class LoopConnectWaitTests: XCTestCase {
    let label = "C0:FF:EE:00:00:01 (LE random) via hci0"
    let domain = SocketDomain.l2cap(peer: "C0:FF:EE:00:00:01")

    func testTheLoopsConnectWaitTimesOutNamingThePeerAndTheLimitWhileTheLoopRunsOtherWork() async throws {
        let pair = try SocketPair()
        XCTAssertGreaterThan(pair.fillA(), 0)
        let loop = try EventLoop()
        // Work posted to the loop while the connect waits runs at once: the wait holds no thread.
        let ranDuringTheWait = Lock(false)
        let start = ContinuousClock.now
        do {
            try await withLinkLoop(loop) { () async throws(TransportError) in
                _ = loop.schedule(atNanoseconds: monotonicNanoseconds() + 50_000_000) { ranDuringTheWait.withLock { $0 = true } }
                try await ATTBearer.waitForConnection(fd: pair.a, label: label, timeout: 0.3, domain: domain, on: loop)
            }
            XCTFail("POLLOUT came on a socket whose send buffer is full")
        } catch {
            XCTAssertEqual(error, .connectTimedOut(peer: label, seconds: 0.3))
        }
        let took = ContinuousClock.now - start
        XCTAssertGreaterThanOrEqual(took, .milliseconds(295), "returned before its limit")
        XCTAssertLessThan(took, .seconds(3))
        XCTAssertTrue(ranDuringTheWait.withLock { $0 }, "the loop did not run a timer while the connect waited")
    }

    func testTheLoopsConnectWaitEndsWhenTheSocketTakesDataAndReportsTheSocketError() async throws {
        let loop = try EventLoop()
        let pair = try SocketPair()
        pair.fillA()
        let b = pair.b
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { drainDatagrams(b) }
        let start = ContinuousClock.now
        try await ATTBearer.waitForConnection(fd: pair.a, label: label, timeout: 10, domain: domain, on: loop)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(5))

        let gone = try SocketPair()
        gone.fillA()
        gone.closeB()
        do {
            try await ATTBearer.waitForConnection(fd: gone.a, label: label, timeout: 5, domain: domain, on: loop)
            XCTFail("no error from a socket whose peer is gone")
        } catch {
            guard case .socket(let e) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(e.syscall, "connect")
            XCTAssertEqual(e.errnoName, "ECONNRESET")
            XCTAssertEqual(e.context, "connecting to \(label)")
        }
    }
}

final class HCICommandWaitTests: XCTestCase {
    let adapter = HCIAdapter(index: 0, name: "hci0", address: BluetoothAddress(uncheckedBytes: [0, 0xAA, 1, 1, 0, 1]), isUp: true,
                             supportsLE: true, supportsBREDR: false, aclMTU: 27, aclPackets: 8, bus: "virtual")

    /// An HCISocket on `pair.a`.
    func hci(_ pair: SocketPair) -> HCISocket {
        pair.handOverA()
        return HCISocket(adopting: pair.a, adapter: adapter)
    }

    /// An HCI event packet (Core Spec 5.4 Vol 4 Part E §5.4.4).
    func event(_ code: UInt8, _ parameters: [UInt8]) -> [UInt8] { [0x04, code, UInt8(parameters.count)] + parameters }

    func testACommandNobodyAnswersFailsNamingTheCommandAndNoAnswerAfterItsTimeout() throws {
        let pair = try SocketPair()
        let socket = hci(pair)
        let command = HCICommand.leSetScanEnable(true)
        // Events that are not its answer do not end the wait: a Command Complete for another command, an
        // advertising report, a malformed packet.
        pair.sendB(event(0x0E, [1, 0x0B, 0x20, 0x00]))
        pair.sendB(event(0x3E, [0x02, 0x00]))
        pair.sendB([0x04, 0x0E])
        let start = ContinuousClock.now
        do {
            try socket.run(command, timeout: 0.2)
            XCTFail("a command nobody answered succeeded")
        } catch {
            XCTAssertEqual(error, .hciCommandFailed(command: "LE Set Scan Enable", adapter: "hci0", status: nil,
                                                    detail: "no answer (Command Complete or Command Status) within 0.2 s: the controller is not responding; check it with `btmgmt -i hci0 info` and reset it with `sudo hciconfig hci0 reset`"))
            XCTAssertEqual(error.description, "LE Set Scan Enable on hci0 failed: no answer (Command Complete or Command Status) within 0.2 s: the controller is not responding; check it with `btmgmt -i hci0 info` and reset it with `sudo hciconfig hci0 reset`")
        }
        let took = ContinuousClock.now - start
        XCTAssertGreaterThanOrEqual(took, .milliseconds(195), "returned before its limit")
        XCTAssertLessThan(took, .seconds(2))
        // The command went out as an HCI command packet: type 0x01, opcode 0x200C little-endian, 2 parameter bytes.
        XCTAssertEqual(pair.receiveB(), [0x01, 0x0C, 0x20, 0x02, 0x01, 0x00])
    }

    func testAnAnswerThatComesIsParsedCommandCompleteAndCommandStatusWithAndWithoutErrors() throws {
        let pair = try SocketPair()
        let socket = hci(pair)
        // A controller on the other end: reads each command and answers per `answers`, on its own thread.
        let readBDAddr = HCICommand(ogf: 0x04, ocf: 0x0009, name: "Read BD_ADDR")
        let answers: [[[UInt8]]] = [
            // Read BD_ADDR: an unrelated event first, then Command Complete with status 0 and the address.
            [event(0x3E, [0x02, 0x00]), event(0x0E, [1, 0x09, 0x10, 0x00, 6, 5, 4, 3, 2, 1])],
            // LE Set Advertising Enable: Command Status 0x0C (Command Disallowed).
            [event(0x0F, [0x0C, 1, 0x0A, 0x20])],
            // LE Set Scan Parameters: Command Complete with status 0x12 (Invalid HCI Command Parameters).
            [event(0x0E, [1, 0x0B, 0x20, 0x12])],
            // LE Set Scan Enable: Command Status 0 (pending, accepted).
            [event(0x0F, [0x00, 1, 0x0C, 0x20])],
        ]
        let received = Lock<[[UInt8]]>([])
        let controller = DispatchSemaphore(value: 0)
        let b = pair.b
        DispatchQueue.global().async {
            for reply in answers {
                guard let command = receiveDatagram(b) else { break }
                received.withLock { $0.append(command) }
                for e in reply { sendDatagram(b, e) }
            }
            controller.signal()
        }
        XCTAssertEqual(try socket.run(readBDAddr, timeout: 5), [6, 5, 4, 3, 2, 1])
        do {
            try socket.run(.leSetAdvertisingEnable(true), timeout: 5)
            XCTFail("a Command Status error passed")
        } catch {
            XCTAssertEqual(error, .hciCommandFailed(command: "LE Set Advertising Enable", adapter: "hci0", status: 0x0C, detail: hciStatusMeaning(0x0C)))
            XCTAssertTrue(error.description.hasPrefix("LE Set Advertising Enable on hci0 failed with HCI status 0x0C: Command Disallowed"), error.description)
        }
        do {
            try socket.run(.leSetScanParameters(active: true), timeout: 5)
            XCTFail("a Command Complete error passed")
        } catch {
            XCTAssertEqual(error.description, "LE Set Scan Parameters on hci0 failed with HCI status 0x12: Invalid HCI Command Parameters")
        }
        XCTAssertEqual(try socket.run(.leSetScanEnable(false), timeout: 5), [])
        XCTAssertEqual(controller.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(received.withLock { $0.map { Array($0.prefix(3)) } },
                       [[0x01, 0x09, 0x10], [0x01, 0x0A, 0x20], [0x01, 0x0B, 0x20], [0x01, 0x0C, 0x20]])
    }
}
