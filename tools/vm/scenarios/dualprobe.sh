# vm-about: probe: btvirt's dual-mode controllers (vm_controllers_dual), l2test on CID 4, what they answer to LE Set PHY, Read PHY, Set Data Length; mirror-sim and mirror mtu on them
# vm-timeout: 300
# vm-manual: yes
# Findings are logged as "finding: ..." lines. It fails when the rig does (no LE connection), and on the PHY:
# Debian's btvirt must answer LE Set PHY with 0x01 Unknown HCI Command, VM_BTVIRT's (btvirt-setphy.sh) with LE
# PHY Update Complete at 2M both ways.
# l2test -n (connect and be silent) while btmon captures: btmon 5.66 crashes decoding l2test's payload as ATT.
bz=$(dpkg-query -W -f '${Version}' bluez)
vm_log "finding: btvirt is ${VM_BTVIRT:-btvirt of bluez $bz}"
vm_controllers_dual
vm_ok addrs 15 hciconfig -a
vm_ok hci1-info 15 btmgmt -i hci1 info

# le_handle: the handle of hci0's LE link (hcitool prints it in decimal).
le_handle() { hcitool -i hci0 con | sed -n 's/.* LE .* handle \([0-9]*\) .*/\1/p' | head -n 1; }

# hci_cmd STEP OCF PARAMS...: an LE controller command (OGF 0x08) on hci0 from hcitool's raw socket.
hci_cmd() { local step=$1 ocf=$2; shift 2; vm_run "$step" 15 hcitool -i hci0 cmd 0x08 "$ocf" "$@"; }

# 1. An LE connection hci0 -> hci1 on CID 4, held open while the PHY commands run.
vm_bg listen l2test -r -V le_public -J 4 -i hci1
vm_wait_log listen "Waiting for connection" 10
vm_bg connect l2test -n -V le_public -J 4 -i hci0 00:AA:01:01:00:01
vm_wait "an LE link on hci0" 30 sh -c 'hcitool -i hci0 con | grep -q " LE "'
vm_wait_log listen "Connected to 00:AA:01:00:00:00" 10
h=$(le_handle)
[ -n "$h" ] || vm_fail "no LE handle in 'hcitool -i hci0 con'"
lo=$(printf '0x%02x' $((h & 0xff))); hi=$(printf '0x%02x' $((h >> 8)))
vm_log "finding: LE link hci0 -> hci1 up, handle $h ($(printf '0x%04x' "$h"))"

# 2. LE Read PHY (Vol 4 Part E 7.8.47), LE Set PHY to 2M both ways (7.8.49: All_PHYs 0, TX 0x02, RX 0x02,
# PHY_Options 0), Read PHY again, LE Set Data Length 251 octets / 2120 us (7.8.33).
hci_cmd read-phy-1 0x0030 "$lo" "$hi"
hci_cmd set-phy 0x0032 "$lo" "$hi" 0x00 0x02 0x02 0x00 0x00
sleep 1
hci_cmd read-phy-2 0x0030 "$lo" "$hi"
hci_cmd set-data-length 0x0022 "$lo" "$hi" 0xfb 0x00 0x48 0x08
vm_alive connect 2 "the link survived the PHY and data length commands"
vm_stop connect 5 TERM
vm_stop listen 5 TERM

# 3. The re-advertise helper, and a second (silent) connection.
vm_advertise_dual hci1
vm_bg listen2 l2test -r -V le_public -J 4 -i hci1
vm_wait_log listen2 "Waiting for connection" 10
vm_bg connect2 l2test -n -V le_public -J 4 -i hci0 00:AA:01:01:00:01
vm_wait_log listen2 "Connected to 00:AA:01:00:00:00" 30
vm_log "finding: after vm_advertise_dual, a second LE connection hci0 -> hci1"
vm_stop connect2 5 TERM
vm_stop listen2 5 TERM

