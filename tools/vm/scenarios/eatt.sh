# vm-about: Enhanced ATT bearers (ECRED on PSM 0x0027) over the real stack: mirror --bearers 3 against mirror-sim --eatt yes (bearers listed with their CIDs and MTUs, the simulator serving each), bench --bearers 1 and 3 on one link with every write counted at the peer, bluetoothd with [GATT] Channels = 3, and peers without EATT (no Server Supported Features; ECRED refused) where the command goes on over CID 4 and says why
# vm-timeout: 300
vm_need mirror mirror-sim
vm_big_buffers
vm_controllers
peer=00:AA:01:01:00:01

# 1. mirror-sim --eatt yes on hci1 (Server Supported Features with the EATT bit, an ECRED listener on PSM 0x0027):
#    mtu --bearers 3 opens CID 4 and 2 ECRED channels, whose CIDs the kernel numbers from 0x0040.
vm_sim sim1 --eatt yes
vm_grep "$OUT/sim1.log" "listening on LE PSM 0x0027 \(ECRED\) on hci1" "mirror-sim listens for ECRED channels on PSM 0x0027"
vm_ok mtu3 40 "$BIN/mirror" mtu $peer --adapter hci0 --bearers 3 --json
vm_json "$OUT/mtu3.log" \
  'j["bearers"]["asked"] == 3 and j["bearers"]["open"] == 3 and j["bearers"]["notes"] == []' "3 bearers asked, 3 open, no note" \
  '[(b["enhanced"], b["cid"], b["open"]) for b in j["bearers"]["list"]] == [(False, 4, True), (True, 0x40, True), (True, 0x41, True)]' "CID 4 and ECRED CIDs 0x0040, 0x0041" \
  'all(b["mtu"] == 517 for b in j["bearers"]["list"])' "each bearer's ATT_MTU 517 (the ECRED channels' from their MTUs, no Exchange MTU on them)"
vm_wait_log sim1 "connection 1 closed" 20
vm_count "$OUT/sim1.log" "opened: .*Enhanced ATT bearer of connection 1, MTU 517" 2 "the simulator served 2 Enhanced ATT bearers of connection 1"
vm_grep "$OUT/sim1.log" "Client Supported Features = 0?2.*Enhanced ATT bearers" "mirror wrote Client Supported Features with the EATT bit"

# 2. bench --bearers 1, then --bearers 3 (one writer per bearer at once; after each such round a round of one writer
#    on the same link): Write Requests to cloudToken, each bearer carrying some, every write counted at the peer
#    (bench_table.py: mirror-sim's per-connection counts, a bearer's for its client). Connections: mtu3 1 (bearers 2
#    and 3), bench1 4, bench3 5 (bearers 6 and 7).
bench_args="--adapter hci0 --handle cloudToken --size 20 --mode with-response --count 100 --warmup 20 --json"
vm_ok bench1 150 "$BIN/mirror" bench $peer $bench_args --bearers 1
vm_json "$OUT/bench1.log" 'j["modes"][0]["confirmed"] == j["modes"][0]["writes"] == 100 * j["rounds"] and "bearers" not in j["modes"][0]' "--bearers 1: every Write Request confirmed, on CID 4 alone"
vm_wait_log sim1 "connection 4 closed" 20
vm_ok bench3 240 "$BIN/mirror" bench $peer $bench_args --bearers 3
vm_json "$OUT/bench3.log" \
  'j["modes"][0]["bearers"]["writers"] == 3 and len(j["modes"][0]["bearers"]["perBearer"]) == 3' "--bearers 3: 3 writers at once on 3 bearers" \
  'all(b["writes"] > 0 for b in j["modes"][0]["bearers"]["perBearer"])' "the Write Requests spread over every bearer (CID 4 and both ECRED channels)" \
  'sum(b["writes"] for b in j["modes"][0]["bearers"]["perBearer"]) == j["modes"][0]["bearers"]["total"] == j["modes"][0]["writes"] == j["modes"][0]["confirmed"]' "the per-bearer counts add up to the total, each confirmed" \
  'j["modes"][0]["bearers"]["oneBearer"]["writesPerSecond"] > 0 and j["modes"][0]["bearers"]["ratioToOneBearer"] > 0' "a one-bearer round in the same run, and the ratio to it"
