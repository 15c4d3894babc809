// The benches' bare loop and plain peer: round trips, commands counted, bounded waits that name what they waited
// for, and the loop's answers to a peer's own PDUs (Core Spec 5.4 Vol 3 Part F §3.3, §3.4.1.1, §3.4.7.2).
import ATTStack
import BareATT
import CBlueZSocket
import Foundation
import LinuxBluetooth
import LinkCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// One end of a socket pair that the test plays as the peer, sending and reading PDUs through the codec.
final class FarEnd {
    private(set) var fd: Int32
    init(_ fd: Int32) { self.fd = fd }
    deinit { close() }

    func close() {
        if fd >= 0 { _ = cbz_close(fd) }
        fd = -1
    }

    func send(_ pdu: ATTPDU) {
        let bytes = pdu.bytes
        XCTAssertEqual(bytes.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }, bytes.count)
    }

    /// The next PDU on the socket, decoded; nil when none is waiting.
    func next() throws -> ATTPDU? {
        var buffer = [UInt8](repeating: 0, count: 1024)
        var truncated: Int32 = 0
        let n = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
        guard n > 0 else { return nil }
        return try ATTPDU.decode(Array(buffer[..<n]))
    }
}

final class BareATTTests: XCTestCase {
    var peer: PlainPeer!

    override func setUpWithError() throws {
        peer = try PlainPeer(path: "/tmp/bare-att-tests-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock")
    }

    override func tearDown() {
        peer.close()
    }

    /// A bare loop on a socket pair whose other end the test plays.
    func pair(timeout: Double = 0.2) throws -> (BareLoop, FarEnd) {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(cbz_unix_socketpair(&fds), 0)
        return (BareLoop(borrowing: fds[0], label: "pair", timeout: timeout), FarEnd(fds[1]))
    }

    func testWriteRequestRoundTripsAndTheCounterReadThem() throws {
        let loop = try BareLoop(connectingTo: peer.path, timeout: 5)
        defer { loop.close() }
        try loop.exchangeMTU(clientRxMTU: 517)
        try loop.writeRequests(handle: PlainPeer.sinkHandle, value: [1, 2, 3], count: 250)
        XCTAssertEqual(try loop.readCounter(handle: PlainPeer.counterHandle), 250)
        XCTAssertEqual(peer.writes, 250)
        XCTAssertEqual(peer.writeCommands, 0)
    }

    func testThePeerCountsEveryWriteCommandOverEveryConnection() throws {
        let first = try BareLoop(connectingTo: peer.path, timeout: 5)
        let second = try BareLoop(connectingTo: peer.path, timeout: 5)
        defer { first.close(); second.close() }
        // More than a socket buffer holds, so that the sends wait for POLLOUT on the way.
        try first.writeCommands(handle: PlainPeer.sinkHandle, value: [UInt8](repeating: 0xAB, count: 200), count: 20_000)
        try second.writeCommands(handle: PlainPeer.sinkHandle, value: [0x01], count: 500)
        try peer.waitUntil(writeCommands: 20_500, timeout: 10)
        XCTAssertEqual(peer.writeCommands, 20_500)
        XCTAssertEqual(try second.readCounter(handle: PlainPeer.counterHandle), 20_500)
    }

    func testWaitingForCommandsThePeerNeverGetsTimesOutNamingTheCountAndTheLimit() throws {
        let loop = try BareLoop(connectingTo: peer.path, timeout: 5)
        defer { loop.close() }
        try loop.writeCommands(handle: PlainPeer.sinkHandle, value: [0x01], count: 3)
        try peer.waitUntil(writeCommands: 3, timeout: 5)
        XCTAssertThrowsError(try peer.waitUntil(writeCommands: 4, timeout: 0.1)) { error in
            XCTAssertEqual(error as? BareATTError, .timeout(.writeCommandsCounted(4), seconds: 0.1))
            XCTAssertEqual("\(error)", "timed out after 0.1 s waiting for the plain peer to count 4 Write Commands")
        }
    }

    func testThePeerAnswersExchangeMTUAndRequestsItDoesNotServe() throws {
        let fd = cbz_unix_socket()
        XCTAssertEqual(cbz_unix_connect(fd, peer.path), 0)
        let far = FarEnd(fd)
        var revents: Int16 = 0
        far.send(.exchangeMTURequest(clientRxMTU: 100))
        XCTAssertEqual(cbz_poll_one(fd, CBZ_POLLIN, 5000, &revents), 1)
        XCTAssertEqual(try far.next(), .exchangeMTUResponse(serverRxMTU: 517))
        far.send(.findInformationRequest(ATTHandleRange(start: 1, end: 0xFFFF)))
        XCTAssertEqual(cbz_poll_one(fd, CBZ_POLLIN, 5000, &revents), 1)
        XCTAssertEqual(try far.next(), .errorResponse(requestOpcode: .findInformationRequest, handle: 0, error: .requestNotSupported))
    }

