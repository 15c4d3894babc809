// libFuzzer target for the ATT transaction engine and the GATT procedures (Core Spec 5.4 Vol 3 Part F §3.3,
// Part G §4): the fuzzer plays the peer. Its input is a stream of directives (raw PDUs, well-formed answers, Error
// Responses, clock jumps, a full socket, POLLOUT, cancellations, a peer close) applied while a fixed script of
// procedures runs: MTU, discovery, reads (long too, and several at once), writes (long and reliable), subscribe,
// write without response. Directives may add up to two Enhanced ATT bearers (Part F §3.2.11) beside the unenhanced
// one and aim the others at any bearer, so requests are in flight on several bearers at once.
//
// Everything runs on this one thread: the link's event loop is an embedded one (no thread of its own) that this
// driver runs, the script's tasks prefer it, the transport delivers inbound PDUs from here, and TestSupport's
// ManualClock fires deadlines from here. So each input runs the same way every time, and "idle" is exact: no work
// left on the loop means every operation is waiting for the peer.
//
// After each directive: a response on one bearer resolved at most one request, of that bearer only; no bearer
// answered more requests than it sent. After the input: the clock jumps past every deadline (repeatedly), then the
// peer closes every bearer. Every operation must have ended once (no hang, no second resume), the clock must hold
// no wake-up (no timer leak), the client must be freed (no cycle), every PDU the client sent must decode, a Prepare
// Write queue stays on one bearer (Part G §4.9.4), an enhanced bearer never carries Exchange MTU (Part F §3.4.2),
// and a confirmation goes back on the bearer of its indication (§3.4.7.2). A violation traps.
import ATTStack
import LinkCore
import GATTClient
import GATTServer
import HostilePeer
import Glibc
import Synchronization
import TestSupport

/// FUZZ_ENGINE_VERBOSE=1 (replaying one input): each bearer's PDUs sent and requests answered, on stdout.
let verbose = getenv("FUZZ_ENGINE_VERBOSE") != nil

// MARK: the loop the driver runs

/// The link's event loop, embedded: its work runs only in `loop.runUntilIdle()`, on the driver's thread.
nonisolated(unsafe) var loop: EventLoop!

// MARK: the transport the fuzzer drives

/// An in-memory ATT transport: what the client sends is recorded, what the fuzzer says arrives. Like the socket
/// bearer, nothing is delivered after `close(reason:)`, and `didCloseWith` comes later, from the "reader" (the driver).
final class FuzzTransport: ATTTransport, @unchecked Sendable {
    // @unchecked: every property is touched only on the driver's thread (the engine calls in from jobs, timers and
    // deliveries, all of which run there).
    let label: String
    /// The bearer's index in `GATTClient.bearers` (0: the unenhanced bearer).
    let index: Int
    var sink: (any ATTTransportSink)?
    var sent: [[UInt8]] = []
    /// Sends left before `.wouldBlock`; nil: unlimited.
    var capacity: Int?
    var writableCallbacks: [@Sendable () -> Void] = []
    var closed = false
    var pendingClose: TransportError?
    /// The last request the client sent that was not answered by a directive yet.
    var pendingRequest: [UInt8]?
    /// Requests the client sent on this bearer: it can never have more answered.
    var requestsSent = 0
    /// Indications delivered and confirmations sent on this bearer (§3.4.7.2: each confirmed on its own bearer).
    var indications = 0
    var confirmations = 0
    /// The Prepare Writes sent since this bearer's last Execute Write, as (handle, end offset).
    var prepared: [(handle: UInt16, end: Int)] = []

    init(index: Int) {
        self.index = index
        self.label = index == 0 ? "fuzz" : "fuzz b\(index)"
    }

    func start(_ sink: any ATTTransportSink) { self.sink = sink }

