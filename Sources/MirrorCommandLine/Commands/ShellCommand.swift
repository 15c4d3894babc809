// mirror shell TARGET: one connection, then commands on it, a line each: the one-shot commands (parsed by the one
// parser, with the connection's TARGET as their first positional), background subscriptions, trace, connect.
import ATTStack
import CBlueZSocket
import GATTClient
import GATTPeer
import JSON
import LineEditor
import LinuxBluetooth
import LinkCore

#if canImport(Glibc)
import Glibc
import GATTVocabulary
import Mirror
#endif

/// The one-shot commands a shell line may run on the shell's connection, the connection's TARGET in the place of
/// theirs. Those that read notifications (listen, scan, wifi join) each get a stream of their own from their start
/// (GATTPeer's `ProcedureNotifications`), so they run again and again beside the background subscriptions.
let shellPassThrough: [String] = ["gatt", "read", "write", "listen", "mtu", "check", "link", "bench", "scan", "wifi"]

/// The shell's own commands, parsed by `parseCommandLine` like the others.
let shellOwnCommands: [CommandSpec] = [
    CommandSpec(
        name: "subscribe", summary: "subscribe in the background; each notification and indication printed as it comes",
        positionals: [PositionalSpec("HANDLE|UUID|NAME", optional: true, variadic: true, help: "value handles, UUIDs or characteristic names")],
        options: [.flag("--indicate", help: "prefer indications where a characteristic offers both")],
        globals: [.json], examples: [("subscribe scanState scanError", "two characteristics by their profile names")]),
    CommandSpec(
        name: "unsubscribe", summary: "end background subscriptions (all of them when none is named)",
        positionals: [PositionalSpec("HANDLE|UUID|NAME", optional: true, variadic: true, help: "subscriptions to end (default: all)")],
        globals: [.json], examples: [("unsubscribe scanState", "stop the notifications of scanState")]),
    CommandSpec(
        name: "trace", summary: "print every ATT PDU (and, on an LE link, its HCI commands and events) on stderr, or stop",
        discussion: """
            trace on prints every ATT PDU of the connection, decoded, with its direction and a timestamp, on \
            stderr, as --trace does, and the link's HCI commands and events where a link monitor watches them \
            (an LE link on an adapter; a unix: target has no radio link, so no HCI records). It stays on for \
            the next connection until trace off.
            """,
        positionals: [PositionalSpec("on|off", help: "on or off")], globals: [], examples: [("trace on", "decode every PDU")]),
    CommandSpec(
        name: "btsnoop", summary: "write a btsnoop capture of the connection from now on, or stop",
        discussion: """
            btsnoop FILE creates (or truncates) FILE and writes every ATT PDU of the connection to it from now \
            on, and the link's HCI commands and events where a link monitor watches them, in the btsnoop format \
            Wireshark, tshark and btmon -r read (as --btsnoop does); later connections of the shell go to the \
            same file, each under an index of its own. btsnoop off stops and closes the file; btsnoop FILE \
            again closes the first and starts the new one. (A file named off: btsnoop ./off.)
            """,
        positionals: [PositionalSpec("FILE|off", help: "the capture file, or off")], globals: [.json],
        examples: [("btsnoop /tmp/shell.btsnoop", "capture from here"), ("btsnoop off", "stop and close the file")]),
    CommandSpec(
        name: "pair", summary: "pair and bond on the open connection: raises the link's security, this process answering the kernel",
        discussion: """
            Raises the link's security (BT_SECURITY) to medium, or high with --high (an authenticated key): the kernel \
            runs SMP, or encrypts with the key it holds, and this process answers the kernel's pairing requests. \
            The shell must have been started with --pair (its agent needs CAP_NET_ADMIN before the connect, and \
            mirror gives every capability up after it), and with --io and --passkey as mirror pair takes them for \
            a method other than Just Works: at a terminal a passkey to type or a Numeric Comparison is asked at the \
            prompt (25 s to answer, within SMP's 30 s), a passkey to show printed above the line. Prints the link's \
            security level after it, and the pairing method used (none when the kernel encrypted with a key it holds).
            """,
        options: [.flag("--high", help: "ask for an authenticated (MITM-protected) key: security high")],
        globals: [.json], examples: [("pair", "encrypt the link, pairing (Just Works) when no key is held")]),
    CommandSpec(name: "disconnect", summary: "close the connection (the shell goes on)", globals: [],
                examples: [("disconnect", "close it; connect opens it again")]),
    CommandSpec(
        name: "connect", summary: "connect again, to the last TARGET or another one, with the connection options given",
        discussion: """
            Closes the connection (if one is open) and connects. The connection options (--adapter, --type, \
            --mtu, --security, --timeout, --profile, --trace, --btsnoop, --bearers and the link options \
            --interval, --latency, --supervision-timeout, --phy, --data-length) are those of mirror shell with the ones \
            given on the line laid over them, for this connection; they are parsed and checked as on any \
            command line. A bare connect connects again as the last connection did: its TARGET and its options.
            """,
        positionals: [PositionalSpec("TARGET", optional: true, help: "the device address or unix:PATH (default: the last one)")],
        globals: GlobalOptionName.connection,
        examples: [("connect", "the same target again, with the same options"), ("connect unix:/tmp/other.sock", "another one"),
                   ("connect --bearers 3", "the same target with CID 4 and two Enhanced ATT bearers"),
                   ("connect 00:AA:01:01:00:01 --type random --mtu 100 --interval 15", "a random address, MTU 100, a 15 ms interval")]),
    CommandSpec(
        name: "sleep", summary: "wait S seconds (the background subscriptions print meanwhile)",
        discussion: "Pauses a script for S seconds (5, 0.5, 250ms); Ctrl-C ends it early. To wait for a value, use wait.",
        positionals: [PositionalSpec("S", help: "seconds, as in 5, 0.5 or 250ms")], globals: [.json],
        examples: [("sleep 0.5", "half a second")]),
    CommandSpec(
        name: "wait", summary: "wait for the background subscriptions' next values, for at most --timeout seconds",
        discussion: """
            Waits until the background subscriptions (subscribe) have printed N values (--count, default 1) that \
            no wait before it counted: a value printed after the previous wait (or the first subscribe) counts, \
            even one that came before this line, so write-then-wait never misses the answer to the write. It \
            waits at most --timeout seconds (default: the connection's, 30) and then fails with exit status 5 \
            (timeout), saying how many came; values it did not use are left for the next wait. With no \
            subscription and nothing left to count it fails at once.
            """,
        options: [.value("--count", "N", help: "how many values to wait for (default 1)")],
        globals: [.json, .timeout],
        examples: [("wait", "the next value of any background subscription"),
                   ("wait --count 3 --timeout 5", "three values within five seconds, else exit status 5")]),
    CommandSpec(name: "quit", summary: "close the connection and leave (Ctrl-D does the same)", globals: [], examples: [("quit", "")]),
]

