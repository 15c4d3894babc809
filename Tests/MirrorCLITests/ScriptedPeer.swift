// A small scripted ATT server (Core Spec 5.4 Vol 3 Part F §3.4 answered from an attribute table, Part G's
// declarations) on a unix: socket, for running the built `mirror` against: every command and every error form.
import TestSupport
import ATTStack
import Foundation

/// One attribute of the scripted database.
struct PeerAttribute: Sendable {
    var handle: UInt16
    var type: BluetoothUUID
    var value: [UInt8]
    var writable = false
    /// Answer reads with this error code instead of the value.
    var readError: ATTErrorCode?
    /// Answer writes with this error code instead of writing.
    var writeError: ATTErrorCode?
}

/// Builds a GATT database: services, includes, characteristics and descriptors with handles in order.
struct PeerDatabase: Sendable {
    var attributes: [PeerAttribute] = []
    var next: UInt16 = 1
    /// Names for tests: "deviceName" -> value handle.
    var handles: [String: UInt16] = [:]

    @discardableResult
    mutating func service(_ uuid: BluetoothUUID, primary: Bool = true) -> UInt16 {
        add(PeerAttribute(handle: 0, type: primary ? .primaryService : .secondaryService, value: uuid.littleEndianBytes))
    }

    mutating func include(start: UInt16, end: UInt16, uuid: BluetoothUUID) {
        var v = le16(start) + le16(end)
        if let u = uuid.uuid16 { v += le16(u) }
        add(PeerAttribute(handle: 0, type: .include, value: v))
    }

    /// A characteristic declaration and its value; returns the value handle.
    @discardableResult
    mutating func characteristic(_ name: String, _ uuid: BluetoothUUID, properties: UInt8, value: [UInt8],
                                 readError: ATTErrorCode? = nil, writeError: ATTErrorCode? = nil) -> UInt16 {
        let valueHandle = next + 1
        add(PeerAttribute(handle: 0, type: .characteristic, value: [properties] + le16(valueHandle) + uuid.littleEndianBytes))
        add(PeerAttribute(handle: 0, type: uuid, value: value, writable: properties & 0x0C != 0,
                          readError: readError, writeError: writeError))
        handles[name] = valueHandle
        return valueHandle
    }

    @discardableResult
    mutating func descriptor(_ name: String, _ uuid: BluetoothUUID, value: [UInt8], writable: Bool = false) -> UInt16 {
        let h = add(PeerAttribute(handle: 0, type: uuid, value: value, writable: writable))
        handles[name] = h
        return h
    }

    @discardableResult
    mutating func add(_ attribute: PeerAttribute) -> UInt16 {
        var a = attribute
        a.handle = next
        next += 1
        attributes.append(a)
        return a.handle
    }

    func index(of handle: UInt16) -> Int? { attributes.firstIndex { $0.handle == handle } }

    /// The standard test database: Generic Access, a secondary battery service included from a 128-bit
    /// custom service with characteristics for every error form, and a notifying counter.
    static func standard() -> PeerDatabase {
        var db = PeerDatabase()
        db.service(.genericAccess)
        db.characteristic("deviceName", .deviceName, properties: 0x0A, value: Array("Scripted Peer".utf8))
        db.characteristic("appearance", .appearance, properties: 0x02, value: [0x00, 0x00])
        let batteryStart = db.next
        db.service(.batteryService, primary: false)
        db.characteristic("battery", .bit16(0x2A19), properties: 0x12, value: [87])
        db.descriptor("batteryCCCD", .clientCharacteristicConfiguration, value: [0, 0], writable: true)
        let batteryEnd = db.next - 1
        db.service(BluetoothUUID(string: "6e400001-b5a3-f393-e0a9-e50e24dcca9e")!)
        db.include(start: batteryStart, end: batteryEnd, uuid: .batteryService)
        db.characteristic("cloudToken", BluetoothUUID(string: "6e400002-b5a3-f393-e0a9-e50e24dcca9e")!,
                          properties: 0x0A, value: [], writeError: .invalidAttributeValueLength)
        db.descriptor("cloudTokenName", .characteristicUserDescription, value: Array("cloudToken".utf8))
        db.characteristic("secret", BluetoothUUID(string: "6e400003-b5a3-f393-e0a9-e50e24dcca9e")!,
                          properties: 0x02, value: [1], readError: .insufficientAuthentication)
        db.characteristic("appError", BluetoothUUID(string: "6e400004-b5a3-f393-e0a9-e50e24dcca9e")!,
                          properties: 0x0A, value: [0], writeError: ATTErrorCode(0x85))
        db.characteristic("long", BluetoothUUID(string: "6e400005-b5a3-f393-e0a9-e50e24dcca9e")!,
                          properties: 0x0A, value: (0..<300).map { UInt8($0 & 0xFF) })
        db.characteristic("sink", BluetoothUUID(string: "6e400006-b5a3-f393-e0a9-e50e24dcca9e")!,
                          properties: 0x0E, value: [])
        db.characteristic("writeCount", BluetoothUUID(string: "6e400008-b5a3-f393-e0a9-e50e24dcca9e")!,
                          properties: 0x02, value: [0, 0, 0, 0])
        db.characteristic("counter", BluetoothUUID(string: "6e400007-b5a3-f393-e0a9-e50e24dcca9e")!,
                          properties: 0x32, value: [0])
        db.descriptor("counterCCCD", .clientCharacteristicConfiguration, value: [0, 0], writable: true)
        return db
    }
}

