// The argument parser for `mirror`: subcommands, global options anywhere, per-command options,
// `--name value` and `--name=value`, `--` to end options. No outside packages.

/// One option a command (or the tool as a whole) accepts: a flag, or an option that takes a value.
public struct OptionSpec: Sendable {
    /// The long name with its dashes: "--duration".
    public var name: String
    /// What the value is called in help ("SECONDS"); nil for a flag that takes no value.
    public var valueName: String?
    /// One line for `--help`.
    public var help: String
    /// Whether the option may be given more than once (values accumulate).
    public var repeatable: Bool
    /// The values it takes when they are a fixed set (an enum's raw values: "public", "random"), for the man page
    /// and the shell completion; empty for a free value or a flag.
    public var choices: [String] = []
    /// A one-letter form the option also answers to ("-o" for "--output"), as the issue or a habit fixes it.
    public var short: String?

    public init(_ name: String, value valueName: String? = nil, repeatable: Bool = false, help: String) {
        precondition(name.hasPrefix("--"), "option names start with --")
        self.name = name
        self.valueName = valueName
        self.help = help
        self.repeatable = repeatable
    }

    /// A flag (no value).
    public static func flag(_ name: String, help: String) -> OptionSpec {
        OptionSpec(name, help: help)
    }

    /// An option that takes a value.
    public static func value(_ name: String, _ valueName: String, repeatable: Bool = false, help: String) -> OptionSpec {
        OptionSpec(name, value: valueName, repeatable: repeatable, help: help)
    }

    /// An option whose value is one of `type`'s raw values (parsed with `parseChoice`), which it lists as `choices`.
    public static func choice<T: RawRepresentable & CaseIterable>(_ name: String, _ valueName: String, _ type: T.Type, help: String) -> OptionSpec
    where T.RawValue == String {
        var spec = OptionSpec(name, value: valueName, help: help)
        spec.choices = type.allCases.map(\.rawValue)
        return spec
    }

    /// Whether it is a flag (it takes no value).
    public var isFlag: Bool { valueName == nil }
}

/// One positional argument in a command's synopsis.
public struct PositionalSpec: Sendable {
    /// The name in the synopsis: "TARGET", "HANDLE".
    public var name: String
    /// One line for `--help`.
    public var help: String
    /// Whether it may be left out.
    public var optional: Bool
    /// Whether it takes every remaining argument (only the last positional).
    public var variadic: Bool
    /// What "missing ..." says when it is left out: "NAME (help)" unless given (an error text kept as it was
    /// when the synopsis grew, as HANDLE|UUID|NAME).
    public var missing: String

    public init(_ name: String, optional: Bool = false, variadic: Bool = false, help: String, missing: String? = nil) {
        self.name = name
        self.help = help
        self.optional = optional
        self.variadic = variadic
        self.missing = missing ?? "\(name) (\(help))"
    }

    /// "HANDLE", "[TARGET]", "[HANDLE|UUID|NAME...]": how it shows in a synopsis.
    public var synopsis: String {
        let base = variadic ? "\(name)..." : name
        return optional || variadic ? "[\(base)]" : base
    }
}

/// What a command looks like on the command line: its name, synopsis, options, help and examples.
public struct CommandSpec: Sendable {
    public var name: String
    /// One line for the command list in `mirror --help`.
    public var summary: String
    /// Paragraphs shown under the synopsis in `mirror NAME --help`.
    public var discussion: String
    public var positionals: [PositionalSpec]
    public var options: [OptionSpec]
    /// The global options this command honours; giving any other global option is a usage error.
    public var globals: Set<GlobalOptionName>
    /// Whether the command connects to a GATT server (it honours --mtu): its body then runs on its link's loop.
    public var connects: Bool { globals.contains(.mtu) }
    /// Example command lines with a comment each: ("mirror gatt unix:/tmp/sim.sock --read", "read every value").
    public var examples: [(command: String, comment: String)]

    public init(
        name: String, summary: String, discussion: String = "",
        positionals: [PositionalSpec] = [], options: [OptionSpec] = [],
        globals: Set<GlobalOptionName>, examples: [(command: String, comment: String)]
    ) {
        self.name = name
        self.summary = summary
        self.discussion = discussion
        self.positionals = positionals
        self.options = options
        self.globals = globals
        self.examples = examples
    }

    /// "mirror write TARGET HANDLE HEX [OPTIONS]"
    public var synopsis: String {
        var parts = ["mirror", name] + positionals.map(\.synopsis)
        if !options.isEmpty || !globals.isEmpty { parts.append("[OPTIONS]") }
        return parts.joined(separator: " ")
    }
}

/// A command's arguments after parsing: positionals in order, option values by name.
public struct ParsedArguments: Sendable {
    /// The command these arguments are for (used in error messages).
    public var command: String
    public var positionals: [String]
    /// Values given for options that take one, in order, by long name ("--count").
    public var values: [String: [String]]
    /// Flags that were given, by long name.
    public var flags: Set<String>
    /// The global options the line gave (whatever their values), for a caller that lays them over others
    /// (`mirror shell`'s connect).
    public var givenGlobals: Set<GlobalOptionName> = []

