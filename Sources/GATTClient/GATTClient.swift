// GATTClient: the GATT client procedures (Core Specification 5.4, Vol 3, Part G §4) over the ATT transaction
// engine of one bearer. Each procedure is a short sequence of engine requests; no socket, no timer of its own.
import ATTStack
import LinuxBluetooth
import Synchronization

/// A GATT client on one ATT bearer (Core Spec 5.4 Vol 3 Part G §4): MTU exchange, discovery, reads, writes,
/// write without response with flow control, and subscriptions. Every method is safe to call from many tasks;
/// requests go out one at a time in FIFO order (Vol 3 Part F §3.3.2). Every error thrown is a `GATTError`.
public final class GATTClient: Sendable {
    /// How a client behaves. The defaults follow the spec and BlueZ.
    public struct Configuration: Sendable {
        /// The client's Rx MTU sent in Exchange MTU (default 517, the largest useful ATT_MTU).
        public var clientRxMTU: Int = ATTMTU.maximum
        /// The ATT transaction timeout, from the moment a request is written (Vol 3 Part F §3.3.3: 30 s).
        public var transactionTimeout: Duration = .seconds(30)
        /// Where time comes from (tests inject a `ManualClock`).
        public var clock: any GATTClock = MonotonicClock()
        /// How many values each notification stream buffers before it drops (and counts) the newest.
        public var notificationBufferLimit: Int = 1024
        /// Called for what no caller waits for: protocol violations, dropped events, answers to the peer.
        public var events: (@Sendable (GATTClientEvent) -> Void)? = nil
        /// Raises the link's security (the bearer's BT_SECURITY); nil when the transport has no such control.
        public var setSecurityLevel: (@Sendable (GATTSecurityLevel) async throws -> Void)? = nil
        /// The link's security level when the client starts.
        public var initialSecurityLevel: GATTSecurityLevel = .low
        /// On Insufficient Authentication / Encryption / Encryption Key Size, raise the level once and retry
        /// the request once (needs `setSecurityLevel`). Off by default.
        public var retryAfterRaisingSecurity = false
        /// The longest a write without response waits for a send permit when the caller gives no `timeout`
        /// (every wait has a limit; nil: wait until the socket drains or the bearer closes).
        public var permitTimeout: Duration? = .seconds(30)
        /// Exchange MTU as part of `connect` (otherwise call `exchangeMTU()`).
        public var exchangeMTUOnConnect = false

        public init() {}
    }

    let engine: ATTEngine
    let configuration: Configuration
    /// Guards the link's current security level.
    let security: Lock<GATTSecurityLevel>

    init(transport: any ATTTransport, configuration: Configuration) {
        self.configuration = configuration
        self.engine = ATTEngine(
            transport: transport, clock: configuration.clock, timeout: configuration.transactionTimeout,
            clientRxMTU: min(max(configuration.clientRxMTU, ATTMTU.minimumLE), ATTMTU.maximum),
            streamLimit: configuration.notificationBufferLimit, events: configuration.events)
        self.security = Lock(configuration.initialSecurityLevel)
    }

    deinit {
        // The last reference is gone: close the bearer so that nothing waits on a client nobody holds.
        engine.close(reason: "the GATTClient was released")
    }

    /// Starts a client on `transport` (which must not have been started): from this moment every notification and
    /// indication reaches `notifications`, and the peer's requests are answered.
    public static func connect(transport: any ATTTransport, configuration: Configuration = Configuration())
        async throws(GATTError) -> GATTClient
    {
        let client = GATTClient(transport: transport, configuration: configuration)
        client.engine.start()
        if configuration.exchangeMTUOnConnect { _ = try await client.exchangeMTU() }
        return client
    }

    /// The transport's label ("unix:/tmp/sim.sock").
    public var label: String { engine.transport.label }

    /// The ATT_MTU in effect (23 until an Exchange MTU).
    public var mtu: Int { engine.mtu }

    /// The server's Rx MTU from its Exchange MTU Response (Part F §3.4.2.2); nil before the exchange, or when the
    /// peer answered it with an Error Response (Request Not Supported: the ATT_MTU stays 23).
    public var serverRxMTU: Int? { engine.serverRxMTU }

    /// True once the bearer closed (from either side, or after an ATT timeout).
    public var isClosed: Bool { engine.isClosed }

