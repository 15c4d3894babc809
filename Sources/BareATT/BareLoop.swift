// The bare ATT client loop: send, poll, receive on one non-blocking SOCK_SEQPACKET socket, with no engine, no
// tasks and no locks. It is the floor the GATT client is measured against (`mirror bench`, gatt-bench).
import ATTStack
import CBlueZSocket
import LinuxBluetooth
import LinkCore

#if canImport(Glibc)
import Glibc
#endif

/// Write Requests, Write Commands and reads of a counter over a socket of its own or a borrowed one; every PDU
/// made and read by the ATTPDU codec, each encoded once before its loop. One owner of the socket at a time.
public final class BareLoop {
    public let fd: Int32
    /// unix:PATH, or the label of the connection that lent the socket.
    public let label: String
    /// Each poll's limit, in seconds.
    public let timeout: Double
    private let timeoutMilliseconds: Int32
    private let ownsSocket: Bool
    /// The PDU a loop sends, encoded once before it (ATT_MTU is at most 517: Core Spec 5.4 Vol 3 Part F §3.2.8).
    private let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 1)
    /// Answers to the peer (confirmations, Error Responses), apart from `out` so that a loop's PDU stays encoded.
    private let answer = UnsafeMutableRawBufferPointer.allocate(byteCount: 8, alignment: 1)
    private let inbound = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 1)
    /// The length of the last answer `receive` returned (in `inbound`).
    private var received = 0

    /// Borrows a connected socket whose MTU is already exchanged (a bearer's, lent; blocking or not: every send and
    /// receive here passes MSG_DONTWAIT and waits in poll); never closes it.
    public init(borrowing fd: Int32, label: String, timeout: Double) {
        self.fd = fd
        self.label = label
        self.timeout = timeout
        timeoutMilliseconds = Int32(clamping: Int(timeout * 1000))
        ownsSocket = false
    }

    /// Opens its own connection to a unix: peer (SOCK_SEQPACKET, non-blocking sends and receives).
    public init(connectingTo path: String, timeout: Double) throws(BareATTError) {
        let fd = cbz_unix_socket()
        guard fd >= 0 else { throw .syscall("socket(AF_UNIX, SOCK_SEQPACKET)", .current, during: .openingSocket) }
        guard cbz_unix_connect(fd, path) == 0 else { throw .failed("connect", during: .connecting(path: path), closing: fd) }
        self.fd = fd
        label = "unix:\(path)"
        self.timeout = timeout
        timeoutMilliseconds = Int32(clamping: Int(timeout * 1000))
        ownsSocket = true
    }

    /// Its own connection to a unix: peer with Exchange MTU sent (`clientRxMTU`, the GATT client's): the peer takes
    /// the same values as on the client's connection (the bench's second connection).
    public convenience init(connectingTo path: String, timeout: Double, clientRxMTU: UInt16) throws(BareATTError) {
        try self.init(connectingTo: path, timeout: timeout)
        do { try exchangeMTU(clientRxMTU: clientRxMTU) } catch {
            close()
            throw error
        }
    }

    deinit {
        out.deallocate()
        answer.deallocate()
        inbound.deallocate()
    }

    /// Closes the socket when it is the loop's own (a borrowed one stays its owner's).
    public func close() {
        if ownsSocket { _ = cbz_close(fd) }
    }

    /// Exchange MTU (Core Spec 5.4 Vol 3 Part F §3.4.2.1), so that the peer takes the same values as on another
    /// connection; the answer is taken as it comes.
    public func exchangeMTU(clientRxMTU: UInt16) throws(BareATTError) {
        try send(out, try encode(.exchangeMTURequest(clientRxMTU: clientRxMTU)))
        _ = try receive(expecting: .exchangeMTUResponse)
    }

    /// `count` Write Request round trips (§3.4.5.1): send, then poll and receive the Write Response.
    public func writeRequests(handle: UInt16, value: [UInt8], count: Int) throws(BareATTError) {
        let n = try encode(.writeRequest(handle: handle, value: value[...]))
        for _ in 0..<count {
            try send(out, n)
            let op = try receive(expecting: .writeResponse)
            guard op == .writeResponse else { throw .unexpectedAnswer(request: .writeRequest, handle: handle, received: op) }
        }
    }

    /// `count` Write Commands (§3.4.5.3), each sent as soon as the socket takes it (POLLOUT on EAGAIN).
    public func writeCommands(handle: UInt16, value: [UInt8], count: Int) throws(BareATTError) {
        let n = try encode(.writeCommand(handle: handle, value: value[...]))
        for _ in 0..<count { try send(out, n) }
    }

    /// A Read Request of `handle` and its answer, whatever it is: the peer handles PDUs in order, so any answer
    /// proves that everything sent before it was handled.
    public func readAnyAnswer(handle: UInt16) throws(BareATTError) {
        try send(out, try encode(.readRequest(handle: handle)))
        _ = try receive(expecting: .readResponse)
    }

    /// Reads the peer's write counter (a little-endian count, 1-8 bytes) with one Read Request (§3.4.4.3).
    public func readCounter(handle: UInt16) throws(BareATTError) -> Int {
        try send(out, try encode(.readRequest(handle: handle)))
        let op = try receive(expecting: .readResponse)
        let unexpected = BareATTError.unexpectedAnswer(request: .readRequest, handle: handle, received: op)
        guard op == .readResponse else { throw unexpected }
        let pdu: ATTPDU
        do { pdu = try ATTPDU.decode(Array(inbound[..<received])) } catch { throw unexpected }
        guard case .readResponse(let value) = pdu else { throw unexpected }
        return value.prefix(8).enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
    }

    /// Encodes `pdu` at the start of `buffer` (by default `out`); returns its length.
    private func encode(_ pdu: ATTPDU, into buffer: UnsafeMutableRawBufferPointer? = nil) throws(BareATTError) -> Int {
        do { return try pdu.encode(into: buffer ?? out) } catch { throw .encoding(error) }
    }

    /// Sends the first `n` bytes of `buffer`, waiting for POLLOUT (at most `timeout` each time) while it is full.
    @inline(__always)
    private func send(_ buffer: UnsafeMutableRawBufferPointer, _ n: Int) throws(BareATTError) {
        while cbz_send(fd, buffer.baseAddress, n) < 0 {
            let e = cbz_errno()
            guard e == EAGAIN || e == EINTR else { throw .syscall("send", Errno(e), during: .sending) }
            var revents: Int16 = 0
            let ready = cbz_poll_one(fd, CBZ_POLLOUT, timeoutMilliseconds, &revents)
            guard ready > 0 || (ready < 0 && cbz_errno() == EINTR) else {
                throw .timeout(.socketWritable, seconds: timeout)
            }
        }
    }

    /// The opcode of the next answer: notifications and the peer's commands are skipped, indications confirmed
    /// (§3.4.7.2), and the peer's own requests answered with Request Not Supported (§3.4.1.1): a peer that is also
    /// a GATT client, as bluetoothd is, drops a link whose requests go unanswered. `expected` is the fast path.
    @inline(__always)
    private func receive(expecting expected: ATTOpcode) throws(BareATTError) -> ATTOpcode {
        while true {
            var truncated: Int32 = 0
            let n = cbz_recv_datagram(fd, inbound.baseAddress, inbound.count, &truncated)
            if n > 0 {
                let opcode = ATTOpcode(rawValue: inbound[0])
                if opcode != expected, try answered(opcode) { continue }
                received = min(n, inbound.count)
                return opcode
            }
            if n == 0 { throw .closedByPeer(label: label) }
            let e = cbz_errno()
            guard e == EAGAIN || e == EINTR else { throw .syscall("recv", Errno(e), during: .receiving) }
            var revents: Int16 = 0
            let ready = cbz_poll_one(fd, CBZ_POLLIN, timeoutMilliseconds, &revents)
            guard ready > 0 || (ready < 0 && cbz_errno() == EINTR) else {
                throw .timeout(.response, seconds: timeout)
            }
        }
    }

    /// Whether `opcode` is none of the loop's answers but the peer's own PDU, dealt with here.
    private func answered(_ opcode: ATTOpcode) throws(BareATTError) -> Bool {
        switch opcode.kind {
        case .notification, .command:
            return true
        case .unknown where opcode.isCommand:
            return true  // a command this stack does not know: never answered (§3.3)
        case .indication:
            try send(answer, try encode(.handleValueConfirmation, into: answer))
            return true
        case .request:
            let pdu = ATTPDU.errorResponse(requestOpcode: opcode, handle: 0, error: .requestNotSupported)
            try send(answer, try encode(pdu, into: answer))
            return true
        default:
            return false
        }
    }
}
