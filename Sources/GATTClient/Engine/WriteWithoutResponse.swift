// Write Command with flow control (Core Spec 5.4 Vol 3 Part F §3.4.5.3; Part G §4.9.1): the fast path that
// sends on the caller's thread when the outbox is idle, and the FIFO of permit waiters the writer serves.
import ATTStack

extension ATTEngine {
    /// What the fast path of a write without response did.
    enum FastCommand {
        /// The PDU went out.
        case sent
        /// The caller must queue for a permit (`waitForPermit`): the socket is full or others wait before it.
        case mustWait
        /// The value does not fit one Write Command at this MTU: nothing was sent.
        case tooLong(mtu: Int, budget: Int)
    }

    /// The fast path of a write without response: one state check under the lock (closed, the budget, the outbox
    /// idle), which makes this thread the writer; the codec encodes on the stack; one send.
    func trySendCommandFast(_ pdu: ATTPDU, handle: UInt16, valueLength: Int) throws(GATTError) -> FastCommand {
        do throws(ATTEncodeError) { try pdu.validate() } catch {
            throw .unsupported("\(describe(.writeCommand, handle: handle)) cannot be sent: \(error)")
        }
        enum Claim { case closed(String), tooLong(mtu: Int, budget: Int), wait, claimed }
        let claim: Claim = state.withLock { s in
            if let r = s.closedReason { return .closed(r) }
            let budget = ATTMTU.writeValueLimit(s.mtu)
            guard valueLength <= budget else { return .tooLong(mtu: s.mtu, budget: budget) }
            // Idle (no writer, not blocked) means nothing waits in the outbox: this PDU is next in every order.
            guard !s.outbox.blocked, writer.compareExchange(expected: WriterState.idle, desired: WriterState.writing,
                                                           ordering: .acquiringAndReleasing).exchanged else { return .wait }
            return .claimed
        }
        switch claim {
        case .closed(let r):
            throw .disconnected(GATTDisconnectedError(reason: r, during: describe(.writeCommand, handle: handle)))
        case .tooLong(let mtu, let budget): return .tooLong(mtu: mtu, budget: budget)
        case .wait: return .mustWait
        case .claimed: break
        }
        let result = send(pdu)
        if case .success(.sent) = result, releaseWriter() { return .sent }
        if let next = settled(.command, .bytes([]), result) { runWriter(next) }
        switch result {
        case .success(.sent): return .sent
        case .success(.wouldBlock): return .mustWait
        case .failure(let error): throw GATTError.sendFailure(error, operation: describe(.writeCommand, handle: handle))
        }
    }

    /// Queues one Write Command for a permit (FIFO) and returns once it has been sent; `limit` bounds the wait.
    func waitForPermit(_ pdu: ATTPDU, handle: UInt16, limit: Duration?) async throws(GATTError) {
        // A waiter keeps the encoded bytes: the caller's value may change once this call returns.
        let bytes = pdu.bytes
        let id = makeID()
        do {
            try await withTaskCancellationHandler {
                try await withEngineContinuation { (c: EngineContinuation<Void>) in
                    let cancelled = Task.isCancelled
                    let (refusal, write): (GATTError?, Outgoing?) = state.withLock { s in
                        if let r = s.closedReason {
                            return (.disconnected(GATTDisconnectedError(reason: r, during: describe(.writeCommand, handle: handle))), nil)
                        }
                        if cancelled { return (.cancelled(operation: describe(.writeCommand, handle: handle)), nil) }
                        var deadline: ClockInstant?
                        if let limit {
                            let d = clock.now().advanced(by: limit)
                            deadline = d
                            armTimer(&s, at: d)
                        }
                        s.outbox.permits.append(PermitWaiter(id: id, bytes: bytes, handle: handle, deadline: deadline,
                                                             limit: limit, continuation: c))
                        return (nil, claimWriter(&s))
                    }
                    if let refusal {
                        c.resume(throwing: refusal)
                        return
                    }
                    if let write { runWriter(write) }
                }
            } onCancel: {
                cancel(id)
            }
        } catch {
            throw GATTError.from(error, operation: describe(.writeCommand, handle: handle))
        }
    }
}
