// Finding the profile's characteristics on a connected mirror (Core Spec 5.4 Vol 3 Part G §4.4, §4.6, §4.7),
// and the read / write / subscribe steps the procedures share, each reported as an event.
import ATTStack
import GATTClient
import GATTVocabulary
import LinkCore

/// The mirror's characteristics found on the server (Core Spec 5.4 Vol 3 Part G §4.4.2, §4.6.1, §4.7.1): value and
/// CCCD handles by profile name.
public struct MirrorHandles: Sendable, Equatable {
    public var service: ATTHandleRange
    public var valueHandles: [String: UInt16]
    public var cccdHandles: [String: UInt16]
    /// Profile name of a value handle.
    public func name(of handle: UInt16) -> String? { valueHandles.first { $0.value == handle }?.key }
}

/// Why a mirror procedure could not run on this server.
public struct MirrorProcedureError: Error, Sendable, Equatable, CustomStringConvertible {
    public var problem: String
    public init(_ problem: String) { self.problem = problem }
    public var description: String { problem }
}

/// Discovery of the profile on a server.
public enum MirrorGATT {
    /// Discovers the profile's service, its characteristics and their CCCDs; names handles in the client.
    /// Throws when the service or a characteristic the procedure needs (`required`) is missing. With `database`
    /// (the whole database, discovered or cached, descriptors included) nothing is sent.
    public static func discover(_ client: GATTClient, profile: MirrorProfile, required: [String],
                                database: [GATTService]? = nil) async throws -> MirrorHandles {
        let services: [GATTService]
        if let database {
            services = database.filter { $0.isPrimary && $0.uuid == profile.service }
        } else {
            services = try await client.discoverPrimaryServices(uuid: profile.service)
        }
        guard let service = services.first else {
            throw MirrorProcedureError("the server has no mirror service \(profile.service) (profile \"\(profile.name)\"); "
                + "`mirror gatt TARGET` lists what it has")
        }
        let characteristics = database == nil ? try await client.discoverCharacteristics(of: service) : service.characteristics
        var values: [String: UInt16] = [:]
        var cccds: [String: UInt16] = [:]
        for (name, uuid) in profile.characteristics {
            guard let c = characteristics.first(where: { $0.uuid == uuid }) else { continue }
            values[name] = c.valueHandle
            client.setName(name, for: c.valueHandle)
            if c.properties.contains(.notify) || c.properties.contains(.indicate) {
                let descriptors = database == nil ? try await client.discoverDescriptors(of: c) : c.descriptors
                if let cccd = descriptors.first(where: { $0.isCCCD }) {
                    cccds[name] = cccd.handle
                    client.setName("\(name) CCCD", for: cccd.handle)
                }
            }
        }
        for name in required where values[name] == nil {
            throw MirrorProcedureError("the mirror service \(profile.service) has no \(name) characteristic "
                + "(\(profile.characteristics[name].map { "\($0)" } ?? "not in the profile"))")
        }
        return MirrorHandles(service: service.range, valueHandles: values, cccdHandles: cccds)
    }
}

/// One thing a mirror procedure did or saw (a Handle Value Notification, Vol 3 Part F §3.4.7.1; a read, a write and
/// its answer, §3.4.4.3, §3.4.5.1), in order, with the time since the procedure started.
public struct MirrorEvent: Sendable, Equatable {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        /// A Handle Value Notification or Indication (every one, from the moment the procedure starts).
        case notification(handle: UInt16)
        /// A read and its value (`purpose`: subscribe, preflight, resetCheck, final, wifi...).
        case read(handle: UInt16)
        /// A write about to go out.
        case write(handle: UInt16)
        /// A write's answer: nil error for a Write Response.
        case writeResult(handle: UInt16, error: String?)
        /// A CCCD written (notifications on).
        case subscribed(handle: UInt16)
        /// The upload receiver listens; `detail` is the URL the mirror will be told.
        case uploadListening
        /// The upload receiver took or refused a request.
        case upload(UploadEvent)
        /// A step of the procedure, in words.
        case step
        /// A read or write that failed outside the writes (the error in `detail`).
        case failed
    }
    public var time: Double
    public var kind: Kind
    /// The profile's name of the characteristic, when the event concerns one.
    public var characteristic: String?
    public var value: [UInt8]?
    /// The value decoded against the profile ("error", "scaleAlignment", "unknown(0x07)", a URL, an SSID).
    public var decoded: String?
    public var purpose: String?
    public var detail: String?
}

/// The shared machinery of a procedure: the clock, the event callback, reads and writes that report themselves.
final class MirrorSteps: Sendable {
    let client: GATTClient
    let profile: MirrorProfile
    let handles: MirrorHandles
    let emit: @Sendable (MirrorEvent) -> Void
    let started: ClockInstant

    init(client: GATTClient, profile: MirrorProfile, handles: MirrorHandles, started: ClockInstant,
         emit: @escaping @Sendable (MirrorEvent) -> Void) {
        self.client = client
        self.profile = profile
        self.handles = handles
        self.emit = emit
        self.started = started
    }

    var now: Double {
        let d = MonotonicClock().now().duration(since: started)
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    func event(_ kind: MirrorEvent.Kind, _ name: String? = nil, value: [UInt8]? = nil, purpose: String? = nil, detail: String? = nil) {
        let decoded = value.flatMap { decodeMirrorValue(name, $0, profile: profile) }
        emit(MirrorEvent(time: now, kind: kind, characteristic: name, value: value, decoded: decoded, purpose: purpose, detail: detail))
    }

    func step(_ text: String) { event(.step, detail: text) }

    func handle(_ name: String) -> UInt16 { handles.valueHandles[name]! }

    /// Reads a characteristic and reports it.
    func read(_ name: String, purpose: String) async throws(GATTError) -> [UInt8] {
        let h = handle(name)
        let value = try await client.read(handle: h)
        event(.read(handle: h), name, value: value, purpose: purpose)
        return value
    }

    /// Writes a characteristic with a Write Request and reports both the write and its answer.
    func write(_ name: String, _ value: [UInt8], purpose: String) async throws(GATTError) {
        let h = handle(name)
        event(.write(handle: h), name, value: value, purpose: purpose)
        do {
            try await client.write(handle: h, value: value)
            event(.writeResult(handle: h, error: nil), name, value: value, purpose: purpose)
        } catch {
            event(.writeResult(handle: h, error: error.description), name, value: value, purpose: purpose, detail: error.description)
            throw error
        }
    }

    /// Subscribes AND reads: writes the CCCD (notifications on), then reads the value (notifications fire only
    /// on change, so the read is what tells the current state).
    func subscribeAndRead(_ name: String) async throws(GATTError) -> [UInt8] {
        guard let cccd = handles.cccdHandles[name] else {
            throw .unsupported("\(name) has no Client Characteristic Configuration descriptor: it cannot notify")
        }
        try await client.write(handle: cccd, value: [0x01, 0x00])
        event(.subscribed(handle: handle(name)), name)
        return try await read(name, purpose: "subscribe")
    }
}
