// The request slot: one request in flight per bearer and the FIFO of those waiting for it (Core Spec 5.4 Vol 3
// Part F §3.3.2), as BlueZ's src/shared/att.c keeps `pending_req` and `req_queue`; and the matching of a
// response to the request in flight.
import ATTStack
import LinkCore

/// The request in flight (with its deadline) and the requests queued behind it, in submission order.
struct RequestSlot {
    var inFlight: ATTEngine.Pending?
    var queue = FIFO<ATTEngine.Pending>()
}

extension ATTEngine {
    /// A request as the codec encoded it, with the response that completes it.
    struct EncodedRequest {
        var bytes: ATTEncodedPDU
        var opcode: ATTOpcode
        var response: ATTOpcode
    }

    /// Checks and encodes a request with the codec, once (§3.4: no zero handles); the writer sends these bytes.
    /// Synchronous, so that the PDU value never lives in an async frame.
    func encode(request pdu: ATTPDU, handle: UInt16?) throws(GATTError) -> EncodedRequest {
        let opcode = pdu.opcode
        guard let response = opcode.responseOpcode, response != .handleValueConfirmation else {
            throw .unsupported("\(describe(opcode, handle: handle)) is not an ATT request")
        }
        do throws(ATTEncodeError) { try pdu.validate() } catch {
            throw .unsupported("\(describe(opcode, handle: handle)) cannot be sent: \(error)")
        }
        return EncodedRequest(bytes: pdu.encoded, opcode: opcode, response: response)
    }

    /// Sends one request and waits for its decoded response (success response only: an Error Response throws
    /// `GATTError.attribute`). The ATT timeout starts when the PDU is written; cancellation releases the caller at
    /// once (a request already in flight keeps the slot until its response or timeout, as the spec requires).
    /// `writeValueLength`: a Write Request's value, checked against the ATT_MTU in effect when it is submitted
    /// (refused locally, nothing sent, when it is longer than MTU-3: Part F §3.4.5.1).
    /// On the loop's thread (a task that prefers the loop) it is submitted and written at once; from elsewhere it is
    /// posted to the loop. Either way the caller is resumed by the loop when its response has been read.
    /// `pick`: the least busy open bearer of the client takes it (this engine is the unenhanced one), chosen on the
    /// loop when the request is submitted, so that parallel callers spread over the bearers.
    nonisolated(nonsending) func request(_ encoded: EncodedRequest, handle: UInt16?, valueLength: Int? = nil, budget: Int? = nil,
                                         writeValueLength: Int? = nil, ignoresCancellation: Bool = false,
                                         pick: Bool = false) async throws(GATTError) -> ATTPDU {
        let bytes = encoded.bytes, opcode = encoded.opcode, response = encoded.response
        let id = makeID()
        do {
            // This function is nonisolated(nonsending): the handler and the continuation run on the caller's
            // executor (the link's loop for a command), and the caller is resumed there once the response is read.
            return try await withTaskCancellationHandler {
                try await withEngineContinuation { (u: EngineContinuation<ATTPDU>) in
                    let p = Pending(id: id, bytes: bytes, opcode: opcode, response: response, handle: handle, valueLength: valueLength,
                                    budget: budget, ignoresCancellation: ignoresCancellation, continuation: u,
                                    deadline: ClockInstant(nanoseconds: 0), deferred: false)
                    let cancelled = !ignoresCancellation && Task.isCancelled
                    if !pick && loop.inEventLoop {
                        // A task on the loop: submitted (and written) right here, no closure, no post.
                        submit(p, cancelled: cancelled, writeValueLength: writeValueLength)
                        return
                    }
                    onLoop {
                        let bearer = pick ? self.pickOnLoop() : self
                        bearer.onLoop { bearer.submit(p, cancelled: cancelled, writeValueLength: writeValueLength) }
                    }
                }
            } onCancel: {
                if !ignoresCancellation { onLoop { self.cancel(id) } }
            }
        } catch {
            throw GATTError.from(error, operation: describe(opcode, handle: handle))
        }
    }

