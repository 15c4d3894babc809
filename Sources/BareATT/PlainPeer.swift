// The plain ATT peer the benches measure against: a unix-socket listener with one thread per connection that
// answers at once and counts what it receives, so that what a client costs shows, not the peer's own work.
import ATTStack
import CBlueZSocket
import Glibc
import LinuxBluetooth
import Synchronization

/// Listens at `path` (AF_UNIX SOCK_SEQPACKET); each connection's thread answers Exchange MTU with 517, Write
/// Requests with Write Responses, Read Requests of any handle with the little-endian count of writes received
/// (requests and commands, over every connection), other requests with Request Not Supported, and counts Write
/// Commands. Every PDU made and read by the ATTPDU codec.
public final class PlainPeer: Sendable {
    public let path: String
    private let listener: Int32
    /// Wakes the accept thread for `close`.
    private let wake: Int32
    private let requestCount = Atomic<Int>(0)
    private let commandCount = Atomic<Int>(0)
    /// The total of Write Commands `waitUntil` waits for (Int.max when nobody waits): the connection thread that
    /// counts it broadcasts on `reached`.
    private let target = Atomic<Int>(.max)
    private let reached = Lock<Void>(())
    /// The handle benches write to, and the one they read as the counter (any handle reads as the counter).
    public static let sinkHandle: UInt16 = 0x0012
    public static let counterHandle: UInt16 = 0x0014
    /// The Server Rx MTU it answers Exchange MTU with (Core Spec 5.4 Vol 3 Part F §3.4.2.2): ATT's largest.
    public static let serverRxMTU: UInt16 = UInt16(ATTMTU.maximum)

    /// Write Requests and Write Commands received over every connection: what the counter reads.
    public var writes: Int { requestCount.load(ordering: .relaxed) + commandCount.load(ordering: .relaxed) }
    /// Write Commands received over every connection.
    public var writeCommands: Int { commandCount.load(ordering: .sequentiallyConsistent) }

    /// Listens at `path` (an old socket file there is removed first) and starts accepting.
    public init(path: String) throws(BareATTError) {
        self.path = path
        _ = cbz_unlink(path)
        let fd = cbz_unix_socket()
        guard fd >= 0 else { throw .syscall("socket(AF_UNIX, SOCK_SEQPACKET)", .current, during: .openingListener) }
        guard cbz_unix_bind(fd, path) == 0 else { throw .failed("bind", during: .listening(path: path), closing: fd) }
        guard cbz_listen(fd, 16) == 0 else { throw .failed("listen", during: .listening(path: path), closing: fd) }
        listener = fd
        wake = cbz_eventfd()
        guard wake >= 0 else { throw .failed("eventfd", during: .settingUpPeer, closing: fd) }
        startDetachedThread { [self] in acceptLoop() }
    }

    /// Stops accepting (the accept thread closes the listening socket) and removes the socket file; connections
    /// already accepted end when their clients close them.
    public func close() {
        _ = cbz_eventfd_signal(wake)
        _ = cbz_unlink(path)
    }

    /// Waits until the peer has counted `total` Write Commands in all (`writeCommands`), at most `timeout`
    /// seconds. One waiter at a time.
    public func waitUntil(writeCommands total: Int, timeout: Double) throws(BareATTError) {
        target.store(total, ordering: .sequentiallyConsistent)
        defer { target.store(.max, ordering: .sequentiallyConsistent) }
        let counted: Void? = reached.wait(until: { _ in writeCommands >= total ? () : nil },
                                          timeoutNanoseconds: Int(timeout * 1e9))
        if counted == nil { throw .timeout(.writeCommandsCounted(total), seconds: timeout) }
    }

    private func acceptLoop() {
        var revents: Int16 = 0
        var wakeEvents: Int16 = 0
        while true {
            guard cbz_poll_two(listener, CBZ_POLLIN, wake, CBZ_POLLIN, -1, &revents, &wakeEvents) > 0 else {
                if cbz_errno() == EINTR { continue }
                break
            }
            if wakeEvents != 0 || revents & (CBZ_POLLERR | CBZ_POLLHUP) != 0 { break }
            let c = cbz_accept(listener)
            if c < 0 {
                if cbz_errno() == EAGAIN || cbz_errno() == EINTR { continue }
                break
            }
            startDetachedThread { [self] in serve(c) }
        }
        _ = cbz_close(listener)
        _ = cbz_close(wake)
    }

    /// One connection: answers and counts until the client closes it.
    private func serve(_ fd: Int32) {
        let inbound = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 1)
        let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
        defer {
            inbound.deallocate()
            out.deallocate()
            _ = cbz_close(fd)
        }
        // The Write Response, encoded once: the answer to nearly every request.
        let writeResponse = UnsafeMutableRawBufferPointer.allocate(byteCount: 1, alignment: 1)
        defer { writeResponse.deallocate() }
        let writeResponseLength = try! ATTPDU.writeResponse.encode(into: writeResponse)
        var revents: Int16 = 0
        var truncated: Int32 = 0
        func reply(_ buffer: UnsafeMutableRawBufferPointer, _ n: Int) {
            while cbz_send(fd, buffer.baseAddress, n) < 0 {
                guard cbz_errno() == EAGAIN || cbz_errno() == EINTR else { return }
                _ = cbz_poll_one(fd, CBZ_POLLOUT, -1, &revents)
            }
        }
        func reply(_ pdu: ATTPDU) {
            guard let n = try? pdu.encode(into: out) else { return }
            reply(out, n)
        }
        while true {
            let n = cbz_recv_datagram(fd, inbound.baseAddress, inbound.count, &truncated)
            if n > 0 {
                let opcode = ATTOpcode(rawValue: inbound[0])
                switch opcode {
                case .writeCommand:
                    if commandCount.add(1, ordering: .sequentiallyConsistent).newValue == target.load(ordering: .sequentiallyConsistent) {
                        reached.withLockBroadcasting { _ in }
                    }
                case .writeRequest:
                    requestCount.add(1, ordering: .relaxed)
                    reply(writeResponse, writeResponseLength)
                case .exchangeMTURequest:
                    reply(.exchangeMTUResponse(serverRxMTU: PlainPeer.serverRxMTU))
                case .readRequest:
                    let count = UInt32(truncatingIfNeeded: writes)
                    let value = (0..<4).map { UInt8(truncatingIfNeeded: count >> (8 * $0)) }
                    reply(.readResponse(value: value[...]))
                default:
                    // Requests it does not serve, and opcodes it does not know that are not commands (§3.4.1.1).
                    if opcode.kind == .request || (opcode.kind == .unknown && !opcode.isCommand) {
                        reply(.errorResponse(requestOpcode: opcode, handle: 0, error: .requestNotSupported))
                    }
                }
                continue
            }
            if n < 0 && (cbz_errno() == EAGAIN || cbz_errno() == EINTR) {
                _ = cbz_poll_one(fd, CBZ_POLLIN, -1, &revents)
                continue
            }
            break
        }
    }
}
