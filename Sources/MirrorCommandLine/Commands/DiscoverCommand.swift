// mirror discover: an LE scan through raw HCI.
import JSON
import LinuxBluetooth
import LinkCore

let discoverCommand = Command(CommandSpec(
    name: "discover",
    summary: "scan for LE devices through raw HCI: address, type, RSSI, name, services",
    discussion: """
        Runs an LE active scan through the kernel (Bluetooth management Start Discovery) on the adapter (--adapter, default: \
        the first adapter that is up) for --duration seconds and prints \
        each advertiser once: address, address type, the strongest RSSI, the name and the advertised \
        service UUIDs. Ctrl-C stops the scan early and prints what it saw (exit 130). The management socket needs CAP_NET_ADMIN: run as root or give the binary \
        the capabilities (setcap cap_net_raw,cap_net_admin+eip). A machine without Bluetooth in its \
        kernel fails with EAFNOSUPPORT.
        """,
    options: [.value("--duration", "S", help: "how long to scan, in seconds (default 5)")],
    globals: [.adapter, .json],
    examples: [
        ("mirror discover", "scan for 5 seconds on the default adapter"),
        ("mirror discover --adapter hci1 --duration 10 --json", "scan 10 seconds on hci1, as JSON"),
    ]
)) { inv in
    let duration = try inv.option("--duration") { (s: String) throws(UsageError) in try parseSeconds(s) } ?? 5
    // Ctrl-C or SIGTERM stops the scan (Stop Discovery) and prints what it saw; the exit says which signal came.
    let stopper = LEScanner.Stopper()
    let adapter = inv.global.adapter
    let devices = try await Interrupts.whileInterruptible {
        try await withTaskCancellationHandler {
            try Discovery.scan(adapter: adapter, duration: duration, stopper: stopper)
        } onCancel: { stopper.stop() }
    }
    if inv.global.json {
        inv.console.json(JSONValue.object([("devices", .array(devices.map(\.json)))]))
    } else {
        for d in devices { inv.console.out(d.text) }
        inv.console.err("\(devices.count) device\(devices.count == 1 ? "" : "s") in \(formatSeconds(duration))")
    }
    return Interrupts.status ?? .success
}
