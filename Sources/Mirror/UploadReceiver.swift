// The host side of a scan's result: an HTTP server (libmicrohttpd) that takes one POST to the current scan's
// secret path, streams the body to a private new file, renames it into place when complete, and checks it is a
// ZIP with the profile's entries (read from the file, never held in memory).
import CBlueZSocket
import CMicroHTTPD
import FoundationEssentials
import Glibc
import GATTClient
import LinuxBluetooth
import LinkCore

/// A result the mirror posted: where it is stored, how big it is, its digest and its ZIP entries.
public struct ReceivedUpload: Sendable, Equatable {
    public var scanID: String
    public var path: String
    public var bytes: Int
    /// 64 lowercase hex digits.
    public var sha256: String
    /// The ZIP's central directory, or nil when the body is not a readable ZIP (see `zipProblem`).
    public var entries: [ZIPEntry]?
    /// Why the body is not a ZIP with the expected entries (nil: it is); such an upload fails the scan.
    public var zipProblem: String?
    /// How the body came: "content-length" or "chunked".
    public var framing: String
}

/// Something the upload receiver did with a request.
public enum UploadEvent: Sendable, Equatable {
    /// A complete upload for the current scan, stored and renamed into place (check `zipProblem`).
    case received(ReceivedUpload)
    /// A request refused with an HTTP status (404 wrong path, 405 wrong method, 409 a second upload, 413 too
    /// large, 500 storage). `method` and `path` are the peer's bytes: escape them before a terminal.
    case rejected(method: String, path: String, status: Int, reason: String)
}

/// Why the upload receiver could not start.
public struct UploadReceiverError: Error, Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: UInt16
    public var errno: Errno
    public var problem: String
    /// True when the upload directory is the problem (not the listening socket).
    public var directoryProblem = false
    public var description: String {
        directoryProblem ? "upload receiver: \(problem)" : "upload receiver: cannot listen on \(host):\(port): \(problem)"
    }
}

/// What one receiver allows a LAN: connections in all and per client address, an idle timeout, and absolute
/// deadlines from the accept for the headers and for the whole request (libmicrohttpd's options; the
/// deadlines are cut by the shim's polling thread), and the largest body.
public struct UploadLimits: Sendable, Equatable {
    public var maxBytes = 512 << 20
    public var connections: UInt32 = 16
    public var connectionsPerIP: UInt32 = 4
    public var idleSeconds: UInt32 = 10
    public var headersDeadline: Double = 10
    public var requestDeadline: Double = 300
    public init() {}
}

/// An HTTP/1.1 server (RFC 9112, Content-Length or chunked bodies) on libmicrohttpd that receives a scan's result
/// ZIP: one POST to /SECRET, where SECRET is 12 to 22 base64url characters from getrandom(2) (72 to 132 bits).
/// The shim's polling thread runs the handlers; `state` guards the scan, its secret and the upload list.
public final class UploadReceiver: Sendable {
    public let host: String
    public let directory: String
    public let limits: UploadLimits
    public var maxBytes: Int { limits.maxBytes }
    /// The ZIP entries an upload must hold (the profile's resultEntries).
    public let requiredEntries: [String]
    private let onEvent: @Sendable (UploadEvent) -> Void
    private struct State {
        var scanID: String?
        var path: [UInt8]?  // "/" + the secret
        var phase = Phase.waiting
        var uploads: [ReceivedUpload] = []
    }
    /// Where the one upload of a scan is: none yet, one arriving (a second is refused), one stored.
    private enum Phase { case waiting, receiving, received }
    private let state = Lock(State())
    // The server's address (0 once stopped), set once in init; the lock makes the stop idempotent.
    private let server: Lock<UInt>

    /// A fresh secret of `characters` base64url characters (UploadURLBudget decides how many: 22 at most, 12 at
    /// least), each from 6 bits of getrandom(2): 256 is a multiple of 64, so every character is uniform.
    public static func makeSecret(characters: Int = UploadURLBudget.longestSecret) throws(UploadReceiverError) -> String {
        var bytes = [UInt8](repeating: 0, count: characters)
        guard cbz_random_bytes(&bytes, bytes.count) == 0 else {
            throw UploadReceiverError(host: "", port: 0, errno: .current, problem: "getrandom failed: \(Errno.current.name)", directoryProblem: true)
        }
        return String(decoding: bytes.map { base64URLAlphabet[Int($0 & 63)] }, as: UTF8.self)
    }

