// `mirror bonds list|remove`: the built `mirror` with XDG_STATE_HOME in a temporary directory (as CacheCommandTests
// runs `mirror cache`); the listing and removal in-process are BondingTests' (BondsListingTests.swift).
import ATTStack
import Bonding
import Foundation
import JSON
import LinuxBluetooth
@testable import MirrorCommandLine
import TestSupport
import XCTest

final class BondsCommandTests: XCTestCase {
    var home = ""
    var store: BondStore { BondStore(directory: home + "/mirror/bonds") }
    let adapter = try! BluetoothAddress(parsing: "00:1A:7D:DA:71:13")
    let peer = try! BluetoothAddress(parsing: "C4:F2:17:1A:1D:BB")

    override func setUpWithError() throws {
        home = NSTemporaryDirectory() + "mirror-bonds-cli-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    }
    override func tearDown() { try? FileManager.default.removeItem(atPath: home) }

    func mirror(_ arguments: [String]) throws -> ToolRun {
        try ToolProcess.run("mirror", arguments, environment: ["XDG_STATE_HOME": home], timeout: 60)
    }

    /// The lines of mirror's own bonds: bluetoothd's, on a machine that has some (run as root), are left out.
    func ownLines(_ run: ToolRun) -> [Substring] {
        run.stdout.split(separator: "\n").filter { !$0.contains(", held by bluetoothd  ") }
    }

    func bond(_ peer: BluetoothAddress, secure: Bool = false) -> Bond {
        let ltk = { (central: Bool) in
            LongTermKey(address: peer, addressType: secure ? .random : .public, type: secure ? .authenticatedP256 : .unauthenticatedLegacy,
                        central: central, encryptionSize: secure ? 16 : 7, ediv: 1, rand: 2, value: Array(0..<16))
        }
        return Bond(adapter: adapter, peer: peer, peerType: secure ? .random : .public,
                    longTermKeys: secure ? [ltk(true)] : [ltk(true), ltk(false)], identityResolvingKey: secure ? Array(16..<32) : nil,
                    bondedAt: 1_764_863_546, method: secure ? .numericComparison : .justWorks, keySize: secure ? 16 : 7, authenticated: secure)
    }

    func testListPrintsEachPeerWithItsKeysAndNoKeyValue() throws {
        let empty = try mirror(["bonds", "list"])
        XCTAssertEqual(empty.status, 0, empty.stderr)
        XCTAssertTrue(empty.stdout == "no bonds in \(home)/mirror/bonds\n" || ownLines(empty).isEmpty, empty.stdout)
        let secure = try BluetoothAddress(parsing: "D0:00:00:00:00:01")
        try store.save(bond(peer))
        try store.save(bond(secure, secure: true))
        let list = try mirror(["bonds", "list"])
        XCTAssertEqual(list.status, 0, list.stderr)
        XCTAssertEqual(ownLines(list), [
            "C4:F2:17:1A:1D:BB (public) on 00:1A:7D:DA:71:13: LTK (central, peripheral); key size 7, unauthenticated (just-works), bonded 2025-12-04T15:52:26Z  \(store.path(adapter: adapter, peer: peer))",
            "D0:00:00:00:00:01 (random) on 00:1A:7D:DA:71:13: LTK (both roles), IRK; key size 16, authenticated (numeric-comparison), bonded 2025-12-04T15:52:26Z  \(store.path(adapter: adapter, peer: secure))",
        ])
        XCTAssertFalse(list.stdout.contains("000102030405"), "no key value is printed")
        let json = try mirror(["bonds", "list", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let all = try parseJSON(json.stdout)
        XCTAssertEqual(all["directory"], .string(store.directory))
        let v: JSONValue = .object([("bonds", .array(all["bonds"]?.items?.filter { $0["heldBy"] == "mirror" } ?? []))])
        XCTAssertEqual(v["bonds"]?[1]?["peer"], "D0:00:00:00:00:01")
        XCTAssertEqual(v["bonds"]?[1]?["keys"], "LTK (both roles), IRK")
        XCTAssertEqual(v["bonds"]?[1]?["authenticated"], true)
        XCTAssertEqual(v["bonds"]?[1]?["heldBy"], "mirror")
        XCTAssertEqual(v["bonds"]?[0]?["keySize"], 7)
    }

    func testRemoveDeletesTheFileAndSaysTheKernelCopyWasNotTouched() throws {
        try store.save(bond(peer))
        let run = try mirror(["bonds", "remove", peer.description])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "removed \(store.path(adapter: adapter, peer: peer))")
        // No adapter 00:1A:7D:DA:71:13 on a test machine (or no Bluetooth in its kernel at all).
        XCTAssertTrue(lines.count == 2 && lines[1].hasPrefix("the kernel's copy of the bond with \(peer) on \(adapter) was not touched: "), run.stdout)
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.path(adapter: adapter, peer: peer)))
        let again = try mirror(["bonds", "remove", peer.description, "--json"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(try parseJSON(again.stdout), .object([("removed", []), ("kernel", []), ("bluetoothd", [])]))
        XCTAssertEqual(try mirror(["bonds", "remove", peer.description]).stdout, "no bond with \(peer) in \(store.directory)\n")
    }

    func testUsageErrors() throws {
        for (arguments, expected) in [(["bonds", "remove"], "missing TARGET"), (["bonds", "forget"], "unknown action \"forget\""),
                                      (["bonds", "remove", "unix:/tmp/x"], "invalid address"), (["bonds", "list", peer.description], "list takes no TARGET")] {
            let run = try mirror(arguments)
            XCTAssertEqual(run.status, 2, "\(arguments): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains(expected), "\(arguments): \(run.stderr)")
        }
    }

    func testEveryHelpExampleRuns() throws {
        try store.save(bond(peer))
        for (example, _) in bondsCommand.spec.examples {
            let run = try mirror(Array(example.split(separator: " ").map(String.init).dropFirst()))
            XCTAssertEqual(run.status, 0, "\(example): \(run.stderr)")
            XCTAssertFalse(run.stdout.isEmpty, example)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.path(adapter: adapter, peer: peer)), "the remove example removed it")
    }

    func testACorruptOrHostileFileIsListedAsIgnoredWithItsBytesEscaped() throws {
        try store.save(bond(peer))
        let file = store.path(adapter: adapter, peer: peer)
        let text = try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: "\"public\"", with: "\"\\u001b]0;owned\\u0007\\u001b[2J\"")
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        let hostileName = store.adapterDirectory(adapter) + "/\u{1B}[31mred.json"
        _ = FileManager.default.createFile(atPath: hostileName, contents: Data("{".utf8))
        let run = try mirror(["bonds", "list"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse(run.stdout.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" }, run.stdout)
        let lines = run.stdout.split(separator: "\n").filter { $0.contains(home) }
        XCTAssertEqual(lines.count, 2, run.stdout)
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("ignored (the bond file ") }, run.stdout)
        XCTAssertTrue(run.stdout.contains("C4:F2:17:1A:1D:BB.json is not usable: \"peerType\" "), run.stdout)
        // --json carries the text through the JSON writer's escapes.
        let json = try parseJSON(try mirror(["bonds", "list", "--json"]).stdout)
        XCTAssertNotNil(json["bonds"]?[0]?["ignored"]?.string)
    }

    /// Under bluetoothd a connection that asks for encryption says whose bond it uses (the coexistence rule).
    func testUnderBluetoothdTheNoteNamesItsBondOrHowToPair() throws {
        let bluez = home + "/var-lib-bluetooth-note"
        let other = try BluetoothAddress(parsing: "C1:02:03:04:05:06")
        let head = "bluetoothd runs: it holds the keys on this machine, so mirror loads none of its own bonds"
        XCTAssertEqual(BondKeys.daemonNote(peer: other, adapter: adapter, adapterName: "hci0", root: bluez),
                       "\(head); bluetoothd has no bond with \(other) on hci0: pair with `bluetoothctl pair \(other)`")
        try FileManager.default.createDirectory(atPath: "\(bluez)/\(adapter)/\(other)", withIntermediateDirectories: true)
        let info = "[General]\nAddressType=static\n\n[LongTermKey]\nKey=000102030405060708090A0B0C0D0E0F\nAuthenticated=0\nEncSize=16\nEDiv=0\nRand=0\n"
        _ = FileManager.default.createFile(atPath: "\(bluez)/\(adapter)/\(other)/info", contents: Data(info.utf8))
        XCTAssertEqual(BondKeys.daemonNote(peer: other, adapter: adapter, adapterName: "hci0", root: bluez),
                       "\(head); the link encrypts with bluetoothd's bond with \(other) (\(bluez)/\(adapter)/\(other)/info)")
    }

    /// More keys than one Load Long Term Keys takes: Bonding's typed error, reported as the CLI always said it.
    func testTooManyKeysIsReportedWithTheWayOut() {
        let report = ErrorReport(BondKeysError.tooManyKeys(adapter: "hci0", maximum: 2))
        XCTAssertEqual(report.status, .failure)
        XCTAssertEqual(report.message, "the bond store for hci0 holds more keys than Load Long Term Keys takes (2): `mirror bonds remove` some")
    }

    /// A resolvable private address finds the bond whose IRK resolves it (Vol 3 Part H §2.2.2), with a note naming the
    /// identity; a direct bond needs no note; an address no IRK resolves, a static random one and a public one do not.
    func testAResolvablePrivateAddressFindsItsBondedIdentity() throws {
        // Vol 3 Part H Appendix D.7: IRK ec0234a357c8ad05341010a60a397d9b (carried least significant octet first),
        // prand 708194, hash 0dfbaa.
        let identity = try BluetoothAddress(parsing: "C4:F2:17:1A:1D:BC")
        var b = bond(identity)
        b.identityResolvingKey = Array(ATTHex.bytes(parsing: "ec0234a357c8ad05341010a60a397d9b")!.reversed())
        try store.save(b)
        let rpa = try BluetoothAddress(parsing: "70:81:94:0D:FB:AA")
        let found = try XCTUnwrap(BondKeys.bond(in: store, adapter: adapter, peer: rpa, type: .random))
        XCTAssertEqual(found.0.peer, identity)
        XCTAssertEqual(found.1, "70:81:94:0D:FB:AA (resolvable private address) resolves to the bonded identity C4:F2:17:1A:1D:BC (public), bonded 2025-12-04T15:52:26Z")
        let direct = try XCTUnwrap(BondKeys.bond(in: store, adapter: adapter, peer: identity, type: .public))
        XCTAssertNil(direct.1, "found by its own address: nothing to say")
        XCTAssertNil(BondKeys.bond(in: store, adapter: adapter, peer: try BluetoothAddress(parsing: "70:81:94:0D:FB:AB"), type: .random))
        XCTAssertNil(BondKeys.bond(in: store, adapter: adapter, peer: try BluetoothAddress(parsing: "C0:81:94:0D:FB:AA"), type: .random), "static random")
        XCTAssertNil(BondKeys.bond(in: store, adapter: adapter, peer: rpa, type: .public), "a public address is never resolved")
    }
}
