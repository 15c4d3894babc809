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
