// The XDG Base Directory rule in one place: the shell's history (state) and the GATT cache (cache).
import CBlueZSocket
import LinuxBluetooth
import LinkCore
import Glibc

/// A base directory of the XDG Base Directory specification, with mirror's folder in it.
public enum XDGDirectory: Sendable {
    /// $XDG_STATE_HOME, else ~/.local/state.
    case state
    /// $XDG_CACHE_HOME, else ~/.cache.
    case cache

    var variable: String { self == .state ? "XDG_STATE_HOME" : "XDG_CACHE_HOME" }
    var underHome: String { self == .state ? "/.local/state" : "/.cache" }

    /// `$VARIABLE/mirror`, or `$HOME/<default>/mirror` when the variable is unset or not absolute (the spec's
    /// rule); nil without either.
    public func mirrorDirectory(environment: (String) -> String? = XDGDirectory.environment) -> String? {
        if let base = environment(variable), base.hasPrefix("/") { return base + "/mirror" }
        if let home = environment("HOME"), !home.isEmpty { return home + underHome + "/mirror" }
        return nil
    }

    /// getenv(3).
    public static func environment(_ name: String) -> String? {
        guard let p = getenv(name) else { return nil }
        return String(cString: p)
    }
}

/// Why mirror's private directory could not be made private: a syscall failed, or the directory is another
/// user's (then nothing is written there).
public enum PrivateDirectoryError: Error, Sendable, Equatable, CustomStringConvertible {
    case system(SocketError)
    case notOwned(path: String, owner: UInt32, user: UInt32)
    case notADirectory(path: String)
    /// A symbolic link where a private directory must be: refused, not followed (it could point anywhere).
    case symbolicLink(path: String)

    public var description: String {
        switch self {
        case .symbolicLink(let path): return "refusing to use \(path): it is a symbolic link, not a directory; remove it"
        case .system(let e): return e.description
        case .notOwned(let path, let owner, let user):
            return "refusing to use \(path): it is owned by uid \(owner), not by this user (uid \(user)); remove it or fix its owner"
        case .notADirectory(let path): return "refusing to use \(path): it is not a directory"
        }
    }
}

extension XDGDirectory {
    /// Makes `path` (mirror's folder under an XDG base) private: created 0700 with its parents when missing, and
    /// tightened to 0700 when it exists with looser modes; another user's directory is refused, not written to.
    public static func preparePrivateDirectory(_ path: String) throws(PrivateDirectoryError) {
        _ = try checkPrivateDirectories(path, from: path, create: true)
    }

    /// Checks every directory from `root` (mirror's own, under an XDG base) down to `path`, on a read as on a
    /// write: each one lstat'ed (a symlink is refused, never followed), a directory of this user's, and tightened
    /// to 0700 when looser. With `create`, the missing ones are made 0700 (parents above `root` too); without it,
    /// a missing one returns false: there is nothing to read.
    public static func checkPrivateDirectories(_ path: String, from root: String, create: Bool) throws(PrivateDirectoryError) -> Bool {
        precondition(path == root || path.hasPrefix(root + "/"), "\(path) is not under \(root)")
        var chain: [String] = []
        var prefix = ""
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if prefix.count >= root.count { chain.append(prefix) }
            if create, cbz_mkdir_private(prefix) != 0 {
                let e = Errno.current
                if e != Errno(EEXIST) { throw .system(SocketError(syscall: "mkdir", errno: e, context: "creating the directory \(prefix)")) }
            }
        }
        let user = getuid()
        for dir in chain {
            var st = stat()
            guard lstat(dir, &st) == 0 else {
                let e = Errno.current
                if e == Errno(ENOENT) && !create { return false }
                throw .system(SocketError(syscall: "lstat", errno: e, context: "checking the directory \(dir)"))
            }
            if st.st_mode & S_IFMT == S_IFLNK { throw .symbolicLink(path: dir) }
            guard st.st_mode & S_IFMT == S_IFDIR else { throw .notADirectory(path: dir) }
            guard st.st_uid == user else { throw .notOwned(path: dir, owner: st.st_uid, user: user) }
            if st.st_mode & 0o7777 != 0o700, chmod(dir, 0o700) != 0 {
                throw .system(SocketError(syscall: "chmod", errno: .current, context: "making the directory \(dir) private (0700)"))
            }
        }
        return true
    }
}
