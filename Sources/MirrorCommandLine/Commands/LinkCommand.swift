// mirror link TARGET: the LE link under the ATT bearer (each value with where it came from), and what the link
// options asked for came to.
import ATTStack
import GATTPeer
import JSON
import LinuxBluetooth
import LinkCore

let linkCommand = Command(CommandSpec(
    name: "link",
    summary: "show the LE link (handle, role, interval, PHY, data length, security, buffers) and ask for another",
    discussion: """
        Connects, exchanges the MTU, and prints the link under the ATT bearer: the HCI connection handle, the \
        role, the connection interval, the peripheral latency, the supervision timeout, the TX and RX PHY, the \
        data length, the ATT MTU, the security level and whether the link is encrypted, and the adapter's LE ACL \
        buffers. Each value says where it came from (a socket option, an ioctl, an HCI event seen on this link, \
        an HCI command's answer); a value only raw HCI gives is unknown without CAP_NET_RAW, with the setcap line \
        that grants it. --interval, --latency, --supervision-timeout, --phy and --data-length (on every command \
        that connects) ask the controller for a link; each is printed as asked and as granted (the completion \
        event's values) or with the controller's HCI status named. A refused request leaves the link as it was. \
        With --bearers N (2-5) the ATT bearers on the link follow: CID 4 and each Enhanced ATT bearer (an ECRED \
        channel on PSM 0x0027) with its channel IDs, MTU and credits where the kernel reports them.
        """,
    positionals: [PositionalSpec("TARGET", help: "the device address or unix:PATH")],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror link 00:AA:01:01:00:01 --adapter hci0", "show the link and where each value came from"),
        ("mirror link 00:AA:01:01:00:01 --interval 7.5 --phy 2m", "ask for a 7.5 ms interval and LE 2M, then show the link"),
        ("mirror link 00:AA:01:01:00:01 --json", "the link as JSON: {\"intervalMs\": {\"value\": 50, \"source\": ...}, ...}"),
    ]
)) { inv in
    let target = try inv.target()
    let session = try await Session.open(target, inv, announceLink: false)
    defer { session.close() }
    if inv.global.json {
        inv.console.json(JSONValue.object([("target", .string(target.target.description)), ("link", session.linkJSON())]
                                          + (session.bearersJSON().map { [("bearers", $0)] } ?? [])))
        return .success
    }
    for line in linkText(session, target: target) + session.bearerText() { inv.console.out(line) }
    return .success
}

/// The text form of `mirror link`: one value a line with its source, then the requests.
func linkText(_ session: Session, target: TargetArgument) -> [String] {
    guard let link = session.peer.link else {
        return ["link to \(target.target): none (a unix socket has no radio link)", "  ATT MTU             \(session.peer.mtu)"]
            + (session.peer.linkRequests.isEmpty ? [] : ["asked:"] + session.peer.linkRequests.map { "  \($0.text)" })
    }
    let s = link.state()
    var lines = ["link to \(target.target)\(link.monitor.map { " on \($0.adapter.name)" } ?? "")"]
    func row<T>(_ name: String, _ v: LinkValue<T>, _ show: (T) -> String) {
        let padded = name.padded(toLength: 20)
        switch v {
        case .known(let value, let source):
            let text = show(value)
            lines.append("  \(padded)\(text.padded(toLength: max(text.count, 24))) (\(source))")
        case .unknown(let why):
            lines.append("  \(padded)unknown: \(why)")
        }
    }
    row("handle", s.handle) { ATTHex.handle($0) }
    row("role", s.role) { $0.rawValue }
    row("interval", s.intervalMilliseconds) { "\(formatMilliseconds($0)) ms" }
    row("peripheral latency", s.peripheralLatency) { "\($0)" }
    row("supervision timeout", s.supervisionTimeoutMilliseconds) { "\($0) ms" }
    row("TX PHY", s.txPHY) { $0.rawValue }
    row("RX PHY", s.rxPHY) { $0.rawValue }
    row("data length", s.dataLength) { "TX \($0.maxTxOctets) octets \($0.maxTxTime) µs, RX \($0.maxRxOctets) octets \($0.maxRxTime) µs" }
    lines.append("  \("ATT MTU".padded(toLength: 20))\(String(session.peer.mtu).padded(toLength: 24)) (Exchange MTU)")
    row("security", s.securityLevel) { $0.description }
    row("encrypted", s.encrypted) { $0 ? "yes" : "no" }
    row("LE ACL buffers", s.adapterLEBuffers) { "\($0.size) bytes x \($0.count)" }
    if let note = link.monitorNote { lines.append("  watch: \(note)") }
    if !session.peer.linkRequests.isEmpty {
        lines.append("asked:")
        for r in session.peer.linkRequests { lines.append("  \(r.text)") }
    }
    return lines
}
