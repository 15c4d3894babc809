// gatt-bench: what the GATT client costs over a bare socket loop, on the same socket type (AF_UNIX
// SOCK_SEQPACKET), against the same peer running in another thread.
//
//   writeRequestRatio = (client's Write Request round trip) / (bare send+recv round trip)   goal <= 1.3
//                       (both loops on connections open side by side, alternating in chunks of 500)
//   writeCommandRatio = (client's Write Command throughput) / (bare send loop throughput)   goal >= 0.8
//
// Every Write Command is counted at the peer: a run ends only when the peer has received all of them.
// Usage: gatt-bench [--json] [--requests N] [--commands N] [--rounds N]
import ATTStack
import LinuxBluetooth
import CBlueZSocket
import Dispatch
import Foundation
import GATTClient
import Synchronization

struct BenchError: Error, CustomStringConvertible {
    var description: String
}

func fail(_ what: String) -> BenchError {
    let e = cbz_errno()
    return BenchError(description: "\(what) failed with errno \(e) (\(String(cString: cbz_errno_description(e))))")
}

/// The peer: one raw non-blocking socket served by one thread. It answers Write Requests with Write Responses and
/// counts Write Commands; `done` finishes once it has counted `expectedCommands`.
final class Peer: @unchecked Sendable {
    // @unchecked: `fd` is used only by the peer thread after start; the counters are atomics; `done` is a OnceBox.
    let fd: Int32
    let expectedCommands: Int
    let commands = Atomic<Int>(0)
    let requests = Atomic<Int>(0)
    let done = OnceBox<Void>()

    init(fd: Int32, expectedCommands: Int) {
        self.fd = fd
        self.expectedCommands = expectedCommands
    }

    func start() {
        let t = Thread { [self] in run() }
        t.start()
    }

    private func run() {
        var buf = [UInt8](repeating: 0, count: 1024)
        let response: [UInt8] = [0x13]
        var revents: Int16 = 0
        var truncated: Int32 = 0
        while true {
            let n = buf.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
            if n > 0 {
                if buf[0] == 0x12 {
                    _ = requests.wrappingAdd(1, ordering: .relaxed)
                    while response.withUnsafeBytes({ cbz_send(fd, $0.baseAddress, 1) }) < 0 {
                        _ = cbz_poll_one(fd, CBZ_POLLOUT, -1, &revents)
                    }
                } else if buf[0] == 0x52 {
                    if commands.wrappingAdd(1, ordering: .relaxed).newValue == expectedCommands { done.finish(.success(())) }
                }
                continue
            }
            if n == 0 { break }
            if cbz_errno() == EAGAIN {
                _ = cbz_poll_one(fd, CBZ_POLLIN, -1, &revents)
                continue
            }
            break
        }
        _ = cbz_close(fd)
        done.finish(.success(()))
    }
}

/// A listening AF_UNIX SOCK_SEQPACKET socket; each connection gets its own peer thread.
final class Listener: @unchecked Sendable {
    // @unchecked: `fd` is immutable after init and only accept(2) and close(2) use it.
    let path: String
    let fd: Int32

    init() throws {
        path = "/tmp/gatt-bench-\(getpid()).sock"
        _ = cbz_unlink(path)
        fd = cbz_unix_socket()
        guard fd >= 0 else { throw fail("socket") }
        guard cbz_unix_bind(fd, path) == 0 else { throw fail("bind \(path)") }
        guard cbz_listen(fd, 16) == 0 else { throw fail("listen") }
    }

    /// Accepts the next connection (already connected by the caller) and starts its peer.
    func acceptPeer(expectedCommands: Int) throws -> Peer {
        var revents: Int16 = 0
        _ = cbz_poll_one(fd, CBZ_POLLIN, 5000, &revents)
        let c = cbz_accept(fd)
        guard c >= 0 else { throw fail("accept") }
        let peer = Peer(fd: c, expectedCommands: expectedCommands)
        peer.start()
        return peer
    }

    func close() {
        _ = cbz_close(fd)
        _ = cbz_unlink(path)
    }
}