func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }

/// The scripted peer: listens at a unix socket path and serves each connection from the database.
final class ScriptedPeer: Sendable {
    /// What the peer does besides answering normally.
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
        /// Close the connection right after sending a subscription's notifications.
        var closeAfterNotifying = false
        /// Every Nth Write Request, the peer sends a request of its own (Read By Type of Device Name, as
        /// bluetoothd's GATT client does) before its Write Response.
        var peerRequestEvery: Int?
        /// Write Requests after this many go unanswered (a peer that stops answering mid-run).
        var silentAfterWriteRequests: Int?
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
    }

    let path: String
    let listener: ATTBearerListener
    let behaviour: Behaviour
    let state: LockedValue<(database: PeerDatabase, counters: Counters)>
    let handles: [String: UInt16]

    init(database: PeerDatabase = .standard(), behaviour: Behaviour = Behaviour()) throws {
        path = NSTemporaryDirectory() + "mirror-cli-peer-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        listener = try ATTBearerListener.unix(path: path)
        self.behaviour = behaviour
        self.handles = database.handles
        state = LockedValue((database, Counters()))
        let thread = Thread { [self] in self.acceptLoop() }
        thread.name = "scripted-peer"
        thread.start()
    }

    /// The TARGET argument for `mirror`.
    var target: String { "unix:\(path)" }
    var counters: Counters { state.withLock { $0.counters } }
    func handle(_ name: String) -> UInt16 { handles[name]! }
    func hexHandle(_ name: String) -> String { String(format: "0x%04X", handle(name)) }

    func value(_ name: String) -> [UInt8] {
        state.withLock { s in s.database.attributes[s.database.index(of: handles[name]!)!].value }
    }

    func close() { listener.close() }

    private func acceptLoop() {
        while true {
            guard let bearer = try? listener.accept() else { return }
            state.withLock { $0.counters.connections += 1 }
            let connection = PeerConnection(peer: self, bearer: bearer)
            bearer.start(connection)
        }
    }
}

/// One connection of the scripted peer; runs on the bearer's reader thread.
final class PeerConnection: ATTTransportSink {
    let peer: ScriptedPeer
    let bearer: ATTBearer
    /// Guards the connection's ATT MTU, the prepare-write queue and pending indications.
    let state = LockedValue<(mtu: Int, prepared: [(UInt16, UInt16, [UInt8])], pendingIndications: [(UInt16, [UInt8])])>((23, [], []))

    init(peer: ScriptedPeer, bearer: ATTBearer) {
        self.peer = peer
        self.bearer = bearer
    }

    func transport(didCloseWith reason: TransportError) {}

    func send(_ pdu: ATTPDU) {
        let bytes = pdu.bytes
        sendRaw(bytes)
    }

    func sendRaw(_ bytes: [UInt8]) {
        let result = bytes.withUnsafeBytes { try? bearer.trySend($0) }
        if result == .wouldBlock {
            bearer.whenWritable { [self] in self.sendRaw(bytes) }
        }
    }

    func error(_ request: ATTOpcode, _ handle: UInt16, _ code: ATTErrorCode) {
        send(.errorResponse(requestOpcode: request, handle: handle, error: code))
    }