    /// An executor for code that runs requests back to back: inside
    /// `withTaskExecutorPreference(client.bearerExecutor) { ... }` a caller continues on the transport's reader
    /// thread as soon as its response arrives (no pool-thread wake-up). Keep such code short.
    public var bearerExecutor: BearerExecutor { engine.executor }

    /// What the engine dropped or refused so far.
    public var statistics: GATTClientStatistics { engine.statistics }

    /// Every notification and indication of the bearer, in arrival order, from the moment the client started,
    /// before and besides any subscription. One consumer. Ends with `GATTError.disconnected` when the bearer closes.
    public var notifications: GATTNotificationStream { engine.catchAllStream }

    /// Gives a handle a name for error messages and logs ("cloudToken"); nil removes it.
    public func setName(_ name: String?, for handle: UInt16) { engine.setName(name, for: handle) }

    /// The name given to a handle.
    public func name(of handle: UInt16) -> String? { engine.name(of: handle) }

    /// Closes the bearer: every waiting operation fails at once with `GATTError.disconnected` naming `reason`.
    public func close(reason: String = "the client closed the connection") { engine.close(reason: reason) }

    // MARK: - Exchange MTU (Part G §4.3.1)

    /// Exchanges MTU once per connection (Part G §4.3.1) and returns the ATT_MTU. A peer that answers Request
    /// Not Supported keeps 23. A second call sends nothing and returns the MTU in effect.
    @discardableResult
    public func exchangeMTU() async throws(GATTError) -> Int {
        guard engine.markMTUExchanged() else { return engine.mtu }
        let rx = engine.clientRxMTU
        do throws(GATTError) {
            let pdu = try await transact(.exchangeMTURequest(clientRxMTU: UInt16(rx)), handle: nil)
            guard case .exchangeMTUResponse(let serverRx) = pdu else { throw unexpected(pdu, "Exchange MTU Response") }
            let m = ATTMTU.negotiated(clientRxMTU: rx, serverRxMTU: Int(serverRx))
            engine.setMTU(m, serverRxMTU: Int(serverRx))
            return m
        } catch {
            if let a = error.attributeError, a.rejectedBy == .peer, a.code == .requestNotSupported {
                engine.setMTU(ATTMTU.minimumLE, serverRxMTU: nil)
                return ATTMTU.minimumLE
            }
            throw error
        }
    }

    // MARK: - Discovery (Part G §4.4-§4.7)

    /// Discover All Primary Services (Part G §4.4.1): Read By Group Type of 0x2800 over the whole handle range.
    public func discoverAllPrimaryServices() async throws(GATTError) -> [GATTService] {
        var out: [GATTService] = []
        var start: UInt16 = 0x0001
        while true {
            let pdu: ATTPDU
            do {
                pdu = try await transact(.readByGroupTypeRequest(range: ATTHandleRange(start: start, end: 0xFFFF),
                                                                 type: .primaryService), handle: start)
            } catch {
                if isAttributeNotFound(error) { break }
                throw error
            }
            guard case .readByGroupTypeResponse(let list) = pdu, !list.isEmpty else {
                throw unexpected(pdu, "a non-empty Read By Group Type Response")
            }
            var last: UInt16 = 0
            for e in list {
                guard e.handle >= start, e.endGroup >= e.handle, e.handle > last else {
                    throw backwards(pdu, "service at \(ATTHex.handle(e.handle))-\(ATTHex.handle(e.endGroup)) while discovering from \(ATTHex.handle(start))")
                }
                guard let uuid = BluetoothUUID(littleEndian: e.value) else {
                    throw unexpected(pdu, "a 2- or 16-byte service UUID at \(ATTHex.handle(e.handle))")
                }
                out.append(GATTService(uuid: uuid, startHandle: e.handle, endHandle: e.endGroup))
                last = e.endGroup
            }
            if last == 0xFFFF { break }
            start = last + 1
        }
        return out
    }

