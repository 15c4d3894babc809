// The checker's hold on one ATT bearer: every PDU it sends and every PDU the server sends, in one log with one
// monotonic clock, read by the transport's one reader. No GATT client engine in between, so a duplicate, a late or an
// unsolicited response is seen as it came (the engine would drop or hide it). Core 5.4 Vol 3 Part F §3.3.
import ATTStack
import LinkCore

/// One PDU of the check, either way.
public struct ProbeRecord: Sendable {
    /// Time since the check began.
    public var time: Duration
    /// Sent by the checker (true) or received from the server.
    public var sent: Bool
    public var bytes: [UInt8]

    /// The PDU as the codec decodes it (`ATTPDU.description`), or why it does not decode, with its bytes.
    public var decoded: String {
        do { return try ATTPDU.decode(bytes).description } catch {
            // The checker's own malformed probes (handle 0x0000, an unassigned opcode) and a server's broken PDUs.
            guard let first = bytes.first else { return "empty PDU" }
            return "\(ATTOpcode(first)) [\(ATTHex.string(bytes, separator: " "))] (malformed: \(error.field): \(error.problem))"
        }
    }

    /// Seconds since the check began.
    public var seconds: Double {
        let c = time.components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}

/// Why the bearer cannot be used any more.
public enum ProbeEnd: Error, Sendable {
    /// The request logged at `request` got no answer within the limit (Vol 3 Part F §3.3.3): nothing more may be sent.
    /// `strays`: the responses that came meanwhile and answer another request (log indices).
    case timedOut(request: Int, limit: Duration, strays: [Int])
    /// The transport closed.
    case closed(TransportError)
    /// A send failed.
    case sendFailed(TransportError)
    /// The check reached its own bound (its whole-run deadline or request budget), named in the reason.
    case limitReached(String)
}

/// A request and what answered it: log indices.
public struct ProbeExchange: Sendable {
    public var request: Int
    public var answer: Int
    /// The answer, decoded (nil when it did not decode).
    public var pdu: ATTPDU?
    /// Responses that came while the request was outstanding but answer another request (log indices).
    public var strays: [Int]
}

/// Drives one ATT bearer at the PDU level: sends what the codec made, waits for the next PDU from the server.
public final class ATTProbe: ATTTransportSink {
    let transport: any ATTTransport
    let clock = MonotonicClock()
    let start: ClockInstant

    /// The most PDUs the log stores besides the answers and the checker's own: a server that floods notifications
    /// or stray responses costs counts past it, never memory (the log is the check's one growing store).
    public static let storedPDULimit = 4096

    struct State {
        var log: [ProbeRecord] = []
        /// Inbound PDUs stored that answer no request (notifications, indications, strays); at most storedPDULimit.
        var unsolicitedStored = 0
        /// Inbound PDUs past the limit, counted by opcode and not stored.
        var notStored: [UInt8: Int] = [:]
        /// The request outstanding (its opcode) and whether an answer to it has come: that answer is always stored.
        var outstanding: (opcode: ATTOpcode, answered: Bool)?
        /// The log index of each received PDU, in order.
        var inbound: [Int] = []
        /// How many of `inbound` the check has looked at.
        var examined = 0
        var closed: TransportError?
        var waiter: (token: UInt64, continuation: CheckedContinuation<Void, Never>)?
        var nextToken: UInt64 = 0
    }

    /// Guards the log and the one waiter (the reader's thread appends, the check's task reads and waits).
    let state = Lock(State())

    /// Starts logging at `start` (the check's time zero). The caller hands PDUs from the bearer to this sink.
    public init(transport: any ATTTransport, start: ClockInstant = MonotonicClock().now()) {
        self.transport = transport
        self.start = start
    }

    public var log: [ProbeRecord] { state.withLock { $0.log } }

    public func record(_ index: Int) -> ProbeRecord { state.withLock { $0.log[index] } }

    /// How many PDUs have come from the server.
    public var inboundCount: Int { state.withLock { $0.inbound.count } }

    /// The PDUs received past `storedPDULimit` and not stored, by opcode.
    public var notStored: [UInt8: Int] { state.withLock { $0.notStored } }

    /// How many PDUs the log holds.
    public var storedCount: Int { state.withLock { $0.log.count } }

    public func transport(didReceive pdu: [UInt8]) {
        let now = clock.now().duration(since: start)
        // Indications are confirmed at once (Vol 3 Part F §3.4.7.2), so that the server's next one is not held.
        let confirm = pdu.first == ATTOpcode.handleValueIndication.rawValue
        let (waiter, stored) = state.withLock { s -> (CheckedContinuation<Void, Never>?, Bool) in
            let first = pdu.first ?? 0
            if let o = s.outstanding, !o.answered, Self.answers(o.opcode, first) {
                s.outstanding?.answered = true
            } else if s.unsolicitedStored < Self.storedPDULimit {
                s.unsolicitedStored += 1
            } else {
                s.notStored[first, default: 0] += 1
                return (nil, false)
            }
            s.log.append(ProbeRecord(time: now, sent: false, bytes: pdu))
            s.inbound.append(s.log.count - 1)
            defer { s.waiter = nil }
            return (s.waiter?.continuation, true)
        }
        waiter?.resume()
        // A confirmation past the limit is sent but not logged, as its indication was not.
        if confirm { _ = try? sendNow(ATTPDU.handleValueConfirmation.bytes, logged: stored) }
    }

