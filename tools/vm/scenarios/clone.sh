# vm-about: mirror clone of a device this project did not write (BlueZ's example-gatt-server under bluetoothd on hci1), live and from btmon's capture of mirror gatt --read's connection: both clones hold the same database and values, complete by the Database Hash bluetoothd serves; served by mirror-sim --from on hci1, mirror gatt --json --read against the clone equals it against the original (handles, UUIDs, properties, values of what does not change by itself)
# vm-timeout: 420
vm_need mirror
vm_example_gatt_peer
peer=00:AA:01:01:00:01

# 1. The original as mirror gatt reads it (btmon captures this connection, among the others, in hci.btsnoop).
vm_ok original 90 "$BIN/mirror" gatt $peer --adapter hci0 --json --read --no-cache
vm_no_le_link

# 2. The live clone: bluetoothd serves a Database Hash (BlueZ's computation), which proves it complete.
vm_ok clone-live 90 "$BIN/mirror" clone $peer --adapter hci0 -o "$OUT/live.json" --json
vm_json "$OUT/clone-live.log" 'j["complete"] is True and j["services"] >= 4' "the live clone is complete by the hash bluetoothd serves"
vm_no_le_link

# 3. The clone from btmon's capture of step 1's connection (the first whose peer is hci1): the same database and
#    the same values as the live clone, but for those that change by themselves (Heart Rate, Battery Level).
vm_stop btmon 5 TERM
vm_ok clone-capture 60 "$BIN/mirror" clone --from "$OUT/hci.btsnoop" --connection $peer -o "$OUT/capture.json" --json
vm_json "$OUT/clone-capture.log" 'j["notDiscovered"] == {"services": [], "characteristics": [], "descriptors": []} and j["notRead"] == []' \
  "btmon's capture of gatt --read showed every handle range and every readable value"
vm_ok compare-clones 30 python3 -I -S - "$OUT/live.json" "$OUT/capture.json" <<'PY'
import json, sys
live, capture = (json.load(open(p)) for p in sys.argv[1:3])
assert live["services"] == capture["services"], "the databases differ"
dynamic = {c["valueHandle"] for s in live["services"] for c in s["characteristics"] if c["uuid"] in ("2a37", "2a19")}
def values(d): return {r["handle"]: r for r in d["readings"] if r["handle"] not in dynamic}
assert values(live) == values(capture), "the values differ: %s" % (set(values(live).items()) ^ set(values(capture).items()) if False else "")
assert live["databaseHash"]["served"] == capture["databaseHash"]["served"] and capture["databaseHash"]["complete"] is True
print("same database (%d services) and the same %d values; both complete by the served hash %s" % (
      len(live["services"]), len(values(live)), live["databaseHash"]["served"]))
PY
sed 's/^/    | /' "$OUT/compare-clones.log"

# 4. The clone served on hci1 in bluetoothd's place: mirror gatt --read against it is what it was against the original.
vm_stop example 5 TERM
vm_stop bluetoothd 5 TERM
vm_no_le_link
vm_ok hci1-adv-off 20 btmgmt -i hci1 advertising off
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
             None if c["uuid"] in ("2a37", "2a19") else c.get("value"), [(d["uuid"], d["handle"]) for d in c["descriptors"]])
            for c in s["characteristics"]]) for s in j["services"]]
assert shape(a) == shape(b), "the replica differs:\n%s\n%s" % (shape(a), shape(b))
hashes = [c.get("value") for j in (a, b) for s in j["services"] for c in s["characteristics"] if c["uuid"] == "2b2a"]
assert len(hashes) == 2 and hashes[0] == hashes[1], "the Database Hash differs: %s" % hashes
print("the replica's database equals the original's: %d services, %d characteristics; Database Hash %s" % (
      len(a["services"]), sum(len(s["characteristics"]) for s in a["services"]), hashes[0]))
PY
sed 's/^/    | /' "$OUT/compare-gatt.log"
vm_stop clone-sim 5 TERM