# The client's connection and its bearers close in any order: the counts need all three lines.
vm_wait_log sim1 "connection 5 closed" 20
vm_wait_log sim1 "connection 6 closed" 20
vm_wait_log sim1 "connection 7 closed" 20
vm_ok counts 30 python3 -I -S "$REPO/tools/vm/bench_table.py" "$OUT/sim1.log" "$OUT/bench1.log:4" "$OUT/bench3.log:5"
grep '^ok ' "$OUT/counts.log" | while IFS= read -r line; do vm_log "ok: ${line#ok }"; done
figures=$(python3 -I -S -c '
import runpy, sys
load = runpy.run_path(sys.argv[1])["load"]
one, three = load(sys.argv[2])["modes"][0], load(sys.argv[3])["modes"][0]
b = three["bearers"]
print("--bearers 1: %d writes/s; --bearers 3: %d writes/s (bearers %s), one bearer in the same run %d writes/s, ratio %.2f"
      % (one["writesPerSecond"], three["writesPerSecond"], " / ".join(str(x["writes"]) for x in b["perBearer"]),
         b["oneBearer"]["writesPerSecond"], b["ratioToOneBearer"]))' "$REPO/tools/vm/bench_table.py" "$OUT/bench1.log" "$OUT/bench3.log")
vm_log "bench: $figures"
# Reads in parallel: gatt --read with 3 bearers reads the values as many at once as bearers are open (connection 8,
# bearers 9 and 10); the trace names each enhanced bearer's Read Requests.
vm_ok gatt3 60 "$BIN/mirror" gatt $peer --adapter hci0 --read --bearers 3 --trace
vm_grep "$OUT/gatt3.log" "> Read Request" "gatt --read: Read Requests on CID 4"
vm_grep "$OUT/gatt3.log" "> \[b1 cid 0x0040\] Read Request" "gatt --read: Read Requests on ECRED bearer 1 (CID 0x0040)"
vm_grep "$OUT/gatt3.log" "> \[b2 cid 0x0041\] Read Request" "gatt --read: Read Requests on ECRED bearer 2 (CID 0x0041)"
vm_wait_log sim1 "connection 8 closed" 20
vm_stop sim1 5 TERM

# 3. A peer without EATT (mirror-sim without --eatt: no Server Supported Features): the command goes on over CID 4
#    and says why.
vm_sim sim2
vm_ok noeatt 40 "$BIN/mirror" mtu $peer --adapter hci0 --bearers 3 --json
vm_json "$OUT/noeatt.log" 'j["mtu"] == 517 and j["bearers"]["open"] == 1 and len(j["bearers"]["notes"]) == 1' "no EATT: 1 bearer open (CID 4), one note"
vm_grep "$OUT/noeatt.log" "^mirror: --bearers 3: bearers 1-2: the server has no Server Supported Features \(0x2B3A\).*going on over CID 4 alone" "it says why on stderr and goes on over CID 4"
vm_stop sim2 5 TERM

# 4. A peer whose Server Supported Features has the EATT bit but whose ECRED channels are refused (mirror-sim
#    --eatt-refuse: no listener on PSM 0x0027; the kernel answers SPSM not supported, user space sees ECONNREFUSED).
vm_sim sim3 --eatt yes --eatt-refuse 0x0002
vm_ok refused 40 "$BIN/mirror" mtu $peer --adapter hci0 --bearers 2 --json
vm_json "$OUT/refused.log" 'j["bearers"]["open"] == 1 and len(j["bearers"]["notes"]) == 1' "ECRED refused: 1 bearer open, one note"
vm_grep "$OUT/refused.log" "^mirror: --bearers 2: bearer 1: .*ECONNREFUSED.*refused the ECRED channel on PSM 0x0027" "the note names the refusal (ECONNREFUSED) and what it means"
vm_stop sim3 5 TERM

# 5. bluetoothd with [GATT] Channels = 3 on hci1 (and BlueZ's example-gatt-server): its Server Supported Features,
#    2 ECRED channels beside CID 4 (its Channels count CID 4), and Write Requests on all three at once.
vm_gatt_peer_conf --example '[GATT]' 'Channels = 3'
vm_ok bluez3 40 "$BIN/mirror" mtu $peer --adapter hci0 --bearers 3 --json
vm_json "$OUT/bluez3.log" \
  'j["bearers"]["open"] == 3 and [b["enhanced"] for b in j["bearers"]["list"]] == [False, True, True]' "bluetoothd: CID 4 and 2 ECRED channels open" \
  'all(b["mtu"] >= 64 for b in j["bearers"]["list"][1:])' "each ECRED bearer has its channel's MTU"
vm_no_le_link
vm_ok bluez-read 40 "$BIN/mirror" read $peer 0x0003 --adapter hci0 --bearers 3 --json
vm_json "$OUT/bluez-read.log" 'j["text"].startswith("BlueZ ")' "a read with 3 bearers open: Device Name \"BlueZ …\""
# The example's test characteristic takes any value (over D-Bus, so a few writes a second): a short bench.
vm_no_le_link
vm_ok bluez-bench 120 "$BIN/mirror" bench $peer --adapter hci0 --handle 12345678-1234-5678-1234-56789abcdef1 --size 20 \
  --mode with-response --count 15 --rounds 1 --warmup 3 --bare-loop none --bearers 3 --json --btsnoop "$OUT/bluez-bench.btsnoop"
vm_json "$OUT/bluez-bench.log" \
  'j["modes"][0]["bearers"]["writers"] == 3 and all(b["writes"] > 0 for b in j["modes"][0]["bearers"]["perBearer"])' "bluetoothd: Write Requests on all 3 bearers at once, each bearer carrying some" \
  'j["modes"][0]["confirmed"] == j["modes"][0]["writes"] == j["modes"][0]["bearers"]["total"]' "every one confirmed by bluetoothd's Write Response"
vm_log "bluetoothd bench: $(python3 -I -S -c '
import runpy, sys
m = runpy.run_path(sys.argv[1])["load"](sys.argv[2])["modes"][0]; b = m["bearers"]
print("--bearers 3: %d writes/s (bearers %s), one bearer %d writes/s, ratio %.2f" % (m["writesPerSecond"],
      " / ".join(str(x["writes"]) for x in b["perBearer"]), b["oneBearer"]["writesPerSecond"], b["ratioToOneBearer"]))' "$REPO/tools/vm/bench_table.py" "$OUT/bluez-bench.log")"
# mirror's btsnoop names each PDU's bearer by its CID in the L2CAP header: tshark decodes ATT on CID 4 and on both
# ECRED channels (-d: Debian 12's Wireshark does not know the EATT PSM).
vm_ok bluez-tshark 60 sh -c "tshark -r '$OUT/bluez-bench.btsnoop' -d btl2cap.psm==0x0027,btatt -Y 'btatt.opcode == 0x12' -T fields -e btl2cap.cid 2>/dev/null | sort | uniq -c"
vm_log "Write Requests per CID in mirror's btsnoop (tshark): $(tr -s ' ' < "$OUT/bluez-tshark.log" | tr '\n' ';')"
for cid in 0x0004 0x0040 0x0041; do
  vm_grep "$OUT/bluez-tshark.log" "[0-9]+ $cid\$" "tshark decodes Write Requests as ATT on CID $cid"
done
# btmon (BlueZ 5.66) reads it too, without a crash, and decodes ATT on CID 4.
vm_ok bluez-btmon 60 btmon -r "$OUT/bluez-bench.btsnoop"
vm_grep "$OUT/bluez-btmon.log" "ATT: Write Request" "btmon -r decodes mirror's Write Requests"
# gatt --read with 3 bearers: the values are read 3 at a time, one per bearer. The example's encrypted characteristics
# answer Insufficient Encryption: gatt --read reads every value, so it keeps the refusal and starts no pairing (only
# bluetoothd's agent, absent here, could answer one; it used to end at its --timeout, exit 5).
vm_no_le_link
vm_run bluez-gatt3 60 "$BIN/mirror" gatt $peer --adapter hci0 --read --bearers 3 --trace --timeout 5 || true
vm_log "bluetoothd: gatt --read --bearers 3 exited $VM_RC: $(tail -n 1 "$OUT/bluez-gatt3.log")"
[ "$VM_RC" = 0 ] || vm_fail "gatt --read against bluetoothd's encrypted values exited $VM_RC (expected 0: each refusal kept)"
vm_grep "$OUT/bluez-gatt3.log" "Insufficient Encryption" "bluetoothd: the encrypted values' refusals kept"
vm_grep "$OUT/bluez-gatt3.log" "> \[b1 cid 0x00[0-9A-Fa-f]{2}\] Read Request" "bluetoothd: gatt --read sends Read Requests on ECRED bearer 1"
vm_grep "$OUT/bluez-gatt3.log" "> \[b2 cid 0x00[0-9A-Fa-f]{2}\] Read Request" "bluetoothd: and on ECRED bearer 2"
