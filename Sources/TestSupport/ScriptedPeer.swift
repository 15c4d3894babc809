// An in-memory ATTTransport with a scripted peer, in the style of BlueZ's unit/test-gatt.c: a list of the PDUs
// the peer expects, each followed by the peer's replies (Core Spec 5.4 Vol 3 Part F §3.4's message sequences).
// A mismatch is recorded with both byte strings. Unscripted, it is the far end of a server under test: the test
// injects requests and takes what the server sent. No XCTest here (the fuzzer links this module).
import ATTStack
import LinuxBluetooth
import LinkCore
import Dispatch
import Foundation
import GATTClient

/// "12 34 ab" -> [0x12, 0x34, 0xAB]
public func hex(_ s: String) -> [UInt8] {
    s.split(whereSeparator: { $0 == " " || $0 == "\n" }).map { UInt8($0, radix: 16)! }
}

public func show(_ b: [UInt8]?) -> String { b.map { ATTHex.string($0, separator: " ") } ?? "nil" }

/// A 16-bit value little-endian, as ATT carries it (Vol 3 Part F §3.3).

/// One step of a script.
public enum Step: Sendable {
    /// The client must send exactly these bytes next.
    case client([UInt8])
    /// The peer sends these bytes (after the preceding client step matched).
    case server([UInt8])
    /// The peer closes the connection.
    case serverClose
    /// The peer holds the following replies until the test calls `grantScriptStep()`.
    case pause
    /// (Responder mode) the following replies go out after this many microseconds (network latency).
    case delay(Int)
    /// Runs an action on the reader queue, in order with the replies.
    case run(@Sendable () -> Void)
}

/// Builds a script from BlueZ-style pairs: `raw(client, server...)`.
public func raw(_ client: String, _ server: String...) -> [Step] {
    [.client(hex(client))] + server.map { .server(hex($0)) }
}

/// A transport whose peer follows a script. Deliveries run on one serial queue (the "reader thread").
/// `sendCapacity` simulates a full socket: each send uses one unit; at zero, sends report `.wouldBlock` until
/// `grantWritable(_:)` adds room and fires the POLLOUT callbacks.
public final class ScriptedPeer: ATTTransport, @unchecked Sendable {
    // @unchecked: every mutable property lives in `state`, guarded by its lock.
    struct State {
        var steps: [Step]
        var next = 0
        var sink: (any ATTTransportSink)?
        var sent: [[UInt8]] = []
        var failures: [String] = []
        var closed = false
        var closeReason: String?
        var capacity: Int?
        var writableCallbacks: [@Sendable () -> Void] = []
        var sentWaiters: [(count: Int, once: OnceBox<Void>)] = []
        /// Replies the client triggers without a script (a responder).
        var responder: (@Sendable ([UInt8]) -> [Step])?
        var strict = true
        /// How many of `sent` `next(timeout:)` has handed out.
        var taken = 0
    }
    let state: Lock<State>
    let queue = DispatchQueue(label: "scripted-peer.reader")
    /// Signalled on every PDU sent and on close, for `next(timeout:)`.
    let arrived = DispatchSemaphore(value: 0)
    public let label: String

    public init(_ steps: [Step], label: String = "scripted", capacity: Int? = nil) {
        self.label = label
        state = Lock(State(steps: steps, capacity: capacity))
    }

    /// The far end of a server under test: no script; the test injects PDUs and takes what was sent.
    public init(unscripted label: String) {
        self.label = label
        var s = State(steps: [])
        s.strict = false
        state = Lock(s)
    }

    /// A peer that answers every client PDU with `responder` (no script).
    public init(label: String = "responder", responder: @escaping @Sendable ([UInt8]) -> [[UInt8]]) {
        self.label = label
        var s = State(steps: [])
        s.responder = { pdu in responder(pdu).map { Step.server($0) } }
        s.strict = false
        state = Lock(s)
    }

