// The one outbox and its one writer, as BlueZ's src/shared/att.c `can_write_data` / `pick_next_send_op`: every
// PDU this side sends leaves through `pickNext`, in one order: answers to the peer and confirmations first
// (Core Spec 5.4 Vol 3 Part F §3.3.2, §3.4.7.3), then the slot's request, then write-without-response permits
// in FIFO order. The writer runs on the link's event loop, after each event that gave it work (`flush`), until
// nothing is left or the socket is full; POLLOUT resumes it.
import ATTStack
import LinkCore

/// What waits to be sent besides the slot's request, and who is sending.
struct Outbox {
    /// Answers to the peer's requests and confirmations of its indications (encoded), in the order they were made.
    var answers = FIFO<[UInt8]>()
    /// Write Commands waiting for a permit (room in the socket), in FIFO order.
    var permits = FIFO<ATTEngine.PermitWaiter>()
    /// The permit waiter whose PDU the writer is sending right now (cannot be cancelled any more).
    var permitInFlight: UInt64?
    /// The last send met a full socket (EAGAIN): nothing is sent until POLLOUT.
    var blocked = false
    /// A POLLOUT callback is registered with the transport.
    var writableArmed = false
    /// The writer is running (BlueZ's `writer_active`): an event during one of its sends (a transport that answers
    /// inside `trySend`) leaves the new work to it.
    var writing = false
}

extension ATTEngine {
    /// One PDU the writer sends (as the codec encoded it), and what it is for.
    struct Outgoing {
        enum Role {
            case answer
            case request(id: UInt64)
            case permit(id: UInt64)
            /// A Write Command sent by its caller's fast path (nobody waits in the state for it).
            case command

            /// Sent, it changes nothing in the state (a request is marked written when it is picked).
            var settledBySending: Bool {
                switch self {
                case .request, .command: return true
                case .answer, .permit: return false
                }
            }
        }
        var role: Role
        var payload: Payload

        /// What goes on the wire: an answer's or a Write Command's bytes, or a request's.
        enum Payload {
            case bytes([UInt8])
            case request(ATTEncodedPDU)

            /// The bytes, for the rare paths that keep or print them.
            var bytes: [UInt8] {
                switch self {
                case .bytes(let b): return b
                case .request(let p): return p.bytes
                }
            }
        }
    }

    /// What a send leaves to do after the lock: a caller to resume, an event, a POLLOUT wait to register.
    struct AfterSend {
        var resume: Resumption?
        var dropped: String?
        var register = false
    }

    /// The most answers (confirmations, answers to the peer's requests) held while the socket is full. The peer may
    /// have one request and one indication outstanding (Core Spec 5.4 Vol 3 Part F §3.3.2, §3.4.7.2); one that
    /// sends more while not reading our answers is flooding, and the excess answers are dropped, not queued.
    static let answerLimit = 8

    /// Something waits to be sent (in the state).
    func hasWork(_ s: State) -> Bool {
        !s.outbox.answers.isEmpty || s.requests.inFlight?.written == false || !s.outbox.permits.isEmpty
    }

    /// The next PDU to send, in the outbox's order (in the state); nil when nothing can go.
    func pickNext(_ s: inout State) -> Outgoing? {
        guard s.closedReason == nil else { return nil }
        if !s.outbox.answers.isEmpty, let answer = s.outbox.answers.popFirst() { return Outgoing(role: .answer, payload: .bytes(answer)) }
        if s.requests.inFlight?.written == false {
            // The deadline runs from the moment the PDU is written (§3.3.3).
            if s.requests.inFlight!.deferred {
                s.requests.inFlight!.deferred = false
                s.requests.inFlight!.deadline = deadlineFromNow()
            }
            s.requests.inFlight!.written = true
            return Outgoing(role: .request(id: s.requests.inFlight!.id), payload: .request(s.requests.inFlight!.bytes))
        }
        if !s.outbox.permits.isEmpty, let w = s.outbox.permits.first {
            s.outbox.permitInFlight = w.id
            return Outgoing(role: .permit(id: w.id), payload: .bytes(w.bytes))
        }
        return nil
    }

