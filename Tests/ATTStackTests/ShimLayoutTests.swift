import XCTest
import CBlueZSocket

/// The kernel structs the shim hands across keep C's layout.
final class ShimLayoutTests: XCTestCase {
    func testSockaddrL2Is14Bytes() {
        XCTAssertEqual(cbz_sizeof_sockaddr_l2(), 14)
    }
}
