// mirror listen TARGET [HANDLE|UUID|NAME...]: subscribe and print notifications and indications.
import ATTStack
import GATTClient
import GATTPeer
import GATTVocabulary
import JSON
import LinuxBluetooth
import LinkCore
import Mirror

let listenCommand = Command(CommandSpec(
    name: "listen",
    summary: "subscribe and print notifications and indications with timestamps",
    discussion: """
        Subscribes to each HANDLE|UUID|NAME (a characteristic's value handle, its UUID, or its name: the \
        profile's, as cloudToken, or its User Description; its CCCD is found by discovery) or, with none given, to every characteristic that can notify or indicate, then prints each notification and \
        indication (confirmed) with a UTC timestamp, until interrupted (Ctrl-C), --count arrived or --duration \
        passed (exit status 0 in each case, with how many were received). \
        A characteristic that both notifies and indicates is subscribed for notifications unless --indicate.

        Each line names the characteristic after its handle when it has a name (the profile's, its User \
        Description, or the UUID's well-known name). A UUID or NAME that names no characteristic, or several, \
        is bad usage (exit status 2): the error lists the names known, or the candidates with their value handles.

        Once every CCCD write is answered, a line "subscribed: N characteristics armed, listening" (stderr, \
        after the "subscribed to" line of each) says the peer may be triggered: nothing sent to it from then on \
        is missed. --duration counts from that moment.

        --json prints one JSON object per line: first {"event": "subscribed", "time", "subscriptions": [{"handle", \
        "name", "mode", "value"}]} once every CCCD write is answered, then one {"time", "handle", "kind", "value", \
        "text", "name"} per notification or indication ("name" is null when the characteristic has none; "decoded" \
        is added when the value has a meaning: a profile name such as scanState's, a well-known format), then a \
        last line {"received", "dropped": {"total", "outputFellBehind", "beforeSubscribed"}}: the values dropped \
        because the stream (1024 values) was full, after the subscriptions completed (the output fell behind) or \
        before. In text the count is said on stderr at the end when any were dropped.
        """,
    positionals: [
        PositionalSpec("TARGET", help: "the device address or unix:PATH"),
        PositionalSpec("HANDLE|UUID|NAME", optional: true, variadic: true, help: "value handles, UUIDs or characteristic names to subscribe to (default: all)"),
    ],
    options: [
        .value("--count", "N", help: "stop after N notifications and indications"),
        .value("--duration", "S", help: "stop S seconds after the subscriptions are armed (exit status 0)"),
        .flag("--indicate", help: "prefer indications where a characteristic offers both"),
    ],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror listen unix:/tmp/mirror-sim.sock", "everything the simulator notifies, until Ctrl-C"),
        ("mirror listen unix:/tmp/mirror-sim.sock 0x000C --count 10", "ten notifications of one value (0x000C: the simulator's scanState)"),
        ("mirror listen unix:/tmp/mirror-sim.sock scanState scanError", "two characteristics by their profile names"),
        ("mirror listen unix:/tmp/mirror-sim.sock scanState --duration 5", "whatever comes within five seconds, then the count"),
        ("mirror listen 00:AA:01:01:00:01 --json", "one JSON object per line"),
    ]
)) { inv in
    let target = try inv.target()
    var parsed: [CharacteristicReference] = []
    for i in 1..<max(1, inv.arguments.positionals.count) {
        parsed.append(try inv.positional(i, parseCharacteristicReference)!)
    }
    let references = parsed
    let count = try inv.option("--count") { (s: String) throws(UsageError) in try parseCount(s, in: 1...Int(Int32.max), what: "count") }
    let duration = try inv.option("--duration") { (s: String) throws(UsageError) in try parseSeconds(s) }
    let session = try await Session.open(target, inv)
    defer { session.close() }
    let json = inv.global.json
    let console = inv.console
    let profile = session.profile
    let drops = ListenDrops()
    let received: Int
    do {
        received = try await Interrupts.whileInterruptible {
            // Each subscription as it is armed (a Database Out Of Sync retry arms them again: the last one counts).
            var subscriptions: [(handle: UInt16, fields: [(String, JSONValue)])] = []
            return try await session.listen(
                references, command: "listen", preferIndications: inv.arguments.has("--indicate"), count: count, drops: drops,
                duration: duration.map { .milliseconds(Int64(($0 * 1000).rounded())) },
                subscribed: { c, label, mode, value in
                    let modeName = mode == .indicate ? "indications" : "notifications"
                    subscriptions.removeAll { $0.handle == c.valueHandle }
                    subscriptions.append((c.valueHandle, [("handle", .int(Int(c.valueHandle))), ("name", label.map { .string($0) } ?? .null),
                                                          ("mode", .string(modeName)), ("value", value.map { .string(ATTHex.string($0)) } ?? .null)]))
                    guard !json else { return }
                    var line = "subscribed to \(ATTHex.handle(c.valueHandle)) \(c.uuid)\(labelSuffix(label)) (\(modeName))"
                    if let value { line += ", current value: " + valueText(value, decoded: ValueFormatter.decode(value, uuid: c.uuid, name: label, profile: profile)) }
                    console.err(line)
                },
                armed: {
                    // The `subscribed` event: every CCCD write answered, so the peer may be triggered now.
                    if json {
                        console.out(JSONValue.object([("event", .string("subscribed")), ("time", .double(unixNow())),
                                                      ("subscriptions", .array(subscriptions.map { .object($0.fields) }))]).compact)
                    } else {
                        console.err("subscribed: \(subscriptions.count) characteristic\(subscriptions.count == 1 ? "" : "s") armed, listening")
                    }
                }
            ) { event in
                if json {
                    console.out(event.json.compact)
                } else {
                    if let note = event.droppedNote { console.err(note) }
                    console.out(event.line)
                }
            }
        }
    } catch {
        // SIGINT or SIGTERM while subscribing ends the listen as one while listening does (below), 0 received.
        if let interrupted = Interrupts.status {
            drops.report(received: 0, json: json, console: console)
            return interrupted == .terminated ? .terminated : .success
        }
        // Drops, if any, are said before the error (which Runner reports as the last line).
        if drops.total > 0 { drops.report(received: nil, json: json, console: console) }
        throw error
    }
    drops.report(received: received, json: json, console: console)
    // Ctrl-C is a listen's normal end (0); SIGTERM, a supervisor asking it to stop, is 143 (interruptTable).
    return Interrupts.status == .terminated ? .terminated : .success
}