    /// Discover Primary Service by Service UUID (Part G §4.4.2): Find By Type Value of 0x2800 with the UUID.
    public func discoverPrimaryServices(uuid: BluetoothUUID) async throws(GATTError) -> [GATTService] {
        var out: [GATTService] = []
        var start: UInt16 = 0x0001
        let value = uuid.littleEndianBytes
        while true {
            let pdu: ATTPDU
            do {
                pdu = try await transact(.findByTypeValueRequest(range: ATTHandleRange(start: start, end: 0xFFFF),
                                                                 type: 0x2800, value: value[...]), handle: start)
            } catch {
                if isAttributeNotFound(error) { break }
                throw error
            }
            guard case .findByTypeValueResponse(let list) = pdu, !list.isEmpty else {
                throw unexpected(pdu, "a non-empty Find By Type Value Response")
            }
            var last: UInt16 = 0
            for e in list {
                guard e.found >= start, e.groupEnd >= e.found, e.found > last else {
                    throw backwards(pdu, "service at \(ATTHex.handle(e.found))-\(ATTHex.handle(e.groupEnd)) while discovering from \(ATTHex.handle(start))")
                }
                out.append(GATTService(uuid: uuid, startHandle: e.found, endHandle: e.groupEnd))
                last = e.groupEnd
            }
            if last == 0xFFFF { break }
            start = last + 1
        }
        return out
    }

    /// Find Included Services (Part G §4.5.1): Read By Type of 0x2802 within the service; a 128-bit included
    /// service's UUID is read from its declaration with a Read Request.
    public func discoverIncludedServices(of service: GATTService) async throws(GATTError) -> [GATTIncludedService] {
        var out: [GATTIncludedService] = []
        try await readByTypeLoop(range: service.range, type: .include) { (pdu, handle, value) throws(GATTError) in
            guard value.count == 6 || value.count == 4 else {
                throw unexpected(pdu, "a 4- or 6-byte include declaration value at \(ATTHex.handle(handle))")
            }
            let s = UInt16(value[value.startIndex]) | UInt16(value[value.startIndex + 1]) << 8
            let e = UInt16(value[value.startIndex + 2]) | UInt16(value[value.startIndex + 3]) << 8
            if value.count == 6 {
                out.append(GATTIncludedService(declarationHandle: handle, startHandle: s, endHandle: e,
                                               uuid: BluetoothUUID(littleEndian: value.suffix(2))!))
            } else {
                out.append(GATTIncludedService(declarationHandle: handle, startHandle: s, endHandle: e,
                                               uuid: .bit16(0)))
            }
        }
        for i in out.indices where out[i].uuid == .bit16(0) {
            let raw = try await read(handle: out[i].startHandle)
            guard raw.count == 16, let uuid = BluetoothUUID(littleEndian: raw) else {
                throw .protocolViolation(GATTProtocolViolation(
                    received: raw, expected: "a 16-byte service UUID at \(ATTHex.handle(out[i].startHandle))",
                    problem: "an included service declaration of \(raw.count) bytes"))
            }
            out[i].uuid = uuid
        }
        return out
    }

    /// Discover All Characteristics of a Service (Part G §4.6.1): Read By Type of 0x2803 within the service.
    public func discoverCharacteristics(of service: GATTService) async throws(GATTError) -> [GATTCharacteristic] {
        try await discoverCharacteristics(in: service.range)
    }

    /// Discover Characteristics by UUID (Part G §4.6.2): the same requests, keeping the characteristics of `uuid`.
    public func discoverCharacteristics(of service: GATTService, uuid: BluetoothUUID) async throws(GATTError) -> [GATTCharacteristic] {
        try await discoverCharacteristics(in: service.range).filter { $0.uuid == uuid }
    }

    /// Discover All Characteristics in a handle range (Part G §4.6.1).
    public func discoverCharacteristics(in range: ATTHandleRange) async throws(GATTError) -> [GATTCharacteristic] {
        var out: [GATTCharacteristic] = []
        try await readByTypeLoop(range: range, type: .characteristic) { (pdu, handle, value) throws(GATTError) in
            guard value.count == 5 || value.count == 19 else {
                throw unexpected(pdu, "a 5- or 19-byte characteristic declaration value at \(ATTHex.handle(handle))")
            }
            let b = value.startIndex
            let props = GATTCharacteristicProperties(rawValue: value[b])
            let valueHandle = UInt16(value[b + 1]) | UInt16(value[b + 2]) << 8
            guard valueHandle > handle else {
                throw backwards(pdu, "characteristic declared at \(ATTHex.handle(handle)) with its value at \(ATTHex.handle(valueHandle))")
            }
            let uuid = BluetoothUUID(littleEndian: value[(b + 3)...])!
            out.append(GATTCharacteristic(uuid: uuid, declarationHandle: handle, valueHandle: valueHandle,
                                          properties: props, endHandle: range.end))
        }
        for i in out.indices.dropLast() { out[i].endHandle = out[i + 1].declarationHandle - 1 }
        return out
    }

