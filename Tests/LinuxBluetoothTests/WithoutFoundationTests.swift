// What LinuxBluetooth does in place of full Foundation (which `mirror` no longer links), checked against
// Foundation itself: the same padding and trimming, and a thread that runs its body.
import Foundation
import LinuxBluetooth
import LinkCore
import Synchronization
import XCTest

final class WithoutFoundationTests: XCTestCase {
    func testPaddedCutsAndPadsAsNSStringPaddingDid() {
        for s in ["", "hci0", "down", "LE+BR/EDR", "acl 1021x10", "TX 251 octets 2120 µs", "a text longer than the widths"] {
            for n in [0, 1, 4, 5, 6, 11, 12, 20, 24] {
                XCTAssertEqual(s.padded(toLength: n), s.padding(toLength: n, withPad: " ", startingAt: 0), "\"\(s)\" to \(n)")
            }
        }
    }

    func testTrimmingWhitespaceTrimsWhatWhitespacesAndNewlinesTrims() {
        for s in ["bluetoothd\n", "  1\n", "\t\r\n", "", "a b", " \r\nhci0 \u{00A0}", "\u{2028}x\u{3000}", "0"] {
            XCTAssertEqual(s.trimmingWhitespace, s.trimmingCharacters(in: .whitespacesAndNewlines), "\"\(s)\"")
        }
    }

    func testADetachedThreadRunsItsBodyOnceOnAnotherThread() {
        let ran = Mutex<[UInt]>([])
        let done = DispatchSemaphore(value: 0)
        startDetachedThread {
            ran.withLock { $0.append(UInt(pthread_self())) }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success, "the thread's body did not run within 5 s")
        let threads = ran.withLock { $0 }
        XCTAssertEqual(threads.count, 1)
        XCTAssertNotEqual(threads.first, UInt(pthread_self()))
    }
}
