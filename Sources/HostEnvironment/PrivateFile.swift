// A file that holds a user's data, written whole and private: a new 0600 file beside the target (O_EXCL, O_NOFOLLOW),
// fsync'd, then rename(2) over the target, so that a reader sees the old file or the new one, never half of one.
import CBlueZSocket
import Glibc
import LinkCore

/// Private files written whole (`mirror clone -o FILE`).
public enum PrivateFile {
    /// Writes `text` to `path` (mode 0600), replacing what was there; `what` names the file in an error ("the device
    /// file"). Throws the syscall that failed, with its errno.
    public static func replace(_ path: String, with text: String, what: String) throws(SocketError) {
        var random: UInt32 = 0
        _ = cbz_random_bytes(&random, 4)
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = (directory.isEmpty ? "" : directory + "/") + "." + name + ".tmp-" + String(random, radix: 16)
        let fd = cbz_create_private_new_file(temporary)
        guard fd >= 0 else { throw SocketError(syscall: "open", errno: .current, context: "creating \(what) \(temporary)") }
        var text = text
        let written = text.withUTF8 { cbz_write_all(fd, $0.baseAddress, $0.count) }
        let failure: SocketError? = if written != 0 {
            SocketError(syscall: "write", errno: .current, context: "writing \(what) \(temporary)")
        } else if fsync(fd) != 0 {
            SocketError(syscall: "fsync", errno: .current, context: "writing \(what) \(temporary)")
        } else { nil }
        _ = cbz_close(fd)
        if let failure {
            unlink(temporary)
            throw failure
        }
        guard rename(temporary, path) == 0 else {
            let e = Errno.current
            unlink(temporary)
            throw SocketError(syscall: "rename", errno: e, context: "replacing \(what) \(path)")
        }
    }
}
