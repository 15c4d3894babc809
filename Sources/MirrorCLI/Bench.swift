// The write benchmark behind `mirror bench`: Write Requests and Write Commands through the GATT client
// (Core Spec 5.4 Vol 3 Part G §4.9.3, §4.9.1), timed after a warm-up, beside a bare socket loop that moves the
// same PDUs over the same socket type without the ATT engine.
import ATTStack
import CBlueZSocket
import GATTClient
import MirrorCommandLine

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
    /// Writes per mode; nil when `duration` is set.
    var count: Int?
    var duration: Double?
    var warmup: Int
    var mode: BenchMode
    /// A characteristic whose value is the peer's little-endian count of writes received, read around each mode.
    var counter: UInt16?
}

/// The figures of one mode.
struct ModeFigures: Sendable {
    var mode: BenchMode
    var writes: Int
    var bytes: Int
    var seconds: Double
    /// Round trips of Write Requests, in nanoseconds (empty for Write Commands).
    var latencies: [UInt64]
    /// Write Commands: time the socket was full (EAGAIN until POLLOUT), and how many sends found it full.
    var blockedSeconds: Double?
    var blockedWaits: Int?
    /// Writes the peer confirmed: Write Responses received (requests), or the counter's increase.
    var confirmed: Int?
    var bare: BareFigures?

    var writesPerSecond: Double { Double(writes) / seconds }
    var bytesPerSecond: Double { Double(bytes) / seconds }
    var ratio: Double? { bare.map { writesPerSecond / $0.writesPerSecond } }

    func percentile(_ p: Double) -> Double? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return Double(sorted[max(0, min(sorted.count - 1, rank))]) / 1000
    }

    var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("mode", .string(mode.rawValue)), ("writes", .int(writes)), ("bytes", .int(bytes)),
            ("seconds", .double(seconds)), ("bytesPerSecond", .double(bytesPerSecond.rounded())),
            ("writesPerSecond", .double(writesPerSecond.rounded())),
        ]
        if !latencies.isEmpty {
            fields.append(("latencyMicroseconds", .object([
                ("p50", .double(percentile(50)!)), ("p90", .double(percentile(90)!)),
                ("p99", .double(percentile(99)!)), ("max", .double(percentile(100)!)),
            ])))
        }
        if let blockedSeconds, let blockedWaits {
            fields.append(("backpressure", .object([("seconds", .double(blockedSeconds)), ("waits", .int(blockedWaits))])))
        }
        fields.append(("confirmed", confirmed.map { .int($0) } ?? .null))
        if let bare {
            fields.append(("bare", .object([
                ("writes", .int(bare.writes)), ("seconds", .double(bare.seconds)),
                ("bytesPerSecond", .double(bare.bytesPerSecond.rounded())),
                ("writesPerSecond", .double(bare.writesPerSecond.rounded())),
            ])))
            fields.append(("ratioToBare", .double((ratio! * 1000).rounded() / 1000)))
        }
        return .object(fields)
    }

    var text: [String] {
        let title = mode == .withResponse ? "with response (Write Request):" : "without response (Write Command):"
        var line = "\(title) \(writes) writes in \(seconds3(seconds)) s: \(rate(bytesPerSecond))/s, \(Int(writesPerSecond.rounded())) writes/s"
        if let confirmed { line += ", peer confirmed \(confirmed)" }
        var lines = [line]
        if !latencies.isEmpty {
            lines.append("  round trip: p50 \(micro(percentile(50)!)), p90 \(micro(percentile(90)!)), p99 \(micro(percentile(99)!)), max \(micro(percentile(100)!))")
        }
        if let blockedSeconds, let blockedWaits {
            lines.append("  waiting on backpressure: \(seconds3(blockedSeconds)) s (\(blockedWaits) send\(blockedWaits == 1 ? "" : "s") found the socket full)")
        }
        if let bare, let ratio {
            lines.append("  bare socket loop: \(bare.writes) writes in \(seconds3(bare.seconds)) s: \(rate(bare.bytesPerSecond))/s, \(Int(bare.writesPerSecond.rounded())) writes/s; mirror/bare = \(String(format2(ratio)))")
        }
        return lines
    }
}

/// The figures of the bare socket loop for one mode.
struct BareFigures: Sendable {
    var writes: Int
    var bytes: Int
    var seconds: Double
    var writesPerSecond: Double { Double(writes) / seconds }
    var bytesPerSecond: Double { Double(bytes) / seconds }
}

