// The capture reader against hostile files (truncated records, lengths past the end, a 4 GB length field, an unknown
// datalink) and L2CAP fragments out of order: each is a clear error naming the record, or a frame counted as broken;
// never a crash, a hang or an allocation of the length a record claims.
import CaptureReader
import Foundation
import XCTest

final class BTSnoopReaderTests: XCTestCase {
    /// A btsnoop file: the header, then each record as (flags, bytes, claimed length or nil for its own).
    static func file(datalink: UInt32, _ records: [(flags: UInt32, bytes: [UInt8], length: UInt32?)], cut: Int = 0) -> [UInt8] {
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var out = Array("btsnoop\0".utf8) + be32(1) + be32(datalink)
        for r in records {
            let n = r.length ?? UInt32(r.bytes.count)
            out += be32(n) + be32(n) + be32(r.flags) + be32(0) + [0x00, 0xE0, 0x3B, 0x6F, 0x00, 0x00, 0x00, 0x00] + r.bytes
        }
        return Array(out.dropLast(cut))
    }

    func write(_ bytes: [UInt8]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("snoop-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func error(_ bytes: [UInt8]) throws -> CaptureError? {
        let path = try write(bytes)
        do throws(CaptureError) { _ = try BTSnoopCapture(path: path); return nil } catch { return error }
    }

    /// LE Connection Complete (0x3E 0x01): success, handle 0x0040, central, public peer 00:AA:01:01:00:01.
    static let connected: [UInt8] = [0x3E, 19, 0x01, 0x00, 0x40, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x01, 0xAA, 0x00, 0x28, 0x00, 0x00, 0x00, 0x48, 0x00, 0x00]

    func testHostileFilesAreErrorsNamingTheRecord() throws {
        XCTAssertEqual(try error(Array("notsnoop".utf8) + [0, 0, 0, 1, 0, 0, 0x07, 0xD1])?.problem.contains("not a btsnoop capture"), true)
        XCTAssertEqual(try error(Self.file(datalink: 1001, []))?.problem.contains("datalink 1001"), true)
        let truncated = try XCTUnwrap(try error(Self.file(datalink: 2001, [(3, Self.connected, nil)], cut: 5)))
        XCTAssertEqual(truncated.record, 1)
        XCTAssertTrue(truncated.problem.hasPrefix("truncated"), truncated.description)
        let huge = try XCTUnwrap(try error(Self.file(datalink: 2001, [(3, Self.connected, nil), (4, [1, 2, 3], 0xFFFF_FFF0)])))
        XCTAssertEqual(huge.record, 2)
        XCTAssertTrue(huge.description.contains("above the largest HCI packet"), huge.description)
        let headerCut = try XCTUnwrap(try error(Self.file(datalink: 1002, [(0, [0x04] + Self.connected, nil)]) + [0, 0, 0]))
        XCTAssertEqual(headerCut.record, 2)
    }

    func testFragmentsAreReassembledAndOnesOutOfOrderAreCountedNotGuessed() throws {
        // An ATT Read Response [0x0B, 1, 2, 3, 4, 5] on CID 4 in two fragments, then a continuation with no start.
        let frame: [UInt8] = [6, 0, 4, 0, 0x0B, 1, 2, 3, 4, 5]
        func acl(_ boundary: UInt8, _ data: ArraySlice<UInt8>) -> [UInt8] { [0x40, boundary << 4, UInt8(data.count), 0] + data }
        let capture = Self.file(datalink: 1002, [
            (0, [0x04] + Self.connected, nil),
            (1, [0x02] + acl(0b10, frame[0..<5]), nil),
            (1, [0x02] + acl(0b01, frame[5...]), nil),
            (1, [0x02] + acl(0b01, frame[5...]), nil),
        ])
        let connections = LEConnectionTracker.connections(of: try BTSnoopCapture(path: try write(capture)))
        XCTAssertEqual(connections.count, 1)
        XCTAssertEqual(connections[0].peer, "00:AA:01:01:00:01")
        XCTAssertEqual(connections[0].pdus.map(\.bytes), [[0x0B, 1, 2, 3, 4, 5]])
        XCTAssertTrue(connections[0].pdus[0].fromPeer)
        XCTAssertEqual(connections[0].brokenFrames, 1, "the continuation with no start")
        // `clone --connection` names it by its number or its peer's address, in either case.
        XCTAssertTrue(connections[0].isNamed(by: "1"))
        XCTAssertTrue(connections[0].isNamed(by: "00:aa:01:01:00:01"))
        XCTAssertFalse(connections[0].isNamed(by: "2"))
        XCTAssertEqual(LEConnectionTracker.connectionsWithATT(of: try BTSnoopCapture(path: try write(capture))).count, 1)
        let silent = Self.file(datalink: 1002, [(0, [0x04] + Self.connected, nil)])
        XCTAssertEqual(LEConnectionTracker.connections(of: try BTSnoopCapture(path: try write(silent))).count, 1)
        XCTAssertEqual(LEConnectionTracker.connectionsWithATT(of: try BTSnoopCapture(path: try write(silent))).count, 0, "no ATT on it")
    }
}
