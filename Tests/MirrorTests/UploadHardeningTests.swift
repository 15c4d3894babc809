// Issue 23 point 2: the upload receiver against a hostile LAN, every request on 127.0.0.1 with bounded waits
// (SO_RCVTIMEO on each socket): a secret path, fixed 404s, one upload per scan, the ZIP checked from the file,
// 413 before the body, per-IP and total connection limits with an absolute header deadline, private files.
import TestSupport
import Foundation
import GATTClient
import LinuxBluetooth
import LinkCore
import Glibc
import XCTest
@testable import Mirror

/// A raw HTTP client socket on 127.0.0.1 whose every receive gives up after `timeout` seconds.
final class RawHTTP {
    let fd: Int32

    init(port: UInt16, timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { close(fd); throw POSIXError(.ECONNREFUSED) }
    }
    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }
    func send(_ text: String) { send(Array(text.utf8)) }

    /// Everything until the peer closes (or the timeout): the bytes, and whether it ended by the peer (EOF or
    /// reset) rather than by the timeout.
    func readToEnd() -> (bytes: [UInt8], closed: Bool) {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { out += buffer.prefix(n); continue }
            if n == 0 { return (out, true) }
            return (out, errno == ECONNRESET)
        }
    }
}

/// An HTTP response's status and body (nil status when none came).
func httpAnswer(_ bytes: [UInt8]) -> (status: Int?, body: String) {
    let text = String(decoding: bytes, as: UTF8.self)
    guard let split = text.range(of: "\r\n\r\n") else { return (nil, text) }
    let status = text.split(separator: "\r\n").first.flatMap { $0.split(separator: " ").dropFirst().first }.flatMap { Int($0) }
    return (status, String(text[split.upperBound...]))
}