    /// Every bearer runs on the driver's embedded loop.
    var eventLoop: EventLoop? { loop }

    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        if closed { throw .closedLocally(reason: "closed") }
        if let c = capacity {
            if c == 0 { return .wouldBlock }
            capacity = c - 1
        }
        let bytes = Array(pdu)
        sent.append(bytes)
        if let op = bytes.first, ATTOpcode(op).kind == .request {
            pendingRequest = bytes
            requestsSent += 1
        }
        audit(bytes)
        return .sent
    }

    /// The bearer rules of what the client sends on this bearer (see the file's header).
    func audit(_ bytes: [UInt8]) {
        switch bytes.first {
        case 0x02? where index > 0:
            fatalError("an Exchange MTU Request on enhanced bearer \(index) (Part F §3.4.2: none on an enhanced bearer)")
        case 0x16? where bytes.count >= 5:
            // A part at an offset past 0 continues a value whose previous part went out on this same bearer.
            let handle = UInt16(bytes[1]) | UInt16(bytes[2]) << 8
            let offset = Int(bytes[3]) | Int(bytes[4]) << 8
            if offset > 0 && !prepared.contains(where: { $0.handle == handle && $0.end == offset }) {
                fatalError("a Prepare Write of handle \(handle) at offset \(offset) on bearer \(index), whose earlier part is not queued on it: a Prepare Write queue split across bearers")
            }
            prepared.append((handle, offset + bytes.count - 5))
        case 0x18?:
            prepared = []
        case 0x1E?:
            confirmations += 1
            if confirmations > indications {
                fatalError("confirmation \(confirmations) on bearer \(index), which delivered \(indications) indications")
            }
        default:
            break
        }
    }

    func whenWritable(_ callback: @escaping @Sendable () -> Void) {
        if closed { callback() } else { writableCallbacks.append(callback) }
    }

    func close(reason: String) {
        guard !closed else { return }
        closed = true
        pendingClose = .closedLocally(reason: reason)
    }

    func deliver(_ pdu: [UInt8]) {
        guard !closed, let sink else { return }
        if pdu.first == 0x1D { indications += 1 }
        sink.transport(didReceive: pdu)
    }

    func fireWritable() {
        let callbacks = writableCallbacks
        writableCallbacks = []
        for c in callbacks { c() }
    }

    /// The reader's side of a close: `didCloseWith` once, waiters woken, the sink released (as the bearer's
    /// reader thread does when it ends).
    func finishClose() {
        guard let reason = pendingClose, let sink else { return }
        pendingClose = nil
        self.sink = nil
        fireWritable()
        sink.transport(didCloseWith: reason)
    }

    func peerCloses() {
        guard !closed else { return finishClose() }
        closed = true
        pendingClose = .closedByPeer
        finishClose()
    }
}

// MARK: the script

/// What the script's tasks share with the driver.
final class ScriptState: @unchecked Sendable {
    // @unchecked: touched only on the driver's thread (the tasks run there too).
    var client: GATTClient?
    var finished = 0
    var tasks: [Task<Void, Never>] = []
    var errors = 0
    /// Steps begun and ended: a continuation resumed twice would end a step twice.
    var begun = 0
    var ended = 0
    var executor: EventLoop?
}

/// An operation's failure must be a named, non-empty error; a timeout must say what it waited for.
func check(_ error: GATTError) {
    let text = error.description
    guard !text.isEmpty else { fatalError("an error without a message: \(error)") }
    if case .timeout(let t) = error, t.waitingFor.isEmpty || !text.contains("waiting for") {
        fatalError("a timeout that does not say what it waited for: \(text)")
    }
}

func step<T>(_ state: ScriptState, _ body: () async throws(GATTError) -> T) async -> T? {
    state.begun += 1
    defer {
        state.ended += 1
        if state.ended > state.begun { fatalError("a step ended twice (a continuation resumed twice)") }
    }
    do { return try await body() } catch {
        check(error)
        state.errors += 1
        return nil
    }
}

let longValue = (0..<100).map { UInt8($0) }

