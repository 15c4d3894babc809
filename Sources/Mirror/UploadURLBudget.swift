// The upload URL as cloudToken holds it: http://HOST:PORT/ and a secret that takes the room the mirror's limit
// leaves. The real firmware takes about 40 bytes (seed 000: "Writing uploadURL (40 bytes / MTU budget 512)",
// "more than ~40-50 bytes and the firmware says no"), so the secret shrinks before the scan is refused.

/// How long the upload URL's secret is for one host, port and limit: what the limit leaves after
/// `http://HOST:PORT/`, at most 22 base64url characters (132 bits) and at least 12 (72 bits; the arithmetic that
/// makes 72 enough is in docs/security.md). The one place that decides the secret's length.
public struct UploadURLBudget: Sendable, Equatable {
    /// The longest secret: 22 base64url characters, 132 bits.
    public static let longestSecret = 22
    /// The shortest secret the scan sends: 12 base64url characters, 72 bits.
    public static let shortestSecret = 12
    /// Bits of a secret of `characters` base64url characters, each drawn uniformly from 64.
    public static func bits(characters: Int) -> Int { 6 * characters }

    /// `http://HOST:PORT/` (an IPv6 host in brackets).
    public let prefix: String
    /// The bytes cloudToken may hold: the smallest of the limits given.
    public let limit: Int
    /// The secret's length in characters, or nil when even the shortest secret does not fit.
    public let secretCharacters: Int?

    public init(host: String, port: UInt16, limit: Int) {
        prefix = Self.prefix(host: host, port: port)
        self.limit = limit
        let room = limit - prefix.utf8.count
        secretCharacters = room >= Self.shortestSecret ? min(room, Self.longestSecret) : nil
    }

    /// The URL's part before the secret, as the mirror is told it.
    public static func prefix(host: String, port: UInt16) -> String {
        "http://\(host.contains(":") ? "[\(host)]" : host):\(port)/"
    }

    /// The shortest URL the scan would send: the prefix and the 12-character secret.
    public var shortestURLBytes: Int { prefix.utf8.count + Self.shortestSecret }

    /// What would make the shortest URL fit `limit` (empty when it fits): a shorter `--upload-port` or
    /// `--upload-host`, each only when one alone is enough.
    public func shorterAdvice(host: String, port: UInt16) -> String {
        let over = shortestURLBytes - limit
        guard over > 0 else { return "" }
        var ways: [String] = []
        let digits = String(port).count
        if digits - over >= 1 {
            let maxPort = Int(String(repeating: "9", count: digits - over))!
            ways.append("an --upload-port of at most \(digits - over) digit\(digits - over == 1 ? "" : "s")"
                        + (maxPort >= 1024 ? " (\(min(maxPort, 7777)), for example)" : ""))
        }
        // The shortest numeric IPv4 host is 7 characters (1.2.3.4).
        if host.utf8.count - over >= 7 {
            ways.append("an --upload-host of at most \(host.utf8.count - over) characters")
        }
        if ways.isEmpty { return "no --upload-host or --upload-port alone makes it fit: the mirror's limit \(limit) leaves no room for http://HOST:PORT/ and a \(Self.bits(characters: Self.shortestSecret))-bit secret" }
        return ways.joined(separator: " or ") + " would fit"
    }
}
