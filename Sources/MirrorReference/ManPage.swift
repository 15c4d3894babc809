// mirror(1), the man page, generated from the command table, the global options and the exit status table (as
// `mirror --help` is), so that it cannot drift: docs/mirror.1 is this text (`swift run mirror-docs man`).

import MirrorCommandLine

/// The man page in roff (man macros), for `commands` (the command table's specs).
public func manPage(_ commands: [CommandSpec]) -> String {
    var r = RoffText()
    r.comment("mirror(1). Generated from the command table (Sources/MirrorCommandLine) by tools/mirror-docs.sh; do not edit.")
    r.request("TH MIRROR 1 \"\" \"\(roffEscape(MirrorMain.version))\" \"User Commands\"")
    r.request("nh")
    r.section("NAME")
    r.text("mirror \\- " + roffEscape(toolSummary.hasSuffix(".") ? String(toolSummary.dropLast()) : toolSummary))

    r.section("SYNOPSIS")
    r.line(roffSynopsis(toolSynopsis.split(separator: " ").map(String.init), literal: 1))
    for c in commands {
        r.request("br")
        r.line(roffSynopsis(c))
    }

    r.section("DESCRIPTION")
    r.text("\\fBmirror\\fR is " + roffEscape(String(toolSummary.dropLast()))
           + ": no bluetoothd and no D\\-Bus in the path. Global options go before or after the command; each command takes those it lists. \\fBmirror\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR and \\fBmirror help\\fR \\fICOMMAND\\fR print a command's help.")

    r.section("COMMANDS")
    for c in commands {
        r.subsection(c)
        r.text(roffEscape(sentence(c.summary)))
        for paragraph in paragraphs(c.discussion) {
            r.request("PP")
            r.text(roffEscape(paragraph))
        }
        if !c.positionals.isEmpty {
            r.label("Arguments:")
            for p in c.positionals { r.item("\\fI\(roffEscape(p.name))\\fR" + (p.variadic ? "..." : ""), p.help) }
        }
        if !c.options.isEmpty {
            r.label("Options:")
            for o in c.options { r.item(roffOptionTag(o), o.help + (o.repeatable ? " (may be repeated)" : "")) }
        }
        let globals = GlobalOptions.specs.filter { GlobalOptionName(rawValue: $0.name).map(c.globals.contains) ?? false }
        if !globals.isEmpty {
            r.label("Global options it takes (see GLOBAL OPTIONS):")
            r.text(globals.map { "\\fB\(roffEscape($0.name))\\fR" }.joined(separator: ", "))
        }
        if !c.examples.isEmpty {
            r.label("Examples:")
            r.examples(c.examples)
        }
    }

    r.section("SHELL COMMANDS")
    r.text(roffEscape("In `mirror shell TARGET` each line is one command on the open connection: "
                      + ShellCommandTable.passThrough.joined(separator: ", ")
                      + " take the arguments and options of the one-shot command without its TARGET; the shell's own commands are:"))
    for c in ShellCommandTable.own {
        r.item(roffSynopsis(c, program: false), sentence(c.summary) + (c.options.isEmpty ? "" : " Options: " + c.options.map { $0.name + ": " + $0.help }.joined(separator: "; ") + "."))
        let shown = c.examples.filter { !$0.comment.isEmpty }
        if !shown.isEmpty {
            r.text("Example: " + shown.map { "\\fB\(roffEscape($0.command))\\fR (\(roffEscape($0.comment)))" }.joined(separator: ", ") + ".")
        }
    }
    r.item("\\fBhelp\\fR [\\fICOMMAND\\fR]", "This list, or one command's help.")

    r.section("GLOBAL OPTIONS")
    for o in GlobalOptions.specs + toolOptions { r.item(roffOptionTag(o), o.help) }
    r.item("\\fB\\-\\-version\\fR", "print the version (before a command)")

    r.section("TARGETS")
    for t in targetForms { r.item("\\fI\(roffEscape(t.form))\\fR", t.meaning) }

    r.section("EXIT STATUS")
    for status in ExitStatus.allCases { r.item("\\fB\(status.rawValue)\\fR", status.meaning) }

    r.section("SIGNALS")
    r.text("What SIGINT (Ctrl-C) and SIGTERM do; the link is closed before the exit.")
    for row in interruptTable {
        r.item("\\fB\(roffEscape(row.commands))\\fR", "SIGINT: " + roffEscape(row.sigint) + ". SIGTERM: " + roffEscape(row.sigterm) + ".")
    }

    r.section("EXAMPLES")
    r.examples(commands.compactMap { $0.examples.first })

    r.section("SEE ALSO")
    r.text("\\fBgatttool\\fR(1), \\fBbtmon\\fR(1), \\fBbluetoothctl\\fR(1), \\fBsetcap\\fR(8)")
    return r.text
}

