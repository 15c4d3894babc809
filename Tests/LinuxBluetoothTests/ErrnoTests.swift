// The typed errno: named values equal to the C constants, the C name and the C library's words, and
// SocketError's sentence and comparisons built on it.
import CBlueZSocket
import Glibc
import XCTest
@testable import LinuxBluetooth
import LinkCore

final class ErrnoTests: XCTestCase {
    func testNamedValuesAreTheCConstantsWithTheirNamesAndMeanings() {
        let table: [(Errno, Int32, String)] = [
            (.wouldBlock, EAGAIN, "EAGAIN"), (.brokenPipe, EPIPE, "EPIPE"), (.connectionReset, ECONNRESET, "ECONNRESET"),
            (.notConnected, ENOTCONN, "ENOTCONN"), (.busy, EBUSY, "EBUSY"), (.interrupted, EINTR, "EINTR"),
            (.addressFamilyNotSupported, EAFNOSUPPORT, "EAFNOSUPPORT"), (.connectionRefused, ECONNREFUSED, "ECONNREFUSED"),
            (.timedOut, ETIMEDOUT, "ETIMEDOUT"), (.noSuchDevice, ENODEV, "ENODEV"), (.blockedByRFKill, ERFKILL, "ERFKILL"),
        ]
        for (value, code, name) in table {
            XCTAssertEqual(value.rawValue, code)
            XCTAssertEqual(value, Errno(code))
            XCTAssertEqual(value.name, name)
            XCTAssertEqual("\(value)", name)
        }
        XCTAssertEqual(Errno.brokenPipe.meaning, "Broken pipe")
        XCTAssertEqual(Errno.connectionRefused.meaning, "Connection refused")
        XCTAssertEqual(Errno(4000).name, "errno 4000")
        XCTAssertNotEqual(Errno.brokenPipe, .connectionReset)
    }

    func testCurrentIsTheCallingThreadsErrno() {
        XCTAssertLessThan(cbz_close(-1), 0)
        XCTAssertEqual(Errno.current, .badFileDescriptor)
    }

    func testSocketErrorSaysTheSyscallTheErrnoNameAndItsMeaning() {
        let e = SocketError(syscall: "send", errno: .brokenPipe, context: "sending a 3-byte PDU to unix:/x")
        XCTAssertEqual(e.description, "sending a 3-byte PDU to unix:/x: send failed with EPIPE (Broken pipe)")
        XCTAssertEqual(e.errnoName, "EPIPE")
        XCTAssertEqual(e.errnoMeaning, "Broken pipe")
        XCTAssertEqual(LinuxBluetooth.socketError("connect", ECONNREFUSED, "c", .unix(path: "/p")).errno, .connectionRefused)
    }
}
