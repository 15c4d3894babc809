// A typed errno (in the style of apple/swift-system's `Errno`): the failures of socket, HCI and file calls are
// compared by value (`e.errno == .brokenPipe`), named by their C name and worded by the C library.
import CBlueZSocket
import Glibc

/// An errno value with its C name ("EPIPE") and the C library's words for it ("Broken pipe").
public struct Errno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }
    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno.
    public static var current: Errno { Errno(cbz_errno()) }

    /// The symbolic name through glibc's strerrorname_np: "ECONNREFUSED" (or "errno 1234" for a number glibc
    /// does not know).
    public var name: String {
        if let p = cbz_errno_name(rawValue) { return String(cString: p) }
        return "errno \(rawValue)"
    }

    /// The meaning as the C library words it (strerrordesc_np): "Connection refused".
    public var meaning: String { String(cString: cbz_errno_description(rawValue)) }

    /// The C name.
    public var description: String { name }

    /// EPERM
    public static let notPermitted = Errno(EPERM)
    /// ENOENT
    public static let noSuchFileOrDirectory = Errno(ENOENT)
    /// EINTR
    public static let interrupted = Errno(EINTR)
    /// EBADF
    public static let badFileDescriptor = Errno(EBADF)
    /// EAGAIN (EWOULDBLOCK on Linux)
    public static let wouldBlock = Errno(EAGAIN)
    /// ENOMEM
    public static let noMemory = Errno(ENOMEM)
    /// EACCES
    public static let permissionDenied = Errno(EACCES)
    /// EBUSY
    public static let busy = Errno(EBUSY)
    /// ENODEV
    public static let noSuchDevice = Errno(ENODEV)
    /// EINVAL
    public static let invalidArgument = Errno(EINVAL)
    /// ENFILE
    public static let tooManyOpenFilesInSystem = Errno(ENFILE)
    /// EMFILE
    public static let tooManyOpenFiles = Errno(EMFILE)
    /// EPIPE
    public static let brokenPipe = Errno(EPIPE)
    /// ENAMETOOLONG
    public static let fileNameTooLong = Errno(ENAMETOOLONG)
    /// EMSGSIZE
    public static let messageTooLong = Errno(EMSGSIZE)
    /// EAFNOSUPPORT
    public static let addressFamilyNotSupported = Errno(EAFNOSUPPORT)
    /// EADDRINUSE
    public static let addressInUse = Errno(EADDRINUSE)
    /// EADDRNOTAVAIL
    public static let addressNotAvailable = Errno(EADDRNOTAVAIL)
    /// ENETDOWN
    public static let networkDown = Errno(ENETDOWN)
    /// ECONNABORTED
    public static let connectionAbort = Errno(ECONNABORTED)
    /// ECONNRESET
    public static let connectionReset = Errno(ECONNRESET)
    /// ENOBUFS
    public static let noBufferSpace = Errno(ENOBUFS)
    /// ENOTCONN
    public static let notConnected = Errno(ENOTCONN)
    /// ETIMEDOUT
    public static let timedOut = Errno(ETIMEDOUT)
    /// ECONNREFUSED
    public static let connectionRefused = Errno(ECONNREFUSED)
    /// EPROTOTYPE
    public static let protocolWrongType = Errno(EPROTOTYPE)
    /// EHOSTDOWN
    public static let hostIsDown = Errno(EHOSTDOWN)
    /// EHOSTUNREACH
    public static let noRouteToHost = Errno(EHOSTUNREACH)
    /// EALREADY
    public static let alreadyInProcess = Errno(EALREADY)
    /// EINPROGRESS
    public static let nowInProgress = Errno(EINPROGRESS)
    /// ERFKILL (the adapter is blocked by rfkill)
    public static let blockedByRFKill = Errno(ERFKILL)
}