let shellCommand = Command(CommandSpec(
    name: "shell",
    summary: "one connection, then commands on it: read, write, subscribe in the background, listen, gatt...",
    discussion: """
        Connects once (the global options apply to the connection), prints the MTU and the link, then reads \
        commands a line at a time and runs them on that connection: gatt, read, write (every mode), listen \
        (until Ctrl-C or --count), mtu, link, bench, scan and wifi take the arguments and options of the \
        one-shot command without its TARGET, and their errors and exit statuses are the same (listen, scan and \
        wifi join each see the notifications from their own start, as often as they run); subscribe / \
        unsubscribe keep subscriptions in the background, each notification printed as it comes with a \
        timestamp and its name; trace on|off (the ATT PDUs, and the link's HCI records where a link monitor \
        watches them: an LE link on an adapter, none over unix:); btsnoop FILE|off (a capture of the \
        connection from then on); disconnect; connect [TARGET] [connection options] (laid over the shell's for \
        that connection); sleep S; wait [--count N] [--timeout S] (for the background subscriptions' next \
        values, bounded); help [COMMAND] (the command's usage as a line takes it); quit (or Ctrl-D). Words \
        split as a shell splits them: '...' and "..." quote, # begins a comment.

        The connection's options are given to mirror shell or connect, not to one line, except --json (that \
        line's result as JSON) and --timeout S, which bounds that one line: a command still running after S \
        seconds is cancelled and fails with exit status 5 (listen --count 1 --timeout 10 cannot hang a \
        script); the connection's ATT timeout stays its own.

        At a terminal the line is edited with libedit, the history kept under $XDG_STATE_HOME/mirror/history, \
        Tab completes commands, options, handles and characteristic names; Ctrl-C cancels the running command. \
        A lost connection is printed at once with its reason, and the prompt says disconnected until connect.

        With --pair this process answers the kernel's pairing requests on each connection (the shell's pair line \
        raises the link's security), as --io and --passkey say, as mirror pair takes them: at a terminal a passkey \
        to type or a Numeric Comparison is asked at the prompt (25 s to answer) and a passkey to show is printed \
        above the line; in script mode only --passkey answers, and without it the pairing is refused.

        When standard input is not a terminal (script mode) each command is echoed ("> read 0x0003") before \
        its result, and the shell stops at the first command that fails with that command's exit status; \
        --keep-going runs every command and exits with the first failure's status. --json makes every result, \
        error and notification one JSON object per line, the echo {"command": "..."} too.
        """,
    positionals: [PositionalSpec("TARGET", help: "the device address or unix:PATH")],
    options: [.flag("--keep-going", help: "script mode: run every command, exit with the first failure's status")]
        + pairingAnswerOptions,
    globals: GlobalOptionName.connection,
    examples: [
        ("mirror shell unix:/tmp/mirror-sim.sock", "an interactive session on the simulator"),
        ("printf 'read 0x0003\\nsubscribe scanState\\nwrite scannerAction 36\\n' | mirror shell unix:/tmp/mirror-sim.sock", "a script"),
        ("mirror shell 00:AA:01:01:00:01 --json < commands.txt", "a script with one JSON object per line"),
    ]
)) { inv in
    let target = inv.arguments.positionals[0]
    _ = try inv.target()
    let shell = try Shell(inv, target: target, keepGoing: inv.arguments.has("--keep-going"))
    return await shell.run()
}