    /// RFC 4648 §5's base64url alphabet.
    static let base64URLAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Starts listening on `host` (numeric, e.g. 127.0.0.1) and `port` (0: any free port). Completed uploads land
    /// in `directory` as scan-ID.zip; the directory is created 0700 when missing and must be the user's, not
    /// writable by group or others.
    public init(host: String, port: UInt16, directory: String, maxBytes: Int? = nil, limits: UploadLimits = UploadLimits(),
                requiredEntries: [String] = [],
                onEvent: @escaping @Sendable (UploadEvent) -> Void = { _ in }) throws(UploadReceiverError) {
        self.host = host
        self.directory = directory
        var limits = limits
        if let maxBytes { limits.maxBytes = maxBytes }
        self.limits = limits
        self.requiredEntries = requiredEntries
        self.onEvent = onEvent
        self.server = Lock(0)
        if let problem = Self.checkDirectory(directory) {
            throw UploadReceiverError(host: host, port: port, errno: problem.errno, problem: problem.text, directoryProblem: true)
        }
        let opaque = Unmanaged.passUnretained(self).toOpaque()
        var c = cmhd_limits(connections: limits.connections, per_ip: limits.connectionsPerIP, idle_timeout_s: limits.idleSeconds,
                            headers_deadline_s: limits.headersDeadline, request_deadline_s: limits.requestDeadline)
        guard let d = cmhd_start(host, port, &c, uploadAccessHandler, uploadCompletedHandler, opaque) else {
            let e = Errno.current
            let problem = e == .invalidArgument ? "not a numeric IPv4 or IPv6 address"
                : e == .addressInUse ? "the port is in use (EADDRINUSE): another scan or program listens there; --upload-port 0 picks a free one"
                : e.rawValue == ELIBACC ? "libmicrohttpd cannot be loaded: \(cmhd_unavailable().map { String(cString: $0) } ?? e.meaning)"
                : e.rawValue == 0 ? "MHD_start_daemon failed" : "MHD_start_daemon failed: \(e.meaning)"
            throw UploadReceiverError(host: host, port: port, errno: e, problem: problem)
        }
        server.withLock { $0 = UInt(bitPattern: Int(bitPattern: d)) }
        let bound = cmhd_bound_port(d)
        boundPort.withLock { $0 = bound == 0 ? port : bound }
    }

    /// Why `directory` cannot hold uploads (nil: it can). Missing: created 0700 (its parent must exist). There:
    /// a directory (not a symlink to one), owned by the effective user, with no group or other write bit.
    static func checkDirectory(_ directory: String) -> (errno: Errno, text: String)? {
        var uid: UInt32 = 0, mode: UInt32 = 0
        if cbz_lstat_owner_mode(directory, &uid, &mode) != 0 {
            guard Errno.current == .noSuchFileOrDirectory else {
                return (.current, "the upload directory \(directory) cannot be examined: \(Errno.current.name)")
            }
            guard cbz_mkdir_private(directory) == 0 else {
                let e = Errno.current
                return (e, "the upload directory \(directory) does not exist and cannot be created (mode 0700): \(e.name) (\(e.meaning))")
            }
            return nil
        }
        guard mode & UInt32(S_IFMT) == UInt32(S_IFDIR) else {
            return (Errno(ENOTDIR), "the upload directory \(directory) is not a directory (a symlink or a file)")
        }
        let me = cbz_euid()
        guard uid == me else {
            return (.permissionDenied, "the upload directory \(directory) belongs to uid \(uid), not to you (uid \(me)): give --upload-dir a directory of yours")
        }
        guard mode & 0o022 == 0 else {
            return (.permissionDenied, "the upload directory \(directory) is writable by group or others (mode \(String(mode & 0o7777, radix: 8))): chmod go-w it or give another --upload-dir")
        }
        return nil
    }

    private let boundPort = Lock<UInt16>(0)
    /// The port it listens on (the bound one when 0 was asked for).
    public var port: UInt16 { boundPort.withLock { $0 } }

    /// The URL a mirror should post the current scan's result to, with `advertisedHost` as the mirror sees this
    /// machine: http://HOST:PORT/SECRET (nil before `expect`). Its length is 7 + host + 1 + port + 1 + the secret's.
    public func uploadURL(advertisedHost: String) -> String? {
        guard let path = state.withLock({ $0.path }) else { return nil }
        return UploadURLBudget.prefix(host: advertisedHost, port: port) + String(decoding: path.dropFirst(), as: UTF8.self)
    }

    /// Accepts one POST to /`secret` for `scanID` from now on (nil: none); a second is refused with 409.
    public func expect(scanID: String?, secret: String) {
        state.withLock {
            $0.scanID = scanID
            $0.path = scanID == nil ? nil : Array(("/" + secret).utf8)
            $0.phase = .waiting
        }
    }

    /// Every upload received so far.
    public var uploads: [ReceivedUpload] { state.withLock { $0.uploads } }

