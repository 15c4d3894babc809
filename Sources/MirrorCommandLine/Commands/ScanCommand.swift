// mirror scan TARGET: the scan procedure (Mirror.MirrorScan) with a live status line or JSON events.
import CBlueZSocket
import Dispatch
import FoundationEssentials
import GATTClient
import JSON
import LinuxBluetooth
import LinkCore
import Mirror

#if canImport(Glibc)
import Glibc
#endif

let scanCommand = Command(CommandSpec(
    name: "scan",
    summary: "run one body scan: reset, upload URL, initDeviceForScan, wait for COMPLETE and the result ZIP",
    discussion: """
        One body scan with nothing left to luck: every notification is logged from the start; \
        scanState and scanError are subscribed AND read; a pre-flight read of scanState sends cancelScan when \
        it is not invalid, settles, and re-reads to say whether the reset worked; the upload receiver (HTTP, \
        one POST to http://HOST:PORT/SECRET) starts before any write, bound to --upload-bind or the upload host's own \
        address; SECRET takes what the profile's cloudTokenMaxLength (40 in the bundled profile) and the MTU budget \
        leave after http://HOST:PORT/: 22 base64url characters (132 random bits) at most, 12 (72 bits) at least, and \
        the scan is refused before any write only when even 12 do not fit; a mirror that answers 0x0D to a URL within \
        the profile's limit gets one retry with the shortest URL, and the limit found is reported; every handler is armed before cloudToken and \
        initDeviceForScan are written; then one deadline (--timeout, default 90 s) for COMPLETE plus the upload, \
        or ERROR; then a final read of scanState and scanError whatever happened.

        On a terminal a status line shows the state, the last error and the time left. --json prints one JSON \
        object per event (every notification, read and write) and ends with one result object: outcome \
        (complete, error, timeout, writeFailed, badUpload), scanState, scanError, sawAnyScanState, preflightScanState, \
        resetAttempted, resetWorked, upload (null, or path, bytes, sha256, entries), link, dropped (the \
        notifications dropped: total, outputFellBehind, beforeSubscribed; in text said on stderr when any). Exit \
        status 0 only for complete; 8 (outcome badUpload) when the upload is not a ZIP with the profile's resultEntries.
        """,
    positionals: [PositionalSpec("TARGET", help: "the mirror's address, or unix:PATH (the simulator)")],
    options: [
        .value("--timeout", "S", help: "the scan's deadline for COMPLETE plus the upload, or ERROR (default 90); ATT requests keep 30 s"),
        .value("--upload-host", "HOST", help: "the address the mirror posts to (default: 127.0.0.1 for unix:, else this machine's IPv4)"),
        .value("--upload-bind", "ADDR", help: "the local address the upload receiver listens on (default: the upload host, which must then be numeric; 0.0.0.0 only when given here)"),
        .value("--upload-port", "N", help: "the upload receiver's port (default 7777; 0: any free port)"),
        .value("--upload-dir", "DIR", help: "where the result ZIP is stored (default: the current directory)"),
        .value("--scan-id", "ID", help: "the scan ID shown and in the stored file's name scan-ID.zip (default: 6 random hex digits)"),
        .value("--settle", "S", help: "the pause after cancelScan before the re-read (default 0.5)"),
    ],
    globals: GlobalOptionName.connection.subtracting([.timeout]),
    examples: [
        ("mirror scan unix:/tmp/mirror-sim.sock", "a scan against the simulator (tools/demo-scan.sh starts one)"),
        ("mirror scan 00:AA:01:01:00:01 --upload-host 192.168.1.23 --profile my-mirror.json", "a real mirror"),
        ("mirror scan unix:/tmp/mirror-sim.sock --json --timeout 30", "JSON events and a result object"),
    ]
)) { inv in
    let target = try inv.target()
    let profile = try loadProfile(inv)
    let port = try inv.option("--upload-port") { (s: String) throws(UsageError) in try parseCount(s, in: 0...65535, what: "port") }
    let settle = try inv.option("--settle") { (s: String) throws(UsageError) in try parseSeconds(s) }
    // --timeout is the scan's deadline here (default 90 s); the ATT transaction timeout stays the spec's 30 s.
    let deadline = try inv.option("--timeout") { (s: String) throws(UsageError) in try parseSeconds(s) } ?? 90
    let host: String, bind: String?
    switch MirrorScan.uploadAddresses(host: inv.arguments.string("--upload-host"), bind: inv.arguments.string("--upload-bind"),
                                      overUnixSocket: target.isUnix) {
    case .success(let addresses): (host, bind) = addresses
    case .failure(.noHost):
        throw UsageError("this machine has no IPv4 address the mirror could post to: give --upload-host", command: "scan")
    case .failure(.bindNotNumeric(let bind)):
        throw UsageError("--upload-bind \(bind): expected a numeric IPv4 or IPv6 address", command: "scan")
    case .failure(.hostNotNumeric(let host)):
        throw UsageError("--upload-host \(host) is not a numeric address: give --upload-bind ADDR, the local address the mirror reaches "
                         + "(0.0.0.0 for every one)", command: "scan")
    }
    var options = MirrorScanOptions(profile: profile, uploadHost: host,
                                    uploadDirectory: inv.arguments.string("--upload-dir") ?? FileManager.default.currentDirectoryPath)
    options.uploadPort = UInt16(port ?? 7777)
    options.bindHost = bind
    options.timeout = .milliseconds(Int64((deadline * 1000).rounded()))
    if let settle { options.settle = .milliseconds(Int64((settle * 1000).rounded())) }
    options.scanID = inv.arguments.string("--scan-id")

    let session = try await Session.open(target, inv)
    defer { session.close() }
    // The cached database when the peer has a Database Hash (no discovery when it matches), and robust caching
    // for the scan's long wait once it has subscribed (the peer answers 0x12 rather than serve moved handles).
    options.database = try await session.cachedDatabase()
    let robust = options.database != nil
    // The notifications dropped before scanState and scanError were subscribed, and after (ListenCommand.swift).
    let drops = ListenDrops()
    options.afterSubscribing = { [session] in
        if robust { try await session.peer.database.enableRobustCaching() }
        drops.subscriptionsCompleted()
    }
    let scanOptions = options
    let json = inv.global.json
    // The link the scan runs on, read before it starts (its result object carries it).
    // A reason every radio value shares (a unix: link has none) is said once, not eleven times.
    let linkJSON = json ? session.linkJSON(sayingOnce: true) : .null
    let console = inv.console
    let status = StatusLine(enabled: !json && isatty(2) == 1, deadline: deadline)
    let notifications = try session.notifications.stream()
    defer { session.notifications.end(notifications) }
    drops.watch(notifications)
    status.start()
    let scanResult = try await Interrupts.whileInterruptible {
        try await MirrorScan.run(client: session.peer.client, options: scanOptions, notifications: notifications) { event in
            if json {
                console.out(mirrorEventJSON(event).compact)
            } else {
                status.clear()
                console.out(mirrorEventText(event))
            }
            status.update(event)
        }
    }
    status.stop()
    // The advice names the commands to run next: with this scan's own target in them.
    var result = scanResult
    result.advice = result.advice?.replacing("TARGET", with: "\(target)")
    if json {
        var object = scanResultJSON(result)
        if case .object(var fields) = object { fields += [("link", linkJSON), ("dropped", drops.json)]; object = .object(fields) }
        console.out(object.compact)
    } else {
        console.out(scanResultText(result))
        drops.report(received: nil, json: false, console: console)
    }
    switch result.outcome {
    case .complete: return .success
    // SIGINT or SIGTERM: cancelScan was sent (when a scan may have started) and the result printed.
    case .interrupted: return Interrupts.status ?? .interrupted
    case .timeout: return .timeout
    case .error: return .failure
    case .badUpload: return .protocolViolation
    case .writeFailed:
        return result.rejectedBy == "peer" ? .peerError : result.rejectedBy == "local" ? .localRefusal : .connection
    }
}

