// A reader of a ZIP archive's central directory (PKWARE APPNOTE 6.3.x): the upload receiver lists what arrived
// with it. The writer is the simulator's (Sources/MirrorSimulator/ZIPWriter.swift). The CRC-32 is zlib's.

import CZlib

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
        let a = archive
        guard a.count >= 22 else { throw ZIPError(problem: "\(a.count) bytes, shorter than an end-of-central-directory record") }
        var eocd = -1
        var i = a.count - 22
        let lowest = max(0, a.count - 22 - 0xFFFF)
        while i >= lowest {
            if a.u32(i) == 0x0605_4B50 { eocd = i; break }
            i -= 1
        }
        guard eocd >= 0 else { throw ZIPError(problem: "no end-of-central-directory record") }
        let count = Int(a.u16(eocd + 10))
        let size = Int(a.u32(eocd + 12))
        let offset = Int(a.u32(eocd + 16))
        guard offset + size <= eocd else { throw ZIPError(problem: "central directory at \(offset)+\(size) runs past its end record at \(eocd)") }
        var entries: [ZIPEntry] = []
        var p = offset
        for n in 0..<count {
            guard p + 46 <= offset + size, a.u32(p) == 0x0201_4B50 else {
                throw ZIPError(problem: "central directory entry \(n) at offset \(p) has no signature")
            }
            let nameLength = Int(a.u16(p + 28)), extra = Int(a.u16(p + 30)), comment = Int(a.u16(p + 32))
            guard p + 46 + nameLength <= a.count else { throw ZIPError(problem: "entry \(n)'s name runs past the end") }
            let name = String(decoding: a[(p + 46)..<(p + 46 + nameLength)], as: UTF8.self)
            entries.append(ZIPEntry(name: name, method: a.u16(p + 10), crc32: a.u32(p + 16),
                                    compressedSize: a.u32(p + 20), uncompressedSize: a.u32(p + 24),
                                    localHeaderOffset: a.u32(p + 42)))
            p += 46 + nameLength + extra + comment
        }
        return entries
    }

    /// The contents of a stored entry, checked against its CRC-32.
    public static func contents(of entry: ZIPEntry, in archive: [UInt8]) throws(ZIPError) -> [UInt8] {
        let p = Int(entry.localHeaderOffset)
        guard p + 30 <= archive.count, archive.u32(p) == 0x0403_4B50 else { throw ZIPError(problem: "\(entry.name): no local header at \(p)") }
        guard entry.method == 0 else { throw ZIPError(problem: "\(entry.name): method \(entry.method) is not stored (0)") }
        let start = p + 30 + Int(archive.u16(p + 26)) + Int(archive.u16(p + 28))
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

extension [UInt8] {
    fileprivate func u16(_ i: Int) -> UInt16 { UInt16(self[i]) | UInt16(self[i + 1]) << 8 }
    fileprivate func u32(_ i: Int) -> UInt32 { UInt32(u16(i)) | UInt32(u16(i + 2)) << 16 }
}