    /// Discover All Characteristic Descriptors (Part G §4.7.1): Find Information after the value handle, up to the
    /// characteristic's end.
    public func discoverDescriptors(of characteristic: GATTCharacteristic) async throws(GATTError) -> [GATTDescriptor] {
        guard characteristic.valueHandle < characteristic.endHandle else { return [] }
        return try await discoverDescriptors(in: ATTHandleRange(start: characteristic.valueHandle + 1, end: characteristic.endHandle))
    }

    /// Find Information over a handle range (Part G §4.7.1).
    public func discoverDescriptors(in range: ATTHandleRange) async throws(GATTError) -> [GATTDescriptor] {
        var out: [GATTDescriptor] = []
        var start = range.start
        while start <= range.end {
            let pdu: ATTPDU
            do {
                pdu = try await transact(.findInformationRequest(ATTHandleRange(start: start, end: range.end)), handle: start)
            } catch {
                if isAttributeNotFound(error) { break }
                throw error
            }
            guard case .findInformationResponse(let list) = pdu, !list.isEmpty else {
                throw unexpected(pdu, "a non-empty Find Information Response")
            }
            var last: UInt16 = 0
            for e in list {
                guard e.handle >= start, e.handle <= range.end, e.handle > last else {
                    throw backwards(pdu, "descriptor at \(ATTHex.handle(e.handle)) while discovering \(ATTHex.handle(start))-\(ATTHex.handle(range.end))")
                }
                out.append(GATTDescriptor(handle: e.handle, uuid: e.type))
                last = e.handle
            }
            if last >= range.end || last == 0xFFFF { break }
            start = last + 1
        }
        return out
    }

    /// The whole database: every primary service with its included services, characteristics and descriptors.
    public func discoverAll() async throws(GATTError) -> [GATTService] {
        var services = try await discoverAllPrimaryServices()
        for i in services.indices {
            services[i].includedServices = try await discoverIncludedServices(of: services[i])
            var chars = try await discoverCharacteristics(of: services[i])
            for j in chars.indices {
                chars[j].descriptors = try await discoverDescriptors(of: chars[j])
            }
            services[i].characteristics = chars
        }
        return services
    }

    // MARK: - Reads (Part G §4.8)

    /// Read Characteristic Value (Part G §4.8.1): one Read Request (at most MTU-1 bytes).
    public func read(handle: UInt16) async throws(GATTError) -> [UInt8] {
        let pdu = try await transact(.readRequest(handle: handle), handle: handle)
        guard case .readResponse(let value) = pdu else { throw unexpected(pdu, "Read Response") }
        return Array(value)
    }

    /// Read Long Characteristic Value (Part G §4.8.3): a Read Request, then Read Blob while the part filled MTU-1
    /// bytes; stops at 512 bytes, or on Attribute Not Long / Invalid Offset at an exact part boundary.
    public func readLong(handle: UInt16) async throws(GATTError) -> [UInt8] {
        var value = try await read(handle: handle)
        if value.count > ATTMTU.maximumAttributeValue {
            // Core Spec 5.4 Vol 3 Part F §3.2.9: no attribute value is longer than 512 bytes.
            throw violation([ATTOpcode.readResponse.rawValue] + value, "a Read Response of at most 512 value bytes",
                            "a Read Response of \(value.count) value bytes, past the 512-byte maximum of an attribute value")
        }
        while value.count < ATTMTU.maximumAttributeValue {
            let part = ATTMTU.readBlobPartBudget(mtu)
            guard value.count % part == 0, !value.isEmpty else { break }
            let pdu: ATTPDU
            do {
                pdu = try await transact(.readBlobRequest(handle: handle, offset: UInt16(value.count)), handle: handle)
            } catch {
                if let a = error.attributeError, a.rejectedBy == .peer,
                   a.code == .attributeNotLong || a.code == .invalidOffset { break }
                throw error
            }
            guard case .readBlobResponse(let blob) = pdu else { throw unexpected(pdu, "Read Blob Response") }
            value += blob
            if value.count > ATTMTU.maximumAttributeValue {
                // Core Spec 5.4 Vol 3 Part F §3.2.9: no attribute value is longer than 512 bytes.
                throw violation(pdu.bytes, "at most \(ATTMTU.maximumAttributeValue - value.count + blob.count) more bytes of handle \(ATTHex.handle(handle))",
                                "a Read Blob Response at offset \(value.count - blob.count) that takes the value to \(value.count) bytes, past the 512-byte maximum of an attribute value")
            }
            if blob.count < part { break }
        }
        return value
    }

