# vm-about: mirror shell over the kernel's LE stack against mirror-sim on hci1, in script mode and in a pty: subscribe scanState, a cloudToken write that latches ERROR (notified), read, disconnect, connect, read, cancelScan, read; each output asserted
# vm-timeout: 120
vm_need mirror mirror-sim
vm_controllers
# Wi-Fi offline: a cloudToken write latches scanState ERROR (09, notified); cancelScan (0x36) resets it to 00.
vm_sim sim --wifi offline
peer=00:AA:01:01:00:01

# 1. Script mode (stdin a file): every command echoed, then its result; one connection, then a second after connect.
printf '%s\n' "subscribe scanState" "write cloudToken 41" "read scanState" "disconnect" "connect" "read scanState" \
  "write scannerAction 36" "read scanState" >"$OUT/script.in"
vm_ok script 60 sh -c 'exec "$1" shell "$2" --adapter hci0 <"$3"' shell "$BIN/mirror" $peer "$OUT/script.in"
python3 -I -S - "$OUT/script.log" <<'PY' >"$OUT/script-check.log" 2>&1 || { sed 's/^/    | /' "$OUT/script-check.log" "$OUT/script.log"; vm_fail "mirror shell's script output"; }
import re, sys
lines = open(sys.argv[1]).read().split("\n")
def after(echo, pattern, start=0):
    """The index of the first line matching pattern after the echo of `echo` (at or after start)."""
    i = lines.index("> " + echo, start)
    for j in range(i + 1, len(lines)):
        if lines[j].startswith("> "): break
        if re.search(pattern, lines[j]): return j
    raise SystemExit(f"no /{pattern}/ after '> {echo}' (line {i})")
assert re.match(r"connected to 00:AA:01:01:00:01 .*via hci0: MTU \d+$", lines[0]), lines[0]
after("subscribe scanState", r"^subscribed to 0x000C .*scanState \(notifications\), current value: invalid  \[00\]")
# The notification prints as it arrives: after the write's echo, perhaps after later commands' echoes too, but
# before the disconnect's "disconnected" (the shell prints what came before it closes the connection).
gone = next(j for j in range(lines.index("> disconnect"), len(lines)) if lines[j].startswith("disconnected from"))
n = next((j for j in range(lines.index("> write cloudToken 41"), gone)
          if re.search(r"^\d\d:\d\d:\d\d\.\d{3}  notification 0x000C scanState: error  \[09\]", lines[j])), None)
assert n is not None, "no notification 0x000C scanState: 09 between the cloudToken write and disconnected"
after("write cloudToken 41", r"^wrote 1 byte to 0x0012 \(Write Request, confirmed\)$")
r1 = after("read scanState", r"^0x000C scanState: error  \[09\]")
d = after("disconnect", r"^disconnected from 00:AA:01:01:00:01")
c = after("connect", r"^connected to 00:AA:01:01:00:01 .*: MTU \d+$", d)
after("read scanState", r"^0x000C scanState: error  \[09\]", c)  # the mirror kept its latched ERROR across the connections
w = after("write scannerAction 36", r"^wrote 1 byte to 0x0014")
after("read scanState", r"^0x000C scanState: invalid  \[00\]", w)
print("ok")
PY
vm_log "ok: script mode: subscribed, notified 09 on the cloudToken write, read 09, disconnected, connected, read 09, cancelScan, read 00"
# The kernel kept the LE link through disconnect and connect (its 2 s disconnect delay): the simulator saw one
# connection, which ends once the shell's last socket has closed.
vm_wait_log sim "connection 1 closed" 20

# 2. The same in a real pseudo-terminal (the tests' pty driver): the prompt, each result, the notification, the
#    prompt saying disconnected, Ctrl-D closing cleanly.
prompt="mirror $peer> "
steps=$(python3 -I -S - "$prompt" <<'PY'
import json, sys
p = sys.argv[1]
s = [["expect", p, 30], ["send", "subscribe scanState\r"], ["expect", "subscribed to 0x000C", 10], ["expect", p, 5],
     ["send", "write cloudToken 41\r"], ["expect", "notification 0x000C scanState: error  [09]", 10], ["expect", p, 5],
     ["send", "read scanState\r"], ["expect", "0x000C scanState: error  [09]", 10], ["expect", p, 5],
     ["send", "disconnect\r"], ["expect", "disconnected from 00:AA:01:01:00:01", 10], ["expect", "mirror (disconnected)> ", 5],
     ["send", "connect\r"], ["expect", "connected to 00:AA:01:01:00:01", 30], ["expect", p, 5],
     ["send", "write scannerAction 36\r"], ["expect", "wrote 1 byte to 0x0014", 10], ["expect", p, 5],
     ["send", "read scanState\r"], ["expect", "0x000C scanState: invalid  [00]", 10], ["expect", p, 5],
     ["send", "\x04"], ["exit", 15]]
print(json.dumps(s))
PY
)
vm_ok pty 90 env HOME="$OUT" XDG_STATE_HOME="$OUT/state" TERM=xterm python3 -I -S "$REPO/Tests/LineEditorTests/pty-drive.py" "$steps" "$BIN/mirror" shell $peer --adapter hci0
vm_json "$OUT/pty.log" 'j["ok"] is True and j["status"] == 0' "in a pty: every step seen, Ctrl-D ended the shell with 0"
[ -f "$OUT/state/mirror/history" ] || vm_fail "no history file under XDG_STATE_HOME"
vm_wait_log sim "connection 2 closed" 20