    /// Stops the polling thread and the daemon; waits for them. Idempotent.
    public func stop() {
        let address = server.withLock { let a = $0; $0 = 0; return a }
        if let d = OpaquePointer(bitPattern: address) { cmhd_stop(d) }
    }

    deinit { stop() }

    // MARK: the handlers (on the shim's polling thread)

    /// The one body a wrong path gets: fixed, so it tells nothing of the scan, its ID or the path asked for.
    static let notFoundBody = "not found"

    fileprivate func access(_ connection: OpaquePointer, url: String, method: String,
                            data: UnsafePointer<CChar>?, size: UnsafeMutablePointer<Int>,
                            requestState: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        if requestState.pointee == nil {
            let request = decide(connection, url: url, method: method)
            requestState.pointee = Unmanaged.passRetained(request).toOpaque()
            // A refusal is answered now, before any body is read: MHD then closes the connection unread.
            if case .refused = request.outcome { return finish(request, connection) }
            return .YES
        }
        let request = Unmanaged<UploadRequest>.fromOpaque(requestState.pointee!).takeUnretainedValue()
        if size.pointee > 0 {
            let chunk = UnsafeRawBufferPointer(start: data, count: size.pointee)
            // Past a refusal mid-body (a chunked body over the limit, a failed write) the rest is discarded, not
            // stored, and the answer goes at its end (MHD queues no response while a body arrives); the request
            // deadline bounds how long that can take.
            request.take(chunk, limit: maxBytes)
            size.pointee = 0
            return .YES
        }
        return finish(request, connection)
    }

    private func decide(_ connection: OpaquePointer, url: String, method: String) -> UploadRequest {
        let request = UploadRequest(method: method, path: url)
        let asked = Array(url.utf8)
        // The secret is compared in full whatever differs first (no early exit to time).
        let (scanID, matches) = state.withLock { s -> (String?, Bool) in
            guard let path = s.path, path.count == asked.count else { return (s.scanID, false) }
            return (s.scanID, zip(path, asked).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0)
        }
        guard let scanID, matches else { request.refuse(404, Self.notFoundBody); return request }
        guard method == "POST" else { request.refuse(405, "method not allowed: use POST"); return request }
        if let cl = cmhd_header(connection, "Content-Length") {
            let text = String(cString: cl)
            guard let length = Int(text), length >= 0 else { request.refuse(400, "Content-Length is not a number"); return request }
            if length > maxBytes { request.refuse(413, "Content-Length over the \(maxBytes)-byte limit"); return request }
        }
        let taken = state.withLock { s -> Bool in
            guard s.phase == .waiting else { return false }
            s.phase = .receiving
            return true
        }
        guard taken else { request.refuse(409, "this scan's upload was already received"); return request }
        request.reserved = true
        let chunked = cmhd_header(connection, "Transfer-Encoding")
            .map { String(cString: $0).lowercased().contains("chunked") } ?? false
        request.begin(scanID: scanID, directory: directory, framing: chunked ? "chunked" : "content-length")
        return request
    }

    private func finish(_ request: UploadRequest, _ connection: OpaquePointer) -> MHD_Result {
        switch request.outcome {
        case .refused(let status, let reason):
            if request.reserved { release(request) }
            onEvent(.rejected(method: request.method, path: request.path, status: status, reason: reason))
            return respond(connection, status, reason)
        case .storing:
            do {
                let upload = try request.complete(required: requiredEntries)
                request.finished = true
                state.withLock { $0.phase = .received; $0.uploads.append(upload) }
                onEvent(.received(upload))
                if upload.zipProblem != nil { return respond(connection, 422, "not the expected result ZIP") }
                return respond(connection, 200, "stored \(upload.bytes) bytes, sha256 \(upload.sha256)")
            } catch {
                release(request)
                onEvent(.rejected(method: request.method, path: request.path, status: 500, reason: "\(error)"))
                return respond(connection, 500, "the upload could not be stored")
            }
        }
    }

    /// An upload that did not complete (refused mid-body, failed, or its connection closed) frees the scan's slot.
    fileprivate func release(_ request: UploadRequest) {
        guard request.reserved, !request.finished else { return }
        request.reserved = false
        state.withLock { if $0.phase == .receiving { $0.phase = .waiting } }
    }

    private func respond(_ connection: OpaquePointer, _ status: Int, _ text: String) -> MHD_Result {
        let body = Array((text + "\n").utf8)
        return body.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { c in
                cmhd_respond(connection, UInt32(status), "text/plain; charset=utf-8", c.baseAddress, c.count)
            }
        }
    }
}

