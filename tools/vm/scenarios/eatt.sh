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

# 5. bluetoothd with [GATT] Channels = 3 on hci1: its Server Supported Features, and 2 ECRED channels beside CID 4.
vm_gatt_peer_conf '[GATT]' 'Channels = 3'
vm_ok bluez3 40 "$BIN/mirror" mtu $peer --adapter hci0 --bearers 3 --json
vm_json "$OUT/bluez3.log" \
  'j["bearers"]["open"] == 3 and [b["enhanced"] for b in j["bearers"]["list"]] == [False, True, True]' "bluetoothd: CID 4 and 2 ECRED channels open" \
  'all(b["mtu"] >= 64 for b in j["bearers"]["list"][1:])' "each ECRED bearer has its channel's MTU"
vm_no_le_link
vm_ok bluez-read 40 "$BIN/mirror" read $peer 0x0003 --adapter hci0 --bearers 3 --json
vm_json "$OUT/bluez-read.log" 'j["text"].startswith("BlueZ ")' "a read with 3 bearers open: Device Name \"BlueZ …\""