    /// A peer that answers every client PDU with steps: replies, `.delay`, `.serverClose`.
    /// `capacity` as in the scripted form: sends beyond it report `.wouldBlock` until `grantWritable(_:)`.
    public init(label: String = "responder", capacity: Int? = nil, stepResponder: @escaping @Sendable ([UInt8]) -> [Step]) {
        self.label = label
        var s = State(steps: [], capacity: capacity)
        s.responder = stepResponder
        s.strict = false
        state = Lock(s)
    }

    public func start(_ sink: any ATTTransportSink) {
        let initial: [Step] = state.withLock { s in
            s.sink = sink
            return takeServerSteps(&s)
        }
        deliver(initial)
    }

    /// Server steps at the head of the script (replies due now).
    private func takeServerSteps(_ s: inout State) -> [Step] {
        var out: [Step] = []
        while s.next < s.steps.count {
            if case .client = s.steps[s.next] { break }
            if case .pause = s.steps[s.next] { break }
            out.append(s.steps[s.next])
            s.next += 1
        }
        return out
    }

    /// Delivers the replies held by a `.pause` at the head of the script.
    public func grantScriptStep() {
        let steps: [Step] = state.withLock { s in
            guard s.next < s.steps.count, case .pause = s.steps[s.next] else {
                s.failures.append("grantScriptStep: no pause at step \(s.next)")
                return []
            }
            s.next += 1
            return takeServerSteps(&s)
        }
        deliver(steps)
    }

    private func deliver(_ steps: [Step]) {
        guard !steps.isEmpty else { return }
        if case .delay(let us) = steps[0] {
            let rest = Array(steps.dropFirst())
            queue.asyncAfter(deadline: .now() + .microseconds(us)) { [self] in deliver(rest) }
            return
        }
        queue.async { [self] in
            for step in steps {
                let sink: (any ATTTransportSink)? = state.withLock { s in s.closed ? nil : s.sink }
                guard let sink else { return }
                switch step {
                case .server(let pdu): sink.transport(didReceive: pdu)
                case .serverClose: closeFromPeer()
                case .run(let action): action()
                case .client, .pause, .delay: break
                }
            }
        }
    }

