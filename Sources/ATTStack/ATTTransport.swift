// The seam between the ATT transaction engine (GATTClient) and whatever moves whole ATT PDUs:
// the socket bearer (L2CAP CID 4, AF_UNIX SOCK_SEQPACKET, a socketpair) or a test double.

/// Receives what a transport reads, on the transport's one reader thread, in arrival order.
/// Core Spec 5.4 Vol 3 Part F §3.3: every PDU arrives whole; the engine above decides what it answers.
public protocol ATTTransportSink: AnyObject, Sendable {
    /// One whole ATT PDU (one datagram). Called once per PDU, never concurrently, in arrival order.
    func transport(didReceive pdu: [UInt8])
    /// The transport is closed; no more PDUs follow. Called exactly once.
    func transport(didCloseWith reason: TransportError)
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
    /// Calls `callback` once, on the reader thread, when the socket can take more data (POLLOUT),
    /// or when the transport closes (so that a waiter always wakes).
    func whenWritable(_ callback: @escaping @Sendable () -> Void)
    /// Closes the transport; the sink's `didCloseWith` follows with `.closedLocally(reason)`.
    func close(reason: String)
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

    public var description: String {
        switch self {
        case .socket(let e): return e.description
        case .closedByPeer: return "the peer closed the connection"
        case .closedLocally(let reason): return "closed by this host: \(reason)"
        case .truncated(let received, let size):
            return "received a \(received)-byte PDU, larger than the \(size)-byte receive buffer (dropped as truncated)"
        }
    }
}

/// A failed syscall: which one, errno with its name and meaning, and what we were doing.
public struct SocketError: Error, Sendable, Equatable, CustomStringConvertible {
    public var syscall: String
    public var errno: Int32
    public var context: String
    public init(syscall: String, errno: Int32, context: String) {
        self.syscall = syscall
        self.errno = errno
        self.context = context
    }
    public var description: String { "\(context): \(syscall) failed with errno \(errno)" }
}
