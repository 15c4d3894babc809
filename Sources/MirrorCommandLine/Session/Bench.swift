// The write benchmark behind `mirror bench`: Write Requests and Write Commands through the GATT client
// (Core Spec 5.4 Vol 3 Part G §4.9.3, §4.9.1), timed after a warm-up, in rounds that alternate with a bare socket
// loop moving the same PDUs over the same socket type without the ATT engine; figures are medians of the rounds.
import ATTStack
import LinuxBluetooth
import CBlueZSocket
import Foundation
import GATTClient
import JSON
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Which write modes `mirror bench` measures.
enum BenchMode: String, Sendable, CaseIterable {
    case withResponse = "with-response"
    case withoutResponse = "without-response"
    case both
}

/// What to measure.
struct BenchPlan: Sendable {
    var handle: UInt16
    /// Value bytes per write; nil for the MTU's budget.
    var size: Int?
    /// Writes per mode and round; nil when `duration` is set.
    var count: Int?
    /// Seconds per mode and round, instead of a count.
    var duration: Double?
    var warmup: Int
    var mode: BenchMode
    /// A characteristic whose value is the peer's little-endian count of writes received, read around each mode.
    var counter: UInt16?
    var rounds: Int
    /// Where the bare socket loop runs (--bare-loop); nil for the target's default: a second connection for
    /// unix: targets, the same connection for LE ones.
    var bareLoop: BareLoopOption? = nil
}

/// `--bare-loop`: where `mirror bench` runs its bare socket loop, or not at all.
enum BareLoopOption: String, Sendable, CaseIterable {
    case secondConnection = "second-connection"
    case sameConnection = "same-connection"
    case none
}

/// One timed run of one mode: wall time, and the CPU time of the whole process (every thread), which stays
/// steady on a loaded machine where wall time does not.
struct RoundFigures: Sendable {
    var writes: Int
    var nanoseconds: UInt64
    var cpuNanoseconds: UInt64
    var writesPerSecond: Double { Double(writes) / (Double(nanoseconds) / 1e9) }
    var cpuMicrosecondsPerWrite: Double { Double(cpuNanoseconds) / 1000 / Double(max(1, writes)) }
}

/// The process's CPU time so far (CLOCK_PROCESS_CPUTIME_ID: every thread), in nanoseconds.
func processCPUNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// The figures of one mode over every round.
struct ModeFigures: Sendable {
    var mode: BenchMode
    var size: Int
    var rounds: [RoundFigures] = []
    /// Round trips of Write Requests over every round, in nanoseconds (empty for Write Commands).
    var latencies: [UInt64] = []
    /// Write Commands: time the socket was full (EAGAIN until POLLOUT), and how many sends found it full.
    var blockedNanoseconds: UInt64?
    var blockedWaits: Int?
    /// Writes the peer confirmed: Write Responses received (requests), or the counter's increase (commands).
    var confirmed: Int?
    var bare: [RoundFigures] = []
    /// The bare loop's writes the peer confirmed: Write Responses (requests), or the counter's increase over each
    /// of its rounds (commands, with --counter); nil when nothing tells.
    var bareConfirmed: Int?

    var writes: Int { rounds.reduce(0) { $0 + $1.writes } }
    var seconds: Double { Double(rounds.reduce(0) { $0 + $1.nanoseconds }) / 1e9 }
    /// The median round's rate.
    var writesPerSecond: Double { median(rounds.map(\.writesPerSecond)) }
    var bytesPerSecond: Double { writesPerSecond * Double(size) }
    var bareWritesPerSecond: Double? { bare.isEmpty ? nil : median(bare.map(\.writesPerSecond)) }
    var ratio: Double? { bareWritesPerSecond.map { writesPerSecond / $0 } }
    /// CPU per write, median of the rounds (the whole process: with --loopback that includes the peer).
    var cpuPerWrite: Double { median(rounds.map(\.cpuMicrosecondsPerWrite)) }
    var bareCPUPerWrite: Double? { bare.isEmpty ? nil : median(bare.map(\.cpuMicrosecondsPerWrite)) }