    public func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        let bytes = [UInt8](pdu)
        let outcome: Result<(ATTSendResult, [Step], [Step], [OnceBox<Void>]), TransportError> = state.withLock { s in
            if s.closed {
                return .failure(s.closeReason == "peer" ? .closedByPeer : .closedLocally(reason: s.closeReason ?? "closed"))
            }
            if let c = s.capacity {
                if c == 0 { return .success((.wouldBlock, [], [], [])) }
                s.capacity = c - 1
            }
            s.sent.append(bytes)
            var ready: [OnceBox<Void>] = []
            s.sentWaiters.removeAll { w in
                if s.sent.count >= w.count { ready.append(w.once); return true }
                return false
            }
            if let responder = s.responder {
                return .success((.sent, [], responder(bytes), ready))
            }
            guard s.next < s.steps.count else {
                if s.strict { s.failures.append("unexpected client PDU [\(show(bytes))] after the end of the script") }
                return .success((.sent, [], [], ready))
            }
            guard case .client(let expected) = s.steps[s.next] else {
                s.failures.append("step \(s.next): client sent [\(show(bytes))] while the peer still had replies to send")
                return .success((.sent, [], [], ready))
            }
            if expected != bytes {
                s.failures.append("step \(s.next): expected client PDU [\(show(expected))], got [\(show(bytes))]")
            }
            s.next += 1
            return .success((.sent, takeServerSteps(&s), [], ready))
        }
        switch outcome {
        case .failure(let e): throw e
        case .success(let (result, steps, replies, ready)):
            if result == .sent { arrived.signal() }
            for r in ready { r.finish(.success(())) }
            deliver(steps)
            deliver(replies)
            return result
        }
    }

    public func whenWritable(_ callback: @escaping @Sendable () -> Void) {
        let fireNow: Bool = state.withLock { s in
            if s.closed || s.capacity.map({ $0 > 0 }) ?? true { return true }
            s.writableCallbacks.append(callback)
            return false
        }
        if fireNow { queue.async { callback() } }
    }

    /// Adds room for `n` more PDUs and fires the POLLOUT callbacks.
    public func grantWritable(_ n: Int) {
        let callbacks: [@Sendable () -> Void] = state.withLock { s in
            s.capacity = (s.capacity ?? 0) + n
            let c = s.writableCallbacks
            s.writableCallbacks = []
            return c
        }
        for c in callbacks { queue.async { c() } }
    }

    public func close(reason: String) {
        let (sink, callbacks): ((any ATTTransportSink)?, [@Sendable () -> Void]) = state.withLock { s in
            if s.closed { return (nil, []) }
            s.closed = true
            s.closeReason = reason
            let c = s.writableCallbacks
            s.writableCallbacks = []
            return (s.sink, c)
        }
        arrived.signal()
        queue.async {
            sink?.transport(didCloseWith: .closedLocally(reason: reason))
            for c in callbacks { c() }
        }
    }

    /// The peer closes the connection (EOF).
    public func closeFromPeer() {
        let (sink, callbacks): ((any ATTTransportSink)?, [@Sendable () -> Void]) = state.withLock { s in
            if s.closed { return (nil, []) }
            s.closed = true
            s.closeReason = "peer"
            let c = s.writableCallbacks
            s.writableCallbacks = []
            return (s.sink, c)
        }
        arrived.signal()
        queue.async {
            sink?.transport(didCloseWith: .closedByPeer)
            for c in callbacks { c() }
        }
    }

    /// The peer sends `pdu` now, outside the script.
    public func inject(_ pdu: [UInt8]) { deliver([.server(pdu)]) }

    /// Waits until the reader queue has delivered everything queued so far.
    public func flush() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in queue.async { c.resume() } }
    }

    /// Waits until the client has sent at least `count` PDUs.
    public func waitForSent(_ count: Int) async {
        let once = OnceBox<Void>()
        let done = state.withLock { s -> Bool in
            if s.sent.count >= count { return true }
            s.sentWaiters.append((count, once))
            return false
        }
        if !done { try? await once.value() }
    }

    /// Whether a PDU after the end of the script is a problem (false: anything goes once the script ran out).
    public var strict: Bool {
        get { state.withLock { $0.strict } }
        set { state.withLock { $0.strict = newValue } }
    }

    public var sent: [[UInt8]] { state.withLock { $0.sent } }
    public var isClosed: Bool { state.withLock { $0.closed } }
    public var closeReason: String? { state.withLock { $0.closeReason } }

    /// What went against the script: unexpected PDUs, then the steps left unused (empty when the script ran out).
    public var scriptProblems: [String] {
        state.withLock { s in
            var problems = s.failures
            if s.next < s.steps.count {
                problems.append("script not finished: \(s.steps.count - s.next) steps left, next: \(s.steps[s.next])")
            }
            return problems
        }
    }

    /// The next PDU sent that `next` has not handed out yet, or nil after `timeout` seconds (or once closed with
    /// nothing left).
    public func next(timeout: Double = 2) -> [UInt8]? {
        let deadline = DispatchTime.now() + timeout
        while true {
            let (pdu, closed) = state.withLock { s -> ([UInt8]?, Bool) in
                if s.taken < s.sent.count { s.taken += 1; return (s.sent[s.taken - 1], false) }
                return (nil, s.closed)
            }
            if let pdu { return pdu }
            if closed { return nil }
            if arrived.wait(timeout: deadline) == .timedOut {
                return nil
            }
        }
    }

    /// Injects a request and returns the next PDU sent that is not a notification (those go to `notes`).
    public func request(_ bytes: [UInt8], notes: inout [[UInt8]], timeout: Double = 2) -> [UInt8]? {
        inject(bytes)
        while let pdu = next(timeout: timeout) {
            if pdu.first == ATTOpcode.handleValueNotification.rawValue { notes.append(pdu); continue }
            return pdu
        }
        return nil
    }

    public func request(_ bytes: [UInt8], timeout: Double = 2) -> [UInt8]? {
        var notes: [[UInt8]] = []
        return request(bytes, notes: &notes, timeout: timeout)
    }
}
