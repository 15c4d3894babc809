# vm-about: the LE link: mirror link as root (a real handle, interval, latency, timeout) and as nobody (the unprivileged values, the capability named for the rest); --interval 7.5 granted; --phy and --data-length refused by btvirt's LE-only controller with the HCI status named and the link still usable; a bench with its link, ceiling and series; HCI events and ATT in one btsnoop (tshark)
# vm-timeout: 300
vm_need mirror mirror-sim
vm_controllers
vm_sim sim
peer=00:AA:01:01:00:01
n=0
next() { n=$((n + 1)); vm_wait_log sim "connection $n closed" 20; }

# 1. As root: every value with its source; the interval, latency and timeout from LE Connection Complete.
vm_ok link-root 60 "$BIN/mirror" link $peer --adapter hci0 --json
next
vm_json "$OUT/link-root.log" \
  'isinstance(j["link"]["handle"]["value"], int) and j["link"]["handle"]["source"] in ("socket option L2CAP_CONNINFO", "HCI event LE Connection Complete")' "a real HCI handle, with its source" \
  'j["link"]["role"]["value"] == "central"' "role central" \
  'j["link"]["txPHY"]["value"] == "1M" and "LE Read PHY" in j["link"]["txPHY"]["source"]' "TX PHY 1M: the LE-only controller knows no LE Read PHY (Core 5.0), so it has only LE 1M" \
  'j["link"]["intervalMs"]["value"] > 0 and "LE Connection Complete" in j["link"]["intervalMs"]["source"]' "the interval from LE Connection Complete" \
  '"value" in j["link"]["peripheralLatency"] and j["link"]["supervisionTimeoutMs"]["value"] >= 100' "latency and supervision timeout known" \
  'j["link"]["attMTU"]["value"] == 517 and j["link"]["securityLevel"]["value"] == "low"' "ATT MTU 517, security low" \
  'j["link"]["adapterLEBuffers"]["value"]["size"] > 0' "the adapter's LE ACL buffers"
vm_ok link-root-text 60 "$BIN/mirror" link $peer --adapter hci0
next
vm_grep "$OUT/link-root-text.log" "^  handle +0x[0-9A-F]{4} +\((socket option L2CAP_CONNINFO|HCI event LE Connection Complete)\)" "text: the handle with its source"
vm_grep "$OUT/link-root-text.log" "^  interval +[0-9.]+ ms +\(HCI event LE Connection Complete\)" "text: the interval with its source"

# 2. Asking: --interval 7.5 granted as 7.5 ms (LE Connection Update Complete); --phy 2m and --data-length 251
#    refused by the LE-only controller (0x01 Unknown HCI Command); the link stays usable (the MTU exchange and a read).
vm_ok link-ask 90 "$BIN/mirror" link $peer --adapter hci0 --interval 7.5 --phy 2m --data-length 251 --json
next
vm_json "$OUT/link-ask.log" \
  'j["link"]["requests"][0]["asked"] == "--interval 7.5" and j["link"]["requests"][0]["result"] == "granted" and j["link"]["requests"][0]["granted"]["intervalMs"] == 7.5' "--interval 7.5 granted as 7.5 ms" \
  'j["link"]["intervalMs"]["value"] == 7.5 and "LE Connection Update Complete" in j["link"]["intervalMs"]["source"]' "the link now reads 7.5 ms, from LE Connection Update Complete" \
  'j["link"]["requests"][1]["asked"] == "--phy 2m" and j["link"]["requests"][1]["result"] == "refused" and j["link"]["requests"][1]["statusName"] == "0x01 Unknown HCI Command"' "--phy 2m refused with 0x01 Unknown HCI Command (LE-only btvirt)" \
  'j["link"]["requests"][2]["asked"] == "--data-length 251" and j["link"]["requests"][2]["result"] == "refused" and j["link"]["requests"][2]["refusedBy"] == "controller" and j["link"]["requests"][2]["status"] == 1' "--data-length 251 refused by the controller, its status named"
vm_ok link-ask-read 60 "$BIN/mirror" read $peer 0x0003 --adapter hci0 --data-length 251 --interval 15
next
vm_grep "$OUT/link-ask-read.log" "^link: --data-length 251: refused by the controller: 0x01 Unknown HCI Command .*the link is as it was" "another command: the refusal on stderr, the command goes on"
vm_grep "$OUT/link-ask-read.log" "^link: --interval 15: granted: interval 15 ms" "and --interval 15 granted"
vm_grep "$OUT/link-ask-read.log" "mirror-sim" "the read after the refusals worked"

