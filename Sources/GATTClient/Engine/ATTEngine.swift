// The ATT transaction engine of one bearer (Core Spec 5.4 Vol 3 Part F §3.3), cut along BlueZ's
// src/shared/att.c: the request slot (RequestSlot.swift), one outbox with one writer (Outbox.swift), the inbound
// router (InboundRouter.swift), the notification fan-out (NotificationFanOut.swift), deadlines (Deadlines.swift).
// This file holds the state and closing.
//
// The state is a plain value owned by the link's event loop (LinuxBluetooth's EventLoop): every event runs on the
// loop's thread, one after another (submit, inbound PDU, timer, cancel, writable, close), so there is no lock and
// no atomic on it. Each checks the operation ID against the slot before it acts, and a continuation is resumed
// only after it has left the state: so a stale timer, a late response or a second cancel can never resume an
// operation twice or resume somebody else's.
import ATTStack
import LinkCore
import Synchronization

/// The ATT transaction engine for one bearer (Core Spec 5.4 Vol 3 Part F §3.3.2, §3.3.3): one request in flight,
/// a FIFO of waiting requests, one outbox for everything sent, the notification fan-out.
final class ATTEngine: ATTTransportSink {
    /// A request the engine holds: in the slot or in the queue, as the bytes the codec encoded. A class: a struct
    /// this size with four reference fields and four optionals was copied and destroyed through its value witnesses
    /// and tested as an Optional through the generic enum-tag entry points, about 1,500 instructions per Write
    /// Request (tools/perf/write-breakdown.sh, docs/performance.md); a reference moves with one retain. It has one
    /// owner at a time (the caller's thread makes it, then only the loop's thread touches it: submit, the slot or the
    /// queue, answer), so it is never shared while mutated.
    final class Pending: @unchecked Sendable {
        var id: UInt64
        /// Read-only once encoded (`ATTEncodedPDU`): the caller's thread makes it, the loop only reads it.
        nonisolated(unsafe) var bytes: ATTEncodedPDU
        var opcode: ATTOpcode
        var response: ATTOpcode
        var handle: UInt16?
        var valueLength: Int?
        var budget: Int?
        var ignoresCancellation: Bool
        var continuation: EngineContinuation<ATTPDU>?
        /// When its ATT timeout ends (§3.3.3), once it is in the slot.
        var deadline: ClockInstant
        /// True once the writer picked the PDU; false while it waits in the slot for the socket.
        var written = false
        /// It could not be written at once (a full socket): its deadline restarts when it is (§3.3.3).
        var deferred: Bool
        /// Set when the send met a closed peer (EPIPE, ECONNRESET): the request waits, at most `peerGoneGrace`,
        /// for the reader to read the end of the connection, then fails as a disconnect with this error. Boxed: a
        /// TransportError is large, and every request's Pending is moved on the hot path.
        var peerGone: PeerGone?

        init(id: UInt64, bytes: ATTEncodedPDU, opcode: ATTOpcode, response: ATTOpcode, handle: UInt16?,
             valueLength: Int?, budget: Int?, ignoresCancellation: Bool, continuation: EngineContinuation<ATTPDU>?,
             deadline: ClockInstant, deferred: Bool) {
            self.id = id
            self.bytes = bytes
            self.opcode = opcode
            self.response = response
            self.handle = handle
            self.valueLength = valueLength
            self.budget = budget
            self.ignoresCancellation = ignoresCancellation
            self.continuation = continuation
            self.deadline = deadline
            self.deferred = deferred
        }
    }

    /// The send error of a request whose send met a closed peer (see `Pending.peerGone`).
    final class PeerGone: Sendable {
        let error: TransportError
        init(_ error: TransportError) { self.error = error }
    }

    /// How long a request whose send met a closed peer waits for the reader to see the end of the connection (so
    /// that what the peer sent before closing is delivered first) before it fails as a disconnect on its own.
    static let peerGoneGrace: UInt64 = 1_000_000_000