    public func transport(didCloseWith reason: TransportError) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.closed = reason
            defer { s.waiter = nil }
            return s.waiter?.continuation
        }
        waiter?.resume()
    }

    /// Logs and sends `bytes` at once; false when the socket is full.
    @discardableResult
    private func sendNow(_ bytes: [UInt8], logged: Bool = true) throws(TransportError) -> Bool {
        let now = clock.now().duration(since: start)
        let result: ATTSendResult
        do {
            result = try bytes.withUnsafeBytes { p in try transport.trySend(p) }
        } catch let error as TransportError {
            throw error
        } catch {
            throw .closedLocally(reason: "\(error)")
        }
        guard result == .sent else { return false }
        if logged { state.withLock { $0.log.append(ProbeRecord(time: now, sent: true, bytes: bytes)) } }
        return true
    }

    /// Sends one PDU; returns its log index. The check has at most one PDU in flight, so a full socket (EAGAIN) is
    /// a link that no longer drains: the check ends there rather than wait on it.
    public func send(_ bytes: [UInt8]) async throws(ProbeEnd) -> Int {
        if let closed = state.withLock({ $0.closed }) { throw .closed(closed) }
        do {
            if try sendNow(bytes) { return state.withLock { $0.log.count - 1 } }
        } catch {
            throw .sendFailed(error)
        }
        throw .sendFailed(.closedLocally(reason: "the socket's send buffer is full with one PDU in flight: the link does not drain"))
    }

    /// Waits until more than `count` PDUs have come from the server, or `deadline`: whether they have.
    public func awaitInbound(beyond count: Int, until deadline: ClockInstant) async -> Bool {
        let token = state.withLock { s in s.nextToken += 1; return s.nextToken }
        let wakeup = clock.schedule(at: deadline) { [self] in
            let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
                guard s.waiter?.token == token else { return nil }
                defer { s.waiter = nil }
                return s.waiter?.continuation
            }
            waiter?.resume()
        }
        defer { wakeup.cancel() }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = clock.now()
            let ready = state.withLock { s -> Bool in
                if s.inbound.count > count || s.closed != nil || now >= deadline { return true }
                s.waiter = (token, c)
                return false
            }
            if ready { c.resume() }
        }
        return state.withLock { $0.inbound.count > count }
    }

    /// Whether `answer` completes a request with opcode `request`: its success response or an Error Response.
    /// Any Error Response counts (one naming another opcode is still this request's answer: error-echo judges it).
    static func answers(_ request: ATTOpcode, _ answer: UInt8) -> Bool {
        answer == ATTOpcode.errorResponse.rawValue || request.responseOpcode?.rawValue == answer
    }

    /// The responses received and not yet examined (log indices), now examined: nothing was waiting for them.
    func drain() -> [Int] {
        state.withLock { s in
            defer { s.examined = s.inbound.count }
            return s.inbound[s.examined...].filter { i in s.log[i].bytes.first.map { ATTOpcode($0).kind == .response } ?? false }
        }
    }

    /// Sends a request and waits up to `limit` for what answers it. Responses that came before it (unexamined since
    /// the last exchange) or that answer another request are the exchange's strays. Throws `.timedOut` when nothing
    /// answers in time (Vol 3 Part F §3.3.3).
    public func request(_ bytes: [UInt8], limit: Duration) async throws(ProbeEnd) -> ProbeExchange {
        var strays = drain()
        let opcode = ATTOpcode(bytes[0])
        state.withLock { $0.outstanding = (opcode, false) }
        defer { state.withLock { $0.outstanding = nil } }
        let index = try await send(bytes)
        let deadline = clock.now().advanced(by: limit)
        while true {
            let seen = state.withLock { $0.examined }
            let arrived = await awaitInbound(beyond: seen, until: deadline)
            let (next, closed) = state.withLock { s -> (Int?, TransportError?) in
                guard arrived else { return (nil, s.closed) }
                s.examined += 1
                return (s.inbound[seen], s.closed)
            }
            guard let next else {
                if let closed { throw .closed(closed) }
                throw .timedOut(request: index, limit: limit, strays: strays)
            }
            let got = record(next).bytes
            guard let first = got.first else { continue }
            if Self.answers(opcode, first) {
                return ProbeExchange(request: index, answer: next, pdu: try? ATTPDU.decode(got), strays: strays)
            }
            if ATTOpcode(first).kind == .response { strays.append(next) }
        }
    }

    /// Waits `period` and returns the responses that came since the last exchange (none is due: nothing is outstanding).
    public func quiet(_ period: Duration) async throws(ProbeEnd) -> [Int] {
        let deadline = clock.now().advanced(by: period)
        var count = inboundCount
        while await awaitInbound(beyond: count, until: deadline) { count = inboundCount }
        if let closed = state.withLock({ $0.closed }) { throw .closed(closed) }
        return drain()
    }
}