# 3. The bench carries its link, the ceiling (btvirt has no radio timing: not radio-limited) and the series.
vm_big_buffers
vm_ok bench 120 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --count 300 --rounds 1 --warmup 20 --interval 7.5 --json
next
vm_json "$OUT/bench.log" \
  'j["link"]["intervalMs"]["value"] == 7.5 and j["link"]["requests"][0]["result"] == "granted"' "bench --json: the link object, asked 7.5 ms and granted" \
  'all(m["ceiling"]["bytesPerSecond"] > 0 for m in j["modes"])' "a ceiling per mode, from the link (1M, 27 octets, 7.5 ms)" \
  'all(sum(m["series"]["writes"]) == m["writes"] for m in j["modes"])' "the series adds up to the measured writes"
vm_ok bench-text 120 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --count 200 --rounds 1 --warmup 20
next
vm_grep "$OUT/bench-text.log" "^link: handle 0x[0-9A-F]{4}, 1M" "bench text: the link it ran on"
vm_grep "$OUT/bench-text.log" "ceiling" "bench text: the ceiling lines"

# 4. The link in the trace and the btsnoop: HCI events beside the ATT PDUs of the same handle.
vm_ok snoop 60 "$BIN/mirror" read $peer 0x0003 --adapter hci0 --interval 10 --btsnoop "$OUT/link.btsnoop" --trace
next
vm_grep "$OUT/snoop.log" "HCI < LE (Enhanced )?Connection Complete" "--trace: the LE Connection Complete of this link"
vm_grep "$OUT/snoop.log" "HCI > LE Connection Update \[" "--trace: the LE Connection Update sent"
vm_grep "$OUT/snoop.log" "HCI < LE Connection Update Complete .*interval 10 ms" "--trace: its completion, decoded"
vm_ok tshark 60 tshark -r "$OUT/link.btsnoop" -Y "bthci_evt || btatt" -T fields -E separator=';' \
  -e bthci_evt.code -e bthci_evt.le_meta_subevent -e bthci_evt.connection_handle -e bthci_acl.chandle -e btatt.opcode
vm_ok tshark-check 20 python3 -I -S -c '
import sys
rows = [l.rstrip("\n").split(";") for l in open(sys.argv[1]) if l.count(";") == 4]
opened = [r[2] for r in rows if r[0] == "0x3e" and r[1] in ("0x01", "0x0a", "0x29") and r[2]]
updates = [r for r in rows if r[0] == "0x3e" and r[1] == "0x03"]
att = [r[3] for r in rows if r[4]]
assert opened, "no LE Connection Complete decoded"
assert updates, "no LE Connection Update Complete decoded"
assert att and all(int(h, 16) == int(opened[0], 16) for h in att), (opened, set(att))
print("LE Connection Complete handle", opened[0], "; ATT PDUs", len(att), "on that handle; updates", len(updates))
' "$OUT/tshark.log"
vm_grep "$OUT/tshark-check.log" "ATT PDUs [0-9]+ on that handle" "tshark: the link's HCI events and its ATT PDUs on the same handle"
# btmon (BlueZ 5.66) reads the same capture: the link's LE Connection Complete, then its ATT decoded.
vm_ok btmon-read 60 btmon -r "$OUT/link.btsnoop"
vm_grep "$OUT/btmon-read.log" "LE (Enhanced )?Connection Complete" "btmon -r: the link's LE Connection Complete"
vm_grep "$OUT/btmon-read.log" "ATT: Read Request" "btmon -r: the ATT Read Request decoded"

# 5. As nobody: the unprivileged values, and the capability named (with the setcap line) for the rest.
mkdir -p /tmp/link && cp "$BIN/mirror" /tmp/link/mirror && chmod 0755 /tmp/link /tmp/link/mirror
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
vm_ok link-nobody 60 "${nobody[@]}" /tmp/link/mirror link $peer --adapter hci0 --json --interval 7.5
next
vm_json "$OUT/link-nobody.log" \
  'isinstance(j["link"]["handle"]["value"], int) and j["link"]["securityLevel"]["value"] == "low"' "nobody: the handle and the security level" \
  'j["link"]["role"]["value"] == "central"' "nobody: the role (HCIGETCONNINFO needs no capability)" \
  '"CAP_NET_RAW" in j["link"]["intervalMs"]["unknown"] and "setcap" in j["link"]["intervalMs"]["unknown"]' "nobody: the interval unknown, naming CAP_NET_RAW and the setcap line" \
  'j["link"]["requests"][0]["result"] == "notAsked" and "CAP_NET_RAW" in j["link"]["requests"][0]["detail"]' "nobody: --interval not asked, naming the capability"

# 6. A dropped link names its HCI reason: the simulator is killed mid-listen (its controller ends the link).
vm_bg listen "$BIN/mirror" listen $peer --adapter hci0
vm_wait_log listen "^subscribed to " 30
vm_stop sim 5 KILL
vm_join listen 40
vm_grep "$OUT/listen.log" "^mirror: .*\(the (peer disconnected|link was lost|link ended): 0x[0-9A-F]{2} [A-Z]" "the lost link's error names its HCI reason (Disconnection Complete)"
