// mirror doctor and mirror adapters: what this machine can do with Bluetooth, and what to do about it.
import ATTStack
import HostEnvironment
import LinuxBluetooth
import LinkCore

let doctorCommand = Command(CommandSpec(
    name: "doctor",
    summary: "check kernel Bluetooth support, adapters, capabilities and bluetoothd, with what to do",
    discussion: """
        Checks, in order: whether this kernel has Bluetooth (an AF_BLUETOOTH L2CAP socket opens), rfkill, \
        each adapter (up or down, LE support), this process's and this binary's capabilities (raw HCI work \
        such as discover and advertising needs CAP_NET_RAW and CAP_NET_ADMIN; a CID 4 ATT socket needs none), \
        and whether bluetoothd runs (it owns the ATT channel of the links it makes). Each finding says what \
        to do. Exits 0 when nothing is a problem, 7 otherwise.
        """,
    positionals: [],
    globals: [.json],
    examples: [
        ("mirror doctor", "every check, with what to do"),
        ("mirror doctor --json", "the same as one JSON object"),
    ]
)) { inv in
    let report = BluetoothDoctor.run()
    inv.console.out(inv.global.json ? report.json : report.text)
    return report.isHealthy ? .success : .unsupported
}

let adaptersCommand = Command(CommandSpec(
    name: "adapters",
    summary: "list the HCI adapters: name, address, up/down, LE support, ACL MTU and buffers",
    discussion: """
        Lists every HCI adapter the kernel knows (HCIGETDEVLIST, HCIGETDEVINFO). Needs a kernel with \
        Bluetooth; says so when it has none (exit 7), as every command reports an error (with --json the \
        {"error": {...}} object).
        """,
    positionals: [],
    globals: [.json],
    examples: [
        ("mirror adapters", "one line per adapter"),
        ("mirror adapters --json", "the same as JSON"),
    ]
)) { inv in
    // A failure to list is an error like any other command's (ErrorReport: stderr, and {"error": ...} with --json).
    let report = AdaptersReport(adapters: try HCIAdapter.list())
    inv.console.out(inv.global.json ? report.json : report.text)
    return .success
}