# 4. mirror-sim advertises by legacy HCI itself; first without the kernel's extended set on hci1.
vm_need mirror mirror-sim
vm_no_le_link
vm_ok hci1-advertising-off 15 btmgmt -i hci1 advertising off
vm_sim sim
vm_run mtu-legacy 45 "$BIN/mirror" mtu 00:AA:01:01:00:01 --adapter hci0
vm_log "finding: mirror mtu with mirror-sim's own (legacy) advertising only: exit $VM_RC"
# Then with an extended advertising set of the kernel's on hci1 beside it (instance 1: see vm_advertise_dual).
vm_no_le_link
vm_ok hci1-add-adv 15 btmgmt -i hci1 add-adv -c 1
vm_run mtu-ext 45 "$BIN/mirror" mtu 00:AA:01:01:00:01 --adapter hci0
vm_log "finding: mirror mtu with the kernel's extended set on hci1 too: exit $VM_RC"
# mirror link asking for 2M and 251-octet packets on that link (run as root: raw HCI for the requests).
vm_no_le_link
vm_run link 45 "$BIN/mirror" link 00:AA:01:01:00:01 --adapter hci0 --phy 2m --data-length 251
vm_log "finding: mirror link --phy 2m --data-length 251: exit $VM_RC"
grep -E -- "--phy|--data-length|PHY" "$OUT/link.log" | sed 's/^/    | /'
vm_stop sim 10 TERM

# 5. Data over CID 4 (last: btmon 5.66 may crash decoding it). The kernel re-enabled add-adv's set 1 itself
# when mtu-ext's link went.
vm_wait "no LE link left on hci1" 20 sh -c "! hcitool -i hci1 con | grep -q ' LE '"
vm_bg listen3 l2test -r -V le_public -J 4 -b 40 -i hci1
vm_wait_log listen3 "Waiting for connection" 10
vm_ok send 40 l2test -s -V le_public -J 4 -b 40 -N 10 -i hci0 00:AA:01:01:00:01
vm_wait_log listen3 "Disconnect" 20
vm_stop listen3 5 TERM
vm_count "$OUT/listen3.log" "40 bytes in" 10 "hci1 received 10 frames of 40 bytes"

# 6. What the controllers answered, decoded from btmon's capture.
vm_stop btmon 5 INT
btmon -r "$OUT/hci.btsnoop" >"$OUT/hci.txt" 2>&1
# Each Command Complete / Status as "NAME: STATUS" (btmon prints the command's name, then its status).
awk '/^> HCI Event: Command (Complete|Status)/ { want = 1; next }
     want == 1 { sub(/^ */, ""); sub(/ \(0x..\|0x....\).*/, ""); name = $0; want = 2; next }
     want == 2 { sub(/^ *Status: /, ""); print name ": " $0; want = 0 }' "$OUT/hci.txt" >"$OUT/answers.txt"
for cmd in "LE Read PHY" "LE Set PHY" "LE Set Data Length" "LE Set Default PHY" "LE Extended Create Connection" \
           "LE Set Advertising Parameters" "LE Set Advertise Enable" "LE Set Extended Advertising Enable"; do
  st=$(grep -F "$cmd: " "$OUT/answers.txt" | sed "s/^$cmd: //" | sort | uniq -c | sed 's/^ *//' | paste -sd ';')
  vm_log "finding: $cmd answered: ${st:-never sent}"
done
vm_log "finding: LE PHY Update Complete events: $(grep -c 'LE PHY Update Complete (0x0c)' "$OUT/hci.txt")"
grep -A 4 'LE PHY Update Complete (0x0c)' "$OUT/hci.txt" | sed 's/^/    | /'
vm_log "finding: LE Enhanced Connection Complete events: $(grep -c 'LE Enhanced Connection Complete' "$OUT/hci.txt"), LE Connection Complete: $(grep -c 'LE Connection Complete (0x01)' "$OUT/hci.txt")"
if [ -n "${VM_BTVIRT:-}" ]; then
  vm_grep "$OUT/answers.txt" "^LE Set PHY: Success" "LE Set PHY accepted (Command Status 0x00)"
  vm_grep "$OUT/hci.txt" "TX PHY: LE 2M" "LE PHY Update Complete with TX PHY 2M"
  vm_grep "$OUT/hci.txt" "RX PHY: LE 2M" "LE PHY Update Complete with RX PHY 2M"
else
  vm_grep "$OUT/answers.txt" "^LE Set PHY: Unknown HCI Command \(0x01\)" "Debian's btvirt: LE Set PHY is 0x01 Unknown HCI Command"
fi
