# vm-about: mirror bench over a real LE link to mirror-sim on hci1: Write Requests all confirmed, Write Commands all taken in, at MTU 517 and at MTU 23
# vm-timeout: 240
vm_need mirror mirror-sim
vm_big_buffers
vm_controllers
vm_sim sim
peer=00:AA:01:01:00:01
# The rates are logged, not compared: under TCG on a loaded machine they swing several-fold.
# cloudToken's value handle (0x0012) takes values up to the mirror's 40-byte limit.
vm_ok bench-517 120 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --count 300 --json
vm_json "$OUT/bench-517.log" \
  'j["mtu"] == 517 and j["size"] == 20 and [m["mode"] for m in j["modes"]] == ["with-response", "without-response"]' "MTU 517 agreed, both modes ran" \
  'j["modes"][0]["writes"] == 300 and j["modes"][0]["confirmed"] == 300 and j["modes"][0]["latencyMicroseconds"]["p50"] > 0' "300 Write Requests, each confirmed by a Write Response" \
  'j["modes"][1]["writes"] == 300 and j["modes"][1]["bytes"] == 6000 and "backpressure" in j["modes"][1]' "300 Write Commands of 20 bytes taken in (timed until the peer answered a later request)"
vm_ok bench-23 120 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --mtu 23 --count 200 --json
vm_json "$OUT/bench-23.log" \
  'j["mtu"] == 23 and j["size"] == 20 and j["modes"][0]["confirmed"] == 200 and j["modes"][1]["writes"] == 200' "at MTU 23 the default size is the 20-byte budget; 200 of each mode"
vm_ok figures 20 python3 -I -S -c '
import json, sys
for name in sys.argv[1:]:
    text = open(name).read()
    j = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
    for m in j["modes"]:
        extra = f'"'"'p50 {m["latencyMicroseconds"]["p50"] / 1000:.1f} ms'"'"' if "latencyMicroseconds" in m else f'"'"'backpressure {m["backpressure"]["waits"]} waits, {m["backpressure"]["seconds"]:.3f} s'"'"'
        print(f'"'"'MTU {j["mtu"]} {m["mode"]}: {m["writesPerSecond"]} writes/s, {m["bytesPerSecond"]} B/s, {extra}'"'"')
' "$OUT/bench-517.log" "$OUT/bench-23.log"
sed 's/^/    | /' "$OUT/figures.log"