/// A raw client socket connected to the listener.
func rawConnect(_ listener: Listener) throws -> Int32 {
    let fd = cbz_unix_socket()
    guard fd >= 0 else { throw fail("socket") }
    guard cbz_unix_connect(fd, listener.path) == 0 else { throw fail("connect") }
    return fd
}

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// CPU time of the whole process (every thread: client, bearer, peer), in nanoseconds.
func cpuNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Per operation: wall-clock time and process CPU time, in nanoseconds.
struct Cost {
    var wall: Double
    var cpu: Double
}

/// Measures `n` operations run by `body`.
func measure(_ n: Int, _ body: () throws -> Void) rethrows -> Cost {
    let (t0, c0) = (now(), cpuNow())
    try body()
    let (t1, c1) = (now(), cpuNow())
    return Cost(wall: Double(t1 - t0) / Double(n), cpu: Double(c1 - c0) / Double(n))
}

func measure(_ n: Int, _ body: () async throws -> Void) async rethrows -> Cost {
    let (t0, c0) = (now(), cpuNow())
    try await body()
    let (t1, c1) = (now(), cpuNow())
    return Cost(wall: Double(t1 - t0) / Double(n), cpu: Double(c1 - c0) / Double(n))
}

/// The bare round trip that both request loops time: send a Write Request, wait for POLLIN, receive the response.
final class BareRequester {
    let fd: Int32
    private let pdu: [UInt8] = [0x12, 0x12, 0x00, 0x01, 0x02]
    private var buf = [UInt8](repeating: 0, count: 1024)
    private var revents: Int16 = 0
    private var truncated: Int32 = 0

    init(fd: Int32) { self.fd = fd }

    func once() throws {
        while pdu.withUnsafeBytes({ cbz_send(fd, $0.baseAddress, $0.count) }) < 0 {
            guard cbz_errno() == EAGAIN else { throw fail("send") }
            _ = cbz_poll_one(fd, CBZ_POLLOUT, -1, &revents)
        }
        while true {
            let r = buf.withUnsafeMutableBytes { cbz_recv_datagram(fd, $0.baseAddress, $0.count, &truncated) }
            if r > 0 { break }
            guard r < 0, cbz_errno() == EAGAIN else { throw fail("recv") }
            _ = cbz_poll_one(fd, CBZ_POLLIN, -1, &revents)
        }
    }
}

/// The bare loop: `BareRequester.once()`, `n` times.
func bareRequests(_ listener: Listener, n: Int) throws -> Cost {
    let fd = try rawConnect(listener)
    let peer = try listener.acceptPeer(expectedCommands: .max)
    let bare = BareRequester(fd: fd)
    for _ in 0..<min(n, 2000) { try bare.once() }
    let cost = try measure(n) { for _ in 0..<n { try bare.once() } }
    _ = cbz_close(fd)
    _ = peer
    return cost
}

/// A bare request loop and a client on two connections open side by side, measured in alternating chunks so
/// that background load (other processes on a shared machine) hits both alike: a round's ratio compares runs
/// milliseconds apart, not a bare run with a client run a second later.
func interleavedRequests(_ listener: Listener, n: Int, chunk: Int) async throws -> (bare: Cost, client: Cost) {
    let fd = try rawConnect(listener)
    let peer = try listener.acceptPeer(expectedCommands: .max)
    let (client, _) = try await connectClient(listener, expectedCommands: .max)
    let value: [UInt8] = [0x01, 0x02]
    // The same bare round trip as `bareRequests`.
    let requester = BareRequester(fd: fd)
    func clientChunk(_ k: Int) async throws {
        for _ in 0..<k { try await client.write(handle: 0x0012, value: value) }
    }
    // The whole loop prefers the bearer's executor, so that the client's chunks start without a hop from another
    // thread; the bare chunks run wherever the task is (the reader thread, idle meanwhile): the same code either way.
    let (bare, cli) = try await withTaskExecutorPreference(client.bearerExecutor) { () async throws -> (Cost, Cost) in
        for _ in 0..<min(n, 2000) { try requester.once() }
        try await clientChunk(min(n, 2000))
        var bare = Cost(wall: 0, cpu: 0), cli = Cost(wall: 0, cpu: 0)
        var done = 0
        while done < n {
            let k = min(chunk, n - done)
            let b = try measure(k) { for _ in 0..<k { try requester.once() } }
            let c = try await measure(k) { try await clientChunk(k) }
            bare.wall += b.wall * Double(k); bare.cpu += b.cpu * Double(k)
            cli.wall += c.wall * Double(k); cli.cpu += c.cpu * Double(k)
            done += k
        }
        return (bare, cli)
    }
    _ = cbz_close(fd)
    _ = peer
    client.close()
    return (Cost(wall: bare.wall / Double(n), cpu: bare.cpu / Double(n)),
            Cost(wall: cli.wall / Double(n), cpu: cli.cpu / Double(n)))
}

