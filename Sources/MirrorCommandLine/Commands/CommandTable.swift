// The command table: every `mirror` command, in the order `mirror --help` lists them.
//
// How to add a command (one file plus one line here; docs/cli.md says the same at more length):
//  1. Create Sources/MirrorCommandLine/Commands/NameCommand.swift with
//         let nameCommand = Command(CommandSpec(
//             name: "name", summary: "one line for mirror --help",
//             discussion: "paragraphs for mirror name --help",
//             positionals: [PositionalSpec("TARGET", help: "...")],
//             options: [.value("--count", "N", help: "..."), .flag("--read", help: "...")],
//             globals: GlobalOptionName.connection,          // the global options it honours
//             examples: [("mirror name unix:/tmp/mirror-sim.sock", "what it does")]
//         )) { inv in
//             let target = try inv.target()                 // parse every argument before connecting:
//             let n = try inv.option("--count") { (s: String) throws(UsageError) in
//                 try parseCount(s, in: 1...1_000_000, what: "count") }   // bad tokens become usage errors
//             let session = try await Session.open(target, inv)   // bearer, --trace, --btsnoop, Exchange MTU
//             defer { session.close() }
//             ... call session.client (GATTClient) or another library ...
//             if inv.global.json { inv.console.json(json) } else { inv.console.out("text") }
//             return .success
//         }
//  2. Add `nameCommand` to `commandTable` below.
//  Errors: throw the library's own errors, `UsageError` or `CLIError`; ErrorReport.init(_:) in
//  Sources/MirrorCommandLine/ErrorTable.swift (one table) turns any of them into the message, the JSON
//  object and the exit status. A new library error type gets its row in LibraryErrors.swift there.
//  Parsers for addresses, handles, UUIDs, hex, counts and durations are in MirrorCommandLine/ValueParsers.swift.
//  A command that runs until Ctrl-C wraps its loop in `Interrupts.whileInterruptible { ... }` (the first
//  SIGINT cancels that task; any other command exits at once with 128 + the signal).

public let commandTable: [Command] = [
    discoverCommand,
    gattCommand,
    readCommand,
    writeCommand,
    listenCommand,
    mtuCommand,
    checkCommand,
    cloneCommand,
    linkCommand,
    pairCommand,
    benchCommand,
    scanCommand,
    wifiCommand,
    shellCommand,
    cacheCommand,
    bondsCommand,
    doctorCommand,
    adaptersCommand,
]

/// What `mirror shell` takes on a line, for the man page (MirrorReference): the one-shot commands it runs on its open
/// connection, and its own commands.
public enum ShellCommandTable {
    /// The one-shot commands a shell line runs without their TARGET.
    public static var passThrough: [String] { shellPassThrough }
    /// The shell's own commands (connect, subscribe, wait, ...).
    public static var own: [CommandSpec] { shellOwnCommands }
}
