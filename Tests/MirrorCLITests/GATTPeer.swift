// The CLI tests' peer: GATTServer's host (Core Spec 5.4 Vol 3 Part F §3.4 answered from an attribute database, Part
// G's declarations) on a unix: socket, with a database for every command and error form and a fault layer.
import ATTStack
import LinuxBluetooth
import LinkCore
import Foundation
import GATTClient
import GATTServer
import TestSupport

extension AttributeDatabase {
    /// Generic Access, a secondary battery service included from a 128-bit custom service with characteristics for
    /// every error form (their errors are the peer's handlers), and a notifying counter.
    static func standard() -> AttributeDatabase {
        AttributeDatabase { db in
            db.service(.genericAccess)
            db.characteristic(.deviceName, [.read, .write], value: Array("Scripted Peer".utf8), name: "deviceName")
            db.characteristic(.appearance, [.read], value: [0x00, 0x00], name: "appearance")
            let batteryStart = db.nextHandle
            db.service(.batteryService, primary: false)
            db.characteristic(.bit16(0x2A19), [.read, .notify], value: [87], name: "battery")
            let batteryEnd = db.nextHandle - 1
            db.service(custom(1))
            db.include(start: batteryStart, end: batteryEnd, uuid: .batteryService)
            db.characteristic(custom(2), [.read, .write], name: "cloudToken")
            db.descriptor(.characteristicUserDescription, value: Array("cloudToken".utf8), name: "cloudTokenName")
            db.characteristic(custom(3), [.read], value: [1], name: "secret")
            db.characteristic(custom(4), [.read, .write], value: [0], name: "appError")
            db.characteristic(custom(5), [.read, .write], value: (0..<300).map { UInt8($0 & 0xFF) }, name: "long")
            db.characteristic(custom(6), [.read, .writeWithoutResponse, .write], name: "sink")
            db.characteristic(custom(8), [.read], value: [0, 0, 0, 0], name: "writeCount")
            db.characteristic(custom(7), [.read, .notify, .indicate], value: [0], name: "counter")
        }
    }

    /// 6e40000N-b5a3-f393-e0a9-e50e24dcca9e
    private static func custom(_ n: Int) -> BluetoothUUID {
        BluetoothUUID(string: "6e40000\(n)-b5a3-f393-e0a9-e50e24dcca9e")!
    }
}

/// The peer: listens at a unix socket path and serves each connection from one database.
final class GATTPeer: Sendable {
    /// What the peer does besides answering normally (its fault layer).
    struct Behaviour: Sendable {
        var serverRxMTU: UInt16 = 247
        /// Answer Exchange MTU with Request Not Supported.
        var mtuNotSupported = false
        /// Requests (by opcode) that never get an answer.
        var silentOn: Set<UInt8> = []
        /// Requests (by opcode) on which the peer closes the connection.
        var closeOn: Set<UInt8> = []
        /// Requests (by opcode) answered with a malformed PDU.
        var garbageOn: Set<UInt8> = []
        /// Notifications (or indications, one per confirmation) sent after a CCCD is enabled.
        var notificationsPerSubscription = 3
        /// The value of each of those notifications (default: its number, then "tick N").
        var notificationValue: [UInt8]?
        /// Close the connection right after sending a subscription's notifications.
        var closeAfterNotifying = false
        /// Every Nth Write Request, the peer sends a request of its own (Read By Type of Device Name, as
        /// bluetoothd's GATT client does) before its Write Response.
        var peerRequestEvery: Int?
        /// Write Requests after this many go unanswered (a peer that stops answering mid-run).
        var silentAfterWriteRequests: Int?
        /// Notifications of the value sent on a CCCD write before its Write Response (before the subscription completes).
        var notificationsBeforeCCCDAnswer = 0
    }

    struct Counters: Sendable, Equatable {
        var connections = 0
        var writeRequests = 0
        var writeCommands = 0
        var writeCommandBytes = 0
        var confirmations = 0
        var executedWrites = 0
        /// Write Requests and Write Commands to the "sink" characteristic (read through "writeCount").
        var sinkWrites = 0
        /// The peer's own requests sent (`peerRequestEvery`), and the answers it got to them.
        var peerRequestsSent = 0
        var peerRequestsAnswered = 0
        /// Every PDU received, counted by opcode (so a test can say no discovery was sent).
        var opcodes: [UInt8: Int] = [:]
        /// Notifications handed to the connection's writer (each send waits while its outbox is full).
        var notificationsSent = 0
    }

    let path: String
    let listener: ATTBearerListener
    let host: GATTServerHost
    let counterLock: Lock<Counters>
    let handles: [String: UInt16]

    /// `path`: where to listen (another peer's, to stand in its place at the same TARGET); else a new one.
    init(database: AttributeDatabase = .standard(), behaviour: Behaviour = Behaviour(), path: String? = nil) throws {
        self.path = path ?? temporarySocketPath("mirror-cli-peer")
        listener = try ATTBearerListener.unix(path: self.path)
        handles = database.handles
        let counters = Lock(Counters())
        counterLock = counters
        host = GATTServerHost(database: database, serverRxMTU: behaviour.serverRxMTU,
                              hooks: Self.hooks(behaviour, counters, database.handles))
        let listener = self.listener, host = self.host
        let thread = Thread {
            while let bearer = try? listener.accept() {
                counters.withLock { $0.connections += 1 }
                host.attach(bearer)
            }
        }
        thread.name = "gatt-peer"
        thread.start()
    }