func scriptA(_ c: GATTClient, _ s: ScriptState) async {
    _ = await step(s) { () async throws(GATTError) in try await c.exchangeMTU() }
    let services = await step(s) { () async throws(GATTError) in try await c.discoverAll() }
    _ = await step(s) { () async throws(GATTError) in try await c.read(handle: 3) }
    _ = await step(s) { () async throws(GATTError) in try await c.readLong(handle: 8) }
    _ = await step(s) { () async throws(GATTError) in try await c.read(uuid: .bit16(0x2A00)) }
    _ = await step(s) { () async throws(GATTError) in try await c.readMultiple(handles: [3, 5]) }
    _ = await step(s) { () async throws(GATTError) in try await c.readMultipleVariable(handles: [3, 5]) }
    _ = await step(s) { () async throws(GATTError) in try await c.discoverPrimaryServices(uuid: .bit16(0xFFF0)) }
    if let service = services?.last {
        _ = await step(s) { () async throws(GATTError) in try await c.discoverIncludedServices(of: service) }
    }
}

func scriptB(_ c: GATTClient, _ s: ScriptState) async {
    _ = await step(s) { () async throws(GATTError) in try await c.write(handle: 11, value: [1, 2, 3]) }
    _ = await step(s) { () async throws(GATTError) in try await c.writeLong(handle: 8, value: longValue) }
    _ = await step(s) { () async throws(GATTError) in
        try await c.writeReliable([(8, Array(longValue.prefix(30))), (11, [5, 4, 3, 2, 1])])
    }
    for i in 0..<3 {
        _ = await step(s) { () async throws(GATTError) in
            try await c.writeWithoutResponse(handle: 11, value: [UInt8(i), 1, 2, 3, 4], timeout: .seconds(5))
        }
    }
    _ = await step(s) { () async throws(GATTError) in try await c.writeWithoutResponse(handle: 11, value: [9]) }
}

func scriptC(_ c: GATTClient, _ s: ScriptState) async {
    if let (_, stream) = await step(s, { () async throws(GATTError) in try await c.subscribe(valueHandle: 8, cccdHandle: 9) }) {
        var n = 0
        do {
            for try await _ in stream {
                n += 1
                if n == 2 { break }
            }
        } catch {
            guard let e = error as? GATTError else { fatalError("a notification stream threw \(error)") }
            check(e)
        }
        _ = await step(s) { () async throws(GATTError) in try await c.unsubscribe(valueHandle: 8, cccdHandle: 9) }
    }
    do {
        var n = 0
        for try await _ in c.notifications {
            n += 1
            if n == 3 { break }
        }
    } catch {
        guard let e = error as? GATTError else { fatalError("the catch-all stream threw \(error)") }
        check(e)
    }
}


/// Requests in flight on every bearer at once: three reads and a write, concurrently (the client spreads them).
func scriptD(_ c: GATTClient, _ s: ScriptState) async {
    guard let executor = s.executor else { fatalError("no executor") }
    await withTaskGroup(of: Void.self) { group in
        for h: UInt16 in [3, 5, 8] {
            group.addTask(executorPreference: executor) {
                _ = await step(s) { () async throws(GATTError) in try await c.read(handle: h) }
            }
        }
        group.addTask(executorPreference: executor) {
            _ = await step(s) { () async throws(GATTError) in try await c.write(handle: 11, value: [7, 7]) }
        }
    }
}

// MARK: the driver

/// One bearer as the peer plays it: the transport, and an ATT server of its own over the one database (a session,
/// MTU and Prepare Write queue per bearer).
final class PeerBearer {
    let transport: FuzzTransport
    var server = ATTServer(database: HostilePeer.database)
    var session = ATTSession()

    init(_ transport: FuzzTransport, mtu: Int) {
        self.transport = transport
        session.mtu = mtu
    }

