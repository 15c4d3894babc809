// The bonds on disk: `$XDG_STATE_HOME/mirror/bonds/<adapter address>/<peer address>.json` (else
// ~/.local/state/mirror/bonds), one readable JSON file per adapter and peer identity. Directories 0700 and files
// 0600 (tightened when looser, as the shell's history and the GATT cache are), written to a new private temporary
// file (O_EXCL|O_NOFOLLOW) renamed over the old one, read with O_NOFOLLOW: a symlink planted there is refused.
import ATTStack
import CBlueZSocket
import HostEnvironment
import JSON
import LinkCore
import LinuxBluetooth
import Glibc

/// Why the bond store could not do what it was asked: each case names the file or directory, and the syscall.
public enum BondStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Neither XDG_STATE_HOME nor HOME is set.
    case noDirectory
    /// The directory could not be made private, or is another user's.
    case directory(PrivateDirectoryError)
    /// A syscall on a file failed (the context names the file).
    case system(SocketError)
    /// The file is there but is not a bond: not a regular file, another user's, too large, not JSON, or a field wrong.
    case corrupt(path: String, problem: String)

    public var description: String {
        switch self {
        case .noDirectory: return "no directory for bonds: neither XDG_STATE_HOME nor HOME is set"
        case .directory(let e): return e.description
        case .system(let e): return e.description
        case .corrupt(let path, let problem): return "the bond file \(path) is not usable: \(problem)"
        }
    }
}

/// One file of a listing: its bond, or why it is not usable.
public struct BondEntry: Sendable, Equatable {
    public var path: String
    public var bond: Result<Bond, BondStoreError>
}

/// The bonds directory and its files.
public struct BondStore: Sendable {
    /// `.../mirror/bonds`.
    public var directory: String

    public init(directory: String) { self.directory = directory }

    /// `$XDG_STATE_HOME/mirror/bonds`, else `$HOME/.local/state/mirror/bonds`.
    public static func standard(environment: (String) -> String? = XDGDirectory.environment) throws(BondStoreError) -> BondStore {
        guard let base = XDGDirectory.state.mirrorDirectory(environment: environment) else { throw .noDirectory }
        return BondStore(directory: base + "/bonds")
    }

    /// The largest bond file read (a real one is about 1 KiB).
    public static let maximumFileBytes = 64 * 1024

    public func adapterDirectory(_ adapter: BluetoothAddress) -> String { directory + "/" + adapter.description }

    /// mirror's own directory, the bonds directory's parent: where the chain of private directories starts.
    public var root: String {
        guard let slash = directory.lastIndex(of: "/"), slash != directory.startIndex else { return directory }
        return String(directory[..<slash])
    }

    /// Every directory from `root` down to `path` checked, on a read as on a write (XDGDirectory's rule: no
    /// symlink, this user's, 0700); false when one is missing and `create` is not set.
    func checkDirectories(to path: String, create: Bool) throws(BondStoreError) -> Bool {
        do { return try XDGDirectory.checkPrivateDirectories(path, from: root, create: create) } catch { throw .directory(error) }
    }

    public func path(adapter: BluetoothAddress, peer: BluetoothAddress) -> String {
        adapterDirectory(adapter) + "/" + peer.description + ".json"
    }

    /// Writes `bond`'s file: a new 0600 temporary file in the adapter's 0700 directory, then rename(2) over the
    /// old one, so that a reader sees the old bond or the new, never half of one.
    public func save(_ bond: Bond) throws(BondStoreError) {
        let dir = adapterDirectory(bond.adapter)
        _ = try checkDirectories(to: dir, create: true)
        let file = path(adapter: bond.adapter, peer: bond.peer)
        do { try PrivateFile.replace(file, with: bond.json.pretty + "\n", what: "the bond file") } catch { throw .system(error) }
    }

    /// The bond of `peer` on `adapter`; nil when there is no file; throws when the file is there but not a bond.
    public func load(adapter: BluetoothAddress, peer: BluetoothAddress) throws(BondStoreError) -> Bond? {
        let file = path(adapter: adapter, peer: peer)
        guard try checkDirectories(to: adapterDirectory(adapter), create: false), let bytes = try Self.read(file) else { return nil }
        let bond = try Self.bond(bytes, path: file)
        guard bond.adapter == adapter, bond.peer == peer else {
            throw .corrupt(path: file, problem: "it holds the bond of \(bond.peer) on \(bond.adapter)")
        }
        return bond
    }

    /// The adapters with a bonds directory, by address.
    public func adapters() -> [BluetoothAddress] {
        Self.names(in: directory).compactMap { try? BluetoothAddress(parsing: $0) }.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
    }

