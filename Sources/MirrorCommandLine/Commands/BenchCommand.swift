// mirror bench TARGET --handle H: write throughput with and without response, side by side.
import BareATT
import BenchMeasurement
import HostEnvironment
import JSON

let benchCommand = Command(CommandSpec(
    name: "bench",
    summary: "measure write throughput with and without response, against a bare socket loop",
    discussion: """
        After a warm-up, writes --size bytes (default: the MTU's budget, MTU-3) to --handle, --count times \
        (default 5000) or for --duration seconds per round, as Write Requests and as Write Commands (--mode \
        both, the default), in --rounds rounds (default 3), and prints for each mode the median round's \
        figures: bytes/s, writes/s, MTU; for Write Requests the round-trip latency \
        p50/p90/p99/max; for Write Commands the time spent waiting on backpressure (the socket's send \
        buffer full, EAGAIN then POLLOUT). Write Commands are timed until the peer answers a request sent \
        after the last one, so the figure is what the peer took in, not what the kernel buffered. The peer \
        confirms each Write Request with its Write Response; with --counter H (a characteristic whose value \
        is the peer's little-endian count of writes received), the count read before and after says how many \
        Write Commands arrived. It also runs a bare socket loop (the same PDUs, no ATT engine, the same \
        handle, size and counts) and prints the ratio mirror/bare for each mode: for unix: targets on a second \
        connection; for an LE address on the same connection's socket, which the GATT client's bearer lends \
        it for each round (the kernel gives an LE link one ATT socket: a second connect on CID 4 to a \
        connected peer fails with EBUSY); either way alternating round by round with the CLI's. --bare-loop: \
        second-connection (unix: only), same-connection, or none.

        --handle and --counter take a HANDLE (used as given, no discovery), a UUID or a NAME (the profile's, as \
        cloudToken, or a User Description, 0x2901), found by discovery before the warm-up; one that names no \
        characteristic, or several, is bad usage (exit status 2), the error listing the names known or the \
        candidates with their value handles.

        --loopback needs no TARGET: it runs a plain peer in this process on a private unix socket (it answers \
        at once and counts what it receives, like the library benchmark tools/gatt-bench), so the figures show \
        what the host stack costs rather than what a peer does.

        With --bearers N (N > 1, and the peer opening them: --loopback's does), Write Requests run as one writer \
        per open bearer at once, the client spreading them over the bearers: the figures are theirs, with each \
        bearer's count of writes answered and the total (and the peer's count, with --counter or --loopback); \
        each such round is followed by a round of one writer on one bearer, in the same run, and the ratio of the \
        two rates is the gain (--json: `bearers` in the with-response mode).

        Each mode also gets the radio's ceiling for the link (docs/LINK-CEILING.md: PHY, data length, interval \
        and MTU) and the fraction of it reached; over a link whose parameters are not known it says "unknown \
        link", over unix: "no radio", and above the ceiling "not radio-limited" (an emulated controller has no \
        radio timing). --json adds `ceiling` and `series` (writes and bytes per 100 ms) to each mode; --plot \
        FILE.svg draws the throughput over time of both modes, the ceilings dashed, and the Write Request \
        round-trip histogram.

        --batch also measures the batch calls, `write(handle:contentsOf:)` and \
        `writeWithoutResponse(handle:contentsOf:)`: after each round of a mode, a round of as many writes through \
        one call (Write Requests still one at a time on the wire), printed after the modes' lines and not part \
        of their figures (--json: `batch` in each mode).
        """,
    positionals: [PositionalSpec("TARGET", optional: true, help: "the device address or unix:PATH (not with --loopback)")],
    options: [
        .value("--handle", "H", help: "the characteristic to write to: HANDLE|UUID|NAME (required with a TARGET)"),
        .value("--size", "N", help: "value bytes per write, 1-512 (default MTU-3)"),
        .value("--count", "N", help: "writes per mode and round (default 5000)"),
        .value("--duration", "S", help: "run each mode and round for S seconds instead of a count"),
        .choice("--mode", "MODE", BenchMode.self, help: "with-response, without-response or both (default both)"),
        .value("--warmup", "N", help: "writes per mode before measuring (default 100)"),
        .value("--counter", "H", help: "a characteristic (HANDLE|UUID|NAME) holding the peer's little-endian count of writes received"),
        .value("--rounds", "N", help: "rounds per mode, alternating with the bare loop; figures are medians (default 3)"),
        .choice("--bare-loop", "WHERE", BareLoopOption.self, help: "second-connection (unix: default), same-connection (LE default) or none"),
        .flag("--loopback", help: "no TARGET: a plain peer in this process on a private unix socket, to see what the host stack costs"),
        .value("--plot", "FILE", help: "draw throughput over time and the round-trip histogram to FILE (SVG)"),
        .flag("--batch", help: "also time write(handle:contentsOf:) and writeWithoutResponse(handle:contentsOf:), one call per round, reported apart"),
    ],
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror bench unix:/tmp/mirror-sim.sock --handle 0x0012", "both modes, 5000 writes each"),
        ("mirror bench unix:/tmp/mirror-sim.sock --handle 0x0012 --size 20 --duration 1 --rounds 1 --json", "one round of 1 s per mode, 20-byte values, JSON"),
        ("mirror bench 00:AA:01:01:00:01 --handle 0x0012 --mode without-response", "Write Commands only"),
        ("mirror bench --loopback --size 20 --rounds 5", "the host stack alone, against a plain in-process peer"),
        ("mirror bench --loopback --bearers 3 --mode with-response", "Write Requests on 3 bearers at once, against one bearer"),
        ("mirror bench unix:/tmp/mirror-sim.sock --handle 0x0012 --duration 1 --rounds 1 --plot bench.svg", "one round of 1 s per mode, drawn to bench.svg"),
        ("mirror bench unix:/tmp/mirror-sim.sock --handle 0x0012 --bare-loop same-connection", "the bare loop as over LE: on the same socket, lent round by round"),
        ("mirror bench --loopback --size 20 --batch", "the batch calls too, each round's writes in one call"),
    ]
)) { inv in
    try inv.arguments.exclusive(["--count", "--duration"])
    let loopback = inv.arguments.has("--loopback")
    if loopback, let extra = inv.arguments.positionals.first {
        throw UsageError("--loopback runs its own peer: no TARGET (\"\(extra)\" was given)", token: extra, command: "bench")
    }
    if !loopback && inv.arguments.positionals.isEmpty {
        throw UsageError("missing TARGET (an address as in 00:AA:01:01:00:01, or unix:PATH), or --loopback", command: "bench")
    }
    let givenTarget = loopback ? nil : try inv.target()
    let givenHandle = try inv.option("--handle", parseCharacteristicReference)
    if !loopback && givenHandle == nil {
        throw UsageError("missing --handle H (the value handle to write to)", command: "bench")
    }
    let size = try inv.option("--size") { (s: String) throws(UsageError) in try parseCount(s, in: 1...512, what: "size") }
    let count = try inv.option("--count") { (s: String) throws(UsageError) in try parseCount(s, in: 1...100_000_000, what: "count") }
    let duration = try inv.option("--duration") { (s: String) throws(UsageError) in try parseSeconds(s) }
    let warmup = try inv.option("--warmup") { (s: String) throws(UsageError) in try parseCount(s, in: 0...1_000_000, what: "warm-up count") } ?? 100
    let mode = try inv.option("--mode") { (s: String) throws(UsageError) in try parseChoice(s, BenchMode.self, what: "mode") } ?? .both
    let rounds = try inv.option("--rounds") { (s: String) throws(UsageError) in try parseCount(s, in: 1...1000, what: "rounds") } ?? 3
    let givenCounter = try inv.option("--counter", parseCharacteristicReference)
    let bareLoop = try inv.option("--bare-loop") { (s: String) throws(UsageError) in try parseChoice(s, BareLoopOption.self, what: "bare loop placement") }
    if bareLoop == .secondConnection, let givenTarget, !givenTarget.isUnix {
        throw UsageError(secondConnectionOnLE,
                         token: "second-connection", command: "bench")
    }
    let plotPath = inv.arguments.string("--plot")
    if let plotPath, plotPath.isEmpty { throw UsageError("--plot: empty file name", token: plotPath, command: "bench") }
    // Created before connecting, so a bad path fails before the run, not after it.
    let plot = try plotPath.map { try ReservedFile(path: $0, what: "the plot file") }
    var plotted = false
    defer { if !plotted { plot?.discard() } }
    let peer = loopback ? try PlainPeer.loopback(enhancedATT: inv.global.bearers > 1) : nil
    defer { peer?.close() }
    let target = try givenTarget ?? parseTarget("unix:\(peer!.path)", type: nil)
    // A UUID or name is resolved once connected (Session.resolve); the loopback peer's handles are its own.
    let plan = BenchPlan(handle: PlainPeer.sinkHandle, size: size,
                         count: duration == nil ? (count ?? 5000) : nil, duration: duration, warmup: warmup, mode: mode,
                         counter: loopback ? PlainPeer.counterHandle : nil, rounds: rounds,
                         bareLoop: bareLoop, batch: inv.arguments.has("--batch"))
    // SIGINT or SIGTERM ends the run after printing the rounds done (exit 130 or 143): the link is closed first.
    let progress = BenchProgress()
    var result: BenchResult
    var status = ExitStatus.success
    do {
        result = try await Interrupts.whileInterruptible {
            try await Bench.run(target: target, plan: plan, inv: inv, handle: givenHandle, counter: givenCounter, progress: progress)
        }
    } catch {
        guard let interrupted = Interrupts.status else { throw error }
        guard var partial = progress.result else {
            inv.console.err("mirror: bench \(interrupted == .terminated ? "terminated by SIGTERM" : "interrupted by SIGINT") before its first round ended: nothing measured")
            return interrupted
        }
        partial.interruptedBy = interrupted == .terminated ? "SIGTERM" : "SIGINT"
        result = partial
        status = interrupted
    }
    if let plot {
        plotted = true
        try plot.write(BenchPlot.svg(result), what: "the plot")
    }
    if inv.global.json {
        inv.console.json(result.json)
    } else {
        for line in result.text { inv.console.out(line) }
    }
    return status
}