    /// A write without response waiting for a permit (Core Spec 5.4 Vol 3 Part F §3.4.5.3).
    struct PermitWaiter: Sendable {
        var id: UInt64
        var bytes: [UInt8]
        var handle: UInt16
        var deadline: ClockInstant?
        var limit: Duration?
        var continuation: EngineContinuation<Void>
    }

    /// A resumption taken out of the state under the lock and run after it, so each continuation runs once.
    enum Resumption {
        case request(EngineContinuation<ATTPDU>, Result<ATTPDU, GATTError>)
        case permit(EngineContinuation<Void>, Result<Void, GATTError>)
        case stream(NotificationSink, GATTError?)
        /// A request that was queued on a closed enhanced bearer, never written: it goes to the unenhanced bearer.
        case resubmit(Pending, ATTEngine)

        func run() {
            switch self {
            case .resubmit(let p, let engine):
                engine.onLoop { engine.resubmit(p) }
            case .request(let c, let r):
                switch r {
                case .success(let v): c.resume(returning: v)
                case .failure(let e): c.resume(throwing: e)
                }
            case .permit(let c, let r):
                switch r {
                case .success: c.resume()
                case .failure(let e): c.resume(throwing: e)
                }
            case .stream(let s, let e):
                if let e { s.continuation.finish(throwing: e) } else { s.continuation.finish() }
            }
        }
    }

    struct State {
        var requests = RequestSlot()
        var outbox = Outbox()
        var mtu = ATTMTU.minimumLE
        var mtuExchanged = false
        /// The server's Rx MTU from its Exchange MTU Response (§3.4.2.2); nil before, or when it refused.
        var serverRxMTU: Int?
        var closedReason: String?
        var armed: (at: ClockInstant, wakeup: any ClockWakeup)?
        /// Responses matched to this bearer's requests (the public `GATTBearer.requestsAnswered`).
        var answered = 0
        /// The unenhanced bearer's list of the client's enhanced bearers (`pickOnLoop`, cancellation).
        var enhanced: [ATTEngine] = []

        /// Procedures pinned to this bearer (`GATTClient.withPinnedBearer`): it holds at least one request per
        /// procedure, also between two of a procedure's requests.
        var reserved = 0

        /// The requests this bearer holds (in the slot and queued, at least one per pinned procedure), nil once it
        /// closed.
        var load: Int? { closedReason != nil ? nil : max((requests.inFlight != nil ? 1 : 0) + requests.queue.count, reserved) }
        var subscribers: [UInt16: [NotificationSink]] = [:]
        var catchAll: NotificationSink?
        /// Further catch-all streams, each of its own consumer from when it was asked for (`GATTClient.notificationStream`).
        var watchers: [NotificationSink] = []
        /// Told each value before the streams (`GATTClient.onValue`: Service Changed, Part G §7.1).
        var valueHandlers: [@Sendable (GATTNotification) -> Void] = []
        var stats = GATTClientStatistics()
    }

    let transport: any ATTTransport
    let clock: any GATTClock
    let timeout: Duration
    /// `timeout` in nanoseconds (computed once: Duration arithmetic is not free on the hot path).
    let timeoutNanoseconds: UInt64
    let clientRxMTU: Int
    let streamLimit: Int
    let events: (@Sendable (GATTClientEvent) -> Void)?
    /// The engine's state, touched only on `loop`'s thread.
    let state: LoopOwned<State>
    /// The link's event loop: the transport's, else (a test double) one of the engine's own.
    let loop: EventLoop
    /// Operation IDs: made on the caller's thread, before the request reaches the loop (its cancellation names it).
    let nextID = Atomic<UInt64>(1)
    /// Guards the names callers gave to handles (used only when building error messages); shared by every
    /// bearer of one client.
    let names: Lock<[UInt16: String]>
    /// The catch-all stream, created with the engine so that it sees every value from the moment the bearer opens.
    let catchAllStream: GATTNotificationStream
    /// An enhanced bearer's engine hands every notification and indication to the unenhanced bearer's engine,
    /// so that the link has one ordered notification path (Vol 3 Part G §2.4, §4.10); nil on the unenhanced one.
    let notificationTarget: ATTEngine?