    /// On the unenhanced bearer's loop: this bearer while it is idle or alone, else the open bearer holding the
    /// fewest requests (Vol 3 Part F §3.2.11: requests may go out on any bearer). A closed unenhanced bearer means a
    /// closed client: it refuses the request, named. A bearer on a loop of its own (opened without the link's loop)
    /// is asked through its loop (an enhanced engine never waits for this one, so that cannot deadlock).
    func pickOnLoop() -> ATTEngine {
        let (mine, others) = state.access { s in (s.load, s.enhanced) }
        guard !others.isEmpty, var bestLoad = mine, bestLoad > 0 else { return self }
        var best = self
        for e in others {
            let load = e.loop === loop ? e.state.access({ $0.load }) : e.load
            guard let l = load, l < bestLoad else { continue }
            best = e
            bestLoad = l
            if l == 0 { break }
        }
        return best
    }

    /// A request moved here from an enhanced bearer that closed (`Resumption.resubmit`): submitted as a new one.
    func resubmit(_ p: Pending) {
        submit(p, cancelled: false, writeValueLength: nil)
    }

    /// On the loop: puts a request in the slot (with its deadline armed, written at once when the outbox is idle)
    /// or in the queue behind it, or refuses it (a closed bearer, a cancelled caller, a value over the ATT_MTU's
    /// budget).
    func submit(_ request: consuming Pending, cancelled: Bool, writeValueLength: Int?) {
        let p = request
        enum Admitted { case refused(GATTError), kept, write }
        let admitted: Admitted = state.access { s in
            if let reason = s.closedReason {
                return .refused(.disconnected(GATTDisconnectedError(reason: reason, during: describe(p.opcode, handle: p.handle))))
            }
            if cancelled { return .refused(.cancelled(operation: describe(p.opcode, handle: p.handle))) }
            if let length = writeValueLength, let handle = p.handle {
                let budget = ATTMTU.writeValueLimit(s.mtu)
                if length > budget { return .refused(localLimit(p.opcode, handle: handle, length: length, budget: budget, mtu: s.mtu)) }
                p.budget = budget
            }
            if s.requests.inFlight == nil {
                p.deadline = deadlineFromNow()
                p.deferred = s.outbox.blocked
                armTimer(&s, at: p.deadline)
                s.requests.inFlight = p
                return .write
            }
            s.requests.queue.append(p)
            return .kept
        }
        switch admitted {
        case .refused(let error): p.continuation?.resume(throwing: error)
        case .kept: break
        case .write: flush()
        }
    }

    /// A value longer than this side lets go out (nothing is sent): Invalid Attribute Value Length, refused here.
    func localLimit(_ op: ATTOpcode, handle: UInt16, length: Int, budget: Int, mtu: Int) -> GATTError {
        .attribute(GATTAttributeError(code: .invalidAttributeValueLength, requestOpcode: op, handle: handle,
                                      handleName: name(of: handle), rejectedBy: .local, valueLength: length,
                                      budget: budget, mtu: mtu))
    }

    /// Moves the queue's first request into the empty slot, its deadline armed (in the state).
    func promoteNext(_ s: inout State) {
        guard s.requests.inFlight == nil, s.closedReason == nil, let p = s.requests.queue.popFirst() else { return }
        p.deadline = deadlineFromNow()
        p.deferred = s.outbox.blocked
        armTimer(&s, at: p.deadline)
        s.requests.inFlight = p
    }

    /// Cancellation from the caller's task: a queued request leaves the queue; a request in flight keeps the slot
    /// but its caller is released at once; a permit waiter leaves the permit queue.
    /// `forwarded`: asked by another bearer of the client that does not hold it (a request moves between bearers).
    func cancel(_ id: UInt64, forwarded: Bool = false) {
        guard loop.inEventLoop else { return loop.sync { self.cancel(id, forwarded: forwarded) } }
        let resume: Resumption? = state.access { s in
            if s.requests.inFlight?.id == id, let c = s.requests.inFlight?.continuation {
                s.requests.inFlight!.continuation = nil
                let op = describe(s.requests.inFlight!.opcode, handle: s.requests.inFlight!.handle)
                return .request(c, .failure(.cancelled(operation: op + " (still in flight; its response will be dropped)")))
            }
            if let p = s.requests.queue.remove(where: { $0.id == id }), let c = p.continuation {
                return .request(c, .failure(.cancelled(operation: describe(p.opcode, handle: p.handle))))
            }
            if s.outbox.permitInFlight != id, let w = s.outbox.permits.remove(where: { $0.id == id }) {
                return .permit(w.continuation, .failure(.cancelled(operation: describe(.writeCommand, handle: w.handle))))
            }
            return nil
        }
        guard let resume else {
            // IDs are per client: the request went out on another bearer (the one the client picked on the loop),
            // or it was queued on an enhanced bearer that closed and moved to the unenhanced one.
            guard !forwarded else { return }
            if let primary = notificationTarget {
                primary.onLoop { primary.cancel(id, forwarded: true) }
            } else {
                for e in state.access({ $0.enhanced }) { e.onLoop { e.cancel(id, forwarded: true) } }
            }
            return
        }
        resume.run()
    }

