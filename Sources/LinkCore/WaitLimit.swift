// The record of named limits that fired: every bounded wait that gives up counts its stable identifier here, so
// a test can see that it ran into that limit (the deadline audit names each limit's trigger test).
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Counts, per identifier ("att.transaction", "bearer.connect"), how often a bounded wait gave up at its limit.
/// Only the give-up path records; a wait that succeeds costs nothing here.
public enum WaitLimit {
    /// Guards the count of each identifier that has fired in this process.
    private static let counts = Lock<[String: Int]>([:])

    /// The environment variable naming a file to which a tool run by a test appends each limit that fires in it
    /// (one identifier a line), so that the test's process counts them too (`absorbReport(at:)`).
    public static let reportVariable = "WAIT_LIMIT_REPORT"
    private static let reportPath: String? = getenv(reportVariable).map { String(cString: $0) }

    /// Records that the wait named `id` ran into its limit.
    public static func fired(_ id: String) {
        counts.withLock { $0[id, default: 0] += 1 }
        if let reportPath {
            let fd = open(reportPath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return }
            let line = Array((id + "\n").utf8)
            _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
    }

    /// Counts the limits a finished tool reported in the file at `path` (see `reportVariable`) as fired here, and
    /// removes the file.
    public static func absorbReport(at path: String) {
        guard let file = fopen(path, "r") else { return }
        var ids: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        while fgets(&buffer, Int32(buffer.count), file) != nil {
            var id = String(cString: buffer)
            if id.hasSuffix("\n") { id.removeLast() }
            if !id.isEmpty { ids.append(id) }
        }
        fclose(file)
        unlink(path)
        counts.withLock { c in for id in ids { c[id, default: 0] += 1 } }
    }

    /// How often the wait named `id` has run into its limit in this process.
    public static func count(_ id: String) -> Int {
        counts.withLock { $0[id] ?? 0 }
    }

    /// Starts watching `id`: the returned watch's `fired` counts the limits of that name that fire from now on.
    public static func watch(_ id: String) -> Watch { Watch(id: id, start: count(id)) }

    /// The firings of one named limit since `watch(_:)`; a trigger test asserts `fired > 0`.
    public struct Watch: Sendable {
        public let id: String
        let start: Int
        public var fired: Int { WaitLimit.count(id) - start }
    }
}
