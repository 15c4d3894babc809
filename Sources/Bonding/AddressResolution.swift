// Resolvable private addresses (Core Spec 5.4 Vol 6 Part B §1.3.2.2-3): the random address hash function ah
// (Vol 3 Part H §2.2.2) over the security function e, AES-128 (§2.2.1), through CCrypto's libcrypto.
import CCrypto
import LinuxBluetooth

/// Why an address could not be resolved: libcrypto is missing or refused, or the IRK is not 16 octets.
public struct AddressResolutionError: Error, Sendable, Equatable, CustomStringConvertible {
    public var problem: String
    public init(_ problem: String) { self.problem = problem }
    public var description: String { "resolving a private address: \(problem)" }
}

public enum AddressResolution {
    /// e(key, plaintext) (Vol 3 Part H §2.2.1): AES-128, both most significant octet first as the spec writes them.
    public static func encrypt(key: [UInt8], block: [UInt8]) throws(AddressResolutionError) -> [UInt8] {
        guard key.count == 16, block.count == 16 else { throw AddressResolutionError("AES-128 takes a 16-octet key and block") }
        var out = [UInt8](repeating: 0, count: 16)
        let ok = key.withUnsafeBufferPointer { k in
            block.withUnsafeBufferPointer { b in out.withUnsafeMutableBufferPointer { ccr_aes128_encrypt_block(k.baseAddress, b.baseAddress, $0.baseAddress) } }
        }
        guard ok == 1 else {
            if let why = ccr_unavailable() { throw AddressResolutionError(String(cString: why)) }
            throw AddressResolutionError("libcrypto's AES-128-ECB refused the block")
        }
        return out
    }

    /// ah(k, r) = e(k, r') mod 2^24, r' = 104 zero bits || r (Vol 3 Part H §2.2.2). `irk` least significant octet
    /// first (as SMP and mgmt carry it), `prand` and the hash most significant first (the address's printed order).
    public static func ah(irk: [UInt8], prand: [UInt8]) throws(AddressResolutionError) -> [UInt8] {
        guard irk.count == 16, prand.count == 3 else { throw AddressResolutionError("ah takes a 16-octet IRK and a 3-octet prand") }
        let e = try encrypt(key: irk.reversed(), block: [UInt8](repeating: 0, count: 13) + prand)
        return Array(e[13..<16])
    }

    /// Whether `address` is a resolvable private address (its two most significant bits 0b01, Vol 6 Part B §1.3.2.2).
    public static func isResolvable(_ address: BluetoothAddress) -> Bool { address.bytes[0] & 0xC0 == 0x40 }

    /// Whether `irk` resolves `address`: it is resolvable and its hash (the low 24 bits) is ah(irk, prand)
    /// (Vol 6 Part B §1.3.2.3).
    public static func resolves(_ address: BluetoothAddress, irk: [UInt8]) throws(AddressResolutionError) -> Bool {
        guard isResolvable(address) else { return false }
        return try ah(irk: irk, prand: Array(address.bytes[0..<3])) == Array(address.bytes[3..<6])
    }
}
