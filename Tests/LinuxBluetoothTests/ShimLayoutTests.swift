import TestSupport
import XCTest
import Glibc
import CBlueZSocket

/// The kernel structs the shim hands across keep C's layout (the kernel ABI; a Swift redeclaration of
/// sockaddr_l2 would be 13 bytes with stride 14, which is why the shim keeps every struct in C).
final class ShimLayoutTests: XCTestCase {
    func testSockaddrL2Is14BytesWithTheKernelsOffsets() {
        XCTAssertEqual(cbz_sizeof_sockaddr_l2(), 14)
        XCTAssertEqual(cbz_offsetof_sockaddr_l2("l2_psm"), 2)
        XCTAssertEqual(cbz_offsetof_sockaddr_l2("l2_bdaddr"), 4)
        XCTAssertEqual(cbz_offsetof_sockaddr_l2("l2_cid"), 10)
        XCTAssertEqual(cbz_offsetof_sockaddr_l2("l2_bdaddr_type"), 12)
        XCTAssertEqual(cbz_offsetof_sockaddr_l2("nonsense"), Int(bitPattern: UInt(bitPattern: -1)))
    }

    func testSockaddrHciAndBtSecurity() {
        XCTAssertEqual(cbz_sizeof_sockaddr_hci(), 6)   // family, dev, channel: 3 x u16
        XCTAssertEqual(cbz_sizeof_bt_security(), 2)    // level, key_size
    }

    func testHciDevInfoFieldsTheShimReads() {
        XCTAssertEqual(cbz_sizeof_hci_dev_info(), 92)
        XCTAssertEqual(cbz_offsetof_hci_dev_info("bdaddr"), 10)
        XCTAssertEqual(cbz_offsetof_hci_dev_info("flags"), 16)
        XCTAssertEqual(cbz_offsetof_hci_dev_info("type"), 20)
        XCTAssertEqual(cbz_offsetof_hci_dev_info("features"), 21)
        XCTAssertEqual(cbz_offsetof_hci_dev_info("acl_mtu"), 44)
        XCTAssertEqual(cbz_offsetof_hci_dev_info("acl_pkts"), 46)
    }

    func testConstantsThatImportAndTheOnesTheShimProvides() {
        XCTAssertEqual(AF_BLUETOOTH, 31)
        XCTAssertEqual(BTPROTO_L2CAP, 0)
        XCTAssertEqual(SOL_BLUETOOTH, 274)
        XCTAssertEqual(BT_SECURITY, 4)
        XCTAssertEqual(BT_SNDMTU, 12)
        XCTAssertEqual(BT_RCVMTU, 13)
        XCTAssertEqual(CBZ_LE_PUBLIC, 1)
        XCTAssertEqual(CBZ_LE_RANDOM, 2)
        XCTAssertEqual(CBZ_ATT_CID, 4)
        XCTAssertEqual(cbz_unix_path_max(), 107)
    }

    /// The shim's byte order against BlueZ's own ba2str, from libbluetooth.so.3 loaded here: the library and
    /// the CLI no longer link libbluetooth (nothing they call is in it; its headers are all they use).
    func testAddressByteOrderMatchesBlueZsPrinting() throws {
        let library = try XCTUnwrap(dlopen("libbluetooth.so.3", RTLD_NOW | RTLD_LOCAL), "libbluetooth3 (Debian, under libbluetooth-dev)")
        defer { dlclose(library) }
        typealias BA2Str = @convention(c) (UnsafePointer<bdaddr_t>, UnsafeMutablePointer<CChar>) -> Int32
        let ba2str = unsafeBitCast(try XCTUnwrap(dlsym(library, "ba2str")), to: BA2Str.self)
        let printed: [UInt8] = [0x00, 0xAA, 0x01, 0x01, 0x00, 0x01]
        var address = bdaddr_t()
        cbz_to_bdaddr(printed, &address)
        var out = [CChar](repeating: 0, count: 18)
        XCTAssertEqual(ba2str(&address, &out), 17)
        XCTAssertEqual(String(decoding: out.prefix(17).map { UInt8(bitPattern: $0) }, as: UTF8.self), "00:AA:01:01:00:01")
    }

    func testErrnoNames() {
        XCTAssertEqual(String(cString: cbz_errno_name(97)), "EAFNOSUPPORT")
        XCTAssertEqual(String(cString: cbz_errno_description(111)), "Connection refused")
        XCTAssertNil(cbz_errno_name(4000))
    }
}