/// The figures of one run.
struct BenchResult: Sendable {
    var target: String
    var handle: UInt16
    var size: Int
    var mtu: Int
    var warmup: Int
    var modes: [ModeFigures]

    var json: JSONValue {
        .object([
            ("target", .string(target)), ("handle", .int(Int(handle))), ("size", .int(size)), ("mtu", .int(mtu)),
            ("warmup", .int(warmup)), ("modes", .array(modes.map(\.json))),
        ])
    }

    var text: [String] {
        ["bench \(target) handle \(hex16(handle)): \(size)-byte values, MTU \(mtu), after \(warmup) warm-up writes per mode"]
            + modes.flatMap(\.text)
    }
}

enum Bench {
    static func run(target: TargetArgument, plan: BenchPlan, inv: Invocation) async throws -> BenchResult {
        let session = try await Session.open(target, inv)
        defer { session.close() }
        let client = session.client
        let size = plan.size ?? client.writeValueBudget
        let value = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        var modes: [ModeFigures] = []
        if plan.mode != .withoutResponse {
            modes.append(try await measureRequests(session, plan: plan, value: value))
        }
        if plan.mode != .withResponse {
            modes.append(try await measureCommands(session, plan: plan, value: value))
        }
        if case .unix(let path) = target.target {
            for i in modes.indices {
                modes[i].bare = try BareLoop.run(path: path, mode: modes[i].mode, handle: plan.handle, value: value,
                                                 writes: modes[i].writes, warmup: plan.warmup, clientRxMTU: session.clientRxMTU,
                                                 timeout: inv.global.timeout)
            }
        }
        return BenchResult(target: target.description, handle: plan.handle, size: size, mtu: session.mtu,
                           warmup: plan.warmup, modes: modes)
    }

    /// Reads the peer's write counter (little-endian, 1-8 bytes).
    static func readCounter(_ client: GATTClient, _ handle: UInt16?) async throws -> Int? {
        guard let handle else { return nil }
        let bytes = try await client.read(handle: handle)
        return bytes.prefix(8).enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
    }

    static func measureRequests(_ session: Session, plan: BenchPlan, value: [UInt8]) async throws -> ModeFigures {
        let client = session.client
        let handle = plan.handle
        for _ in 0..<plan.warmup { try await client.write(handle: handle, value: value) }
        var latencies: [UInt64] = []
        latencies.reserveCapacity(plan.count ?? 100_000)
        let deadline = plan.duration.map { monotonicNanoseconds() + UInt64($0 * 1e9) }
        let start = monotonicNanoseconds()
        var now = start
        while true {
            if let count = plan.count, latencies.count >= count { break }
            if let deadline, now >= deadline { break }
            try await client.write(handle: handle, value: value)
            let after = monotonicNanoseconds()
            latencies.append(after - now)
            now = after
        }
        let seconds = Double(now - start) / 1e9
        return ModeFigures(mode: .withResponse, writes: latencies.count, bytes: latencies.count * value.count,
                           seconds: seconds, latencies: latencies, confirmed: latencies.count)
    }