/// The profile named by --profile, or the bundled one.
func loadProfile(_ inv: Invocation) throws -> MirrorProfile {
    guard let path = inv.global.profile else { return .bundled }
    return try MirrorProfile.load(path: path)
}

/// The live status line on stderr: state, last error, time left; redrawn on each event and every second.
final class StatusLine: Sendable {
    private struct State {
        var scanState = "?"
        var scanError = "?"
        var shown = false
    }
    private let enabled: Bool
    private let state = Lock(State())
    private let started = MonotonicClock().now()
    private let deadline: Double
    private let ticker = Lock<Task<Void, Never>?>(nil)

    init(enabled: Bool, deadline: Double) {
        self.enabled = enabled
        self.deadline = deadline
    }

    /// Starts the once-a-second redraw (the time left changes even when nothing happens).
    func start() {
        guard enabled else { return }
        let task = Task { [weak self] in
            while !Task.isCancelled {
                try? await MonotonicClock().sleep(for: .seconds(1))
                self?.draw()
            }
        }
        ticker.withLock { $0 = task }
    }

    func update(_ event: MirrorEvent) {
        guard enabled else { return }
        state.withLock { s in
            if event.characteristic == "scanState", let d = event.decoded { s.scanState = d }
            if event.characteristic == "scanError", let d = event.decoded { s.scanError = d }
        }
        draw()
    }

    func draw() {
        guard enabled else { return }
        let d = MonotonicClock().now().duration(since: started)
        let elapsed = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        let left = max(0, deadline - elapsed)
        let text = state.withLock { s -> String in
            s.shown = true
            return "scanState \(s.scanState), scanError \(s.scanError), \(fixedPoint(left, decimals: 0)) s left"
        }
        Self.writeToStandardError("\r\u{1B}[K" + text)
    }

    func clear() {
        guard enabled else { return }
        let shown = state.withLock { s -> Bool in
            let was = s.shown
            s.shown = false
            return was
        }
        if shown { Self.writeToStandardError("\r\u{1B}[K") }
    }

    func stop() {
        ticker.withLock { $0?.cancel() }
        clear()
    }

    /// The status line as is (no newline) in one write(2) to stderr; a closed stderr is ignored. Check's progress
    /// line writes through it too.
    static func writeToStandardError(_ text: String) {
        let bytes = Array(text.utf8)
        _ = cbz_write_all(2, bytes, bytes.count)
    }
}