/// One `mirror shell`: its connection, its subscriptions, the line editor, and where lines go.
final class Shell: Sendable {
    struct State: Sendable {
        var session: Session?
        /// The TARGET of the last connection, as typed.
        var target: String
        /// The options of the last connection: mirror shell's, with a connect line's laid over them.
        var options: GlobalOptions
        /// `trace on|off`, kept for the next connection too.
        var trace: Bool
        /// `btsnoop FILE` (or --btsnoop): the capture every connection of the shell is written to until `btsnoop off`.
        var capture: BTSnoopWriter?
        /// A capture's write failed (reported when it did): the shell's exit status is then a failure.
        var captureFailed = false
    }

    let base: Invocation
    let console: Console
    /// The values the background subscriptions printed, and those a `wait` counted.
    let deliveries = DeliveryTally()
    let keepGoing: Bool
    let editor: LineEditor
    /// The editor's one reader at a time: the loop's lines, and the pairing agent's questions (--pair).
    let questions: EditorQuestions
    /// --pair's agent (the shell's, or a connect line's): --io, and its prompts through the editor.
    let agentSetup: Pairing.AgentSetup
    /// Guards the connection (its background subscriptions are its `shared`'s), the target and the trace switch.
    let state: Lock<State>

    init(_ inv: Invocation, target: String, keepGoing: Bool) throws {
        base = inv
        self.keepGoing = keepGoing
        console = Console(outFD: inv.console.outFD, errFD: inv.console.errFD, jsonLines: true)
        let state = Lock(State(target: target, options: inv.global, trace: inv.global.trace))
        self.state = state
        // --io and --passkey set --pair's agent: checked before the editor takes the terminal.
        let (io, passkey) = try inv.pairingAnswers()
        if !inv.global.pair, let given = ["--io", "--passkey", "--passkey-file"].first(where: inv.arguments.has) {
            throw UsageError("\(given) sets the pairing agent of --pair: give --pair too", token: given, command: "shell")
        }
        let editor = try LineEditor(prompt: Shell.prompt(connectedTo: target)) { completion in
            Shell.complete(completion, state: state)
        }
        self.editor = editor
        let questions = EditorQuestions(editor: editor, prompt: Shell.prompt(connectedTo: target))
        self.questions = questions
        let console = self.console
        let say: @Sendable (String) -> Void = { line in if editor.isTerminal { editor.printAbove(line) } else { console.err(line) } }
        // Also for a connect line's --pair: its agent asks through the editor too, never a readLine beside it.
        // Its questions are answered at the shell's prompt, by the link's loop's next line: a thread of its own.
        agentSetup = Pairing.AgentSetup(io: io, prompts: questions.pairingPrompts(passkey: passkey, say: say), say: say, servesOnLinkLoop: false)
    }

    /// What a shell line may name: the pass-through commands, then the shell's own.
    static var specs: [CommandSpec] {
        commandTable.filter { shellPassThrough.contains($0.spec.name) }.map(\.spec) + shellOwnCommands
    }

    /// The shell's `pair` result: the link's security, then the method of the pairing the agent served since the
    /// connect or the last `pair` (none: the kernel encrypted with a key it holds); --json: one object, both keys.
    static func pairResult(security: String, served: ServedPairing, json: Bool) -> [String] {
        let method = served.method ?? served.pairedMethod
        if json {
            return [JSONValue.object([("security", .string(security)), ("method", method.map { .string($0.rawValue) } ?? .null)]).compact]
        }
        return ["pair: the link's security is \(security)",
                "pair: method: " + (method?.rawValue ?? "none (no pairing ran: the link is encrypted with a key the kernel holds)")]
    }

    static func prompt(connectedTo target: String?) -> String {
        target.map { "mirror \($0)> " } ?? "mirror (disconnected)> "
    }

    /// Connects, then runs lines until the end of the input, Ctrl-D or quit; the exit status (script mode: the
    /// first failure's).
    func run() async -> ExitStatus {
        defer { finish() }
        let status = await runLines()
        // A capture cut short by a failed write (full disk, file size limit) is not a success.
        if status == .success, state.withLock({ $0.captureFailed }) { return .failure }
        return status
    }