final class UploadHardeningTests: XCTestCase {
    var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "upload-hardening-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
    }
    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    let resultZIP = ZIPArchive.stored([("mesh.ply", Array("ply\nend_header\n".utf8)), ("measurements.json", Array("{}".utf8))])

    /// One request with a body; the whole answer, read until the receiver closes (at most 5 s).
    func post(_ port: UInt16, _ path: String, _ body: [UInt8], method: String = "POST") throws -> (status: Int?, body: String) {
        let c = try RawHTTP(port: port)
        c.send("\(method) \(path) HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n")
        c.send(body)
        return httpAnswer(c.readToEnd().bytes)
    }

    func receiver(_ limits: UploadLimits = UploadLimits(), required: [String] = ["mesh.ply", "measurements.json"],
                  events: Lock<[UploadEvent]>? = nil) throws -> UploadReceiver {
        try UploadReceiver(host: "127.0.0.1", port: 0, directory: directory, limits: limits, requiredEntries: required) { e in
            events?.withLock { $0.append(e) }
        }
    }

    func testTheURLCarriesASecretFromTheRandomSourceThatFitsTheBudgetAndNotTheScanID() throws {
        let r = try receiver()
        defer { r.stop() }
        XCTAssertNil(r.uploadURL(advertisedHost: "127.0.0.1"), "no URL before a scan is expected")
        XCTAssertEqual(try UploadReceiver.makeSecret().count, 22, "22 characters unless asked for fewer")
        for n in UploadURLBudget.shortestSecret...UploadURLBudget.longestSecret {
            let s = try UploadReceiver.makeSecret(characters: n)
            XCTAssertEqual(s.count, n)
            XCTAssertTrue(s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }, s)
        }
        XCTAssertNotEqual(try UploadReceiver.makeSecret(), try UploadReceiver.makeSecret())
        // Each character is 6 uniform bits: over 1,000 secrets (22,000 characters, 344 of each expected) every one of
        // the 64 appears, none far from its share (a 6-sigma band; a mapping that skipped or favoured one fails).
        var counts: [Character: Int] = [:]
        for _ in 0..<1000 { for c in try UploadReceiver.makeSecret() { counts[c, default: 0] += 1 } }
        XCTAssertEqual(counts.count, 64)
        XCTAssertTrue(counts.values.allSatisfy { (236...452).contains($0) }, "\(counts)")
        let budget = UploadURLBudget(host: "127.0.0.1", port: r.port, limit: MirrorProfile.bundled.cloudTokenMaxLength)
        let secret = try UploadReceiver.makeSecret(characters: try XCTUnwrap(budget.secretCharacters))
        r.expect(scanID: "d87511", secret: secret)
        let url = try XCTUnwrap(r.uploadURL(advertisedHost: "127.0.0.1"))
        XCTAssertEqual(url, "http://127.0.0.1:\(r.port)/\(secret)")
        XCTAssertEqual(url, budget.prefix + secret)
        XCTAssertFalse(url.contains("d87511"))
        XCTAssertEqual(url.utf8.count, MirrorProfile.bundled.cloudTokenMaxLength, "the secret fills the bundled profile's 40 bytes")
        // The longest IPv4 URL (15-character host, 5-digit port) needs 41 bytes with the shortest secret: one over 40.
        XCTAssertNil(UploadURLBudget(host: "255.255.255.255", port: 65535, limit: 40).secretCharacters)
        XCTAssertEqual(UploadURLBudget(host: "255.255.255.255", port: 65535, limit: 41).secretCharacters, 12)
    }

    func testAWrongSecretOrPathGetsAFixedNotFoundThatEchoesNothing() throws {
        let events = Lock<[UploadEvent]>([])
        let r = try receiver(events: events)
        defer { r.stop() }
        let secret = try UploadReceiver.makeSecret()
        r.expect(scanID: "d87511", secret: secret)
        var wrong = Array(secret)
        wrong[21] = wrong[21] == "A" ? "B" : "A"
        let paths = ["/upload/d87511", "/upload/000000", "/" + String(wrong), "/\(secret)%00.txt", "/\(secret)/x",
                     "/\(secret.prefix(21))", "/", "/upload/\(secret)"]
        for path in paths {
            let answer = try post(r.port, path, Array("junk".utf8))
            XCTAssertEqual(answer.status, 404, path)
            XCTAssertEqual(answer.body, "not found\n", path)
            XCTAssertFalse(answer.body.contains("d87511"), path)
        }
        XCTAssertTrue(r.uploads.isEmpty)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [])
        XCTAssertEqual(events.withLock { $0.count }, paths.count)
    }

    func testOneUploadPerScanALaterOneIsRefusedAndTheFileKept() throws {
        let r = try receiver()
        defer { r.stop() }
        let secret = try UploadReceiver.makeSecret()
        r.expect(scanID: "a1b2c3", secret: secret)
        XCTAssertEqual(try post(r.port, "/\(secret)", resultZIP).status, 200)
        let second = try post(r.port, "/\(secret)", ZIPArchive.stored([("mesh.ply", [1]), ("measurements.json", [2])]))
        XCTAssertEqual(second.status, 409)
        XCTAssertEqual(second.body, "this scan's upload was already received\n")
        XCTAssertEqual(r.uploads.count, 1)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: directory + "/scan-a1b2c3.zip")), Data(resultZIP))
    }

    func testANonZIPBodyAndAZIPWithoutTheExpectedEntriesAreNamedAsSuch() throws {
        let r = try receiver()
        defer { r.stop() }
        let junk = Array("not a ZIP archive: 42 bytes of plain text\n".utf8)
        XCTAssertEqual(junk.count, 42)
        let secret = try UploadReceiver.makeSecret()
        r.expect(scanID: "00junk", secret: secret)
        XCTAssertEqual(try post(r.port, "/\(secret)", junk).status, 422)
        let bad = try XCTUnwrap(r.uploads.last)
        XCTAssertEqual(bad.bytes, 42)
        XCTAssertNil(bad.entries)
        XCTAssertEqual(bad.zipProblem, "not a readable ZIP archive: no end-of-central-directory record")

        let secret2 = try UploadReceiver.makeSecret()
        r.expect(scanID: "0part0", secret: secret2)
        XCTAssertEqual(try post(r.port, "/\(secret2)", ZIPArchive.stored([("mesh.ply", Array("ply\n".utf8))])).status, 422)
        XCTAssertEqual(r.uploads.last?.zipProblem, "not a readable ZIP archive: missing the expected entry measurements.json")

        // A stored entry whose bytes do not match its CRC-32 (checked while streaming from the file).
        var corrupt = resultZIP
        corrupt[30 + "mesh.ply".utf8.count] ^= 0xFF
        let secret3 = try UploadReceiver.makeSecret()
        r.expect(scanID: "0crc00", secret: secret3)
        XCTAssertEqual(try post(r.port, "/\(secret3)", corrupt).status, 422)
        XCTAssertTrue(r.uploads.last?.zipProblem?.contains("mesh.ply: CRC-32") ?? false, r.uploads.last?.zipProblem ?? "")
    }

    func testAnOversizedContentLengthIsRefusedBeforeTheBodyIsSent() throws {
        var limits = UploadLimits()
        limits.maxBytes = 1000
        let r = try receiver(limits)
        defer { r.stop() }
        let secret = try UploadReceiver.makeSecret()
        r.expect(scanID: "b1g000", secret: secret)
        let c = try RawHTTP(port: r.port, timeout: 5)
        // The headers only: the answer must come without a byte of the 100 MB announced.
        c.send("POST /\(secret) HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
        let (bytes, closed) = c.readToEnd()
        XCTAssertEqual(httpAnswer(bytes).status, 413, String(decoding: bytes, as: UTF8.self))
        XCTAssertTrue(closed, "the receiver closes the connection rather than wait for the body")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [])
    }

    func testThePerIPLimitHoldsAndTheHeaderDeadlineFreesTheSlotsForTheRealUpload() throws {
        var limits = UploadLimits()
        limits.connectionsPerIP = 2
        limits.idleSeconds = 60  // the cut below is the absolute deadline's, not the idle timeout's
        limits.headersDeadline = 2
        let r = try receiver(limits)
        defer { r.stop() }
        let secret = try UploadReceiver.makeSecret()
        r.expect(scanID: "510w00", secret: secret)
        let started = ContinuousClock.now
        // Two half-open requests (a header line, never finished) hold this address's two connections.
        let holders = try (0..<2).map { _ in try RawHTTP(port: r.port, timeout: 8) }
        for h in holders { h.send("POST /\(secret) HTTP/1.1\r\nHost: x\r\n") }
        // A third from the same address is closed at once, with no answer.
        let third = try RawHTTP(port: r.port, timeout: 8)
        let refused = third.readToEnd()
        XCTAssertTrue(refused.closed)
        XCTAssertEqual(refused.bytes, [])
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(2), "refused by the limit, before any deadline")
        // The holders are cut at the 2 s header deadline (within the 8 s receive timeout).
        for h in holders {
            h.send("X-Slow: 1\r\n")
            XCTAssertTrue(h.readToEnd().closed)
        }
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .seconds(2))
        // Then the real upload gets through. The client sees the cut (shutdown) before MHD's polling thread has
        // closed the connection and given back its per-address slot, so a post in that window is still refused
        // (closed, no answer); it is tried again, for at most 5 s, as an uploading mirror would.
        let giveUp = ContinuousClock.now + .seconds(5)
        var answer = try post(r.port, "/\(secret)", resultZIP).status
        while answer == nil && ContinuousClock.now < giveUp {
            Thread.sleep(forTimeInterval: 0.05)
            answer = try post(r.port, "/\(secret)", resultZIP).status
        }
        XCTAssertEqual(answer, 200)
    }

    func testTheTotalConnectionLimitHolds() throws {
        var limits = UploadLimits()
        limits.connections = 2
        limits.connectionsPerIP = 8
        limits.headersDeadline = 30
        let r = try receiver(limits)
        defer { r.stop() }
        var holders = try (0..<2).map { _ in try RawHTTP(port: r.port, timeout: 8) }
        for h in holders { h.send("GET / HTTP/1.1\r\n") }
        // With both slots held, a third complete request is not served: MHD's epoll loop stops accepting at the
        // limit, so it waits in the listen backlog (no answer within 1 s, not closed).
        let third = try RawHTTP(port: r.port, timeout: 1)
        third.send("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        let held = third.readToEnd()
        XCTAssertFalse(held.closed)
        XCTAssertEqual(held.bytes, [])
        // A slot freed, it is accepted and answered (the fixed 404).
        holders.removeAll()
        var answer: [UInt8] = []
        for _ in 0..<5 where answer.isEmpty { answer = third.readToEnd().bytes }
        XCTAssertEqual(httpAnswer(answer).status, 404)
    }

    /// A process with more than FD_SETSIZE (1024) descriptors open still receives: the CI's sanitizer stage held
    /// that many when every receiver failed with "MHD_start_daemon failed" (MHD's select loop refuses such a socket).
    func testTheReceiverWorksWithDescriptorsNumberedAboveFDSetSize() throws {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 1200 && limit.rlim_max >= 1200 {
            limit.rlim_cur = 1200
            XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit), 0)
        }
        var filler: [Int32] = []
        defer { filler.forEach { close($0) } }
        while filler.last.map({ $0 < 1100 }) ?? true {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return XCTFail("cannot open descriptor \(filler.count + 3): errno \(errno)") }
            filler.append(fd)
        }
        let r = try receiver()
        defer { r.stop() }
        let secret = try UploadReceiver.makeSecret()
        r.expect(scanID: "fd1024", secret: secret)
        XCTAssertEqual(try post(r.port, "/\(secret)", resultZIP).status, 200)
    }

    func testTheFileIsPrivateNewAndASymlinkAtItsNameIsNotFollowed() throws {
        let r = try receiver()
        defer { r.stop() }
        let secret = try UploadReceiver.makeSecret()
        r.expect(scanID: "f11e00", secret: secret)
        XCTAssertEqual(try post(r.port, "/\(secret)", resultZIP).status, 200)
        var st = stat()
        XCTAssertEqual(lstat(directory + "/scan-f11e00.zip", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)

        // A symlink planted at the next scan's name, pointing at a file of the user's.
        let victim = directory + "/victim.txt"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: victim))
        XCTAssertEqual(symlink(victim, directory + "/scan-5y3l1k.zip"), 0)
        let secret2 = try UploadReceiver.makeSecret()
        r.expect(scanID: "5y3l1k", secret: secret2)
        let answer = try post(r.port, "/\(secret2)", resultZIP)
        XCTAssertEqual(answer.status, 500)
        XCTAssertEqual(try String(contentsOfFile: victim, encoding: .utf8), "keep me")
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: directory + "/scan-5y3l1k.zip"), victim)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory).sorted(),
                       ["scan-5y3l1k.zip", "scan-f11e00.zip", "victim.txt"], "no part file left")
    }

    func testTheUploadDirectoryMustBeTheUsersAndIsCreatedPrivate() throws {
        let fresh = directory + "/fresh"
        let r = try UploadReceiver(host: "127.0.0.1", port: 0, directory: fresh)
        r.stop()
        var st = stat()
        XCTAssertEqual(lstat(fresh, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o700)

        let open = directory + "/open"
        XCTAssertEqual(mkdir(open, 0o700), 0)
        XCTAssertEqual(chmod(open, 0o777), 0)
        XCTAssertThrowsError(try UploadReceiver(host: "127.0.0.1", port: 0, directory: open)) { error in
            XCTAssertTrue("\(error)".contains("is writable by group or others (mode 777)"), "\(error)")
        }
        let link = directory + "/link"
        XCTAssertEqual(symlink(fresh, link), 0)
        XCTAssertThrowsError(try UploadReceiver(host: "127.0.0.1", port: 0, directory: link)) { error in
            XCTAssertTrue("\(error)".contains("is not a directory"), "\(error)")
        }
        if getuid() != 0 {
            XCTAssertThrowsError(try UploadReceiver(host: "127.0.0.1", port: 0, directory: "/")) { error in
                XCTAssertTrue("\(error)".contains("belongs to uid 0"), "\(error)")
            }
        }
    }
}