    func testAPeerThatStopsAnsweringTimesOutNamingTheResponse() throws {
        let (loop, far) = try pair()
        XCTAssertThrowsError(try loop.writeRequests(handle: 0x0012, value: [1], count: 1)) { error in
            XCTAssertEqual(error as? BareATTError, .timeout(.response, seconds: 0.2))
            XCTAssertEqual("\(error)", "timed out after 0.2 s waiting for a response in the bare loop")
        }
        XCTAssertEqual(try far.next(), .writeRequest(handle: 0x0012, value: [1]))
    }

    func testAPeerThatStopsReadingTimesOutNamingTheSocketThatTookNoMoreData() throws {
        let (loop, far) = try pair()
        defer { withExtendedLifetime(far) {} }
        XCTAssertThrowsError(try loop.writeCommands(handle: 0x0012, value: [UInt8](repeating: 0, count: 200), count: 1_000_000)) { error in
            XCTAssertEqual(error as? BareATTError, .timeout(.socketWritable, seconds: 0.2))
            XCTAssertEqual("\(error)", "timed out after 0.2 s waiting for the bare loop's socket to take more data")
        }
    }

    func testThePeersOwnRequestIsAnsweredWithRequestNotSupportedAndItsIndicationConfirmed() throws {
        let (loop, far) = try pair()
        // Queued before the loop's request: what a peer that is also a client sends (a notification, an
        // indication, a request of its own), then the Write Response the loop waits for.
        far.send(.handleValueNotification(handle: 0x0020, value: [9]))
        far.send(.handleValueIndication(handle: 0x0021, value: [8]))
        far.send(.readRequest(handle: 0x0003))
        far.send(.writeResponse)
        try loop.writeRequests(handle: 0x0012, value: [1, 2], count: 1)
        XCTAssertEqual(try far.next(), .writeRequest(handle: 0x0012, value: [1, 2]))
        XCTAssertEqual(try far.next(), .handleValueConfirmation)
        XCTAssertEqual(try far.next(), .errorResponse(requestOpcode: .readRequest, handle: 0, error: .requestNotSupported))
        XCTAssertNil(try far.next(), "nothing else: the notification is skipped")
    }

    func testAnAnswerThatIsNotTheResponseFailsNamingBoth() throws {
        let (loop, far) = try pair()
        far.send(.readResponse(value: [1]))
        XCTAssertThrowsError(try loop.writeRequests(handle: 0x0012, value: [1], count: 1)) { error in
            XCTAssertEqual(error as? BareATTError, .unexpectedAnswer(request: .writeRequest, handle: 0x0012, received: .readResponse))
            XCTAssertEqual("\(error)", "the bare loop's Write Request got opcode 0x0B instead of a Write Response")
        }
        far.send(.writeResponse)
        XCTAssertThrowsError(try loop.readCounter(handle: 0x0014)) { error in
            XCTAssertEqual("\(error)", "the bare loop's Read Request of the counter 0x0014 got opcode 0x13 instead of a Read Response")
        }
    }

    func testAPeerThatClosesEndsTheLoopNamingTheConnectionOrTheSyscall() throws {
        let (loop, far) = try pair(timeout: 5)
        // The far end closes while the loop waits for its answer: recv returns 0.
        let fd = far.fd
        let closer = Thread { usleep(50_000); _ = cbz_shutdown(fd) }
        closer.start()
        XCTAssertThrowsError(try loop.readCounter(handle: 0x0014)) { error in
            XCTAssertEqual(error as? BareATTError, .closedByPeer(label: "pair"))
            XCTAssertEqual("\(error)", "the peer closed the bare loop's connection to pair")
        }
        // Sending to a far end already closed: the syscall and its errno.
        let (second, gone) = try pair()
        gone.close()
        XCTAssertThrowsError(try second.writeCommands(handle: 0x0012, value: [1], count: 1)) { error in
            XCTAssertEqual(error as? BareATTError, .syscall("send", .brokenPipe, during: .sending))
            XCTAssertEqual("\(error)", "the bare loop's send: send failed with EPIPE (Broken pipe)")
        }
    }

    func testConnectingWhereNoPeerListensFailsNamingTheSyscallAndErrno() {
        XCTAssertThrowsError(try BareLoop(connectingTo: "/tmp/bare-att-tests-nobody-\(getpid()).sock", timeout: 1)) { error in
            guard case .syscall(let name, let errno, let step)? = error as? BareATTError else { return XCTFail("\(error)") }
            XCTAssertEqual(name, "connect")
            XCTAssertEqual(errno, .noSuchFileOrDirectory)
            XCTAssertEqual(step, .connecting(path: "/tmp/bare-att-tests-nobody-\(getpid()).sock"))
        }
    }
}
