// mirror listen TARGET [HANDLE...]: subscribe and print notifications and indications.
import ATTStack
import GATTClient
import JSON

let listenCommand = Command(CommandSpec(
    name: "listen",
    summary: "subscribe and print notifications and indications with timestamps",
    discussion: """
        Subscribes to each HANDLE (a characteristic's value handle; its CCCD is found by discovery) or, with no \
        HANDLE, to every characteristic that can notify or indicate, then prints each notification and \
        indication (confirmed) with a UTC timestamp, until interrupted (Ctrl-C) or --count arrived. \
        A characteristic that both notifies and indicates is subscribed for notifications unless --indicate.

        --json prints one JSON object per line: {"time", "handle", "kind", "value", "text"}.
        """,
    positionals: [
        PositionalSpec("TARGET", help: "the device address or unix:PATH"),
        PositionalSpec("HANDLE", optional: true, variadic: true, help: "value handles to subscribe to (default: all)"),
    ],
    options: [
        .value("--count", "N", help: "stop after N notifications and indications"),
        .flag("--indicate", help: "prefer indications where a characteristic offers both"),
    ],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror listen unix:/tmp/mirror-sim.sock", "everything the simulator notifies, until Ctrl-C"),
        ("mirror listen unix:/tmp/mirror-sim.sock 0x0016 --count 10", "ten notifications of one value"),
        ("mirror listen 00:AA:01:01:00:01 --json", "one JSON object per line"),
    ]
)) { inv in
    let target = try inv.target()
    var parsedHandles: [UInt16] = []
    for i in 1..<max(1, inv.arguments.positionals.count) {
        parsedHandles.append(try inv.positional(i, parseHandle)!)
    }
    let handles = parsedHandles
    let count = try inv.option("--count") { (s: String) throws(UsageError) in try parseCount(s, in: 1...Int(Int32.max), what: "count") }
    let session = try await Session.open(target, inv)
    defer { session.close() }
    let json = inv.global.json
    let console = inv.console
    let received = try await Interrupts.whileInterruptible {
        try await session.listen(
            handles: handles, preferIndications: inv.arguments.has("--indicate"), count: count,
            subscribed: { c, mode, value in
                guard !json else { return }
                let name = c.uuid.name.map { " \($0)" } ?? ""
                var line = "subscribed to \(ATTHex.handle(c.valueHandle)) \(c.uuid)\(name) (\(mode == .indicate ? "indications" : "notifications"))"
                if let value { line += ", current value: " + valueText(value) }
                console.err(line)
            }
        ) { event in
            if json {
                var fields: [(String, JSONValue)] = [
                    ("time", .double(event.time)), ("handle", .int(Int(event.handle))),
                    ("kind", .string(event.indication ? "indication" : "notification")),
                    ("value", .string(ATTHex.string(event.value))), ("text", .string(printableText(event.value))),
                ]
                if event.droppedBefore > 0 { fields.append(("droppedBefore", .int(event.droppedBefore))) }
                console.out(JSONValue.object(fields).compact)
            } else {
                if event.droppedBefore > 0 {
                    console.err("(\(event.droppedBefore) value\(event.droppedBefore == 1 ? "" : "s") dropped before this one: the output fell behind)")
                }
                console.out("\(clockTime(unixSeconds: event.time))  \(event.indication ? "indication " : "notification") \(ATTHex.handle(event.handle)): \(valueText(event.value))")
            }
        }
    }
    if !json {
        console.err("received \(received) notification\(received == 1 ? "" : "s") and indication\(received == 1 ? "" : "s")")
    }
    return .success
}

