// mirror check TARGET: holds a GATT server to the rules of the Core Specification (Conformance's catalogue), PDU by
// PDU on the connection's one bearer, read-only; exit 9 when a SHALL is broken.
import ATTStack
import Glibc
import Conformance
import JSON
import LinkCore
import Mirror

/// The catalogue as `--help` and `--list-rules` print it: one line per rule.
func conformanceRuleLines() -> [String] {
    let width = ConformanceRule.catalogue.map(\.id.count).max() ?? 0
    return ConformanceRule.catalogue.map { r in
        r.id + String(repeating: " ", count: width - r.id.count) + "  \(r.level.rawValue.padding(6)) \(r.citation): \(r.rule)"
    }
}

extension String {
    /// The string padded with spaces to `width` characters.
    fileprivate func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}

/// The rule ids of `--only` / `--skip` ("a,b" or repeated), each one of the catalogue's.
func parseRuleIDs(_ values: [String], option: String) throws(UsageError) -> [ConformanceRule] {
    var rules: [ConformanceRule] = []
    for token in values.flatMap({ $0.split(separator: ",").map(String.init) }) {
        guard let rule = ConformanceRule.named(token) else {
            throw UsageError("\(option): unknown rule \"\(token)\"; the rules: \(ConformanceRule.catalogue.map(\.id).joined(separator: ", "))",
                             token: token, command: "check")
        }
        rules.append(rule)
    }
    return rules
}

