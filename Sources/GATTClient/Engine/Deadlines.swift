// The engine's deadlines: the ATT transaction timeout of the request in flight (Core Spec 5.4 Vol 3 Part F
// §3.3.3: 30 s, then the bearer is closed), a closed peer's grace, and the permit waiters' limits. One wake-up.
import ATTStack
import LinkCore

extension ATTEngine {
    /// The ATT timeout from now: the deadline of a request written now.
    @inline(__always)
    func deadlineFromNow() -> ClockInstant {
        ClockInstant(nanoseconds: clock.now().nanoseconds &+ timeoutNanoseconds)
    }

    /// Makes sure a wake-up is armed no later than `deadline` (in the state), on the loop's timer. In steady state deadlines only
    /// grow, so this arms one wake-up per timeout period, not one per request.
    func armTimer(_ s: inout State, at deadline: ClockInstant) {
        if let armed = s.armed, armed.at <= deadline { return }
        s.armed?.wakeup.cancel()
        // Strong references in these closures on purpose: a weak reference would give the engine a side table and
        // put every retain and release of it on the runtime's slow path. Each closure ends when it runs or at close.
        let wakeup = clock.schedule(at: deadline, on: loop) { self.timerFired() }
        s.armed = (deadline, wakeup)
    }

    /// The wake-up fired (on the loop): acts only on deadlines that are still held by their owners and have passed.
    private func timerFired() {
        var resumptions: [Resumption] = []
        var closeReason: String?
        state.access { s in
            s.armed = nil
            guard s.closedReason == nil else { return }
            let now = clock.now()
            if let slot = s.requests.inFlight, slot.deadline <= now, let gone = slot.peerGone?.error {
                // The send met a closed peer and the reader never reported the end: the peer is gone.
                let op = describe(slot.opcode, handle: slot.handle)
                let reason = "\(gone.description) (no end of the connection was read within 1 s after it)"
                s.requests.inFlight = nil
                if let c = slot.continuation { resumptions.append(.request(c, .failure(GATTError.sendFailure(gone, operation: op)))) }
                resumptions += closeAll(&s, reason: reason)
                closeReason = reason
                return
            }
            if let slot = s.requests.inFlight, slot.deadline <= now {
                let waited = describe(slot.response, handle: nil)
                let on = slot.handle.map { " on handle \(ATTHex.handle($0))" + (name(of: $0).map { " (\($0))" } ?? "") } ?? ""
                let timeoutError = GATTTimeoutError(waitingFor: waited, handle: slot.handle,
                                                    handleName: slot.handle.flatMap { name(of: $0) }, after: timeout)
                let reason = "ATT timeout: no \(waited)\(on) within \(timeout.spoken) for \(describe(slot.opcode, handle: slot.handle)); "
                    + "the bearer was closed (Core Spec Vol 3 Part F §3.3.3)"
                s.requests.inFlight = nil
                if let c = slot.continuation { resumptions.append(.request(c, .failure(.timeout(timeoutError)))) }
                resumptions += closeAll(&s, reason: reason)
                closeReason = reason
                return
            }
            var next: ClockInstant? = s.requests.inFlight?.deadline
            let inFlight = s.outbox.permitInFlight
            let due = s.outbox.permits.removeAll { w in
                guard let d = w.deadline, inFlight != w.id else { return false }
                return d <= now
            }
            for w in due {
                let e = GATTTimeoutError(waitingFor: "a send permit for Write Command", handle: w.handle,
                                         handleName: name(of: w.handle), after: w.limit ?? .zero)
                resumptions.append(.permit(w.continuation, .failure(.timeout(e))))
            }
            for w in s.outbox.permits.elements {
                if let d = w.deadline { next = next.map { min($0, d) } ?? d }
            }
            if let next { armTimer(&s, at: next) }
        }
        for r in resumptions { r.run() }
        if let closeReason { transport.close(reason: closeReason) }
    }
}