/// The bare send loop: `n` Write Commands, waiting for POLLOUT on EAGAIN; ends when the peer counted them all.
func bareCommands(_ listener: Listener, n: Int, valueLength: Int) async throws -> Cost {
    let fd = try rawConnect(listener)
    let peer = try listener.acceptPeer(expectedCommands: n)
    var pdu: [UInt8] = [0x52, 0x12, 0x00] + [UInt8](repeating: 0xAB, count: valueLength)
    var revents: Int16 = 0
    let cost = try await measure(n) {
        for i in 0..<n {
            pdu[3] = UInt8(truncatingIfNeeded: i)
            while pdu.withUnsafeBytes({ cbz_send(fd, $0.baseAddress, $0.count) }) < 0 {
                guard cbz_errno() == EAGAIN else { throw fail("send") }
                _ = cbz_poll_one(fd, CBZ_POLLOUT, -1, &revents)
            }
        }
        try await peer.done.value()
    }
    guard peer.commands.load(ordering: .relaxed) == n else {
        throw BenchError(description: "bare loop: the peer counted \(peer.commands.load(ordering: .relaxed)) of \(n) commands")
    }
    _ = cbz_close(fd)
    return cost
}

func connectClient(_ listener: Listener, expectedCommands: Int) async throws -> (GATTClient, Peer) {
    let bearer = try ATTBearer.connect(unixPath: listener.path)
    let peer = try listener.acceptPeer(expectedCommands: expectedCommands)
    let client = try await GATTClient.connect(transport: bearer)
    return (client, peer)
}

/// The client: `n` Write Requests, one after the other, each awaited; `inline`: on the bearer's executor.
func clientRequests(_ listener: Listener, n: Int, inline: Bool) async throws -> Cost {
    let (client, _) = try await connectClient(listener, expectedCommands: .max)
    let value: [UInt8] = [0x01, 0x02]
    func loop() async throws -> Cost {
        for _ in 0..<min(n, 2000) { try await client.write(handle: 0x0012, value: value) }
        return try await measure(n) { for _ in 0..<n { try await client.write(handle: 0x0012, value: value) } }
    }
    let r = inline ? try await withTaskExecutorPreference(client.bearerExecutor) { try await loop() } : try await loop()
    client.close()
    return r
}

/// The client: `n` writes without response from one task; ends when the peer counted them all.
func clientCommands(_ listener: Listener, n: Int, valueLength: Int) async throws -> Cost {
    let (client, peer) = try await connectClient(listener, expectedCommands: n)
    var value = [UInt8](repeating: 0xAB, count: valueLength)
    let cost = try await measure(n) {
        for i in 0..<n {
            value[0] = UInt8(truncatingIfNeeded: i)
            try await client.writeWithoutResponse(handle: 0x0012, value: value)
        }
        try await peer.done.value()
    }
    guard peer.commands.load(ordering: .relaxed) == n else {
        throw BenchError(description: "client: the peer counted \(peer.commands.load(ordering: .relaxed)) of \(n) commands")
    }
    client.close()
    return cost
}

/// A transport that answers every Write Request inline, inside `trySend`: the engine's own cost per request, with no
/// socket and no thread (for profiling; `--only engine`).
final class InlineAnswerTransport: ATTTransport, @unchecked Sendable {
    // @unchecked: `sink` is set once by `start` before any request and only read afterwards.
    let label = "inline"
    var sink: (any ATTTransportSink)?
    func start(_ sink: any ATTTransportSink) { self.sink = sink }
    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        if pdu.first == 0x12 { sink?.transport(didReceive: [0x13]) }
        return .sent
    }
    func whenWritable(_ callback: @escaping @Sendable () -> Void) { callback() }
    func close(reason: String) { sink?.transport(didCloseWith: .closedLocally(reason: reason)) }
}