    /// `run` without the capture's failure.
    private func runLines() async -> ExitStatus {
        let first = await runReported("connect") {
            if let path = self.base.global.btsnoop { try self.startCapture(path) }
            try await self.connect(self.state.withLock { $0.target }, options: self.base.global, json: self.base.global.json)
        }
        if first != 0 { return ExitStatus(rawValue: first) ?? .failure }
        var firstFailure: Int32?
        lines: while true {
            // A script's next line is usually read already: taken here on the loop, with no thread and no syscall.
            let event: Result<LineEvent, LineEditorError>
            if let buffered = questions.bufferedLine() {
                event = .success(buffered)
            } else {
                event = await BlockingThread.shared.run { [questions] in Result { () throws(LineEditorError) in try questions.readLine() } }
            }
            let line: String
            switch event {
            case .failure(let error):
                console.err("mirror: \(error)")
                return firstFailure.flatMap { ExitStatus(rawValue: $0) } ?? .failure
            case .success(.end): break lines
            case .success(.interrupt): continue
            case .success(.line(let text)): line = text
            }
            let (status, quit) = await runLine(line)
            // A signal during the line cancelled its command: SIGTERM ends the shell, SIGINT ends a script (at a
            // terminal Ctrl-C only returns to the prompt); interruptTable.
            if let interrupted = Interrupts.take(), interrupted == .terminated || !editor.isTerminal { return interrupted }
            if status != 0, !editor.isTerminal {
                if firstFailure == nil { firstFailure = status }
                if !keepGoing { break }
            }
            if quit { break }
        }
        // The input's end, quit or a script's failure: values already received are printed, as at `disconnect`.
        await disconnect(reason: "the shell ended")
        return firstFailure.flatMap { ExitStatus(rawValue: $0) } ?? .success
    }

    /// Ends the subscriptions and the connection, closes the capture, and gives the terminal back.
    private func finish() {
        // A pairing question the agent may be reading ends now (declined), so that its thread ends before the
        // connection's agent is stopped and the editor closed.
        editor.stop()
        let (session, subs) = takeConnection()
        for sub in subs { sub.task.cancel() }
        session?.closeConnection(reason: "the shell ended")
        state.withLock { s in defer { s.capture = nil }; return s.capture }?.close()
        editor.close()
    }

    /// Runs one line; its status and whether it asked to quit.
    func runLine(_ line: String) async -> (Int32, Bool) {
        let words: [String]
        do {
            words = try splitShellWords(line)
        } catch {
            return (MirrorMain.report(ErrorReport(error).inShell, json: base.global.json, console: console), false)
        }
        guard let name = words.first else { return (0, false) }
        if !editor.isTerminal {
            if base.global.json { console.out(JSONValue.object([("command", .string(line))]).compact) } else { console.out("> \(line)") }
        }
        if name == "quit" || name == "exit" { return (0, true) }
        let (session, target) = state.withLock { ($0.session, $0.target) }
        let passThrough = shellPassThrough.contains(name)
        if passThrough, !words.contains("--help"), !words.contains("-h"), session == nil {
            return (report(CLIError.connection("not connected (the connection was closed or lost): connect [TARGET] first")), false)
        }
        let specs = Shell.specs
        let parsed: ParsedCommandLine
        do {
            parsed = try parseCommandLine(words, commands: specs, implicitTarget: passThrough ? target : nil)
        } catch {
            return (report(error), false)
        }
        switch parsed {
        case .toolHelp:
            console.outRaw(Shell.help(specs))
            return (0, false)
        case .version:
            console.out(MirrorMain.version)
            return (0, false)
        case .commandHelp(let spec), .commandManual(let spec):
            console.outRaw(Shell.commandHelp(spec))
            return (0, false)
        case .helpTopic(let topic):
            console.outRaw(topic.text)
            return (0, false)
        case .run(let spec, let args, let lineGlobal):
            // --json and --timeout apply to the line; the other global options are the connection's.
            var others = lineGlobal
            others.json = false
            others.timeout = GlobalOptions().timeout
            if spec.name != "connect", others != GlobalOptions() {
                return (report(UsageError("the connection's options (--adapter, --mtu, --trace, ...) are given to mirror shell or connect, not to one command; this line gave one (a line takes --json and --timeout)",
                                          command: spec.name)), false)
            }
            let lineTimeout = spec.name != "connect" && args.givenGlobals.contains(.timeout) ? lineGlobal.timeout : nil
            // The connection's options (mirror shell's, or a connect line's over them: --profile names for scan, wifi).
            var global = state.withLock { $0.options }
            global.json = base.global.json || lineGlobal.json
            global.trace = state.withLock { $0.trace }
            var invocation = Invocation(arguments: args, global: global, console: base.global.json ? console : base.console)
            invocation.loop = base.loop
            if let command = commandTable.first(where: { $0.spec.name == spec.name }), passThrough {
                invocation.attached = session
                let run = invocation
                let status = (try? await Interrupts.whileInterruptible { await MirrorMain.execute(command, run, within: lineTimeout) })
                    ?? ExitStatus.failure.rawValue
                return (status, false)
            }
            let json = global.json
            let limit = lineTimeout ?? global.timeout
            let status = await runReported(spec.name, json: json) { try await self.own(spec.name, args, lineGlobal, json: json, limit: limit) }
            return (status, spec.name == "quit")
        }
    }

    /// Reports an error as a one-shot command would; its exit status.
    private func report(_ error: any Error) -> Int32 {
        MirrorMain.report(ErrorReport(error).inShell, json: base.global.json, console: console)
    }

