# vm-about: mirror bench over a real LE link to mirror-sim on hci1 at MTU 517 and 23: Write Requests all confirmed, Write Commands all taken in, ratios to a bare socket loop on the same connection, the same workload through gatttool side by side, every write counted at the peer
# vm-timeout: 300
vm_need mirror mirror-sim
vm_big_buffers
vm_controllers
vm_sim sim
peer=00:AA:01:01:00:01
# The rates are logged, not compared: under TCG on a loaded machine they swing several-fold.
# cloudToken's value handle (0x0012) takes values up to the bundled profile's 64-byte limit.
# --count is per round; "writes" adds up the rounds (--rounds, default 3); 20 warm-up writes per mode (default
# 100). An LE link takes one ATT socket (a second CID 4 connect to the same peer is EBUSY), so the bare socket
# loop runs on the same connection's socket, lent by mirror's bearer for each of its rounds, alternating with
# mirror's, with the same handle, size and counts ("bareLoop": "same-connection").
# mirror-sim logs, as each connection closes, the Write Requests and Write Commands it received on it:
# bench_table.py checks them against what each tool sent (connections 1 and 2: mirror bench at MTU 517 and 23;
# 3 and 4: gatttool at MTU 517 and 23).
bench_ok='j["bareLoop"] == "same-connection" and all(m["ratioToBare"] > 0 and m["bare"]["writesPerSecond"] > 0 and m["bare"]["writes"] == m["writes"] for m in j["modes"])'
bench_confirmed='j["modes"][0]["bare"]["confirmed"] == j["modes"][0]["bare"]["writes"]'
vm_ok bench-517 120 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --count 100 --warmup 20 --json
vm_json "$OUT/bench-517.log" \
  'j["mtu"] == 517 and j["size"] == 20 and [m["mode"] for m in j["modes"]] == ["with-response", "without-response"]' "MTU 517 agreed, both modes ran" \
  'j["modes"][0]["writes"] == 100 * j.get("rounds", 1) and j["modes"][0]["confirmed"] == j["modes"][0]["writes"] and j["modes"][0]["latencyMicroseconds"]["p50"] > 0' "100 Write Requests per round, each confirmed by a Write Response" \
  'j["modes"][1]["writes"] == 100 * j.get("rounds", 1) and j["modes"][1]["bytes"] == 20 * j["modes"][1]["writes"] and "backpressure" in j["modes"][1]' "100 Write Commands of 20 bytes per round taken in (timed until the peer answered a later request)" \
  "$bench_ok" "both modes: a bare loop of the same count on the same connection, ratio mirror/bare present and positive" \
  "$bench_confirmed" "every bare-loop Write Request confirmed by a Write Response"
vm_wait_log sim "connection 1 closed" 20
vm_ok bench-23 120 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --mtu 23 --count 100 --warmup 20 --json
vm_json "$OUT/bench-23.log" \
  'j["mtu"] == 23 and j["size"] == 20 and j["modes"][0]["confirmed"] == 100 * j.get("rounds", 1) and j["modes"][1]["writes"] == 100 * j.get("rounds", 1)' "at MTU 23 the default size is the 20-byte budget; 100 of each mode per round" \
  "$bench_ok" "MTU 23: a bare loop of the same count in both modes, ratio present and positive" \
  "$bench_confirmed" "MTU 23: every bare-loop Write Request confirmed"
vm_wait_log sim "connection 2 closed" 20
# The same workloads as bench-517 and bench-23 (20-byte values to 0x0012, 20 warm-up writes, then 3 rounds of 100
# per mode) through gatttool -I (tools/vm/gatttool_bench.py drives it over a pty), at MTU 517 and at MTU 23.
vm_ok gatttool-517 150 python3 -I -S "$REPO/tools/vm/gatttool_bench.py" --adapter hci0 --peer $peer --handle 0x0012 \
  --size 20 --count 100 --rounds 3 --warmup 20 --mtu 517
vm_json "$OUT/gatttool-517.log" \
  'j["mtu"] == 517 and [m["writes"] for m in j["modes"]] == [300, 300] and j["sent"]["writeRequests"] == 320 and j["sent"]["writeCommands"] == 320' "gatttool: MTU 517, 300 writes per mode measured (320 sent with the warm-up)"
vm_wait_log sim "connection 3 closed" 20
vm_ok gatttool-23 150 python3 -I -S "$REPO/tools/vm/gatttool_bench.py" --adapter hci0 --peer $peer --handle 0x0012 \
  --size 20 --count 100 --rounds 3 --warmup 20 --mtu 23
vm_json "$OUT/gatttool-23.log" \
  'j["mtu"] == 23 and [m["writes"] for m in j["modes"]] == [300, 300] and j["sent"]["writeRequests"] == 320 and j["sent"]["writeCommands"] == 320' "gatttool: MTU 23, 300 writes per mode measured (320 sent with the warm-up)"
vm_wait_log sim "connection 4 closed" 20
vm_ok table 30 python3 -I -S "$REPO/tools/vm/bench_table.py" "$OUT/sim.log" "$OUT/bench-517.log:1" "$OUT/bench-23.log:2" \
  --gatttool "$OUT/gatttool-517.log:3" --gatttool "$OUT/gatttool-23.log:4"
grep '^ok ' "$OUT/table.log" | while IFS= read -r line; do vm_log "ok: ${line#ok }"; done
grep -v '^ok ' "$OUT/table.log" | sed 's/^/    | /'
