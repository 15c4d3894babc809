// The text of `mirror --help` and `mirror COMMAND --help`, generated from the command table.

/// What the tool is, in one line (`mirror --help`, the man page's NAME).
public let toolSummary = "a Bluetooth Low Energy host tool that speaks ATT itself over a raw L2CAP socket (LE CID 4)."

/// How a command line looks.
public let toolSynopsis = "mirror [GLOBAL OPTIONS] COMMAND [ARGUMENTS] [OPTIONS]"

/// What the tool takes besides a command's own options: `--help` (anywhere) and `--version` (before a command).
public let toolOptions: [OptionSpec] = [.flag("--help", help: "show help for mirror or a command")]

/// The forms of TARGET, with what each is.
public let targetForms: [(form: String, meaning: String)] = [
    ("AA:BB:CC:DD:EE:FF", "an LE device address (public unless --type random)"),
    ("unix:PATH", "an AF_UNIX SOCK_SEQPACKET socket speaking ATT (the simulator mirror-sim)"),
]

/// `mirror --help`: what the tool is, the commands, global options, targets, exit status, examples.
public func toolHelp(_ commands: [CommandSpec]) -> String {
    var s = """
    mirror: \(toolSummary)

    Usage: \(toolSynopsis)

    Commands:

    """
    let width = (commands.map(\.name.count).max() ?? 0) + 2
    for c in commands {
        s += "  " + pad(c.name, width) + c.summary + "\n"
    }
    s += "\nGlobal options (before or after the command; each command lists those it takes):\n"
    s += optionLines(GlobalOptions.specs + toolOptions)
    s += "\n" + targetText + "\n" + exitStatusText()
    s += "\nExamples:\n"
    let examples = commands.compactMap { $0.examples.first }
    s += exampleLines(examples)
    s += "\nRun `mirror COMMAND --help` for a command's arguments, options and examples, `mirror help COMMAND` for every detail.\n"
    return s
}

/// `mirror COMMAND --help`: one page (at most 50 lines) — usage, arguments, the command's own options first, the
/// global options it takes by name, the discussion's first paragraph, examples; every detail is in
/// `mirror help COMMAND`, the global options in `mirror help options`, the exit statuses in `mirror help exit-codes`.
public func commandHelp(_ spec: CommandSpec) -> String {
    var s = "mirror \(spec.name): \(spec.summary)\n\nUsage: \(spec.synopsis)\n"
    s += argumentsAndOptions(spec.positionals, spec.options)
    let globals = globalOptions(of: spec)
    if !globals.isEmpty {
        s += "\n" + wrap("Global options it takes (what each does: mirror help options): " + globals.map(\.name).joined(separator: ", "), width: 100) + "\n"
    }
    var rest = "\nEvery detail: mirror help \(spec.name)\n"
    if spec.positionals.contains(where: { $0.name == "TARGET" }) {
        rest += "\n" + targetText
    }
    rest += "\nExit status: 0 on success; every status in mirror help exit-codes\n"
    if !spec.examples.isEmpty {
        rest += "\nExamples:\n" + exampleLines(spec.examples)
    }
    // The discussion's first paragraph when the page still fits in `helpPageLines`; else only the pointer to it.
    let first = spec.discussion.components(separatedBy: "\n\n").first ?? ""
    let paragraph = first.isEmpty ? "" : "\n" + wrap(first, width: 100) + "\n"
    let lines = { (text: String) in text.reduce(0) { $1 == "\n" ? $0 + 1 : $0 } }
    if lines(s + paragraph + rest) <= helpPageLines { s += paragraph }
    return s + rest
}

/// The most lines `mirror COMMAND --help` prints.
public let helpPageLines = 50

/// `mirror help options`: every global option, the forms of TARGET.
public func globalOptionsHelp() -> String {
    "Global options (before or after the command; each command's --help names those it takes):\n"
        + optionLines(GlobalOptions.specs + toolOptions) + "\n" + targetText
}

/// `mirror help exit-codes`: the exit status table.
public func exitCodesHelp() -> String { exitStatusText() }

/// The topics of `mirror help TOPIC` beside the commands.
public enum HelpTopic: String, Sendable, CaseIterable {
    case options
    case exitCodes = "exit-codes"

    public var text: String {
        switch self {
        case .options: return globalOptionsHelp()
        case .exitCodes: return exitCodesHelp()
        }
    }
}

/// `mirror help COMMAND`: the command's whole page (every paragraph, every global option it takes, the exit statuses).
public func commandManual(_ spec: CommandSpec) -> String {
    var s = "mirror \(spec.name): \(spec.summary)\n\nUsage: \(spec.synopsis)\n"
    if !spec.discussion.isEmpty {
        s += "\n" + wrap(spec.discussion, width: 100) + "\n"
    }
    s += argumentsAndOptions(spec.positionals, spec.options)
    let globals = globalOptions(of: spec)
    if !globals.isEmpty {
        s += "\nGlobal options it takes:\n" + optionLines(globals)
    }
    if spec.positionals.contains(where: { $0.name == "TARGET" }) {
        s += "\n" + targetText
    }
    s += "\n" + exitStatusText()
    if !spec.examples.isEmpty {
        s += "\nExamples:\n" + exampleLines(spec.examples)
    }
    return s
}

/// The command's arguments, then its own options (a shell line's: without TARGET, with --json and --timeout).
func argumentsAndOptions(_ positionals: [PositionalSpec], _ options: [OptionSpec]) -> String {
    var s = ""
    if !positionals.isEmpty {
        s += "\nArguments:\n"
        let width = (positionals.map(\.synopsis.count).max() ?? 0) + 2
        for p in positionals {
            s += "  " + pad(p.synopsis, max(width, 24)) + p.help + "\n"
        }
    }
    if !options.isEmpty {
        s += "\nOptions:\n" + optionLines(options)
    }
    return s
}

/// The global options the command takes, in the global table's order.
func globalOptions(of spec: CommandSpec) -> [OptionSpec] {
    GlobalOptions.specs.filter { GlobalOptionName(rawValue: $0.name).map(spec.globals.contains) ?? false }
}

let targetText = "Targets:\n" + targetForms.map { "  " + pad($0.form, 20) + $0.meaning + "\n" }.joined()

/// The exit status table, as printed in help.
public func exitStatusText() -> String {
    var s = "Exit status:\n"
    for status in ExitStatus.allCases {
        s += "  " + pad(String(status.rawValue), 4) + status.meaning + "\n"
    }
    return s
}

func optionLines(_ options: [OptionSpec]) -> String {
    let labels = options.map { o in o.valueName.map { "\(o.name) \($0)" } ?? o.name }
    let width = max((labels.map(\.count).max() ?? 0) + 2, 24)
    var s = ""
    for (label, o) in zip(labels, options) {
        s += "  " + pad(label, width) + o.help + (o.repeatable ? " (may be repeated)" : "") + "\n"
    }
    return s
}

func exampleLines(_ examples: [(command: String, comment: String)]) -> String {
    var s = ""
    for e in examples {
        s += "  # \(e.comment)\n  \(e.command)\n"
    }
    return s
}

func pad(_ s: String, _ width: Int) -> String {
    s.count >= width ? s + "  " : s + String(repeating: " ", count: width - s.count)
}

/// Wraps paragraphs (separated by blank lines) at `width` columns.
func wrap(_ text: String, width: Int) -> String {
    text.split(separator: "\n\n").map { paragraph in
        var lines: [String] = []
        var line = ""
        for word in paragraph.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            if !line.isEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines.joined(separator: "\n")
    }.joined(separator: "\n\n")
}