    func percentile(_ p: Double) -> Double? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return Double(sorted[max(0, min(sorted.count - 1, rank))]) / 1000
    }

    var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("mode", .string(mode.rawValue)), ("writes", .int(writes)), ("bytes", .int(writes * size)),
            ("seconds", .double(seconds)), ("bytesPerSecond", .double(bytesPerSecond.rounded())),
            ("writesPerSecond", .double(writesPerSecond.rounded())),
            ("cpuMicrosecondsPerWrite", .double((cpuPerWrite * 1000).rounded() / 1000)),
        ]
        if !latencies.isEmpty {
            fields.append(("latencyMicroseconds", .object([
                ("p50", .double(percentile(50)!)), ("p90", .double(percentile(90)!)),
                ("p99", .double(percentile(99)!)), ("max", .double(percentile(100)!)),
            ])))
        }
        if let blockedNanoseconds, let blockedWaits {
            fields.append(("backpressure", .object([("seconds", .double(Double(blockedNanoseconds) / 1e9)),
                                                     ("waits", .int(blockedWaits))])))
        }
        fields.append(("confirmed", confirmed.map { .int($0) } ?? .null))
        if let bareRate = bareWritesPerSecond, let ratio {
            fields.append(("bare", .object([
                ("writes", .int(bare.reduce(0) { $0 + $1.writes })),
                ("bytesPerSecond", .double((bareRate * Double(size)).rounded())),
                ("writesPerSecond", .double(bareRate.rounded())),
                ("cpuMicrosecondsPerWrite", .double(((bareCPUPerWrite ?? 0) * 1000).rounded() / 1000)),
                ("confirmed", bareConfirmed.map { .int($0) } ?? .null),
            ])))
            fields.append(("ratioToBare", .double((ratio * 1000).rounded() / 1000)))
            if let bareCPU = bareCPUPerWrite, bareCPU > 0 {
                fields.append(("cpuRatioToBare", .double((cpuPerWrite / bareCPU * 1000).rounded() / 1000)))
            }
        }
        return .object(fields)
    }

    var text: [String] {
        let title = mode == .withResponse ? "with response (Write Request):" : "without response (Write Command):"
        var line = "\(title) \(rate(bytesPerSecond))/s, \(Int(writesPerSecond.rounded())) writes/s (\(writes) writes in \(seconds3(seconds)) s)"
        if let confirmed { line += ", peer confirmed \(confirmed)" }
        var lines = [line]
        if !latencies.isEmpty {
            lines.append("  round trip: p50 \(micro(percentile(50)!)), p90 \(micro(percentile(90)!)), p99 \(micro(percentile(99)!)), max \(micro(percentile(100)!))")
        }
        if let blockedNanoseconds, let blockedWaits {
            lines.append("  waiting on backpressure: \(seconds3(Double(blockedNanoseconds) / 1e9)) s (\(blockedWaits) send\(blockedWaits == 1 ? "" : "s") found the socket full)")
        }
        lines.append("  CPU per write: \(format2(cpuPerWrite)) µs (this process, every thread)")
        if let bareRate = bareWritesPerSecond, let ratio {
            var bareLine = "  bare socket loop: \(rate(bareRate * Double(size)))/s, \(Int(bareRate.rounded())) writes/s; mirror/bare = \(format2(ratio))"
            if let bareCPU = bareCPUPerWrite {
                bareLine += "; CPU per write \(format2(bareCPU)) µs, mirror/bare = \(format2(cpuPerWrite / max(bareCPU, 0.001)))"
            }
            if let bareConfirmed { bareLine += "; peer confirmed \(bareConfirmed)" }
            lines.append(bareLine)
        }
        return lines
    }
}

/// Where `mirror bench` runs its bare socket loop.
enum BareLoopPlacement: String, Sendable {
    /// unix: targets: a second connection to the same peer, its rounds alternating with the CLI's.
    case secondConnection = "second-connection"
    /// LE targets: the same connection's socket, lent by the GATT client's bearer for each of the loop's turns.
    case sameConnection = "same-connection"

    var describe: String {
        switch self {
        case .secondConnection: return "a second connection to the same peer, rounds alternating with mirror's"
        case .sameConnection: return "this connection's socket, lent by mirror's bearer round by round (an LE link takes one ATT socket)"
        }
    }
}

/// The figures of one run.
struct BenchResult: Sendable {
    var target: String
    var handle: UInt16
    var size: Int
    var mtu: Int
    var warmup: Int
    var rounds: Int
    /// Where the bare socket loop ran; nil when it did not.
    var bareLoop: BareLoopPlacement?
    var modes: [ModeFigures]

