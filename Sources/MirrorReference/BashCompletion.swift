// The bash completion of `mirror`, generated from the command table and the global options (as the man page is):
// tools/completion/mirror.bash is this text (`swift run mirror-docs completion`).
import Mirror
import MirrorCommandLine

/// The completion script: tables generated from `commands`, and the one `_mirror` function that reads them.
public func bashCompletion(_ commands: [CommandSpec]) -> String {
    func words(_ list: [String]) -> String { list.joined(separator: " ") }
    let globalsInOrder = GlobalOptions.specs
    var s = """
    # bash completion for mirror(1): commands, each command's options, the global options, and the values of the
    # options that take one of a fixed set. Generated from the command table (Sources/MirrorCommandLine) by
    # tools/mirror-docs.sh; do not edit. Install as /usr/share/bash-completion/completions/mirror, or source it.

    # The commands, and help.
    _mirror_commands="\(words(commands.map(\.name) + ["help"]))"

    # The bundled profile's characteristic names, for a HANDLE|UUID|NAME (a handle or a UUID is typed).
    _mirror_names="\(words(MirrorProfile.bundled.characteristics.keys.sorted()))"

    # The options of command $1 (none yet: the global ones and --version).
    _mirror_options() {
        case "$1" in

    """
    for c in commands {
        let globals = globalsInOrder.filter { GlobalOptionName(rawValue: $0.name).map(c.globals.contains) ?? false }
        s += "        \(c.name)) echo \"\(words((c.options + globals + toolOptions).map(\.name)))\" ;;\n"
    }
    s += "        *) echo \"\(words((globalsInOrder + toolOptions).map(\.name) + ["--version"]))\" ;;\n"
    s += """
        esac
    }

    # What option $2 of command $1 takes: nothing (a flag: status 1), or "words W...", "file", "dir", "adapter", "names"
    # (a characteristic), "any".
    _mirror_option_value() {
        case "$1 $2" in

    """
    func valueCase(_ pattern: String, _ o: OptionSpec) -> String? {
        guard let name = o.valueName else { return nil }
        let kind: String
        if !o.choices.isEmpty { kind = "words " + words(o.choices) }
        else if name == "FILE" { kind = "file" }
        else if name == "DIR" { kind = "dir" }
        else if name == "hciN" { kind = "adapter" }
        else if name == "H" { kind = "names" }
        else { kind = "any" }
        return "        \(pattern)) echo \"\(kind)\" ;;\n"
    }
    for c in commands {
        for o in c.options { s += valueCase("\"\(c.name) \(o.name)\"", o) ?? "" }
    }
    for o in globalsInOrder { s += valueCase("*\" \(o.name)\"", o) ?? "" }
    s += """
            *) return 1 ;;
        esac
    }

    # The positionals of command $1: TARGET, a placeholder, or literal words a|b|c; a last one ending in ... repeats.

    """
    s += "_mirror_positionals() {\n    case \"$1\" in\n"
    for c in commands where !c.positionals.isEmpty {
        s += "        \(c.name)) echo \"\(words(c.positionals.map { $0.name + ($0.variadic ? "..." : "") }))\" ;;\n"
    }
    s += "        help) echo \"COMMAND\" ;;\n    esac\n}\n\n"
    s += completionFunction
    return s
}

/// The function bash calls; it reads the tables above.
private let completionFunction = #"""
# COMPREPLY for the word being completed: the command, an option, an option's value, or a positional.
_mirror() {
    local -a words=() reply=() positionals=()
    local i w cur command="" pending="" kind="" ended=0 position=0 prefix=""
    # Words bash split at ':' and '=' (COMP_WORDBREAKS) are joined again: AA:BB:CC:DD:EE:FF, unix:PATH, --type=random.
    for ((i = 0; i <= COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if ((${#words[@]} > 1)) && [[ $w == : || $w == = || ${words[-1]} == *: || ${words[-1]} == --*= ]]; then
            words[-1]+=$w
        else
            words+=("$w")
        fi
    done
    cur=${words[-1]}
    for ((i = 1; i < ${#words[@]} - 1; i++)); do
        w=${words[i]}
        if [[ -n $pending ]]; then
            pending=""
        elif ((!ended)) && [[ $w == -- ]]; then
            ended=1
        elif ((!ended)) && [[ $w == -* ]]; then
            [[ $w != *=* ]] && _mirror_option_value "$command" "$w" >/dev/null && pending=$w
        elif [[ -z $command ]]; then
            command=$w
        else
            ((position++))
        fi
    done
    if [[ -n $pending ]]; then
        kind=$(_mirror_option_value "$command" "$pending")
    elif ((!ended)) && [[ $cur == --*=* ]]; then
        kind=$(_mirror_option_value "$command" "${cur%%=*}") || kind=""
        prefix="${cur%%=*}="
        cur=${cur#*=}
    elif ((!ended)) && [[ $cur == -* ]]; then
        kind="words $(_mirror_options "$command")"
    elif [[ -z $command ]]; then
        kind="words $_mirror_commands"
    else
        read -ra positionals <<<"$(_mirror_positionals "$command")"
        w=""
        if ((position < ${#positionals[@]})); then
            w=${positionals[position]}
        elif ((${#positionals[@]})) && [[ ${positionals[-1]} == *... ]]; then
            w=${positionals[-1]}
        fi
        w=${w%...}
        case "$w" in
            COMMAND) kind="words $_mirror_commands" ;;
            TARGET) kind="target" ;;
            *NAME*) kind="names" ;;
            *[a-z]*) kind="words ${w//|/ }" ;;
        esac
    fi
    case "$kind" in
        words\ *) mapfile -t reply < <(compgen -W "${kind#words }" -- "$cur") ;;
        names) mapfile -t reply < <(compgen -W "$_mirror_names" -- "$cur") ;;
        file) mapfile -t reply < <(compgen -f -- "$cur") ;;
        dir) mapfile -t reply < <(compgen -d -- "$cur") ;;
        adapter)
            for w in /sys/class/bluetooth/hci*; do
                w=${w##*/}
                [[ $w != *:* && $w == "$cur"* && $w != "hci*" ]] && reply+=("$w")
            done
            ;;
        target)
            if [[ $cur == unix:* ]]; then
                mapfile -t reply < <(compgen -P unix: -f -- "${cur#unix:}")
            else
                mapfile -t reply < <(compgen -W "unix:" -- "$cur")
            fi
            ;;
    esac
    [[ $kind == file || $kind == dir || $kind == target ]] && compopt -o filenames 2>/dev/null
    [[ $kind == target && ${#reply[@]} -eq 1 && ${reply[0]} == unix: ]] && compopt -o nospace 2>/dev/null
    # Bash replaces only its own last word (after a ':' or '=' that broke it): what comes before it is taken off.
    w=${words[-1]%"${COMP_WORDS[COMP_CWORD]}"}
    for i in "${!reply[@]}"; do
        reply[i]=$prefix${reply[i]}
        reply[i]=${reply[i]#"$w"}
    done
    COMPREPLY=("${reply[@]}")
}
complete -F _mirror mirror

"""#