/// Roff source a request or a line at a time.
private struct RoffText {
    var text = ""

    mutating func line(_ s: String) { text += s + "\n" }
    mutating func request(_ s: String) { line("." + s) }
    mutating func comment(_ s: String) { line(".\\\" " + s) }
    mutating func section(_ name: String) { request("SH \"\(name)\"") }
    /// A text line; a leading dot or quote would read as a request, so it is guarded with \&.
    mutating func text(_ s: String) { line(s.hasPrefix(".") || s.hasPrefix("'") ? "\\&" + s : s) }
    mutating func subsection(_ c: CommandSpec) { request("SS " + c.name); line(roffSynopsis(c)); request("PP") }
    mutating func label(_ s: String) { request("PP"); line("\\fB\(roffEscape(s))\\fR") }
    /// A tagged paragraph: `tag` (already roff) and its text.
    mutating func item(_ tag: String, _ body: String) { request("TP"); line(tag); text(roffEscape(body)) }
    /// Example command lines in no-fill mode, each under its comment.
    mutating func examples(_ examples: [(command: String, comment: String)]) {
        request("RS 4")
        request("nf")
        for e in examples {
            if !e.comment.isEmpty { text(roffEscape("# " + e.comment)) }
            text("\\fB" + roffEscape(e.command) + "\\fR")
        }
        request("fi")
        request("RE")
    }
}

/// "mirror write TARGET HANDLE|UUID|NAME HEX [OPTIONS]" in roff: the literal words bold, the rest italic.
private func roffSynopsis(_ c: CommandSpec, program: Bool = true) -> String {
    let words = (program ? ["mirror"] : []) + [c.name] + c.positionals.map(\.synopsis)
        + (!c.options.isEmpty || !c.globals.isEmpty ? ["[OPTIONS]"] : [])
    return roffSynopsis(words, literal: program ? 2 : 1)
}

/// Words of a synopsis: the first `literal` bold; then in each word a lowercase name (a literal, as "on" in
/// "on|off") bold, an uppercase one (a placeholder, as TARGET) italic, and brackets, bars and dots roman.
private func roffSynopsis(_ words: [String], literal: Int) -> String {
    words.enumerated().map { index, word in
        if index < literal { return "\\fB\(roffEscape(word))\\fR" }
        var s = ""
        var name = ""
        func flush() {
            guard !name.isEmpty else { return }
            s += (name == name.lowercased() ? "\\fB" : "\\fI") + roffEscape(name) + "\\fR"
            name = ""
        }
        for ch in word {
            if ch == "[" || ch == "]" || ch == "|" || ch == "." { flush(); s.append(ch) } else { name.append(ch) }
        }
        flush()
        return s
    }.joined(separator: " ")
}

/// "--type public|random": the name bold, the value italic (each of a fixed set's values bold).
private func roffOptionTag(_ o: OptionSpec) -> String {
    var tag = "\\fB\(roffEscape(o.name))\\fR"
    if let value = o.valueName {
        let choices = value.split(separator: "|").map(String.init)
        tag += " " + (choices == o.choices ? choices.map { "\\fB\(roffEscape($0))\\fR" }.joined(separator: "|") : "\\fI\(roffEscape(value))\\fR")
    }
    return tag
}

/// Text for roff: backslashes and hyphens escaped (a typed "--mtu" stays two ASCII hyphens), non-ASCII as \[uXXXX].
func roffEscape(_ s: String) -> String {
    var out = ""
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\\": out += "\\e"
        case "-": out += "\\-"
        case "\n": out += " "
        default:
            if scalar.isASCII {
                out.unicodeScalars.append(scalar)
            } else {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }
        }
    }
    return out
}

/// A discussion's paragraphs (blank-line separated), each on one line.
private func paragraphs(_ text: String) -> [String] {
    text.split(separator: "\n\n").map { $0.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ") }
        .filter { !$0.isEmpty }
}

/// A summary as a sentence: capitalised, with its full stop.
private func sentence(_ s: String) -> String {
    guard let first = s.first else { return s }
    return first.uppercased() + s.dropFirst() + (s.hasSuffix(".") ? "" : ".")
}