    /// The well-formed answer to the last request this bearer carried, if one is waiting.
    func answer() {
        guard let r = transport.pendingRequest else { return }
        transport.pendingRequest = nil
        if case .now(let a) = server.answer(bytes: r, session: &session) { transport.deliver(a.bytes) }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEngine(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    run(input)
    return 0
}

let scripts = [scriptA, scriptB, scriptC, scriptD]

/// What each bearer answered so far (`GATTBearer.requestsAnswered`), by index.
func answered(_ state: ScriptState, bearers: Int) -> [Int] {
    var counts = state.client?.bearers.map(\.requestsAnswered) ?? []
    while counts.count < bearers { counts.append(0) }
    return counts
}

func run(_ input: [UInt8]) {
    guard let embedded = try? EventLoop(embedded: ()) else { fatalError("no event loop (epoll, eventfd, timerfd)") }
    loop = embedded
    defer { loop = nil }
    let executor = embedded
    let clock = ManualClock()
    var configuration = GATTClient.Configuration()
    configuration.clock = clock
    configuration.notificationBufferLimit = 4
    let state = ScriptState()
    state.executor = executor
    var peers = [PeerBearer(FuzzTransport(index: 0), mtu: ATTMTU.minimumLE)]
    let primary = peers[0].transport
    let main = Task(executorPreference: executor) {
        guard let c = try? await GATTClient.connect(transport: primary, configuration: configuration) else {
            fatalError("connect failed without a peer")
        }
        state.client = c
        for (n, script) in scripts.enumerated() {
            state.tasks.append(Task(executorPreference: executor) {
                await script(c, state)
                state.finished += 1
                if state.finished > scripts.count { fatalError("script \(n) ended twice (a continuation resumed twice)") }
            })
        }
    }
    executor.runUntilIdle()
    var target = 0
    var i = 0
    func byte() -> UInt8 {
        guard i < input.count else { return 0 }
        defer { i += 1 }
        return input[i]
    }
    while i < input.count && state.finished < scripts.count {
        let d = byte()
        let peer = peers[target]
        let transport = peer.transport
        let before = answered(state, bearers: peers.count)
        // The bearers a PDU arrived on in this directive: only their requests may be answered.
        var arrivedOn: Set<Int> = []
        switch d {
        case 0x00..<0xE0, 0xE0:
            var n = Int(d)
            if d == 0xE0 { n = (Int(byte()) | Int(byte()) << 8) & 0x3FF }
            let end = min(input.count, i + n)
            transport.deliver(Array(input[i..<end]))
            arrivedOn.insert(target)
            i = end
        case 0xE2:
            let code = byte()
            if let r = transport.pendingRequest {
                transport.pendingRequest = nil
                let handle: [UInt8] = r.count >= 3 ? [r[1], r[2]] : [0, 0]
                transport.deliver([0x01, r[0]] + handle + [code])
                arrivedOn.insert(target)
            }
        case 0xE3:
            clock.advance(by: .seconds(Int(byte())) + .milliseconds(1))
        case 0xE4:
            transport.peerCloses()
        case 0xE5:
            let c = byte()
            transport.capacity = c == 0xFF ? nil : Int(c)
        case 0xE6:
            transport.fireWritable()
        case 0xE7:
            let t = Int(byte()) % scripts.count
            if t < state.tasks.count { state.tasks[t].cancel() }
        case 0xE8:
            transport.deliver([0x1B, 0x08, 0x00, byte()])
            arrivedOn.insert(target)
        case 0xEA:
            // The following directives go to this bearer.
            target = Int(byte()) % peers.count
        case 0xEB:
            // An Enhanced ATT bearer opens (at most two), its channel MTU from the input (the engine keeps it in range).
            let mtu = ATTMTU.minimumLE + 4 * Int(byte())
            if peers.count < 3, let c = state.client {
                let t = FuzzTransport(index: peers.count)
                do {
                    let index = try c.addEnhancedBearer(transport: t, mtu: mtu)
                    guard index == peers.count else { fatalError("enhanced bearer \(index) added as bearer \(peers.count)") }
                    peers.append(PeerBearer(t, mtu: c.bearers[index].mtu))
                } catch {
                    check(error)
                }
            }
        case 0xEC:
            // Every bearer's last request is answered, in bearer order.
            for (k, p) in peers.enumerated() where p.transport.pendingRequest != nil {
                p.answer()
                arrivedOn.insert(k)
            }
        default:
            // 0xE1, 0xE9, 0xED...0xFF: the well-formed answer to the last request.
            if transport.pendingRequest != nil {
                peer.answer()
                arrivedOn.insert(target)
            }
        }
        for p in peers { p.transport.finishClose() }
        executor.runUntilIdle()
        // A response resolves one request of its own bearer, never another bearer's.
        let after = answered(state, bearers: peers.count)
        for k in after.indices {
            let was = k < before.count ? before[k] : 0
            if after[k] < was { fatalError("bearer \(k)'s answered count went down") }
            if after[k] > was && !arrivedOn.contains(k) {
                fatalError("bearer \(k) answered a request though nothing arrived on it (arrived on \(arrivedOn.sorted()))")
            }
            if after[k] > was + 1 { fatalError("one PDU on bearer \(k) answered \(after[k] - was) requests") }
            if after[k] > peers[k].transport.requestsSent {
                fatalError("bearer \(k) answered \(after[k]) requests, sent \(peers[k].transport.requestsSent)")
            }
        }
        if state.ended > state.begun { fatalError("\(state.ended) steps ended, \(state.begun) begun") }
    }

    // The end: every deadline passes, then every bearer's peer closes. Every operation must be over by then.
    var rounds = 0
    while state.finished < scripts.count && rounds < 4 {
        for p in peers {
            p.transport.capacity = nil
            p.transport.fireWritable()
        }
        clock.advance(by: .seconds(600))
        for p in peers { p.transport.finishClose() }
        executor.runUntilIdle()
        rounds += 1
    }
    if state.finished < scripts.count {
        for p in peers { p.transport.peerCloses() }
        executor.runUntilIdle()
    }
    guard state.finished == scripts.count else {
        fatalError("hang: \(scripts.count - state.finished) script tasks still waiting after every deadline passed and the peer closed \(peers.count) bearers")
    }
    guard state.begun == state.ended else { fatalError("\(state.begun) steps begun, \(state.ended) ended") }
    main.cancel()
    state.client?.close(reason: "the fuzz run is over")
    for p in peers { p.transport.finishClose() }
    executor.runUntilIdle()
    guard clock.pendingWakeups == 0 else { fatalError("\(clock.pendingWakeups) wake-ups left on the clock after close") }
    guard state.client?.isClosed ?? true else { fatalError("the client is open after close") }
    if let open = state.client?.bearers.first(where: { !$0.isClosed }) {
        fatalError("bearer \(open.index) is open after the client closed")
    }

    // The client never sends a malformed PDU; it sends a bounded number of them.
    if verbose, let c = state.client {
        for b in c.bearers {
            print("bearer \(b.index) (\(b.label), MTU \(b.mtu)): \(peers[b.index].transport.sent.count) PDUs sent, \(b.requestsAnswered) requests answered")
        }
        print("\(state.begun) steps, \(state.errors) failed")
    }
    var sent = 0
    for p in peers {
        for pdu in p.transport.sent {
            do { _ = try ATTPDU.decode(pdu) } catch { fatalError("the client sent a malformed PDU [\(pdu)]: \(error)") }
        }
        sent += p.transport.sent.count
    }
    guard sent <= 64 + 4 * input.count else {
        fatalError("\(sent) PDUs sent on \(peers.count) bearers for a \(input.count)-byte input")
    }
    weak let weakClient = state.client
    state.client = nil
    state.tasks = []
    peers = []
    // What releasing the client left for the loop (the end of its streams, the jobs they resume) runs too.
    executor.runUntilIdle()
    guard weakClient == nil else { fatalError("the client outlived its run (a reference cycle)") }
}