    var json: JSONValue {
        .object([
            ("target", .string(target)), ("handle", .int(Int(handle))), ("size", .int(size)), ("mtu", .int(mtu)),
            ("warmup", .int(warmup)), ("rounds", .int(rounds)),
            ("bareLoop", bareLoop.map { .string($0.rawValue) } ?? .null), ("modes", .array(modes.map(\.json))),
        ])
    }

    var text: [String] {
        ["bench \(target) handle \(ATTHex.handle(handle)): \(size)-byte values, MTU \(mtu), \(warmup) warm-up writes, median of \(rounds) round\(rounds == 1 ? "" : "s")"]
            + (bareLoop.map { ["bare socket loop: \($0.describe)"] } ?? [])
            + modes.flatMap(\.text)
    }
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.isEmpty ? 0 : s[s.count / 2]
}

enum Bench {
    static func run(target: TargetArgument, plan: BenchPlan, inv: Invocation) async throws -> BenchResult {
        // The same-connection bare loop borrows the bearer's socket for each turn (`ATTBearer.lend`).
        let session = try await Session.open(target, inv)
        defer { session.close() }
        do {
            return try await run(session, target: target, plan: plan, inv: inv)
        } catch let error as GATTError {
            throw await session.labelled(error)
        }
    }

    static func run(_ session: Session, target: TargetArgument, plan: BenchPlan, inv: Invocation) async throws -> BenchResult {
        let client = session.client
        let size = plan.size ?? client.writeValueBudget
        let value = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        // The bare loop's rounds alternate with the CLI's. For unix: targets it has its own connection to the same
        // peer, with the same MTU. An LE link takes one ATT socket only (a second connect on CID 4 to the same peer
        // is EBUSY: the kernel's l2cap_chan_connect finds the fixed channel taken), so there the bearer lends the
        // GATT client's own socket to the bare loop for each of its turns: one owner at a time.
        let choice = plan.bareLoop ?? (target.isUnix ? .secondConnection : .sameConnection)
        var bare: BareSocket?
        var placement: BareLoopPlacement?
        switch choice {
        case .secondConnection:
            guard case .unix(let path) = target.target else {
                throw UsageError("--bare-loop second-connection needs a unix: target: an LE link takes one ATT socket (a second connect on CID 4 to the same peer fails with EBUSY); use same-connection", command: "bench")
            }
            bare = .own(try BareLoop(path: path, clientRxMTU: session.clientRxMTU, timeout: inv.global.timeout))
            placement = .secondConnection
        case .sameConnection:
            guard let bearer = session.transport.inner as? ATTBearer else {
                throw CLIError.unsupported("--bare-loop same-connection needs a socket bearer under the GATT client")
            }
            bare = .lent(bearer, timeout: inv.global.timeout)
            placement = .sameConnection
        case .none:
            break
        }
        defer { bare?.close() }
        let handle = plan.handle, counter = plan.counter, warmup = plan.warmup
        var modes: [ModeFigures] = []
        if plan.mode != .withoutResponse {
            var figures = ModeFigures(mode: .withResponse, size: size)
            // Back-to-back requests run on the bearer's executor, as the library benchmark (gatt-bench) runs them:
            // each caller continues on the reader thread as soon as its response arrives.
            try await withTaskExecutorPreference(client.bearerExecutor) {
                for _ in 0..<plan.warmup { try await client.write(handle: plan.handle, value: value) }
            }
            if let bare { _ = try await bare.run { try $0.requests(handle: handle, value: value, writes: warmup) } }
            for _ in 0..<plan.rounds {
                let (round, latencies) = try await withTaskExecutorPreference(client.bearerExecutor) {
                    try await measureRequests(client, plan: plan, value: value)
                }
                figures.rounds.append(round)
                figures.latencies += latencies
                if let bare {
                    figures.bare.append(try await bare.run { try $0.requests(handle: handle, value: value, writes: round.writes) })
                }
            }
            figures.confirmed = figures.writes
            // Each bare Write Request counts only once its Write Response arrived.
            if bare != nil { figures.bareConfirmed = figures.bare.reduce(0) { $0 + $1.writes } }
            modes.append(figures)
        }
        if plan.mode != .withResponse {
            var figures = ModeFigures(mode: .withoutResponse, size: size)
            for _ in 0..<plan.warmup { try await client.writeWithoutResponse(handle: plan.handle, value: value, timeout: session.timeout) }
            if let bare { _ = try await bare.run { try $0.commands(handle: handle, value: value, writes: warmup, counter: counter) } }
            let before = try await drain(client, plan: plan)
            let observedBefore = session.transport.observations
            var bareCounted: Int? = counter == nil ? nil : 0
            for _ in 0..<plan.rounds {
                try await measureCommands(session, plan: plan, value: value, into: &figures)
                if let bare {
                    let writes = figures.rounds.last!.writes
                    let (round, counted) = try await bare.run { try $0.commands(handle: handle, value: value, writes: writes, counter: counter) }
                    figures.bare.append(round)
                    if let counted, let sum = bareCounted { bareCounted = sum + counted }
                }
            }
            let observedAfter = session.transport.observations
            figures.blockedNanoseconds = observedAfter.blockedNanoseconds - observedBefore.blockedNanoseconds
            figures.blockedWaits = observedAfter.wouldBlockCount - observedBefore.wouldBlockCount
            if bare != nil { figures.bareConfirmed = bareCounted }
            // The counter counts the bare loop's commands too (same handle, same peer): take them out.
            if let after = try await drain(client, plan: plan), let before {
                figures.confirmed = after - before - (figures.bareConfirmed ?? 0)
            }
            modes.append(figures)
        }
        return BenchResult(target: target.description, handle: plan.handle, size: size, mtu: session.mtu,
                           warmup: plan.warmup, rounds: plan.rounds, bareLoop: placement, modes: modes)
    }

