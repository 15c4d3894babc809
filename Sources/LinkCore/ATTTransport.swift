// The seam between the ATT transaction engine (GATTClient) and whatever moves whole ATT PDUs:
// the socket bearer (L2CAP CID 4, AF_UNIX SOCK_SEQPACKET, a socketpair) or a test double.

import ATTStack
import CBlueZSocket

/// Receives what a transport reads, on the transport's one thread (the socket bearer's event loop), in arrival order.
/// Core Spec 5.4 Vol 3 Part F §3.3: every PDU arrives whole; the engine above decides what it answers.
public protocol ATTTransportSink: AnyObject, Sendable {
    /// One whole ATT PDU (one datagram). Called once per PDU, never concurrently, in arrival order.
    func transport(didReceive pdu: [UInt8])
    /// The same, with the PDU in a buffer that is valid only during the call (the socket bearer's receive buffer),
    /// so that a sink can copy only what it keeps. The default copies it into `transport(didReceive:)`.
    func transport(didReceiveBytes pdu: UnsafeRawBufferPointer)
    /// The transport is closed; no more PDUs follow. Called exactly once.
    func transport(didCloseWith reason: TransportError)
}

extension ATTTransportSink {
    public func transport(didReceiveBytes pdu: UnsafeRawBufferPointer) { transport(didReceive: Array(pdu)) }
}

/// What a non-blocking send did.
public enum ATTSendResult: Sendable, Equatable {
    /// The whole PDU was handed to the kernel.
    case sent
    /// The socket's send buffer is full (EAGAIN): nothing was sent; wait with `whenWritable`.
    case wouldBlock
}

/// Something that moves whole ATT PDUs in both directions: one owner of one socket (or a test double).
public protocol ATTTransport: AnyObject, Sendable {
    /// A short name for logs and errors: "unix:/tmp/sim.sock", "00:AA:01:01:00:01 (LE public) via hci0".
    var label: String { get }
    /// Starts delivering inbound PDUs to `sink`. Call once.
    func start(_ sink: any ATTTransportSink)
    /// Sends one whole PDU without blocking. Never sends part of a PDU.
    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult
    /// `trySend` from the thread of `eventLoop`, where the engine above sends every PDU: a transport that asks per
    /// send which thread it is on may skip that question. Without a loop (a test double) it is `trySend`.
    func trySendOnItsLoop(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult
    /// Calls `callback` once, on a thread of the transport (the socket bearer's loop), when the socket can take
    /// more data (POLLOUT), or when the transport closes (so that a waiter always wakes). Never from inside
    /// `whenWritable` itself unless the transport is already closed.
    func whenWritable(_ callback: @escaping @Sendable () -> Void)
    /// Closes the transport; the sink's `didCloseWith` follows with `.closedLocally(reason)`.
    func close(reason: String)
    /// The event loop that delivers to the sink (the socket bearer's), on which the engine above keeps its state;
    /// nil for a transport without one (a test double): the engine then runs a loop of its own and posts to it
    /// what the transport delivers.
    var eventLoop: EventLoop? { get }
}

extension ATTTransport {
    public var eventLoop: EventLoop? { nil }
    public func trySendOnItsLoop(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult { try trySend(pdu) }
}

/// A transport on an Enhanced ATT bearer's channel (Vol 3 Part F §3.2.11): its ATT_MTU is the smaller of the
/// channel's two MTUs (§3.2.8), read from the channel rather than exchanged.
public protocol EnhancedATTTransport: ATTTransport {
    func enhancedMTU() throws(TransportError) -> Int
}

extension SocketError {
    /// The syscall an ECRED channel's socket fails in on a kernel without ECRED (before 5.7, or enable_ecred off):
    /// a `SocketError` naming it is the kernel's refusal, not the peer's.
    public static let enhancedModeSyscall = "setsockopt(BT_MODE, BT_MODE_EXT_FLOWCTL)"
}

/// Why a transport failed or ended: every case carries what a user needs to act.
public enum TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A syscall failed.
    case socket(SocketError)
    /// The peer closed the connection (EOF on the socket).
    case closedByPeer
    /// This side closed it, with the reason given to `close(reason:)`.
    case closedLocally(reason: String)
    /// A datagram was longer than the receive buffer (MSG_TRUNC): reported, never passed on cut.
    case truncated(received: Int, bufferSize: Int)
    /// The named adapter ("hci3", or an address) does not exist; `available` lists the ones that do.
    case noSuchAdapter(String, available: [String])
    /// The adapter exists but is powered off (HCI_UP not set).
    case adapterDown(String)
    /// A connection attempt got no answer within the connect timeout (the socket was closed, which cancels it).
    case connectTimedOut(peer: String, seconds: Double)
    /// A target ("unix:/path" or "AA:BB:CC:DD:EE:FF") could not be parsed.
    case invalidTarget(BearerTargetError)
    /// A raw HCI command failed: the controller's status code (Core Spec 5.4 Vol 1 Part F) or no answer in time.
    case hciCommandFailed(command: String, adapter: String, status: UInt8?, detail: String)
    /// The kernel's management interface refused a command (status per BlueZ doc/mgmt-api.txt) or never answered.
    case managementCommandFailed(command: String, adapter: String, status: UInt8?, detail: String)
    /// The peer refused an Enhanced ATT bearer (Core Spec 5.4 Vol 3 Part F §3.2.11): the L2CAP result it answered.
    case enhancedBearerRefused(peer: String, result: L2CAPConnectionResult)
    /// A handshake message (an Enhanced ATT bearer's request or answer over unix:) did not come within the limit.
    case handshakeTimedOut(peer: String, waitingFor: String, seconds: Double)