func engineOnly(n: Int) async throws -> Cost {
    let client = try await GATTClient.connect(transport: InlineAnswerTransport())
    let value: [UInt8] = [0x01, 0x02]
    for _ in 0..<min(n, 2000) { try await client.write(handle: 0x0012, value: value) }
    let cost = try await measure(n) { for _ in 0..<n { try await client.write(handle: 0x0012, value: value) } }
    client.close()
    return cost
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s[s.count / 2]
}

func median(_ xs: [Cost]) -> Cost { Cost(wall: median(xs.map(\.wall)), cpu: median(xs.map(\.cpu))) }

/// The spread of per-round ratios: "0.92-1.81" (each round's client run against the bare run of the same round).
func spread(_ xs: [Double]) -> (min: Double, max: Double) { (xs.min() ?? 0, xs.max() ?? 0) }

// MARK: main

var json = false
var requests = 20_000
var commands = 200_000
var rounds = 5
/// For profiling one side alone: "bare-requests", "client-requests", "pool-requests".
var only: String?
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--json": json = true
    case "--requests": requests = Int(args.popFirst() ?? "") ?? requests
    case "--commands": commands = Int(args.popFirst() ?? "") ?? commands
    case "--rounds": rounds = Int(args.popFirst() ?? "") ?? rounds
    case "--only": only = args.popFirst()
    case "-h", "--help":
        print("usage: gatt-bench [--json] [--requests N] [--commands N] [--rounds N] [--only bare-requests|client-requests|pool-requests|engine|bare-commands|client-commands]")
        exit(0)
    default:
        FileHandle.standardError.write("gatt-bench: unknown argument \(a)\n".data(using: .utf8)!)
        exit(2)
    }
}