    /// Reads the peer's write counter (little-endian, 1-8 bytes).
    static func readCounter(_ client: GATTClient, _ handle: UInt16?) async throws -> Int? {
        guard let handle else { return nil }
        let bytes = try await client.read(handle: handle)
        return bytes.prefix(8).enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
    }

    /// One round of Write Requests, each awaited: its rate and every round trip.
    static func measureRequests(_ client: GATTClient, plan: BenchPlan, value: [UInt8]) async throws -> (RoundFigures, [UInt64]) {
        var latencies: [UInt64] = []
        latencies.reserveCapacity(plan.count ?? 100_000)
        let deadline = plan.duration.map { monotonicNanoseconds() + UInt64($0 * 1e9) }
        let cpu = processCPUNanoseconds()
        let start = monotonicNanoseconds()
        var now = start
        var writes = 0
        while true {
            if let count = plan.count, writes >= count { break }
            if let deadline, now >= deadline { break }
            try await client.write(handle: plan.handle, value: value)
            let after = monotonicNanoseconds()
            latencies.append(after - now)
            now = after
            writes += 1
        }
        return (RoundFigures(writes: writes, nanoseconds: now - start, cpuNanoseconds: processCPUNanoseconds() - cpu), latencies)
    }

    /// One round of Write Commands, timed until the peer answered a request sent after the last one (it handles
    /// PDUs in order), so the rate is what the peer took in, not what the kernel buffered.
    static func measureCommands(_ session: Session, plan: BenchPlan, value: [UInt8], into figures: inout ModeFigures) async throws {
        let client = session.client
        let deadline = plan.duration.map { monotonicNanoseconds() + UInt64($0 * 1e9) }
        let cpu = processCPUNanoseconds()
        let start = monotonicNanoseconds()
        var writes = 0
        while true {
            if let count = plan.count, writes >= count { break }
            if let deadline, writes & 63 == 0, monotonicNanoseconds() >= deadline { break }
            try await client.writeWithoutResponse(handle: plan.handle, value: value, timeout: session.timeout)
            writes += 1
        }
        _ = try await drain(client, plan: plan)
        figures.rounds.append(RoundFigures(writes: writes, nanoseconds: monotonicNanoseconds() - start,
                                           cpuNanoseconds: processCPUNanoseconds() - cpu))
    }

    /// A request whose answer proves every earlier command was handled: the counter's read when there is one
    /// (returning its value), else a Read Request of the bench handle (its answer, even an error, is enough).
    static func drain(_ client: GATTClient, plan: BenchPlan) async throws -> Int? {
        if plan.counter != nil { return try await readCounter(client, plan.counter) }
        do {
            _ = try await client.read(handle: plan.handle)
        } catch {
            guard case .attribute = error else { throw error }
        }
        return nil
    }
}

