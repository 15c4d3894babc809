// mirror wifi list|status|join TARGET [SSID]: the mirror's Wi-Fi steps (Mirror.MirrorWiFi).
import ATTStack
import GATTClient
import JSON
import Mirror
import GATTVocabulary

let wifiCommand = Command(CommandSpec(
    name: "wifi",
    summary: "the mirror's Wi-Fi: list networks, show the connection status, join a network",
    discussion: """
        list: writes wifiScan (0x31) to scannerAction, reads wifiNumNetworks, then reads wifiNetworkSSIDEnum once \
        per network. status: reads wifiConnectionStatus (and wifiSetSSID). join SSID: subscribes to and reads \
        wifiConnectionStatus, writes SSID to wifiSetSSID, then waits for connected or failed and reads it once \
        more. Each has a named deadline (--wait, default 30 s); values are decoded with the profile. \
        --json prints one JSON object per event (each read, write and notification) and ends with one result \
        object: {"event": "result", "networks": [...]} or {"event": "result", "status", "statusByte", "ssid"}.
        Exit status 0 for list and status; for join, 0 only when the status ends connected.
        """,
    positionals: [
        PositionalSpec("list|status|join", help: "what to do"),
        PositionalSpec("TARGET", help: "the mirror's address, or unix:PATH"),
        PositionalSpec("SSID", optional: true, help: "the network to join (join only)"),
    ],
    options: [.value("--wait", "S", help: "the deadline of the procedure (default 30)")],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror wifi list unix:/tmp/mirror-sim.sock", "the networks the mirror sees"),
        ("mirror wifi join unix:/tmp/mirror-sim.sock mirror-lab", "join a network and wait for the result"),
        ("mirror wifi status 00:AA:01:01:00:01 --json", "the connection status as JSON"),
    ]
)) { inv in
    let action = try inv.positional(0) { (s: String) throws(UsageError) -> String in
        guard ["list", "status", "join"].contains(s) else { throw UsageError("expected list, status or join, got \(s)", token: s) }
        return s
    }!
    let positionals = inv.arguments.positionals
    let target: TargetArgument
    do { target = try inv.target(at: 1) } catch {
        // `join SSID TARGET` (the order nmcli and the README once gave): say the swap rather than parse the SSID.
        if action == "join", positionals.count > 2, (try? parseTarget(positionals[2], global: inv.global)) != nil {
            throw UsageError("the TARGET comes before the SSID: mirror wifi join \(positionals[2]) \(positionals[1])", token: positionals[1], command: "wifi")
        }
        throw error
    }
    let ssid = positionals.count > 2 ? positionals[2] : nil
    if action == "join" && (ssid ?? "").isEmpty { throw UsageError("join needs an SSID", command: "wifi") }
    if action != "join" && ssid != nil { throw UsageError("\(action) takes no SSID", token: ssid, command: "wifi") }
    let wait = try inv.option("--wait") { (s: String) throws(UsageError) in try parseSeconds(s) } ?? 30
    let limit = Duration.milliseconds(Int64((wait * 1000).rounded()))
    let profile = try loadProfile(inv)
    let session = try await Session.open(target, inv)
    defer { session.close() }
    let json = inv.global.json
    let console = inv.console
    let emit: @Sendable (MirrorEvent) -> Void = { e in
        if json { console.out(mirrorEventJSON(e).compact) } else { console.err(mirrorEventText(e)) }
    }
    // The cached database when the peer has a Database Hash (no discovery when it matches); a join enables
    // robust caching once it has subscribed, for its wait (list and status are over in a few requests).
    let database = try await session.cachedDatabase()
    switch action {
    case "list":
        let ssids = try await MirrorWiFi.list(client: session.peer.client, profile: profile, timeout: limit, database: database, emit: emit)
        if json {
            console.out(JSONValue.object([("event", "result"), ("networks", .array(ssids.map { .string($0) }))]).compact)
        } else {
            console.out("\(ssids.count) network\(ssids.count == 1 ? "" : "s")")
            // An SSID is the mirror's (and the air's) text: escaped for the terminal, exact in the JSON.
            for s in ssids { console.out("  " + TerminalText.escaped(s)) }
        }
        return .success
    default:
        let status = action == "status"
            ? try await MirrorWiFi.status(client: session.peer.client, profile: profile, timeout: limit, database: database, emit: emit)
            : try await joinWiFi(session, profile: profile, ssid: ssid!, timeout: limit, database: database, emit: emit)
        if json {
            console.out(JSONValue.object([
                ("event", "result"), ("status", .string(status.status)), ("statusByte", status.statusByte.map { .int(Int($0)) } ?? .null),
                ("ssid", status.ssid.map { .string($0) } ?? .null),
            ]).compact)
        } else {
            console.out("wifiConnectionStatus \(status.status)" + (status.ssid.map { ", SSID " + TerminalText.escaped($0) } ?? ""))
        }
        if action == "join" && status.status != "connected" { return .failure }
        return .success
    }
}

/// MirrorWiFi.join on the session's notifications from this moment (GATTPeer's `ProcedureNotifications`).
private func joinWiFi(_ session: Session, profile: MirrorProfile, ssid: String, timeout: Duration, database: [GATTService]?,
                      emit: @escaping @Sendable (MirrorEvent) -> Void) async throws -> MirrorWiFiStatus {
    let notifications = try session.notifications.stream()
    defer { session.notifications.end(notifications) }
    var robustCaching: (@Sendable () async throws -> Void)?
    if database != nil { robustCaching = { @Sendable in try await session.peer.database.enableRobustCaching() } }
    return try await MirrorWiFi.join(client: session.peer.client, profile: profile, ssid: ssid, timeout: timeout,
                                     database: database, notifications: notifications, afterSubscribing: robustCaching,
                                     emit: emit)
}