    public var description: String {
        switch self {
        case .socket(let e): return e.description
        case .closedByPeer: return "the peer closed the connection"
        case .closedLocally(let reason): return "closed by this host: \(reason)"
        case .truncated(let received, let size):
            return "received a \(received)-byte PDU, larger than the \(size)-byte receive buffer (dropped as truncated)"
        case .noSuchAdapter(let name, let available):
            let list = available.isEmpty ? "this machine has no Bluetooth adapter" : "adapters here: " + available.joined(separator: ", ")
            return "no such adapter \(name): \(list) (see `mirror adapters`)"
        case .adapterDown(let name):
            return "adapter \(name) is down: power it on with `sudo btmgmt -i \(name) power on` (or `sudo hciconfig \(name) up`)"
        case .connectTimedOut(let peer, let seconds):
            return "connecting to \(peer) got no answer in \(bearerSeconds(seconds)) s: the peer is not reachable; check that it is advertising as connectable, in range, and not already connected to another central"
        case .invalidTarget(let e): return e.description
        case .hciCommandFailed(let command, let adapter, let status, let detail):
            if let status {
                return "\(command) on \(adapter) failed with HCI status \(ATTHex.byte(status)): \(detail)"
            }
            return "\(command) on \(adapter) failed: \(detail)"
        case .managementCommandFailed(let command, let adapter, let status, let detail):
            if let status {
                return "\(command) (Bluetooth management) on \(adapter) failed with status \(ATTHex.byte(status)) \(managementStatusName(status)): \(detail)"
            }
            return "\(command) (Bluetooth management) on \(adapter) failed: \(detail)"
        case .enhancedBearerRefused(let peer, let result):
            return "\(peer) refused the Enhanced ATT bearer: L2CAP result \(result)"
        case .handshakeTimedOut(let peer, let waitingFor, let seconds):
            return "\(waitingFor) did not come from \(peer) in \(bearerSeconds(seconds)) s"
        }
    }
}

/// A failed syscall: which one, errno with its name and meaning, and what we were doing.
public struct SocketError: Error, Sendable, Equatable, CustomStringConvertible {
    public var syscall: String
    public var errno: Errno
    public var context: String
    /// What the user can do about it, one sentence ("this kernel has no Bluetooth support: ..."); may be empty.
    public var advice: String
    public init(syscall: String, errno: Errno, context: String, advice: String = "") {
        self.syscall = syscall
        self.errno = errno
        self.context = context
        self.advice = advice
    }
    /// errno's symbolic name: "ECONNREFUSED" (`Errno.name`).
    public var errnoName: String { errno.name }
    /// errno's meaning as the C library words it: "Connection refused" (`Errno.meaning`).
    public var errnoMeaning: String { errno.meaning }
    public var description: String {
        let base = "\(context): \(syscall) failed with \(errnoName) (\(errnoMeaning))"
        return advice.isEmpty ? base : "\(base): \(advice)"
    }
}

/// "5" for 5.0 s, "2.5" for 2.5 s (one decimal at most).
public func bearerSeconds(_ s: Double) -> String {
    let tenths = (s * 10).rounded() / 10
    return tenths == tenths.rounded() ? String(Int(tenths)) : String(tenths)
}

/// The result of an L2CAP LE / ECRED connection response (Core Spec 5.4 Vol 3 Part A §4.26, Table 4.16; §4.23):
/// what a peer answered to an Enhanced ATT bearer request. Any value is representable; defined ones have a name.
public struct L2CAPConnectionResult: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let success = Self(rawValue: 0x0000)
    public static let spsmNotSupported = Self(rawValue: 0x0002)
    public static let noResourcesAvailable = Self(rawValue: 0x0004)
    public static let insufficientAuthentication = Self(rawValue: 0x0005)
    public static let insufficientAuthorization = Self(rawValue: 0x0006)
    public static let encryptionKeySizeTooShort = Self(rawValue: 0x0007)
    public static let insufficientEncryption = Self(rawValue: 0x0008)
    public static let invalidSourceCID = Self(rawValue: 0x0009)
    public static let sourceCIDAlreadyAllocated = Self(rawValue: 0x000A)
    public static let unacceptableParameters = Self(rawValue: 0x000B)
    public static let invalidParameters = Self(rawValue: 0x000C)

