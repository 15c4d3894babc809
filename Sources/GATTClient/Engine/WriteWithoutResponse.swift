// Write Command with flow control (Core Spec 5.4 Vol 3 Part F §3.4.5.3; Part G §4.9.1): the fast path that
// sends on the caller's thread when the outbox is idle, and the FIFO of permit waiters the writer serves.
import ATTStack
import LinkCore

extension ATTEngine {
    /// The fast path of a write without response, on the loop's thread (a task that prefers the loop): one look at
    /// the state (closed, the budget, the outbox idle), the codec writes the Write Command's bytes on the stack from
    /// the caller's value (no ATTPDU, no copy on the heap), one send. Off the loop, and when others wait before it,
    /// the caller queues for a permit (`waitForPermit`), which the loop serves in order. True: the PDU went out;
    /// false: the caller must queue. A value over MTU-3 bytes is refused here (this host's limit, nothing sent).
    func trySendCommandFast(handle: UInt16, value: [UInt8]) throws(GATTError) -> Bool {
        do throws(ATTEncodeError) { try ATTPDU.validateAttributeHandle(handle, of: .writeCommand) } catch {
            throw .unsupported("\(describe(.writeCommand, handle: handle)) cannot be sent: \(error)")
        }
        guard loop.inEventLoop else { return false }
        let valueLength = value.count
        enum Claim { case closed(String), tooLong(mtu: Int, budget: Int), wait, claimed }
        let claim: Claim = state.access { s in
            if let r = s.closedReason { return .closed(r) }
            let budget = ATTMTU.writeValueLimit(s.mtu)
            guard valueLength <= budget else { return .tooLong(mtu: s.mtu, budget: budget) }
            // An idle outbox (no writer, not blocked, nothing waiting): this PDU is next in every order.
            guard !s.outbox.blocked, !s.outbox.writing, !hasWork(s) else { return .wait }
            return .claimed
        }
        switch claim {
        case .closed(let r):
            throw .disconnected(GATTDisconnectedError(reason: r, during: describe(.writeCommand, handle: handle)))
        case .tooLong(let mtu, let budget):
            throw localLimit(.writeCommand, handle: handle, length: valueLength, budget: budget, mtu: mtu)
        case .wait: return false
        case .claimed: break
        }
        let sent = withUnsafeTemporaryAllocation(byteCount: 3 + valueLength, alignment: 1) { buffer in
            send(UnsafeRawBufferPointer(rebasing: buffer[..<ATTPDU.encodeHandleValue(.writeCommand, handle: handle,
                                                                                     value: value[...], into: buffer)]))
        }
        switch sent {
        case .success(.sent): return true
        case .success(.wouldBlock):
            // Nothing was sent: the socket is full, so everything waits for POLLOUT, this command in the permit queue.
            let register = state.access { s in
                s.outbox.blocked = true
                return s.closedReason == nil && armWritable(&s)
            }
            if register { registerWritable() }
            return false
        case .failure(let error): throw GATTError.sendFailure(error, operation: describe(.writeCommand, handle: handle))
        }
    }

    /// Queues one Write Command for a permit (FIFO) and returns once it has been sent; `limit` bounds the wait.
    func waitForPermit(_ pdu: ATTPDU, handle: UInt16, valueLength: Int, limit: Duration?) async throws(GATTError) {
        // A waiter keeps the encoded bytes: the caller's value may change once this call returns.
        let bytes = pdu.bytes
        let id = makeID()
        do {
            try await withTaskCancellationHandler {
                try await withEngineContinuation { (c: EngineContinuation<Void>) in
                    let cancelled = Task.isCancelled
                    onLoop {
                        self.admitPermit(PermitWaiter(id: id, bytes: bytes, handle: handle, deadline: nil, limit: limit, continuation: c),
                                         valueLength: valueLength, cancelled: cancelled)
                    }
                }
            } onCancel: {
                onLoop { self.cancel(id) }
            }
        } catch {
            throw GATTError.from(error, operation: describe(.writeCommand, handle: handle))
        }
    }

    /// On the loop: a permit waiter joins the queue (its limit armed) and the writer runs, or it is refused.
    private func admitPermit(_ waiter: PermitWaiter, valueLength: Int, cancelled: Bool) {
        var w = waiter
        let refusal: GATTError? = state.access { s in
            if let r = s.closedReason {
                return .disconnected(GATTDisconnectedError(reason: r, during: describe(.writeCommand, handle: w.handle)))
            }
            if cancelled { return .cancelled(operation: describe(.writeCommand, handle: w.handle)) }
            let budget = ATTMTU.writeValueLimit(s.mtu)
            if valueLength > budget { return localLimit(.writeCommand, handle: w.handle, length: valueLength, budget: budget, mtu: s.mtu) }
            if let limit = w.limit {
                let d = clock.now().advanced(by: limit)
                w.deadline = d
                armTimer(&s, at: d)
            }
            s.outbox.permits.append(w)
            return nil
        }
        if let refusal { return w.continuation.resume(throwing: refusal) }
        flush()
    }
}