do {
    let listener = try Listener()
    defer { listener.close() }
    if let only {
        let t: Cost
        switch only {
        case "bare-requests": t = try bareRequests(listener, n: requests)
        case "client-requests": t = try await clientRequests(listener, n: requests, inline: true)
        case "pool-requests": t = try await clientRequests(listener, n: requests, inline: false)
        case "engine": t = try await engineOnly(n: requests)
        case "bare-commands": t = try await bareCommands(listener, n: commands, valueLength: 20)
        case "client-commands": t = try await clientCommands(listener, n: commands, valueLength: 20)
        default: throw BenchError(description: "--only takes bare-requests, client-requests, pool-requests, engine, bare-commands or client-commands")
        }
        print(String(format: "%@: %.2f us per operation, %.2f us of CPU", only, t.wall / 1000, t.cpu / 1000))
        exit(0)
    }
    let valueLength = 20
    var bareReq: [Cost] = [], clientReq: [Cost] = [], poolReq: [Cost] = [], bareCmd: [Cost] = [], clientCmd: [Cost] = []
    // Rounds alternate bare and client runs so that background load hits both alike; within a round the bare and
    // client request loops alternate in chunks of 500 round trips.
    for _ in 0..<rounds {
        let (b, c) = try await interleavedRequests(listener, n: requests, chunk: 500)
        bareReq.append(b)
        clientReq.append(c)
        poolReq.append(try await clientRequests(listener, n: requests, inline: false))
        bareCmd.append(try await bareCommands(listener, n: commands, valueLength: valueLength))
        clientCmd.append(try await clientCommands(listener, n: commands, valueLength: valueLength))
    }
    let pr = median(poolReq), br = median(bareReq), cr = median(clientReq), bc = median(bareCmd), cc = median(clientCmd)
    let writeRequestRatio = cr.wall / br.wall
    let writeCommandRatio = bc.wall / cc.wall   // throughput ratio: client / bare
    // CPU per operation of the whole process (client, bearer and peer threads): steadier than wall time on a
    // loaded machine. Lower is better for both.
    let writeRequestCPURatio = cr.cpu / br.cpu
    let writeCommandCPURatio = cc.cpu / bc.cpu
    let writeRequestGoal = 1.3, writeCommandGoal = 0.8
    let writeRequestMet = writeRequestRatio <= writeRequestGoal
    let writeCommandMet = writeCommandRatio >= writeCommandGoal
    // Per-round ratios (client against the bare run of the same round): how much the load moved them.
    let requestRounds = spread(zip(clientReq, bareReq).map { $0.wall / $1.wall })
    let commandRounds = spread(zip(bareCmd, clientCmd).map { $0.wall / $1.wall })
    let requestCPURounds = spread(zip(clientReq, bareReq).map { $0.cpu / $1.cpu })
    if json {
        func f(_ x: Double) -> String { String(format: "%.4f", x) }
        print("{\"writeRequestRatio\": \(f(writeRequestRatio)), \"writeCommandRatio\": \(f(writeCommandRatio)), "
              + "\"writeRequestCPURatio\": \(f(writeRequestCPURatio)), \"writeCommandCPURatio\": \(f(writeCommandCPURatio)), "
              + "\"bareWriteRequestMicroseconds\": \(f(br.wall / 1000)), \"clientWriteRequestMicroseconds\": \(f(cr.wall / 1000)), "
              + "\"bareWriteRequestCPUMicroseconds\": \(f(br.cpu / 1000)), \"clientWriteRequestCPUMicroseconds\": \(f(cr.cpu / 1000)), "
              + "\"poolWriteRequestMicroseconds\": \(f(pr.wall / 1000)), \"poolWriteRequestRatio\": \(f(pr.wall / br.wall)), "
              + "\"bareWriteCommandsPerSecond\": \(f(1e9 / bc.wall)), \"clientWriteCommandsPerSecond\": \(f(1e9 / cc.wall)), "
              + "\"bareWriteCommandCPUMicroseconds\": \(f(bc.cpu / 1000)), \"clientWriteCommandCPUMicroseconds\": \(f(cc.cpu / 1000)), "
              + "\"requests\": \(requests), \"commands\": \(commands), \"valueLength\": \(valueLength), \"rounds\": \(rounds), "
              + "\"writeRequestRatioRoundsMin\": \(f(requestRounds.min)), \"writeRequestRatioRoundsMax\": \(f(requestRounds.max)), "
              + "\"writeRequestCPURatioRoundsMin\": \(f(requestCPURounds.min)), \"writeRequestCPURatioRoundsMax\": \(f(requestCPURounds.max)), "
              + "\"writeCommandRatioRoundsMin\": \(f(commandRounds.min)), \"writeCommandRatioRoundsMax\": \(f(commandRounds.max)), "
              + "\"writeRequestGoal\": \(writeRequestGoal), \"writeCommandGoal\": \(writeCommandGoal), "
              + "\"writeRequestGoalMet\": \(writeRequestMet), \"writeCommandGoalMet\": \(writeCommandMet)}")
    } else {
        print("gatt-bench: AF_UNIX SOCK_SEQPACKET, peer in another thread, median of \(rounds) rounds")
        func verdict(_ met: Bool) -> String { met ? "met" : "NOT met" }
        print(String(format: "  Write Request round trip: bare %.2f us, client %.2f us -> ratio %.2fx (goal <= %.1fx: %@); CPU %.2f vs %.2f us -> %.2fx",
                     br.wall / 1000, cr.wall / 1000, writeRequestRatio, writeRequestGoal, verdict(writeRequestMet),
                     br.cpu / 1000, cr.cpu / 1000, writeRequestCPURatio))
        print(String(format: "    (per-round ratios %.2f-%.2fx, CPU %.2f-%.2fx)", requestRounds.min, requestRounds.max,
                     requestCPURounds.min, requestCPURounds.max))
        print(String(format: "    (callers on the bearer's executor; from the global pool instead: %.2f us, %.2fx)", pr.wall / 1000, pr.wall / br.wall))
        print(String(format: "  Write Command throughput: bare %.0f/s, client %.0f/s -> ratio %.2fx (goal >= %.1fx: %@); CPU per PDU %.2f vs %.2f us -> %.2fx; every PDU counted at the peer",
                     1e9 / bc.wall, 1e9 / cc.wall, writeCommandRatio, writeCommandGoal, verdict(writeCommandMet),
                     bc.cpu / 1000, cc.cpu / 1000, writeCommandCPURatio))
        print(String(format: "    (per-round ratios %.2f-%.2fx)", commandRounds.min, commandRounds.max))
    }
} catch {
    FileHandle.standardError.write("gatt-bench: \(error)\n".data(using: .utf8)!)
    exit(1)
}
