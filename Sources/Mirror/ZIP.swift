// A reader of a ZIP archive's central directory (PKWARE APPNOTE 6.3.x): the upload receiver lists what arrived
// with it. The writer is the simulator's (Sources/MirrorSimulator/ZIPWriter.swift). The CRC-32 is zlib's.

import ATTStack
import CBlueZSocket
import CZlib
import Glibc
import LinuxBluetooth
import LinkCore

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), as ZIP uses it: zlib's, behind the CZlib shim.
public enum CRC32 {
    /// The CRC-32 of `bytes`, continuing from `crc` (0 to start).
    public static func checksum<C: Collection>(_ bytes: C, continuing crc: UInt32 = 0) -> UInt32 where C.Element == UInt8 {
        if let c = bytes.withContiguousStorageIfAvailable({ czl_crc32(crc, $0.baseAddress, $0.count) }) { return c }
        return Array(bytes).withUnsafeBytes { czl_crc32(crc, $0.baseAddress, $0.count) }
    }
}

/// One entry of a ZIP archive's central directory.
public struct ZIPEntry: Sendable, Equatable {
    public var name: String
    /// 0 stored, 8 deflated, ...
    public var method: UInt16
    public var crc32: UInt32
    public var compressedSize: UInt32
    public var uncompressedSize: UInt32
    public var localHeaderOffset: UInt32
}

/// Why a byte string is not a ZIP archive this reader understands.
public struct ZIPError: Error, Sendable, Equatable, CustomStringConvertible {
    public var problem: String
    public var description: String { "not a readable ZIP archive: \(problem)" }
}

/// Reads ZIP archives; `stored(_:)` (MirrorSimulator) builds them.
public enum ZIPArchive {
    /// The entries listed in the central directory of `archive`.
    public static func entries(of archive: [UInt8]) throws(ZIPError) -> [ZIPEntry] {
        let end = try endRecord(in: archive, at: 0, fileSize: archive.count)
        return try directory(Array(archive[end.offset..<(end.offset + end.size)]), count: end.count)
    }

    /// The end-of-central-directory record (APPNOTE 4.3.16) found in `tail`, the last bytes of a file of
    /// `fileSize` bytes starting at `tailStart`: the directory's offset, size and entry count.
    static func endRecord(in tail: [UInt8], at tailStart: Int, fileSize: Int) throws(ZIPError) -> (offset: Int, size: Int, count: Int) {
        let a = tail
        guard a.count >= 22 else { throw ZIPError(problem: "\(fileSize) bytes, shorter than an end-of-central-directory record") }
        var eocd = -1
        var i = a.count - 22
        let lowest = max(0, a.count - 22 - 0xFFFF)
        while i >= lowest {
            if a.littleEndianUInt32(at: i) == 0x0605_4B50 { eocd = i; break }
            i -= 1
        }
        guard eocd >= 0 else { throw ZIPError(problem: "no end-of-central-directory record") }
        let count = Int(a.littleEndianUInt16(at: eocd + 10))
        let size = Int(a.littleEndianUInt32(at: eocd + 12))
        let offset = Int(a.littleEndianUInt32(at: eocd + 16))
        guard offset + size <= tailStart + eocd else {
            throw ZIPError(problem: "central directory at \(offset)+\(size) runs past its end record at \(tailStart + eocd)")
        }
        return (offset, size, count)
    }

    /// The `count` entries of a central directory's bytes (APPNOTE 4.3.12).
    static func directory(_ a: [UInt8], count: Int) throws(ZIPError) -> [ZIPEntry] {
        var entries: [ZIPEntry] = []
        var p = 0
        for n in 0..<count {
            guard p + 46 <= a.count, a.littleEndianUInt32(at: p) == 0x0201_4B50 else {
                throw ZIPError(problem: "central directory entry \(n) at offset \(p) has no signature")
            }
            let nameLength = Int(a.littleEndianUInt16(at: p + 28)), extra = Int(a.littleEndianUInt16(at: p + 30)), comment = Int(a.littleEndianUInt16(at: p + 32))
            guard p + 46 + nameLength <= a.count else { throw ZIPError(problem: "entry \(n)'s name runs past the end") }
            let name = String(decoding: a[(p + 46)..<(p + 46 + nameLength)], as: UTF8.self)
            entries.append(ZIPEntry(name: name, method: a.littleEndianUInt16(at: p + 10), crc32: a.littleEndianUInt32(at: p + 16),
                                    compressedSize: a.littleEndianUInt32(at: p + 20), uncompressedSize: a.littleEndianUInt32(at: p + 24),
                                    localHeaderOffset: a.littleEndianUInt32(at: p + 42)))
            p += 46 + nameLength + extra + comment
        }
        return entries
    }