    public init(command: String, positionals: [String] = [], values: [String: [String]] = [:], flags: Set<String> = []) {
        self.command = command
        self.positionals = positionals
        self.values = values
        self.flags = flags
    }

    /// Whether a flag was given.
    public func has(_ flag: String) -> Bool { flags.contains(flag) || values[flag] != nil }

    /// The last value given for an option, as typed.
    public func string(_ option: String) -> String? { values[option]?.last }

    /// The value of an option converted by `parse`, which names the token when it is wrong.
    public func value<T>(_ option: String, _ parse: (String) throws(UsageError) -> T) throws(UsageError) -> T? {
        guard let raw = values[option]?.last else { return nil }
        do {
            return try parse(raw)
        } catch {
            throw error.forOption(option)
        }
    }

    /// The positional at `index` converted by `parse`; nil when it was not given.
    public func positional<T>(_ index: Int, _ parse: (String) throws(UsageError) -> T) throws(UsageError) -> T? {
        guard index < positionals.count else { return nil }
        return try parse(positionals[index])
    }

    /// Refuses when more than one of `options` was given: "--long and --reliable cannot be used together".
    public func exclusive(_ options: [String]) throws(UsageError) {
        let given = options.filter { has($0) }
        if given.count > 1 {
            throw UsageError(
                "\(given.dropLast().joined(separator: ", ")) and \(given.last!) cannot be used together",
                token: given[1], command: command)
        }
    }
}

/// What the parser found on the whole command line.
public enum ParsedCommandLine: Sendable {
    /// `mirror --help` (or no arguments at all).
    case toolHelp
    /// `mirror --version`.
    case version
    /// `mirror COMMAND --help`: one page.
    case commandHelp(CommandSpec)
    /// `mirror help COMMAND`: every detail of the command.
    case commandManual(CommandSpec)
    /// `mirror help options`, `mirror help exit-codes`.
    case helpTopic(HelpTopic)
    /// A command to run with its arguments and the global options.
    case run(CommandSpec, ParsedArguments, GlobalOptions)
}

/// A bad command line: what was wrong, the exact token, and the command it was for.
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The sentence: `invalid handle "0x1_2": not a decimal number or 0x hex`.
    public var message: String
    /// The exact token that was wrong (nil when something is missing rather than wrong).
    public var token: String?
    /// The command, for the "see mirror CMD --help" hint; nil for the tool as a whole.
    public var command: String?

    public init(_ message: String, token: String? = nil, command: String? = nil) {
        self.message = message
        self.token = token
        self.command = command
    }

    public var description: String { message }

    /// The hint printed under the message.
    public var hint: String {
        if let command { return "see: mirror \(command) --help" }
        return "see: mirror --help"
    }

    /// Prefixes the message with the option a bad value was given to.
    func forOption(_ option: String) -> UsageError {
        var copy = self
        copy.message = "\(option): \(message)"
        return copy
    }

    /// `parse`'s result; its usage error said to be `command`'s (the hint names its --help).
    static func of<T>(_ command: String?, _ parse: () throws(UsageError) -> T) throws(UsageError) -> T {
        do { return try parse() } catch {
            var e = error
            e.command = command
            throw e
        }
    }
}

