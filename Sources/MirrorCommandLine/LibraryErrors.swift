// The library errors' rows in the error table: transport and socket errors (ATTStack), and the GATT
// client's errors once they are merged. Kept next to ErrorTable.swift's `ErrorReport.init(_:)`.

import ATTStack

#if canImport(Glibc)
import Glibc
#endif

extension ErrorReport {
    /// The report for an error thrown by a library; nil for errors this table does not know.
    static func libraryReport(_ error: any Error) -> ErrorReport? {
        switch error {
        case let e as TransportError:
            return transportReport(e)
        case let e as SocketError:
            return socketReport(e)
        default:
            return nil
        }
    }

    static func transportReport(_ e: TransportError) -> ErrorReport {
        switch e {
        case .socket(let s): return socketReport(s)
        case .closedByPeer:
            return ErrorReport(status: .connection, message: "connection lost: the peer closed the connection",
                               fields: [("reason", "closedByPeer")])
        case .closedLocally(let reason):
            return ErrorReport(status: .connection, message: "connection closed by this host: \(reason)",
                               fields: [("reason", "closedLocally")])
        case .truncated(let received, let size):
            return ErrorReport(status: .protocolViolation, message: e.description,
                               fields: [("received", .int(received)), ("bufferSize", .int(size))])
        }
    }

    static func socketReport(_ e: SocketError) -> ErrorReport {
        let name = errnoName(e.errno)
        var fields: [(String, JSONValue)] = [
            ("syscall", .string(e.syscall)), ("errno", .int(Int(e.errno))), ("errnoName", .string(name)),
            ("context", .string(e.context)),
        ]
        let base = "\(e.context): \(e.syscall) failed with \(name) (\(errnoMeaning(e.errno)))"
        switch e.errno {
        case EAFNOSUPPORT:
            fields.append(("needs", "a kernel with Bluetooth (AF_BLUETOOTH)"))
            return ErrorReport(status: .unsupported, message: base,
                               hint: "this kernel has no Bluetooth support (AF_BLUETOOTH); use a unix:PATH target with the simulator, or run on a machine with an adapter",
                               fields: fields)
        case EPERM, EACCES:
            fields.append(("needs", "CAP_NET_RAW and CAP_NET_ADMIN"))
            return ErrorReport(status: .unsupported, message: base + "; this needs CAP_NET_RAW and CAP_NET_ADMIN",
                               hint: "run as root, or: sudo setcap cap_net_raw,cap_net_admin+eip $(command -v mirror)",
                               fields: fields)
        case ETIMEDOUT:
            return ErrorReport(status: .timeout, message: base, fields: fields)
        default:
            return ErrorReport(status: .connection, message: base, fields: fields)
        }
    }
}

/// The symbolic name of an errno value ("EAFNOSUPPORT").
public func errnoName(_ code: Int32) -> String {
    let names: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", EBADF: "EBADF", EAGAIN: "EAGAIN",
        ENOMEM: "ENOMEM", EACCES: "EACCES", EBUSY: "EBUSY", EEXIST: "EEXIST", ENODEV: "ENODEV",
        EINVAL: "EINVAL", EPIPE: "EPIPE", ENOTSOCK: "ENOTSOCK", EPROTOTYPE: "EPROTOTYPE",
        EPROTONOSUPPORT: "EPROTONOSUPPORT", EOPNOTSUPP: "EOPNOTSUPP", EAFNOSUPPORT: "EAFNOSUPPORT",
        EADDRINUSE: "EADDRINUSE", EADDRNOTAVAIL: "EADDRNOTAVAIL", ENETDOWN: "ENETDOWN",
        ENETUNREACH: "ENETUNREACH", ECONNABORTED: "ECONNABORTED", ECONNRESET: "ECONNRESET",
        ENOBUFS: "ENOBUFS", EISCONN: "EISCONN", ENOTCONN: "ENOTCONN", ETIMEDOUT: "ETIMEDOUT",
        ECONNREFUSED: "ECONNREFUSED", EHOSTDOWN: "EHOSTDOWN", EHOSTUNREACH: "EHOSTUNREACH",
        EINPROGRESS: "EINPROGRESS", EALREADY: "EALREADY", EMSGSIZE: "EMSGSIZE", ERFKILL: "ERFKILL",
    ]
    return names[code] ?? "errno \(code)"
}

/// The C library's one-line meaning of an errno value.
public func errnoMeaning(_ code: Int32) -> String {
    guard let s = strerror(code) else { return "unknown error" }
    return String(cString: s)
}