    /// The largest central directory `check(fileAt:)` reads (it holds only names and sizes: a real result's is
    /// a few hundred bytes).
    public static let maxDirectoryBytes = 1 << 20

    /// Checks the ZIP file at `path` without reading it whole: its end record and central directory (the last
    /// 64 KiB and at most `maxDirectoryBytes`), that every name in `required` is there with its local header
    /// where the directory says, and the CRC-32 of each required stored entry, streamed in 64 KiB reads.
    /// Returns the entries.
    public static func check(fileAt path: String, required: [String]) throws(ZIPError) -> [ZIPEntry] {
        let fd = cbz_open_read_nofollow(path)
        guard fd >= 0 else { throw ZIPError(problem: "cannot open \(path): \(Errno.current.name)") }
        defer { _ = cbz_close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw ZIPError(problem: "cannot stat \(path): \(Errno.current.name)") }
        let size = Int(st.st_size)
        func read(_ offset: Int, _ count: Int) throws(ZIPError) -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: count)
            var done = 0
            while done < count {
                let n = buffer.withUnsafeMutableBytes { cbz_pread(fd, $0.baseAddress! + done, count - done, Int64(offset + done)) }
                guard n > 0 else { throw ZIPError(problem: "reading \(path) at \(offset + done): " + (n == 0 ? "end of file" : Errno.current.name)) }
                done += n
            }
            return buffer
        }
        let tailStart = max(0, size - 22 - 0xFFFF)
        let end = try endRecord(in: try read(tailStart, size - tailStart), at: tailStart, fileSize: size)
        guard end.size <= maxDirectoryBytes else {
            throw ZIPError(problem: "central directory of \(end.size) bytes, over the \(maxDirectoryBytes)-byte limit")
        }
        let entries = try directory(try read(end.offset, end.size), count: end.count)
        let missing = required.filter { name in !entries.contains { $0.name == name } }
        guard missing.isEmpty else { throw ZIPError(problem: "missing the expected entr\(missing.count == 1 ? "y" : "ies") \(missing.joined(separator: ", "))") }
        for entry in entries where required.contains(entry.name) {
            let p = Int(entry.localHeaderOffset)
            guard p + 30 <= end.offset else { throw ZIPError(problem: "\(entry.name): local header at \(p) is past the data") }
            let header = try read(p, 30)
            guard header.littleEndianUInt32(at: 0) == 0x0403_4B50 else { throw ZIPError(problem: "\(entry.name): no local header at \(p)") }
            let start = p + 30 + Int(header.littleEndianUInt16(at: 26)) + Int(header.littleEndianUInt16(at: 28))
            let stop = start + Int(entry.compressedSize)
            guard stop <= end.offset else { throw ZIPError(problem: "\(entry.name): data runs past the central directory") }
            guard entry.method == 0 else { continue }  // a deflated entry's CRC covers the inflated bytes
            var crc: UInt32 = 0
            var at = start
            while at < stop {
                let chunk = try read(at, min(64 << 10, stop - at))
                crc = CRC32.checksum(chunk, continuing: crc)
                at += chunk.count
            }
            guard crc == entry.crc32 else {
                throw ZIPError(problem: "\(entry.name): CRC-32 \(String(crc, radix: 16)) differs from the directory's \(String(entry.crc32, radix: 16))")
            }
        }
        return entries
    }

    /// The contents of a stored entry, checked against its CRC-32.
    public static func contents(of entry: ZIPEntry, in archive: [UInt8]) throws(ZIPError) -> [UInt8] {
        let p = Int(entry.localHeaderOffset)
        guard p + 30 <= archive.count, archive.littleEndianUInt32(at: p) == 0x0403_4B50 else { throw ZIPError(problem: "\(entry.name): no local header at \(p)") }
        guard entry.method == 0 else { throw ZIPError(problem: "\(entry.name): method \(entry.method) is not stored (0)") }
        let start = p + 30 + Int(archive.littleEndianUInt16(at: p + 26)) + Int(archive.littleEndianUInt16(at: p + 28))
        let end = start + Int(entry.compressedSize)
        guard end <= archive.count else { throw ZIPError(problem: "\(entry.name): data runs past the end") }
        let data = Array(archive[start..<end])
        let crc = CRC32.checksum(data)
        guard crc == entry.crc32 else {
            throw ZIPError(problem: "\(entry.name): CRC-32 \(String(crc, radix: 16)) differs from the directory's \(String(entry.crc32, radix: 16))")
        }
        return data
    }
}
