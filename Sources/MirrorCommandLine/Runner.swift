// Runs one command line: parse, print help, run the command, turn any error into its message, JSON and
// exit status through the one error table.

import ATTStack
import CBlueZSocket
import LinuxBluetooth
import LinkCore
import JSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import JSON
#endif

/// `text` with each line escaped for a terminal (TerminalText.escaped), its line breaks kept.
func terminalLines(_ text: String) -> String {
    text.split(separator: "\n", omittingEmptySubsequences: false).map { TerminalText.escaped(String($0)) }.joined(separator: "\n")
}

/// A command: how it looks on the command line and what it does.
public struct Command: Sendable {
    public var spec: CommandSpec
    /// Runs the command. Throw `UsageError` for bad arguments (before connecting), any library error
    /// or `CLIError` for failures; return the exit status on success (normally `.success`).
    public var run: @Sendable (Invocation) async throws -> ExitStatus

    public init(_ spec: CommandSpec, run: @escaping @Sendable (Invocation) async throws -> ExitStatus) {
        self.spec = spec
        self.run = run
    }
}

/// What a running command gets: its parsed arguments, the global options, and where to print.
public struct Invocation: Sendable {
    public var arguments: ParsedArguments
    public var global: GlobalOptions
    public var console: Console
    /// What the session leaves for the error report (the HCI reason of a lost link).
    let notes = InvocationNotes()
    /// Inside `mirror shell`: the shell's open connection, which `Session.open` returns instead of connecting.
    var attached: Session?
    /// The event loop the command's link is made on and its body runs on (`withLinkLoop`): made before the command
    /// runs, for a command that connects (nil for the others).
    var loop: EventLoop?

    public init(arguments: ParsedArguments, global: GlobalOptions, console: Console) {
        self.arguments = arguments
        self.global = global
        self.console = console
    }

    /// The TARGET positional at `index`, with `--type`.
    public func target(at index: Int = 0) throws(UsageError) -> TargetArgument {
        guard index < arguments.positionals.count else {
            throw UsageError("missing TARGET (an address as in 00:AA:01:01:00:01, or unix:PATH)", command: arguments.command)
        }
        return try UsageError.of(arguments.command) { () throws(UsageError) in try parseTarget(arguments.positionals[index], global: global) }
    }

    /// A positional converted by `parse`, with the command's name on the error.
    public func positional<T>(_ index: Int, _ parse: (String) throws(UsageError) -> T) throws(UsageError) -> T? {
        try UsageError.of(arguments.command) { () throws(UsageError) in try arguments.positional(index, parse) }
    }

    /// An option's value converted by `parse`, with the command's name on the error.
    public func option<T>(_ name: String, _ parse: (String) throws(UsageError) -> T) throws(UsageError) -> T? {
        try UsageError.of(arguments.command) { () throws(UsageError) in try arguments.value(name, parse) }
    }
}

/// What a running command's session leaves for its error report: how to learn why its link dropped.
final class InvocationNotes: Sendable {
    private let drop = Lock<(@Sendable () -> (text: String, reason: UInt8)?)?>(nil)
    /// The --btsnoop file's first write error (already printed): the command then exits with status 1.
    let captureFailure = Lock<SocketError?>(nil)

    func setLinkDrop(_ body: @escaping @Sendable () -> (text: String, reason: UInt8)?) { drop.withLock { $0 = body } }

    /// The lost link's reason, waiting a bounded time for its Disconnection Complete (PeerLink.dropReason).
    func linkDrop() -> (text: String, reason: UInt8)? { drop.current?() }
}

/// Where output goes: stdout and stderr, written a line at a time with write(2) so that a stream
/// (`mirror listen`) shows each line as it happens. Writes are serialised by the kernel per call.
public final class Console: Sendable {
    let outFD: Int32
    let errFD: Int32
    /// One JSON object per line (`mirror shell --json`) rather than pretty-printed results.
    let jsonLines: Bool

    public init(outFD: Int32 = 1, errFD: Int32 = 2, jsonLines: Bool = false) {
        self.outFD = outFD
        self.errFD = errFD
        self.jsonLines = jsonLines
    }

    /// A command's JSON result on stdout: pretty, or on one line when the console says so.
    public func json(_ value: JSONValue) { out(jsonLines ? value.compact : value.pretty) }

