# vm-about: mirror clone of two devices this project did not write, Google Bumble (its own host stack on hci1, no bluetoothd) and bluetoothd with BlueZ's example-gatt-server: live (complete by each one's Database Hash, the encrypted values' refusals kept without pairing, or read after clone --pair) and from captures (of mirror gatt --read's connection; btmon captures of BlueZ's gatttool surveying each: equal to the live clone where seen, the values never read listed exactly); each served by mirror-sim --from on hci1 (bluetoothd's recorded advertising data advertised again), mirror gatt --json --read against the clone equal to it against the original (handles, UUIDs, properties, values, refusals, Database Hash); a partial capture names what it never saw
# vm-timeout: 480
vm_need mirror
[ -n "${VM_BUMBLE:-}" ] && [ -x "$VM_BUMBLE" ] \
  || vm_fail "no Bumble venv (VM_BUMBLE='${VM_BUMBLE:-}'): tools/vm/bumble-venv.sh could not make it (see run.sh's vm-prepare lines)"
peer=00:AA:01:01:00:01
export XDG_STATE_HOME="$OUT/state" XDG_CACHE_HOME="$OUT/xdg-cache"
vm_bg capture python3 -I -S "$REPO/tools/vm/hci_capture.py" "$OUT/bumble-hci.btsnoop"
vm_wait_log capture "^hci_capture: writing|Traceback" 10
vm_bg btvirt btvirt -l2 -L
vm_wait "hci0 and hci1" 15 test -e /sys/class/bluetooth/hci1 -a -e /sys/class/bluetooth/hci0
vm_ok hci0-up 15 hciconfig hci0 up
vm_ok hci1-down 15 hciconfig hci1 down
vm_bg bumble "$VM_BUMBLE" -u "$REPO/tools/vm/peers/bumble_peer.py" --transport hci-socket:1 --keystore "$OUT/bumble-keys.json" --io none
vm_wait_log bumble "^bumble-peer: advertising|Traceback" 60
vm_grep "$OUT/bumble.log" "^bumble-peer: advertising as $peer \(public\)" "Bumble advertises on hci1"

# 1. The original as mirror gatt reads it (the capture holds this connection, among the others, in bumble-hci.btsnoop).
vm_ok original 90 "$BIN/mirror" gatt $peer --adapter hci0 --json --read --no-cache
vm_no_le_link

# 2. The live clone: Bumble serves a Database Hash, which proves it complete.
vm_ok clone-live 90 "$BIN/mirror" clone $peer --adapter hci0 -o "$OUT/live.json" --json
vm_json "$OUT/clone-live.log" 'j["complete"] is True and j["services"] >= 3 and j["refused"] >= 1' "the live clone is complete by the hash Bumble serves"
vm_no_le_link

# 3. The clone from the capture of step 1's connection (the first whose peer is hci1): the same database and the same
#    values as the live clone.
vm_stop capture 5 INT
vm_ok clone-capture 60 "$BIN/mirror" clone --from "$OUT/bumble-hci.btsnoop" --connection $peer -o "$OUT/capture.json" --json
vm_json "$OUT/clone-capture.log" 'j["notDiscovered"] == {"services": [], "characteristics": [], "descriptors": []} and j["notRead"] == []' \
  "the capture of gatt --read showed every handle range and every readable value"
vm_ok diff-clones 30 "$BIN/mirror" clone --diff "$OUT/live.json" "$OUT/capture.json" --json
vm_json "$OUT/diff-clones.log" 'j == {"structure": [], "properties": [], "values": []}' \
  "mirror clone --diff: the live clone and the capture's have the same database and the same values"
vm_json "$OUT/capture.json" 'j["databaseHash"]["complete"] is True' "the capture's clone is complete by the hash it saw served"

