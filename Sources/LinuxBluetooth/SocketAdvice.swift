// Turning errno into a sentence a user can act on, for the places the bearer and the HCI code call the kernel.

import CBlueZSocket
import LinkCore
import Glibc

/// Which kind of socket a failing call was made on: decides what an errno means to the user.
public enum SocketDomain: Sendable {
    case l2cap(peer: String)
    case unix(path: String)
    case hci(adapter: String)
    case local
}

/// The exact command that grants the capabilities raw HCI work needs, for the running binary.
func setcapCommand() -> String {
    "sudo setcap cap_net_raw,cap_net_admin+ep \(Capabilities.executablePath())"
}

/// A SocketError for the calling thread's errno, with advice for the domain.
func lastSocketError(_ syscall: String, _ context: String, _ domain: SocketDomain) -> SocketError {
    socketError(syscall, cbz_errno(), context, domain)
}

/// A SocketError for `code`, with advice for the domain.
public func socketError(_ syscall: String, _ code: Int32, _ context: String, _ domain: SocketDomain) -> SocketError {
    SocketError(syscall: syscall, errno: Errno(code), context: context, advice: advice(syscall, Errno(code), domain))
}

/// One sentence on what to do about `code` from `syscall` in `domain`; empty when there is nothing specific.
func advice(_ syscall: String, _ code: Errno, _ domain: SocketDomain) -> String {
    switch (code, domain) {
    case (.permissionDenied, .l2cap(let peer)) where SocketError.isAuthenticationFailure(syscall: syscall, errno: code):
        // An established link the kernel ended with Authentication Failure (HCI 0x05; net/bluetooth's bt_to_errno
        // maps it to EACCES): pairing or encryption failed, which no capability changes.
        return "the link to \(peer) ended with an authentication failure (HCI 0x05): pairing or encryption with it failed (no agent or input on the peer, or keys that no longer match: remove the pairing on both sides and try again)"
    case (.addressFamilyNotSupported, .l2cap), (.addressFamilyNotSupported, .hci):
        return "this kernel has no Bluetooth support (CONFIG_BT is off or the bluetooth module is not loaded): try `sudo modprobe bluetooth`, or use a kernel built with Bluetooth"
    case (.notPermitted, .hci), (.permissionDenied, .hci), (.notPermitted, .l2cap), (.permissionDenied, .l2cap):
        return "raw HCI work (scan, advertise, adapter up/down) needs CAP_NET_RAW and CAP_NET_ADMIN: run `\(setcapCommand())`, or run as root"
    case (.connectionRefused, .l2cap(let peer)):
        return "\(peer) did not accept the connection (the kernel also reports an LE connection attempt that timed out this way): check that it is advertising as connectable and in range"
    case (.busy, .l2cap(let peer)):
        let holder = BluetoothDaemon.runningPID().map { "bluetoothd (pid \($0))" } ?? "another program (often bluetoothd)"
        return "\(holder) already holds the ATT channel of a connection to \(peer): disconnect it there (`bluetoothctl disconnect \(peer)`) or stop bluetoothd (`sudo systemctl stop bluetooth`)"
    case (.noRouteToHost, .l2cap), (.noSuchDevice, .l2cap), (.networkDown, .l2cap):
        return "no powered adapter can reach the peer: check `mirror adapters` (is an adapter present and up?)"
    case (.addressNotAvailable, .l2cap):
        return "no adapter has that address: check `mirror adapters`"
    case (.hostIsDown, .l2cap(let peer)):
        return "\(peer) is not reachable (host down): is it switched on and in range?"
    case (.timedOut, .l2cap(let peer)):
        return "the link to \(peer) timed out (supervision timeout): the peer went out of range or stopped answering"
    case (.connectionReset, .l2cap(let peer)):
        return "\(peer) closed the link"
    case (.connectionAbort, .l2cap):
        return "this host ended the link (the adapter went down or was removed, or the connection was cancelled)"
    case (.notConnected, .l2cap):
        return "the link is not connected (or pairing is still running after a BT_SECURITY raise)"
    case (.invalidArgument, .l2cap):
        return "the kernel rejected the address: check the address type (--type public|random)"
    case (.noSuchFileOrDirectory, .unix(let path)):
        return "nothing exists at \(path): start the simulator (or listener) first"
    case (.connectionRefused, .unix(let path)):
        // connect(2) refuses a path that is no socket the same way: say which it is (lstat, never followed).
        var uid: UInt32 = 0, mode: UInt32 = 0
        if cbz_lstat_owner_mode(path, &uid, &mode) == 0, mode & UInt32(S_IFMT) != UInt32(S_IFSOCK) {
            return "\(path) is \(mode & UInt32(S_IFMT) == UInt32(S_IFREG) ? "a regular file" : "not a socket"), not a socket: a unix: TARGET is the socket a simulator or listener listens on (mirror-sim unix:PATH)"
        }
        return "\(path) exists but nobody listens on it: start the simulator (or listener) again"
    case (.protocolWrongType, .unix(let path)):
        return "\(path) is a stream or datagram socket: mirror speaks ATT over SOCK_SEQPACKET (one PDU per message), as mirror-sim listens; the program there is not an ATT peer"
    case (.addressInUse, .unix(let path)):
        return "another process already listens at \(path)"
    case (.permissionDenied, .unix(let path)):
        return "no permission to use \(path)"
    case (.wouldBlock, .unix(let path)):
        return "the listener at \(path) has a full backlog"
    case (.fileNameTooLong, .unix):
        return "AF_UNIX socket paths hold at most \(cbz_unix_path_max()) bytes"
    case (.noSuchDevice, .hci(let adapter)):
        return "there is no adapter \(adapter): see `mirror adapters`"
    case (.networkDown, .hci(let adapter)):
        return "adapter \(adapter) is down: `sudo btmgmt -i \(adapter) power on`"
    case (.blockedByRFKill, .hci), (.blockedByRFKill, .l2cap):
        return "the adapter is blocked by rfkill: run `rfkill unblock bluetooth`"
    case (.busy, .hci(let adapter)):
        let holder = BluetoothDaemon.runningPID().map { "bluetoothd (pid \($0))" } ?? "another program"
        return "\(holder) holds \(adapter): stop it (`sudo systemctl stop bluetooth`) and retry"
    default:
        return SocketError.anyDomainAdvice(code)
    }
}
