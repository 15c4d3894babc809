// This machine's IPv4 addresses without Foundation, checked against Foundation's own list.
import Foundation
import HostEnvironment
import XCTest

final class LocalAddressesTests: XCTestCase {
    func testLocalIPv4AddressesAreHostsIPv4AddressesInItsOrder() {
        let foundations = Host.current().addresses.filter { !$0.contains(":") }
        XCTAssertEqual(localIPv4Addresses(), foundations)
        XCTAssertFalse(localIPv4Addresses().contains("127.0.0.1"))
    }
}
