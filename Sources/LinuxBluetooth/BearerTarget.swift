// Addresses and targets: what a user types where a device is expected.

import ATTStack
import LinkCore
import CBlueZSocket

/// A Bluetooth device address (BD_ADDR, Core Spec 5.4 Vol 2 Part B §1.2), held in the printed order:
/// "00:AA:01:01:00:01" is bytes [0x00, 0xAA, 0x01, 0x01, 0x00, 0x01]. The kernel's bdaddr_t is the reverse;
/// the C shim does that conversion.
public struct BluetoothAddress: Sendable, Hashable, CustomStringConvertible, Codable {
    /// Six bytes, most significant first (the printed order).
    public let bytes: [UInt8]

    /// 00:00:00:00:00:00, the kernel's BDADDR_ANY.
    public static let any = BluetoothAddress(uncheckedBytes: [0, 0, 0, 0, 0, 0])

    /// Six bytes in the printed order; nil unless there are exactly six.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 6 else { return nil }
        self.bytes = bytes
    }

    init(uncheckedBytes: [UInt8]) { self.bytes = uncheckedBytes }

    /// Parses "AA:BB:CC:DD:EE:FF" (either case); the error says which character is wrong.
    public init(parsing text: String) throws(BearerTargetError) {
        let chars = Array(text)
        func fail(_ position: Int?, _ problem: String) -> BearerTargetError {
            BearerTargetError(input: text, position: position, problem: problem)
        }
        if chars.isEmpty { throw fail(nil, "the address is empty; expected six hex bytes as in 00:AA:01:01:00:01") }
        var out: [UInt8] = []
        out.reserveCapacity(6)
        var i = 0
        for byteIndex in 0..<6 {
            if byteIndex > 0 {
                guard i < chars.count else {
                    throw fail(nil, "too short: \(byteIndex) of 6 bytes; expected six hex bytes as in 00:AA:01:01:00:01")
                }
                guard chars[i] == ":" else {
                    throw fail(i + 1, "expected ':' between bytes, found '\(chars[i])'")
                }
                i += 1
            }
            var value: UInt8 = 0
            for _ in 0..<2 {
                guard i < chars.count else {
                    throw fail(nil, "too short: it ends inside byte \(byteIndex + 1) of 6; expected six hex bytes as in 00:AA:01:01:00:01")
                }
                guard let d = chars[i].hexDigitValue else {
                    throw fail(i + 1, chars[i] == ":"
                        ? "each byte needs two hex digits, found ':' early"
                        : "'\(chars[i])' is not a hexadecimal digit")
                }
                value = value << 4 | UInt8(d)
                i += 1
            }
            out.append(value)
        }
        if i < chars.count {
            throw fail(i + 1, "unexpected '\(chars[i])' after the sixth byte")
        }
        self.bytes = out
    }

    /// "00:AA:01:01:00:01" (uppercase).
    public var description: String { ATTHex.string(bytes, separator: ":", uppercase: true) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do { self = try BluetoothAddress(parsing: text) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

/// An LE address type (Core Spec 5.4 Vol 6 Part B §1.3): the kernel's sockaddr_l2.l2_bdaddr_type.
public enum LEAddressType: UInt8, Sendable, Codable, CustomStringConvertible, CaseIterable {
    /// BDADDR_LE_PUBLIC: an IEEE-assigned public address.
    case `public` = 1
    /// BDADDR_LE_RANDOM: a static or private random address.
    case random = 2

    /// "public" or "random"; nil for anything else.
    public init?(name: String) {
        switch name.lowercased() {
        case "public": self = .public
        case "random": self = .random
        default: return nil
        }
    }

    public var description: String { self == .public ? "public" : "random" }
}

/// Where a bearer connects: a Bluetooth LE device address, or `unix:/path` (an AF_UNIX SOCK_SEQPACKET socket
/// whose every datagram is one ATT PDU, as the simulator serves it).
public enum BearerTarget: Sendable, Hashable, CustomStringConvertible {
    /// An AF_UNIX SOCK_SEQPACKET socket path.
    case unix(path: String)
    /// An LE device address; its type (public or random) is given separately.
    case bluetooth(BluetoothAddress)

    /// Parses "unix:/path" or "AA:BB:CC:DD:EE:FF"; the error says which character is wrong.
    public init(parsing text: String) throws(BearerTargetError) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else {
                throw BearerTargetError(input: text, position: nil,
                                        problem: "unix: needs a socket path, as in unix:/tmp/mirror-sim.sock")
            }
            let limit = cbz_unix_path_max()
            guard path.utf8.count <= limit else {
                throw BearerTargetError(input: text, position: 5 + limit + 1,
                                        problem: "the socket path is \(path.utf8.count) bytes; AF_UNIX paths hold at most \(limit)")
            }
            if let nul = path.firstIndex(of: "\0") {
                throw BearerTargetError(input: text, position: 5 + path.distance(from: path.startIndex, to: nul) + 1,
                                        problem: "a socket path cannot contain a NUL byte")
            }
            self = .unix(path: path)
            return
        }
        if text.contains("/") && !text.contains(":") || text.hasPrefix("/") {
            throw BearerTargetError(input: text, position: 1,
                                    problem: "a socket path needs the unix: prefix, as in unix:\(text)")
        }
        self = .bluetooth(try BluetoothAddress(parsing: text))
    }

    public var description: String {
        switch self {
        case .unix(let path): return "unix:\(path)"
        case .bluetooth(let a): return a.description
        }
    }
}

