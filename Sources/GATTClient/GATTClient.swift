// GATTClient: the GATT client procedures (Core Specification 5.4, Vol 3, Part G §4) over the ATT transaction
// engine of one bearer. Each procedure is a short sequence of engine requests; no socket, no timer of its own.
import ATTStack
import LinkCore
import Synchronization
import GATTVocabulary

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
        public var setSecurityLevel: (@Sendable (BTSecurityLevel) async throws -> Void)? = nil
        /// The link's security level when the client starts.
        public var initialSecurityLevel: BTSecurityLevel = .low
        /// On Insufficient Authentication / Encryption / Encryption Key Size, raise the level once and retry
        /// the request once (needs `setSecurityLevel`). Off by default.
        public var retryAfterRaisingSecurity = false
        /// The highest level a raise may ask for (nil: any). Above it the peer's error goes to the caller: with a bond's
        /// unauthenticated key and no agent here, a raise to high starts a MITM pairing nobody answers (Vol 3 Part H §2.3.5.1).
        public var raiseLimit: BTSecurityLevel? = nil
        /// The longest a write without response waits for a send permit when the caller gives no `timeout`
        /// (every wait has a limit; nil: wait until the socket drains or the bearer closes).
        public var permitTimeout: Duration? = .seconds(30)
        /// Exchange MTU as part of `connect` (otherwise call `exchangeMTU()`).
        public var exchangeMTUOnConnect = false

        public init() {}
    }

    /// The unenhanced bearer's engine (CID 4, or the one transport a client starts on): the notification path.
    let engine: ATTEngine
    /// The Enhanced ATT bearers' engines, in the order they were added (Vol 3 Part F §3.2.11).
    let enhanced = Lock<[ATTEngine]>([])
    /// How many enhanced bearers were added: zero keeps every request on `engine` without taking `enhanced`'s lock.
    let enhancedCount = Atomic<Int>(0)
    let configuration: Configuration
    /// Guards the link's current security level.
    /// The link's security level as this client last set it, and how many raises it has started (a request that was
    /// in flight across one retries after it instead of raising again).
    let security: Lock<(level: BTSecurityLevel, raises: Int)>
    /// Guards the Client Supported Features bits asked for and those the server took (GATTClient+Features.swift).
    let clientFeatures = Lock<(asked: GATTClientFeatures, written: GATTClientFeatures)>(([], []))

    init(transport: any ATTTransport, configuration: Configuration) throws(GATTError) {
        self.configuration = configuration
        do throws(TransportError) {
            self.engine = try ATTEngine(
            transport: transport, clock: configuration.clock, timeout: configuration.transactionTimeout,
            clientRxMTU: min(max(configuration.clientRxMTU, ATTMTU.minimumLE), ATTMTU.maximum),
            streamLimit: configuration.notificationBufferLimit, events: configuration.events)
        } catch {
            throw GATTError.sendFailure(error, operation: "starting the client's event loop")
        }
        self.security = Lock((configuration.initialSecurityLevel, 0))
    }

    deinit {
        // The last reference is gone: close the bearers so that nothing waits on a client nobody holds.
        closeAll(reason: "the GATTClient was released")
    }

    /// Starts a client on `transport` (which must not have been started): from this moment every notification and
    /// indication reaches `notifications`, and the peer's requests are answered.
    public static func connect(transport: any ATTTransport, configuration: Configuration = Configuration())
        async throws(GATTError) -> GATTClient
    {
        let client = try GATTClient(transport: transport, configuration: configuration)
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

    /// The link's event loop, a TaskExecutor: inside `withTaskExecutorPreference(client.eventLoop) { ... }` a task
    /// submits its requests on the loop's thread and continues there as soon as each response has been read (no
    /// thread hop, no signal). Code that blocks its thread (a semaphore, a blocking read) must not run there.
    public var eventLoop: EventLoop { engine.loop }

    /// A public async method's body, run with the link's loop as the task's executor (`withLinkLoop`): at once when
    /// the task runs there already, else one hop in and one back. So no `loop.sync` is reached from async code.
    func onLinkLoop<T: Sendable>(_ body: () async throws(GATTError) -> T) async throws(GATTError) -> T {
        if eventLoop.inEventLoop { return try await body() }
        return try await withLinkLoop(eventLoop, body)
    }

    /// `eventLoop` (the name earlier versions gave the executor for back-to-back requests).
    public var bearerExecutor: EventLoop { engine.loop }

    /// What the engines dropped or refused so far, summed over every bearer: asked of each bearer's loop (no thread
    /// waits for a loop).
    public var statistics: GATTClientStatistics {
        get async {
            var total = await engine.statistics
            guard enhancedCount.load(ordering: .acquiring) > 0 else { return total }
            for e in enhanced.withLock({ $0 }) { total = total.adding(await e.statistics) }
            return total
        }
    }

    /// Every notification and indication of the bearer, in arrival order, from the moment the client started,
    /// before and besides any subscription. One consumer. Ends with `GATTError.disconnected` when the bearer closes.
    public var notifications: GATTNotificationStream { engine.catchAllStream }

    /// A catch-all stream of its own: every notification and indication from now on, in arrival order, until its
    /// consumer ends it (a cancelled iteration) or the bearer closes. For a consumer that comes and goes (`mirror
    /// shell`'s listen), where `notifications`, once ended by its consumer, stays ended.
    public func notificationStream() throws(GATTError) -> GATTNotificationStream { try engine.addWatcher() }

    /// Gives a handle a name for error messages and logs ("cloudToken"); nil removes it.
    public func setName(_ name: String?, for handle: UInt16) { engine.setName(name, for: handle) }

    /// The name given to a handle.
    public func name(of handle: UInt16) -> String? { engine.name(of: handle) }

    /// Closes the bearer: every waiting operation fails at once with `GATTError.disconnected` naming `reason`.
    public func close(reason: String = "the client closed the connection") { closeAll(reason: reason) }

    /// The unenhanced bearer first, so that requests queued on an enhanced one fail at once instead of moving.
    func closeAll(reason: String) {
        engine.close(reason: reason)
        for e in enhanced.withLock({ $0 }) { e.close(reason: reason) }
    }

    // MARK: - Exchange MTU (Part G §4.3.1)

    /// Exchanges MTU once per connection (Part G §4.3.1) and returns the ATT_MTU. A peer that answers Request
    /// Not Supported keeps 23. A second call sends nothing and returns the MTU in effect.
    @discardableResult
    public func exchangeMTU() async throws(GATTError) -> Int {
        try await onLinkLoop { () async throws(GATTError) -> Int in
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
    }

    // MARK: - helpers

    /// Sends one request PDU and returns its success response, decoded once by the engine's inbound router.
    /// `on` pins a bearer (a Prepare Write queue stays on one, Part G §4.9.4); otherwise the least busy one.
    func transact(_ request: ATTPDU, handle: UInt16?, valueLength: Int? = nil, budget: Int? = nil,
                  ignoresCancellation: Bool = false, on pinned: ATTEngine? = nil) async throws(GATTError) -> ATTPDU {
        let bearer = pinned ?? engine
        let pick = pinned == nil && picksBearer
        let encoded = try bearer.encode(request: request, handle: handle)
        return try await withSecurityRetry { () async throws(GATTError) -> ATTPDU in
            try await bearer.request(encoded, handle: handle, valueLength: valueLength,
                                     budget: budget, ignoresCancellation: ignoresCancellation, pick: pick)
        }
    }

    func isAttributeNotFound(_ e: GATTError) -> Bool {
        guard let a = e.attributeError else { return false }
        return a.rejectedBy == .peer && a.code == .attributeNotFound
    }

    func handleText(_ h: UInt16) -> String {
        name(of: h).map { "handle \(ATTHex.handle(h)) (\($0))" } ?? "handle \(ATTHex.handle(h))"
    }

    func localLimit(_ op: ATTOpcode, handle: UInt16, length: Int, budget: Int, mtu: Int) -> GATTError {
        engine.localLimit(op, handle: handle, length: length, budget: budget, mtu: mtu)
    }

    func unexpected(_ pdu: ATTPDU, _ expected: String) -> GATTError {
        violation(pdu.bytes, expected, "a \(pdu.opcode.name) that is not \(expected): \(pdu)")
    }

    func backwards(_ pdu: ATTPDU, _ what: String) -> GATTError {
        violation(pdu.bytes, "handles that only go forward", "a handle going backwards or out of range: \(what)")
    }

    func violation(_ bytes: [UInt8], _ expected: String, _ problem: String) -> GATTError {
        let v = GATTProtocolViolation(received: bytes, expected: expected, problem: problem)
        engine.recordViolation(v, failed: nil)
        return .protocolViolation(v)
    }
}

extension GATTClient.Configuration {
    /// Wires `setSecurityLevel` to the bearer's BT_SECURITY socket option (Core Spec 5.4 Vol 3 Part C §10.2) and
    /// starts from the level the socket reports. Pair with `retryAfterRaisingSecurity` for the single retry on
    /// Insufficient Authentication / Encryption.
    public mutating func useSecurity(of bearer: some SecurableTransport) {
        setSecurityLevel = { level in try bearer.setSecurityLevel(level) }
        // Level 0 (SDP) is an LE link's "no security" too: low.
        if let current = try? bearer.securityLevel() { initialSecurityLevel = max(current, .low) }
    }
}