/// One request's state between MHD's calls; only the polling thread touches it.
private final class UploadRequest {
    enum Outcome { case storing, refused(Int, String) }
    let method: String
    let path: String
    var outcome: Outcome = .storing
    /// Whether this request holds the scan's one upload slot, and whether it completed (then it keeps it).
    var reserved = false
    var finished = false
    var scanID = ""
    var framing = ""
    var finalPath = ""
    var partPath = ""
    var file: Int32 = -1  // the part file's descriptor while it is open
    var digest = SHA256()
    var bytes = 0

    init(method: String, path: String) { self.method = method; self.path = path }

    func refuse(_ status: Int, _ reason: String) {
        outcome = .refused(status, reason)
        closeAndRemove()
    }

    /// The part file: new, 0600, O_EXCL|O_NOFOLLOW, under a random name; the final name must not exist yet.
    func begin(scanID: String, directory: String, framing: String) {
        self.scanID = scanID
        self.framing = framing
        finalPath = uploadPath(directory, "scan-\(scanID).zip")
        var uid: UInt32 = 0, mode: UInt32 = 0
        if cbz_lstat_owner_mode(finalPath, &uid, &mode) == 0 {
            outcome = .refused(500, "\(finalPath) exists already: not overwritten")
            return
        }
        var random: UInt32 = 0
        _ = cbz_random_bytes(&random, 4)
        partPath = uploadPath(directory, ".scan-\(scanID).zip.part-\(random)")
        let fd = cbz_create_private_new_file(partPath)
        guard fd >= 0 else {
            let failure = UploadFileError(syscall: "open", path: partPath, errno: .current)
            partPath = ""  // not ours: never removed
            outcome = .refused(500, "\(failure)")
            return
        }
        file = fd
    }

    func take(_ chunk: UnsafeRawBufferPointer, limit: Int) {
        guard case .storing = outcome else { return }
        bytes += chunk.count
        if bytes > limit {
            refuse(413, "body over the \(limit)-byte limit")
            return
        }
        digest.update(chunk)
        if file >= 0, cbz_write_all(file, chunk.baseAddress, chunk.count) != 0 {
            let failure = UploadFileError(syscall: "write", path: partPath, errno: .current)
            refuse(500, "\(failure)")
        }
    }

    /// Closes the part file, renames it to scan-ID.zip (never replacing anything there), then checks the ZIP
    /// from the file (ZIPArchive.check: bounded reads, not the whole body).
    func complete(required: [String]) throws -> ReceivedUpload {
        if file >= 0 {
            let closed = cbz_close(file)
            file = -1
            if closed != 0 { throw UploadFileError(syscall: "close", path: partPath, errno: .current) }
        }
        guard cbz_rename_noreplace(partPath, finalPath) == 0 else {
            throw UploadFileError(syscall: "rename", path: finalPath, errno: .current)
        }
        partPath = ""
        var entries: [ZIPEntry]?
        var problem: String?
        do { entries = try ZIPArchive.check(fileAt: finalPath, required: required) } catch { problem = error.description }
        return ReceivedUpload(scanID: scanID, path: finalPath, bytes: bytes, sha256: digest.hexDigest(),
                              entries: entries, zipProblem: problem, framing: framing)
    }

    func closeAndRemove() {
        if file >= 0 { _ = cbz_close(file) }
        file = -1
        if !partPath.isEmpty { _ = cbz_unlink(partPath) }
        partPath = ""
    }

    deinit { closeAndRemove() }
}

/// `name` in `directory`, as NSString's appendingPathComponent joined them (a slash added unless one ends it).
func uploadPath(_ directory: String, _ name: String) -> String {
    directory.isEmpty ? name : directory.hasSuffix("/") ? directory + name : directory + "/" + name
}

/// A failed call on the part file: its syscall, path and errno ("write /d/.scan-1.zip.part-7: ENOSPC (No space
/// left on device)").
struct UploadFileError: Error, CustomStringConvertible {
    let syscall: String
    let path: String
    let errno: Errno
    var description: String { "\(syscall) \(path): \(errno.name) (\(errno.meaning))" }
}

private let uploadAccessHandler: cmhd_access_handler = { cls, connection, url, method, _, data, size, requestState in
    guard let cls, let connection, let url, let method, let size, let requestState else { return .NO }
    let receiver = Unmanaged<UploadReceiver>.fromOpaque(cls).takeUnretainedValue()
    return receiver.access(connection, url: String(cString: url), method: String(cString: method),
                           data: data, size: size, requestState: requestState)
}

// The request is over (answered, or its connection failed or was cut): one that never completed frees the slot.
private let uploadCompletedHandler: cmhd_completed_handler = { cls, _, requestState, _ in
    guard let cls, let requestState, let p = requestState.pointee else { return }
    let request = Unmanaged<UploadRequest>.fromOpaque(p).takeRetainedValue()
    Unmanaged<UploadReceiver>.fromOpaque(cls).takeUnretainedValue().release(request)
    requestState.pointee = nil
}