    /// The spec's words for it ("SPSM not supported"), or "reserved".
    public var name: String {
        switch rawValue {
        case 0x0000: return "success"
        case 0x0002: return "SPSM not supported"
        case 0x0004: return "no resources available"
        case 0x0005: return "insufficient authentication"
        case 0x0006: return "insufficient authorization"
        case 0x0007: return "encryption key size too short"
        case 0x0008: return "insufficient encryption"
        case 0x0009: return "invalid Source CID"
        case 0x000A: return "Source CID already allocated"
        case 0x000B: return "unacceptable parameters"
        case 0x000C: return "invalid parameters"
        case 0x000D: return "pending, no further information"
        case 0x000E: return "pending, authentication"
        case 0x000F: return "pending, authorization"
        default: return "reserved"
        }
    }

    /// "0x0002 SPSM not supported".
    public var description: String { "\(ATTHex.handle(rawValue)) \(name)" }
}

/// Why a target or address did not parse: the input, the 1-based character position at fault (nil when
/// the problem is the length), and what is wrong.
public struct BearerTargetError: Error, Sendable, Hashable, CustomStringConvertible {
    public var input: String
    public var position: Int?
    public var problem: String

    public init(input: String, position: Int?, problem: String) {
        self.input = input
        self.position = position
        self.problem = problem
    }

    public var description: String {
        if let position { return "invalid target \"\(input)\": character \(position): \(problem)" }
        return "invalid target \"\(input)\": \(problem)"
    }
}