/// How many notifications and indications a listen (or a scan) dropped: GATTPeer's count, worded here.
typealias ListenDrops = NotificationDrops

extension NotificationDrops {
    /// `{"total", "outputFellBehind", "beforeSubscribed"}`.
    var json: JSONValue {
        let (behind, before) = counts
        return .object([("total", .int(behind + before)), ("outputFellBehind", .int(behind)), ("beforeSubscribed", .int(before))])
    }

    /// At the end of a listen: text, "received N ..." and, when any were dropped, "N notifications dropped (...)" on
    /// stderr; JSON, one last line {"received": N, "dropped": {...}} (received null when the listen failed).
    func report(received: Int?, json: Bool, console: Console) {
        if json {
            console.out(JSONValue.object([("received", received.map { .int($0) } ?? .null), ("dropped", self.json)]).compact)
            return
        }
        if let received {
            console.err("received \(received) notification\(received == 1 ? "" : "s") and indication\(received == 1 ? "" : "s")")
        }
        let (behind, before) = counts
        if behind + before > 0 {
            console.err("\(behind + before) notification\(behind + before == 1 ? "" : "s") dropped (output fell behind: \(behind); "
                        + "before the subscription completed: \(before))")
        }
    }
}


extension ListenEvent {
    /// `{"time", "handle", "kind", "value", "text", "name"}` (and "decoded" when known, "droppedBefore" when values were dropped).
    var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("time", .double(time)), ("handle", .int(Int(handle))),
            ("kind", .string(indication ? "indication" : "notification")),
            ("value", .string(ATTHex.string(value))), ("text", .string(printableText(value))),
            ("name", name.map { .string($0) } ?? .null),
        ]
        if let decoded { fields.append(("decoded", .string(decoded))) }
        if droppedBefore > 0 { fields.append(("droppedBefore", .int(droppedBefore))) }
        return .object(fields)
    }

    /// "12:00:01.123  notification 0x000C scanState: 09"
    var line: String {
        "\(clockTime(unixSeconds: time))  \(indication ? "indication " : "notification") \(ATTHex.handle(handle))\(labelSuffix(name)): \(valueText(value, decoded: decoded))"
    }

    /// The line before a value that comes after drops (the output fell behind), if any.
    var droppedNote: String? {
        guard droppedBefore > 0 else { return nil }
        return "(\(droppedBefore) value\(droppedBefore == 1 ? "" : "s") dropped before this one: the output fell behind)"
    }
}

extension Session {
    /// GATTPeer's listen (`CharacteristicLookup.listen`) on this session's notifications from now on
    /// (GATTPeer's `ProcedureNotifications`), each value made a `ListenEvent` with its label and meaning; a characteristic
    /// that cannot notify is bad usage, named as the user typed it.
    func listen(_ references: [CharacteristicReference], command: String?, preferIndications: Bool, count: Int?,
                drops: ListenDrops? = nil, duration: Duration? = nil,
                subscribed: (GATTCharacteristic, String?, GATTSubscriptionMode, [UInt8]?) -> Void,
                armed: () -> Void = {},
                _ handler: @escaping @Sendable (ListenEvent) -> Void) async throws -> Int {
        let stream = try notifications.listenStream(count: count)
        defer { notifications.endListen(stream) }
        let profile = self.profile
        do {
            return try await peer.lookup.listen(
                references, on: stream, preferIndications: preferIndications, count: count, duration: duration, drops: drops,
                locate: { try await self.characteristic($0, command: command) },
                subscribed: { entry, mode, value in subscribed(entry.characteristic, entry.label, mode, value) },
                armed: armed, finishing: { self.notifications.endListen(stream, finish: true) }
            ) { n, target in
                handler(ListenEvent(time: unixNow(), handle: n.handle, name: target?.label,
                                    decoded: ValueFormatter.decode(n.value, uuid: target?.characteristic.uuid, name: target?.label, profile: profile),
                                    indication: n.kind == .indication, value: n.value, droppedBefore: n.droppedBefore))
            }
        } catch let e as CharacteristicNotSubscribable {
            // The user's token is wrong: bad usage (exit 2), naming it as typed and offering those that notify.
            throw UsageError(e.description, token: e.reference, command: command ?? "listen")
        }
    }
}
