// libFuzzer target for the ATT transaction engine and the GATT procedures (Core Spec 5.4 Vol 3 Part F §3.3,
// Part G §4): the fuzzer plays the peer. Its input is a stream of directives (raw PDUs, well-formed answers, Error
// Responses, clock jumps, a full socket, POLLOUT, cancellations, a peer close) applied while a fixed script of
// procedures runs: MTU, discovery, reads (long too), writes (long and reliable), subscribe, write without response.
//
// Everything runs on this one thread: the script's tasks prefer a task executor that this driver drains, the
// transport delivers inbound PDUs from here, and TestSupport's ManualClock fires deadlines from here. So each input runs the
// same way every time, and "idle" is exact: no job left means every operation is waiting for the peer.
//
// After the input: the clock jumps past every deadline (repeatedly), then the peer closes. Every operation must
// have ended by then (no hang), the clock must hold no wake-up (no timer leak), the client must be freed (no
// cycle), and every PDU the client sent must decode (the client never sends a malformed PDU). A violation traps.
import ATTStack
import LinuxBluetooth
import GATTClient
import GATTServer
import HostilePeer
import Synchronization
import TestSupport

// MARK: the executor the driver drains

/// A task executor whose jobs run only when the driver calls `runUntilIdle()`, on the driver's thread.
final class DriverExecutor: TaskExecutor {
    private let jobs = Mutex<[UnownedJob]>([])

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.append(unowned) }
    }

    /// Runs jobs until none is left. Bounded: a script that keeps scheduling itself forever traps.
    func runUntilIdle() {
        var ran = 0
        while true {
            let next: UnownedJob? = jobs.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            guard let next else { return }
            next.runSynchronously(on: asUnownedTaskExecutor())
            ran += 1
            if ran > 1_000_000 { fatalError("livelock: a million jobs without going idle") }
        }
    }
}

// MARK: the transport the fuzzer drives

/// An in-memory ATT transport: what the client sends is recorded, what the fuzzer says arrives. Like the socket
/// bearer, nothing is delivered after `close(reason:)`, and `didCloseWith` comes later, from the "reader" (the driver).
final class FuzzTransport: ATTTransport, @unchecked Sendable {
    // @unchecked: every property is touched only on the driver's thread (the engine calls in from jobs, timers and
    // deliveries, all of which run there).
    let label = "fuzz"
    var sink: (any ATTTransportSink)?
    var sent: [[UInt8]] = []
    /// Sends left before `.wouldBlock`; nil: unlimited.
    var capacity: Int?
    var writableCallbacks: [@Sendable () -> Void] = []
    var closed = false
    var pendingClose: TransportError?
    /// The last request the client sent that was not answered by a directive yet.
    var pendingRequest: [UInt8]?

    func start(_ sink: any ATTTransportSink) { self.sink = sink }

    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        if closed { throw .closedLocally(reason: "closed") }
        if let c = capacity {
            if c == 0 { return .wouldBlock }
            capacity = c - 1
        }
        let bytes = Array(pdu)
        sent.append(bytes)
        if let op = bytes.first, ATTOpcode(op).kind == .request { pendingRequest = bytes }
        return .sent
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

// MARK: the driver

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEngine(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    run(input)
    return 0
}

func run(_ input: [UInt8]) {
    let executor = DriverExecutor()
    let transport = FuzzTransport()
    let clock = ManualClock()
    var configuration = GATTClient.Configuration()
    configuration.clock = clock
    configuration.notificationBufferLimit = 4
    let state = ScriptState()
    let main = Task(executorPreference: executor) {
        guard let c = try? await GATTClient.connect(transport: transport, configuration: configuration) else {
            fatalError("connect failed without a peer")
        }
        state.client = c
        for script in [scriptA, scriptB, scriptC] {
            state.tasks.append(Task(executorPreference: executor) {
                await script(c, state)
                state.finished += 1
            })
        }
    }
    executor.runUntilIdle()
    var server = ATTServer(database: HostilePeer.database)
    var session = ATTSession()
    var i = 0
    func byte() -> UInt8 {
        guard i < input.count else { return 0 }
        defer { i += 1 }
        return input[i]
    }
    while i < input.count && state.finished < 3 {
        let d = byte()
        switch d {
        case 0x00..<0xE0, 0xE0:
            var n = Int(d)
            if d == 0xE0 { n = (Int(byte()) | Int(byte()) << 8) & 0x3FF }
            let end = min(input.count, i + n)
            transport.deliver(Array(input[i..<end]))
            i = end
        case 0xE2:
            let code = byte()
            if let r = transport.pendingRequest {
                transport.pendingRequest = nil
                let handle: [UInt8] = r.count >= 3 ? [r[1], r[2]] : [0, 0]
                transport.deliver([0x01, r[0]] + handle + [code])
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
            let t = Int(byte()) % 3
            if t < state.tasks.count { state.tasks[t].cancel() }
        case 0xE8:
            transport.deliver([0x1B, 0x08, 0x00, byte()])
        default:
            // 0xE1, 0xE9...0xFF: the well-formed answer to the last request.
            if let r = transport.pendingRequest {
                transport.pendingRequest = nil
                if case .now(let a) = server.answer(bytes: r, session: &session) { transport.deliver(a.bytes) }
            }
        }
        transport.finishClose()
        executor.runUntilIdle()
    }

    // The end: every deadline passes, then the peer closes. Every operation must be over by then.
    var rounds = 0
    while state.finished < 3 && rounds < 4 {
        transport.capacity = nil
        transport.fireWritable()
        clock.advance(by: .seconds(600))
        transport.finishClose()
        executor.runUntilIdle()
        rounds += 1
    }
    if state.finished < 3 {
        transport.peerCloses()
        executor.runUntilIdle()
    }
    guard state.finished == 3 else {
        fatalError("hang: \(3 - state.finished) script tasks still waiting after every deadline passed and the peer closed")
    }
    main.cancel()
    state.client?.close(reason: "the fuzz run is over")
    transport.finishClose()
    executor.runUntilIdle()
    guard clock.pendingWakeups == 0 else { fatalError("\(clock.pendingWakeups) wake-ups left on the clock after close") }
    guard state.client?.isClosed ?? true else { fatalError("the client is open after close") }

    // The client never sends a malformed PDU; it sends a bounded number of them.
    for pdu in transport.sent {
        do { _ = try ATTPDU.decode(pdu) } catch { fatalError("the client sent a malformed PDU [\(pdu)]: \(error)") }
    }
    guard transport.sent.count <= 64 + 4 * input.count else {
        fatalError("\(transport.sent.count) PDUs sent for a \(input.count)-byte input")
    }
    weak let weakClient = state.client
    state.client = nil
    state.tasks = []
    guard weakClient == nil else { fatalError("the client outlived its run (a reference cycle)") }
}