/// Where the bare loop's socket comes from: a connection of its own (unix:), or the GATT client's socket, lent by
/// the bearer for each turn (an LE link takes one ATT socket). One owner at a time either way.
enum BareSocket {
    case own(BareLoop)
    case lent(ATTBearer, timeout: Double)

    /// Runs one turn of the bare loop: at once on its own socket, or on the bearer's reader thread while the bearer
    /// reads nothing and sends nothing (`ATTBearer.lend`).
    func run<T: Sendable>(_ body: @escaping @Sendable (BareLoop) throws -> T) async throws -> T {
        switch self {
        case .own(let loop):
            return try body(loop)
        case .lent(let bearer, let timeout):
            return try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
                bearer.lend { fd in
                    guard let fd else {
                        return c.resume(throwing: CLIError.connection("the connection to \(bearer.label) ended before the bare socket loop's turn"))
                    }
                    // The loop borrows the socket: it never closes it.
                    c.resume(with: Result { try body(BareLoop(connected: fd, label: bearer.label, timeout: timeout)) })
                }
            }
        }
    }

    /// Closes the bare loop's own connection (a lent socket stays the bearer's).
    func close() {
        if case .own(let loop) = self { loop.close() }
    }
}

/// The same Write Requests and Write Commands moved over the same kind of socket by a plain loop: send, then
/// poll and receive (requests), or send until EAGAIN, poll for POLLOUT, send again, then one request whose
/// answer proves the commands arrived (commands). No ATT engine, no tasks: the floor the CLI is compared with.
/// One owner of its socket.
final class BareLoop {
    let fd: Int32
    /// unix:PATH, or the LE connection's label.
    let label: String
    let timeoutMilliseconds: Int32
    let timeout: Double
    var buffer = [UInt8](repeating: 0, count: 1024)
    /// The length of the last answer `receive` returned (in `buffer`).
    var received = 0

    /// Uses a connected, non-blocking socket whose MTU is already exchanged (the GATT client's, lent by its bearer).
    init(connected fd: Int32, label: String, timeout: Double) {
        self.fd = fd
        self.label = label
        self.timeout = timeout
        timeoutMilliseconds = Int32(clamping: Int(timeout * 1000))
    }

    /// A second connection to a unix: peer, with the same MTU as the GATT client's.
    init(path: String, clientRxMTU: Int, timeout: Double) throws {
        label = "unix:\(path)"
        self.timeout = timeout
        timeoutMilliseconds = Int32(clamping: Int(timeout * 1000))
        fd = cbz_unix_socket()
        guard fd >= 0 else { throw BareLoop.failure("socket(AF_UNIX, SOCK_SEQPACKET)", "opening the bare loop's socket") }
        guard cbz_unix_connect(fd, path) == 0 else {
            let e = BareLoop.failure("connect", "connecting the bare loop to unix:\(path)")
            _ = cbz_close(fd)
            throw e
        }
        // The same MTU as the GATT client's connection, so the peer takes the same values.
        try send(ATTPDU.exchangeMTURequest(clientRxMTU: UInt16(clientRxMTU)).bytes)
        _ = try receive()
    }

    func close() { _ = cbz_close(fd) }

    static func failure(_ syscall: String, _ context: String, _ code: Int32 = cbz_errno()) -> SocketError {
        SocketError(syscall: syscall, errno: Errno(code), context: context)
    }

