// gatt-bench: what the GATT client costs over a bare socket loop, on the same socket type (AF_UNIX
// SOCK_SEQPACKET), against the same peer running in another thread.
//
//   writeRequestRatio = (client's Write Request round trip) / (bare send+recv round trip)   goal <= 1.3
//                       (both loops on connections open side by side, alternating in chunks of 500)
//   writeCommandRatio = (client's Write Command throughput) / (bare send loop throughput)   goal >= 0.8
//
// Every Write Command is counted at the peer: a run ends only when the peer has received all of them. The loops
// are BenchMeasurement's (BenchRun's client rounds, BareATT's `BareLoop` timed by its turns) against BareATT's
// `PlainPeer`: the same ones `mirror bench` uses.
// Usage: gatt-bench [--json] [--no-pin] [--requests N] [--commands N] [--rounds N]
import BenchMeasurement
import ATTStack
import BareATT
import CBlueZSocket
import Dispatch
import Foundation
import GATTClient
import JSON
import LinuxBluetooth
import LinkCore

struct BenchError: Error, CustomStringConvertible {
    var description: String
}

/// Each of the bare loop's polls, and the wait for the peer to count every Write Command, give up after this.
let limit = 60.0

/// The value both request loops write, and the handle every loop writes to.
let requestValue: [UInt8] = [0x01, 0x02]
let sink = PlainPeer.sinkHandle

/// Per operation: wall-clock time and process CPU time, in nanoseconds.
struct Cost {
    var wall: Double
    var cpu: Double
}

extension Cost {
    /// Nanoseconds per write of a round timed by BenchMeasurement's loops.
    init(_ r: RoundFigures) {
        self.init(wall: Double(r.nanoseconds) / Double(r.writes), cpu: Double(r.cpuNanoseconds) / Double(r.writes))
    }
}

/// `n` Write Requests, or Write Commands, of `value` to the sink: the plan of one round of BenchMeasurement's loops.
func plan(_ n: Int, _ mode: BenchMode, value: [UInt8]) -> BenchPlan {
    BenchPlan(handle: sink, size: value.count, count: n, duration: nil, warmup: 0, mode: mode, counter: nil, rounds: 1)
}

/// The client's round of `n` Write Requests, each awaited (`BenchRun.measureRequests`, as `mirror bench` times them).
func clientRound(_ client: GATTClient, _ n: Int) async throws -> RoundFigures {
    try await BenchRun.measureRequests(client, plan: plan(n, .withResponse, value: requestValue), value: requestValue).0
}

/// The bare loop (BareATT's `BareLoop`, timed as `mirror bench` times it): `n` Write Request round trips, send then
/// poll and receive.
func bareRequests(_ peer: PlainPeer, n: Int) throws -> Cost {
    let bare = try BareLoop(connectingTo: peer.path, timeout: limit)
    defer { bare.close() }
    try bare.requests(handle: sink, value: requestValue, writes: min(n, 2000))
    return Cost(try bare.requests(handle: sink, value: requestValue, writes: n))
}

/// A bare request loop and a client on two connections open side by side, measured in alternating chunks so
/// that background load (other processes on a shared machine) hits both alike: a round's ratio compares runs
/// milliseconds apart, not a bare run with a client run a second later.
func interleavedRequests(_ peer: PlainPeer, n: Int, chunk: Int) async throws -> (bare: Cost, client: Cost) {
    // The same bare round trip as `bareRequests`.
    let bare = try BareLoop(connectingTo: peer.path, timeout: limit)
    defer { bare.close() }
    let client = try await connectClient(peer)
    // The whole loop runs in a task that prefers the link's event loop (as `mirror bench` and every command run
    // their writes), so that the client's chunks start without a hop from another thread; the bare chunks run
    // wherever the task is (the loop's thread, idle meanwhile): the same code either way.
    let (b, c) = try await withTaskExecutorPreference(client.eventLoop) { () async throws -> (RoundFigures, RoundFigures) in
        try bare.requests(handle: sink, value: requestValue, writes: min(n, 2000))
        _ = try await clientRound(client, min(n, 2000))
        var b = RoundFigures(writes: 0, nanoseconds: 0, cpuNanoseconds: 0), c = b
        func add(_ chunk: RoundFigures, to sum: inout RoundFigures) {
            sum = RoundFigures(writes: sum.writes + chunk.writes, nanoseconds: sum.nanoseconds + chunk.nanoseconds,
                               cpuNanoseconds: sum.cpuNanoseconds + chunk.cpuNanoseconds)
        }
        while b.writes < n {
            let k = min(chunk, n - b.writes)
            add(try bare.requests(handle: sink, value: requestValue, writes: k), to: &b)
            add(try await clientRound(client, k), to: &c)
        }
        return (b, c)
    }
    client.close()
    return (Cost(b), Cost(c))
}