    /// Every bond file of `adapter`, sorted by peer, each with its bond or why it is not usable.
    /// A directory refused on the way (another user's, a symlink) is one entry with why; a file whose content names
    /// another adapter or peer than its path is an unusable entry (its keys are not loaded).
    public func list(adapter: BluetoothAddress) -> [BondEntry] {
        let dir = adapterDirectory(adapter)
        do throws(BondStoreError) {
            guard try checkDirectories(to: dir, create: false) else { return [] }
        } catch { return [BondEntry(path: dir, bond: .failure(error))] }
        return Self.names(in: dir).filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.sorted().map { name in
            let file = dir + "/" + name
            do throws(BondStoreError) {
                guard let bytes = try Self.read(file) else { throw .corrupt(path: file, problem: "it went away while listed") }
                let bond = try Self.bond(bytes, path: file)
                guard bond.adapter == adapter, name == bond.peer.description + ".json" else {
                    throw .corrupt(path: file, problem: "it holds the bond of \(bond.peer) on \(bond.adapter), not of the peer and adapter its path names (ignored)")
                }
                return BondEntry(path: file, bond: .success(bond))
            } catch {
                return BondEntry(path: file, bond: .failure(error))
            }
        }
    }

    /// Removes the file of `peer` on `adapter`; false when there was none.
    @discardableResult
    public func remove(adapter: BluetoothAddress, peer: BluetoothAddress) throws(BondStoreError) -> Bool {
        let file = path(adapter: adapter, peer: peer)
        if unlink(file) == 0 { return true }
        let e = Errno.current
        if e == Errno(ENOENT) { return false }
        throw .system(SocketError(syscall: "unlink", errno: e, context: "removing the bond file \(file)"))
    }

    /// What Load Long Term Keys and Load Identity Resolving Keys need for `adapter`: every stored key, and the
    /// files that could not be read (their keys are left out).
    public func keys(adapter: BluetoothAddress) -> (longTermKeys: [LongTermKey], identityResolvingKeys: [IdentityResolvingKey], problems: [BondStoreError]) {
        var ltks: [LongTermKey] = [], irks: [IdentityResolvingKey] = [], problems: [BondStoreError] = []
        for entry in list(adapter: adapter) {
            switch entry.bond {
            case .success(let bond):
                ltks += bond.longTermKeys
                if let irk = bond.identityResolvingKeyEntry { irks.append(irk) }
            case .failure(let e): problems.append(e)
            }
        }
        return (ltks, irks, problems)
    }

    /// The bond on `adapter` whose IRK resolves `address` (a resolvable private address, Vol 6 Part B §1.3.2.3).
    public func resolve(_ address: BluetoothAddress, adapter: BluetoothAddress) throws(AddressResolutionError) -> Bond? {
        for entry in list(adapter: adapter) {
            guard case .success(let bond) = entry.bond, let irk = bond.identityResolvingKey else { continue }
            if try AddressResolution.resolves(address, irk: irk) { return bond }
        }
        return nil
    }

    // MARK: - Files

    /// The file's bytes; nil when it does not exist. A symlink (O_NOFOLLOW), something other than a regular file,
    /// another user's file or one over `maximumFileBytes` is refused; a file looser than 0600 is tightened. A
    /// `foreign` file (bluetoothd's) is only read: neither its owner checked nor its mode changed.
    static func read(_ file: String, foreign: Bool = false) throws(BondStoreError) -> [UInt8]? {
        let fd = cbz_open_read_nofollow(file)
        guard fd >= 0 else {
            let e = Errno.current
            if e == Errno(ENOENT) { return nil }
            if e == Errno(ELOOP) { throw .corrupt(path: file, problem: "it is a symbolic link (refused)") }
            throw .system(SocketError(syscall: "open", errno: e, context: "reading the bond file \(file)"))
        }
        defer { _ = cbz_close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .system(SocketError(syscall: "fstat", errno: .current, context: "reading the bond file \(file)")) }
        guard st.st_mode & S_IFMT == S_IFREG else { throw .corrupt(path: file, problem: "it is not a regular file") }
        guard foreign || st.st_uid == getuid() else { throw .corrupt(path: file, problem: "it is owned by uid \(st.st_uid), not by this user (uid \(getuid()))") }
        guard Int(st.st_size) <= maximumFileBytes else {
            throw .corrupt(path: file, problem: "\(st.st_size) bytes, over the \(maximumFileBytes)-byte limit")
        }
        if !foreign, st.st_mode & 0o7777 != 0o600, fchmod(fd, 0o600) != 0 {
            throw .system(SocketError(syscall: "fchmod", errno: .current, context: "making the bond file \(file) private (0600)"))
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { cbz_pread(fd, $0.baseAddress, $0.count, Int64(bytes.count)) }
            if n < 0 { throw .system(SocketError(syscall: "pread", errno: .current, context: "reading the bond file \(file)")) }
            if n == 0 { break }
            bytes += buffer[0..<n]
            if bytes.count > maximumFileBytes { throw .corrupt(path: file, problem: "it grew over the \(maximumFileBytes)-byte limit while read") }
        }
        return bytes
    }

    /// A file's bytes as a bond, or why not, naming the file.
    static func bond(_ bytes: [UInt8], path: String) throws(BondStoreError) -> Bond {
        let json: JSONValue
        do { json = try parseJSON(bytes: bytes) } catch { throw .corrupt(path: path, problem: "not valid JSON (\(error))") }
        do { return try Bond(json: json) } catch { throw .corrupt(path: path, problem: error.problem) }
    }

    /// The names in `directory` (without "." and ".."); empty when it cannot be read.
    static func names(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var out: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { out.append(name) }
        }
        return out
    }
}