    /// What the loop publishes for any thread to read without waiting for it (no `loop.sync` from async code):
    /// the ATT_MTU, the server's Rx MTU (-1: none answered) and whether the bearer closed, stored each time they change.
    let publishedMTU: Atomic<Int>
    let publishedServerRxMTU = Atomic<Int>(-1)
    let publishedClosed = Atomic<Bool>(false)

    /// True on an Enhanced ATT bearer (an L2CAP ECRED channel): its MTU is the channel's, with no Exchange MTU.
    var isEnhanced: Bool { notificationTarget != nil }

    init(transport: any ATTTransport, clock: any GATTClock, timeout: Duration, clientRxMTU: Int,
         streamLimit: Int, events: (@Sendable (GATTClientEvent) -> Void)?) throws(TransportError) {
        self.notificationTarget = nil
        if let loop = transport.eventLoop { self.loop = loop } else { self.loop = try EventLoop() }
        self.transport = transport
        self.clock = clock
        self.timeout = timeout
        self.timeoutNanoseconds = UInt64(max(0, timeout.nanosecondsClamped))
        self.clientRxMTU = clientRxMTU
        self.streamLimit = streamLimit
        self.events = events
        self.names = Lock([:])
        let (stream, sink) = NotificationSink.make(id: 0, handle: nil, limit: streamLimit)
        self.catchAllStream = stream
        var s = State()
        s.catchAll = sink
        publishedMTU = Atomic(s.mtu)
        self.state = LoopOwned(s, loop: loop)
    }

    /// The engine of an Enhanced ATT bearer (Vol 3 Part F §3.2.11): its ATT_MTU is the channel's `mtu` from the
    /// start (§3.2.8: no Exchange MTU on an enhanced bearer); its notifications go to `primary`'s fan-out.
    init(enhanced transport: any ATTTransport, mtu: Int, primary: ATTEngine) {
        self.notificationTarget = primary
        self.loop = transport.eventLoop ?? primary.loop
        self.transport = transport
        self.clock = primary.clock
        self.timeout = primary.timeout
        self.timeoutNanoseconds = primary.timeoutNanoseconds
        self.clientRxMTU = mtu
        self.streamLimit = primary.streamLimit
        self.events = primary.events
        self.names = primary.names
        let (stream, _) = NotificationSink.make(id: 0, handle: nil, limit: 1)
        self.catchAllStream = stream
        var s = State()
        s.mtu = mtu
        s.mtuExchanged = true
        publishedMTU = Atomic(mtu)
        self.state = LoopOwned(s, loop: loop)
    }

    func start() { transport.start(self) }

    /// Runs `work` on the loop: at once when this is the loop's thread, else posted (in order).
    @inline(__always)
    func onLoop(_ work: @escaping @Sendable () -> Void) {
        if loop.inEventLoop { work() } else { loop.execute(work) }
    }

    /// Runs `work` on the loop and returns once it has run: at once on the loop's thread, else the caller waits (an
    /// event from a transport without a loop, a close, a test's clock): its effects are visible when this returns.
    func onLoopAndWait(_ work: @escaping @Sendable () -> Void) {
        if loop.inEventLoop { work() } else { loop.sync(work) }
    }

    /// Reads (or changes) the state from any thread: at once on the loop, else the caller waits for the loop.
    func onLoopSync<T: Sendable>(_ body: @escaping @Sendable (inout State) -> T) -> T {
        loop.sync { self.state.access(body) }
    }