    /// A response (or Error Response) from the peer, decoded once by the router, matched to the request in flight:
    /// it leaves the slot whatever it says, and the next request enters (§3.3.2).
    func answer(_ received: Received, opcode op: ATTOpcode, raw pdu: [UInt8]) {
        // The hot path (the expected response) resumes with the decoded PDU as is; the rest goes through Resumption.
        var answered: EngineContinuation<ATTPDU>?
        var resume: Resumption?
        var violation: GATTProtocolViolation?
        var failedOp: String?
        var droppedText: String?
        state.access { s in
            if s.closedReason != nil {
                // A response that was already on its way when the bearer closed (after an ATT timeout, say).
                droppedText = "a \(op.name) that arrived after the bearer closed"
                s.stats.droppedEvents += 1
                return
            }
            // The slot is moved out (not copied): the request leaves the state here whatever the response says.
            guard s.requests.inFlight?.written == true, let slot = s.requests.inFlight.take() else {
                violation = GATTProtocolViolation(received: pdu, expected: "no response (no request in flight)",
                                                  problem: "an unsolicited \(op.name)")
                s.stats.protocolViolations += 1
                return
            }
            // Built only on the slow paths (a violation, a dropped response): the hot path formats no strings.
            var opText: String { describe(slot.opcode, handle: slot.handle) }
            let failure = mismatch(received, op, pdu, to: slot, mtu: s.mtu, &violation)
            if violation != nil {
                s.stats.protocolViolations += 1
                failedOp = opText
            }
            s.answered += 1
            if let c = slot.continuation.take() {
                if let failure { resume = .request(c, .failure(failure)) } else { answered = c }
            } else {
                droppedText = "a \(op.name) for \(opText), whose caller was cancelled"
                s.stats.droppedEvents += 1
            }
            promoteNext(&s)
        }
        // The next request goes out before the caller's task runs (its job runs on the loop after this event).
        flush()
        if let c = answered.take(), case .pdu(let response) = received {
            c.resume(returning: response)
        } else if let resume {
            resume.run()
        }
        if let violation { events?(.protocolViolation(violation, failed: failedOp)) }
        if let droppedText { events?(.dropped(droppedText)) }
    }

    /// Why a response fails `slot`'s caller, nil when it is the success response: the peer's Error Response, or a
    /// violation (also set in `violation`): too long for the ATT_MTU (§3.2.8), malformed, or for another request.
    private func mismatch(_ received: Received, _ op: ATTOpcode, _ pdu: [UInt8], to slot: Pending,
                          mtu: Int, _ violation: inout GATTProtocolViolation?) -> GATTError? {
        var expected: String { "\(slot.response.description) or Error Response for \(slot.opcode.name)" }
        func violated(_ expected: String, _ problem: String) -> GATTError {
            let v = GATTProtocolViolation(received: pdu, expected: expected, problem: problem)
            violation = v
            return .protocolViolation(v)
        }
        if pdu.count > mtu {
            // Core Spec 5.4 Vol 3 Part F §3.2.8: no PDU is longer than ATT_MTU.
            return violated(expected, "a \(pdu.count)-byte \(op.name), longer than the ATT_MTU of \(mtu)")
        }
        switch received {
        case .pdu(.errorResponse(let request, let handle, let code)):
            guard request == slot.opcode else {
                return violated(expected, "an Error Response for \(request.description) while \(slot.opcode.description) is in flight")
            }
            let shownHandle = handle != 0 ? handle : (slot.handle ?? 0)
            return .attribute(GATTAttributeError(
                code: code, requestOpcode: slot.opcode, handle: shownHandle, handleName: name(of: shownHandle),
                rejectedBy: .peer, valueLength: slot.valueLength, budget: slot.budget, mtu: mtu))
        case .pdu where op == slot.response:
            return nil
        case .malformed(let error) where op == slot.response || op == .errorResponse:
            return violated(op == .errorResponse ? expected : "a well-formed \(slot.response.name)", error.description)
        case .pdu, .malformed:
            return violated(expected, "a \(op.description) while \(slot.opcode.description) is in flight")
        }
    }
}
