# vm-about: the GATT cache against bluetoothd (BlueZ's example-gatt-server on hci1): the Database Hash it serves against one computed apart from mirror (tools/vm/gatt_hash.py: §7.3's rule and bluetoothd's, which leaves out Extended Properties), cached under it; a warm gatt in two requests; a second application registered while a shell is connected: its Service Changed indication invalidates the cache and the shell's next gatt has the new services
# vm-timeout: 180
vm_need mirror
vm_example_gatt_peer
peer=00:AA:01:01:00:01
export XDG_CACHE_HOME=$OUT/xdg
# A request line the client sent (not an answer to bluetoothd's own client): "HH:MM:SS.ffffff > Read By Type Request ...".
sent='^[0-9:.]+ > [A-Za-z ]+ Request'

vm_no_le_link
vm_ok served 40 "$BIN/mirror" read $peer 2b2a --adapter hci0 --json
vm_no_le_link
vm_ok cold 60 sh -c '"$1" gatt "$2" --adapter hci0 --json >"$3" 2>"$4"' cold "$BIN/mirror" $peer "$OUT/cold.json" "$OUT/cold.err"
sed 's/^/    | /' "$OUT/cold.err"
served=$(python3 -I -S -c 'import json,sys; print(json.load(open(sys.argv[1]))["values"][0]["value"])' "$OUT/served.log")
vm_ok hashes 20 /usr/bin/python3 -I "$REPO/tools/vm/gatt_hash.py" "$OUT/cold.json"
bluez=$(sed -n 's/^bluez //p' "$OUT/hashes.log")
[ "$bluez" = "$served" ] || vm_fail "bluetoothd's rule over the database mirror gatt printed gives $bluez, not the served $served"
vm_log "ok: bluetoothd 5.66 serves $served, the hash without Extended Properties (bluetoothd's rule, computed by gatt_hash.py)"
vm_ok list 10 "$BIN/mirror" cache list --json
vm_json "$OUT/list.log" "len(j['entries']) == 1 and j['entries'][0]['databaseHash'] == '$served'" "the database is cached under the served hash"
file=$(python3 -I -S -c 'import json,sys; print(json.load(open(sys.argv[1]))["entries"][0]["path"])' "$OUT/list.log")
vm_ok hashes-file 20 /usr/bin/python3 -I "$REPO/tools/vm/gatt_hash.py" "$file"
spec=$(sed -n 's/^spec //p' "$OUT/hashes-file.log")
vm_log "Database Hash served by bluetoothd $served; computed apart from mirror over the cached database: §7.3 $spec, bluetoothd's rule $(sed -n 's/^bluez //p' "$OUT/hashes-file.log")"
vm_grep "$OUT/hashes-file.log" "^bluez $served$" "the cached database hashes to the served value by bluetoothd's rule"
vm_grep "$OUT/cold.err" "serves the Database Hash $served as bluetoothd computes it \(BlueZ 5.79 and earlier: .* gives $spec\)" \
  "mirror computed §7.3's hash as gatt_hash.py did ($spec), and took the served one as bluetoothd's rule"

# Warm: Exchange MTU and the Read By Type of the hash, then the cached database (Part G §2.5.2).
vm_no_le_link
vm_ok warm 60 "$BIN/mirror" gatt $peer --adapter hci0 --trace
# bluetoothd's own GATT client may exchange the MTU first (its Exchange MTU Request, which mirror answers): when
# mirror's answer went out before its connect's exchange, the MTU is set and mirror sends none of its own (Part F
# §3.4.2). So: at most one Exchange MTU Request of ours, and one other request, the hash's.
ours=$(grep -cE '^[0-9:.]+ > Exchange MTU Request' "$OUT/warm.log")
[ "$ours" -le 1 ] || vm_fail "the warm gatt sent $ours Exchange MTU Requests"
vm_count "$OUT/warm.log" "$sent" $((ours + 1)) "the warm gatt sent one request besides its $ours Exchange MTU: the Database Hash"
vm_grep "$OUT/warm.log" "Read By Type Request 0x0001-0xFFFF type 2b2a" "the one read before the cached database is the hash's"

# While a shell is connected and subscribed to Service Changed, a second application registers its services:
# bluetoothd indicates Service Changed, the cache file goes, and the next gatt on that connection has them.
vm_no_le_link
vm_ok shell 90 bash -c '{ printf "%s\n" gatt "subscribe 2a05"
                          while [ $SECONDS -lt 20 ] && ! grep -q "^subscribed to " "$3"; do sleep 0.1; done
                          /usr/bin/python3 -u "$4" hci1 >"$5" 2>&1 & echo $! >"$5.pid"
                          while [ $SECONDS -lt 60 ] && ! grep -q "are forgotten" "$3"; do sleep 0.1; done; sleep 1
                          printf "%s\n" gatt quit; } | "$1" shell "$2" --adapter hci0 >"$3" 2>&1; kill $(cat "$5.pid") 2>/dev/null; true' \
  shell "$BIN/mirror" $peer "$OUT/shell.out" "$OUT/example-gatt-server" "$OUT/example2.log"
vm_grep "$OUT/example2.log" "^Registering GATT application" "a second application registered with bluetoothd while the shell was connected"
vm_grep "$OUT/shell.out" "indication +0x[0-9A-F]{4} Service Changed: " "the shell printed bluetoothd's Service Changed indication"
vm_grep "$OUT/shell.out" "Service Changed 0x[0-9A-F]{4}-0x[0-9A-F]{4} from .*forgotten" "the session forgot the database it knew"
python3 -I -S - "$OUT/shell.out" <<'PY' >"$OUT/shell-check.log" 2>&1 || { sed 's/^/    | /' "$OUT/shell-check.log" "$OUT/shell.out" | tail -n 60; vm_fail "the shell's second gatt against the first"; }
import sys
lines = open(sys.argv[1]).read().split("\n")
marks = [i for i, l in enumerate(lines) if l == "> gatt"]
assert len(marks) == 2, marks
first = "\n".join(lines[marks[0]:lines.index("> subscribe 2a05")]).lower()
second = "\n".join(lines[marks[1]:]).lower()
assert first.count("180d") == 1, "one Heart Rate service before"
assert second.count("180d") == 2, "two Heart Rate services after the second application registered"
print("ok: Heart Rate services 1 -> 2")
PY
vm_log "ok: the shell's gatt after Service Changed lists the second application's services"
vm_ok list-after 10 "$BIN/mirror" cache list --json
vm_json "$OUT/list-after.log" "all(e['databaseHash'] != '$served' for e in j['entries'])" "the copy under the old hash is gone"