    /// Read Using Characteristic UUID (Part G §4.8.2): Read By Type over `range`, repeated past the last handle
    /// returned until Attribute Not Found or the range's end. Each value is at most MTU-4 bytes.
    public func read(uuid: BluetoothUUID, in range: ATTHandleRange = .all) async throws(GATTError) -> [(handle: UInt16, value: [UInt8])] {
        var out: [(handle: UInt16, value: [UInt8])] = []
        try await readByTypeLoop(range: range, type: uuid) { (_, handle, value) throws(GATTError) in
            out.append((handle, Array(value)))
        }
        return out
    }

    /// Read Multiple Characteristic Values (Part G §4.8.4): the values concatenated, as the server sends them.
    public func readMultiple(handles: [UInt16]) async throws(GATTError) -> [UInt8] {
        let list: ATTHandleList
        do { list = try ATTHandleList(handles) } catch {
            throw .unsupported("Read Multiple needs at least 2 non-zero handles: \(error)")
        }
        let pdu = try await transact(.readMultipleRequest(list), handle: handles.first)
        guard case .readMultipleResponse(let values) = pdu else { throw unexpected(pdu, "Read Multiple Response") }
        return Array(values)
    }

    /// Read Multiple Variable Length Characteristic Values (Part G §4.8.5): one value per handle.
    public func readMultipleVariable(handles: [UInt16]) async throws(GATTError) -> [[UInt8]] {
        let list: ATTHandleList
        do { list = try ATTHandleList(handles) } catch {
            throw .unsupported("Read Multiple Variable needs at least 2 non-zero handles: \(error)")
        }
        let pdu = try await transact(.readMultipleVariableRequest(list), handle: handles.first)
        guard case .readMultipleVariableResponse(let values) = pdu else {
            throw unexpected(pdu, "Read Multiple Variable Response")
        }
        return values.map { Array($0) }
    }

    // MARK: - Writes (Part G §4.9)

    /// The value budget of one Write Request or Write Command: MTU-3, and never more than 512.
    public var writeValueBudget: Int { ATTMTU.writeValueLimit(mtu) }

    /// Write Characteristic Value (Part G §4.9.3): one Write Request. A value over MTU-3 bytes is refused locally
    /// (nothing is sent): use `writeLong`.
    nonisolated(nonsending) public func write(handle: UInt16, value: [UInt8]) async throws(GATTError) {
        let m = mtu
        let budget = ATTMTU.writeValueLimit(m)
        guard value.count <= budget else {
            throw localLimit(.writeRequest, handle: handle, length: value.count, budget: budget, mtu: m)
        }
        // The codec encodes the request; the engine decodes the answer (a well-formed Write Response comes back).
        let request = try engine.encode(request: .writeRequest(handle: handle, value: value[...]), handle: handle)
        if canRetryAfterRaisingSecurity {
            _ = try await withSecurityRetry { () async throws(GATTError) -> ATTPDU in
                try await engine.request(request, handle: handle, valueLength: value.count, budget: budget)
            }
        } else {
            // The hot path (no security retry configured): one call less, one executor check less per request.
            _ = try await engine.request(request, handle: handle, valueLength: value.count, budget: budget)
        }
    }

    /// Write Long Characteristic Values (Part G §4.9.4): Prepare Write parts of MTU-5 bytes, then Execute Write.
    /// On an error the queue is cancelled (Execute Write 0x00) and the first error is reported.
    public func writeLong(handle: UInt16, value: [UInt8]) async throws(GATTError) {
        try await writeQueued([(handle, value)], compareEchoes: false)
    }

    /// Reliable Writes (Part G §4.9.5): every part's echo is compared with what was sent; on a mismatch or an error
    /// the queue is cancelled (Execute Write 0x00) and the first problem is reported; otherwise Execute Write 0x01.
    public func writeReliable(_ writes: [(handle: UInt16, value: [UInt8])]) async throws(GATTError) {
        try await writeQueued(writes, compareEchoes: true)
    }

