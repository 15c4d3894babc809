// A file claimed before a long run and written whole at its end (`mirror bench --plot FILE`): a bad path fails
// before the run, and a file the run created is removed when it has nothing, or half of something, to hold.
import CBlueZSocket
import Glibc
import LinkCore

/// A file opened for writing before the work that fills it. A path that existed (an older file, /dev/stdout, a
/// FIFO) is the user's: only written, never removed.
public struct ReservedFile: Sendable {
    public let path: String
    let fd: Int32
    /// This run created the file (O_EXCL succeeded).
    public let created: Bool

    /// Opens `path`, creating it when it is not there; `what` names it in an error ("the plot file").
    public init(path: String, what: String) throws(SocketError) {
        var fd = cbz_create_new_file(path)
        let created = fd >= 0
        if fd < 0 && Errno.current == Errno(EEXIST) { fd = cbz_create_file(path) }
        if fd < 0 { throw SocketError(syscall: "open", errno: .current, context: "creating \(what) \(path)") }
        self.path = path
        self.fd = fd
        self.created = created
    }

    /// Writes `text` whole and closes the file; `what` names the contents in an error ("the plot"). A failed write
    /// removes a file this run created: half a file is no file.
    public func write(_ text: String, what: String) throws(SocketError) {
        var text = text
        let failed = text.withUTF8 { cbz_write_all(fd, $0.baseAddress, $0.count) < 0 }
        let error = failed ? SocketError(syscall: "write", errno: .current, context: "writing \(what) to \(path)") : nil
        _ = cbz_close(fd)
        if let error {
            removeIfCreated()
            throw error
        }
    }

    /// The run failed: nothing to write. Closes the file and removes it if this run created it.
    public func discard() {
        _ = cbz_close(fd)
        removeIfCreated()
    }

    private func removeIfCreated() {
        if created { _ = cbz_unlink(path) }
    }
}