    /// Runs one of the shell's own commands (Ctrl-C cancels it); 0 or the reported error's status.
    private func runReported(_ name: String, json: Bool? = nil, _ body: @escaping @Sendable () async throws -> Void) async -> Int32 {
        do {
            try await Interrupts.whileInterruptible { try await body() }
            return 0
        } catch {
            return MirrorMain.report(ErrorReport(error).inShell, json: json ?? base.global.json, console: console)
        }
    }

    /// subscribe, unsubscribe, trace, disconnect, connect, sleep, wait (`limit`: the line's --timeout, else the connection's).
    private func own(_ name: String, _ args: ParsedArguments, _ lineGlobal: GlobalOptions, json: Bool, limit: Double) async throws {
        func session() throws -> Session {
            guard let s = state.withLock({ $0.session }) else {
                throw CLIError.connection("not connected (the connection was closed or lost): connect [TARGET] first")
            }
            return s
        }
        func references() throws(UsageError) -> [CharacteristicReference] {
            try UsageError.of(name) { () throws(UsageError) in
                var refs: [CharacteristicReference] = []
                for token in args.positionals { refs.append(try parseCharacteristicReference(token)) }
                return refs
            }
        }
        switch name {
        case "subscribe":
            let refs = try references()
            guard !refs.isEmpty else { throw UsageError("missing HANDLE|UUID|NAME (the characteristic to subscribe to)", command: name) }
            let s = try session()
            for ref in refs { try await subscribe(ref, session: s, preferIndications: args.has("--indicate"), json: json) }
        case "unsubscribe":
            let refs = try references()
            let s = try session()
            var handles: [UInt16] = []
            if refs.isEmpty {
                handles = s.shared?.subscribedHandles ?? []
            } else {
                for ref in refs { handles.append(try await s.characteristic(ref, command: name).characteristic.valueHandle) }
            }
            if handles.isEmpty {
                if json { console.out(JSONValue.object([("unsubscribed", .null), ("name", .null)]).compact) } else {
                    console.out("unsubscribe: no background subscription to end")
                }
            }
            for h in handles {
                guard let sub = try await s.shared?.unsubscribe(valueHandle: h) else {
                    throw UsageError("\(ATTHex.handle(h)) is not subscribed in this shell", token: ATTHex.handle(h), command: name)
                }
                if json {
                    console.out(JSONValue.object([("unsubscribed", .int(Int(h))), ("name", sub.label.map { .string($0) } ?? .null)]).compact)
                } else {
                    console.out("unsubscribed from \(ATTHex.handle(h))\(labelSuffix(sub.label))")
                }
            }
        case "trace":
            let word = args.positionals[0]
            guard word == "on" || word == "off" else {
                throw UsageError("invalid trace switch \"\(word)\": expected on or off", token: word, command: name)
            }
            let s = state.withLock { st in
                st.trace = word == "on"
                return st.session
            }
            s?.peer.setTracing(word == "on")
        case "btsnoop":
            let word = args.positionals[0]
            if word == "off" {
                let (session, writer) = state.withLock { s in defer { s.capture = nil }; return (s.session, s.capture) }
                session?.peer.stopCapture()
                writer?.close()
                if json {
                    console.out(JSONValue.object([("btsnoop", .null), ("closed", writer.map { .string($0.path) } ?? .null)]).compact)
                } else {
                    console.out(writer.map { "btsnoop: \($0.path) closed" } ?? "btsnoop: off (no capture was being written)")
                }
            } else {
                guard !word.isEmpty else { throw UsageError("btsnoop: empty file name", token: word, command: name) }
                let writer = try startCapture(word)
                if json {
                    console.out(JSONValue.object([("btsnoop", .string(writer.path))]).compact)
                } else {
                    console.out("btsnoop: writing \(writer.path) from now on")
                }
            }
        case "pair":
            let s = try session()
            guard s.peer.pairing != nil else {
                throw CLIError.unsupported("pair: this shell has no pairing agent: start it with mirror shell TARGET --pair (the agent's management socket needs CAP_NET_ADMIN, which mirror gives up after the connect)")
            }
            let level: BTSecurityLevel = args.has("--high") ? .high : .medium
            // What the agent served since the connect or the last pair line counts: --pair's connect may have paired
            // already (smp.c sets AuthReq's MITM flag when this side has IO, Vol 3 Part H §3.5.1), and that is the method.
            let (now, served) = try await s.peer.raiseSecurity(to: level)
            for line in Shell.pairResult(security: "\(now)", served: served, json: json) { console.out(line) }
        case "disconnect":
            let target = try session().peer.transport.label
            await disconnect(reason: "disconnect asked in the shell")
            if json { console.out(JSONValue.object([("disconnected", .string(target))]).compact) } else { console.out("disconnected from \(target)") }
        case "connect":
            // A bare connect is the last connection again; else mirror shell's options with the line's over them.
            let given = args.givenGlobals.subtracting([.json])
            let (lastTarget, lastOptions) = state.withLock { ($0.target, $0.options) }
            var options = args.positionals.isEmpty && given.isEmpty ? lastOptions : base.global.overlaid(by: lineGlobal, given: given)
            options.json = base.global.json
            await disconnect(reason: "connect asked in the shell")
            if given.contains(.trace) { state.withLock { $0.trace = true } }
            if given.contains(.btsnoop), let path = lineGlobal.btsnoop { try startCapture(path) }
            try await connect(args.positionals.first ?? lastTarget, options: options, json: json)
        case "sleep":
            let seconds = try UsageError.of(name) { () throws(UsageError) in try parseSeconds(args.positionals[0]) }
            do { try await MonotonicClock().sleep(for: .milliseconds(Int64((seconds * 1000).rounded()))) } catch {
                throw GATTError.cancelled(operation: "sleep \(formatSeconds(seconds))")
            }
            if json { console.out(JSONValue.object([("slept", .double(seconds))]).compact) }
        case "wait":
            let count = try UsageError.of(name) { () throws(UsageError) in
                try args.value("--count") { (s: String) throws(UsageError) in try parseCount(s, in: 1...Int(Int32.max), what: "count") } ?? 1
            }
            try await waitForValues(count, within: limit)
            if json { console.out(JSONValue.object([("waited", .int(count))]).compact) } else {
                console.out("waited for \(count) value\(count == 1 ? "" : "s")")
            }
        default:
            break
        }
    }