    /// Write Without Response (Part G §4.9.1) with flow control: sends exactly one Write Command when the socket
    /// has room, otherwise waits in FIFO order for a permit, at most `timeout` (default: the configuration's
    /// `permitTimeout`). Never drops or cuts a value; a value over MTU-3 bytes is refused locally.
    /// Runs on the caller's executor (no hop to the global executor and back): the fast path takes no suspension.
    nonisolated(nonsending) public func writeWithoutResponse(handle: UInt16, value: [UInt8], timeout: Duration? = nil) async throws(GATTError) {
        // A view of the caller's value: the codec encodes it at the send, on the stack (no copy, no allocation).
        let command = ATTPDU.writeCommand(handle: handle, value: value[...])
        switch try engine.trySendCommandFast(command, handle: handle, valueLength: value.count) {
        case .sent: return
        case .tooLong(let m, let budget):
            throw localLimit(.writeCommand, handle: handle, length: value.count, budget: budget, mtu: m)
        case .mustWait: break
        }
        try await engine.waitForPermit(command, handle: handle, limit: timeout ?? configuration.permitTimeout)
    }

    // MARK: - Subscriptions (Part G §4.10, §4.11)

    /// Subscribes by handles: arms the stream, writes `mode` to the CCCD at `cccdHandle`, then (when `readValue`)
    /// reads the value. On a failure the stream is finished and the error thrown.
    public func subscribe(valueHandle: UInt16, cccdHandle: UInt16, mode: GATTSubscriptionMode = .notify,
                          readValue: Bool = true) async throws(GATTError)
        -> (value: [UInt8]?, notifications: GATTNotificationStream)
    {
        let (stream, sink) = try engine.addSubscriber(handle: valueHandle)
        do {
            let bits = mode.rawValue
            try await write(handle: cccdHandle, value: [UInt8(bits & 0xFF), UInt8(bits >> 8)])
            let value: [UInt8]? = readValue ? try await readLong(handle: valueHandle) : nil
            return (value, stream)
        } catch {
            sink.continuation.finish(throwing: error)
            engine.removeSubscriber(sink)
            throw error
        }
    }

    /// Writes 0x0000 to the CCCD (the server stops pushing) and ends the handle's streams.
    public func unsubscribe(valueHandle: UInt16, cccdHandle: UInt16) async throws(GATTError) {
        try await write(handle: cccdHandle, value: [0, 0])
        engine.finishSubscribers(handle: valueHandle)
    }

    /// Unsubscribes from a characteristic whose CCCD was discovered.
    public func unsubscribe(from characteristic: GATTCharacteristic) async throws(GATTError) {
        var cccd = characteristic.cccd
        if cccd == nil { cccd = try await discoverDescriptors(of: characteristic).first { $0.isCCCD } }
        guard let cccd else {
            throw .unsupported("characteristic \(characteristic.uuid) has no Client Characteristic Configuration descriptor")
        }
        try await unsubscribe(valueHandle: characteristic.valueHandle, cccdHandle: cccd.handle)
    }

    // MARK: - Security

    /// The link's security level as this client last set it.
    public var securityLevel: GATTSecurityLevel { security.withLock { $0 } }

    /// Raises (or sets) the link's security level through `Configuration.setSecurityLevel` (the bearer's BT_SECURITY).
    public func setSecurityLevel(_ level: GATTSecurityLevel) async throws(GATTError) {
        guard let hook = configuration.setSecurityLevel else {
            throw .unsupported("this transport (\(label)) cannot change the link's security level")
        }
        do {
            try await hook(level)
        } catch {
            throw GATTError.from(error, operation: "setting the link's security level to \(level)")
        }
        security.withLock { $0 = level }
    }

    /// True when an Insufficient Authentication / Encryption error can be retried after raising the security level.
    var canRetryAfterRaisingSecurity: Bool { configuration.retryAfterRaisingSecurity && configuration.setSecurityLevel != nil }

