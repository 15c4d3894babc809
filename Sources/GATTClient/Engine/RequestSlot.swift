// The request slot: one request in flight per bearer and the FIFO of those waiting for it (Core Spec 5.4 Vol 3
// Part F §3.3.2), as BlueZ's src/shared/att.c keeps `pending_req` and `req_queue`; and the matching of a
// response to the request in flight.
import ATTStack
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
    /// `buffer`: a back-to-back writer's, reused from one request to the next (`ATTEncodingBuffer`).
    func encode(request pdu: ATTPDU, handle: UInt16?, into buffer: ATTEncodingBuffer? = nil) throws(GATTError) -> EncodedRequest {
        let opcode = pdu.opcode
        guard let response = opcode.responseOpcode, response != .handleValueConfirmation else {
            throw .unsupported("\(describe(opcode, handle: handle)) is not an ATT request")
        }
        do throws(ATTEncodeError) { try pdu.validate() } catch {
            throw .unsupported("\(describe(opcode, handle: handle)) cannot be sent: \(error)")
        }
        return EncodedRequest(bytes: buffer?.encode(pdu) ?? pdu.encoded, opcode: opcode, response: response)
    }

    /// Sends one request and waits for its decoded response (success response only: an Error Response throws
    /// `GATTError.attribute`). The ATT timeout starts when the PDU is written; cancellation releases the caller at
    /// once (a request already in flight keeps the slot until its response or timeout, as the spec requires).
    nonisolated(nonsending) func request(_ encoded: EncodedRequest, handle: UInt16?, valueLength: Int? = nil, budget: Int? = nil,
                                         ignoresCancellation: Bool = false) async throws(GATTError) -> ATTPDU {
        let bytes = encoded.bytes, opcode = encoded.opcode, response = encoded.response
        let id = makeID()
        do {
            // The executor-inheriting forms of withTaskCancellationHandler and of the continuation: the same handler
            // record and continuation, without the hops back to `#isolation` the isolated forms make after the
            // resumption (with a task executor preference, each hop takes the task's status lock). The operation
            // closure is nonisolated, so running on whatever generic executor resumed it is right; this function is
            // nonisolated(nonsending), so the caller's isolation is restored once, when `request` returns to it.
            return try await _unsafeInheritExecutor_withTaskCancellationHandler {
                try await _unsafeInheritExecutor_withUnsafeThrowingContinuation { u in
                    let waiter = RequestContinuation.task(engineContinuation(u))
                    submit(id: id, bytes: bytes, opcode: opcode, handle: handle, cancelled: !ignoresCancellation && Task.isCancelled,
                           refused: { waiter.resume(throwing: $0) }) { deadline, deferred, written in
                        Pending(id: id, bytes: bytes, opcode: opcode, response: response, handle: handle, valueLength: valueLength,
                                budget: budget, ignoresCancellation: ignoresCancellation, continuation: waiter,
                                deadline: deadline, written: written, deferred: deferred)
                    }
                }
            } onCancel: {
                if !ignoresCancellation { cancel(id) }
            }
        } catch {
            throw GATTError.from(error, operation: describe(opcode, handle: handle))
        }
    }

    /// `request`, back to back (`GATTClient.withBackToBackRequests`): the scope's one cancellation handler covers it,
    /// and on the reader thread the task reads its response inline (`readResponseInline`). Its ID is published
    /// before `submit` reads the scope's cancellation, so a cancellation is never missed.
    @inline(__always)
    nonisolated(nonsending) func request(_ encoded: EncodedRequest, handle: UInt16?, valueLength: Int?, budget: Int?,
                                         scope: RequestScope) async throws(GATTError) -> ATTPDU {
        let id = makeID()
        scope.inFlight.store(id, ordering: .sequentiallyConsistent)
        defer { scope.inFlight.store(0, ordering: .releasing) }
        submit(id: id, bytes: encoded.bytes, opcode: encoded.opcode, handle: handle, cancelled: scope.isCancelled,
               refused: { scope.deliver(id, .failure($0)) }) { deadline, deferred, written in
            Pending(id: id, bytes: encoded.bytes, opcode: encoded.opcode, response: encoded.response, handle: handle,
                    valueLength: valueLength, budget: budget, ignoresCancellation: false, continuation: .scope(scope, id: id),
                    deadline: deadline, written: written, deferred: deferred)
        }
        readResponseInline(id, scope)
        return try await scope.take(id)
    }

    /// On the reader thread (where a back-to-back caller continues after its last response), the response is read
    /// right here until the request's outcome is delivered, so that the task takes it without suspending: no
    /// continuation, no job, no executor hop. Anywhere else, or when the read stops early, the task waits for it
    /// (`RequestScope.take`). Meanwhile no other caller runs inline on this thread (they would hold this one up).
    @inline(__always)
    private func readResponseInline(_ id: UInt64, _ scope: RequestScope) {
        scope.readingThread.store(UInt(pthread_self()), ordering: .sequentiallyConsistent)
        executor.withoutInlineJobs {
            transport.readInline(until: { scope.resolvedID.load(ordering: .sequentiallyConsistent) == id })
        }
        scope.readingThread.store(0, ordering: .releasing)
    }

    /// A request moved here from an enhanced bearer that closed (`Resumption.resubmit`): submitted as a new one.
    func resubmit(_ p: Pending) {
        submit(id: p.id, bytes: p.bytes, opcode: p.opcode, handle: p.handle, cancelled: !p.ignoresCancellation && p.callerIsCancelled,
               refused: { p.continuation?.resume(throwing: $0) }) { deadline, deferred, written in
            var q = p
            q.deadline = deadline
            q.written = written
            q.deferred = deferred
            return q
        }
    }

    /// Puts a request in the slot (with its deadline armed) or in the queue behind it, or refuses it (a closed bearer,
    /// a cancelled caller): `refused` fails its caller, outside the lock. The request is made by `make` (given its
    /// deadline, whether the socket is full, whether this thread writes it now) right where it is kept, under the
    /// lock: it is never copied or moved through an optional on its way in (each costs value-witness calls).
    @inline(__always)
    private func submit(id: UInt64, bytes: ATTEncodedPDU, opcode: ATTOpcode, handle: UInt16?, cancelled: Bool,
                        refused: (GATTError) -> Void, _ make: (ClockInstant, Bool, Bool) -> Pending) {
        enum Admitted { case refused(GATTError), kept, write(Outgoing), writeThis }
        let admitted: Admitted = state.withLock { s in
            if let reason = s.closedReason {
                return .refused(.disconnected(GATTDisconnectedError(reason: reason, during: describe(opcode, handle: handle))))
            }
            if cancelled { return .refused(.cancelled(operation: describe(opcode, handle: handle))) }
            if s.requests.inFlight == nil {
                let deadline = deadlineFromNow()
                // No writer and not blocked means nothing else waits in the outbox (`WriterState`): this request is
                // next in its order, so this thread becomes the writer and writes it at once.
                let writesNow = !s.outbox.blocked && writer.compareExchange(
                    expected: WriterState.idle, desired: WriterState.writing, ordering: .acquiringAndReleasing).exchanged
                s.requests.inFlight = make(deadline, s.outbox.blocked, writesNow)
                armTimer(&s, at: deadline)
                if writesNow { return .writeThis }
                return claimWriter(&s).map { .write($0) } ?? .kept
            }
            s.requests.queue.append(make(ClockInstant(nanoseconds: 0), false, false))
            return .kept
        }
        switch admitted {
        case .refused(let error): refused(error)
        case .kept: break
        case .write(let first): runWriter(first)
        case .writeThis: writeClaimed(request: id, bytes)
        }
    }

    /// Moves the queue's first request into the empty slot, its deadline armed (under the lock).
    func promoteNext(_ s: inout State) {
        guard s.requests.inFlight == nil, s.closedReason == nil, var p = s.requests.queue.popFirst() else { return }
        p.deadline = deadlineFromNow()
        p.deferred = s.outbox.blocked
        armTimer(&s, at: p.deadline)
        s.requests.inFlight = p
    }

    /// Cancellation from the caller's task: a queued request leaves the queue; a request in flight keeps the slot
    /// but its caller is released at once; a permit waiter leaves the permit queue.
    func cancel(_ id: UInt64) {
        let resume: Resumption? = state.withLock { s in
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
            // A request queued on an enhanced bearer that closed moved to the unenhanced one (IDs are per client).
            notificationTarget?.cancel(id)
            return
        }
        resume.run()
    }

    /// A response (or Error Response) from the peer, decoded once by the router, matched to the request in flight:
    /// it leaves the slot whatever it says, and the next request enters (§3.3.2).
    func answer(_ received: Received, opcode op: ATTOpcode, raw pdu: [UInt8]) {
        // The hot path (the expected response) resumes with the decoded PDU as is; the rest goes through Resumption.
        var answered: RequestContinuation?
        var resume: Resumption?
        var write: Outgoing?
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
            guard s.requests.inFlight?.written == true, var slot = s.requests.inFlight.take() else {
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
            answeredCount.wrappingAdd(1, ordering: .relaxed)
            if let c = slot.continuation.take() {
                if let failure { resume = .request(c, .failure(failure)) } else { answered = c }
            } else {
                droppedText = "a \(op.name) for \(opText), whose caller was cancelled"
                s.stats.droppedEvents += 1
            }
            promoteNext(&s)
            write = claimWriter(&s)
        }
        if let c = answered.take(), case .pdu(let response) = received {
            executor.resumingInline { c.resume(returning: response) }
        } else if let resume {
            executor.resumingInline { resume.run() }
        }
        if let violation { events?(.protocolViolation(violation, failed: failedOp)) }
        if let droppedText { events?(.dropped(droppedText)) }
        if let write { runWriter(write) }
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