    func transport(didReceive bytes: [UInt8]) {
        guard let opcode = bytes.first else { return }
        let behaviour = peer.behaviour
        if behaviour.silentOn.contains(opcode) { return }
        if behaviour.closeOn.contains(opcode) {
            bearer.close(reason: "scripted: close on \(ATTOpcode(rawValue: opcode).name)")
            return
        }
        if behaviour.garbageOn.contains(opcode) {
            sendRaw([0x13, 0xFF, 0xFF]) // a Write Response with trailing bytes: malformed
            return
        }
        guard let pdu = try? ATTPDU.decode(bytes) else {
            error(ATTOpcode(rawValue: opcode), 0, .invalidPDU)
            return
        }
        let mtu = state.withLock { $0.mtu }
        switch pdu {
        case .exchangeMTURequest(let client):
            if behaviour.mtuNotSupported { return error(.exchangeMTURequest, 0, .requestNotSupported) }
            state.withLock { $0.mtu = ATTMTU.negotiated(clientRxMTU: client, serverRxMTU: behaviour.serverRxMTU) }
            send(.exchangeMTUResponse(serverRxMTU: behaviour.serverRxMTU))

        case .readByGroupTypeRequest(let range, let type):
            guard type == .primaryService || type == .secondaryService else {
                return error(.readByGroupTypeRequest, range.start, .unsupportedGroupType)
            }
            let attrs = peer.state.withLock { $0.database.attributes }
            var entries: [(handle: UInt16, endGroup: UInt16, value: [UInt8])] = []
            for (i, a) in attrs.enumerated() where a.type == type && a.handle >= range.start && a.handle <= range.end {
                let end = attrs[(i + 1)...].first { $0.type == .primaryService || $0.type == .secondaryService }
                    .map { $0.handle - 1 } ?? attrs.last!.handle
                if let first = entries.first, first.value.count != a.value.count { break }
                if 2 + (entries.count + 1) * (4 + a.value.count) > mtu { break }
                entries.append((a.handle, end, a.value))
            }
            guard !entries.isEmpty else { return error(.readByGroupTypeRequest, range.start, .attributeNotFound) }
            send(.readByGroupTypeResponse(try! ATTGroupAttributeDataList(entries)))

        case .readByTypeRequest(let range, let type):
            let attrs = peer.state.withLock { $0.database.attributes }
            var entries: [(handle: UInt16, value: [UInt8])] = []
            for a in attrs where a.type == type && a.handle >= range.start && a.handle <= range.end {
                if let e = a.readError {
                    if entries.isEmpty { return error(.readByTypeRequest, a.handle, e) }
                    break
                }
                let value = Array(a.value.prefix(min(mtu - 4, 253)))
                if let first = entries.first, first.value.count != value.count { break }
                if 2 + (entries.count + 1) * (2 + value.count) > mtu { break }
                entries.append((a.handle, value))
            }
            guard !entries.isEmpty else { return error(.readByTypeRequest, range.start, .attributeNotFound) }
            send(.readByTypeResponse(try! ATTAttributeDataList(entries)))

        case .findInformationRequest(let range):
            let attrs = peer.state.withLock { $0.database.attributes }
            var entries: [(handle: UInt16, type: BluetoothUUID)] = []
            for a in attrs where a.handle >= range.start && a.handle <= range.end {
                let short = a.type.uuid16 != nil
                if let first = entries.first, (first.type.uuid16 != nil) != short { break }
                if 2 + (entries.count + 1) * (short ? 4 : 18) > mtu { break }
                entries.append((a.handle, a.type))
            }
            guard !entries.isEmpty else { return error(.findInformationRequest, range.start, .attributeNotFound) }
            send(.findInformationResponse(try! ATTFindInformationList(entries)))

        case .findByTypeValueRequest(let range, let type, let value):
            let attrs = peer.state.withLock { $0.database.attributes }
            var entries: [(found: UInt16, groupEnd: UInt16)] = []
            for (i, a) in attrs.enumerated() where a.type == .bit16(type) && a.handle >= range.start
                && a.handle <= range.end && a.value[...] == value {
                let end = attrs[(i + 1)...].first { $0.type == .primaryService || $0.type == .secondaryService }
                    .map { $0.handle - 1 } ?? attrs.last!.handle
                if 1 + (entries.count + 1) * 4 > mtu { break }
                entries.append((a.handle, end))
            }
            guard !entries.isEmpty else { return error(.findByTypeValueRequest, range.start, .attributeNotFound) }
            send(.findByTypeValueResponse(try! ATTHandlesInformationList(entries)))

        case .readRequest(let handle) where handle == peer.handles["writeCount"]:
            let n = peer.state.withLock { $0.counters.sinkWrites }
            send(.readResponse(value: [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24 & 0xFF)][...]))

        case .readRequest(let handle):
            guard let a = attribute(handle) else { return error(.readRequest, handle, .invalidHandle) }
            if let e = a.readError { return error(.readRequest, handle, e) }
            send(.readResponse(value: a.value.prefix(mtu - 1)))

        case .readBlobRequest(let handle, let offset):
            guard let a = attribute(handle) else { return error(.readBlobRequest, handle, .invalidHandle) }
            if let e = a.readError { return error(.readBlobRequest, handle, e) }
            guard Int(offset) <= a.value.count else { return error(.readBlobRequest, handle, .invalidOffset) }
            send(.readBlobResponse(value: a.value[Int(offset)...].prefix(mtu - 1)))

        case .writeRequest(let handle, let value):
            let sink = peer.handles["sink"]
            let received = peer.state.withLock {
                $0.counters.writeRequests += 1
                if handle == sink { $0.counters.sinkWrites += 1 }
                return $0.counters.writeRequests
            }
            if let limit = behaviour.silentAfterWriteRequests, received > limit { return }
            guard let a = attribute(handle) else { return error(.writeRequest, handle, .invalidHandle) }
            if let e = a.writeError { return error(.writeRequest, handle, e) }
            guard a.writable else { return error(.writeRequest, handle, .writeNotPermitted) }
            store(handle, Array(value))
            if let every = behaviour.peerRequestEvery {
                let due = peer.state.withLock { s in
                    guard s.counters.writeRequests % every == 0 else { return false }
                    s.counters.peerRequestsSent += 1
                    return true
                }
                if due { send(.readByTypeRequest(range: ATTHandleRange(start: 1, end: 0xFFFF), type: .deviceName)) }
            }
            send(.writeResponse)
            if a.type == .clientCharacteristicConfiguration { subscribed(cccd: handle, value: Array(value)) }

        case .writeCommand(let handle, let value):
            let sink = peer.handles["sink"]
            peer.state.withLock {
                if handle == sink { $0.counters.sinkWrites += 1 }
                $0.counters.writeCommands += 1
                $0.counters.writeCommandBytes += value.count
            }
            if let a = attribute(handle), a.writable, a.writeError == nil { store(handle, Array(value)) }

        case .prepareWriteRequest(let handle, let offset, let value):
            guard let a = attribute(handle) else { return error(.prepareWriteRequest, handle, .invalidHandle) }
            if let e = a.writeError { return error(.prepareWriteRequest, handle, e) }
            guard a.writable else { return error(.prepareWriteRequest, handle, .writeNotPermitted) }
            state.withLock { $0.prepared.append((handle, offset, Array(value))) }
            send(.prepareWriteResponse(handle: handle, offset: offset, value: value))

        case .executeWriteRequest(let flags):
            let parts = state.withLock { s in
                defer { s.prepared = [] }
                return s.prepared
            }
            if flags.rawValue == 0x01 {
                var values: [UInt16: [UInt8]] = [:]
                for (handle, offset, value) in parts {
                    var v = values[handle] ?? []
                    guard Int(offset) <= v.count else { return error(.executeWriteRequest, handle, .invalidOffset) }
                    v.replaceSubrange(Int(offset)..<min(v.count, Int(offset) + value.count), with: value)
                    values[handle] = v
                }
                for (handle, value) in values { store(handle, value) }
                peer.state.withLock { $0.counters.executedWrites += 1 }
            }
            send(.executeWriteResponse)

        case .errorResponse(.readByTypeRequest, _, _), .readByTypeResponse:
            // An answer to the peer's own request (`peerRequestEvery`).
            peer.state.withLock { $0.counters.peerRequestsAnswered += 1 }

        case .handleValueConfirmation:
            peer.state.withLock { $0.counters.confirmations += 1 }
            let next: (UInt16, [UInt8])? = state.withLock { s in s.pendingIndications.isEmpty ? nil : s.pendingIndications.removeFirst() }
            if let (handle, value) = next { send(.handleValueIndication(handle: handle, value: value[...])) }

        default:
            if ATTOpcode(rawValue: opcode).isCommand { return }
            error(ATTOpcode(rawValue: opcode), 0, .requestNotSupported)
        }
    }

    func attribute(_ handle: UInt16) -> PeerAttribute? {
        peer.state.withLock { s in s.database.index(of: handle).map { s.database.attributes[$0] } }
    }

    func store(_ handle: UInt16, _ value: [UInt8]) {
        peer.state.withLock { s in
            if let i = s.database.index(of: handle) { s.database.attributes[i].value = value }
        }
    }

    /// A CCCD was written: send the configured notifications (or indications, one per confirmation) of the
    /// characteristic value just before the CCCD.
    func subscribed(cccd: UInt16, value: [UInt8]) {
        let count = peer.behaviour.notificationsPerSubscription
        guard value.count == 2, count > 0 else { return }
        let valueHandle = cccd - 1
        let values = (1...count).map { [UInt8($0)] + Array("tick \($0)".utf8) }
        if value[0] & 0x02 != 0 {
            state.withLock { $0.pendingIndications = values.dropFirst().map { (valueHandle, $0) } }
            send(.handleValueIndication(handle: valueHandle, value: values[0][...]))
        } else if value[0] & 0x01 != 0 {
            for v in values { send(.handleValueNotification(handle: valueHandle, value: v[...])) }
            if peer.behaviour.closeAfterNotifying { bearer.close(reason: "scripted: close after notifying") }
        }
    }
}