    /// The writer, on the loop: sends whatever `pickNext` chooses, one PDU after another, until nothing is left or
    /// the socket is full (then POLLOUT calls it again). Called after every event that may have given it work.
    func flush() {
        let claimed: Bool = state.access { s in
            guard !s.outbox.writing, !s.outbox.blocked, s.closedReason == nil, hasWork(s) else { return false }
            s.outbox.writing = true
            return true
        }
        guard claimed else { return }
        while let item = state.access({ s in pickNext(&s) }) {
            let result: Result<ATTSendResult, TransportError>
            switch item.payload {
            case .bytes(let bytes): result = send(bytes)
            case .request(let pdu): result = pdu.withUnsafeBytes { send($0) }
            }
            if case .success(.sent) = result, item.role.settledBySending { continue }
            var after = AfterSend()
            let goOn = state.access { s in settle(item.role, item.payload, result, &s, &after) }
            finish(after)
            if !goOn { break }
        }
        state.access { $0.outbox.writing = false }
    }

    /// Records what one send did (in the state); false: the writer stops (the socket is full).
    func settle(_ role: Outgoing.Role, _ payload: Outgoing.Payload, _ result: Result<ATTSendResult, TransportError>,
                _ s: inout State, _ after: inout AfterSend) -> Bool {
        switch (role, result) {
        case (.permit(let id), .success(.sent)):
            s.outbox.permitInFlight = nil
            if s.outbox.permits.first?.id == id, let w = s.outbox.permits.popFirst() {
                after.resume = .permit(w.continuation, .success(()))
            }
        case (.permit(let id), .failure(let error)):
            s.outbox.permitInFlight = nil
            if s.outbox.permits.first?.id == id, let w = s.outbox.permits.popFirst() {
                let op = describe(.writeCommand, handle: w.handle)
                after.resume = .permit(w.continuation, .failure(GATTError.sendFailure(error, operation: op)))
            }
        case (_, .success(.sent)), (.command, .failure):
            // A command's caller throws its own failure.
            break
        case (_, .success(.wouldBlock)):
            // Nothing was sent: the PDU keeps its place, and everything waits for POLLOUT.
            switch role {
            case .answer: if s.closedReason == nil { s.outbox.answers.prepend(payload.bytes) }
            case .request(let id):
                if s.requests.inFlight?.id == id {
                    s.requests.inFlight!.written = false
                    s.requests.inFlight!.deferred = true
                }
            case .permit: s.outbox.permitInFlight = nil
            case .command: break
            }
            s.outbox.blocked = true
            after.register = s.closedReason == nil && armWritable(&s)
            return false
        case (.answer, .failure(let error)):
            s.stats.droppedEvents += 1
            after.dropped = "could not send [\(ATTHex.string(payload.bytes, separator: " ", uppercase: true))] to the peer: \(error)"
        case (.request(let id), .failure(let error)) where Self.peerHasClosed(error):
            // The peer closed the link (EPIPE, ECONNRESET): the reader is about to read the end of it. This
            // request fails then, with the close's reason, after every PDU the peer sent before closing has been
            // delivered in order (a listener sees the notifications that came first). A named grace bounds the
            // wait: if the reader reports no end by then, the request fails as a disconnect with the send's error.
            if s.requests.inFlight?.id == id {
                s.requests.inFlight!.peerGone = PeerGone(error)
                let grace = ClockInstant(nanoseconds: clock.now().nanoseconds &+ Self.peerGoneGrace)
                if grace < s.requests.inFlight!.deadline { s.requests.inFlight!.deadline = grace }
                armTimer(&s, at: s.requests.inFlight!.deadline)
            }
        case (.request(let id), .failure(let error)):
            // The transport refused the PDU: fail this request and move on to the next one.
            if s.requests.inFlight?.id == id, let slot = s.requests.inFlight.take() {
                let op = describe(slot.opcode, handle: slot.handle)
                after.resume = slot.continuation.map { .request($0, .failure(GATTError.sendFailure(error, operation: op))) }
                promoteNext(&s)
            }
        }
        return true
    }

