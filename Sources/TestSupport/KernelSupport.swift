// What the running kernel offers the tests (these machines' kernels have no Bluetooth; the VM's has).
import Glibc

/// Whether this kernel can open a Bluetooth socket (false here: EAFNOSUPPORT).
public func kernelHasBluetooth() -> Bool {
    let fd = socket(31 /* AF_BLUETOOTH */, Int32(SOCK_SEQPACKET.rawValue), 0)
    if fd >= 0 { close(fd); return true }
    return false
}