/// Waits until the peer counted `n` Write Commands more than `before`, and checks it counted exactly that many.
func expectCommands(_ peer: PlainPeer, _ n: Int, after before: Int, sender: String) throws {
    try peer.waitUntil(writeCommands: before + n, timeout: limit)
    let counted = peer.writeCommands - before
    guard counted == n else { throw BenchError(description: "\(sender): the peer counted \(counted) of \(n) commands") }
}

/// The bare send loop: `n` Write Commands, waiting for POLLOUT on EAGAIN, timed until the peer answered a Read
/// Request sent after them; then the peer must have counted them all.
func bareCommands(_ peer: PlainPeer, n: Int, valueLength: Int) throws -> Cost {
    let bare = try BareLoop(connectingTo: peer.path, timeout: limit)
    defer { bare.close() }
    let value = [UInt8](repeating: 0xAB, count: valueLength)
    let before = peer.writeCommands
    let (round, _) = try bare.commands(handle: sink, value: value, writes: n)
    try expectCommands(peer, n, after: before, sender: "bare loop")
    return Cost(round)
}

func connectClient(_ peer: PlainPeer) async throws -> GATTClient {
    try await GATTClient.connect(transport: try ATTBearer.connect(unixPath: peer.path))
}

/// Where the client's Write Requests run: plain `client.write` from a task that prefers the link's event loop (as
/// the product's commands run them), or from the global pool.
enum RequestPath { case loop, pool }

/// The client: `n` Write Requests, one after the other, each awaited, on `path`.
func clientRequests(_ peer: PlainPeer, n: Int, path: RequestPath) async throws -> Cost {
    let client = try await connectClient(peer)
    func run() async throws -> Cost {
        _ = try await clientRound(client, min(n, 2000))
        return Cost(try await clientRound(client, n))
    }
    let r: Cost
    switch path {
    case .loop: r = try await withTaskExecutorPreference(client.eventLoop) { try await run() }
    case .pool: r = try await run()
    }
    client.close()
    return r
}

/// The client: `n` writes without response from a task that prefers the link's event loop (`BenchRun.measureCommands`,
/// timed until the peer answered a Read Request after them); then the peer must have counted them all.
func clientCommands(_ peer: PlainPeer, n: Int, valueLength: Int) async throws -> Cost {
    let client = try await connectClient(peer)
    let value = [UInt8](repeating: 0xAB, count: valueLength)
    let before = peer.writeCommands
    var figures = ModeFigures(mode: .withoutResponse, size: valueLength)
    try await BenchRun.measureCommands(client, timeout: nil, plan: plan(n, .withoutResponse, value: value), value: value, into: &figures)
    try expectCommands(peer, n, after: before, sender: "client")
    client.close()
    return Cost(figures.rounds[0])
}

/// A transport that answers every Write Request inline, inside `trySend`: the engine's own cost per request, with no
/// socket and no thread (for profiling; `--only engine`).
final class InlineAnswerTransport: ATTTransport, @unchecked Sendable {
    // @unchecked: `sink` is set once by `start` before any request and only read afterwards.
    let label = "inline"
    var sink: (any ATTTransportSink)?
    func start(_ sink: any ATTTransportSink) { self.sink = sink }
    /// The Write Response, encoded once.
    let writeResponse = ATTPDU.writeResponse.bytes
    func trySend(_ pdu: UnsafeRawBufferPointer) throws(TransportError) -> ATTSendResult {
        if pdu.first == ATTOpcode.writeRequest.rawValue { sink?.transport(didReceive: writeResponse) }
        return .sent
    }
    func whenWritable(_ callback: @escaping @Sendable () -> Void) { callback() }
    func close(reason: String) { sink?.transport(didCloseWith: .closedLocally(reason: reason)) }
}

func engineOnly(n: Int) async throws -> Cost {
    let client = try await GATTClient.connect(transport: InlineAnswerTransport())
    let cost = try await withTaskExecutorPreference(client.eventLoop) {
        _ = try await clientRound(client, min(n, 2000))
        return Cost(try await clientRound(client, n))
    }
    client.close()
    return cost
}

