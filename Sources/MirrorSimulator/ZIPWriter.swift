// The ZIP writer (PKWARE APPNOTE 6.3.x), stored (uncompressed) entries with zlib's CRC-32: the simulated mirror
// builds its result ZIP with it. Hand-written because zlib has no ZIP container and stored entries need no
// compression; Mirror's ZIP.swift reads what it writes.
import Mirror

extension ZIPArchive {
    /// An archive of `files` (name, contents), each stored uncompressed with its CRC-32.
    public static func stored(_ files: [(name: String, contents: [UInt8])]) -> [UInt8] {
        var out: [UInt8] = []
        var central: [UInt8] = []
        for file in files {
            let name = Array(file.name.utf8)
            let crc = CRC32.checksum(file.contents)
            let size = UInt32(file.contents.count)
            let offset = UInt32(out.count)
            // Local file header.
            out.le32(0x0403_4B50); out.le16(20); out.le16(0); out.le16(0)
            out.le16(0); out.le16(0x21) // DOS time 00:00:02, date 1980-01-01
            out.le32(crc); out.le32(size); out.le32(size)
            out.le16(UInt16(name.count)); out.le16(0)
            out += name
            out += file.contents
            // Central directory header.
            central.le32(0x0201_4B50); central.le16(20); central.le16(20); central.le16(0); central.le16(0)
            central.le16(0); central.le16(0x21)
            central.le32(crc); central.le32(size); central.le32(size)
            central.le16(UInt16(name.count)); central.le16(0); central.le16(0)
            central.le16(0); central.le16(0); central.le32(0); central.le32(offset)
            central += name
        }
        let centralOffset = UInt32(out.count)
        out += central
        // End of central directory record.
        out.le32(0x0605_4B50); out.le16(0); out.le16(0)
        out.le16(UInt16(files.count)); out.le16(UInt16(files.count))
        out.le32(UInt32(central.count)); out.le32(centralOffset); out.le16(0)
        return out
    }
}

extension [UInt8] {
    fileprivate mutating func le16(_ v: UInt16) { append(UInt8(v & 0xFF)); append(UInt8(v >> 8)) }
    fileprivate mutating func le32(_ v: UInt32) { for s in stride(from: 0, to: 32, by: 8) { append(UInt8(truncatingIfNeeded: v >> UInt32(s))) } }
}
