import TestSupport
import Foundation
import JSON
import XCTest
@testable import ATTStack
@testable import LinuxBluetooth
import LinkCore

/// Errors a user can act on: each names the syscall, errno and what to do. The Bluetooth ones are real here
/// (this kernel has no Bluetooth: EAFNOSUPPORT); on a Bluetooth kernel the same tests check the next error.
final class BearerErrorTests: XCTestCase {
    private func socketError(_ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) -> SocketError? {
        do {
            try body()
            XCTFail("expected an error", file: file, line: line)
        } catch let e as TransportError {
            if case .socket(let s) = e { return s }
            XCTFail("expected a socket error, got \(e)", file: file, line: line)
        } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
        }
        return nil
    }

    private let noBluetooth = "this kernel has no Bluetooth support (CONFIG_BT is off or the bluetooth module is not loaded): try `sudo modprobe bluetooth`, or use a kernel built with Bluetooth"

    func testLEConnectOnAKernelWithoutBluetooth() throws {
        let address = try BluetoothAddress(parsing: "00:AA:01:01:00:01")
        if kernelHasBluetooth() {
            XCTAssertThrowsError(try ATTBearer.connect(to: address, adapter: "hci999")) { error in
                guard case .noSuchAdapter("hci999", _)? = error as? TransportError else { return XCTFail("\(error)") }
            }
            return
        }
        let e = socketError { _ = try ATTBearer.connect(to: address, type: .random, adapter: "hci0", timeout: 1) }
        XCTAssertEqual(e?.errnoName, "EAFNOSUPPORT")
        XCTAssertEqual(e?.syscall, "socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP)")
        XCTAssertEqual(e?.description, "opening an ATT socket for 00:AA:01:01:00:01 (LE random): socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP) failed with EAFNOSUPPORT (Address family not supported by protocol): \(noBluetooth)")
    }

    func testEnhancedBearerConnectOnAKernelWithoutBluetooth() throws {
        let address = try BluetoothAddress(parsing: "00:AA:01:01:00:01")
        if kernelHasBluetooth() {
            XCTAssertThrowsError(try ATTBearer.connectEnhanced(to: address, adapter: "hci999")) { error in
                guard case .noSuchAdapter("hci999", _)? = error as? TransportError else { return XCTFail("\(error)") }
            }
            return
        }
        let e = socketError { _ = try ATTBearer.connectEnhanced(to: address, type: .random, adapter: "hci0", timeout: 1) }
        XCTAssertEqual(e?.errnoName, "EAFNOSUPPORT")
        XCTAssertEqual(e?.description, "opening an Enhanced ATT bearer (ECRED, PSM 0x0027) for 00:AA:01:01:00:01 (LE random): socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP) failed with EAFNOSUPPORT (Address family not supported by protocol): \(noBluetooth)")
    }

    func testLEListenerAdaptersAndRawHCIOnAKernelWithoutBluetooth() {
        if kernelHasBluetooth() {
            XCTAssertThrowsError(try HCIAdapter.resolve("hci999")) { error in
                guard case .noSuchAdapter? = error as? TransportError else { return XCTFail("\(error)") }
            }
            return
        }
        XCTAssertEqual(socketError { _ = try ATTBearerListener.le(adapter: "hci1") }?.advice, noBluetooth)
        let list = socketError { _ = try HCIAdapter.list() }
        XCTAssertEqual(list?.syscall, "socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)")
        XCTAssertEqual(list?.advice, noBluetooth)
        XCTAssertEqual(socketError { _ = try HCISocket(adapter: "hci0") }?.errnoName, "EAFNOSUPPORT")
        XCTAssertEqual(socketError { _ = try LEScanner.scan(adapter: "hci0", seconds: 0.1) }?.errnoName, "EAFNOSUPPORT")
        let report = AdaptersReport.collect()
        XCTAssertEqual(report.adapters, [])
        XCTAssertTrue(report.text.hasPrefix("adapters: none can be listed: listing Bluetooth adapters: socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI) failed with EAFNOSUPPORT"), report.text)
        XCTAssertEqual(try parseJSON(report.json), .object([("adapters", []), ("error", .string(report.error ?? "?"))]))
    }

    func testTheSentencesForEachBluetoothFailure() {
        let peer = SocketDomain.l2cap(peer: "00:AA:01:01:00:01")
        XCTAssertEqual(LinuxBluetooth.socketError("connect", ECONNREFUSED, "connecting to 00:AA:01:01:00:01 (LE public) via hci0", peer).description,
                       "connecting to 00:AA:01:01:00:01 (LE public) via hci0: connect failed with ECONNREFUSED (Connection refused): 00:AA:01:01:00:01 did not accept the connection (the kernel also reports an LE connection attempt that timed out this way): check that it is advertising as connectable and in range")
        let busy = LinuxBluetooth.socketError("connect", EBUSY, "connecting", peer)
        XCTAssertEqual(busy.errnoName, "EBUSY")
        XCTAssertTrue(busy.advice.contains("already holds the ATT channel of a connection to 00:AA:01:01:00:01"), busy.advice)
        XCTAssertTrue(busy.advice.contains("`sudo systemctl stop bluetooth`"), busy.advice)
        let perm = LinuxBluetooth.socketError("socket/bind(BTPROTO_HCI, HCI_CHANNEL_RAW)", EPERM, "opening a raw HCI socket on hci0", .hci(adapter: "hci0"))
        XCTAssertTrue(perm.advice.hasSuffix("run `sudo setcap cap_net_raw,cap_net_admin+ep \(Capabilities.executablePath())`, or run as root"), perm.advice)
        XCTAssertTrue(LinuxBluetooth.socketError("recv", ETIMEDOUT, "receiving", peer).advice.contains("supervision timeout"))
        // EACCES on an established link is the kernel's Authentication Failure (0x05), not a missing capability.
        let auth = LinuxBluetooth.socketError("recv", EACCES, "the connection to 00:AA:01:01:00:01 ended", peer).advice
        XCTAssertTrue(auth.hasPrefix("the link to 00:AA:01:01:00:01 ended with an authentication failure (HCI 0x05)"), auth)
        XCTAssertFalse(auth.contains("setcap"), auth)
        XCTAssertTrue(LinuxBluetooth.socketError("socket", EACCES, "opening", peer).advice.contains("CAP_NET_RAW"))
        // So is EACCES as a non-blocking connect's outcome (its SO_ERROR): the link ended while it was made, pairing
        // having failed before the channel opened (the VM's pair scenario on a slow machine); other errnos stay the connect's.
        let whileMade = ATTBearer.connectFailure(EACCES, label: "00:AA:01:01:00:01 (LE public) via hci0", domain: peer)
        XCTAssertTrue(whileMade.isAuthenticationFailure)
        XCTAssertTrue(whileMade.advice.hasPrefix("the link to 00:AA:01:01:00:01 ended with an authentication failure (HCI 0x05)"), whileMade.advice)
        XCTAssertFalse(whileMade.advice.contains("setcap"), whileMade.advice)
        XCTAssertEqual(whileMade.context, "connecting to 00:AA:01:01:00:01 (LE public) via hci0")
        let refused = ATTBearer.connectFailure(ECONNREFUSED, label: "00:AA:01:01:00:01 (LE public) via hci0", domain: peer)
        XCTAssertEqual(refused.syscall, "connect")
        XCTAssertFalse(refused.isAuthenticationFailure)
        // The one predicate behind that advice, the GATT client's disconnect and the CLI's exit status 6.
        XCTAssertTrue(SocketError(syscall: "send", errno: .permissionDenied, context: "").isAuthenticationFailure)
        XCTAssertTrue(SocketError(syscall: "recvmsg", errno: .permissionDenied, context: "").isAuthenticationFailure)
        XCTAssertFalse(SocketError(syscall: "socket", errno: .permissionDenied, context: "").isAuthenticationFailure)
        XCTAssertFalse(SocketError(syscall: "send", errno: .brokenPipe, context: "").isAuthenticationFailure)
        XCTAssertEqual(LinuxBluetooth.socketError("connect", EHOSTUNREACH, "c", peer).advice, "no powered adapter can reach the peer: check `mirror adapters` (is an adapter present and up?)")
        XCTAssertEqual(TransportError.connectTimedOut(peer: "00:AA:01:01:00:09 (LE public) via hci0", seconds: 2.5).description,
                       "connecting to 00:AA:01:01:00:09 (LE public) via hci0 got no answer in 2.5 s: the peer is not reachable; check that it is advertising as connectable, in range, and not already connected to another central")
        XCTAssertEqual(TransportError.adapterDown("hci1").description,
                       "adapter hci1 is down: power it on with `sudo btmgmt -i hci1 power on` (or `sudo hciconfig hci1 up`)")
        XCTAssertEqual(TransportError.noSuchAdapter("hci5", available: ["hci0", "hci1"]).description,
                       "no such adapter hci5: adapters here: hci0, hci1 (see `mirror adapters`)")
        XCTAssertEqual(TransportError.noSuchAdapter("hci0", available: []).description,
                       "no such adapter hci0: this machine has no Bluetooth adapter (see `mirror adapters`)")
        XCTAssertEqual(TransportError.hciCommandFailed(command: "LE Set Advertising Enable", adapter: "hci1", status: 0x0C, detail: hciStatusMeaning(0x0C)).description,
                       "LE Set Advertising Enable on hci1 failed with HCI status 0x0C: Command Disallowed (advertising or scanning is already running, or another host owns the state: is bluetoothd using this adapter?)")
        XCTAssertEqual(SocketError(syscall: "send", errno: Errno(4000), context: "x").description, "x: send failed with errno 4000 (Unknown error)")
    }

    func testAdapterSelectorsParse() {
        XCTAssertEqual(HCIAdapter.index(fromName: "hci0"), 0)
        XCTAssertEqual(HCIAdapter.index(fromName: "12"), 12)
        XCTAssertNil(HCIAdapter.index(fromName: "hci"))
        XCTAssertNil(HCIAdapter.index(fromName: "hcix"))
        XCTAssertNil(HCIAdapter.index(fromName: "hci-1"))
        XCTAssertThrowsError(try HCIAdapter.resolve("hciZ")) { error in
            guard case .invalidTarget(let e)? = error as? TransportError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.position, 1)
            XCTAssertTrue(e.problem.hasPrefix("an adapter is hciN or its address"), e.problem)
        }
    }
}

