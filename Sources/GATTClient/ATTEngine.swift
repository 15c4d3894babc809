// The ATT transaction engine of one bearer (Core Spec 5.4 Vol 3 Part F §3.3): the transaction slot with its
// owner, the FIFO of waiting requests, the deadline of the request in flight, the permit FIFO of write without
// response, the notification fan-out, and the answers to the peer's own requests and indications.
//
// Every event is one function that changes the state under one lock: submit, inbound PDU, timer, cancel,
// writable, close. Each checks the operation ID against the slot before it acts, and a continuation is resumed
// only after it has left the state, outside the lock: so a stale timer, a late response or a second cancel can
// never resume an operation twice or resume somebody else's.
import ATTStack
import LinuxBluetooth
import Synchronization

/// Something the engine reports that no caller waits for: a peer's protocol violation, an answer to a peer's
/// request, dropped notifications. Hand a closure to `GATTClient.Configuration.events` to log them.
public enum GATTClientEvent: Sendable, Equatable, CustomStringConvertible {
    /// The peer sent something ATT forbids; `failed` names the operation it failed, if any.
    case protocolViolation(GATTProtocolViolation, failed: String?)
    /// A response, timeout or cancellation that found no operation to resolve (a late response, a stale timer):
    /// logged and dropped, never resumes another operation.
    case dropped(String)
    /// The client answered a request of the peer (Exchange MTU Response, or Error Response Request Not Supported).
    case answeredPeerRequest(request: [UInt8], answer: [UInt8])
    /// The ATT_MTU changed (Exchange MTU).
    case mtuChanged(Int)
    /// A notification stream's buffer was full and it started dropping values (first of a burst; every drop is
    /// counted in `GATTClientStatistics.droppedNotifications` and in the next value's `droppedBefore`).
    /// `stream` is the handle of the per-handle stream, nil for the catch-all stream.
    case notificationDropped(handle: UInt16, stream: UInt16?)

    public var description: String {
        switch self {
        case .protocolViolation(let v, let failed):
            return failed.map { "\(v.description) (failed \($0))" } ?? v.description
        case .dropped(let s): return "dropped: \(s)"
        case .answeredPeerRequest(let req, let ans): return "answered the peer's [\(hexBytes(req))] with [\(hexBytes(ans))]"
        case .mtuChanged(let m): return "ATT_MTU is now \(m)"
        case .notificationDropped(let h, let stream):
            return "buffer full: the \(stream.map { "handle \(hex4($0))" } ?? "catch-all") stream started dropping values (first: handle \(hex4(h)))"
        }
    }
}

/// Counters of what the engine dropped or refused, for diagnostics and tests.
public struct GATTClientStatistics: Sendable, Equatable {
    public var protocolViolations = 0
    public var droppedEvents = 0
    public var droppedNotifications = 0
    public var peerRequestsAnswered = 0
    public var indicationsConfirmed = 0
    public var notificationsReceived = 0
}

/// The ATT transaction engine for one bearer (Core Spec 5.4 Vol 3 Part F §3.3.2, §3.3.3): one request in flight,
/// a FIFO of waiting requests, a write-without-response permit FIFO, the notification fan-out.
final class ATTEngine: ATTTransportSink {
    /// A request the engine holds: in the slot or in the queue.
    struct Pending {
        var id: UInt64
        var pdu: [UInt8]
        var opcode: ATTOpcode
        var response: ATTOpcode
        var handle: UInt16?
        var valueLength: Int?
        var budget: Int?
        var ignoresCancellation: Bool
        var continuation: EngineContinuation<[UInt8]>?
        var deadline = ClockInstant(nanoseconds: 0)
        /// False while the transport said `.wouldBlock` and the PDU waits for POLLOUT.
        var sent = false
        /// Set when the send met a closed peer (EPIPE, ECONNRESET): the request waits, at most `peerGoneGrace`,
        /// for the reader to read the end of the connection, then fails as a disconnect with this error. Boxed: a
        /// TransportError is large, and every request's Pending is copied on the hot path.
        var peerGone: PeerGone?
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
    struct PermitWaiter {
        var id: UInt64
        var pdu: [UInt8]
        var handle: UInt16
        var deadline: ClockInstant?
        var limit: Duration?
        var continuation: EngineContinuation<Void>
    }

    enum Resumption {
        case request(EngineContinuation<[UInt8]>, Result<[UInt8], GATTError>)
        case permit(EngineContinuation<Void>, Result<Void, GATTError>)
        case stream(NotificationSink, GATTError?)

