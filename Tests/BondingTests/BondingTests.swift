// The bond store's files (round trip, 0600/0700 and their tightening, atomic replace, list/remove, corrupt files
// named), private address resolution with the spec's ah sample, and bluetoothd's info files.
import ATTStack
import Foundation
import HostEnvironment
import JSON
import LinuxBluetooth
import LinkCore
@testable import Bonding
import XCTest

final class BondingTests: XCTestCase {
    var root = ""
    var store: BondStore { BondStore(directory: root + "/mirror/bonds") }
    let adapter = try! BluetoothAddress(parsing: "00:1A:7D:DA:71:13")
    let peer = try! BluetoothAddress(parsing: "C4:F2:17:1A:1D:BB")

    override func setUpWithError() throws {
        root = NSTemporaryDirectory() + "mirror-bonds-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }
    override func tearDown() { try? FileManager.default.removeItem(atPath: root) }

    func mode(_ path: String) throws -> Int {
        try XCTUnwrap((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue)
    }

    /// A legacy bond: both roles' LTKs, an IRK, a local CSRK.
    func legacyBond(peer: BluetoothAddress? = nil) -> Bond {
        let p = peer ?? self.peer
        return Bond(adapter: adapter, peer: p, peerType: .public,
                    longTermKeys: [LongTermKey(address: p, addressType: .public, type: .authenticatedLegacy, central: true, encryptionSize: 16,
                                               ediv: 0x1234, rand: 0xFEDC_BA98_7654_3210, value: Array(0..<16)),
                                   LongTermKey(address: p, addressType: .public, type: .authenticatedLegacy, central: false, encryptionSize: 16,
                                               ediv: 0x4321, rand: 1, value: Array(16..<32))],
                    identityResolvingKey: Array(32..<48),
                    signatureResolvingKeys: [SignatureResolvingKey(address: p, addressType: .public, type: .authenticatedLocal, value: Array(48..<64))],
                    bondedAt: 1_764_863_546, method: .passkeyEntry, keySize: 16, authenticated: true)
    }

    func testABondRoundTripsThroughItsFile() throws {
        let bond = legacyBond()
        try store.save(bond)
        XCTAssertEqual(try store.load(adapter: adapter, peer: peer), bond)
        XCTAssertNil(try store.load(adapter: adapter, peer: try BluetoothAddress(parsing: "C4:F2:17:1A:1D:BC")), "no file: no bond")
        let file = store.path(adapter: adapter, peer: peer)
        XCTAssertEqual(file, root + "/mirror/bonds/00:1A:7D:DA:71:13/C4:F2:17:1A:1D:BB.json")
        // Readable JSON, keys in hex as SMP carries them.
        let json = try parseJSON(bytes: Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        XCTAssertEqual(json["identityResolvingKey"], "202122232425262728292a2b2c2d2e2f")
        XCTAssertEqual(json["longTermKeys"]?[0]?["rand"], "fedcba9876543210")
        XCTAssertEqual(json["bonded"], "2025-12-04T15:52:26Z")
        XCTAssertEqual(json["method"], "passkey-entry")
        XCTAssertEqual(bond.keySummary, "LTK (central, peripheral), IRK, CSRK (local)")
        // A Secure Connections bond: one LTK for both roles, no IRK.
        var sc = legacyBond(peer: try BluetoothAddress(parsing: "D0:00:00:00:00:01"))
        sc.longTermKeys = [LongTermKey(address: sc.peer, addressType: .random, type: .unauthenticatedP256, central: true, encryptionSize: 7,
                                       ediv: 0, rand: 0, value: Array(repeating: 0xAB, count: 16))]
        sc.peerType = .random
        sc.identityResolvingKey = nil
        sc.signatureResolvingKeys = []
        sc.method = .justWorks
        sc.keySize = 7
        sc.authenticated = false
        try store.save(sc)
        XCTAssertEqual(try store.load(adapter: adapter, peer: sc.peer), sc)
        XCTAssertEqual(sc.keySummary, "LTK (both roles)")
    }

    func testFilesAre0600AndDirectories0700AndLooserOnesAreTightened() throws {
        try store.save(legacyBond())
        let file = store.path(adapter: adapter, peer: peer)
        XCTAssertEqual(try mode(file), 0o600)
        XCTAssertEqual(try mode(store.adapterDirectory(adapter)), 0o700)
        XCTAssertEqual(try mode(store.directory), 0o700)
        chmod(store.adapterDirectory(adapter), 0o755)
        chmod(store.directory, 0o777)
        chmod(file, 0o644)
        _ = try store.load(adapter: adapter, peer: peer)
        XCTAssertEqual(try mode(file), 0o600, "a looser file is tightened when read")
        try store.save(legacyBond())
        XCTAssertEqual(try mode(store.adapterDirectory(adapter)), 0o700, "a looser directory is tightened when written")
        XCTAssertEqual(try mode(store.directory), 0o700)
        XCTAssertEqual(try mode(file), 0o600)
    }

    func testSaveReplacesAtomicallyAndLeavesNoTemporaryFile() throws {
        try store.save(legacyBond())
        let file = store.path(adapter: adapter, peer: peer)
        let before = try FileManager.default.attributesOfItem(atPath: file)[.systemFileNumber] as? NSNumber
        var changed = legacyBond()
        changed.keySize = 12
        try store.save(changed)
        let after = try FileManager.default.attributesOfItem(atPath: file)[.systemFileNumber] as? NSNumber
        XCTAssertNotEqual(before, after, "a new inode renamed over the old file, not the old one rewritten")
        XCTAssertEqual(try store.load(adapter: adapter, peer: peer)?.keySize, 12)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: store.adapterDirectory(adapter)), ["C4:F2:17:1A:1D:BB.json"])
        // A symlink planted at the file's name is replaced by the rename, never written through.
        let target = root + "/elsewhere"
        _ = FileManager.default.createFile(atPath: target, contents: Data("untouched".utf8))
        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: target)
        XCTAssertThrowsError(try store.load(adapter: adapter, peer: peer)) { e in
            XCTAssertEqual(e as? BondStoreError, .corrupt(path: file, problem: "it is a symbolic link (refused)"))
        }
        try store.save(changed)
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "untouched")
        XCTAssertEqual(try store.load(adapter: adapter, peer: peer), changed)
    }

    func testListRemoveAndTheKeysForAnAdapter() throws {
        let second = try BluetoothAddress(parsing: "C4:F2:17:1A:1D:BC")
        try store.save(legacyBond())
        try store.save(legacyBond(peer: second))
        XCTAssertEqual(store.adapters(), [adapter])
        XCTAssertEqual(store.list(adapter: adapter).map(\.path), [store.path(adapter: adapter, peer: peer), store.path(adapter: adapter, peer: second)])
        let keys = store.keys(adapter: adapter)
        XCTAssertEqual(keys.longTermKeys.count, 4, "both roles of both peers")
        XCTAssertEqual(keys.identityResolvingKeys.map(\.address), [peer, second])
        XCTAssertTrue(keys.problems.isEmpty)
        XCTAssertNotNil(ManagementCommand.loadLongTermKeys(index: 0, keys: keys.longTermKeys))
        XCTAssertTrue(try store.remove(adapter: adapter, peer: peer))
        XCTAssertFalse(try store.remove(adapter: adapter, peer: peer), "already gone")
        XCTAssertEqual(store.list(adapter: adapter).count, 1)
        XCTAssertEqual(BondStore(directory: root + "/none").list(adapter: adapter), [])
    }

    /// `BondsRemoval` (`bonds remove`, --repair): the file removed under each adapter holding one, the kernel
    /// asked per removal with the stored type, the lines and JSON said; a second removal finds nothing.
    func testARemovalDeletesTheFileAsksTheKernelAndSaysSo() throws {
        try store.save(legacyBond())
        let bluez = root + "/no-bluetoothd"
        var asked: [(BluetoothAddress, BluetoothAddress, LEAddressType)] = []
        let removal = try BondsRemoval.run(store: store, peer: peer, adapters: nil, bluezRoot: bluez) { a, p, t in
            asked.append((a, p, t))
            return "the kernel held no keys for \(p) on hci0"
        }
        XCTAssertEqual(asked.map(\.0), [adapter])
        XCTAssertEqual(asked.map(\.1), [peer])
        XCTAssertEqual(asked.map(\.2), [.public])
        XCTAssertEqual(removal.removed, [store.path(adapter: adapter, peer: peer)])
        XCTAssertEqual(removal.lines, ["removed \(store.path(adapter: adapter, peer: peer))", "the kernel held no keys for \(peer) on hci0"])
        XCTAssertEqual(removal.json, .object([("removed", .array([.string(store.path(adapter: adapter, peer: peer))])),
                                              ("kernel", .array([.string("the kernel held no keys for \(peer) on hci0")])),
                                              ("bluetoothd", .array([]))]))
        XCTAssertNil(try store.load(adapter: adapter, peer: peer))
        let again = try BondsRemoval.run(store: store, peer: peer, adapters: [adapter], bluezRoot: bluez) { _, _, _ in
            XCTFail("nothing to unpair")
            return ""
        }
        XCTAssertEqual(again.lines, ["no bond with \(peer) in \(store.directory)"])
        XCTAssertEqual(BondStore.namesOfAdapters(in: store.directory), [adapter])
    }

    func testACorruptFileIsAnErrorNamingTheFileNeverACrash() throws {
        try store.save(legacyBond())
        let file = store.path(adapter: adapter, peer: peer)
        let cases: [(String, String)] = [
            ("{\"format\": 1", "not valid JSON"),
            ("[]", "not a JSON object"),
            ("{\"format\": 2}", "format 2, this mirror reads format 1"),
            (legacyBond().json.pretty.replacingOccurrences(of: "202122232425262728292a2b2c2d2e2f", with: "2021"), "\"identityResolvingKey\" is not 32 hex digits"),
            (legacyBond().json.pretty.replacingOccurrences(of: "\"keySize\": 16", with: "\"keySize\": 99"), "\"keySize\" 99 is not 7 to 16"),
            (legacyBond().json.pretty.replacingOccurrences(of: "\"type\": 1,", with: "\"type\": 9,"), "LTK type 9 is not 0 to 4"),
            (String(repeating: "[", count: 100_000), "the bond file"),
        ]
        for (text, expected) in cases {
            try Data(text.utf8).write(to: URL(fileURLWithPath: file))
            XCTAssertThrowsError(try store.load(adapter: adapter, peer: peer)) { e in
                let message = "\(e)"
                XCTAssertTrue(message.hasPrefix("the bond file \(file) is not usable: ") || expected == "the bond file" && message.contains(file), message)
                XCTAssertTrue(message.contains(expected), "\(message) lacks \(expected)")
            }
            guard case .failure(.corrupt(let path, _))? = store.list(adapter: adapter).first?.bond else { return XCTFail("listed as usable: \(text.prefix(40))") }
            XCTAssertEqual(path, file)
            XCTAssertEqual(store.keys(adapter: adapter).problems.count, 1)
        }
        // Another bond's file under this peer's name.
        try store.save(legacyBond(peer: try BluetoothAddress(parsing: "C4:F2:17:1A:1D:BC")))
        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.copyItem(atPath: store.path(adapter: adapter, peer: try BluetoothAddress(parsing: "C4:F2:17:1A:1D:BC")), toPath: file)
        XCTAssertThrowsError(try store.load(adapter: adapter, peer: peer)) { e in
            XCTAssertTrue("\(e)".contains("it holds the bond of C4:F2:17:1A:1D:BC"), "\(e)")
        }
    }

    /// `body` on another thread, failed when it has not returned in 5 s: a read that blocks (a FIFO's open) fails
    /// the test instead of hanging the suite.
    func returnsPromptly<T: Sendable>(_ what: String, _ body: @escaping @Sendable () -> T) -> T? {
        let done = DispatchSemaphore(value: 0)
        let result = Lock<T?>(nil)
        Thread.detachNewThread { result.withLock { $0 = body() }; done.signal() }
        guard done.wait(timeout: .now() + 5) == .success else { XCTFail("\(what) did not return in 5 s"); return nil }
        return result.withLock { $0 }
    }

    /// Issue 36: a FIFO planted as a bond file or as bluetoothd's info file is refused at once (before: the open
    /// blocked until a writer came, hanging `bonds list` and every connect that loads bonds).
    func testAFIFOWhereABondFileIsExpectedIsRefusedAtOnce() throws {
        try store.save(legacyBond(peer: try BluetoothAddress(parsing: "C4:F2:17:1A:1D:BC")))
        let file = store.path(adapter: adapter, peer: peer)
        XCTAssertEqual(mkfifo(file, 0o600), 0)
        let store = self.store, adapter = self.adapter, peer = self.peer
        let loaded = returnsPromptly("load") { Result { try store.load(adapter: adapter, peer: peer) }.mapError { $0 as! BondStoreError } }
        XCTAssertEqual(loaded.flatMap { if case .failure(let e) = $0 { e } else { nil } }, .corrupt(path: file, problem: "it is not a regular file"))
        let listed = returnsPromptly("list") { store.list(adapter: adapter) }
        XCTAssertEqual(listed?.first { $0.path == file }?.bond, .failure(.corrupt(path: file, problem: "it is not a regular file")))
        XCTAssertEqual(returnsPromptly("keys") { store.keys(adapter: adapter).longTermKeys.count }, 2, "the other bond's keys still load")
        // bluetoothd's /var/lib/bluetooth/ADAPTER/PEER/info.
        let bluez = root + "/bluez"
        try FileManager.default.createDirectory(atPath: "\(bluez)/\(adapter)/\(peer)", withIntermediateDirectories: true)
        XCTAssertEqual(mkfifo("\(bluez)/\(adapter)/\(peer)/info", 0o600), 0)
        let foreign = returnsPromptly("BlueZStorage.bonds") { BlueZStorage.bonds(adapter: adapter, root: bluez) }
        XCTAssertEqual(foreign?.first?.bond, .failure(.corrupt(path: "\(bluez)/\(adapter)/\(peer)/info", problem: "it is not a regular file")))
    }

    /// Issue 36: every directory from mirror's own down is checked on a read as on a write: a looser one is
    /// tightened, a symlink anywhere on the way refused (before: read through and left as it was).
    func testTheDirectoriesAreCheckedOnReadAsOnWrite() throws {
        try store.save(legacyBond())
        let dir = store.adapterDirectory(adapter)
        XCTAssertEqual(chmod(dir, 0o777), 0)
        XCTAssertEqual(chmod(root + "/mirror", 0o755), 0)
        XCTAssertEqual(store.list(adapter: adapter).count, 1)
        XCTAssertEqual(try mode(dir), 0o700)
        XCTAssertEqual(try mode(root + "/mirror"), 0o700)
        // The adapter's directory replaced by a symlink to a copy of it: refused, on list as on load.
        let copy = root + "/copy"
        try FileManager.default.moveItem(atPath: dir, toPath: copy)
        try FileManager.default.createSymbolicLink(atPath: dir, withDestinationPath: copy)
        XCTAssertEqual(store.list(adapter: adapter).map(\.bond), [.failure(.directory(.symbolicLink(path: dir)))])
        XCTAssertThrowsError(try store.load(adapter: adapter, peer: peer)) { e in
            XCTAssertEqual(e as? BondStoreError, .directory(.symbolicLink(path: dir)))
            XCTAssertEqual("\(e)", "refusing to use \(dir): it is a symbolic link, not a directory; remove it")
        }
        XCTAssertTrue(store.keys(adapter: adapter).longTermKeys.isEmpty)
        XCTAssertThrowsError(try store.save(legacyBond()), "nor written through")
        // The bonds directory itself a symlink.
        try FileManager.default.removeItem(atPath: dir)
        try FileManager.default.moveItem(atPath: store.directory, toPath: root + "/bonds-elsewhere")
        try FileManager.default.createSymbolicLink(atPath: store.directory, withDestinationPath: root + "/bonds-elsewhere")
        XCTAssertThrowsError(try store.load(adapter: adapter, peer: peer)) { e in
            XCTAssertEqual(e as? BondStoreError, .directory(.symbolicLink(path: store.directory)))
        }
    }

    /// Issue 36: a file whose content names another adapter or peer than its path is listed as unusable and its keys
    /// are not loaded (before: `list` and `keys` accepted it, so one file could carry another device's keys).
    func testAFileNamingAnotherPeerThanItsPathIsIgnored() throws {
        let second = try BluetoothAddress(parsing: "C4:F2:17:1A:1D:BC")
        try store.save(legacyBond(peer: second))
        let file = store.path(adapter: adapter, peer: peer)
        try FileManager.default.copyItem(atPath: store.path(adapter: adapter, peer: second), toPath: file)
        let entry = store.list(adapter: adapter).first { $0.path == file }
        XCTAssertEqual(entry?.bond, .failure(.corrupt(path: file, problem: "it holds the bond of \(second) on \(adapter), not of the peer and adapter its path names (ignored)")))
        let keys = store.keys(adapter: adapter)
        XCTAssertEqual(keys.longTermKeys.count, 2, "the second peer's own file only")
        XCTAssertEqual(keys.problems.count, 1)
    }

    func testAWriteIntoADirectoryThatCannotBeMadeSaysWhereAndWhy() throws {
        _ = FileManager.default.createFile(atPath: root + "/mirror", contents: Data())
        XCTAssertThrowsError(try store.save(legacyBond())) { e in
            XCTAssertTrue("\(e)".contains(root + "/mirror"), "\(e)")
        }
        XCTAssertEqual(try BondStore.standard { $0 == "XDG_STATE_HOME" ? "/x/state" : nil }.directory, "/x/state/mirror/bonds")
        XCTAssertThrowsError(try BondStore.standard { _ in nil }) { XCTAssertEqual($0 as? BondStoreError, .noDirectory) }
    }

    // MARK: - ah (Vol 3 Part H §2.2.2) and resolution

    func testAhGivesTheSpecSample() throws {
        // Vol 3 Part H Appendix D.7: IRK ec0234a357c8ad05341010a60a397d9b, prand 708194, ah = 0dfbaa. The IRK here is
        // as SMP and mgmt carry it, least significant octet first (Linux net/bluetooth/smp.c test_ah).
        let irk = Array(ATTHex.bytes(parsing: "ec0234a357c8ad05341010a60a397d9b")!.reversed())
        XCTAssertEqual(try AddressResolution.ah(irk: irk, prand: [0x70, 0x81, 0x94]), [0x0D, 0xFB, 0xAA])
        let rpa = try BluetoothAddress(parsing: "70:81:94:0D:FB:AA")
        XCTAssertTrue(AddressResolution.isResolvable(rpa))
        XCTAssertTrue(try AddressResolution.resolves(rpa, irk: irk))
        XCTAssertFalse(try AddressResolution.resolves(try BluetoothAddress(parsing: "70:81:94:0D:FB:AB"), irk: irk))
        XCTAssertFalse(try AddressResolution.resolves(try BluetoothAddress(parsing: "C0:81:94:0D:FB:AA"), irk: irk), "static random: not resolvable")
        XCTAssertThrowsError(try AddressResolution.ah(irk: [1], prand: [0, 0, 0]))
        // The store finds the bond whose IRK resolves the address.
        var bond = legacyBond()
        bond.identityResolvingKey = irk
        try store.save(bond)
        try store.save(legacyBond(peer: try BluetoothAddress(parsing: "C4:F2:17:1A:1D:BC")))
        XCTAssertEqual(try store.resolve(rpa, adapter: adapter)?.peer, peer)
        XCTAssertNil(try store.resolve(try BluetoothAddress(parsing: "70:81:94:0D:FB:AB"), adapter: adapter))
    }

    // MARK: - bluetoothd's info files

    /// An info file as BlueZ's src/device.c (store_device_info: [General]) and src/adapter.c (store_ltk_group,
    /// store_irk; the peripheral key under both of its group names) write it after a legacy LE pairing.
    static let bluezInfo = """
        [General]
        Name=Mirror
        AddressType=static
        SupportedTechnologies=LE;
        Trusted=false
        Blocked=false
        Services=00001800-0000-1000-8000-00805f9b34fb;

        [IdentityResolvingKey]
        Key=9B7D390AA610103405ADC857A33402EC

        [LocalSignatureKey]
        Key=000102030405060708090A0B0C0D0E0F
        Counter=0
        Authenticated=true

        [LongTermKey]
        Key=101112131415161718191A1B1C1D1E1F
        Authenticated=1
        EncSize=16
        EDiv=4660
        Rand=18364758544493064720

        [PeripheralLongTermKey]
        Key=202122232425262728292A2B2C2D2E2F
        Authenticated=1
        EncSize=16
        EDiv=17185
        Rand=1

        [SlaveLongTermKey]
        Key=202122232425262728292A2B2C2D2E2F
        Authenticated=1
        EncSize=16
        EDiv=17185
        Rand=1

        """

    func testBluetoothdsInfoFileIsReadIntoTheSameTypes() throws {
        let staticPeer = try BluetoothAddress(parsing: "C1:02:03:04:05:06")
        let bond = try XCTUnwrap(try BlueZStorage.bond(infoFile: Self.bluezInfo, adapter: adapter, peer: staticPeer, modified: 1_764_863_546))
        XCTAssertEqual(bond.peerType, .random, "AddressType=static")
        XCTAssertEqual(bond.longTermKeys, [
            LongTermKey(address: staticPeer, addressType: .random, type: .authenticatedLegacy, central: true, encryptionSize: 16,
                        ediv: 0x1234, rand: 0xFEDC_BA98_7654_3210, value: Array(16..<32)),
            LongTermKey(address: staticPeer, addressType: .random, type: .authenticatedLegacy, central: false, encryptionSize: 16,
                        ediv: 0x4321, rand: 1, value: Array(32..<48)),
        ])
        XCTAssertEqual(bond.identityResolvingKey, ATTHex.bytes(parsing: "9B7D390AA610103405ADC857A33402EC"))
        XCTAssertEqual(bond.signatureResolvingKeys.map(\.type), [.authenticatedLocal])
        XCTAssertEqual(bond.method, .unknown)
        XCTAssertTrue(bond.authenticated)
        XCTAssertEqual(bond.keySize, 16)
        // The old group name alone, a "0x" Rand (8 octets little-endian) and key, and no AddressType (public).
        let old = """
            [SlaveLongTermKey]
            Key = 0x202122232425262728292A2B2C2D2E2F
            Authenticated=2
            EncSize=7
            EDiv=0
            Rand=0x0100000000000000
            """
        let oldBond = try XCTUnwrap(try BlueZStorage.bond(infoFile: old, adapter: adapter, peer: peer, modified: 0))
        XCTAssertEqual(oldBond.peerType, .public)
        XCTAssertEqual(oldBond.longTermKeys.map(\.central), [false])
        XCTAssertEqual(oldBond.longTermKeys.first?.rand, 1)
        XCTAssertEqual(oldBond.longTermKeys.first?.type, .unauthenticatedP256)
        XCTAssertEqual(oldBond.keySize, 7)
        XCTAssertFalse(oldBond.authenticated)
        // A device seen, never bonded: no bond. A broken key: a problem naming the group.
        XCTAssertNil(try BlueZStorage.bond(infoFile: "[General]\nName=x\n", adapter: adapter, peer: peer, modified: 0))
        XCTAssertThrowsError(try BlueZStorage.bond(infoFile: "[LongTermKey]\nKey=12\nRand=0\n", adapter: adapter, peer: peer, modified: 0)) { e in
            XCTAssertEqual("\(e)", "[LongTermKey] Key= is not 32 hex digits")
        }
        XCTAssertThrowsError(try BlueZStorage.bond(infoFile: Self.bluezInfo.replacingOccurrences(of: "Authenticated=1", with: "Authenticated=7"),
                                                   adapter: adapter, peer: peer, modified: 0))
    }

    func testBluetoothdsStoreIsWalkedPerAdapterAndOnlyRead() throws {
        let storage = root + "/var-lib-bluetooth"
        let staticPeer = try BluetoothAddress(parsing: "C1:02:03:04:05:06")
        let seen = try BluetoothAddress(parsing: "C1:02:03:04:05:07")
        for (p, text) in [(staticPeer, Self.bluezInfo), (seen, "[General]\nName=seen\n")] {
            try FileManager.default.createDirectory(atPath: "\(storage)/\(adapter)/\(p)", withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: "\(storage)/\(adapter)/\(p)/info", contents: Data(text.utf8), attributes: [.posixPermissions: 0o644])
        }
        _ = FileManager.default.createFile(atPath: "\(storage)/\(adapter)/settings", contents: Data("[General]\n".utf8))
        let entries = BlueZStorage.bonds(adapter: adapter, root: storage)
        XCTAssertEqual(entries.map(\.path), ["\(storage)/\(adapter)/\(staticPeer)/info"])
        XCTAssertEqual(try entries.first?.bond.get().peer, staticPeer)
        XCTAssertEqual(try mode("\(storage)/\(adapter)/\(staticPeer)/info"), 0o644, "bluetoothd's file is not touched")
        XCTAssertNil(try BlueZStorage.bond(adapter: adapter, peer: peer, root: storage))
    }
}

