# bash completion for mirror(1): commands, each command's options, the global options, and the values of the
# options that take one of a fixed set. Generated from the command table (Sources/MirrorCommandLine) by
# tools/mirror-docs.sh; do not edit. Install as /usr/share/bash-completion/completions/mirror, or source it.

# The commands, and help.
_mirror_commands="discover gatt read write listen mtu check clone link pair bench scan wifi shell cache bonds doctor adapters help"

# The bundled profile's characteristic names, for a HANDLE|UUID|NAME (a handle or a UUID is typed).
_mirror_names="cloudToken scanError scanState scannerAction wifiConnectionStatus wifiNetworkSSIDEnum wifiNumNetworks wifiSetSSID"

# The options of command $1 (none yet: the global ones and --version).
_mirror_options() {
    case "$1" in
        discover) echo "--duration --adapter --json --help" ;;
        gatt) echo "--read --diff --adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        read) echo "--adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        write) echo "--no-response --long --reliable --adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        listen) echo "--count --duration --indicate --adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        mtu) echo "--adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        check) echo "--only --skip --writes --max-time --max-requests --list-rules --adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --pair --repair --help" ;;
        clone) echo "--output --redact --from --connection --diff --adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        link) echo "--adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        pair) echo "--io --passkey --passkey-file --accept-just-works --require-mitm --adapter --type --json --repair --help" ;;
        bench) echo "--handle --size --count --duration --mode --warmup --counter --rounds --bare-loop --loopback --plot --batch --adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        scan) echo "--timeout --upload-host --upload-bind --upload-port --upload-dir --scan-id --settle --adapter --type --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        wifi) echo "--wait --adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        shell) echo "--keep-going --io --passkey --passkey-file --adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help" ;;
        cache) echo "--adapter --json --help" ;;
        bonds) echo "--adapter --json --help" ;;
        doctor) echo "--json --help" ;;
        adapters) echo "--json --help" ;;
        *) echo "--adapter --type --timeout --mtu --security --trace --btsnoop --json --profile --interval --latency --supervision-timeout --phy --data-length --no-cache --bearers --pair --repair --help --version" ;;
    esac
}

# What option $2 of command $1 takes: nothing (a flag: status 1), or "words W...", "file", "dir", "adapter", "names"
# (a characteristic), "any".
_mirror_option_value() {
    case "$1 $2" in
        "discover --duration") echo "any" ;;
        "listen --count") echo "any" ;;
        "listen --duration") echo "any" ;;
        "check --only") echo "any" ;;
        "check --skip") echo "any" ;;
        "check --writes") echo "any" ;;
        "check --max-time") echo "any" ;;
        "check --max-requests") echo "any" ;;
        "clone --output") echo "file" ;;
        "clone --redact") echo "names" ;;
        "clone --from") echo "any" ;;
        "clone --connection") echo "any" ;;
        "clone --diff") echo "file" ;;
        "pair --io") echo "words display yesno keyboard none keyboard-display" ;;
        "pair --passkey") echo "any" ;;
        "pair --passkey-file") echo "file" ;;
        "bench --handle") echo "names" ;;
        "bench --size") echo "any" ;;
        "bench --count") echo "any" ;;
        "bench --duration") echo "any" ;;
        "bench --mode") echo "words with-response without-response both" ;;
        "bench --warmup") echo "any" ;;
        "bench --counter") echo "names" ;;
        "bench --rounds") echo "any" ;;
        "bench --bare-loop") echo "words second-connection same-connection none" ;;
        "bench --plot") echo "file" ;;
        "scan --timeout") echo "any" ;;
        "scan --upload-host") echo "any" ;;
        "scan --upload-bind") echo "any" ;;
        "scan --upload-port") echo "any" ;;
        "scan --upload-dir") echo "dir" ;;
        "scan --scan-id") echo "any" ;;
        "scan --settle") echo "any" ;;
        "wifi --wait") echo "any" ;;
        "shell --io") echo "words display yesno keyboard none keyboard-display" ;;
        "shell --passkey") echo "any" ;;
        "shell --passkey-file") echo "file" ;;
        *" --adapter") echo "adapter" ;;
        *" --type") echo "words public random" ;;
        *" --timeout") echo "any" ;;
        *" --mtu") echo "any" ;;
        *" --security") echo "words low medium high" ;;
        *" --btsnoop") echo "file" ;;
        *" --profile") echo "file" ;;
        *" --interval") echo "any" ;;
        *" --latency") echo "any" ;;
        *" --supervision-timeout") echo "any" ;;
        *" --phy") echo "words 1m 2m coded" ;;
        *" --data-length") echo "any" ;;
        *" --bearers") echo "any" ;;
        *) return 1 ;;
    esac
}

# The positionals of command $1: TARGET, a placeholder, or literal words a|b|c; a last one ending in ... repeats.
_mirror_positionals() {
    case "$1" in
        gatt) echo "TARGET" ;;
        read) echo "TARGET HANDLE|UUID|NAME" ;;
        write) echo "TARGET HANDLE|UUID|NAME HEX" ;;
        listen) echo "TARGET HANDLE|UUID|NAME..." ;;
        mtu) echo "TARGET" ;;
        check) echo "TARGET" ;;
        clone) echo "TARGET" ;;
        link) echo "TARGET" ;;
        pair) echo "TARGET" ;;
        bench) echo "TARGET" ;;
        scan) echo "TARGET" ;;
        wifi) echo "list|status|join TARGET SSID" ;;
        shell) echo "TARGET" ;;
        cache) echo "list|clear TARGET" ;;
        bonds) echo "list|remove TARGET" ;;
        help) echo "COMMAND" ;;
    esac
}

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