# 3a. A btmon capture of BlueZ's own gatttool surveying Bumble (diff_capture: the same database, the values read
#     equal to the live clone's, and the ones not asked for, Bumble's refused values, named as never read).
# diff_capture NAME LIVE CAPTURE UNSEEN DEVICE: `mirror clone --diff LIVE CAPTURE` finds the same database and, of
# the values, only those gatttool was not asked to read (UNSEEN: read live, not in the capture), and the capture's
# clone names exactly those as never read and is complete by the hash it saw served.
diff_capture() {
  local list="[$(echo "$4" | sed 's/,/, /g')]"
  vm_ok "$1" 30 "$BIN/mirror" clone --diff "$2" "$3" --json
  vm_json "$OUT/$1.log" 'j["structure"] == [] and j["properties"] == []' \
    "gatttool's capture of $5: the same database as the live clone (mirror clone --diff)" \
    "sorted(v['handle'] for v in j['values']) == $list and all(v['before'] is not None and v['after'] is None for v in j['values'])" \
    "of the values, only those gatttool was not asked to read differ ($4: read live, not in the capture)"
  vm_json "$3" "j['unread'] == $list and j['databaseHash']['complete'] is True" \
    "the clone from gatttool's capture names them never read, and is complete by the hash it saw served"
}
bumble_reads=$(python3 -I -S -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(",".join("0x%04X" % r["handle"] for r in d["readings"] if "error" in r),
      ",".join("0x%04x" % r["handle"] for r in d["readings"] if "error" not in r))' "$OUT/live.json")
vm_bg btmon-bumble sh -c 'exec btmon -w "$1" >/dev/null' btmon "$OUT/gatttool-bumble.btsnoop"
vm_wait "btmon writing" 10 test -s "$OUT/gatttool-bumble.btsnoop"
vm_no_le_link
vm_ok bumble-gatttool 90 python3 -I -S "$REPO/tools/vm/gatttool_survey.py" hci0 $peer "$OUT/live.json" --read "${bumble_reads#* }"
sed 's/^/    | /' "$OUT/bumble-gatttool.log" | tail -n 1
vm_no_le_link
vm_stop btmon-bumble 5 INT
vm_ok bumble-gatttool-clone 30 "$BIN/mirror" clone --from "$OUT/gatttool-bumble.btsnoop" --connection $peer -o "$OUT/gatttool-bumble.json"
sed 's/^/    | /' "$OUT/bumble-gatttool-clone.log"
diff_capture diff-bumble-gatttool "$OUT/live.json" "$OUT/gatttool-bumble.json" "${bumble_reads%% *}" Bumble

# 3b. clone --pair: this process pairs first (Just Works, its own state directory: the later steps stay unbonded),
#     and reads the encrypted value; the authenticated one stays refused (0x05) at once: a NoInputNoOutput agent never
#     gives the MITM protection a raise to high would need.
vm_no_le_link
vm_ok clone-pair 60 env XDG_STATE_HOME="$OUT/state-paired" "$BIN/mirror" clone $peer --adapter hci0 --pair -o "$OUT/paired.json" --json
vm_json "$OUT/clone-pair.log" 'j["complete"] is True and j["refused"] == 1' "clone --pair reads the encrypted value; only the authenticated one is refused"
vm_ok paired-values 10 python3 -I -S -c '
import json, sys
d = json.load(open(sys.argv[1]))
refused = [r for r in d["readings"] if "error" in r]
assert [r["error"] for r in refused] == [5], refused
assert any(r.get("value") == b"secret: encrypted link".hex() for r in d["readings"]), "no encrypted value read"
print("clone --pair: the encrypted value read, 0x%04X refused 0x05 Insufficient Authentication" % refused[0]["handle"])' "$OUT/paired.json"
sed 's/^/    | /' "$OUT/paired-values.log"
vm_run unpair 15 btmgmt -i hci0 unpair -t 1 $peer

# 4. The clone served on hci1 in Bumble's place: mirror gatt --read against it is what it was against Bumble.
vm_stop bumble 10 INT
vm_no_le_link
vm_ok hci1-up 15 hciconfig hci1 up
vm_bg clone-sim "$BIN/mirror-sim" --from "$OUT/live.json" --adapter hci1
vm_wait_log clone-sim "^mirror-sim: listening" 30
vm_ok replica 90 "$BIN/mirror" gatt $peer --adapter hci0 --json --read --no-cache
# compare_gatt.py ORIGINAL REPLICA [UUID...]: two `mirror gatt --json --read` outputs hold the same handles, UUIDs,
# properties, values (but those of the UUIDs named: values that change by themselves) and the same Database Hash.
cat > "$OUT/compare_gatt.py" <<'PY'
import json, sys
def load(p):
    text = open(p).read()
    return json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
a, b = (load(p) for p in sys.argv[1:3])
dynamic = set(sys.argv[3:])
def shape(j):
    return [(s["uuid"], s["start"], s["end"], [(c["uuid"], c["handle"], c["valueHandle"], c["properties"],
             None if c["uuid"] in dynamic else c.get("value"), c.get("readError", {}).get("code"),
             [(d["uuid"], d["handle"], d.get("value"), d.get("readError", {}).get("code")) for d in c["descriptors"]])
            for c in s["characteristics"]]) for s in j["services"]]
assert shape(a) == shape(b), "the replica differs:\n%s\n%s" % (shape(a), shape(b))
hashes = [c.get("value") for j in (a, b) for s in j["services"] for c in s["characteristics"] if c["uuid"] == "2b2a"]
assert len(hashes) == 2 and hashes[0] == hashes[1], "the Database Hash differs: %s" % hashes
refused = sum("readError" in c for s in a["services"] for c in s["characteristics"]) + sum(
    "readError" in d for s in a["services"] for c in s["characteristics"] for d in c["descriptors"])
print("the replica's database and values equal the original's: %d services, %d characteristics, %d refusals; Database Hash %s%s" % (
      len(a["services"]), sum(len(s["characteristics"]) for s in a["services"]), refused, hashes[0],
      "; values of %s left out (they change by themselves)" % ", ".join(sorted(dynamic)) if dynamic else ""))
PY
vm_ok compare-gatt 30 python3 -I -S "$OUT/compare_gatt.py" "$OUT/original.log" "$OUT/replica.log"
sed 's/^/    | /' "$OUT/compare-gatt.log"
vm_stop clone-sim 5 TERM

# 5. A partial capture: a read by handle of the replica, captured by --btsnoop, discovers nothing: every range is named.
vm_bg clone-sim2 "$BIN/mirror-sim" --from "$OUT/live.json" --adapter hci1
vm_wait_log clone-sim2 "^mirror-sim: listening" 30
vm_no_le_link
vm_ok read-handle 60 "$BIN/mirror" read $peer 0x0003 --adapter hci0 --btsnoop "$OUT/partial.btsnoop"
vm_ok clone-partial 30 "$BIN/mirror" clone --from "$OUT/partial.btsnoop" -o "$OUT/partial.json" --json
vm_json "$OUT/clone-partial.log" 'j["notDiscovered"]["services"] == [{"start": 1, "end": 65535}]' "a capture that discovered nothing says every range was never discovered"
vm_stop clone-sim2 5 TERM

# 6. bluetoothd's GATT server with BlueZ's example-gatt-server on hci1 (as gatt-example sets it up), a second device
#    this project did not write. Its encrypted values answer 0x0F: mirror gatt --read and mirror clone record the
#    refusal as the permission it reveals, and start no pairing (none but bluetoothd's absent agent could answer it).
vm_stop btvirt 5 TERM
vm_wait "hci0 and hci1 gone" 15 sh -c '! test -e /sys/class/bluetooth/hci0 && ! test -e /sys/class/bluetooth/hci1'
VM_BTMON=0 vm_example_gatt_peer
# Each within 25 s, under SMP's 30 s timeout (Vol 3 Part H §3.4): a raise that started a pairing would fail the step.
vm_no_le_link
vm_ok bluez-original 25 "$BIN/mirror" gatt $peer --adapter hci0 --json --read --no-cache
vm_no_le_link
vm_ok bluez-clone 25 "$BIN/mirror" clone $peer --adapter hci0 -o "$OUT/bluez.json" --json
vm_json "$OUT/bluez-clone.log" 'j["complete"] is True and j["refused"] >= 1' \
  "the live clone of bluetoothd's server is complete by the Database Hash it serves, its encrypted values' refusals kept"
vm_ok bluez-advertising 10 python3 -I -S -c '
import json, sys
a = json.load(open(sys.argv[1]))["advertising"]
assert any(x["kind"] == "ADV_IND" and x["address"] == "00:AA:01:01:00:01" and x["data"] for x in a), a
print("advertising recorded: " + ", ".join("%s [%s]" % (x["kind"], x["data"]) for x in a))' "$OUT/bluez.json"
sed 's/^/    | /' "$OUT/bluez-advertising.log"

# 7. A btmon capture of a connection made by BlueZ's own gatttool: primary, characteristics and char-desc over the
#    whole range, then a read of every value the live clone read but the Battery Level (left out on purpose). Not the
#    refused ones: gatttool's bt_att raises security on 0x05/0x0F and waits on a pairing nobody here answers. The
#    clone from the capture equals the live clone where seen, and names exactly the values it never saw read.
read_handles=$(python3 -I -S -c '
import json, sys
d = json.load(open(sys.argv[1]))
battery = [c["valueHandle"] for s in d["services"] for c in s["characteristics"] if c["uuid"] == "2a19"][0]
unseen = sorted([battery] + [r["handle"] for r in d["readings"] if "error" in r])
print(",".join("0x%04X" % h for h in unseen), ",".join("0x%04x" % r["handle"] for r in d["readings"] if r["handle"] not in unseen))' "$OUT/bluez.json") \
  || vm_fail "no Battery Level in the live clone of bluetoothd's server"
unseen=${read_handles%% *}
vm_bg btmon sh -c 'exec btmon -w "$1" >/dev/null' btmon "$OUT/gatttool.btsnoop"
vm_wait "btmon writing" 10 test -s "$OUT/gatttool.btsnoop"
vm_no_le_link
vm_ok bluez-gatttool 90 python3 -I -S "$REPO/tools/vm/gatttool_survey.py" hci0 $peer "$OUT/bluez.json" --read "${read_handles#* }"
sed 's/^/    | /' "$OUT/bluez-gatttool.log" | tail -n 1
vm_no_le_link
vm_stop btmon 5 INT
vm_ok bluez-capture 30 "$BIN/mirror" clone --from "$OUT/gatttool.btsnoop" --connection $peer -o "$OUT/gatttool.json"
sed 's/^/    | /' "$OUT/bluez-capture.log"
vm_grep "$OUT/bluez-capture.log" "^values never read: $(echo "$unseen" | sed 's/,/( [^,]*)?, /g')( [^,]*)?$" \
  "the clone from gatttool's capture names each value gatttool never read ($unseen)"
vm_no_grep "$OUT/bluez-capture.log" "never discovered" "gatttool's discovery covered every handle range"
diff_capture diff-bluez-clones "$OUT/bluez.json" "$OUT/gatttool.json" "$unseen" bluetoothd

# 8. The clone served on hci1 in bluetoothd's place (bluetoothd stopped: it powers the adapters off as it ends), with
#    the advertising data it recorded: gatt --read against it equals it against bluetoothd (but the Battery Level,
#    which the example drains every 5 s), and a clone of the replica has the same hash and advertising data.
vm_stop example 5 TERM
vm_stop bluetoothd 10 TERM
vm_ok hci0-on 20 btmgmt -i hci0 power on
vm_ok hci1-on 20 btmgmt -i hci1 power on
vm_ok hci1-adv-off 20 btmgmt -i hci1 advertising off
vm_bg bluez-sim "$BIN/mirror-sim" --from "$OUT/bluez.json" --adapter hci1
vm_wait_log bluez-sim "^mirror-sim: listening" 30
vm_grep "$OUT/bluez-sim.log" "advertising the recorded ADV_IND data" "mirror-sim advertises the recorded advertising data"
vm_no_le_link
vm_ok bluez-replica 60 "$BIN/mirror" gatt $peer --adapter hci0 --json --read --no-cache
vm_ok compare-bluez-gatt 30 python3 -I -S "$OUT/compare_gatt.py" "$OUT/bluez-original.log" "$OUT/bluez-replica.log" 2a19
sed 's/^/    | /' "$OUT/compare-bluez-gatt.log"
vm_no_le_link
vm_ok bluez-reclone 60 "$BIN/mirror" clone $peer --adapter hci0 -o "$OUT/bluez-replica.json" --json
vm_ok compare-bluez-replica 10 python3 -I -S -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["databaseHash"] == a["databaseHash"], (a["databaseHash"], b["databaseHash"])
strip = lambda d: [(x["kind"], x["data"]) for x in d["advertising"]]
assert strip(a) == strip(b), (strip(a), strip(b))
print("the replica serves the hash %s (complete) and advertises %s, as bluetoothd did" % (b["databaseHash"]["served"], strip(b)))' \
  "$OUT/bluez.json" "$OUT/bluez-replica.json"
sed 's/^/    | /' "$OUT/compare-bluez-replica.log"
vm_stop bluez-sim 5 TERM
