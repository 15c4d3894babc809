// The host side of a scan's result: an HTTP server (libmicrohttpd) that takes the mirror's
// POST /upload/ID for the current scan ID, stores the body in a temporary file, renames it when
// complete, and reports its size, SHA-256 and ZIP entries.
import CBlueZSocket
import CMicroHTTPD
import FoundationEssentials
import Glibc
import GATTClient
import LinuxBluetooth

/// A result the mirror posted: where it is stored, how big it is, its digest and its ZIP entries.
public struct ReceivedUpload: Sendable, Equatable {
    public var scanID: String
    public var path: String
    public var bytes: Int
    /// 64 lowercase hex digits.
    public var sha256: String
    /// The ZIP's central directory, or nil when the body is not a readable ZIP (see `zipProblem`).
    public var entries: [ZIPEntry]?
    public var zipProblem: String?
    /// How the body came: "content-length" or "chunked".
    public var framing: String
}

/// Something the upload receiver did with a request.
public enum UploadEvent: Sendable, Equatable {
    /// A complete upload for the current scan ID, stored and renamed into place.
    case received(ReceivedUpload)
    /// A request refused with an HTTP status (404 wrong path or scan ID, 405 wrong method, 413 too large, 500 storage).
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

/// An HTTP/1.1 server (RFC 9112, Content-Length or chunked bodies) on libmicrohttpd that receives a scan's result
/// ZIP (POST /upload/ID).
/// The daemon's own polling thread runs the handlers; `lock` guards the scan ID and the upload list.
public final class UploadReceiver: Sendable {
    public let host: String
    public let directory: String
    public let maxBytes: Int
    private let onEvent: @Sendable (UploadEvent) -> Void
    private struct State {
        var scanID: String?
        var uploads: [ReceivedUpload] = []
        var stopped = false
    }
    private let state = Lock(State())
    // The daemon handle's address (0 once stopped), set once in init; the lock makes the stop idempotent.
    private let daemon: Lock<UInt>

    /// Starts listening on `host` (numeric, e.g. 127.0.0.1) and `port` (0: any free port).
    /// Completed uploads land in `directory` as scan-ID.zip.
    public init(host: String, port: UInt16, directory: String, maxBytes: Int = 512 << 20,
                onEvent: @escaping @Sendable (UploadEvent) -> Void = { _ in }) throws(UploadReceiverError) {
        self.host = host
        self.directory = directory
        self.maxBytes = maxBytes
        self.onEvent = onEvent
        self.daemon = Lock(0)
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory else {
            throw UploadReceiverError(host: host, port: port, errno: .noSuchFileOrDirectory, problem: "the upload directory \(directory) does not exist",
                                      directoryProblem: true)
        }
        let opaque = Unmanaged.passUnretained(self).toOpaque()
        guard let d = cmhd_start(host, port, 30, uploadAccessHandler, uploadCompletedHandler, opaque) else {
            let e = Errno.current
            let problem = e == .invalidArgument ? "not a numeric IPv4 or IPv6 address"
                : e == .addressInUse ? "the port is in use (EADDRINUSE)"
                : e.rawValue == ELIBACC ? "libmicrohttpd cannot be loaded: \(cmhd_unavailable().map { String(cString: $0) } ?? e.meaning)"
                : e.rawValue == 0 ? "MHD_start_daemon failed" : "MHD_start_daemon failed: \(e.meaning)"
            throw UploadReceiverError(host: host, port: port, errno: e, problem: problem)
        }
        daemon.withLock { $0 = UInt(bitPattern: Int(bitPattern: d)) }
        let bound = cmhd_bound_port(d)
        boundPort.withLock { $0 = bound == 0 ? port : bound }
    }

    private let boundPort = Lock<UInt16>(0)
    /// The port it listens on (the bound one when 0 was asked for).
    public var port: UInt16 { boundPort.withLock { $0 } }

    /// The URL a mirror should post the result of `scanID` to, with `host` as the mirror sees this machine.
    public func uploadURL(advertisedHost: String, scanID: String) -> String {
        let h = advertisedHost.contains(":") ? "[\(advertisedHost)]" : advertisedHost
        return "http://\(h):\(port)/upload/\(scanID)"
    }

    /// Accepts POST /upload/`scanID` from now on (and no other ID).
    public func expect(scanID: String?) { state.withLock { $0.scanID = scanID } }

    /// Every upload received so far.
    public var uploads: [ReceivedUpload] { state.withLock { $0.uploads } }

    /// Stops the daemon; waits for its thread. Idempotent.
    public func stop() {
        let address = daemon.withLock { let a = $0; $0 = 0; return a }
        if let d = OpaquePointer(bitPattern: address) { cmhd_stop(d) }
    }

    deinit { stop() }

    // MARK: the handlers (on the daemon's polling thread)

    fileprivate func access(_ connection: OpaquePointer, url: String, method: String,
                            data: UnsafePointer<CChar>?, size: UnsafeMutablePointer<Int>,
                            requestState: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        if requestState.pointee == nil {
            let request = decide(connection, url: url, method: method)
            requestState.pointee = Unmanaged.passRetained(request).toOpaque()
            return .YES
        }
        let request = Unmanaged<UploadRequest>.fromOpaque(requestState.pointee!).takeUnretainedValue()
        if size.pointee > 0 {
            let chunk = UnsafeRawBufferPointer(start: data, count: size.pointee)
            request.take(chunk, limit: maxBytes)
            size.pointee = 0
            return .YES
        }
        return finish(request, connection)
    }