/// A management status (mgmt-api.txt "Status codes") and its name.
public func managementStatusName(_ status: UInt8) -> String {
    let names = ["Success", "Unknown Command", "Not Connected", "Failed", "Connect Failed", "Authentication Failed",
                 "Not Paired", "No Resources", "Timeout", "Already Connected", "Busy", "Rejected", "Not Supported",
                 "Invalid Parameters", "Disconnected", "Not Powered", "Cancelled", "Invalid Index", "RFKilled",
                 "Already Paired", "Permission Denied"]
    return Int(status) < names.count ? names[Int(status)] : "Unknown Status"
}

extension SocketError {
    /// What to do about `code` whatever the socket (its domain's own advice comes first: LinuxBluetooth's
    /// SocketAdvice); empty when there is nothing specific.
    public static func anyDomainAdvice(_ code: Errno) -> String {
        switch code {
        case .messageTooLong: return "the PDU is larger than the channel's MTU"
        case .brokenPipe, .connectionReset: return "the peer closed the connection"
        case .tooManyOpenFiles, .tooManyOpenFilesInSystem: return "too many open files: raise `ulimit -n` or close connections"
        default: return ""
        }
    }

    /// A SocketError for the calling thread's errno in a call on no particular socket (an epoll, eventfd or
    /// timerfd of the link's loop).
    public static func last(_ syscall: String, _ context: String) -> SocketError {
        let code = Errno(cbz_errno())
        return SocketError(syscall: syscall, errno: code, context: context, advice: anyDomainAdvice(code))
    }
}

/// The link security levels of BT_SECURITY (Linux; Core Spec 5.4 Vol 3 Part C §10.2 LE security modes): the one
/// level type, of the socket, the GATT client's raises and the server's attribute requirements alike.
public enum BTSecurityLevel: UInt8, Sendable, Comparable, CustomStringConvertible, CaseIterable {
    case sdp = 0
    /// No encryption.
    case low = 1
    /// Encryption, unauthenticated (Just Works) pairing.
    case medium = 2
    /// Encryption with an authenticated (MITM-protected) key.
    case high = 3
    /// LE Secure Connections with a 128-bit key.
    case fips = 4

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }

    /// "low", "medium", "high", "fips".
    public init?(name: String) {
        guard let l = Self.allCases.first(where: { $0.description == name.lowercased() }) else { return nil }
        self = l
    }

    public var description: String {
        switch self {
        case .sdp: return "sdp"
        case .low: return "low"
        case .medium: return "medium"
        case .high: return "high"
        case .fips: return "fips"
        }
    }
}

/// The link's security as BT_SECURITY reports it (Linux `struct bt_security`): the level and the encryption key's
/// size in octets (7...16 once encrypted, Vol 3 Part H §2.3.4; 0 before). What a server checks a request against too.
public struct BTSecurity: Sendable, Hashable, CustomStringConvertible {
    public var level: BTSecurityLevel
    public var keySize: Int
    public init(level: BTSecurityLevel, keySize: Int) {
        self.level = level
        self.keySize = keySize
    }

    /// No encryption (what a link starts with).
    public static let unencrypted = BTSecurity(level: .low, keySize: 0)
    /// Encrypted after unauthenticated pairing (Just Works).
    public static func encrypted(keySize: Int = 16) -> BTSecurity { BTSecurity(level: .medium, keySize: keySize) }
    /// Encrypted with an authenticated key (Passkey Entry, Numeric Comparison, OOB).
    public static func authenticated(keySize: Int = 16) -> BTSecurity { BTSecurity(level: .high, keySize: keySize) }
    /// "medium, 16-octet key"
    public var description: String { keySize == 0 ? level.description : "\(level), \(keySize)-octet key" }
}

/// A transport whose link security can be read and raised: a socket's BT_SECURITY (Vol 3 Part C §10.2).
public protocol SecurableTransport: ATTTransport {
    func securityLevel() throws(TransportError) -> BTSecurityLevel
    func setSecurityLevel(_ level: BTSecurityLevel) throws(TransportError)
    /// The link's level and key size, read once; nil for a transport without a link (AF_UNIX, a socketpair).
    func linkSecurity() throws(TransportError) -> BTSecurity?
}
