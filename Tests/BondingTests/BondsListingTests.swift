// `mirror bonds list` and `remove` in-process (Bonding's BondsListing and BondsRemoval): bluetoothd's store in a
// temporary directory, the kernel's side replaced.
import Foundation
import LinuxBluetooth
@testable import Bonding
import XCTest

extension BondingTests {
    func testBluetoothdsBondsAreListedAndLeftAloneByRemove() throws {
        let bluez = root + "/var-lib-bluetooth"
        let other = try BluetoothAddress(parsing: "C1:02:03:04:05:06")
        try FileManager.default.createDirectory(atPath: "\(bluez)/\(adapter)/\(other)", withIntermediateDirectories: true)
        let info = "[General]\nAddressType=static\n\n[LongTermKey]\nKey=000102030405060708090A0B0C0D0E0F\nAuthenticated=3\nEncSize=16\nEDiv=0\nRand=0\n"
        _ = FileManager.default.createFile(atPath: "\(bluez)/\(adapter)/\(other)/info", contents: Data(info.utf8))
        try store.save(legacyBond())
        let listing = BondsListing(store: store, adapters: nil, bluezRoot: bluez)
        XCTAssertEqual(listing.entries.map(\.heldBy), ["mirror", "bluetoothd"])
        XCTAssertTrue(listing.lines[1].hasPrefix("C1:02:03:04:05:06 (random) on 00:1A:7D:DA:71:13: LTK (both roles); key size 16, authenticated, bonded "), listing.lines[1])
        XCTAssertTrue(listing.lines[1].hasSuffix(", held by bluetoothd  \(bluez)/\(adapter)/\(other)/info"), listing.lines[1])

        var asked: [(BluetoothAddress, BluetoothAddress, LEAddressType)] = []
        let removal = try BondsRemoval.run(store: store, peer: peer, adapters: nil, bluezRoot: bluez) { a, p, t in
            asked.append((a, p, t))
            return "the kernel forgot its keys for \(p) on hci0 (Unpair Device)"
        }
        XCTAssertEqual(asked.map(\.0), [adapter])
        XCTAssertEqual(asked.map(\.2), [.public])
        XCTAssertEqual(removal.lines, ["removed \(store.path(adapter: adapter, peer: peer))", "the kernel forgot its keys for \(peer) on hci0 (Unpair Device)"])
        let theirs = try BondsRemoval.run(store: store, peer: other, adapters: [adapter], bluezRoot: bluez) { _, _, _ in XCTFail("nothing of mirror's to unpair"); return "" }
        XCTAssertEqual(theirs.lines, ["bluetoothd holds a bond with \(other) in \(bluez)/\(adapter)/\(other)/info, left alone: `bluetoothctl remove \(other)` forgets it"])
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(bluez)/\(adapter)/\(other)/info"))
    }
}
