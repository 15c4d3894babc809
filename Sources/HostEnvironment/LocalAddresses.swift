// This machine's IPv4 addresses, as Foundation's `Host.current().addresses` listed them (getifaddrs, loopback
// interfaces left out), without Foundation.
import CBlueZSocket
import LinuxBluetooth
import LinkCore

/// The numeric IPv4 addresses of the interfaces that are not loopback, in getifaddrs' order; [] when getifaddrs fails.
public func localIPv4Addresses() -> [String] {
    var buffer = [CChar](repeating: 0, count: 4096)
    guard cbz_ipv4_addresses(&buffer, buffer.count) == 0 else { return [] }
    let text = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return text.split(separator: "\n").map(String.init)
}