    /// Runs `body` and, on Insufficient Authentication / Encryption / Encryption Key Size from the peer, raises the
    /// level once and retries once (when `retryAfterRaisingSecurity` and a security hook are configured).
    nonisolated(nonsending) func withSecurityRetry<T: Sendable>(_ body: nonisolated(nonsending) () async throws(GATTError) -> T) async throws(GATTError) -> T {
        do {
            return try await body()
        } catch {
            guard canRetryAfterRaisingSecurity, let a = error.attributeError, a.rejectedBy == .peer else { throw error }
            let current = securityLevel
            let target: GATTSecurityLevel
            switch a.code {
            case .insufficientEncryption, .encryptionKeySizeTooShort:
                guard current < .medium else { throw error }
                target = .medium
            case .insufficientAuthentication:
                if current < .medium { target = .medium } else if current < .high { target = .high } else { throw error }
            default:
                throw error
            }
            try await setSecurityLevel(target)
            return try await retryWhilePairing(after: target, body)
        }
    }

    /// How many sends that fail with ENOTCONN right after a raise are retried, each after a wait for POLLOUT.
    static let pairingSendRetries = 3

    /// The retry after raising the security level. While the pairing that BT_SECURITY started runs, the kernel keeps
    /// the socket in BT_CONFIG: sends fail with ENOTCONN and POLLOUT does not come until the link is encrypted (or
    /// lost). So a send that fails with ENOTCONN here waits for POLLOUT, at most the transaction timeout (named), and
    /// goes again, at most `pairingSendRetries` times; any other outcome is the caller's.
    nonisolated(nonsending) func retryWhilePairing<T: Sendable>(after level: GATTSecurityLevel, _ body: nonisolated(nonsending) () async throws(GATTError) -> T) async throws(GATTError) -> T {
        var retries = 0
        while true {
            do {
                return try await body()
            } catch {
                guard error.isNotConnectedSend, retries < Self.pairingSendRetries else { throw error }
                retries += 1
                try await waitForTheLink(after: level)
            }
        }
    }

    /// Waits for POLLOUT on the transport after a raise to `level`: the link takes data again once pairing is
    /// done (or the wake-up shows the link lost, which the next send reports). Bounded by the transaction timeout.
    func waitForTheLink(after level: GATTSecurityLevel) async throws(GATTError) {
        let what = "the link to take data again after raising security to \(level) (pairing)"
        let limit = configuration.transactionTimeout
        let clock = configuration.clock
        let once = OnceBox<Void>()
        let timeout = GATTError.timeout(GATTTimeoutError(waitingFor: what, after: limit))
        let wakeup = clock.schedule(at: clock.now().advanced(by: limit)) { once.finish(.failure(timeout)) }
        defer { wakeup.cancel() }
        engine.transport.whenWritable { once.finish(.success(())) }
        do {
            try await once.value()
        } catch {
            throw GATTError.from(error, operation: "waiting for \(what)")
        }
    }

    // MARK: - helpers

    /// Sends one request PDU and returns its success response, decoded once by the engine's inbound router.
    func transact(_ request: ATTPDU, handle: UInt16?, valueLength: Int? = nil, budget: Int? = nil,
                  ignoresCancellation: Bool = false) async throws(GATTError) -> ATTPDU {
        let encoded = try engine.encode(request: request, handle: handle)
        return try await withSecurityRetry { () async throws(GATTError) -> ATTPDU in
            try await engine.request(encoded, handle: handle, valueLength: valueLength,
                                     budget: budget, ignoresCancellation: ignoresCancellation)
        }
    }

    /// Read By Type over `range`, continuing after the last handle, until Attribute Not Found or the range's end.
    private func readByTypeLoop(range: ATTHandleRange, type: BluetoothUUID,
                                _ each: (ATTPDU, UInt16, ArraySlice<UInt8>) throws(GATTError) -> Void) async throws(GATTError) {
        var start = range.start
        while start <= range.end {
            let pdu: ATTPDU
            do {
                pdu = try await transact(.readByTypeRequest(range: ATTHandleRange(start: start, end: range.end), type: type),
                                         handle: start)
            } catch {
                if isAttributeNotFound(error) { return }
                throw error
            }
            guard case .readByTypeResponse(let list) = pdu, !list.isEmpty else {
                throw unexpected(pdu, "a non-empty Read By Type Response")
            }
            var last: UInt16 = 0
            for e in list {
                guard e.handle >= start, e.handle <= range.end, e.handle > last else {
                    throw backwards(pdu, "attribute at \(ATTHex.handle(e.handle)) while reading \(ATTHex.handle(start))-\(ATTHex.handle(range.end))")
                }
                try each(pdu, e.handle, e.value)
                last = e.handle
            }
            if last >= range.end || last == 0xFFFF { return }
            start = last + 1
        }
    }