func median(_ xs: [Cost]) -> Cost { Cost(wall: median(xs.map(\.wall)), cpu: median(xs.map(\.cpu))) }

/// The spread of per-round ratios: "0.92-1.81" (each round's client run against the bare run of the same round).
func spread(_ xs: [Double]) -> (min: Double, max: Double) { (xs.min() ?? 0, xs.max() ?? 0) }

// MARK: main

var json = false
var requests = 20_000
var commands = 200_000
var rounds = 5
/// For profiling one side alone: "bare-requests", "client-requests" (plain `client.write` from a task preferring the
/// link's event loop: the product's path; "executor-requests" is the same), "pool-requests" (plain `client.write`
/// from the global pool).
var only: String?
/// Every loop runs on one core unless --no-pin: on a 2-core machine with idle cores, wake-ups across cores made
/// one round's ratio differ from the next by up to 25x (the bare loop's baseline disagreed with itself).
var pin = true
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--json": json = true
    case "--no-pin": pin = false
    case "--requests": requests = Int(args.popFirst() ?? "") ?? requests
    case "--commands": commands = Int(args.popFirst() ?? "") ?? commands
    case "--rounds": rounds = Int(args.popFirst() ?? "") ?? rounds
    case "--only": only = args.popFirst()
    case "-h", "--help":
        print("usage: gatt-bench [--json] [--no-pin] [--requests N] [--commands N] [--rounds N] [--only bare-requests|client-requests|executor-requests|pool-requests|engine|bare-commands|client-commands]")
        exit(0)
    default:
        FileHandle.standardError.write("gatt-bench: unknown argument \(a)\n".data(using: .utf8)!)
        exit(2)
    }
}
// Before any thread starts: the peer's, the bearer's and the pool's threads inherit the pinning.
let pinnedCPU: Int32? = pin ? { let c = cbz_pin_to_current_cpu(); return c >= 0 ? c : nil }() : nil

