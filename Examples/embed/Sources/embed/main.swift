// Connect (MTU 517), discover, read by name and by UUID, write, subscribe and print three notifications, and print
// the peer's exact ATT error, against mirror-sim: `swift run embed unix:/tmp/mirror-sim.sock`.
import GATTPeer
import Mirror

var options = Peer.Options()
options.names = CharacteristicNames(MirrorProfile.bundled.characteristics)
let peer = try await Peer.connect(to: try BearerTarget(parsing: CommandLine.arguments[1]), options: options)
print("MTU \(peer.mtu), \(try await peer.discover().count) services")
print("Device Name: \(String(decoding: try await peer.read(.uuid(.bit16(0x2A00))), as: UTF8.self))")
print("scanState: \(try await peer.read(.name("scanState")))")
try await peer.write(.name("cloudToken"), Array("http://127.0.0.1:9/embed".utf8))
let (_, states) = try await peer.subscribe(.name("scanState"))
try await peer.write(.name("scannerAction"), [0x32])  // initDeviceForScan
var seen = 0
for try await n in states {
    print("notified \(ATTHex.handle(n.handle)): \(n.value)")
    seen += 1
    if seen == 3 { break }
}
do {
    try await peer.write(.name("cloudToken"), Array(repeating: 0x41, count: 41))
} catch {
    print(error)
}
peer.close()