    func send(_ pdu: [UInt8]) throws {
        while true {
            let n = pdu.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }
            if n >= 0 { return }
            let e = cbz_errno()
            guard e == EAGAIN || e == EWOULDBLOCK || e == EINTR else { throw BareLoop.failure("send", "the bare loop's send", e) }
            var revents: Int16 = 0
            guard cbz_poll_one(fd, CBZ_POLLOUT, timeoutMilliseconds, &revents) > 0 else {
                throw CLIError.timeout(what: "the bare loop's socket to take more data", seconds: timeout)
            }
        }
    }

    /// The opcode of the next answer: notifications and the peer's commands are skipped, indications confirmed,
    /// and the peer's own requests answered with Request Not Supported (a peer that is also a GATT client, as
    /// bluetoothd is, drops a link whose requests go unanswered).
    func receive() throws -> UInt8 {
        while true {
            var truncated: Int32 = 0
            let n = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
            if n > 0 {
                let opcode = ATTOpcode(rawValue: buffer[0])
                switch opcode.kind {
                case .notification, .command: continue
                case .unknown where buffer[0] & 0x40 != 0: continue  // a command this stack does not know
                case .indication:
                    try send([ATTOpcode.handleValueConfirmation.rawValue])
                    continue
                case .request:
                    try send(ATTPDU.errorResponse(requestOpcode: opcode, handle: 0, error: .requestNotSupported).bytes)
                    continue
                default: break
                }
                received = n
                return buffer[0]
            }
            if n == 0 { throw CLIError.connection("the peer closed the bare loop's connection to \(label)") }
            let e = cbz_errno()
            guard e == EAGAIN || e == EWOULDBLOCK || e == EINTR else { throw BareLoop.failure("recv", "the bare loop's receive", e) }
            var revents: Int16 = 0
            guard cbz_poll_one(fd, CBZ_POLLIN, timeoutMilliseconds, &revents) > 0 else {
                throw CLIError.timeout(what: "a response in the bare loop", seconds: timeout)
            }
        }
    }

    @discardableResult
    func requests(handle: UInt16, value: [UInt8], writes: Int) throws -> RoundFigures {
        let request = ATTPDU.writeRequest(handle: handle, value: value[...]).bytes
        let cpu = processCPUNanoseconds()
        let start = monotonicNanoseconds()
        for _ in 0..<writes {
            try send(request)
            let op = try receive()
            guard op == ATTOpcode.writeResponse.rawValue else {
                throw CLIError.protocolViolation("the bare loop's Write Request got opcode \(ATTHex.byte(op)) instead of a Write Response")
            }
        }
        return RoundFigures(writes: writes, nanoseconds: monotonicNanoseconds() - start, cpuNanoseconds: processCPUNanoseconds() - cpu)
    }

    /// Write Commands, then one Read Request whose answer proves they were handled (the peer handles PDUs in order):
    /// of the counter when there is one (then also read just before, untimed, and the increase returned), else of
    /// `handle`.
    @discardableResult
    func commands(handle: UInt16, value: [UInt8], writes: Int, counter: UInt16? = nil) throws -> (RoundFigures, counted: Int?) {
        let command = ATTPDU.writeCommand(handle: handle, value: value[...]).bytes
        let before = try counter.map { try readCounter($0) }
        let cpu = processCPUNanoseconds()
        let start = monotonicNanoseconds()
        for _ in 0..<writes { try send(command) }
        var counted: Int?
        if let counter, let before {
            counted = try readCounter(counter) - before
        } else {
            try send(ATTPDU.readRequest(handle: handle).bytes)
            _ = try receive()
        }
        return (RoundFigures(writes: writes, nanoseconds: monotonicNanoseconds() - start, cpuNanoseconds: processCPUNanoseconds() - cpu), counted)
    }

    /// Reads the peer's write counter (little-endian, 1-8 bytes) with one Read Request.
    func readCounter(_ handle: UInt16) throws -> Int {
        try send(ATTPDU.readRequest(handle: handle).bytes)
        let op = try receive()
        guard op == ATTOpcode.readResponse.rawValue else {
            throw CLIError.protocolViolation("the bare loop's Read Request of the counter \(ATTHex.handle(handle)) got opcode \(ATTHex.byte(op)) instead of a Read Response")
        }
        return buffer[1..<min(received, 9)].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
    }
}

/// `mirror bench --loopback`: a raw peer in this process, on a private unix socket, as plain as the library
/// benchmark's (tools/gatt-bench): one thread per connection that answers Exchange MTU (517), Write Requests
/// (Write Response) and Read Requests (the little-endian count of writes it received, for --counter), and counts
/// Write Commands. What the CLI costs over the library shows against it, not the peer's own work.
final class LoopbackPeer: Sendable {
    let path: String
    let listener: Int32
    /// Wakes the accept thread for `close`.
    let wake: Int32
    /// Writes (requests and commands) received over every connection.
    let writes = Atomic<Int>(0)
    static let sinkHandle: UInt16 = 0x0012
    static let counterHandle: UInt16 = 0x0014