    static func measureCommands(_ session: Session, plan: BenchPlan, value: [UInt8]) async throws -> ModeFigures {
        let client = session.client
        let handle = plan.handle
        let timeout = session.timeout
        for _ in 0..<plan.warmup { try await client.writeWithoutResponse(handle: handle, value: value, timeout: timeout) }
        // One round trip so that the warm-up has drained before the clock starts.
        let before = try await drain(client, plan: plan)
        let blockedBefore = session.transport.observations
        let deadline = plan.duration.map { monotonicNanoseconds() + UInt64($0 * 1e9) }
        let start = monotonicNanoseconds()
        var writes = 0
        while true {
            if let count = plan.count, writes >= count { break }
            if let deadline, writes & 63 == 0, monotonicNanoseconds() >= deadline { break }
            try await client.writeWithoutResponse(handle: handle, value: value, timeout: timeout)
            writes += 1
        }
        // The commands count as moved once the peer answered a request sent after them (it handles PDUs in order).
        let after = try await drain(client, plan: plan)
        let end = monotonicNanoseconds()
        let blockedAfter = session.transport.observations
        let confirmed: Int? = if let a = after, let b = before { a - b } else { nil }
        return ModeFigures(mode: .withoutResponse, writes: writes, bytes: writes * value.count,
                           seconds: Double(end - start) / 1e9, latencies: [],
                           blockedSeconds: Double(blockedAfter.blockedNanoseconds - blockedBefore.blockedNanoseconds) / 1e9,
                           blockedWaits: blockedAfter.wouldBlockCount - blockedBefore.wouldBlockCount,
                           confirmed: confirmed)
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

/// The same Write Requests and Write Commands moved over the same kind of socket by a plain loop: send, then
/// poll and receive (requests), or send until EAGAIN, poll for POLLOUT, send again (commands). No ATT engine,
/// no tasks: the floor the CLI's figures are compared with.
enum BareLoop {
    static func run(path: String, mode: BenchMode, handle: UInt16, value: [UInt8], writes: Int, warmup: Int,
                    clientRxMTU: Int, timeout: Double) throws -> BareFigures {
        let fd = cbz_unix_socket()
        guard fd >= 0 else { throw failure("socket(AF_UNIX, SOCK_SEQPACKET)", "opening the bare loop's socket") }
        defer { _ = cbz_close(fd) }
        guard cbz_unix_connect(fd, path) == 0 else { throw failure("connect", "connecting the bare loop to unix:\(path)") }
        let ms = Int32(clamping: Int(timeout * 1000))
        var buffer = [UInt8](repeating: 0, count: 1024)

        func send(_ pdu: [UInt8]) throws {
            while true {
                let n = pdu.withUnsafeBytes { cbz_send(fd, $0.baseAddress, $0.count) }
                if n >= 0 { return }
                let e = cbz_errno()
                guard e == EAGAIN || e == EWOULDBLOCK || e == EINTR else { throw failure("send", "the bare loop's send", e) }
                var revents: Int16 = 0
                guard cbz_poll_one(fd, CBZ_POLLOUT, ms, &revents) > 0 else { throw CLIError.timeout(what: "the bare loop's socket to take more data", seconds: timeout) }
            }
        }
        func receive() throws -> UInt8 {
            while true {
                var truncated: Int32 = 0
                let n = buffer.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
                if n > 0 {
                    // Skip what the peer pushes unasked; answer its indications as the spec requires.
                    if buffer[0] == ATTOpcode.handleValueNotification.rawValue { continue }
                    if buffer[0] == ATTOpcode.handleValueIndication.rawValue { try send([ATTOpcode.handleValueConfirmation.rawValue]); continue }
                    return buffer[0]
                }
                if n == 0 { throw CLIError.connection("the peer closed the bare loop's connection") }
                let e = cbz_errno()
                guard e == EAGAIN || e == EWOULDBLOCK || e == EINTR else { throw failure("recv", "the bare loop's receive", e) }
                var revents: Int16 = 0
                guard cbz_poll_one(fd, CBZ_POLLIN, ms, &revents) > 0 else { throw CLIError.timeout(what: "a response in the bare loop", seconds: timeout) }
            }
        }

        // The same MTU as the GATT client's connection, so the peer accepts the same values.
        try send(ATTPDU.exchangeMTURequest(clientRxMTU: UInt16(clientRxMTU)).bytes)
        _ = try receive()
        let request = ATTPDU.writeRequest(handle: handle, value: value[...]).bytes
        let command = ATTPDU.writeCommand(handle: handle, value: value[...]).bytes
        let drain = ATTPDU.readRequest(handle: handle).bytes
        switch mode {
        case .withResponse, .both:
            for _ in 0..<warmup { try send(request); _ = try receive() }
            let start = monotonicNanoseconds()
            for _ in 0..<writes {
                try send(request)
                let op = try receive()
                guard op == ATTOpcode.writeResponse.rawValue else {
                    throw CLIError.protocolViolation("the bare loop's Write Request got opcode \(hex8(op)) instead of a Write Response")
                }
            }
            return BareFigures(writes: writes, bytes: writes * value.count, seconds: Double(monotonicNanoseconds() - start) / 1e9)
        case .withoutResponse:
            for _ in 0..<warmup { try send(command) }
            try send(drain)
            _ = try receive()
            let start = monotonicNanoseconds()
            for _ in 0..<writes { try send(command) }
            try send(drain)
            _ = try receive()
            return BareFigures(writes: writes, bytes: writes * value.count, seconds: Double(monotonicNanoseconds() - start) / 1e9)
        }
    }

    static func failure(_ syscall: String, _ context: String, _ code: Int32 = cbz_errno()) -> SocketError {
        SocketError(syscall: syscall, errno: code, context: context)
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
