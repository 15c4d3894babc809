// bluetoothd's bonds, read only: `/var/lib/bluetooth/<adapter>/<peer>/info`, a GLib key file that BlueZ's
// src/adapter.c writes (store_ltk_group: [LongTermKey] for the key used as central, [PeripheralLongTermKey] and its
// old name [SlaveLongTermKey] for the one used as peripheral, each Key= (hex, as mgmt carries it), Authenticated=
// (mgmt's Key_Type), EncSize=, EDiv=, Rand= (decimal); store_irk: [IdentityResolvingKey] Key=) and src/device.c
// ([General] AddressType=public|static; [LocalSignatureKey]/[RemoteSignatureKey] Key=, Counter=, Authenticated=).
import ATTStack
import LinkCore
import LinuxBluetooth
import Glibc

public enum BlueZStorage {
    /// bluetoothd's STORAGEDIR.
    public static let defaultRoot = "/var/lib/bluetooth"

    /// A key file's groups and their keys, in GLib's syntax: `[Group]`, `Key=Value` (spaces around `=` ignored),
    /// `#` comments; a later key replaces an earlier one.
    static func keyFile(_ text: String) -> [String: [String: String]] {
        var groups: [String: [String: String]] = [:]
        var group: String?
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = raw.trimmingPrefix(while: { $0 == " " || $0 == "\t" })
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("["), let close = line.firstIndex(of: "]") {
                group = String(line[line.index(after: line.startIndex)..<close])
                continue
            }
            guard let group, let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingSuffix(while: { $0 == " " || $0 == "\t" })
            let value = line[line.index(after: eq)...].trimmingPrefix(while: { $0 == " " || $0 == "\t" })
            groups[group, default: [:]][String(key)] = String(value.trimmingSuffix(while: { $0 == " " || $0 == "\t" }))
        }
        return groups
    }

    /// The bond an info file holds between `adapter` and `peer`; nil when it holds no LTK and no IRK (bluetoothd
    /// keeps an info file for every device it has seen). `modified` (the file's mtime) stands for when it bonded.
    public static func bond(infoFile text: String, adapter: BluetoothAddress, peer: BluetoothAddress,
                            modified: Int) throws(BondFileProblem) -> Bond? {
        let file = keyFile(text)
        // src/adapter.c get_addr_type: "static" is LE Random, anything else LE Public.
        let peerType: LEAddressType = file["General"]?["AddressType"] == "static" ? .random : .public
        var ltks: [LongTermKey] = []
        if let central = try longTermKey(file["LongTermKey"], "LongTermKey", peer, peerType, central: true) { ltks.append(central) }
        let peripheralGroup = file["PeripheralLongTermKey"] != nil ? "PeripheralLongTermKey" : "SlaveLongTermKey"
        if let peripheral = try longTermKey(file[peripheralGroup], peripheralGroup, peer, peerType, central: false) { ltks.append(peripheral) }
        let irk = try file["IdentityResolvingKey"].map { g throws(BondFileProblem) in try key(g, "IdentityResolvingKey") }
        var csrks: [SignatureResolvingKey] = []
        for (group, local) in [("LocalSignatureKey", true), ("RemoteSignatureKey", false)] {
            guard let g = file[group] else { continue }
            let authenticated = g["Authenticated"] == "true"
            let type: SignatureResolvingKeyType = switch (local, authenticated) {
            case (true, false): .unauthenticatedLocal
            case (false, false): .unauthenticatedRemote
            case (true, true): .authenticatedLocal
            case (false, true): .authenticatedRemote
            }
            csrks.append(SignatureResolvingKey(address: peer, addressType: peerType, type: type, value: try key(g, group)))
        }
        guard !ltks.isEmpty || irk != nil else { return nil }
        return Bond(adapter: adapter, peer: peer, peerType: peerType, longTermKeys: ltks, identityResolvingKey: irk,
                    signatureResolvingKeys: csrks, bondedAt: modified, method: .unknown,
                    keySize: Int(ltks.map(\.encryptionSize).max() ?? 16), authenticated: ltks.contains { $0.type.isAuthenticated })
    }

    /// Key= as 16 octets: 32 hex digits, an optional "0x" first (src/adapter.c get_ltk, str2buf).
    static func key(_ group: [String: String], _ name: String) throws(BondFileProblem) -> [UInt8] {
        guard var text = group["Key"] else { throw BondFileProblem("[\(name)] has no Key=") }
        if text.hasPrefix("0x") { text.removeFirst(2) }
        guard let bytes = ATTHex.bytes(parsing: text), bytes.count == 16 else { throw BondFileProblem("[\(name)] Key= is not 32 hex digits") }
        return bytes
    }

    /// One LTK group (src/adapter.c get_ltk): Key=, Rand= (decimal, or "0x" and 8 octets little-endian),
    /// Authenticated= (the Key_Type), EncSize=, EDiv=.
    static func longTermKey(_ group: [String: String]?, _ name: String, _ peer: BluetoothAddress, _ type: LEAddressType,
                            central: Bool) throws(BondFileProblem) -> LongTermKey? {
        guard let group else { return nil }
        let value = try key(group, name)
        guard let randText = group["Rand"] else { throw BondFileProblem("[\(name)] has no Rand=") }
        let rand: UInt64
        if randText.hasPrefix("0x") {
            guard let b = ATTHex.bytes(parsing: String(randText.dropFirst(2))), b.count == 8 else { throw BondFileProblem("[\(name)] Rand= is not 8 octets") }
            rand = b.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        } else {
            guard let r = UInt64(randText) else { throw BondFileProblem("[\(name)] Rand=\(randText) is not a number") }
            rand = r
        }
        func integer(_ key: String, _ range: ClosedRange<Int>) throws(BondFileProblem) -> Int {
            // GLib's g_key_file_get_integer gives 0 for a missing key.
            guard let text = group[key] else { return 0 }
            guard let n = Int(text), range.contains(n) else { throw BondFileProblem("[\(name)] \(key)=\(text) is not \(range.lowerBound) to \(range.upperBound)") }
            return n
        }
        let keyType = try integer("Authenticated", 0...4)
        let size = try integer("EncSize", 0...16)
        return LongTermKey(address: peer, addressType: type, type: LongTermKeyType(rawValue: UInt8(keyType))!, central: central,
                           encryptionSize: UInt8(size), ediv: UInt16(try integer("EDiv", 0...0xFFFF)), rand: rand, value: value)
    }

    /// The bond bluetoothd holds for `peer` on `adapter` under `root`; nil when it holds none (no info file, or
    /// one without keys); throws when the file cannot be read (bluetoothd's store is root's: EACCES otherwise).
    public static func bond(adapter: BluetoothAddress, peer: BluetoothAddress, root: String = defaultRoot) throws(BondStoreError) -> Bond? {
        let file = "\(root)/\(adapter)/\(peer)/info"
        guard let bytes = try BondStore.read(file, foreign: true) else { return nil }
        var st = stat()
        let modified = stat(file, &st) == 0 ? Int(st.st_mtim.tv_sec) : 0
        do {
            return try bond(infoFile: String(decoding: bytes, as: UTF8.self), adapter: adapter, peer: peer, modified: modified)
        } catch {
            throw .corrupt(path: file, problem: error.problem)
        }
    }

    /// Every bond bluetoothd holds for `adapter` under `root`, with the files that could not be read.
    public static func bonds(adapter: BluetoothAddress, root: String = defaultRoot) -> [BondEntry] {
        let dir = "\(root)/\(adapter)"
        return BondStore.names(in: dir).compactMap { try? BluetoothAddress(parsing: $0) }.sorted { $0.description < $1.description }.compactMap { peer in
            do throws(BondStoreError) {
                guard let bond = try bond(adapter: adapter, peer: peer, root: root) else { return nil }
                return BondEntry(path: "\(dir)/\(peer)/info", bond: .success(bond))
            } catch {
                return BondEntry(path: "\(dir)/\(peer)/info", bond: .failure(error))
            }
        }
    }
}

extension Substring {
    /// Without the trailing characters that satisfy `predicate`.
    func trimmingSuffix(while predicate: (Character) -> Bool) -> Substring {
        var end = endIndex
        while end > startIndex, predicate(self[index(before: end)]) { end = index(before: end) }
        return self[startIndex..<end]
    }
}