    /// `wait`: returns once `count` values no wait counted yet were printed by the background subscriptions, and
    /// counts them (GATTPeer's DeliveryTally); after `seconds` fails with a timeout naming how many came.
    private func waitForValues(_ count: Int, within seconds: Double) async throws {
        let (available, subscribed) = (deliveries.uncounted, state.withLock { $0.session?.shared?.isSubscribed ?? false })
        guard available >= count || subscribed else {
            throw CLIError.failure("wait: no background subscription to wait on (subscribe first)")
        }
        let (arrived, came) = await deliveries.awaitValues(count, within: .milliseconds(Int64((seconds * 1000).rounded())))
        if arrived { return }
        if Task.isCancelled { throw GATTError.cancelled(operation: "wait") }
        throw CLIError.timeout(what: "\(count) value\(count == 1 ? "" : "s") of the background subscriptions (\(came) came)", seconds: seconds)
    }

    /// Opens `path` as the shell's capture (closing the one before it) and writes the connection to it from now on.
    @discardableResult
    private func startCapture(_ path: String) throws -> BTSnoopWriter {
        let writer = try BTSnoopWriter(path: path)
        writer.onFailure { [console, state] error in
            console.err("mirror: \(error)")
            state.withLock { $0.captureFailed = true }
        }
        let (session, old) = state.withLock { s in
            defer { s.capture = writer }
            return (s.session, s.capture)
        }
        session?.peer.startCapture(writer)
        old?.close()
        return writer
    }

    /// Opens the connection to `token` with `options` (the shell's trace switch and capture, not theirs), and
    /// watches it for a loss.
    private func connect(_ token: String, options: GlobalOptions, json: Bool) async throws {
        var global = options
        global.trace = state.withLock { $0.trace }
        let target = try UsageError.of("connect") { () throws(UsageError) in try parseTarget(token, global: global) }
        // The capture is the shell's (btsnoop FILE|off), not the connection's.
        global.btsnoop = nil
        var inv = Invocation(arguments: ParsedArguments(command: "shell", positionals: [token]), global: global, console: base.console)
        // Every connection of the shell is a source of its one loop, where the shell's lines run.
        inv.loop = base.loop
        let session = try await Session.open(target, inv, heldByShell: true, capture: state.withLock { $0.capture }, agent: agentSetup)
        state.withLock { s in
            s.session = session
            s.target = token
            s.options = options
        }
        let endedAlready = session.peer.transport.whenClosed { [weak self, weak session] reason in
            guard let self, let session else { return }
            self.lost(session, reason: reason)
        }
        // A link that ended between the connect and here (the kernel's pairing failed just after Exchange MTU)
        // fails the connect: never a shell that runs its lines on a connection that is gone.
        if let endedAlready {
            state.withLock { s in if s.session === session { s.session = nil } }
            throw GATTError.disconnected(GATTDisconnectedError(reason: "\(endedAlready)", during: "the connect to \(session.peer.client.label)"))
        }
        questions.setShellPrompt(Shell.prompt(connectedTo: token))
        if editor.isTerminal {
            // Tab's handles and names: the database and its user descriptions, discovered while the user types.
            // A read by handle awaits it before naming its value (Session.backgroundDiscoveryDone): named alike whenever it runs.
            session.backgroundDiscovery.withLock { $0 = Task { _ = try? await session.peer.lookup.catalog(describing: nil) } }
        }
        if json {
            console.out(JSONValue.object([("connected", .string(session.peer.client.label)), ("mtu", .int(session.peer.mtu)),
                                          ("link", session.linkJSON())] + (session.bearersJSON().map { [("bearers", $0)] } ?? [])).compact)
        } else {
            console.out("connected to \(session.peer.client.label): MTU \(session.peer.mtu)")
            for line in linkText(session, target: target) + session.bearerText() { console.out(line) }
        }
    }

