import TestSupport
import Mirror
import MirrorSimulator
import Foundation
import GATTClient
import LinuxBluetooth
import LinkCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import XCTest
@testable import Mirror

final class DigestAndZIPTests: XCTestCase {
    func testSHA256KnownVectors() {
        XCTAssertEqual(SHA256.hex(of: [UInt8]()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256.hex(of: Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.hex(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var h = SHA256()
        for _ in 0..<1000 { h.update([UInt8](repeating: 0x61, count: 1000)) }
        XCTAssertEqual(h.hexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// A copy goes on from the same state on its own (the libcrypto context is copied on write), and a
    /// digest can be taken mid-way and feeding go on.
    func testSHA256CopiesAreIndependentAndADigestCanBeTakenMidway() {
        var a = SHA256()
        a.update(Array("ab".utf8))
        var b = a
        XCTAssertEqual(a.hexDigest(), SHA256.hex(of: Array("ab".utf8)))
        a.update(Array("c".utf8))
        b.update(Array("d".utf8))
        XCTAssertEqual(a.hexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(b.hexDigest(), SHA256.hex(of: Array("abd".utf8)))
        XCTAssertNotEqual(a.finalize(), b.finalize())
        var c = SHA256()
        Array("abc".utf8).withUnsafeBytes { c.update($0) }
        c.update([UInt8]())
        XCTAssertEqual(c.finalize(), a.finalize())
        XCTAssertEqual(SHA256.hex(of: Array("abc".utf8)[...].lazy.map { $0 }), a.hexDigest(), "a non-contiguous collection")
    }

    func testCRC32KnownValue() {
        XCTAssertEqual(CRC32.checksum(Array("123456789".utf8)), 0xCBF4_3926)
        XCTAssertEqual(CRC32.checksum(Array("56789".utf8), continuing: CRC32.checksum(Array("1234".utf8))), 0xCBF4_3926)
        XCTAssertEqual(CRC32.checksum([UInt8](), continuing: 0xCBF4_3926), 0xCBF4_3926, "nothing fed keeps the CRC")
        XCTAssertEqual(CRC32.checksum([UInt8]()), 0)
        XCTAssertEqual(CRC32.checksum(Array("123456789".utf8).lazy.map { $0 }), 0xCBF4_3926, "a non-contiguous collection")
    }

    func testStoredZIPRoundTripsAndDetectsCorruption() throws {
        let mesh = Array("ply\nformat ascii 1.0\nend_header\n".utf8)
        let json = Array("{\"waist\": 81.5}".utf8)
        var zip = ZIPArchive.stored([("mesh.ply", mesh), ("measurements.json", json)])
        let entries = try ZIPArchive.entries(of: zip)
        XCTAssertEqual(entries.map(\.name), ["mesh.ply", "measurements.json"])
        XCTAssertEqual(entries.map(\.uncompressedSize), [UInt32(mesh.count), UInt32(json.count)])
        XCTAssertEqual(try ZIPArchive.contents(of: entries[1], in: zip), json)
        // Flip one byte of the JSON: its CRC-32 check must fail.
        zip[Int(entries[1].localHeaderOffset) + 30 + "measurements.json".utf8.count] ^= 0xFF
        XCTAssertThrowsError(try ZIPArchive.contents(of: entries[1], in: zip))
        XCTAssertThrowsError(try ZIPArchive.entries(of: Array("not a zip at all, just text....".utf8)))
    }
}

final class UploadReceiverTests: XCTestCase {
    var directory = ""

    override func setUp() {
        directory = NSTemporaryDirectory() + "upload-test-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }
    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    /// Sends raw request bytes to 127.0.0.1:port and returns the status code of the answer.
    func rawRequest(port: UInt16, _ head: String, body: [UInt8] = []) throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        XCTAssertEqual(rc, 0, "connect: errno \(errno)")
        let bytes = Array(head.utf8) + body
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }
            sent += n
        }
        var answer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &answer, answer.count, 0)
        let text = String(decoding: answer.prefix(max(0, n)), as: UTF8.self)
        guard let line = text.split(separator: "\r\n").first, let code = Int(line.split(separator: " ")[1]) else {
            XCTFail("no HTTP status line in \(text)"); return 0
        }
        return code
    }

    func testContentLengthAndChunkedUploadsAreStoredWithDigestAndEntries() throws {
        let events = Lock<[UploadEvent]>([])
        let receiver = try UploadReceiver(host: "127.0.0.1", port: 0, directory: directory) { e in events.withLock { $0.append(e) } }
        defer { receiver.stop() }
        XCTAssertNotEqual(receiver.port, 0)
        let secret = try UploadReceiver.makeSecret()
        receiver.expect(scanID: "a1b2c3", secret: secret)
        let zip = ZIPArchive.stored([("mesh.ply", Array(repeating: 0x41, count: 5000)), ("measurements.json", Array("{}".utf8))])
        let status = try rawRequest(port: receiver.port, "POST /\(secret) HTTP/1.1\r\nHost: x\r\nContent-Length: \(zip.count)\r\nConnection: close\r\n\r\n", body: zip)
        XCTAssertEqual(status, 200)
        let first = try XCTUnwrap(receiver.uploads.first)
        XCTAssertEqual(first.bytes, zip.count)
        XCTAssertEqual(first.sha256, SHA256.hex(of: zip))
        XCTAssertEqual(first.entries?.map(\.name), ["mesh.ply", "measurements.json"])
        XCTAssertEqual(first.framing, "content-length")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: first.path)), Data(zip))

        // The same body, chunked in three pieces, as the next scan's one upload.
        let secret2 = try UploadReceiver.makeSecret()
        receiver.expect(scanID: "d4e5f6", secret: secret2)
        var chunked: [UInt8] = []
        for piece in [zip[0..<100], zip[100..<3000], zip[3000...]] {
            chunked += Array(String(piece.count, radix: 16).utf8) + [13, 10] + piece + [13, 10]
        }
        chunked += Array("0\r\n\r\n".utf8)
        let status2 = try rawRequest(port: receiver.port, "POST /\(secret2) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n", body: chunked)
        XCTAssertEqual(status2, 200)
        XCTAssertEqual(receiver.uploads.count, 2)
        XCTAssertEqual(receiver.uploads.last?.sha256, SHA256.hex(of: zip))
        XCTAssertEqual(receiver.uploads.last?.framing, "chunked")
        // No partial files are left behind.
        let left = try FileManager.default.contentsOfDirectory(atPath: directory)
        XCTAssertEqual(left.sorted(), ["scan-a1b2c3.zip", "scan-d4e5f6.zip"])
        XCTAssertEqual(events.withLock { $0.count }, 2)
    }

    func testWrongIDWrongPathAndTooLargeAreRefused() throws {
        let events = Lock<[UploadEvent]>([])
        let receiver = try UploadReceiver(host: "127.0.0.1", port: 0, directory: directory, maxBytes: 1000) { e in events.withLock { $0.append(e) } }
        defer { receiver.stop() }
        let secret = try UploadReceiver.makeSecret()
        receiver.expect(scanID: "cur123", secret: secret)
        XCTAssertEqual(try rawRequest(port: receiver.port, "POST /upload/cur123 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n", body: [1, 2, 3]), 404)
        XCTAssertEqual(try rawRequest(port: receiver.port, "POST /elsewhere HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n", body: [1, 2, 3]), 404)
        XCTAssertEqual(try rawRequest(port: receiver.port, "GET /\(secret) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 405)
        XCTAssertEqual(try rawRequest(port: receiver.port, "POST /\(secret) HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n", body: Array(repeating: 7, count: 5000)), 413)
        // Chunked: no length up front, the limit trips while the body arrives.
        let big = [UInt8](repeating: 9, count: 1500)
        let body = Array(String(big.count, radix: 16).utf8) + [13, 10] + big + Array("\r\n0\r\n\r\n".utf8)
        XCTAssertEqual(try rawRequest(port: receiver.port, "POST /\(secret) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n", body: body), 413)
        XCTAssertTrue(receiver.uploads.isEmpty)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [])
        let statuses = events.withLock { $0 }.compactMap { e -> Int? in if case .rejected(_, _, let s, _) = e { return s } else { return nil } }
        XCTAssertEqual(statuses, [404, 404, 405, 413, 413])
    }

    func testAPortInUseAndAMissingDirectoryAreNamed() throws {
        let first = try UploadReceiver(host: "127.0.0.1", port: 0, directory: directory)
        defer { first.stop() }
        XCTAssertThrowsError(try UploadReceiver(host: "127.0.0.1", port: first.port, directory: directory)) { error in
            XCTAssertEqual("\(error)", "upload receiver: cannot listen on 127.0.0.1:\(first.port): the port is in use (EADDRINUSE): another scan or program listens there; --upload-port 0 picks a free one")
        }
        XCTAssertThrowsError(try UploadReceiver(host: "127.0.0.1", port: 0, directory: directory + "/missing/deeper")) { error in
            XCTAssertEqual("\(error)", "upload receiver: the upload directory \(directory)/missing/deeper does not exist and cannot be created (mode 0700): ENOENT (No such file or directory)")
        }
    }

    func testStartFailureNamesTheProblem() {
        XCTAssertThrowsError(try UploadReceiver(host: "not-an-address", port: 0, directory: directory)) { error in
            XCTAssertTrue("\(error)".contains("not a numeric"), "\(error)")
        }
    }
}