    init() throws {
        path = "/tmp/mirror-bench-\(getpid()).sock"
        _ = cbz_unlink(path)
        let fd = cbz_unix_socket()
        guard fd >= 0 else { throw BareLoop.failure("socket(AF_UNIX, SOCK_SEQPACKET)", "opening the loopback peer's socket") }
        guard cbz_unix_bind(fd, path) == 0, cbz_listen(fd, 16) == 0 else {
            let e = BareLoop.failure("bind/listen", "listening at \(path) for the loopback peer")
            _ = cbz_close(fd)
            throw e
        }
        listener = fd
        wake = cbz_eventfd()
        guard wake >= 0 else {
            let e = BareLoop.failure("eventfd", "setting up the loopback peer")
            _ = cbz_close(fd)
            throw e
        }
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Stops accepting (the accept thread closes the listening socket) and removes the socket file.
    func close() {
        _ = cbz_eventfd_signal(wake)
        _ = cbz_unlink(path)
    }

    private func acceptLoop() {
        var revents: Int16 = 0
        var wakeEvents: Int16 = 0
        while true {
            guard cbz_poll_two(listener, CBZ_POLLIN, wake, CBZ_POLLIN, -1, &revents, &wakeEvents) > 0 else {
                if cbz_errno() == EINTR { continue }
                break
            }
            if wakeEvents != 0 || revents & (CBZ_POLLERR | CBZ_POLLHUP) != 0 { break }
            let c = cbz_accept(listener)
            if c < 0 {
                if cbz_errno() == EAGAIN || cbz_errno() == EINTR { continue }
                break
            }
            let thread = Thread { [self] in serve(c) }
            thread.start()
        }
        _ = cbz_close(listener)
        _ = cbz_close(wake)
    }

    private func serve(_ fd: Int32) {
        var buf = [UInt8](repeating: 0, count: 1024)
        var revents: Int16 = 0
        var truncated: Int32 = 0
        func reply(_ pdu: [UInt8]) {
            while pdu.withUnsafeBytes({ cbz_send(fd, $0.baseAddress, $0.count) }) < 0 {
                guard cbz_errno() == EAGAIN || cbz_errno() == EINTR else { return }
                _ = cbz_poll_one(fd, CBZ_POLLOUT, -1, &revents)
            }
        }
        while true {
            let n = buf.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
            if n > 0 {
                switch buf[0] {
                case 0x52: writes.add(1, ordering: .relaxed)
                case 0x12:
                    writes.add(1, ordering: .relaxed)
                    reply([0x13])
                case 0x02: reply([0x03, 0x05, 0x02])  // Exchange MTU Response, server Rx MTU 517
                case 0x0A:
                    let count = UInt32(truncatingIfNeeded: writes.load(ordering: .relaxed))
                    reply([0x0B, UInt8(count & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count >> 16 & 0xFF), UInt8(count >> 24)])
                default:
                    if buf[0] & 0x40 == 0 { reply([0x01, buf[0], 0x00, 0x00, 0x06]) }  // Request Not Supported
                }
                continue
            }
            if n < 0 && (cbz_errno() == EAGAIN || cbz_errno() == EINTR) {
                _ = cbz_poll_one(fd, CBZ_POLLIN, -1, &revents)
                continue
            }
            break
        }
        _ = cbz_close(fd)
    }
}

func seconds3(_ s: Double) -> String {
    let ms = Int((s * 1000).rounded())
    let frac = String(ms % 1000)
    return "\(ms / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
}

func format2(_ v: Double) -> String {
    let hundredths = Int((v * 100).rounded())
    let frac = String(hundredths % 100)
    return "\(hundredths / 100).\(String(repeating: "0", count: 2 - frac.count))\(frac)"
}

/// "1.23 MB/s"-style figure: bytes per second in B, kB, MB (decimal).
func rate(_ bytesPerSecond: Double) -> String {
    if bytesPerSecond >= 1e6 { return "\(format2(bytesPerSecond / 1e6)) MB" }
    if bytesPerSecond >= 1e3 { return "\(format2(bytesPerSecond / 1e3)) kB" }
    return "\(Int(bytesPerSecond.rounded())) B"
}

/// "190 µs", "1.25 ms"
func micro(_ us: Double) -> String {
    us >= 1000 ? "\(format2(us / 1000)) ms" : "\(Int(us.rounded())) µs"
}