    /// The TARGET argument for `mirror`.
    var target: String { "unix:\(path)" }
    var counters: Counters { counterLock.withLock { $0 } }
    func handle(_ name: String) -> UInt16 { handles[name]! }
    func hexHandle(_ name: String) -> String { String(format: "0x%04X", handle(name)) }
    func value(_ name: String) -> [UInt8] { host.database.attribute(handle(name))!.value }
    func close() { listener.close() }

    /// Closes the listener and waits, at most `limit` seconds, until its accept thread has let the socket go and
    /// removed its file (the listener does that on release), so that another peer may listen at `path`.
    func closeAndRelease(limit: TimeInterval = 10) -> Bool {
        listener.close()
        let deadline = Date().addingTimeInterval(limit)
        while FileManager.default.fileExists(atPath: path) {
            if Date() > deadline { return false }
            usleep(1000)
        }
        return true
    }

    /// The error forms, the counters and the behaviour's faults around the one server.
    static func hooks(_ behaviour: Behaviour, _ counters: Lock<Counters>, _ handles: [String: UInt16]) -> GATTServerHost.Hooks {
        let sink = handles["sink"]
        var hooks = GATTServerHost.Hooks()
        hooks.read = { read, _ in
            switch read.attribute.name {
            case "secret": return .error(.insufficientAuthentication)
            case "writeCount":
                let n = UInt32(truncatingIfNeeded: counters.withLock { $0.sinkWrites })
                return .value([UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)])
            default: return .stored
            }
        }
        hooks.write = { write, _ in
            switch write.attribute.name {
            case "cloudToken": return .rejected(.invalidAttributeValueLength)
            case "appError": return .rejected(ATTErrorCode(0x85))
            default: return .store
            }
        }
        hooks.inbound = { bytes, connection in
            guard let opcode = bytes.first else { return .drop }
            counters.withLock { $0.opcodes[opcode, default: 0] += 1 }
            if behaviour.silentOn.contains(opcode) { return .drop }
            if behaviour.closeOn.contains(opcode) { return .close(reason: "scripted: close on \(ATTOpcode(rawValue: opcode).name)") }
            // A Write Response with trailing bytes: malformed on purpose.
            if behaviour.garbageOn.contains(opcode) { return .reply([ATTOpcode.writeResponse.rawValue, 0xFF, 0xFF]) }
            switch try? ATTPDU.decode(bytes) {
            case .exchangeMTURequest? where behaviour.mtuNotSupported:
                return .reply(ATTPDU.errorResponse(requestOpcode: .exchangeMTURequest, handle: 0, error: .requestNotSupported).bytes)
            case .writeRequest(let handle, _)?:
                let (received, due) = counters.withLock { c in
                    c.writeRequests += 1
                    if handle == sink { c.sinkWrites += 1 }
                    let due = behaviour.peerRequestEvery.map { c.writeRequests % $0 == 0 } ?? false
                    if due { c.peerRequestsSent += 1 }
                    return (c.writeRequests, due)
                }
                if let limit = behaviour.silentAfterWriteRequests, received > limit { return .drop }
                if behaviour.notificationsBeforeCCCDAnswer > 0, handles.contains(where: { $0.value == handle && $0.key.hasSuffix("CCCD") }) {
                    for i in 0..<behaviour.notificationsBeforeCCCDAnswer { connection.notify(handle: handle - 1, value: [UInt8(i & 0xFF)]) }
                    counters.withLock { $0.notificationsSent += behaviour.notificationsBeforeCCCDAnswer }
                }
                if due { connection.send(.readByTypeRequest(range: ATTHandleRange(start: 1, end: 0xFFFF), type: .deviceName)) }
            case .writeCommand(let handle, let value)?:
                counters.withLock { c in
                    if handle == sink { c.sinkWrites += 1 }
                    c.writeCommands += 1
                    c.writeCommandBytes += value.count
                }
            case .executeWriteRequest(.writeAll)?:
                counters.withLock { $0.executedWrites += 1 }
            case .errorResponse(.readByTypeRequest, _, _)?, .readByTypeResponse?:
                // An answer to the peer's own request (`peerRequestEvery`).
                counters.withLock { $0.peerRequestsAnswered += 1 }
                return .drop
            case .handleValueConfirmation?:
                counters.withLock { $0.confirmations += 1 }
            default: break
            }
            return .serve
        }
        hooks.answered = { pdu, connection in
            // A CCCD written: the configured notifications (or indications, one per confirmation) of the value before it.
            guard case .writeRequest(let handle, let value) = pdu, value.count == 2, let cccd = handles.first(where: { $0.value == handle }),
                  cccd.key.hasSuffix("CCCD"), behaviour.notificationsPerSubscription > 0 else { return }
            let values = (1...behaviour.notificationsPerSubscription).map { behaviour.notificationValue ?? [UInt8(truncatingIfNeeded: $0)] + Array("tick \($0)".utf8) }
            if value.first! & 0x02 != 0 {
                for v in values { connection.indicate(handle: handle - 1, value: v) }
            } else if value.first! & 0x01 != 0 {
                for v in values { connection.notify(handle: handle - 1, value: v) }
                counters.withLockBroadcasting { $0.notificationsSent += values.count }
                if behaviour.closeAfterNotifying { connection.close(reason: "scripted: close after notifying") }
            }
        }
        return hooks
    }
}