extension BondingTests {
    func testTheKeyEventsOfAPairingBecomeABond() throws {
        let rpa = try BluetoothAddress(parsing: "70:81:94:0D:FB:AA")
        let ltk = { (central: Bool, value: UInt8) in
            LongTermKey(address: self.peer, addressType: .public, type: .authenticatedLegacy, central: central, encryptionSize: 16,
                        ediv: 7, rand: 9, value: Array(repeating: value, count: 16))
        }
        let events: [ManagementEvent] = [
            .newLongTermKey(index: 0, storeHint: true, key: ltk(false, 1)),
            .newIdentityResolvingKey(index: 0, storeHint: true, randomAddress: rpa,
                                     key: IdentityResolvingKey(address: peer, addressType: .public, value: Array(repeating: 2, count: 16))),
            .newSignatureResolvingKey(index: 0, storeHint: true,
                                      key: SignatureResolvingKey(address: peer, addressType: .public, type: .authenticatedRemote, value: Array(repeating: 3, count: 16))),
            .newLongTermKey(index: 0, storeHint: true, key: ltk(true, 4)),
            .newLongTermKey(index: 0, storeHint: true, key: LongTermKey(address: rpa, addressType: .random, type: .unauthenticatedLegacy, central: true,
                                                                        encryptionSize: 7, ediv: 0, rand: 0, value: Array(repeating: 5, count: 16))),
            .discovering(index: 0, on: false),
        ]
        let bond = try XCTUnwrap(Bond(adapter: adapter, peer: peer, events: events, method: .passkeyEntry, bondedAt: 10))
        XCTAssertEqual(bond.longTermKeys, [ltk(true, 4), ltk(false, 1)], "both roles, central first; another address's key left out")
        XCTAssertEqual(bond.identityResolvingKey, Array(repeating: 2, count: 16))
        XCTAssertEqual(bond.signatureResolvingKeys.map(\.type), [.authenticatedRemote])
        XCTAssertEqual(bond.keySummary, "LTK (central, peripheral), IRK, CSRK (remote)")
        XCTAssertTrue(bond.authenticated)
        XCTAssertEqual(bond.keySize, 16)
        try store.save(bond)
        XCTAssertEqual(try store.load(adapter: adapter, peer: peer), bond)
        // Paired through the RPA (Pair Device to it): the New IRK names it with the identity, whose the bond is.
        let throughRPA = try XCTUnwrap(Bond(adapter: adapter, peer: rpa, events: events, method: .passkeyEntry, bondedAt: 10))
        XCTAssertEqual(throughRPA, bond)
        XCTAssertEqual(throughRPA.peer, peer)
        // No Bonding: no Store_Hint, no bond.
        XCTAssertNil(Bond(adapter: adapter, peer: peer, events: [.newLongTermKey(index: 0, storeHint: false, key: ltk(true, 4))],
                          method: .justWorks, bondedAt: 0))
    }
}