    /// Prepare Write every part of every value, then Execute Write; cancel the queue on any problem.
    private func writeQueued(_ writes: [(handle: UInt16, value: [UInt8])], compareEchoes: Bool) async throws(GATTError) {
        let m = mtu
        let part = ATTMTU.prepareWritePartBudget(m)
        for w in writes where w.value.count > ATTMTU.maximumAttributeValue {
            throw localLimit(.prepareWriteRequest, handle: w.handle, length: w.value.count,
                             budget: ATTMTU.maximumAttributeValue, mtu: m)
        }
        var prepared = false
        do throws(GATTError) {
            for w in writes {
                var offset = 0
                repeat {
                    let end = min(offset + part, w.value.count)
                    let chunk = w.value[offset..<end]
                    let request = ATTPDU.prepareWriteRequest(handle: w.handle, offset: UInt16(offset), value: chunk)
                    prepared = true
                    let pdu = try await transact(request, handle: w.handle, valueLength: w.value.count,
                                                 budget: ATTMTU.maximumAttributeValue)
                    guard case .prepareWriteResponse(let h, let o, let echo) = pdu else {
                        throw unexpected(pdu, "Prepare Write Response")
                    }
                    if compareEchoes && (h != w.handle || Int(o) != offset || !echo.elementsEqual(chunk)) {
                        throw violation(pdu.bytes,
                                        "Prepare Write Response echoing handle \(ATTHex.handle(w.handle)) offset \(offset) [\(ATTHex.string(chunk, separator: " ", uppercase: true))]",
                                        "the echo of a reliable write differs from what was sent")
                    }
                    offset = end
                } while offset < w.value.count
            }
        } catch {
            if prepared && !engine.isClosed {
                _ = try? await transact(.executeWriteRequest(flags: .cancelAll), handle: writes.first?.handle,
                                        ignoresCancellation: true)
            }
            throw error
        }
        let pdu = try await transact(.executeWriteRequest(flags: .writeAll), handle: writes.first?.handle)
        guard case .executeWriteResponse = pdu else { throw unexpected(pdu, "Execute Write Response") }
    }

    private func isAttributeNotFound(_ e: GATTError) -> Bool {
        guard let a = e.attributeError else { return false }
        return a.rejectedBy == .peer && a.code == .attributeNotFound
    }

    func handleText(_ h: UInt16) -> String {
        name(of: h).map { "handle \(ATTHex.handle(h)) (\($0))" } ?? "handle \(ATTHex.handle(h))"
    }

    private func localLimit(_ op: ATTOpcode, handle: UInt16, length: Int, budget: Int, mtu: Int) -> GATTError {
        .attribute(GATTAttributeError(code: .invalidAttributeValueLength, requestOpcode: op, handle: handle,
                                      handleName: name(of: handle), rejectedBy: .local, valueLength: length,
                                      budget: budget, mtu: mtu))
    }

    private func unexpected(_ pdu: ATTPDU, _ expected: String) -> GATTError {
        violation(pdu.bytes, expected, "a \(pdu.opcode.name) that is not \(expected): \(pdu)")
    }

    private func backwards(_ pdu: ATTPDU, _ what: String) -> GATTError {
        violation(pdu.bytes, "handles that only go forward", "a handle going backwards or out of range: \(what)")
    }

    private func violation(_ bytes: [UInt8], _ expected: String, _ problem: String) -> GATTError {
        let v = GATTProtocolViolation(received: bytes, expected: expected, problem: problem)
        engine.recordViolation(v, failed: nil)
        return .protocolViolation(v)
    }
}

extension GATTClient.Configuration {
    /// Wires `setSecurityLevel` to the bearer's BT_SECURITY socket option (Core Spec 5.4 Vol 3 Part C §10.2) and
    /// starts from the level the socket reports. Pair with `retryAfterRaisingSecurity` for the single retry on
    /// Insufficient Authentication / Encryption.
    public mutating func useSecurity(of bearer: ATTBearer) {
        setSecurityLevel = { level in
            guard let bt = BTSecurityLevel(rawValue: UInt8(level.rawValue)) else { return }
            try bearer.setSecurityLevel(bt)
        }
        if let current = try? bearer.securityLevel(), let level = GATTSecurityLevel(rawValue: Int(current.rawValue)) {
            initialSecurityLevel = level
        }
    }
}
