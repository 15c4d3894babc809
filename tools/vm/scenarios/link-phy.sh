# vm-about: asking for a PHY: dual-mode btvirt controllers with upstream's LE Set PHY (tools/vm/btvirt-setphy.sh), mirror link --phy 2m granted as 2M (LE PHY Update Complete), --data-length 251 refused with 0x01 named and the link still usable, a bench on the 2M link with its ceiling
# vm-timeout: 240
# Debian's btvirt (BlueZ 5.66) knows no LE Set PHY in any mode; run.sh builds the one with upstream's commit.
[ -n "${VM_BTVIRT_SETPHY:-}" ] && [ -x "$VM_BTVIRT_SETPHY" ] \
  || vm_fail "no btvirt with LE Set PHY: tools/vm/btvirt-setphy.sh could not build it (see the cache's btvirt-setphy.log)"
VM_BTVIRT=$VM_BTVIRT_SETPHY
vm_need mirror mirror-sim
vm_big_buffers
vm_controllers_dual
peer=00:AA:01:01:00:01
# mirror-sim advertises with legacy HCI commands; the kernel on hci0 scans and connects with the extended ones,
# which find only extended sets in btvirt: the kernel's own set on hci1 (instance 1) makes hci1 reachable.
vm_ok hci1-advertising-off 15 btmgmt -i hci1 advertising off
vm_sim sim
vm_ok hci1-add-adv 15 btmgmt -i hci1 add-adv -c 1

vm_ok link-phy 90 "$BIN/mirror" link $peer --adapter hci0 --phy 2m --data-length 251 --json
vm_wait_log sim "connection 1 closed" 20
vm_json "$OUT/link-phy.log" \
  'j["link"]["requests"][0]["asked"] == "--phy 2m" and j["link"]["requests"][0]["result"] == "granted" and j["link"]["requests"][0]["granted"] == {"txPHY": "2M", "rxPHY": "2M"}' "--phy 2m granted as 2M both ways (LE PHY Update Complete)" \
  'j["link"]["txPHY"]["value"] == "2M" and j["link"]["txPHY"]["source"] == "HCI event LE PHY Update Complete"' "the link now reads TX 2M, from LE PHY Update Complete" \
  'j["link"]["requests"][1]["asked"] == "--data-length 251" and j["link"]["requests"][1]["result"] == "refused" and j["link"]["requests"][1]["statusName"] == "0x01 Unknown HCI Command"' "--data-length 251 refused with 0x01 Unknown HCI Command (btvirt has no LE Set Data Length)" \
  'isinstance(j["link"]["handle"]["value"], int) and j["link"]["intervalMs"]["value"] > 0' "a real handle and interval on the dual-mode link"

# The link stays usable after the refusal, and a bench on it computes its ceiling for 2M.
vm_ok bench-2m 120 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --count 200 --rounds 1 --warmup 10 \
  --phy 2m --data-length 251 --json
vm_wait_log sim "connection 2 closed" 20
vm_json "$OUT/bench-2m.log" \
  'j["link"]["requests"][0]["result"] == "granted" and j["link"]["txPHY"]["value"] == "2M"' "bench --phy 2m: granted, the link on 2M" \
  'all(m["ceiling"]["basis"].startswith("2M, 27 B") for m in j["modes"])' "the ceiling computed for 2M and the 27-octet data length it kept" \
  'all(m["writes"] == 200 for m in j["modes"])' "every write of the bench went out"