    /// One line on stdout.
    public func out(_ line: String) { write(fd: outFD, line + "\n") }
    /// One line on stderr.
    public func err(_ line: String) { write(fd: errFD, line + "\n") }
    /// Text as is on stdout (for help text that ends with its own newline).
    public func outRaw(_ text: String) { write(fd: outFD, text) }

    /// The shim's one write-all loop (EINTR retried); EPIPE and friends: the reader went away, nothing useful to do.
    private func write(fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { buf in _ = cbz_write_all(fd, buf.baseAddress, buf.count) }
    }
}

/// The tool's entry point: parse, run, report.
public enum MirrorMain {
    /// The version printed by `mirror --version`.
    public static let version = "mirror 0.1.0"

    /// A command line parsed by `prepare`: answered already (help, version, a usage error), or a command to run.
    public enum Prepared: Sendable {
        /// Printed; the exit status.
        case finished(Int32)
        /// The command, its arguments and the global options, for `run(_:_:_:console:)`.
        case command(Command, ParsedArguments, GlobalOptions)
    }

    /// Runs `arguments` (without the program name) against `commands`; returns the exit status.
    public static func run(_ arguments: [String], commands: [Command], console: Console = Console()) async -> Int32 {
        switch prepare(arguments, commands: commands, console: console) {
        case .finished(let status): return status
        case .command(let command, let args, let global): return await run(command, args, global, console: console)
        }
    }

    /// The synchronous half of `run`: parses `arguments` and prints help, the version or a usage error at once,
    /// so that `main` starts the concurrency runtime (and its worker threads) only for a command.
    public static func prepare(_ arguments: [String], commands: [Command], console: Console = Console()) -> Prepared {
        let specs = commands.map(\.spec)
        let wantsJSON = arguments.contains("--json")
        let parsed: ParsedCommandLine
        do {
            parsed = try parseCommandLine(arguments, commands: specs)
        } catch {
            return .finished(report(ErrorReport(error), json: wantsJSON, console: console))
        }
        switch parsed {
        case .toolHelp:
            console.outRaw(toolHelp(specs))
            return .finished(ExitStatus.success.rawValue)
        case .version:
            console.out(version)
            return .finished(ExitStatus.success.rawValue)
        case .commandHelp(let spec):
            console.outRaw(commandHelp(spec))
            return .finished(ExitStatus.success.rawValue)
        case .commandManual(let spec):
            console.outRaw(commandManual(spec))
            return .finished(ExitStatus.success.rawValue)
        case .helpTopic(let topic):
            console.outRaw(topic.text)
            return .finished(ExitStatus.success.rawValue)
        case .run(let spec, let args, let global):
            return .command(commands.first { $0.spec.name == spec.name }!, args, global)
        }
    }

