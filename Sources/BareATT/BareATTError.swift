// Why the bare loop or the plain peer stopped: typed values (the syscall and its Errno, what a timeout waited for
// and its limit), so that each caller words them its own way (`mirror bench` keeps its CLIError texts).
import ATTStack
import CBlueZSocket
import LinuxBluetooth
import LinkCore

/// What the bare loop or the plain peer was doing when a syscall failed.
public enum BareATTStep: Sendable, Hashable, CustomStringConvertible {
    /// The bare loop's socket(AF_UNIX, SOCK_SEQPACKET).
    case openingSocket
    /// The bare loop's connect to unix:PATH.
    case connecting(path: String)
    case sending
    case receiving
    /// The plain peer's listening socket(AF_UNIX, SOCK_SEQPACKET).
    case openingListener
    /// The plain peer's bind and listen at PATH.
    case listening(path: String)
    /// The plain peer's eventfd (it wakes the accept thread for `close`).
    case settingUpPeer

    public var description: String {
        switch self {
        case .openingSocket: return "opening the bare loop's socket"
        case .connecting(let path): return "connecting the bare loop to unix:\(path)"
        case .sending: return "the bare loop's send"
        case .receiving: return "the bare loop's receive"
        case .openingListener: return "opening the plain peer's socket"
        case .listening(let path): return "listening at \(path) for the plain peer"
        case .settingUpPeer: return "setting up the plain peer"
        }
    }
}

/// What a bounded wait waited for.
public enum BareATTWait: Sendable, Hashable, CustomStringConvertible {
    /// POLLOUT after a send found the socket full.
    case socketWritable
    /// POLLIN for the answer to a request.
    case response
    /// The plain peer to have counted this many Write Commands in all.
    case writeCommandsCounted(Int)

    public var description: String {
        switch self {
        case .socketWritable: return "the bare loop's socket to take more data"
        case .response: return "a response in the bare loop"
        case .writeCommandsCounted(let n): return "the plain peer to count \(n) Write Commands"
        }
    }
}

/// Why the bare loop or the plain peer failed.
public enum BareATTError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A syscall failed with `errno` during `step`.
    case syscall(String, Errno, during: BareATTStep)
    /// A bounded wait ran out after `seconds`.
    case timeout(BareATTWait, seconds: Double)
    /// The peer closed the bare loop's connection (recv returned 0).
    case closedByPeer(label: String)
    /// A request got an answer other than its response (Core Spec 5.4 Vol 3 Part F §3.3: one answer per request).
    case unexpectedAnswer(request: ATTOpcode, handle: UInt16, received: ATTOpcode)
    /// A PDU the loop was asked to send cannot be encoded (a zero handle, a value longer than its buffer).
    case encoding(ATTEncodeError)

    /// The calling thread's errno for `syscall`, taken before `fd` is closed (a failed setup gives its socket back).
    static func failed(_ syscall: String, during step: BareATTStep, closing fd: Int32) -> BareATTError {
        let e = Errno.current
        _ = cbz_close(fd)
        return .syscall(syscall, e, during: step)
    }

    public var description: String {
        switch self {
        case .syscall(let name, let errno, let step):
            return "\(step): \(name) failed with \(errno.name) (\(errno.meaning))"
        case .timeout(let wait, let seconds):
            return "timed out after \(seconds) s waiting for \(wait)"
        case .closedByPeer(let label):
            return "the peer closed the bare loop's connection to \(label)"
        case .unexpectedAnswer(let request, let handle, let received):
            let expected = request.responseOpcode?.name ?? "response"
            let what = request == .readRequest ? "Read Request of the counter \(ATTHex.handle(handle))" : request.name
            return "the bare loop's \(what) got opcode \(ATTHex.byte(received.rawValue)) instead of a \(expected)"
        case .encoding(let e):
            return "the bare loop cannot encode its PDU: \(e)"
        }
    }
}