    private func decide(_ connection: OpaquePointer, url: String, method: String) -> UploadRequest {
        let request = UploadRequest(method: method, path: url)
        let current = state.withLock { $0.scanID }
        let prefix = "/upload/"
        guard url.hasPrefix(prefix) else {
            request.refuse(404, "no such path: only POST /upload/ID is served"); return request
        }
        let id = String(url.dropFirst(prefix.count))
        guard let current, id == current else {
            request.refuse(404, current == nil ? "no scan is expecting an upload" : "scan ID \(id) is not the current scan (\(current ?? "none"))")
            return request
        }
        guard method == "POST" else { request.refuse(405, "method \(method) not allowed: use POST"); return request }
        let chunked = cmhd_header(connection, "Transfer-Encoding")
            .map { String(cString: $0).lowercased().contains("chunked") } ?? false
        if let cl = cmhd_header(connection, "Content-Length"),
           let length = Int(String(cString: cl)), length > maxBytes {
            request.refuse(413, "Content-Length \(length) exceeds the \(maxBytes)-byte limit"); return request
        }
        request.begin(scanID: id, directory: directory, framing: chunked ? "chunked" : "content-length")
        return request
    }

    private func finish(_ request: UploadRequest, _ connection: OpaquePointer) -> MHD_Result {
        switch request.outcome {
        case .refused(let status, let reason):
            onEvent(.rejected(method: request.method, path: request.path, status: status, reason: reason))
            return respond(connection, status, reason)
        case .storing:
            do {
                let upload = try request.complete()
                state.withLock { $0.uploads.append(upload) }
                onEvent(.received(upload))
                return respond(connection, 200, "stored \(upload.bytes) bytes, sha256 \(upload.sha256)")
            } catch {
                onEvent(.rejected(method: request.method, path: request.path, status: 500, reason: "\(error)"))
                return respond(connection, 500, "\(error)")
            }
        }
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

/// One request's state between MHD's calls; only the daemon's polling thread touches it.
private final class UploadRequest {
    enum Outcome { case storing, refused(Int, String) }
    let method: String
    let path: String
    var outcome: Outcome = .storing
    var scanID = ""
    var framing = ""
    var finalPath = ""
    var partPath = ""
    var file: Int32 = -1  // the part file's descriptor while it is open
    var digest = SHA256()
    var bytes = 0
    var head: [UInt8] = []  // the whole body is kept only to list ZIP entries when small enough
    static let listInMemoryLimit = 64 << 20

    init(method: String, path: String) { self.method = method; self.path = path }

    func refuse(_ status: Int, _ reason: String) {
        outcome = .refused(status, reason)
        closeAndRemove()
    }

    func begin(scanID: String, directory: String, framing: String) {
        self.scanID = scanID
        self.framing = framing
        finalPath = uploadPath(directory, "scan-\(scanID).zip")
        partPath = uploadPath(directory, ".scan-\(scanID).zip.part-\(UInt32.random(in: 0...UInt32.max))")
        let fd = cbz_create_file(partPath)
        guard fd >= 0 else {
            outcome = .refused(500, "cannot create \(partPath)")
            return
        }
        file = fd
    }

    func take(_ chunk: UnsafeRawBufferPointer, limit: Int) {
        guard case .storing = outcome else { return }
        bytes += chunk.count
        if bytes > limit {
            refuse(413, "body exceeds the \(limit)-byte limit")
            return
        }
        digest.update(chunk)
        if bytes <= Self.listInMemoryLimit { head.append(contentsOf: chunk) } else { head = [] }
        if file >= 0, cbz_write_all(file, chunk.baseAddress, chunk.count) != 0 {
            let failure = UploadFileError(syscall: "write", path: partPath, errno: .current)
            refuse(500, "writing \(partPath): \(failure)")
        }
    }

    func complete() throws -> ReceivedUpload {
        if file >= 0 {
            let closed = cbz_close(file)
            file = -1
            if closed != 0 { throw UploadFileError(syscall: "close", path: partPath, errno: .current) }
        }
        if FileManager.default.fileExists(atPath: finalPath) { try FileManager.default.removeItem(atPath: finalPath) }
        try FileManager.default.moveItem(atPath: partPath, toPath: finalPath)
        var entries: [ZIPEntry]?
        var problem: String?
        let archive = bytes <= Self.listInMemoryLimit ? head : (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: finalPath)))) ?? []
        do { entries = try ZIPArchive.entries(of: archive) } catch { problem = error.description }
        return ReceivedUpload(scanID: scanID, path: finalPath, bytes: bytes, sha256: digest.hexDigest(),
                              entries: entries, zipProblem: problem, framing: framing)
    }

    func closeAndRemove() {
        if file >= 0 { _ = cbz_close(file) }
        file = -1
        if !partPath.isEmpty { try? FileManager.default.removeItem(atPath: partPath) }
    }

    deinit { if case .refused = outcome { closeAndRemove() } else if file >= 0 { closeAndRemove() } }
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

private let uploadCompletedHandler: cmhd_completed_handler = { _, _, requestState, _ in
    guard let requestState, let p = requestState.pointee else { return }
    Unmanaged<UploadRequest>.fromOpaque(p).release()
    requestState.pointee = nil
}