extension BondingTests {
    /// Issue 36: a pairing through a resolvable private address names its identity (New IRK); when that identity
    /// already has a bond here, the new bond replaces it only if the stored IRK resolves the address (ah, Vol 3
    /// Part H §2.2.2) or the caller replaces (--repair). Else BondOverwriteError, naming both addresses, and the
    /// stored bond stays. Before, any device could save its keys over another's bond by naming its identity.
    func testABondNamingABondedIdentityIsRefusedUnlessTheStoredIRKResolvesTheAddressPairedThrough() throws {
        let here = HCIAdapter(index: 0, name: "hci0", address: adapter, isUp: true, supportsLE: true, supportsBREDR: false,
                              aclMTU: 27, aclPackets: 8, bus: "virtual")
        // The spec's IRK (Appendix D.7) resolves 70:81:94:0D:FB:AA; 4F:00:00:12:34:56 is resolvable too, not by it.
        let irk = Array(ATTHex.bytes(parsing: "ec0234a357c8ad05341010a60a397d9b")!.reversed())
        var stored = legacyBond()
        stored.identityResolvingKey = irk
        try store.save(stored)
        let resolved = try BluetoothAddress(parsing: "70:81:94:0D:FB:AA")
        let stranger = try BluetoothAddress(parsing: "4F:00:00:12:34:56")
        func events(through rpa: BluetoothAddress, value: UInt8) -> [ManagementEvent] {
            [.newIdentityResolvingKey(index: 0, storeHint: true, randomAddress: rpa,
                                      key: IdentityResolvingKey(address: peer, addressType: .public, value: Array(repeating: value, count: 16))),
             .newLongTermKey(index: 0, storeHint: true, key: LongTermKey(address: peer, addressType: .public, type: .unauthenticatedP256, central: true,
                                                                         encryptionSize: 16, ediv: 0, rand: 0, value: Array(repeating: value, count: 16)))]
        }
        // Another device, through an address the stored IRK does not resolve: refused, the stored bond kept.
        XCTAssertThrowsError(try BondKeys.save(events(through: stranger, value: 0xEE), peer: stranger, method: .justWorks, adapter: here,
                                               now: 20, store: store)) { error in
            XCTAssertEqual(error as? BondOverwriteError, BondOverwriteError(identity: peer, pairedThrough: stranger,
                                                                            file: store.path(adapter: adapter, peer: peer), storedHasIRK: true))
            XCTAssertEqual("\(error)", "refusing to save the bond of C4:F2:17:1A:1D:BB, paired through 4F:00:00:12:34:56, over the bond of C4:F2:17:1A:1D:BB kept in \(store.path(adapter: adapter, peer: peer)): the stored bond's IRK does not resolve 4F:00:00:12:34:56, so another device may be claiming C4:F2:17:1A:1D:BB's identity address; the stored bond is kept. If C4:F2:17:1A:1D:BB itself was reset and paired again, remove its old bond (`mirror bonds remove C4:F2:17:1A:1D:BB`) and pair again, or pass --repair to replace it")
        }
        XCTAssertEqual(try store.load(adapter: adapter, peer: peer), stored)
        // The same device (its IRK resolves the address): saved over it.
        _ = try BondKeys.save(events(through: resolved, value: 0x11), peer: resolved, method: .justWorks, adapter: here, now: 21, store: store)
        XCTAssertEqual(try store.load(adapter: adapter, peer: peer)?.longTermKeys.first?.value, Array(repeating: 0x11, count: 16))
        // The stored bond now has the new IRK: the stranger is still refused; with replacing (--repair) it is saved.
        XCTAssertThrowsError(try BondKeys.save(events(through: stranger, value: 0xEE), peer: stranger, method: .justWorks, adapter: here, now: 22, store: store))
        _ = try BondKeys.save(events(through: stranger, value: 0xEE), peer: stranger, method: .justWorks, adapter: here, now: 22,
                              replacing: true, store: store)
        XCTAssertEqual(try store.load(adapter: adapter, peer: peer)?.longTermKeys.first?.value, Array(repeating: 0xEE, count: 16))
        // A stored bond without an IRK cannot show the address is the same device: refused, saying so.
        var noIRK = legacyBond()
        noIRK.identityResolvingKey = nil
        try store.save(noIRK)
        XCTAssertThrowsError(try BondKeys.save(events(through: resolved, value: 0x22), peer: resolved, method: .justWorks, adapter: here, now: 23, store: store)) { error in
            XCTAssertEqual((error as? BondOverwriteError)?.storedHasIRK, false)
            XCTAssertTrue("\(error)".contains("the stored bond holds no IRK to show that 70:81:94:0D:FB:AA is the same device"), "\(error)")
        }
        // Paired through the identity itself (no private address): replaced as before (the peer pairing again).
        let direct: [ManagementEvent] = [.newLongTermKey(index: 0, storeHint: true, key: LongTermKey(address: peer, addressType: .public, type: .unauthenticatedP256,
                                                                                                     central: true, encryptionSize: 16, ediv: 0, rand: 0, value: Array(repeating: 0x33, count: 16)))]
        _ = try BondKeys.save(direct, peer: peer, method: .justWorks, adapter: here, now: 24, store: store)
        XCTAssertEqual(try store.load(adapter: adapter, peer: peer)?.longTermKeys.first?.value, Array(repeating: 0x33, count: 16))
    }
}
