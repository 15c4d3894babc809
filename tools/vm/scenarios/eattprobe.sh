# vm-about: probe: ECRED (Enhanced ATT bearers on PSM 0x0027) in the guest kernel: enable_ecred, bearer-e2e's ECRED listener on hci1 and channels from hci0 beside CID 4 (MTUs, CIDs, how many), no listener, enable_ecred off; bluetoothd with [GATT] Channels = 3
# vm-timeout: 300
# vm-manual: yes
# Findings are logged as "finding: ..." lines (tools/vm/README.md keeps them). It fails only when the rig does.
vm_need bearer-e2e
peer=00:AA:01:01:00:01
param=/sys/module/bluetooth/parameters/enable_ecred

# 1. The module parameter: present, its mode and value, writable by root.
if [ -e $param ]; then
  vm_log "finding: $param present, mode $(stat -c %a $param), value $(cat $param)"
  v=$(cat $param)
  if echo "$v" > $param 2>"$OUT/param-write.log"; then vm_log "finding: $param writable by root (wrote $v back)"
  else vm_log "finding: $param not writable: $(cat "$OUT/param-write.log")"; fi
else
  vm_log "finding: $param absent (modules: $(ls /sys/module/bluetooth/parameters 2>/dev/null | tr '\n' ' '))"
fi

vm_controllers

# 2. An ECRED listener on PSM 0x27 on hci1 (beside its CID 4 listener), 5 channels asked from hci0 while CID 4 is up.
vm_bg listen1 "$BIN/bearer-e2e" listen --adapter hci1 --advertise vm-eatt --accept-timeout 60 --eatt 5 --eatt-mtu 300
vm_wait_log listen1 '"event":"advertising"' 20
vm_run connect1 60 "$BIN/bearer-e2e" connect $peer --adapter hci0 --timeout 20 --count 3 --size 20 --eatt 5 --eatt-mtu 200
vm_log "finding: connect --eatt 5 (MTU 200) to a listener with MTU 300: $(tail -n 1 "$OUT/connect1.log")"
vm_join listen1 20
vm_log "finding: listener side: $(grep -E '"event":"eatt' "$OUT/listen1.log" | tr '\n' ' ')"
vm_json "$OUT/connect1.log" 'j["ok"] is True and len(j.get("eatt", [])) == 5' "the CID 4 exchange worked and 5 ECRED channels were asked for" \
  'any("cid" in e for e in j["eatt"])' "at least one ECRED channel opened"
vm_run btmon-ecred 20 sh -c "btmon -r '$OUT/hci.btsnoop' 2>&1 | grep -i -E -A8 'credit.*(request|response)' | head -n 200"
vm_log "finding: btmon's ECRED signalling (probe 2): $(grep -i -E 'credit|result|mtu|mps|cid' "$OUT/btmon-ecred.log" | head -n 40 | tr -s ' ' | tr '\n' ';')"

# 3. No ECRED listener on hci1: what an ECRED connect from hci0 gets (the peer's L2CAP result, as errno).
vm_no_le_link
vm_bg listen2 "$BIN/bearer-e2e" listen --adapter hci1 --advertise vm-eatt --accept-timeout 60
vm_wait_log listen2 '"event":"advertising"' 20
vm_run connect2 60 "$BIN/bearer-e2e" connect $peer --adapter hci0 --timeout 20 --count 1 --size 20 --eatt 1
vm_log "finding: ECRED connect with no listener on PSM 0x27: $(tail -n 1 "$OUT/connect2.log")"
vm_join listen2 20

# 4. enable_ecred off: the listener and the connect.
if [ -w $param ]; then
  vm_no_le_link
  echo N > $param
  vm_bg listen3 "$BIN/bearer-e2e" listen --adapter hci1 --advertise vm-eatt --accept-timeout 60 --eatt 1
  vm_wait_log listen3 '"event":"advertising"' 20
  vm_run connect3 60 "$BIN/bearer-e2e" connect $peer --adapter hci0 --timeout 20 --count 1 --size 20 --eatt 1
  vm_log "finding: enable_ecred N, listener: $(grep -E '"event":"eatt' "$OUT/listen3.log" | tr '\n' ' ')"
  vm_log "finding: enable_ecred N, connect: $(tail -n 1 "$OUT/connect3.log")"
  vm_join listen3 20
  echo Y > $param
fi

# 5. bluetoothd with [GATT] Channels = 3 on hci1: does it accept ECRED on 0x27, and answer ATT there?
vm_gatt_peer_conf '[GATT]' 'Channels = 3'
vm_run connect4 60 "$BIN/bearer-e2e" connect $peer --adapter hci0 --timeout 20 --count 0 --eatt 3 --eatt-pdu '0a 03 00' --echo-timeout 5
vm_log "finding: bluetoothd Channels = 3, connect --eatt 3 with a Read Request of 0x0003 on each: $(tail -n 1 "$OUT/connect4.log")"
# Pairing (Just Works) needs an agent on bluetoothd's side: bluetoothctl's NoInputNoOutput one, kept open.
vm_bg agent sh -c '(echo "agent NoInputNoOutput"; echo "default-agent"; sleep 120) | bluetoothctl'
sleep 2
vm_no_le_link
vm_run connect5 60 "$BIN/bearer-e2e" connect $peer --adapter hci0 --timeout 20 --count 0 --eatt 3 --eatt-pdu '0a 03 00' --echo-timeout 5 --security medium
vm_log "finding: bluetoothd Channels = 3 over an encrypted link (--security medium): $(tail -n 1 "$OUT/connect5.log")"
vm_run btmon-eatt 20 sh -c "btmon -r '$OUT/hci.btsnoop' 2>&1 | grep -i -E -A8 'credit.*(request|response)' | head -n 200"
vm_log "finding: btmon's ECRED signalling with bluetoothd: $(grep -i -E 'credit|result|mtu|mps|cid' "$OUT/btmon-eatt.log" | head -n 60 | tr -s ' ' | tr '\n' ';')"
true