    /// Whether `arguments` run a command that may need raw HCI (CAP_NET_RAW, CAP_NET_ADMIN): `discover`, `bonds
    /// remove` (a trusted management socket for Unpair Device), and a connecting command (one that takes --security) whose TARGET may be an LE address (no `unix:` token), help
    /// aside. Decided from the tokens alone, before anything is parsed: `main` keeps the capabilities on the
    /// keeper thread (Privilege) only for these, and drops them at once for every other command.
    public static func mayNeedRawHCI(_ arguments: [String], commands: [Command]) -> Bool {
        guard let name = arguments.first, let spec = commands.first(where: { $0.spec.name == name })?.spec else { return false }
        if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) { return false }
        // The management socket is trusted only when bound with CAP_NET_ADMIN (discovery, pairing, Unpair Device).
        if name == "discover" || name == "pair" { return !arguments.contains(where: { $0.hasPrefix("unix:") }) }
        if name == "bonds" && arguments.dropFirst().first == "remove" { return true }
        return spec.globals.contains(.security) && !arguments.contains(where: { $0.hasPrefix("unix:") })
    }

    /// Least privilege, first thing in `main` while it is the only thread: a setcap'd mirror drops every capability
    /// here, before any argument is parsed, unless the command may need raw HCI; then the keeper thread keeps them
    /// until the command's privileged sockets are open (Privilege). Returns an exit status when dropping failed:
    /// nothing runs privileged by mistake.
    public static func dropPrivileges(_ arguments: [String], commands: [Command], console: Console = Console()) -> Int32? {
        do {
            try Privilege.start(keepForRawHCI: mayNeedRawHCI(arguments, commands: commands))
            return nil
        } catch {
            return report(ErrorReport(error), json: arguments.contains("--json"), console: console)
        }
    }

    /// Runs a command `prepare` returned (SIGINT and SIGTERM handled from here on); returns the exit status.
    public static func run(_ command: Command, _ args: ParsedArguments, _ global: GlobalOptions,
                           console: Console = Console()) async -> Int32 {
        var invocation = Invocation(arguments: args, global: global, console: console)
        guard command.spec.connects else {
            Interrupts.install()
            return await execute(command, invocation)
        }
        // A command that connects runs on its link's loop from the start (docs/DESIGN.md "Threads"); the signals'
        // fd is a source of that loop while it runs.
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            Interrupts.install()
            return report(ErrorReport(error), json: global.json, console: console)
        }
        invocation.loop = loop
        return await withLinkLoop(loop) { [invocation] in
            Interrupts.install(on: loop)
            defer { Interrupts.stopServing(on: loop) }
            return await execute(command, invocation)
        }
    }

    /// Runs one parsed command (a one-shot command, or a line of `mirror shell`); an error is reported.
    static func execute(_ command: Command, _ invocation: Invocation, within limit: Double? = nil) async -> Int32 {
        if let limit { return await execute(command, invocation, bounded: limit) }
        do {
            let status = try await command.run(invocation)
            // A --btsnoop capture cut short by a failed write (full disk, file size limit) is not a success.
            if status == .success, invocation.notes.captureFailure.current != nil { return ExitStatus.failure.rawValue }
            return status.rawValue
        } catch {
            return report(failure(error, invocation), json: invocation.global.json, console: invocation.console)
        }
    }

    /// The report of a command's error.
    private static func failure(_ error: any Error, _ invocation: Invocation) -> ErrorReport {
        var r = ErrorReport(error)
        // A lost LE link: the controller's Disconnection Complete says who ended it and why.
        if r.status == .connection, let drop = invocation.notes.linkDrop() {
            r.message += " (\(drop.text))"
            r.fields.append(("hciReason", .string(HCIStatus.describe(drop.reason))))
        }
        return r
    }

    /// What a command run under a time limit came to: its own end, or the limit first.
    private enum BoundedOutcome: Sendable {
        case ended(Result<ExitStatus, any Error>)
        case expired
    }

    /// Runs `command` for at most `limit` seconds (a shell line's --timeout): when the limit comes first the command
    /// is cancelled, and whatever its cancellation ends in, the line fails as a timeout (exit status 5) naming it.
    private static func execute(_ command: Command, _ invocation: Invocation, bounded limit: Double) async -> Int32 {
        let first: BoundedOutcome = await withTaskGroup(of: BoundedOutcome?.self) { group in
            group.addTask {
                do { return .ended(.success(try await command.run(invocation))) } catch { return .ended(.failure(error)) }
            }
            group.addTask {
                try? await MonotonicClock().sleep(for: .milliseconds(Int64((limit * 1000).rounded())))
                return Task.isCancelled ? nil : .expired
            }
            var first: BoundedOutcome?
            while let next = await group.next() {
                guard let next else { continue }
                if first == nil { first = next }
                // The first to end stops the other: the limit cancels the command, the command's end the timer.
                group.cancelAll()
            }
            return first ?? .expired
        }
        switch first {
        case .expired:
            return report(ErrorReport(CLIError.timeout(what: "\(command.spec.name) to finish (the line's --timeout)", seconds: limit)),
                          json: invocation.global.json, console: invocation.console)
        case .ended(.success(let status)):
            return status.rawValue
        case .ended(.failure(let error)):
            return report(failure(error, invocation), json: invocation.global.json, console: invocation.console)
        }
    }

    /// Prints an error: "mirror: MESSAGE" (and a hint) on stderr; with --json also the JSON object on stdout.
    /// Every error passes here, so each of its lines is escaped here once (a User Description in "names known",
    /// an SSID, a peer's text in a library error); the JSON keeps the message exact.
    static func report(_ report: ErrorReport, json: Bool, console: Console) -> Int32 {
        console.err("mirror: " + terminalLines(report.message))
        if let hint = report.hint { console.err(terminalLines(hint)) }
        // One line, so that it also ends a stream of JSON lines (listen, scan) as one more line.
        if json { console.out(report.json.compact) }
        return report.status.rawValue
    }
}
