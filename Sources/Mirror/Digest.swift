// SHA-256 (FIPS 180-4) from libcrypto, behind the CCrypto shim: the upload receiver reports the digest of
// what it stored, fed incrementally as the body arrives.
import ATTStack
import CCrypto
import LinuxBluetooth
import LinkCore

/// An incremental SHA-256 digest with value semantics: a copy goes on from the same state independently.
public struct SHA256: Sendable {
    private var context = DigestContext()

    public init() {}

    /// Feeds more bytes.
    public mutating func update<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        let ctx = unique()
        if bytes.withContiguousStorageIfAvailable({ ctx.update(UnsafeRawBufferPointer($0)) }) != nil { return }
        Array(bytes).withUnsafeBytes { ctx.update($0) }
    }

    /// Feeds bytes from raw memory.
    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        unique().update(buffer)
    }

    /// The 32-byte digest of everything fed so far (feeding may go on after it).
    public func finalize() -> [UInt8] { context.digest() }

    /// The digest as 64 lowercase hex digits.
    public func hexDigest() -> String { ATTHex.string(finalize()) }

    /// The hex digest of `bytes`.
    public static func hex<C: Collection>(of bytes: C) -> String where C.Element == UInt8 {
        var h = SHA256()
        h.update(bytes)
        return h.hexDigest()
    }

    /// The context, copied first when another SHA256 value shares it (copy on write).
    private mutating func unique() -> DigestContext {
        if !isKnownUniquelyReferenced(&context) { context = context.copy() }
        return context
    }
}

/// One libcrypto SHA-256 context, freed with its owner.
private final class DigestContext: Sendable {
    // The lock guards the C context: SHA256 copies share it until one of them writes (then it is copied).
    private let state: Lock<OpaquePointer>

    init() { state = Lock(DigestContext.checked(ccr_sha256_new())) }
    private init(copying other: OpaquePointer) { state = Lock(DigestContext.checked(ccr_sha256_copy(other))) }

    func copy() -> DigestContext { state.withLock { DigestContext(copying: $0) } }

    func update(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        let ok = state.withLock { ccr_sha256_update($0, base, buffer.count) }
        precondition(ok == 1, "libcrypto's EVP_DigestUpdate failed for SHA-256")
    }

    func digest() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let ok = state.withLock { ctx in out.withUnsafeMutableBufferPointer { ccr_sha256_digest(ctx, $0.baseAddress) } }
        precondition(ok == 1, "libcrypto's EVP_DigestFinal_ex failed for SHA-256")
        return out
    }

    deinit { state.withLock { ccr_sha256_free($0) } }

    /// NULL: libcrypto could not be loaded (the shim dlopens it on first use), or could not allocate a context.
    private static func checked(_ p: OpaquePointer?) -> OpaquePointer {
        if p == nil, let why = ccr_unavailable() { preconditionFailure("libcrypto cannot be loaded: \(String(cString: why))") }
        guard let p else { preconditionFailure("libcrypto could not allocate a SHA-256 context") }
        return p
    }
}