/// "unix:/path" and "AA:BB:CC:DD:EE:FF", and which character is wrong.
final class BearerTargetTests: XCTestCase {
    private func error(_ text: String) -> BearerTargetError? {
        do { _ = try BearerTarget(parsing: text); return nil } catch { return error }
    }

    func testValidTargets() throws {
        XCTAssertEqual(try BearerTarget(parsing: "unix:/tmp/sim.sock"), .unix(path: "/tmp/sim.sock"))
        XCTAssertEqual(try BearerTarget(parsing: "unix:relative.sock"), .unix(path: "relative.sock"))
        let t = try BearerTarget(parsing: "00:aa:01:01:00:0f")
        XCTAssertEqual(t, .bluetooth(BluetoothAddress(bytes: [0x00, 0xAA, 0x01, 0x01, 0x00, 0x0F])!))
        XCTAssertEqual(t.description, "00:AA:01:01:00:0F")
        XCTAssertEqual(BearerTarget.unix(path: "/x").description, "unix:/x")
        XCTAssertEqual(BluetoothAddress.any.description, "00:00:00:00:00:00")
        XCTAssertNil(BluetoothAddress(bytes: [1, 2, 3]))
    }

    func testWhichCharacterIsWrong() {
        XCTAssertEqual(error("00:AA:01:01:00:0G")?.description, "invalid target \"00:AA:01:01:00:0G\": character 17: 'G' is not a hexadecimal digit")
        XCTAssertEqual(error("00-AA-01-01-00-01")?.position, 3)
        XCTAssertEqual(error("00-AA-01-01-00-01")?.problem, "expected ':' between bytes, found '-'")
        XCTAssertEqual(error("0:AA:01:01:00:01")?.position, 2)
        XCTAssertEqual(error("0:AA:01:01:00:01")?.problem, "each byte needs two hex digits, found ':' early")
        XCTAssertEqual(error("00:AA:01:01:00:01:02")?.position, 18)
        XCTAssertEqual(error("00:AA:01:01:00:01:02")?.problem, "unexpected ':' after the sixth byte")
        XCTAssertEqual(error("00:AA:01")?.description, "invalid target \"00:AA:01\": too short: 3 of 6 bytes; expected six hex bytes as in 00:AA:01:01:00:01")
        XCTAssertEqual(error("00:AA:01:01:00:0")?.problem, "too short: it ends inside byte 6 of 6; expected six hex bytes as in 00:AA:01:01:00:01")
        XCTAssertEqual(error("")?.position, nil)
        XCTAssertEqual(error("unix:")?.problem, "unix: needs a socket path, as in unix:/tmp/mirror-sim.sock")
        XCTAssertEqual(error("/tmp/sim.sock")?.problem, "a socket path needs the unix: prefix, as in unix:/tmp/sim.sock")
        let long = "unix:/" + String(repeating: "a", count: 120)
        XCTAssertEqual(error(long)?.position, 113)
        XCTAssertEqual(error(long)?.problem, "the socket path is 121 bytes; AF_UNIX paths hold at most 107")
        XCTAssertEqual(error("ZZ:AA:01:01:00:01")?.position, 1)
        XCTAssertEqual(error("00:AA:01:01:00:01 ")?.position, 18)
    }

    func testAddressTypeAndSecurityNames() {
        XCTAssertEqual(LEAddressType(name: "Random"), .random)
        XCTAssertEqual(LEAddressType(name: "public")?.rawValue, 1)
        XCTAssertNil(LEAddressType(name: "static"))
        XCTAssertEqual(BTSecurityLevel(name: "medium")?.rawValue, 2)
        XCTAssertNil(BTSecurityLevel(name: "max"))
    }

    func testAddressCodableAsText() throws {
        let a = try BluetoothAddress(parsing: "00:AA:01:01:00:01")
        let data = try JSONEncoder().encode([a])
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "[\"00:AA:01:01:00:01\"]")
        XCTAssertEqual(try JSONDecoder().decode([BluetoothAddress].self, from: data), [a])
        XCTAssertThrowsError(try JSONDecoder().decode([BluetoothAddress].self, from: Data("[\"00:AA\"]".utf8)))
    }
}
