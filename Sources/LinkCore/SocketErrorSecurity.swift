// What a socket's errno says about the link's security, decided once for the GATT client, the advice and the CLI.

extension SocketError {
    /// EACCES from an established L2CAP link's send, receive or SO_ERROR: net/bluetooth's bt_to_errno for HCI 0x05
    /// Authentication Failure (Vol 1 Part F §1.3), the link ended because pairing or encryption failed; no capability changes it.
    public var isAuthenticationFailure: Bool { Self.isAuthenticationFailure(syscall: syscall, errno: errno) }

    /// The same rule for an error not built yet (the advice that goes into it).
    public static func isAuthenticationFailure(syscall: String, errno: Errno) -> Bool {
        errno == .permissionDenied && (syscall.hasPrefix("send") || syscall.hasPrefix("recv") || syscall == "SO_ERROR")
    }
}