    /// Runs what `settle` left to do, after the state access.
    func finish(_ after: AfterSend) {
        after.resume?.run()
        if let text = after.dropped { events?(.dropped(text)) }
        if after.register { registerWritable() }
    }

    /// Sends one whole encoded PDU, without blocking.
    func send(_ bytes: [UInt8]) -> Result<ATTSendResult, TransportError> {
        bytes.withUnsafeBytes { send($0) }
    }

    /// Encodes `pdu` with the codec into a buffer on the stack (no allocation) and sends it whole, without blocking.
    func send(_ pdu: ATTPDU) -> Result<ATTSendResult, TransportError> {
        withUnsafeTemporaryAllocation(byteCount: pdu.encodedLength, alignment: 1) { buffer in
            send(UnsafeRawBufferPointer(rebasing: buffer[..<pdu.encode(validatedInto: buffer)]))
        }
    }

    /// Sends on the loop's thread (the transport's own loop when it has one: `trySendOnItsLoop`).
    @inline(__always)
    func send(_ buffer: UnsafeRawBufferPointer) -> Result<ATTSendResult, TransportError> {
        do throws(TransportError) {
            return .success(try transport.trySendOnItsLoop(buffer))
        } catch {
            return .failure(error)
        }
    }

    /// A send that failed because the peer is gone (the reader will see the end of the connection).
    static func peerHasClosed(_ error: TransportError) -> Bool {
        guard case .socket(let e) = error else { return false }
        return e.errno == .brokenPipe || e.errno == .connectionReset
    }

    // MARK: POLLOUT

    /// Returns true when the caller must call `registerWritable()` after unlocking.
    func armWritable(_ s: inout State) -> Bool {
        if s.outbox.writableArmed { return false }
        s.outbox.writableArmed = true
        return true
    }

    func registerWritable() {
        transport.whenWritable { self.writable() }
    }

    /// POLLOUT (or the transport closed): the socket takes data again, so the writer resumes where it stopped.
    private func writable() {
        onLoopAndWait {
            self.state.access { s in
                s.outbox.writableArmed = false
                s.outbox.blocked = false
            }
            self.flush()
        }
    }

    // MARK: answers to the peer

    /// Which counter an answer adds to.
    enum AnswerCounter { case peerRequest, confirmation }

    /// Queues an answer to the peer (a confirmation, an Error Response, an Exchange MTU Response) at the head of the
    /// outbox's order and sends it when this thread can be the writer. Beyond `answerLimit` held answers the peer is
    /// flooding: the answer is dropped and reported. Returns the answer's bytes (for the event that names them).
    @discardableResult
    func queueAnswer(_ answer: ATTPDU, counting counter: AnswerCounter?) -> [UInt8] {
        let bytes = answer.bytes
        enum Queued { case done, overflow(Int), write }
        let queued: Queued = state.access { s in
            switch counter {
            case .peerRequest?: s.stats.peerRequestsAnswered += 1
            case .confirmation?: s.stats.indicationsConfirmed += 1
            case nil: break
            }
            if s.closedReason != nil { return .done }
            if s.outbox.answers.count >= Self.answerLimit {
                s.stats.protocolViolations += 1
                s.stats.droppedEvents += 1
                return .overflow(s.outbox.answers.count)
            }
            s.outbox.answers.append(bytes)
            return .write
        }
        switch queued {
        case .done: break
        case .write: flush()
        case .overflow(let held):
            let v = GATTProtocolViolation(
                received: bytes, expected: "at most one outstanding request and one outstanding indication from the peer",
                problem: "the peer keeps sending requests or indications without reading our answers (\(held) answers already wait for room in the socket); this answer was dropped")
            events?(.protocolViolation(v, failed: nil))
        }
        return bytes
    }
}
