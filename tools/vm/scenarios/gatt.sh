# vm-about: bluetoothd's own GATT server on hci1: mirror gatt/read/write from hci0 agree with gatttool, a refused write shows the exact ATT error, the peer's own requests are answered and the link outlives 30 s
# vm-timeout: 300
vm_need mirror
vm_gatt_peer
peer=00:AA:01:01:00:01

# 1. The database, by gatttool and by mirror.
vm_ok gatttool-primary 40 gatttool -i hci0 -b $peer -t public --primary
vm_ok gatttool-chars 40 gatttool -i hci0 -b $peer -t public --characteristics
vm_ok gatttool-desc 40 gatttool -i hci0 -b $peer -t public --char-desc
vm_ok gatttool-read 40 gatttool -i hci0 -b $peer -t public --char-read -a 0x0003
vm_ok mirror-gatt 60 "$BIN/mirror" gatt $peer --adapter hci0 --json --read
vm_ok compare 30 python3 -I -S "$REPO/tools/vm/gatt_compare.py" "$OUT/mirror-gatt.log" \
  "$OUT/gatttool-primary.log" "$OUT/gatttool-chars.log" "$OUT/gatttool-desc.log"
sed 's/^/    | /' "$OUT/compare.log"
gap_name=$(sed -n 's/.*value\/descriptor: //p' "$OUT/gatttool-read.log" | tr -d ' \n')
vm_json "$OUT/mirror-gatt.log" \
  'j["mtu"] >= 23 and [s["uuid"] for s in j["services"]][:2] == ["1800", "1801"]' "mirror gatt found GAP and GATT first" \
  "[c.get('value') for s in j['services'] for c in s['characteristics'] if c['uuid'] == '2a00'] == ['$gap_name']" "its Device Name value equals gatttool's ($gap_name)"

# 2. A read, and a write the real server refuses, with its exact ATT error.
vm_ok mirror-read 40 "$BIN/mirror" read $peer 0x0003 --adapter hci0 --json
vm_json "$OUT/mirror-read.log" 'j["handle"] == 3 and j["text"].startswith("BlueZ ")' "mirror read 0x0003: Device Name \"BlueZ …\""
vm_run mirror-write 40 "$BIN/mirror" write $peer 0x0003 41 --adapter hci0 --json
[ "$VM_RC" = 3 ] || vm_fail "mirror write to Device Name exited $VM_RC (expected 3, an ATT Error Response)"
vm_json "$OUT/mirror-write.log" \
  'j["error"]["kind"] == "att" and j["error"]["code"] == 3 and j["error"]["name"] == "Write Not Permitted" and j["error"]["request"] == "Write Request" and j["error"]["handle"] == 3 and j["error"]["rejectedBy"] == "peer"' \
  "bluetoothd refuses: 0x03 Write Not Permitted, Write Request, handle 0x0003, from the peer"

# 3. The peer is a GATT client too: bluetoothd sends Exchange MTU and discovery requests to hci0. Answered,
#    the link stays up; unanswered, bluetoothd drops it 30 s later. mirror listen holds one connection 40 s.
#    A fresh link: on one left by an earlier command (within the kernel's 2 s disconnect delay), bluetoothd sent its
#    requests to that command (gatttool answers two and may exit before the third) and drops the link 30 s later.
vm_no_le_link
vm_bg listen "$BIN/mirror" listen $peer --adapter hci0 --json
vm_alive listen 40 "mirror listen's connection outlives bluetoothd's 30 s ATT timeout"
vm_stop listen 10
vm_no_grep "$OUT/listen.log" '"error"|disconnect|timed out' "mirror listen saw no error and no disconnect"
vm_ok att-answers 30 python3 -I -S "$REPO/tools/vm/btsnoop_att.py" "$OUT/hci.btsnoop" --adapter 0 --answered
sed 's/^/    | /' "$OUT/att-answers.log"