        func run() {
            switch self {
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
        var slot: Pending?
        var queue = FIFO<Pending>()
        var mtu = ATTMTU.minimumLE
        var mtuExchanged = false
        var closedReason: String?
        var armed: (at: ClockInstant, wakeup: any ClockWakeup)?
        var writableArmed = false
        var controlBacklog: [[UInt8]] = []
        /// `writable()` is sending a batch taken from `controlBacklog` (on the transport's writable thread): new
        /// answers queue behind it, so that they leave in the order they were made.
        var controlFlushing = false
        var permits = FIFO<PermitWaiter>()
        /// The permit waiter whose PDU the drainer is sending right now (cannot be cancelled any more).
        var permitInFlight: UInt64?
        var draining = false
        /// The last write without response got `.wouldBlock`: every new one queues until POLLOUT.
        var blocked = false
        var subscribers: [UInt16: [NotificationSink]] = [:]
        var catchAll: NotificationSink?
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
    /// Guards every piece of engine state above; never held while calling the transport or resuming a continuation.
    let state: Lock<State>
    let nextID = Atomic<UInt64>(1)
    /// `State.mtu`, readable without the lock (every request reads it); stored under the lock with `State.mtu`.
    let mtuMirror = Atomic<Int>(ATTMTU.minimumLE)
    /// Guards the names callers gave to handles (used only when building error messages).
    let names = Lock<[UInt16: String]>([:])
    /// Runs callers inline on the reader thread when they prefer it (see `BearerExecutor`).
    let executor = BearerExecutor()
    /// The catch-all stream, created with the engine so that it sees every value from the moment the bearer opens.
    let catchAllStream: GATTNotificationStream

    init(transport: any ATTTransport, clock: any GATTClock, timeout: Duration, clientRxMTU: Int,
         streamLimit: Int, events: (@Sendable (GATTClientEvent) -> Void)?) {
        self.transport = transport
        self.clock = clock
        self.timeout = timeout
        self.timeoutNanoseconds = UInt64(max(0, timeout.nanosecondsClamped))
        self.clientRxMTU = clientRxMTU
        self.streamLimit = streamLimit
        self.events = events
        let (stream, sink) = NotificationSink.make(id: 0, handle: nil, limit: streamLimit)
        self.catchAllStream = stream
        var s = State()
        s.catchAll = sink
        self.state = Lock(s)
    }

    func start() { transport.start(self) }

    /// The ATT timeout from now: the deadline of a request written now.
    @inline(__always)
    func deadlineFromNow() -> ClockInstant {
        ClockInstant(nanoseconds: clock.now().nanoseconds &+ timeoutNanoseconds)
    }

    func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    // MARK: names and descriptions

    func name(of handle: UInt16) -> String? { names.withLock { $0[handle] } }
    func setName(_ name: String?, for handle: UInt16) { names.withLock { $0[handle] = name } }

    /// "Write Request to handle 0x0012 (cloudToken)"
    func describe(_ opcode: ATTOpcode, handle: UInt16?) -> String {
        guard let handle else { return opcode.name }
        let prep = opcode.preposition
        if let n = name(of: handle) { return "\(opcode.name) \(prep) handle \(hex4(handle)) (\(n))" }
        return "\(opcode.name) \(prep) handle \(hex4(handle))"
    }

    var mtu: Int { mtuMirror.load(ordering: .acquiring) }
    var isClosed: Bool { state.withLock { $0.closedReason != nil } }
    var statistics: GATTClientStatistics { state.withLock { $0.stats } }

    /// Deadlines the engine holds (the slot's, and every permit waiter's with a limit); zero when idle.
    var pendingDeadlines: Int {
        state.withLock { s in
            (s.slot != nil ? 1 : 0) + s.permits.elements.filter { $0.deadline != nil }.count
        }
    }

    /// Requests queued behind the slot.
    var queuedRequests: Int { state.withLock { $0.queue.count } }

    func setMTU(_ m: Int) {
        state.withLock { s in
            s.mtu = m
            mtuMirror.store(m, ordering: .releasing)
            s.mtuExchanged = true
        }
        events?(.mtuChanged(m))
    }

    func markMTUExchanged() -> Bool {
        state.withLock { s in
            if s.mtuExchanged { return false }
            s.mtuExchanged = true
            return true
        }
    }

    // MARK: requests

    /// Sends one request and waits for its response PDU (success response only: an Error Response throws
    /// `GATTError.attribute`). The ATT timeout starts when the PDU is written; cancellation releases the caller at
    /// once (a request already in flight keeps the slot until its response or timeout, as the spec requires).
    nonisolated(nonsending) func request(_ pdu: [UInt8], expecting response: ATTOpcode, handle: UInt16?, valueLength: Int? = nil,
                 budget: Int? = nil, ignoresCancellation: Bool = false) async throws(GATTError) -> [UInt8] {
        let id = makeID()
        let opcode = ATTOpcode(pdu[0])
        do {
            // The executor-inheriting forms of withTaskCancellationHandler and of the continuation: the same handler
            // record and continuation, without the hops back to `#isolation` the isolated forms make after the
            // resumption (with a task executor preference, each hop takes the task's status lock). The operation
            // closure is nonisolated, so running on whatever generic executor resumed it is right; this function is
            // nonisolated(nonsending), so the caller's isolation is restored once, when `request` returns to it.
            return try await _unsafeInheritExecutor_withTaskCancellationHandler {
                try await _unsafeInheritExecutor_withUnsafeThrowingContinuation { (u: UnsafeContinuation<[UInt8], any Error>) in
                    submit(Pending(id: id, pdu: pdu, opcode: opcode, response: response, handle: handle,
                                   valueLength: valueLength, budget: budget,
                                   ignoresCancellation: ignoresCancellation, continuation: engineContinuation(u)))
                }
            } onCancel: {
                if !ignoresCancellation { cancel(id) }
            }
        } catch {
            throw GATTError.from(error, operation: describe(opcode, handle: handle))
        }
    }

    private func submit(_ p: consuming Pending) {
        // The request is moved into the slot or the queue, never copied (a copy retains its PDU and more).
        let id = p.id, pdu = p.pdu, continuation = p.continuation, opcode = p.opcode, handle = p.handle
        let cancelled = !p.ignoresCancellation && Task.isCancelled
        var held: Pending? = consume p
        let (refusal, sendNow): (GATTError?, Bool) = state.withLock { s in
            if let reason = s.closedReason {
                return (.disconnected(GATTDisconnectedError(reason: reason, during: describe(opcode, handle: handle))), false)
            }
            if cancelled { return (.cancelled(operation: describe(opcode, handle: handle)), false) }
            if s.slot == nil {
                let deadline = deadlineFromNow()
                held!.deadline = deadline
                held!.sent = true
                s.slot = held.take()
                armTimer(&s, at: deadline)
                return (nil, true)
            }
            s.queue.append(held.take()!)
            return (nil, false)
        }
        if let refusal {
            continuation?.resume(throwing: refusal)
            return
        }
        if sendNow { sendSlot(id: id, pdu: pdu) }
    }

    /// Sends the slot's PDU (the slot's owner `id` only). Runs outside the lock.
    private func sendSlot(id: UInt64, pdu: [UInt8]) {
        var nextID = id
        var nextPDU = pdu
        while true {
            let result = trySend(nextPDU)
            switch result {
            case .success(.sent):
                return
            case .success(.wouldBlock):
                let register: Bool = state.withLock { s in
                    guard s.slot?.id == nextID else { return false }
                    s.slot!.sent = false
                    return armWritable(&s)
                }
                if register { registerWritable() }
                return
            case .failure(let error) where Self.peerHasClosed(error):
                // The peer closed the link (EPIPE, ECONNRESET): the reader is about to read the end of it. This
                // request fails then, with the close's reason, after every PDU the peer sent before closing has been
                // delivered in order (a listener sees the notifications that came first). A named grace bounds the
                // wait: if the reader reports no end by then, the request fails as a disconnect with the send's error.
                state.withLock { s in
                    guard s.slot?.id == nextID else { return }
                    s.slot!.peerGone = PeerGone(error)
                    let grace = ClockInstant(nanoseconds: clock.now().nanoseconds &+ Self.peerGoneGrace)
                    if grace < s.slot!.deadline { s.slot!.deadline = grace }
                    armTimer(&s, at: s.slot!.deadline)
                }
                return
            case .failure(let error):
                // The transport refused the PDU: fail this request and move on to the next one.
                let (resume, next): (Resumption?, Pending?) = state.withLock { s in
                    guard let slot = s.slot, slot.id == nextID else { return (nil, nil) }
                    s.slot = nil
                    let op = describe(slot.opcode, handle: slot.handle)
                    let r = slot.continuation.map { Resumption.request($0, .failure(GATTError.sendFailure(error, operation: op))) }
                    return (r, promoteNext(&s))
                }
                resume?.run()
                guard let next else { return }
                nextID = next.id
                nextPDU = next.pdu
            }
        }
    }

    /// A send that failed because the peer is gone (the reader will see the end of the connection).
    static func peerHasClosed(_ error: TransportError) -> Bool {
        guard case .socket(let e) = error else { return false }
        return e.errno == .brokenPipe || e.errno == .connectionReset
    }

    /// Moves the queue's first request into the empty slot and starts its deadline (under the lock).
    private func promoteNext(_ s: inout State) -> Pending? {
        guard s.slot == nil, s.closedReason == nil, var p = s.queue.popFirst() else { return nil }
        p.deadline = deadlineFromNow()
        p.sent = true
        s.slot = p
        armTimer(&s, at: p.deadline)
        return p
    }

    /// Cancellation from the caller's task: a queued request leaves the queue; a request in flight keeps the slot
    /// but its caller is released at once; a permit waiter leaves the permit queue.
    func cancel(_ id: UInt64) {
        let resume: Resumption? = state.withLock { s in
            if s.slot?.id == id, let c = s.slot?.continuation {
                s.slot!.continuation = nil
                let op = describe(s.slot!.opcode, handle: s.slot!.handle)
                return .request(c, .failure(.cancelled(operation: op + " (still in flight; its response will be dropped)")))
            }
            if let p = s.queue.remove(where: { $0.id == id }), let c = p.continuation {
                return .request(c, .failure(.cancelled(operation: describe(p.opcode, handle: p.handle))))
            }
            if s.permitInFlight != id, let w = s.permits.remove(where: { $0.id == id }) {
                return .permit(w.continuation, .failure(.cancelled(operation: describe(.writeCommand, handle: w.handle))))
            }
            return nil
        }
        resume?.run()
    }

    // MARK: timers

    /// Makes sure a wake-up is armed no later than `deadline` (under the lock). In steady state deadlines only
    /// grow, so this arms one wake-up per timeout period, not one per request.
    private func armTimer(_ s: inout State, at deadline: ClockInstant) {
        if let armed = s.armed, armed.at <= deadline { return }
        s.armed?.wakeup.cancel()
        // Strong references in these closures on purpose: a weak reference would give the engine a side table and
        // put every retain and release of it on the runtime's slow path. Each closure ends when it runs or at close.
        let wakeup = clock.schedule(at: deadline) { self.timerFired() }
        s.armed = (deadline, wakeup)
    }

    /// The wake-up fired: acts only on deadlines that are still held by their owners and have passed.
    private func timerFired() {
        var resumptions: [Resumption] = []
        var closeReason: String?
        state.withLock { s in
            s.armed = nil
            guard s.closedReason == nil else { return }
            let now = clock.now()
            if let slot = s.slot, slot.deadline <= now, let gone = slot.peerGone?.error {
                // The send met a closed peer and the reader never reported the end: the peer is gone.
                let op = describe(slot.opcode, handle: slot.handle)
                let reason = "\(gone.description) (no end of the connection was read within 1 s after it)"
                s.slot = nil
                if let c = slot.continuation { resumptions.append(.request(c, .failure(GATTError.sendFailure(gone, operation: op)))) }
                resumptions += closeAll(&s, reason: reason)
                closeReason = reason
                return
            }
            if let slot = s.slot, slot.deadline <= now {
                let waited = describe(slot.response, handle: nil)
                let on = slot.handle.map { " on handle \(hex4($0))" + (name(of: $0).map { " (\($0))" } ?? "") } ?? ""
                let timeoutError = GATTTimeoutError(waitingFor: waited, handle: slot.handle,
                                                    handleName: slot.handle.flatMap { name(of: $0) }, after: timeout)
                let reason = "ATT timeout: no \(waited)\(on) within \(timeout.spoken) for \(describe(slot.opcode, handle: slot.handle)); "
                    + "the bearer was closed (Core Spec Vol 3 Part F §3.3.3)"
                s.slot = nil
                if let c = slot.continuation { resumptions.append(.request(c, .failure(.timeout(timeoutError)))) }
                resumptions += closeAll(&s, reason: reason)
                closeReason = reason
                return
            }
            var next: ClockInstant? = s.slot?.deadline
            let due = s.permits.removeAll { w in
                guard let d = w.deadline, s.permitInFlight != w.id else { return false }
                return d <= now
            }
            for w in due {
                let e = GATTTimeoutError(waitingFor: "a send permit for Write Command", handle: w.handle,
                                         handleName: name(of: w.handle), after: w.limit ?? .zero)
                resumptions.append(.permit(w.continuation, .failure(.timeout(e))))
            }
            for w in s.permits.elements {
                if let d = w.deadline { next = next.map { min($0, d) } ?? d }
            }
            if let next { armTimer(&s, at: next) }
        }
        for r in resumptions { r.run() }
        if let closeReason { transport.close(reason: closeReason) }
    }

    // MARK: closing

    /// Fails every waiter (under the lock; the caller runs the resumptions after unlocking).
    private func closeAll(_ s: inout State, reason: String) -> [Resumption] {
        s.closedReason = reason
        var out: [Resumption] = []
        if let slot = s.slot {
            s.slot = nil
            if let c = slot.continuation {
                out.append(.request(c, .failure(.disconnected(GATTDisconnectedError(
                    reason: reason, during: describe(slot.opcode, handle: slot.handle))))))
            }
        }
        for p in s.queue.removeAll() {
            if let c = p.continuation {
                out.append(.request(c, .failure(.disconnected(GATTDisconnectedError(
                    reason: reason, during: describe(p.opcode, handle: p.handle))))))
            }
        }
        for w in s.permits.removeAll() {
            out.append(.permit(w.continuation, .failure(.disconnected(GATTDisconnectedError(
                reason: reason, during: describe(.writeCommand, handle: w.handle))))))
        }
        for (handle, sinks) in s.subscribers {
            for sink in sinks {
                let during = "notifications of handle \(hex4(handle))" + (name(of: handle).map { " (\($0))" } ?? "")
                out.append(.stream(sink, .disconnected(GATTDisconnectedError(reason: reason, during: during))))
            }
        }
        s.subscribers = [:]
        if let c = s.catchAll {
            out.append(.stream(c, .disconnected(GATTDisconnectedError(reason: reason, during: "the notification stream"))))
            s.catchAll = nil
        }
        s.armed?.wakeup.cancel()
        s.armed = nil
        s.controlBacklog = []
        return out
    }

    /// Closes the bearer from this side: every waiter fails at once, then the transport closes.
    func close(reason: String) {
        let rs: [Resumption] = state.withLock { s in
            guard s.closedReason == nil else { return [] }
            return closeAll(&s, reason: "closed by this host: \(reason)")
        }
        for r in rs { r.run() }
        transport.close(reason: reason)
    }

    func transport(didCloseWith reason: TransportError) {
        let rs: [Resumption] = state.withLock { s in
            guard s.closedReason == nil else { return [] }
            return closeAll(&s, reason: reason.description)
        }
        for r in rs { r.run() }
    }

    // MARK: inbound

    /// A Write Response is its opcode alone: every one is handed on as this shared array, not a fresh copy.
    static let writeResponsePDU: [UInt8] = [ATTOpcode.writeResponse.rawValue]

    func transport(didReceiveBytes pdu: UnsafeRawBufferPointer) {
        if pdu.count == 1 && pdu[0] == ATTOpcode.writeResponse.rawValue {
            transport(didReceive: Self.writeResponsePDU)
        } else {
            transport(didReceive: Array(pdu))
        }
    }

    func transport(didReceive pdu: [UInt8]) {
        guard let first = pdu.first else {
            report(GATTProtocolViolation(received: pdu, expected: "an ATT PDU", problem: "an empty PDU"), failed: nil)
            return
        }
        let op = ATTOpcode(first)
        switch op {
        case .handleValueNotification:
            guard pdu.count >= 3 else {
                report(GATTProtocolViolation(received: pdu, expected: "opcode, handle and value",
                                             problem: "a Handle Value Notification shorter than 3 bytes"), failed: nil)
                return
            }
            deliver(handle: UInt16(pdu[1]) | UInt16(pdu[2]) << 8, value: Array(pdu[3...]), kind: .notification)
        case .handleValueIndication:
            if pdu.count >= 3 {
                deliver(handle: UInt16(pdu[1]) | UInt16(pdu[2]) << 8, value: Array(pdu[3...]), kind: .indication)
            } else {
                report(GATTProtocolViolation(received: pdu, expected: "opcode, handle and value",
                                             problem: "a Handle Value Indication shorter than 3 bytes (confirmed anyway)"), failed: nil)
            }
            state.withLock { $0.stats.indicationsConfirmed += 1 }
            sendControl([ATTOpcode.handleValueConfirmation.rawValue])
        case .multipleHandleValueNotification:
            var i = 1
            while i < pdu.count {
                guard i + 4 <= pdu.count else {
                    report(GATTProtocolViolation(received: pdu, expected: "handle, length and value tuples",
                                                 problem: "a Multiple Handle Value Notification truncated at byte \(i)"), failed: nil)
                    return
                }
                let h = UInt16(pdu[i]) | UInt16(pdu[i + 1]) << 8
                let len = Int(pdu[i + 2]) | Int(pdu[i + 3]) << 8
                guard i + 4 + len <= pdu.count else {
                    report(GATTProtocolViolation(received: pdu, expected: "handle, length and value tuples",
                                                 problem: "a Multiple Handle Value Notification whose length \(len) at byte \(i + 2) runs past its end"), failed: nil)
                    return
                }
                deliver(handle: h, value: Array(pdu[(i + 4)..<(i + 4 + len)]), kind: .notification)
                i += 4 + len
            }
        case .exchangeMTURequest:
            answerExchangeMTU(pdu)
        case .handleValueConfirmation:
            // This client never sends indications.
            report(GATTProtocolViolation(received: pdu, expected: "no Handle Value Confirmation (this client sends no indications)",
                                         problem: "an unsolicited Handle Value Confirmation"), failed: nil)
        default:
            if op.kind == .response {
                handleResponse(pdu, op)
            } else if op.isCommand {
                // Commands are never answered (Core Spec Vol 3 Part F §3.3); this client has no server to apply them to.
                dropped("a \(op.description) from the peer (this client has no attribute server)")
            } else {
                // A request (or an unknown opcode without the command bit): answer Request Not Supported.
                let answer: [UInt8] = [ATTOpcode.errorResponse.rawValue, first, 0, 0, ATTErrorCode.requestNotSupported.rawValue]
                state.withLock { $0.stats.peerRequestsAnswered += 1 }
                sendControl(answer)
                events?(.answeredPeerRequest(request: pdu, answer: answer))
            }
        }
    }

    private func answerExchangeMTU(_ pdu: [UInt8]) {
        guard pdu.count == 3 else {
            let answer: [UInt8] = [ATTOpcode.errorResponse.rawValue, pdu[0], 0, 0, ATTErrorCode.invalidPDU.rawValue]
            sendControl(answer)
            events?(.answeredPeerRequest(request: pdu, answer: answer))
            return
        }
        let peerRx = Int(pdu[1]) | Int(pdu[2]) << 8
        let newMTU = ATTMTU.negotiated(clientRxMTU: peerRx, serverRxMTU: clientRxMTU)
        let answer: [UInt8] = [ATTOpcode.exchangeMTUResponse.rawValue, UInt8(clientRxMTU & 0xFF), UInt8(clientRxMTU >> 8)]
        state.withLock { s in
            s.mtu = newMTU
            mtuMirror.store(newMTU, ordering: .releasing)
            s.mtuExchanged = true
            s.stats.peerRequestsAnswered += 1
        }
        sendControl(answer)
        events?(.answeredPeerRequest(request: pdu, answer: answer))
        events?(.mtuChanged(newMTU))
    }

    private func handleResponse(_ pdu: [UInt8], _ op: ATTOpcode) {
        // The hot path (the expected response) resumes with the PDU as is; everything else goes through Resumption.
        var answered: (EngineContinuation<[UInt8]>, [UInt8])?
        var resume: Resumption?
        var next: Pending?
        var violation: GATTProtocolViolation?
        var failedOp: String?
        var droppedText: String?
        state.withLock { s in
            if s.closedReason != nil {
                // A response that was already on its way when the bearer closed (after an ATT timeout, say).
                droppedText = "a \(op.name) that arrived after the bearer closed"
                s.stats.droppedEvents += 1
                return
            }
            // The slot is moved out (not copied): the request leaves the state here whatever the response says.
            guard s.slot?.sent == true, let slot = s.slot.take() else {
                violation = GATTProtocolViolation(received: pdu, expected: "no response (no request in flight)",
                                                  problem: "an unsolicited \(op.name)")
                s.stats.protocolViolations += 1
                return
            }
            // Built only on the slow paths (a violation, a dropped response): the hot path formats no strings.
            var opText: String { describe(slot.opcode, handle: slot.handle) }
            var expected: String { "\(slot.response.description) or Error Response for \(slot.opcode.name)" }
            let result: Result<[UInt8], GATTError>
            if pdu.count > s.mtu {
                // Core Spec 5.4 Vol 3 Part F §3.2.8: no PDU is longer than ATT_MTU.
                let v = GATTProtocolViolation(received: pdu, expected: expected,
                                              problem: "a \(pdu.count)-byte \(op.name), longer than the ATT_MTU of \(s.mtu)")
                violation = v
                result = .failure(.protocolViolation(v))
            } else if op == .errorResponse {
                if pdu.count != 5 {
                    let v = GATTProtocolViolation(received: pdu, expected: expected,
                                                  problem: "an Error Response of \(pdu.count) bytes (it has 5)")
                    violation = v
                    result = .failure(.protocolViolation(v))
                } else if pdu[1] != slot.opcode.rawValue {
                    let v = GATTProtocolViolation(received: pdu, expected: expected,
                                                  problem: "an Error Response for \(ATTOpcode(pdu[1]).description) while \(slot.opcode.description) is in flight")
                    violation = v
                    result = .failure(.protocolViolation(v))
                } else {
                    let handle = UInt16(pdu[2]) | UInt16(pdu[3]) << 8
                    let shownHandle = handle != 0 ? handle : (slot.handle ?? 0)
                    result = .failure(.attribute(GATTAttributeError(
                        code: ATTErrorCode(pdu[4]), requestOpcode: slot.opcode, handle: shownHandle,
                        handleName: name(of: shownHandle), rejectedBy: .peer, valueLength: slot.valueLength,
                        budget: slot.budget, mtu: s.mtu)))
                }
            } else if op == slot.response {
                result = .success(pdu)
            } else {
                let v = GATTProtocolViolation(received: pdu, expected: expected,
                                              problem: "a \(op.description) while \(slot.opcode.description) is in flight")
                violation = v
                result = .failure(.protocolViolation(v))
            }
            if violation != nil {
                s.stats.protocolViolations += 1
                failedOp = opText
            }
            s.slot = nil
            if let c = slot.continuation {
                if case .success(let value) = result { answered = (c, value) } else { resume = .request(c, result) }
            } else {
                droppedText = "a \(op.name) for \(opText), whose caller was cancelled"
                s.stats.droppedEvents += 1
            }
            next = promoteNext(&s)
        }
        if let (c, value) = answered {
            executor.resumingInline { c.resume(returning: value) }
        } else if let resume {
            executor.resumingInline { resume.run() }
        }
        if let violation { events?(.protocolViolation(violation, failed: failedOp)) }
        if let droppedText { events?(.dropped(droppedText)) }
        if let next { sendSlot(id: next.id, pdu: next.pdu) }
    }

    /// Counts and reports a violation a procedure found in a response (a malformed or unexpected PDU).
    func recordViolation(_ v: GATTProtocolViolation, failed: String?) { report(v, failed: failed) }

    private func report(_ v: GATTProtocolViolation, failed: String?) {
        state.withLock { $0.stats.protocolViolations += 1 }
        events?(.protocolViolation(v, failed: failed))
    }

    private func dropped(_ text: String) {
        state.withLock { $0.stats.droppedEvents += 1 }
        events?(.dropped(text))
    }

    // MARK: notifications

    private func deliver(handle: UInt16, value: [UInt8], kind: GATTNotification.Kind) {
        let (catchAll, sinks): (NotificationSink?, [NotificationSink]?) = state.withLock { s in
            s.stats.notificationsReceived += 1
            return (s.catchAll, s.subscribers[handle])
        }
        // Every drop is counted; an event is reported once per burst (when a stream starts dropping).
        var dropCount = 0
        var burstStarts: [UInt16?] = []
        func note(_ d: NotificationSink.Delivery, _ stream: UInt16?) {
            if case .dropped(let first) = d {
                dropCount += 1
                if first { burstStarts.append(stream) }
            }
        }
        if let catchAll { note(catchAll.deliver(handle: handle, value: value, kind: kind), nil) }
        if let sinks {
            for sink in sinks { note(sink.deliver(handle: handle, value: value, kind: kind), handle) }
        }
        if dropCount > 0 {
            state.withLock { $0.stats.droppedNotifications += dropCount }
            for d in burstStarts { events?(.notificationDropped(handle: handle, stream: d)) }
        }
    }

    /// Arms a per-handle stream before anything is written, so no value that arrives afterwards is missed.
    func addSubscriber(handle: UInt16) throws(GATTError) -> (GATTNotificationStream, NotificationSink) {
        let (stream, sink) = NotificationSink.make(id: makeID(), handle: handle, limit: streamLimit)
        let refused: String? = state.withLock { s in
            if let r = s.closedReason { return r }
            s.subscribers[handle, default: []].append(sink)
            return nil
        }
        if let refused {
            throw .disconnected(GATTDisconnectedError(reason: refused, during: "subscribing to handle \(hex4(handle))"))
        }
        sink.continuation.onTermination = { _ in self.removeSubscriber(sink) }
        return (stream, sink)
    }

    func removeSubscriber(_ sink: NotificationSink) {
        guard let handle = sink.handle else { return }
        state.withLock { s in
            s.subscribers[handle]?.removeAll { $0 === sink }
            if s.subscribers[handle]?.isEmpty == true { s.subscribers[handle] = nil }
        }
    }

    /// Ends every stream of `handle` (after an unsubscribe).
    func finishSubscribers(handle: UInt16) {
        let sinks: [NotificationSink] = state.withLock { s in s.subscribers.removeValue(forKey: handle) ?? [] }
        for sink in sinks { sink.continuation.finish() }
    }

    func subscriberCount(handle: UInt16) -> Int { state.withLock { $0.subscribers[handle]?.count ?? 0 } }

    // MARK: control PDUs (confirmations, answers to the peer) and POLLOUT

    /// The most answers (confirmations, answers to the peer's requests) held while the socket is full. The peer may
    /// have one request and one indication outstanding (Core Spec 5.4 Vol 3 Part F §3.3.2, §3.4.7.2); one that
    /// sends more while not reading our answers is flooding, and the excess answers are dropped, not queued.
    static let controlBacklogLimit = 8

    /// Sends a PDU no caller waits for: on `.wouldBlock` it waits for POLLOUT, in order (at most
    /// `controlBacklogLimit` of them; beyond that the peer is violating the protocol and the answer is dropped).
    private func sendControl(_ pdu: [UInt8]) {
        enum Queued { case no, yes, overflow(Int) }
        let queued: Queued = state.withLock { s in
            if s.closedReason != nil { return .yes }
            if !s.controlBacklog.isEmpty || s.controlFlushing {
                if s.controlBacklog.count >= Self.controlBacklogLimit {
                    s.stats.protocolViolations += 1
                    s.stats.droppedEvents += 1
                    return .overflow(s.controlBacklog.count)
                }
                s.controlBacklog.append(pdu)
                return .yes
            }
            return .no
        }
        switch queued {
        case .no: break
        case .yes: return
        case .overflow(let held):
            let v = GATTProtocolViolation(
                received: pdu, expected: "at most one outstanding request and one outstanding indication from the peer",
                problem: "the peer keeps sending requests or indications without reading our answers (\(held) answers already wait for room in the socket); this answer was dropped")
            events?(.protocolViolation(v, failed: nil))
            return
        }
        let result: ATTSendResult
        switch trySend(pdu) {
        case .success(let r): result = r
        case .failure(let error):
            dropped("could not send [\(hexBytes(pdu))] to the peer: \(error)")
            return
        }
        if result == .wouldBlock {
            let register: Bool = state.withLock { s in
                s.controlBacklog.insert(pdu, at: 0)
                return armWritable(&s)
            }
            if register { registerWritable() }
        }
    }

    /// Returns true when the caller must call `registerWritable()` after unlocking.
    private func armWritable(_ s: inout State) -> Bool {
        if s.writableArmed { return false }
        s.writableArmed = true
        return true
    }

    /// One non-blocking send of a whole PDU.
    func trySend(_ pdu: [UInt8]) -> Result<ATTSendResult, TransportError> {
        pdu.withUnsafeBytes { b in
            do throws(TransportError) {
                return .success(try transport.trySend(b))
            } catch {
                return .failure(error)
            }
        }
    }

    private func registerWritable() {
        transport.whenWritable { self.writable() }
    }

    private func writable() {
        let (backlog, retry, drain): ([[UInt8]], Pending?, Bool) = state.withLock { s in
            s.writableArmed = false
            if s.closedReason != nil { return ([], nil, false) }
            let b = s.controlBacklog
            s.controlBacklog = []
            if !b.isEmpty { s.controlFlushing = true }
            var retry: Pending?
            if let slot = s.slot, !slot.sent {
                s.slot!.sent = true
                s.slot!.deadline = deadlineFromNow()
                retry = s.slot
            }
            s.blocked = false
            var drain = false
            if !s.permits.isEmpty && !s.draining {
                s.draining = true
                drain = true
            }
            return (b, retry, drain)
        }
        // The backlog goes out in order; answers made meanwhile (on the reader thread) queue behind the batch and
        // go out with the next one.
        var batch = backlog
        while !batch.isEmpty {
            var blockedAt: Int?
            for (i, pdu) in batch.enumerated() {
                let r: ATTSendResult
                switch trySend(pdu) {
                case .success(let v): r = v
                case .failure(let error):
                    dropped("could not send [\(hexBytes(pdu))] to the peer: \(error)")
                    continue
                }
                if r == .wouldBlock {
                    blockedAt = i
                    break
                }
            }
            let (next, register): ([[UInt8]], Bool) = state.withLock { s in
                if let i = blockedAt {
                    if s.closedReason == nil { s.controlBacklog = Array(batch[i...]) + s.controlBacklog }
                    s.controlFlushing = false
                    return ([], s.closedReason == nil && armWritable(&s))
                }
                let more = s.controlBacklog
                s.controlBacklog = []
                if more.isEmpty { s.controlFlushing = false }
                return (more, false)
            }
            if register { registerWritable() }
            batch = next
        }
        if let retry { sendSlot(id: retry.id, pdu: retry.pdu) }
        if drain { drainPermits() }
    }

    // MARK: write without response (permits)

    /// What the fast path of a write without response did.
    enum FastCommand {
        /// The PDU went out.
        case sent
        /// The caller must queue for a permit (`blocked`: the socket said `.wouldBlock`).
        case mustWait(blocked: Bool)
        /// The value does not fit one Write Command at this MTU: nothing was sent.
        case tooLong(mtu: Int, budget: Int)
    }

    /// The fast path of a write without response: one state check (closed, anyone waiting, the MTU) under one
    /// lock, the PDU built on the stack, one send. Otherwise the caller queues with `waitForPermit`.
    func trySendCommandFast(handle: UInt16, value: [UInt8]) throws(GATTError) -> FastCommand {
        let fast: Result<(Bool, Int), GATTError> = state.withLock { s in
            if let r = s.closedReason {
                return .failure(.disconnected(GATTDisconnectedError(reason: r, during: describe(.writeCommand, handle: handle))))
            }
            return .success((s.permits.isEmpty && !s.draining && !s.blocked, s.mtu))
        }
        let (canSend, mtu): (Bool, Int)
        switch fast {
        case .failure(let e): throw e
        case .success(let v): (canSend, mtu) = v
        }
        let budget = min(ATTMTU.writeValueBudget(mtu), ATTMTU.maximumAttributeValue)
        guard value.count <= budget else { return .tooLong(mtu: mtu, budget: budget) }
        guard canSend else { return .mustWait(blocked: false) }
        let sent: Result<ATTSendResult, TransportError> = withUnsafeTemporaryAllocation(byteCount: 3 + value.count, alignment: 1) { buf in
            buf[0] = ATTOpcode.writeCommand.rawValue
            buf[1] = UInt8(handle & 0xFF)
            buf[2] = UInt8(handle >> 8)
            value.withUnsafeBytes { v in
                if v.count > 0 { UnsafeMutableRawBufferPointer(rebasing: buf[3...]).copyMemory(from: v) }
            }
            do throws(TransportError) {
                return .success(try transport.trySend(UnsafeRawBufferPointer(buf)))
            } catch {
                return .failure(error)
            }
        }
        switch sent {
        case .success(.sent): return .sent
        case .success(.wouldBlock): return .mustWait(blocked: true)
        case .failure(let error): throw GATTError.sendFailure(error, operation: describe(.writeCommand, handle: handle))
        }
    }

    /// Queues one Write Command PDU for a permit (FIFO) and returns once it has been sent; `limit` bounds the wait.
    func waitForPermit(_ pdu: [UInt8], handle: UInt16, limit: Duration?, blocked: Bool) async throws(GATTError) {
        let id = makeID()
        do {
            try await withTaskCancellationHandler {
                try await withEngineContinuation { (c: EngineContinuation<Void>) in
                    let cancelled = Task.isCancelled
                    let (refusal, register, drain): (GATTError?, Bool, Bool) = state.withLock { s in
                        if let r = s.closedReason {
                            return (.disconnected(GATTDisconnectedError(reason: r, during: describe(.writeCommand, handle: handle))), false, false)
                        }
                        if cancelled { return (.cancelled(operation: describe(.writeCommand, handle: handle)), false, false) }
                        var deadline: ClockInstant?
                        if let limit {
                            let d = clock.now().advanced(by: limit)
                            deadline = d
                            armTimer(&s, at: d)
                        }
                        s.permits.append(PermitWaiter(id: id, pdu: pdu, handle: handle, deadline: deadline, limit: limit, continuation: c))
                        var register = false
                        if blocked {
                            s.blocked = true
                            register = armWritable(&s)
                        }
                        var drain = false
                        if !s.blocked && !s.draining {
                            s.draining = true
                            drain = true
                        }
                        return (nil, register, drain)
                    }
                    if let refusal {
                        c.resume(throwing: refusal)
                        return
                    }
                    if register { registerWritable() }
                    if drain { drainPermits() }
                }
            } onCancel: {
                cancel(id)
            }
        } catch {
            throw GATTError.from(error, operation: describe(.writeCommand, handle: handle))
        }
    }

    /// Sends queued write-without-response PDUs in FIFO order while the socket takes them. Only one drainer runs
    /// at a time (`draining`); it stops at `.wouldBlock` and POLLOUT resumes it.
    private func drainPermits() {
        while true {
            let head: PermitWaiter? = state.withLock { s in
                guard s.closedReason == nil, let w = s.permits.first else {
                    s.draining = false
                    return nil
                }
                s.permitInFlight = w.id
                return w
            }
            guard let head else { return }
            let result = trySend(head.pdu)
            let (resume, register, stop): (Resumption?, Bool, Bool) = state.withLock { s in
                s.permitInFlight = nil
                switch result {
                case .success(.sent):
                    guard s.permits.first?.id == head.id, let w = s.permits.popFirst() else { return (nil, false, false) }
                    return (.permit(w.continuation, .success(())), false, false)
                case .success(.wouldBlock):
                    s.blocked = true
                    s.draining = false
                    return (nil, armWritable(&s), true)
                case .failure(let error):
                    guard s.permits.first?.id == head.id, let w = s.permits.popFirst() else { return (nil, false, false) }
                    return (.permit(w.continuation, .failure(GATTError.sendFailure(error, operation: describe(.writeCommand, handle: w.handle)))), false, false)
                }
            }
            resume?.run()
            if register { registerWritable() }
            if stop { return }
        }
    }
}
