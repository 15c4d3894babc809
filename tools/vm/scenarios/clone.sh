# vm-about: mirror clone of a device this project did not write (Google Bumble on hci1, its own host stack, no bluetoothd), live and from the capture of mirror gatt --read's connection: both clones hold the same database and values, complete by the Database Hash Bumble serves; served by mirror-sim --from on hci1, mirror gatt --json --read against the clone equals it against Bumble (handles, UUIDs, properties, values, the encrypted values' refusals); a partial capture names what it never saw
# vm-timeout: 420
vm_need mirror
[ -n "${VM_BUMBLE:-}" ] && [ -x "$VM_BUMBLE" ] \
  || vm_fail "no Bumble venv (VM_BUMBLE='${VM_BUMBLE:-}'): tools/vm/bumble-venv.sh could not make it (see run.sh's vm-prepare lines)"
peer=00:AA:01:01:00:01
export XDG_STATE_HOME="$OUT/state" XDG_CACHE_HOME="$OUT/xdg-cache"
vm_bg capture python3 -I -S "$REPO/tools/vm/hci_capture.py" "$OUT/hci.btsnoop"
vm_wait_log capture "^hci_capture: writing|Traceback" 10
vm_bg btvirt btvirt -l2 -L
vm_wait "hci0 and hci1" 15 test -e /sys/class/bluetooth/hci1 -a -e /sys/class/bluetooth/hci0
vm_ok hci0-up 15 hciconfig hci0 up
vm_ok hci1-down 15 hciconfig hci1 down
vm_bg bumble "$VM_BUMBLE" -u "$REPO/tools/vm/peers/bumble_peer.py" --transport hci-socket:1 --keystore "$OUT/bumble-keys.json" --io none
vm_wait_log bumble "^bumble-peer: advertising|Traceback" 60
vm_grep "$OUT/bumble.log" "^bumble-peer: advertising as $peer \(public\)" "Bumble advertises on hci1"

# 1. The original as mirror gatt reads it (the capture holds this connection, among the others, in hci.btsnoop).
vm_ok original 90 "$BIN/mirror" gatt $peer --adapter hci0 --json --read --no-cache
vm_no_le_link

# 2. The live clone: Bumble serves a Database Hash, which proves it complete.
vm_ok clone-live 90 "$BIN/mirror" clone $peer --adapter hci0 -o "$OUT/live.json" --json
vm_json "$OUT/clone-live.log" 'j["complete"] is True and j["services"] >= 3 and j["refused"] >= 1' "the live clone is complete by the hash Bumble serves"
vm_no_le_link

# 3. The clone from the capture of step 1's connection (the first whose peer is hci1): the same database and the same
#    values as the live clone.
vm_stop capture 5 INT
vm_ok clone-capture 60 "$BIN/mirror" clone --from "$OUT/hci.btsnoop" --connection $peer -o "$OUT/capture.json" --json
vm_json "$OUT/clone-capture.log" 'j["notDiscovered"] == {"services": [], "characteristics": [], "descriptors": []} and j["notRead"] == []' \
  "the capture of gatt --read showed every handle range and every readable value"
vm_ok compare-clones 30 python3 -I -S - "$OUT/live.json" "$OUT/capture.json" <<'PY'
import json, sys
live, capture = (json.load(open(p)) for p in sys.argv[1:3])
assert live["services"] == capture["services"], "the databases differ"
dynamic = set()
def values(d): return {r["handle"]: r for r in d["readings"] if r["handle"] not in dynamic}
assert values(live) == values(capture), "the values differ:\n%s\n%s" % (values(live), values(capture))
assert live["databaseHash"]["served"] == capture["databaseHash"]["served"] and capture["databaseHash"]["complete"] is True
print("same database (%d services) and the same %d values; both complete by the served hash %s" % (
      len(live["services"]), len(values(live)), live["databaseHash"]["served"]))
PY
sed 's/^/    | /' "$OUT/compare-clones.log"

# 4. The clone served on hci1 in Bumble's place: mirror gatt --read against it is what it was against Bumble.
vm_stop bumble 10 INT
vm_no_le_link
vm_ok hci1-up 15 hciconfig hci1 up
vm_bg clone-sim "$BIN/mirror-sim" --from "$OUT/live.json" --adapter hci1
vm_wait_log clone-sim "^mirror-sim: listening" 30
vm_ok replica 90 "$BIN/mirror" gatt $peer --adapter hci0 --json --read --no-cache
vm_ok compare-gatt 30 python3 -I -S - "$OUT/original.log" "$OUT/replica.log" <<'PY'
import json, sys
def load(p):
    text = open(p).read()
    return json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
a, b = (load(p) for p in sys.argv[1:3])
def shape(j):
    return [(s["uuid"], s["start"], s["end"], [(c["uuid"], c["handle"], c["valueHandle"], c["properties"],
             c.get("value"), c.get("readError", {}).get("code"), [(d["uuid"], d["handle"]) for d in c["descriptors"]])
            for c in s["characteristics"]]) for s in j["services"]]
assert shape(a) == shape(b), "the replica differs:\n%s\n%s" % (shape(a), shape(b))
hashes = [c.get("value") for j in (a, b) for s in j["services"] for c in s["characteristics"] if c["uuid"] == "2b2a"]
assert len(hashes) == 2 and hashes[0] == hashes[1], "the Database Hash differs: %s" % hashes
print("the replica's database and values equal the original's: %d services, %d characteristics; Database Hash %s" % (
      len(a["services"]), sum(len(s["characteristics"]) for s in a["services"]), hashes[0]))
PY
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
