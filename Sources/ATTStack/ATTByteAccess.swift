// Little-endian field access used by the ATT codec (Core Spec 5.4 Vol 3 Part F §3.3: multi-octet fields
// are little-endian).

// The one reader of little-endian fields for every module (ATT, GATT values, HCI and management events, ZIP).
extension RandomAccessCollection where Element == UInt8, Index == Int {
    /// The little-endian UInt16 at absolute index `i` (the caller has checked the bounds).
    @inlinable @inline(__always)
    public func littleEndianUInt16(at i: Int) -> UInt16 {
        UInt16(self[i]) | UInt16(self[i &+ 1]) << 8
    }

    /// The little-endian UInt32 at absolute index `i` (the caller has checked the bounds).
    @inlinable @inline(__always)
    public func littleEndianUInt32(at i: Int) -> UInt32 {
        UInt32(littleEndianUInt16(at: i)) | UInt32(littleEndianUInt16(at: i &+ 2)) << 16
    }

    /// `littleEndianUInt16(at:)`, as the codec spells it.
    @inlinable @inline(__always)
    func attLE16(at i: Int) -> UInt16 { littleEndianUInt16(at: i) }
}

/// `v`'s two bytes, least significant first (Vol 3 Part F §3.3; HCI parameters and GATT values too): the one writer of
/// a little-endian UInt16 into a new array, for every module.
@inlinable
public func le16(_ v: UInt16) -> [UInt8] { [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)] }

/// `v`'s four bytes, least significant first: le16's twin for 32-bit fields (a management command's passkey).
@inlinable
public func le32(_ v: UInt32) -> [UInt8] { le16(UInt16(truncatingIfNeeded: v)) + le16(UInt16(truncatingIfNeeded: v >> 16)) }

extension UnsafeMutableRawBufferPointer {
    /// Stores `v` little-endian at `offset` (the caller has checked the bounds).
    @inlinable @inline(__always)
    func attStoreLE16(_ v: UInt16, at offset: Int) {
        self[offset] = UInt8(truncatingIfNeeded: v)
        self[offset &+ 1] = UInt8(truncatingIfNeeded: v >> 8)
    }

    /// Copies `bytes` to `offset`; returns the number of bytes copied.
    @inlinable @inline(__always)
    func attCopy(_ bytes: ArraySlice<UInt8>, at offset: Int) -> Int {
        let n = bytes.count
        if n > 0 {
            bytes.withUnsafeBytes { src in
                UnsafeMutableRawBufferPointer(rebasing: self[offset..<(offset &+ n)]).copyMemory(from: src)
            }
        }
        return n
    }
}

/// Builds a byte array for a list from its elements (used by the list structs' validating inits).
@usableFromInline
struct ATTListBuilder {
    @usableFromInline var bytes: [UInt8] = []
    @inlinable init(capacity: Int) { bytes.reserveCapacity(capacity) }
    @inlinable mutating func le16(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
    }
    @inlinable mutating func append<C: Collection>(_ c: C) where C.Element == UInt8 { bytes.append(contentsOf: c) }
}
