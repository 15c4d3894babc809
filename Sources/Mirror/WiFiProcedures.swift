// `mirror wifi list|status|join`: the mirror's Wi-Fi steps (wifiScan 0x31 on scannerAction, then
// wifiNumNetworks and one wifiNetworkSSIDEnum read per network; wifiSetSSID; wifiConnectionStatus), each
// under a named deadline, with decoded values.
import ATTStack
import GATTClient
import GATTVocabulary
import LinkCore

/// The mirror's Wi-Fi as a procedure reports it.
public struct MirrorWiFiStatus: Sendable, Equatable {
    public var status: String
    public var statusByte: UInt8?
    /// The SSID the mirror was last given (wifiSetSSID read back), when readable.
    public var ssid: String?
}

/// The Wi-Fi procedures.
public enum MirrorWiFi {
    /// The default limit of each Wi-Fi procedure.
    public static let defaultTimeout: Duration = .seconds(30)

    /// wifiScan (0x31), then wifiNumNetworks, then that many wifiNetworkSSIDEnum reads: the SSIDs in order.
    public static func list(client: GATTClient, profile: MirrorProfile, timeout: Duration = defaultTimeout,
                            database: [GATTService]? = nil,
                            emit: @escaping @Sendable (MirrorEvent) -> Void = { _ in }) async throws -> [String] {
        let steps = try await prepare(client, profile, ["scannerAction", "wifiNumNetworks", "wifiNetworkSSIDEnum"], database, emit)
        return try await withDeadline(timeout, waitingFor: "the Wi-Fi network list (wifiScan, wifiNumNetworks, wifiNetworkSSIDEnum)") {
            try await steps.write("scannerAction", [profile.wifiScanCommand], purpose: "wifiScan")
            let count = try await steps.read("wifiNumNetworks", purpose: "wifi")
            guard let n = count.first else { throw MirrorProcedureError("wifiNumNetworks read back empty") }
            var ssids: [String] = []
            for _ in 0..<Int(n) {
                let ssid = try await steps.read("wifiNetworkSSIDEnum", purpose: "wifi")
                ssids.append(String(decoding: ssid, as: UTF8.self))
            }
            return ssids
        }
    }

    /// Reads wifiConnectionStatus (and wifiSetSSID when present).
    public static func status(client: GATTClient, profile: MirrorProfile, timeout: Duration = defaultTimeout,
                              database: [GATTService]? = nil,
                              emit: @escaping @Sendable (MirrorEvent) -> Void = { _ in }) async throws -> MirrorWiFiStatus {
        let steps = try await prepare(client, profile, ["wifiConnectionStatus"], database, emit)
        return try await withDeadline(timeout, waitingFor: "wifiConnectionStatus") {
            let v = try await steps.read("wifiConnectionStatus", purpose: "wifi")
            var ssid: String?
            if steps.handles.valueHandles["wifiSetSSID"] != nil {
                ssid = (try? await steps.read("wifiSetSSID", purpose: "wifi")).map { String(decoding: $0, as: UTF8.self) }
            }
            return MirrorWiFiStatus(status: v.first.map(profile.wifiStatusName) ?? "empty", statusByte: v.first, ssid: ssid)
        }
    }

    /// Subscribes to (and reads) wifiConnectionStatus, writes `ssid` to wifiSetSSID, then waits under `timeout`
    /// for connected or failed (notifications, then a final read whatever happened). `notifications`: the stream
    /// it waits on (nil: the client's catch-all; see `MirrorScan.run`), armed by the caller before the call.
    /// `afterSubscribing` runs once wifiConnectionStatus is subscribed and read (the CLI enables robust caching
    /// there, for the wait).
    public static func join(client: GATTClient, profile: MirrorProfile, ssid: String, timeout: Duration = defaultTimeout,
                            database: [GATTService]? = nil,
                            notifications: GATTNotificationStream? = nil,
                            afterSubscribing: (@Sendable () async throws -> Void)? = nil,
                            emit: @escaping @Sendable (MirrorEvent) -> Void = { _ in }) async throws -> MirrorWiFiStatus {
        let steps = try await prepare(client, profile, ["wifiSetSSID", "wifiConnectionStatus"], database, emit)
        let statusHandle = steps.handle("wifiConnectionStatus")
        let terminal = Set(["connected", "failed"].compactMap { profile.wifiStatusByte($0) })
        // Armed before the write: the stream holds every notification from here on.
        let stream = notifications ?? client.notifications
        let current = try await steps.subscribeAndRead("wifiConnectionStatus")
        try await afterSubscribing?()
        steps.step("wifiConnectionStatus is \(current.first.map(profile.wifiStatusName) ?? "empty") before the join")
        try await steps.write("wifiSetSSID", Array(ssid.utf8), purpose: "join")
        do {
            _ = try await withDeadline(timeout, waitingFor: "wifiConnectionStatus connected or failed after joining \(ssid)") {
                for try await n in stream {
                    steps.event(.notification(handle: n.handle), steps.handles.name(of: n.handle), value: n.value, purpose: n.kind.rawValue)
                    if n.handle == statusHandle, let b = n.value.first, terminal.contains(b) { return b }
                }
                throw MirrorProcedureError("the connection closed while waiting for wifiConnectionStatus")
            }
        } catch {
            steps.event(.failed, "wifiConnectionStatus", purpose: "join", detail: "\(error)")
        }
        let final = try await steps.read("wifiConnectionStatus", purpose: "final")
        return MirrorWiFiStatus(status: final.first.map(profile.wifiStatusName) ?? "empty", statusByte: final.first, ssid: ssid)
    }

    /// `database`: the whole database when the caller has it (the GATT cache), else the mirror service is discovered.
    static func prepare(_ client: GATTClient, _ profile: MirrorProfile, _ required: [String], _ database: [GATTService]?,
                        _ emit: @escaping @Sendable (MirrorEvent) -> Void) async throws -> MirrorSteps {
        let handles = try await MirrorGATT.discover(client, profile: profile, required: required, database: database)
        return MirrorSteps(client: client, profile: profile, handles: handles, started: MonotonicClock().now(), emit: emit)
    }
}