    /// Operation IDs are unique across the bearers of one client (a request can move to another bearer).
    func makeID() -> UInt64 {
        if let primary = notificationTarget { return primary.makeID() }
        return nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    // MARK: names and descriptions

    func name(of handle: UInt16) -> String? { names.withLock { $0[handle] } }
    func setName(_ name: String?, for handle: UInt16) { names.withLock { $0[handle] = name } }

    /// "Write Request to handle 0x0012 (cloudToken)"
    func describe(_ opcode: ATTOpcode, handle: UInt16?) -> String {
        guard let handle else { return opcode.name }
        let prep = opcode.preposition
        if let n = name(of: handle) { return "\(opcode.name) \(prep) handle \(ATTHex.handle(handle)) (\(n))" }
        return "\(opcode.name) \(prep) handle \(ATTHex.handle(handle))"
    }

    // MARK: what callers and tests read

    var mtu: Int { publishedMTU.load(ordering: .acquiring) }
    var serverRxMTU: Int? { let m = publishedServerRxMTU.load(ordering: .acquiring); return m < 0 ? nil : m }
    var isClosed: Bool { publishedClosed.load(ordering: .acquiring) }
    /// The counters, asked of the loop: at once on its thread (a task that prefers it), else the task hops there.
    var statistics: GATTClientStatistics {
        get async {
            if loop.inEventLoop { return state.access { $0.stats } }
            return await withLinkLoop(loop) { state.access { $0.stats } }
        }
    }
    var answeredCount: Int { onLoopSync { $0.answered } }

    /// What the tests observe of the engine, read on its loop in one step: facts, so that no test names a field.
    struct Snapshot: Sendable, Equatable {
        /// The request in the slot (its operation ID), nil when none.
        var inFlight: UInt64?
        /// Whether the request in the slot has gone out to the transport.
        var inFlightWritten: Bool
        /// Requests queued behind the slot.
        var queuedRequests: Int
        /// Deadlines the engine holds (the slot's, and every permit waiter's with a limit); zero when idle.
        var pendingDeadlines: Int
        /// Writes without response waiting for a send permit.
        var permitWaiters: Int
        /// Server answers (confirmations) queued for the transport.
        var queuedAnswers: Int
        /// Whether the transport refused the last send (the outbox waits for POLLOUT).
        var sendBlocked: Bool
        /// Notification streams the fan-out holds.
        var notificationStreams: Int
    }

    var snapshot: Snapshot {
        onLoopSync { s in
            Snapshot(inFlight: s.requests.inFlight?.id, inFlightWritten: s.requests.inFlight?.written == true,
                     queuedRequests: s.requests.queue.count,
                     pendingDeadlines: (s.requests.inFlight != nil ? 1 : 0) + s.outbox.permits.elements.filter { $0.deadline != nil }.count,
                     permitWaiters: s.outbox.permits.count, queuedAnswers: s.outbox.answers.count,
                     sendBlocked: s.outbox.blocked, notificationStreams: s.watchers.count)
        }
    }

    /// The requests this bearer holds (in the slot and queued), nil once it closed: how the client picks a bearer.
    var load: Int? { onLoopSync { $0.load } }

    /// Adds `n` to the procedures pinned to this bearer (on its loop; at once there).
    func reserve(_ n: Int) {
        onLoop { self.state.access { $0.reserved += n } }
    }

    /// The ATT_MTU after an Exchange MTU (§3.4.2.2), with the server's Rx MTU when it answered.
    func setMTU(_ m: Int, serverRxMTU: Int?) {
        onLoopSync { s in
            s.mtu = m
            s.mtuExchanged = true
            s.serverRxMTU = serverRxMTU
        }
        publishedServerRxMTU.store(serverRxMTU ?? -1, ordering: .releasing)
        publishedMTU.store(m, ordering: .releasing)
        events?(.mtuChanged(m))
    }

    func markMTUExchanged() -> Bool {
        onLoopSync { s in
            if s.mtuExchanged { return false }
            s.mtuExchanged = true
            return true
        }
    }

    // MARK: reports

    /// Counts and reports a violation a procedure found in a response (a malformed or unexpected PDU).
    func recordViolation(_ v: GATTProtocolViolation, failed: String?) { report(v, failed: failed) }

    func report(_ v: GATTProtocolViolation, failed: String?) {
        onLoop { self.state.access { $0.stats.protocolViolations += 1 } }
        events?(.protocolViolation(v, failed: failed))
    }

    func dropped(_ text: String) {
        onLoop { self.state.access { $0.stats.droppedEvents += 1 } }
        events?(.dropped(text))
    }

    // MARK: closing

    /// Fails every waiter (in the state; the caller runs the resumptions after).
    func closeAll(_ s: inout State, reason: String) -> [Resumption] {
        s.closedReason = reason
        publishedClosed.store(true, ordering: .releasing)
        var out: [Resumption] = []
        if let slot = s.requests.inFlight.take(), let c = slot.continuation {
            out.append(.request(c, .failure(.disconnected(GATTDisconnectedError(
                reason: reason, during: describe(slot.opcode, handle: slot.handle))))))
        }
        for p in s.requests.queue.removeAll() {
            // Never written on this bearer: it goes out on the unenhanced one (or fails there, named). Not a part of a
            // Prepare Write queue, which lives on its bearer (Part F §3.4.6, Part G §4.9.4): moved, it would land
            // mid-value in another bearer's queue; it fails, named, with its bearer.
            if let primary = notificationTarget, p.continuation != nil,
               p.opcode != .prepareWriteRequest, p.opcode != .executeWriteRequest {
                out.append(.resubmit(p, primary))
                continue
            }
            if let c = p.continuation {
                out.append(.request(c, .failure(.disconnected(GATTDisconnectedError(
                    reason: reason, during: describe(p.opcode, handle: p.handle))))))
            }
        }
        for w in s.outbox.permits.removeAll() {
            out.append(.permit(w.continuation, .failure(.disconnected(GATTDisconnectedError(
                reason: reason, during: describe(.writeCommand, handle: w.handle))))))
        }
        for (handle, sinks) in s.subscribers {
            for sink in sinks {
                let during = "notifications of handle \(ATTHex.handle(handle))" + (name(of: handle).map { " (\($0))" } ?? "")
                out.append(.stream(sink, .disconnected(GATTDisconnectedError(reason: reason, during: during))))
            }
        }
        s.subscribers = [:]
        s.valueHandlers = []
        if let c = s.catchAll {
            out.append(.stream(c, .disconnected(GATTDisconnectedError(reason: reason, during: "the notification stream"))))
            s.catchAll = nil
        }
        for w in s.watchers {
            out.append(.stream(w, .disconnected(GATTDisconnectedError(reason: reason, during: "the notification stream"))))
        }
        s.watchers = []
        // The enhanced engines hold this one (`notificationTarget`): the list goes with the close, and the cycle.
        s.enhanced = []
        s.armed?.wakeup.cancel()
        s.armed = nil
        _ = s.outbox.answers.removeAll()
        return out
    }

    /// Closes the bearer from this side: every waiter fails (on the loop, at once when called there), then the
    /// transport closes.
    func close(reason: String) {
        onLoopAndWait {
            let rs: [Resumption] = self.state.access { s in
                guard s.closedReason == nil else { return [] }
                return self.closeAll(&s, reason: "closed by this host: \(reason)")
            }
            for r in rs { r.run() }
            self.transport.close(reason: reason)
        }
    }

    func transport(didCloseWith reason: TransportError) {
        onLoopAndWait {
            let rs: [Resumption] = self.state.access { s in
                guard s.closedReason == nil else { return [] }
                return self.closeAll(&s, reason: reason.description)
            }
            for r in rs { r.run() }
        }
    }
}

/// A value owned by one event loop's thread: `access` takes no lock, and checks in debug builds that it runs on
/// the loop (every engine event does). The ATT engine's state lives in one.
final class LoopOwned<Value>: @unchecked Sendable {
    // @unchecked: `value` is read and written only on `loop`'s thread (asserted in `access`), one event at a time,
    // so no two threads ever touch it; other threads post work to the loop instead. Behind a pointer so that no
    // dynamic exclusivity check runs on every access.
    private let value: UnsafeMutablePointer<Value>
    let loop: EventLoop

    init(_ initial: Value, loop: EventLoop) {
        value = .allocate(capacity: 1)
        value.initialize(to: initial)
        self.loop = loop
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
    }

    @inline(__always)
    func access<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        assert(loop.inEventLoop, "engine state touched off its event loop's thread")
        return try body(&value.pointee)
    }
}