    /// The connection ended without being asked to: said at once with its reason; the prompt says disconnected.
    private func lost(_ session: Session, reason: TransportError) {
        if case .closedLocally = reason { return }
        let mine = state.withLock { s in
            guard s.session === session else { return false }
            s.session = nil
            return true
        }
        guard mine else { return }
        _ = session.shared?.endAll()
        questions.setShellPrompt(Shell.prompt(connectedTo: nil))
        let json = base.global.json
        let console = self.console
        let say = { @Sendable [editor] (drop: (text: String, reason: UInt8)?) in
            let text = "connection lost: \(reason)" + (drop.map { " (\($0.text))" } ?? "")
            let line = json ? JSONValue.object([("lost", .string(text))]).compact : "mirror: \(text)"
            if editor.isTerminal { editor.printAbove(line) } else if json { console.out(line) } else { console.err(line) }
        }
        guard let link = session.peer.link else { return say(nil) }
        // The link's Disconnection Complete may come a moment after the socket's end (a bounded wait, off this thread).
        Task.detached { say(link.dropReason()) }
    }

    /// Closes the connection, if any, then ends its subscriptions: each task prints the values already received
    /// before this returns, so a notification that came before `disconnect` (or the shell's end) is never lost to it.
    private func disconnect(reason: String) async {
        let (session, subs) = takeConnection()
        session?.closeConnection(reason: reason)
        for sub in subs { await sub.task.value }
        questions.setShellPrompt(Shell.prompt(connectedTo: nil))
    }

    /// The connection and its subscriptions, taken out of the state.
    private func takeConnection() -> (Session?, [SharedNotifications.Subscription]) {
        let session = state.withLock { s in
            defer { s.session = nil }
            return s.session
        }
        return (session, session?.shared?.endAll() ?? [])
    }

    /// One background subscription (GATTPeer's SharedNotifications: the route, then the CCCD write), each value
    /// printed as it comes.
    private func subscribe(_ ref: CharacteristicReference, session: Session, preferIndications: Bool, json: Bool) async throws {
        let entry = try await session.characteristic(ref, command: "subscribe")
        let c = entry.characteristic
        guard let shared = session.shared else { throw GATTError.unsupported("background subscriptions need the shell's connection") }
        let label = entry.label
        let profile = session.profile
        let subscribed = try await shared.subscribe(entry, preferIndications: preferIndications, deliver: { [weak self] n in
            self?.show(ListenEvent(time: unixNow(), handle: n.handle, name: label,
                                   decoded: ValueFormatter.decode(n.value, uuid: c.uuid, name: label, profile: profile),
                                   indication: n.kind == .indication, value: n.value, droppedBefore: n.droppedBefore))
        }, dropped: { [weak self] fellBehind, before in self?.showDropped(c.valueHandle, fellBehind: fellBehind, beforeSubscribed: before) })
        guard let subscribed else {
            console.err("already subscribed to \(ATTHex.handle(c.valueHandle))\(labelSuffix(label))")
            return
        }
        let mode = subscribed.mode == .indicate ? "indications" : "notifications"
        let value = subscribed.value
        if json {
            console.out(JSONValue.object([
                ("subscribed", .int(Int(c.valueHandle))), ("name", label.map { .string($0) } ?? .null), ("mode", .string(mode)),
                ("value", value.map { .string(ATTHex.string($0)) } ?? .null),
            ]).compact)
        } else {
            var line = "subscribed to \(ATTHex.handle(c.valueHandle)) \(c.uuid)\(labelSuffix(label)) (\(mode))"
            if let value { line += ", current value: " + valueText(value, decoded: ValueFormatter.decode(value, uuid: c.uuid, name: label, profile: profile)) }
            console.out(line)
        }
    }

    /// A notification or indication: above the line being typed at a terminal, else a line on stdout.
    private func show(_ event: ListenEvent) {
        let line = base.global.json ? event.json.compact : event.line
        if editor.isTerminal {
            if let note = event.droppedNote, !base.global.json { editor.printAbove(note) }
            editor.printAbove(line)
        } else {
            if let note = event.droppedNote, !base.global.json { console.err(note) }
            console.out(line)
        }
        // Printed: a `wait` waiting for it may go on.
        deliveries.add()
    }

