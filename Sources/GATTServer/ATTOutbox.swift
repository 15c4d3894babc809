// What a server sends on one connection, in order: a full socket (EAGAIN) queues the rest until POLLOUT.
import ATTStack
import LinuxBluetooth
import LinkCore

/// One connection's outbound FIFO of encoded PDUs. Lives under its owner's lock; the owner asks the transport for a
/// writable callback when `send` or `flush` says so, and calls `flush` from that callback.
public struct ATTOutbox: Sendable {
    var queued: [[UInt8]] = []
    var waitingWritable = false
    public init() {}

    /// Whether PDUs wait for room in the socket.
    public var isBacklogged: Bool { !queued.isEmpty }

    /// Sends `pdu` now unless PDUs wait before it or the socket is full (then it waits too). Returns true when the
    /// owner must register a writable callback (once per wait).
    public mutating func send(_ pdu: [UInt8], on transport: any ATTTransport) throws(TransportError) -> Bool {
        if !queued.isEmpty {
            queued.append(pdu)
            return false
        }
        let result = try pdu.withUnsafeBytes { b -> Result<ATTSendResult, TransportError> in
            Result { () throws(TransportError) in try transport.trySend(b) }
        }.get()
        guard result == .wouldBlock else { return false }
        queued.append(pdu)
        if waitingWritable { return false }
        waitingWritable = true
        return true
    }

    /// Sends what waits, in order (the socket became writable). Returns true when a new writable callback is needed.
    public mutating func flush(on transport: any ATTTransport) throws(TransportError) -> Bool {
        waitingWritable = false
        let waiting = queued
        queued = []
        var again = false
        for pdu in waiting {
            if try send(pdu, on: transport) { again = true }
        }
        return again
    }
}