let checkCommand = Command(CommandSpec(
    name: "check",
    summary: "check a GATT server against the Core Specification's ATT and GATT rules (read-only)",
    discussion: """
        Connects, exchanges the MTU and drives the one ATT bearer PDU by PDU (no GATT client in between, so a \
        duplicate, late or unsolicited response is seen as it came): discovery by every procedure (Read By Group \
        Type, Find By Type Value, Find Information, Read By Type for includes and characteristics) with the results \
        compared, every attribute read (Read, Read Blob inside, at and past the end of each value, Read By Type), the \
        requests a server must refuse (handle 0x0000, the handle after the last, an unassigned request opcode \
        0x3E, an unassigned command 0x7E), then the GATT rules over what was found (a CCCD on every characteristic \
        that notifies or indicates, an Extended Properties descriptor where bit 7 is set, GAP's Device Name, \
        Service Changed, the Database Hash recomputed, the Supported Features). Nothing is written unless named: \
        with --writes CHAR (a HANDLE, UUID or NAME) the write rules run on those characteristics only (Write Not Permitted where \
        there is no Write property; else a 513-octet value, a Prepare Write's echo, a long write read back and a \
        cancelled one, a part past the end), and each value changed is written back as it was read.

        Each finding names its rule, its level (SHALL, SHOULD, note), the Core Specification 5.4 section it cites, \
        what was seen with the PDUs that show it (decoded, with the seconds since the check began) and what a \
        firmware engineer should change. --json prints the report as one object for CI. The exit status is 0 when \
        no SHALL is broken, 9 when one is, 6 when the connection ended before the check did, 5 when the check \
        reached --max-time or --max-requests first (another status: the check could not run); a check that stopped \
        early never passes ("passes" false, "complete" false). --timeout S is the ATT \
        transaction timeout a response must meet (default 30, Vol 3 Part F §3.3.3); a request unanswered in it \
        stops the check, since nothing more may be sent on the bearer. Whatever the server does, the check is \
        bounded: no request after --max-time S (default \(Int(ConformanceOptions.defaultDeadline.components.seconds)); the check ends within it and one \
        --timeout), at most --max-requests N (default \(ConformanceOptions.defaultRequestBudget)), at most \(ATTProbe.storedPDULimit) unsolicited PDUs kept (the rest counted). In `mirror shell` the check runs on the \
        open connection, whose MTU was exchanged when it opened (the two MTU rules are then not checked); a value \
        notified while it runs is the check's, not the background subscriptions'.

        The rules (--list-rules prints them; --only and --skip take their ids):
        \(conformanceRuleLines().map { "  " + $0 }.joined(separator: "\n"))
        """,
    positionals: [PositionalSpec("TARGET", optional: true, help: "the device address or unix:PATH (not with --list-rules)")],
    options: [
        .value("--only", "ID,...", repeatable: true, help: "report only these rules"),
        .value("--skip", "ID,...", repeatable: true, help: "do not report these rules"),
        .value("--writes", "CHAR", repeatable: true, help: "the write probes may write this characteristic: a HANDLE, UUID or NAME (comma-separated or repeated); nothing else is written"),
        .value("--max-time", "S", help: "send no request after S seconds (default \(Int(ConformanceOptions.defaultDeadline.components.seconds))); the check then stops, incomplete"),
        .value("--max-requests", "N", help: "send at most N requests (default \(ConformanceOptions.defaultRequestBudget)); the check then stops, incomplete"),
        .flag("--list-rules", help: "print the rules with their level and citation, and connect to nothing"),
    ],
    globals: GlobalOptionName.connection.subtracting([.bearers, .noCache]),
    examples: [
        ("mirror check unix:/tmp/mirror-sim.sock", "check the simulator: no finding, exit status 0"),
        ("mirror check unix:/tmp/mirror-sim.sock --json", "the report as JSON for CI"),
        ("mirror check unix:/tmp/mirror-sim.sock --only invalid-handle-zero,error-echo", "report two rules only"),
        ("mirror check unix:/tmp/mirror-sim.sock --writes wifiNumNetworks,cloudToken", "also the write rules, on these two characteristics only (each value written back)"),
        ("mirror check --list-rules", "the rules, their levels and citations"),
    ]
)) { inv in
    let only = try parseRuleIDs(inv.arguments.values["--only"] ?? [], option: "--only")
    let skip = try parseRuleIDs(inv.arguments.values["--skip"] ?? [], option: "--skip")
    if inv.arguments.has("--list-rules") {
        if inv.global.json {
            inv.console.json(.array(ConformanceRule.catalogue.map { r in
                .object([("id", .string(r.id)), ("level", .string(r.level.rawValue)), ("citation", .string(r.citation)),
                         ("rule", .string(r.rule)), ("advice", .string(r.advice))])
            }))
        } else {
            for line in conformanceRuleLines() { inv.console.out(line) }
        }
        return .success
    }
    if inv.arguments.positionals.isEmpty && inv.attached == nil {
        throw UsageError("missing TARGET (an address as in 00:AA:01:01:00:01, or unix:PATH)", command: "check")
    }
    let target = try inv.target()
    let profile = try inv.global.profile.map { path throws(MirrorProfileError) in try MirrorProfile.load(path: path) } ?? .bundled
    var writes: [(label: String, target: ConformanceWriteTarget)] = []
    for token in (inv.arguments.values["--writes"] ?? []).flatMap({ $0.split(separator: ",").map(String.init) }) {
        let reference = try inv.option("--writes") { (_: String) throws(UsageError) in try parseCharacteristicReference(token) }!
        switch reference {
        case .handle(let h): writes.append((ATTHex.handle(h), .handle(h)))
        case .uuid(let u): writes.append((u.description, .uuid(u)))
        case .name(let name):
            guard let u = profile.uuid(name) else {
                throw UsageError("--writes: no characteristic named \"\(name)\" in the profile; its names: \(profile.characteristics.keys.sorted().joined(separator: ", ")) (or give a handle or a UUID)",
                                 token: name, command: "check")
            }
            writes.append((name, .uuid(u)))
        }
    }
    let maxTime = try inv.option("--max-time") { (s: String) throws(UsageError) in try parseSeconds(s) }
    let maxRequests = try inv.option("--max-requests") { (s: String) throws(UsageError) in try parseCount(s, in: 1...1_000_000, what: "request budget") }
    let rules = ConformanceRule.catalogue.filter { r in (only.isEmpty || only.contains(r)) && !skip.contains(r) }
    let shell = inv.attached != nil
    let session = try await Session.open(target, inv, exchangeMTU: false)
    defer { session.close() }
    let limit = Duration.milliseconds(Int64((inv.global.timeout * 1000).rounded()))
    var options = ConformanceOptions(target: target.description, clientRxMTU: inv.global.mtu ?? ATTMTU.maximum, limit: limit,
                                     agreedMTU: shell ? session.peer.mtu : nil, rules: rules)
    options.writes = writes
    if let maxTime { options.deadline = .milliseconds(Int64((maxTime * 1000).rounded())) }
    if let maxRequests { options.requestBudget = maxRequests }
    // On a terminal (never on a pipe, never in the shell) one line that updates: the step and the counts so far.
    let progress = CheckProgressLine(enabled: !shell && isatty(2) == 1)
    options.progress = { step, requests, attributes in progress.draw("checking \(target.description): \(step), \(requests) requests, \(attributes) attributes") }
    // Every inbound PDU goes to the probe while it runs; the GATT client sends nothing meanwhile.
    let probe = ATTProbe(transport: session.peer.transport.bearer)
    session.peer.transport.divert(to: probe)
    let report = await runConformanceCheck(probe, options)
    progress.clear()
    session.peer.transport.divert(to: nil)
    if inv.global.json {
        inv.console.json(report.json)
    } else {
        for line in report.textLines { inv.console.out(line) }
    }
    if report.brokeShall { return .nonconformant }
    if report.lostConnection { return .connection }
    return report.complete ? .success : .timeout
}

/// `mirror check`'s progress on a terminal: one line redrawn at most ten times a second, cleared before the report.
final class CheckProgressLine: Sendable {
    private let enabled: Bool
    /// When the line was last drawn (nil: not shown).
    private let drawn = Lock<ClockInstant?>(nil)
    private let clock = MonotonicClock()

    init(enabled: Bool) { self.enabled = enabled }

    func draw(_ text: String) {
        guard enabled else { return }
        let now = clock.now()
        let due = drawn.withLock { last -> Bool in
            if let last, now.duration(since: last) < .milliseconds(100) { return false }
            last = now
            return true
        }
        if due { StatusLine.writeToStandardError("\r\u{1B}[K" + TerminalText.escaped(text)) }
    }

    func clear() {
        guard enabled, drawn.withLock({ $0 }) != nil else { return }
        StatusLine.writeToStandardError("\r\u{1B}[K")
    }
}