/// Parses `arguments` (without the program name) against the command table. `implicitTarget` (`mirror shell`'s
/// connection) is taken as the command's TARGET positional, in its place in the synopsis, once the positionals
/// before it were given (`wifi list` becomes `wifi list TARGET`; a bare `wifi` still misses list|status|join).
public func parseCommandLine(_ arguments: [String], commands: [CommandSpec],
                             implicitTarget: String? = nil) throws(UsageError) -> ParsedCommandLine {
    var globalValues: [String: [String]] = [:]
    var globalFlags: Set<String> = []
    var command: CommandSpec?
    var parsed = ParsedArguments(command: "")
    var helpAsked = false
    var optionsEnded = false
    var index = 0

    func record(_ spec: OptionSpec, value: String?, into values: inout [String: [String]], flags: inout Set<String>,
                token: String, command: String?) throws(UsageError) {
        if spec.isFlag {
            if let value {
                throw UsageError("option \(spec.name) takes no value, but was given \"\(value)\"", token: token, command: command)
            }
            flags.insert(spec.name)
            return
        }
        guard let value else {
            throw UsageError("option \(spec.name) needs a value (\(spec.valueName!))", token: token, command: command)
        }
        if values[spec.name] != nil && !spec.repeatable {
            throw UsageError("option \(spec.name) was given more than once", token: token, command: command)
        }
        values[spec.name, default: []].append(value)
    }

    while index < arguments.count {
        let token = arguments[index]
        index += 1
        if !optionsEnded && token == "--" {
            optionsEnded = true
            continue
        }
        if !optionsEnded && (token == "--help" || token == "-h") {
            helpAsked = true
            continue
        }
        if !optionsEnded && command == nil && token == "--version" {
            return .version
        }
        if !optionsEnded && token.hasPrefix("-") && token.count > 1 {
            // "--name=value" or "--name [value]"
            var name = token
            var inlineValue: String?
            if let eq = token.firstIndex(of: "=") {
                name = String(token[..<eq])
                inlineValue = String(token[token.index(after: eq)...])
            }
            let commandOption = command?.options.first { $0.name == name || ($0.short != nil && $0.short == name) }
            let globalOption = GlobalOptions.specs.first { $0.name == name }
            guard let spec = commandOption ?? globalOption else {
                var known = GlobalOptions.specs.map(\.name) + ["--help"]
                if let command { known += command.options.map(\.name) }
                var message = "unknown option \"\(name)\""
                if let command { message += " for mirror \(command.name)" }
                if let near = nearest(name, in: known) { message += " (did you mean \(near)?)" }
                throw UsageError(message, token: token, command: command?.name)
            }
            if let command, commandOption == nil, let global = GlobalOptionName(rawValue: name),
               !command.globals.contains(global) {
                throw UsageError("option \(name) does not apply to mirror \(command.name)", token: token, command: command.name)
            }
            var value = inlineValue
            if !spec.isFlag && value == nil {
                if index < arguments.count {
                    value = arguments[index]
                    index += 1
                }
            }
            if commandOption != nil {
                try record(spec, value: value, into: &parsed.values, flags: &parsed.flags, token: token, command: command?.name)
            } else {
                try record(spec, value: value, into: &globalValues, flags: &globalFlags, token: token, command: command?.name)
            }
            continue
        }
        if command == nil {
            if token == "help" {
                // `mirror help [COMMAND]`
                guard index < arguments.count else { return .toolHelp }
                let name = arguments[index]
                if let topic = HelpTopic(rawValue: name) { return .helpTopic(topic) }
                guard let spec = commands.first(where: { $0.name == name }) else {
                    throw unknownCommand(name, commands: commands)
                }
                return helpAsked ? .commandHelp(spec) : .commandManual(spec)
            }
            guard let spec = commands.first(where: { $0.name == token }) else {
                throw unknownCommand(token, commands: commands)
            }
            command = spec
            parsed.command = spec.name
            // Global options given before the command must apply to it too.
            for name in globalValues.keys.sorted() + globalFlags.sorted() {
                if let global = GlobalOptionName(rawValue: name), !spec.globals.contains(global) {
                    throw UsageError("option \(name) does not apply to mirror \(spec.name)", token: name, command: spec.name)
                }
            }
            continue
        }
        parsed.positionals.append(token)
    }

    guard let command else {
        if helpAsked || globalValues.isEmpty && globalFlags.isEmpty { return .toolHelp }
        throw UsageError("no command given", command: nil)
    }
    if helpAsked { return .commandHelp(command) }
    if let implicitTarget, let at = command.positionals.firstIndex(where: { $0.name == "TARGET" }),
       parsed.positionals.count >= at {
        parsed.positionals.insert(implicitTarget, at: at)
    }

    // Positional count against the synopsis.
    let required = command.positionals.filter { !$0.optional && !$0.variadic }
    if parsed.positionals.count < required.count {
        let missing = required[parsed.positionals.count]
        throw UsageError("missing \(missing.missing)", command: command.name)
    }
    let variadic = command.positionals.last?.variadic ?? false
    if !variadic && parsed.positionals.count > command.positionals.count {
        let extra = parsed.positionals[command.positionals.count]
        throw UsageError("unexpected argument \"\(extra)\" (mirror \(command.name) takes \(command.positionals.count == 0 ? "no arguments" : command.positionals.map(\.name).joined(separator: " ")))",
                         token: extra, command: command.name)
    }

    let global = try GlobalOptions(values: globalValues, flags: globalFlags, command: command.name)
    parsed.givenGlobals = Set(globalValues.keys.compactMap(GlobalOptionName.init) + globalFlags.compactMap(GlobalOptionName.init))
    return .run(command, parsed, global)
}

private func unknownCommand(_ name: String, commands: [CommandSpec]) -> UsageError {
    var message = "unknown command \"\(name)\""
    if let near = nearest(name, in: commands.map(\.name)) { message += " (did you mean \(near)?)" }
    return UsageError(message, token: name, command: nil)
}

/// The closest candidate within an edit distance of 2, for "did you mean" hints.
func nearest(_ word: String, in candidates: [String]) -> String? {
    var best: (String, Int)?
    for candidate in candidates {
        let d = editDistance(Array(word), Array(candidate))
        if d <= 2, best == nil || d < best!.1 { best = (candidate, d) }
    }
    return best?.0
}

func editDistance(_ a: [Character], _ b: [Character]) -> Int {
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
