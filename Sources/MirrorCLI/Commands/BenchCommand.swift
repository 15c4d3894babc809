// mirror bench TARGET --handle H: write throughput with and without response, side by side.
import MirrorCommandLine

let benchCommand = Command(CommandSpec(
    name: "bench",
    summary: "measure write throughput with and without response, against a bare socket loop",
    discussion: """
        After a warm-up, writes --size bytes (default: the MTU's budget, MTU-3) to --handle, --count times \
        (default 5000) or for --duration seconds, as Write Requests and as Write Commands (--mode both, the \
        default), and prints for each: bytes/s, writes/s, MTU; for Write Requests the round-trip latency \
        p50/p90/p99/max; for Write Commands the time spent waiting on backpressure (the socket's send \
        buffer full, EAGAIN then POLLOUT). Write Commands are timed until the peer answers a request sent \
        after the last one, so the figure is what the peer took in, not what the kernel buffered. The peer \
        confirms each Write Request with its Write Response; with --counter H (a characteristic whose value \
        is the peer's little-endian count of writes received), the count read before and after says how many \
        Write Commands arrived. For unix: targets it also runs a bare socket loop (the same PDUs, no ATT \
        engine) over the same socket type and prints the ratio mirror/bare.
        """,
    positionals: [PositionalSpec("TARGET", help: "the device address or unix:PATH")],
    options: [
        .value("--handle", "H", help: "the value handle to write to (required)"),
        .value("--size", "N", help: "value bytes per write, 1-512 (default MTU-3)"),
        .value("--count", "N", help: "writes per mode (default 5000)"),
        .value("--duration", "S", help: "run each mode for S seconds instead of a count"),
        .value("--mode", "MODE", help: "with-response, without-response or both (default both)"),
        .value("--warmup", "N", help: "writes per mode before measuring (default 100)"),
        .value("--counter", "H", help: "a characteristic holding the peer's little-endian count of writes received"),
    ],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror bench unix:/tmp/mirror-sim.sock --handle 0x0012", "both modes, 5000 writes each"),
        ("mirror bench unix:/tmp/mirror-sim.sock --handle 0x0012 --size 20 --duration 3 --json", "3 s per mode, 20-byte values, JSON"),
        ("mirror bench 00:AA:01:01:00:01 --handle 0x0012 --mode without-response", "Write Commands only"),
    ]
)) { inv in
    try inv.arguments.exclusive(["--count", "--duration"])
    let target = try inv.target()
    guard let handle = try inv.option("--handle", parseHandle) else {
        throw UsageError("missing --handle H (the value handle to write to)", command: "bench")
    }
    let size = try inv.option("--size") { (s: String) throws(UsageError) in try parseCount(s, in: 1...512, what: "size") }
    let count = try inv.option("--count") { (s: String) throws(UsageError) in try parseCount(s, in: 1...100_000_000, what: "count") }
    let duration = try inv.option("--duration") { (s: String) throws(UsageError) in try parseSeconds(s) }
    let warmup = try inv.option("--warmup") { (s: String) throws(UsageError) in try parseCount(s, in: 0...1_000_000, what: "warm-up count") } ?? 100
    let mode = try inv.option("--mode") { (s: String) throws(UsageError) in try parseChoice(s, BenchMode.self, what: "mode") } ?? .both
    let counter = try inv.option("--counter", parseHandle)
    let plan = BenchPlan(handle: handle, size: size, count: duration == nil ? (count ?? 5000) : nil,
                         duration: duration, warmup: warmup, mode: mode, counter: counter)
    let result = try await Bench.run(target: target, plan: plan, inv: inv)
    if inv.global.json {
        inv.console.out(result.json.pretty)
    } else {
        for line in result.text { inv.console.out(line) }
    }
    return .success
}