do {
    let peer = try PlainPeer(path: "/tmp/gatt-bench-\(getpid()).sock")
    defer { peer.close() }
    if let only {
        let t: Cost
        switch only {
        case "bare-requests": t = try bareRequests(peer, n: requests)
        case "client-requests": t = try await clientRequests(peer, n: requests, path: .loop)
        case "pool-requests": t = try await clientRequests(peer, n: requests, path: .pool)
        case "executor-requests": t = try await clientRequests(peer, n: requests, path: .loop)
        case "engine": t = try await engineOnly(n: requests)
        case "bare-commands": t = try bareCommands(peer, n: commands, valueLength: 20)
        case "client-commands": t = try await clientCommands(peer, n: commands, valueLength: 20)
        default: throw BenchError(description: "--only takes bare-requests, client-requests, executor-requests, pool-requests, engine, bare-commands or client-commands")
        }
        print(String(format: "%@: %.2f us per operation, %.2f us of CPU", only, t.wall / 1000, t.cpu / 1000))
        exit(0)
    }
    let valueLength = 20
    var bareReq: [Cost] = [], clientReq: [Cost] = [], poolReq: [Cost] = [], bareCmd: [Cost] = [], clientCmd: [Cost] = []
    // Rounds alternate bare and client runs so that background load hits both alike; within a round the bare and
    // client request loops alternate in chunks of 500 round trips.
    for _ in 0..<rounds {
        let (b, c) = try await interleavedRequests(peer, n: requests, chunk: 500)
        bareReq.append(b)
        clientReq.append(c)
        poolReq.append(try await clientRequests(peer, n: requests, path: .pool))
        bareCmd.append(try bareCommands(peer, n: commands, valueLength: valueLength))
        clientCmd.append(try await clientCommands(peer, n: commands, valueLength: valueLength))
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
    // The baseline's agreement with itself: the bare round trip's spread over the rounds (max/min - 1). A wide
    // spread means the ratio measures the machine, not the client (the unpinned method once gave 0.10x).
    let bareRounds = spread(bareReq.map(\.wall))
    let bareSpread = bareRounds.min > 0 ? bareRounds.max / bareRounds.min - 1 : 0
    let method = "each round alternates the bare and the client Write Request loops in chunks of 500 round trips on "
        + "two connections to one peer thread" + (pinnedCPU.map { ", every thread pinned to CPU \($0)" } ?? ", unpinned")
        + "; ratio = client / bare round trip per round, median of \(rounds) rounds"
    if json {
        // Four decimals, as before; JSONValue writes them.
        func f(_ x: Double) -> JSONValue { .double((x * 10_000).rounded() / 10_000) }
        let fields: [(String, JSONValue)] = [
            ("writeRequestRatio", f(writeRequestRatio)), ("writeCommandRatio", f(writeCommandRatio)),
            ("writeRequestCPURatio", f(writeRequestCPURatio)), ("writeCommandCPURatio", f(writeCommandCPURatio)),
            ("bareWriteRequestMicroseconds", f(br.wall / 1000)), ("clientWriteRequestMicroseconds", f(cr.wall / 1000)),
            ("bareWriteRequestCPUMicroseconds", f(br.cpu / 1000)), ("clientWriteRequestCPUMicroseconds", f(cr.cpu / 1000)),
            ("poolWriteRequestMicroseconds", f(pr.wall / 1000)), ("poolWriteRequestRatio", f(pr.wall / br.wall)),
            ("bareWriteCommandsPerSecond", f(1e9 / bc.wall)), ("clientWriteCommandsPerSecond", f(1e9 / cc.wall)),
            ("bareWriteCommandCPUMicroseconds", f(bc.cpu / 1000)), ("clientWriteCommandCPUMicroseconds", f(cc.cpu / 1000)),
            ("requests", .int(requests)), ("commands", .int(commands)), ("valueLength", .int(valueLength)), ("rounds", .int(rounds)),
            ("writeRequestRatioRoundsMin", f(requestRounds.min)), ("writeRequestRatioRoundsMax", f(requestRounds.max)),
            ("writeRequestCPURatioRoundsMin", f(requestCPURounds.min)), ("writeRequestCPURatioRoundsMax", f(requestCPURounds.max)),
            ("writeCommandRatioRoundsMin", f(commandRounds.min)), ("writeCommandRatioRoundsMax", f(commandRounds.max)),
            ("writeRequestGoal", .double(writeRequestGoal)), ("writeCommandGoal", .double(writeCommandGoal)),
            ("writeRequestGoalMet", .bool(writeRequestMet)), ("writeCommandGoalMet", .bool(writeCommandMet)),
            ("pinnedCPU", pinnedCPU.map { .int(Int($0)) } ?? .null),
            ("bareWriteRequestRoundsSpread", f(bareSpread)), ("method", .string(method)),
        ]
        print(JSONValue.object(fields).compact)
    } else {
        print("gatt-bench: AF_UNIX SOCK_SEQPACKET, peer in another thread, median of \(rounds) rounds")
        print("  method: \(method)")
        print(String(format: "  baseline check: the bare round trip ranged %.2f-%.2f us over the rounds (%.0f %% apart)",
                     bareRounds.min / 1000, bareRounds.max / 1000, bareSpread * 100))
        func verdict(_ met: Bool) -> String { met ? "met" : "NOT met" }
        print(String(format: "  Write Request round trip: bare %.2f us, client %.2f us -> ratio %.2fx (goal <= %.1fx: %@); CPU %.2f vs %.2f us -> %.2fx",
                     br.wall / 1000, cr.wall / 1000, writeRequestRatio, writeRequestGoal, verdict(writeRequestMet),
                     br.cpu / 1000, cr.cpu / 1000, writeRequestCPURatio))
        print(String(format: "    (per-round ratios %.2f-%.2fx, CPU %.2f-%.2fx)", requestRounds.min, requestRounds.max,
                     requestCPURounds.min, requestCPURounds.max))
        print(String(format: "    (callers on the link's event loop; from the global pool instead: %.2f us, %.2fx)", pr.wall / 1000, pr.wall / br.wall))
        print(String(format: "  Write Command throughput: bare %.0f/s, client %.0f/s -> ratio %.2fx (goal >= %.1fx: %@); CPU per PDU %.2f vs %.2f us -> %.2fx; every PDU counted at the peer",
                     1e9 / bc.wall, 1e9 / cc.wall, writeCommandRatio, writeCommandGoal, verdict(writeCommandMet),
                     bc.cpu / 1000, cc.cpu / 1000, writeCommandCPURatio))
        print(String(format: "    (per-round ratios %.2f-%.2fx)", commandRounds.min, commandRounds.max))
    }
} catch {
    FileHandle.standardError.write("gatt-bench: \(error)\n".data(using: .utf8)!)
    exit(1)
}