    /// At a subscription's end, when it dropped values: "N notifications dropped (...)" on stderr (above the line at
    /// a terminal), or with --json {"dropped": {"total", "outputFellBehind", "beforeSubscribed"}, "handle"}.
    private func showDropped(_ handle: UInt16, fellBehind: Int, beforeSubscribed: Int) {
        let total = fellBehind + beforeSubscribed
        if base.global.json {
            console.out(JSONValue.object([("dropped", .object([("total", .int(total)), ("outputFellBehind", .int(fellBehind)),
                                                                ("beforeSubscribed", .int(beforeSubscribed))])),
                                          ("handle", .int(Int(handle)))]).compact)
            return
        }
        let line = "\(ATTHex.handle(handle)): \(total) notification\(total == 1 ? "" : "s") dropped (output fell behind: \(fellBehind); "
            + "before the subscription completed: \(beforeSubscribed))"
        if editor.isTerminal { editor.printAbove(line) } else { console.err(line) }
    }

    /// `help` in the shell: the commands a line may give.
    static func help(_ specs: [CommandSpec]) -> String {
        let width = (specs.map(\.name.count).max() ?? 0) + 2
        var s = "Commands (help COMMAND for one; the one-shot commands take their options without TARGET; a line takes --json and --timeout S):\n\n"
        for spec in specs { s += "  " + pad(spec.name, width) + spec.summary + "\n" }
        s += "  " + pad("help", width) + "this list, or one command's help\n"
        return s
    }

    /// `help COMMAND` (and `COMMAND --help`) in the shell: the command as a line takes it, without TARGET (the
    /// connection's) and without the connection's options, which a line does not take; --json and --timeout, which it does.
    static func commandHelp(_ spec: CommandSpec) -> String {
        let passThrough = shellPassThrough.contains(spec.name)
        let positionals = passThrough ? spec.positionals.filter { $0.name != "TARGET" } : spec.positionals
        let lineGlobals: Set<GlobalOptionName> = spec.name == "connect" ? spec.globals : spec.globals.intersection([.json, .timeout])
        var options = spec.options
        for option in GlobalOptions.specs where GlobalOptionName(rawValue: option.name).map(lineGlobals.contains) ?? false {
            if option.name == GlobalOptionName.timeout.rawValue, spec.name != "connect" {
                options.append(.value(option.name, "S", help: spec.name == "wait"
                    ? "wait at most S seconds (default: the connection's --timeout, 30)"
                    : "this line's time limit: still running after S seconds, it is cancelled (exit status 5)"))
            } else {
                options.append(option)
            }
        }
        var usage = [spec.name] + positionals.map(\.synopsis)
        if !options.isEmpty { usage.append("[OPTIONS]") }
        var s = "\(spec.name): \(spec.summary)\n\nUsage: \(usage.joined(separator: " "))\n"
        if !spec.discussion.isEmpty { s += "\n" + wrap(spec.discussion, width: 100) + "\n" }
        s += argumentsAndOptions(positionals, options)
        // The one-shot examples as lines: "mirror read unix:/tmp/mirror-sim.sock 0x0003" becomes "read 0x0003".
        let examples: [(command: String, comment: String)] = spec.examples.compactMap { e in
            guard passThrough else { return e }
            let words = e.command.split(separator: " ").map(String.init)
            guard words.count >= 2, words[0] == "mirror", words[1] == spec.name,
                  let at = words.firstIndex(where: { $0.hasPrefix("unix:") || (try? parseTarget($0, global: GlobalOptions())) != nil }) else { return nil }
            let rest = words[1..<at] + words[(at + 1)...]
            // A line takes no connection option: an example that needs one is the one-shot command's.
            let connectionOnly = GlobalOptionName.connection.subtracting([.json, .timeout]).map(\.rawValue)
            guard !rest.contains(where: { connectionOnly.contains($0) }) else { return nil }
            return (rest.joined(separator: " "), e.comment)
        }
        if !examples.isEmpty { s += "\nExamples:\n" + exampleLines(examples) }
        return s
    }

    /// Tab's candidates: command names first, then the command's options, else handles, UUIDs and names known.
    static func complete(_ c: Completion, state: Lock<State>) -> [String] {
        let before = c.before.split(separator: " ").map(String.init)
        let specs = Shell.specs
        guard let command = before.first else { return specs.map(\.name) + ["help"] }
        if command == "help" { return specs.map(\.name) }
        if c.word.hasPrefix("-") {
            guard let spec = specs.first(where: { $0.name == command }) else { return [] }
            // Its own options and what a line takes (--json, --timeout where it waits on the peer).
            let line = spec.name == "connect" ? spec.globals : spec.globals.intersection([.json, .timeout])
            return spec.options.map(\.name) + GlobalOptions.specs.map(\.name).filter { GlobalOptionName(rawValue: $0).map(line.contains) ?? false } + ["--help"]
        }
        if command == "trace" { return ["on", "off"] }
        if command == "btsnoop" { return ["off"] }
        guard let session = state.withLock({ $0.session }), let known = session.peer.database.known else { return [] }
        // What each characteristic answers to (GATTPeer's catalog): its value handle, UUID, profile name, User Description.
        return CharacteristicCatalog(known, names: session.peer.lookup.names).entries.flatMap { e in
            [ATTHex.handle(e.characteristic.valueHandle), e.characteristic.uuid.description] + [e.profileName, e.userDescription].compactMap { $0 }
        }
    }
}
