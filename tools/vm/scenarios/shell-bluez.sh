# vm-about: mirror shell against bluetoothd's GATT server with BlueZ's example-gatt-server (as gatt-example sets it up) on hci1: gatt, read by handle and by UUID, subscribe to Heart Rate Measurement (notifications while the shell waits for its next line), unsubscribe, on one connection
# vm-timeout: 120
vm_need mirror
vm_example_gatt_peer
peer=00:AA:01:01:00:01

# Script mode over a pipe fed slowly: Heart Rate Measurement (2a37) notifies about once a second, so the 3 s
# before the next line bring notifications that print as they come; Battery Level (2a19) read by its UUID.
vm_no_le_link
# The feeder waits (20 s at most, by bash's clock: every fork costs about 50 ms here) for the subscription's line in
# the shell's own output, then 3 s.
vm_ok shell 60 bash -c '{ printf "%s\n" gatt "read 0x0003" "subscribe 2a37"
                          while [ $SECONDS -lt 20 ] && ! grep -q "^subscribed to " "$3"; do sleep 0.1; done; sleep 3
                          printf "%s\n" "read 2a19" "unsubscribe 2a37" mtu; } | "$1" shell "$2" --adapter hci0' shell "$BIN/mirror" $peer "$OUT/shell.log"
python3 -I -S - "$OUT/shell.log" <<'PY' >"$OUT/shell-check.log" 2>&1 || { sed 's/^/    | /' "$OUT/shell-check.log" "$OUT/shell.log" | tail -n 60; vm_fail "mirror shell's output against bluetoothd"; }
import re, sys
lines = open(sys.argv[1]).read().split("\n")
def section(echo):
    """The lines between the echo of `echo` and the next echo."""
    i = lines.index("> " + echo)
    j = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("> ")), len(lines))
    return lines[i + 1:j]
assert re.match(r"connected to 00:AA:01:01:00:01 .*via hci0: MTU \d+$", lines[0]), lines[0]
gatt = "\n".join(section("gatt"))
for uuid in ("180d", "180f", "12345678-1234-5678-1234-56789abcdef0"):
    assert uuid in gatt.lower(), f"gatt lists no service {uuid}"
name = section("read 0x0003")
# Named and decoded by what it is (the database the shell's gatt discovered): the Device Name, as text.
assert any(re.match(r'^0x0003 Device Name: "BlueZ ', l) for l in name), name
sub = section("subscribe 2a37")
m = next((re.match(r"^subscribed to (0x[0-9A-F]{4}) ", l) for l in sub if l.startswith("subscribed to ")), None)
assert m, sub
hr = m.group(1)
notes = [l for l in lines if re.match(r"^\d\d:\d\d:\d\d\.\d{3}  notification %s Heart Rate Measurement: " % hr, l)]
assert len(notes) >= 2, f"{len(notes)} Heart Rate notifications in 3 s"
battery = section("read 2a19")
assert any(re.match(r"^0x[0-9A-F]{4} Battery Level: \d+ %  \[[0-9a-f]{2}\]", l) for l in battery), battery
assert any(l == f"unsubscribed from {hr}" or l.startswith(f"unsubscribed from {hr} ") for l in section("unsubscribe 2a37")), section("unsubscribe 2a37")
assert any("MTU" in l for l in section("mtu")), section("mtu")
print(f"ok: {len(notes)} notifications of {hr}")
PY
vm_log "ok: gatt found Heart Rate, Battery and the test service; read 0x0003 \"BlueZ …\"; $(cat "$OUT/shell-check.log"); Battery Level by UUID; unsubscribed"
