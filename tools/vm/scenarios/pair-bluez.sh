# vm-about: bonds across an adapter reset and beside bluetoothd: with no bluetoothd, mirror pair with mirror-sim, `hciconfig hci0 reset` (the kernel's keys survive it; the controller needs a power cycle), the kernel's LTKs cleared (Load Long Term Keys, empty), then a secured read loads the stored bond and encrypts with no second pairing (btmon); then bluetoothd with BlueZ's example-gatt-server on hci1, bonded through bluetoothctl: an encrypted read on bluetoothd's bond, mirror pair refused, bonds list shows bluetoothd's, mirror's store byte-identical
# vm-timeout: 300
vm_need mirror mirror-sim
SIM=00:AA:01:01:00:01
CENTRAL=00:AA:01:00:00:00
export XDG_STATE_HOME="$OUT/state"
BOND="$XDG_STATE_HOME/mirror/bonds/$CENTRAL/$SIM.json"
dmesg_start=$(dmesg | wc -l)
# The kernel's own key lists (net/bluetooth/hci_debugfs.c: long_term_keys, one line per LTK).
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug || vm_fail "cannot mount debugfs"
LTKS=/sys/kernel/debug/bluetooth/hci0/long_term_keys
sim_lc=$(echo $SIM | tr A-F a-f)   # debugfs prints addresses in lower case

# ---- 1. An adapter reset, no bluetoothd: the bond comes back from mirror's store ----
vm_controllers
vm_sim sim --io none --secure deviceName
vm_ok pair 90 "$BIN/mirror" pair $SIM --adapter hci0
vm_grep "$OUT/pair.log" "^paired with $SIM \(public\) on hci0: Just Works$" "mirror pair with the simulator: Just Works"
vm_grep "$OUT/pair.log" "^bonded: .*kept in $BOND" "the bond kept in mirror's store"
cp "$BOND" "$OUT/bond-after-pair.json"
vm_no_le_link
cat $LTKS >"$OUT/ltks-after-pair.txt"
vm_grep "$OUT/ltks-after-pair.txt" "^$sim_lc " "the kernel holds an LTK for $SIM after pairing (debugfs)"

# HCIDEVRESET (hciconfig hci0 reset): the kernel resets the controller and sends its event masks again, but keeps
# its keys (hci_dev_do_reset touches no key list: debugfs still shows the LTK), so it is not what forgets a bond.
# What does is Load Long Term Keys with an empty list (mgmt-api.txt 0x0013: it replaces the whole list; btmgmt ltks),
# as a reboot or replug leaves the kernel. hci0's links are gone first: btvirt tells hci1 nothing of hci0's reset,
# and a link hci1 still holds would take hci0's next connection (README).
vm_ok reset 15 hciconfig hci0 reset
cat $LTKS >"$OUT/ltks-after-reset.txt"
vm_grep "$OUT/ltks-after-reset.txt" "^$sim_lc " "hciconfig hci0 reset leaves the kernel's LTK in place (debugfs)"
vm_ok read-after-reset 60 "$BIN/mirror" read $SIM 0x0003 --adapter hci0 --security medium
vm_grep "$OUT/read-after-reset.log" "mirror-sim" "the reset adapter connects and reads the secured value"
vm_no_le_link
vm_ok forget 15 btmgmt -i hci0 ltks
cat $LTKS >"$OUT/ltks-after-forget.txt"
vm_count "$OUT/ltks-after-forget.txt" . 0 "the kernel holds no LTK after Load Long Term Keys with none (debugfs)"
answered=$(grep -c "answered" "$OUT/sim.log")
vm_ok read-from-store 60 "$BIN/mirror" read $SIM 0x0003 --adapter hci0 --security medium
vm_grep "$OUT/read-from-store.log" "^note: loaded 1 long term key of $XDG_STATE_HOME/mirror/bonds/$CENTRAL into the kernel for hci0 \(the bond with $SIM\)" "the stored bond went into the kernel before the connect"
vm_grep "$OUT/read-from-store.log" "\"mirror-sim\"" "and the secured value was read on it"
[ "$(grep -c "answered" "$OUT/sim.log")" = "$answered" ] || vm_fail "the simulator's agent answered a pairing after the keys were cleared: the read paired again"
cat $LTKS >"$OUT/ltks-after-load.txt"
vm_grep "$OUT/ltks-after-load.txt" "^$sim_lc " "the kernel holds the LTK again (debugfs)"
vm_stop sim 10 TERM
vm_stop btmon 5 TERM
btmon -r "$OUT/hci.btsnoop" >"$OUT/hci-reset.txt" 2>&1 || true
ltk=$(python3 -I -S -c 'import json,sys; print(json.load(open(sys.argv[1]))["longTermKeys"][0]["value"])' "$BOND")
# After the empty Load Long Term Keys (plen 2: a key count of 0): no SMP Pairing Request, and hci0 starts
# encryption (LE Start Encryption, Vol 4 Part E §7.8.24) with the LTK of mirror's store.
sed -n '/MGMT Command: Load Long Term Keys (0x0013) plen 2 /,$p' "$OUT/hci-reset.txt" >"$OUT/hci-after-forget.txt"
vm_grep "$OUT/hci-after-forget.txt" "Load Long Term Keys" "btmon: the empty Load Long Term Keys"
vm_no_grep "$OUT/hci-after-forget.txt" "SMP: Pairing Request" "btmon: no SMP Pairing Request after the kernel forgot the keys"
vm_ok start-encryption 10 sh -c "grep -A4 'HCI Command: LE Start Encryption' '$OUT/hci-after-forget.txt' | grep -q 'Long term key: $ltk'"
vm_log "ok: btmon: LE Start Encryption on hci0 with the stored LTK $ltk"
vm_ok encryption-change 10 sh -c "grep -A3 'HCI Event: Encryption Change' '$OUT/hci-after-forget.txt' | grep -q 'Status: Success'"
vm_log "ok: btmon: Encryption Change, status Success"
dmesg | tail -n +$((dmesg_start + 1)) >"$OUT/dmesg.log"
vm_no_grep "$OUT/dmesg.log" "security requested but not available|Unable to create .* crypto context" "the kernel had SMP throughout"

# ---- 2. bluetoothd runs, bonded through bluetoothctl: its bond is used, mirror's store is left alone ----
# mirror's store keeps part 1's bond with the same address: it must be neither loaded nor rewritten.
store_before=$(cd "$XDG_STATE_HOME" && find . -type f -exec sha256sum {} + | sort)
# bluetoothd 5.66 (Debian's, not this project's code) has died with SIGSEGV during bluetoothctl's pairing twice in
# the runs on record (once in CI, once in a local run of the test command), right after the agent's "yes" (lib.sh:
# "Segmentation fault ... bluetoothd"; bluetoothctl then aborts in libdbus). So the pairing below is tried twice at
# most: when bluetoothd died, the scenario says so (with the kernel's segfault line), starts the whole bluetoothd side
# again from a clean /var/lib/bluetooth, and pairs again.
bluez_pair() {
  local attempt=$1
  vm_gatt_peer_conf --example
  # bluetoothctl as the agent: what bluetoothd does not confirm itself (the side whose Pair() asked for the pairing)
  # it asks the agent, answered yes here (one RequestConfirmation, "Confirm passkey N (yes/no)", in the runs so far).
  vm_btctl_agent
  printf '%s\n' "select $CENTRAL" "scan on" >&5
  vm_wait_log btctl "Device $SIM" 40
  printf '%s\n' "scan off" "pair $SIM" >&5
  vm_log "bluetoothctl: pair $SIM (attempt $attempt)"
  local answers=0 n
  local deadline=$(( $(vm_now) + $(vm_scaled 60) * 1000000 ))
  until grep -qE "Pairing successful|Failed to pair" "$OUT/btctl.log"; do
    kill -0 "$(vm_pid bluetoothd)" 2>/dev/null || return 1
    [ "$(vm_now)" -gt $deadline ] && vm_fail "waited $(vm_scaled 60) s for bluetoothctl's pairing to end ($answers questions answered)"
    # One "Request confirmation" (or authorization) line per question; its "(yes/no)" prompt is redrawn with every
    # line bluetoothctl prints after it, so the prompts are not counted.
    n=$(grep -oE "Request (confirmation|authorization)" "$OUT/btctl.log" | wc -l)
    [ "$n" -gt $answers ] && { echo yes >&5; answers=$n; vm_log "bluetoothctl's agent: answered yes"; }
    # VM_FAULT=bluetoothd-segv: the crash seen in CI, made on purpose in the first attempt (tests the recovery).
    [ "${VM_FAULT:-}" = bluetoothd-segv ] && [ "$attempt" = 1 ] && [ "$answers" -gt 0 ] && kill -SEGV "$(vm_pid bluetoothd)"
    sleep 0.2
  done
}
bluez_dmesg_start=$(dmesg | wc -l)
if ! bluez_pair 1; then
  wait "$(vm_pid bluetoothd)" 2>/dev/null; rc=$?
  vm_log "bluetoothd died (exit $rc$([ $rc -gt 128 ] && echo ", signal $((rc - 128))")) during bluetoothctl's pairing, a defect of BlueZ 5.66, not of this project: kernel: $(dmesg | tail -n +$((bluez_dmesg_start + 1)) | grep -m1 'bluetoothd.*segfault' || echo 'no segfault line')"
  tail -n 6 "$OUT/btctl.log" | cat -v | sed 's/^/    btctl| /'
  for step in btctl example dbus; do vm_stop $step 5 TERM; done
  mv "$OUT/btctl.log" "$OUT/btctl-attempt1.log"; mv "$OUT/bluetoothd.log" "$OUT/bluetoothd-attempt1.log"
  rm -rf /var/lib/bluetooth/$CENTRAL /var/lib/bluetooth/$SIM
  vm_log "the bluetoothd side starts again, and pairs once more (the last try)"
  bluez_pair 2 || vm_fail "bluetoothd died again during bluetoothctl's pairing (see bluetoothd.log)"
fi
vm_grep "$OUT/btctl.log" "Pairing successful" "bluetoothctl: Pairing successful"
printf '%s\n' "disconnect $SIM" >&5
vm_no_le_link
INFO=/var/lib/bluetooth/$CENTRAL/$SIM/info
cp "$INFO" "$OUT/bluez-info.txt"
# BlueZ's key file (src/adapter.c store_longtermkey): [LongTermKey] for a key used as central, else
# [PeripheralLongTermKey] (and its old name [SlaveLongTermKey]); a Secure Connections key serves both roles.
vm_grep "$INFO" "^\[(LongTermKey|PeripheralLongTermKey)\]" "bluetoothd kept the bond in $INFO"
bluez_ltk=$(sed -n '/^\[\(LongTermKey\|PeripheralLongTermKey\)\]/,/^\[/s/^Key=//p' "$INFO" | head -n 1 | tr A-F a-f)
[ -n "$bluez_ltk" ] || vm_fail "no Key= in a long term key group of $INFO"

# Both sides without a link: hci1's kernel keeps a link hci0 already dropped for a while, and a new connection from
# hci0 then meets the stale one and is dropped under the next command (README; one read ended with 0x13 that way).
vm_no_link_either() { vm_no_le_link; vm_wait "no LE link left on hci1" 20 sh -c '! hcitool -i hci1 con | grep -q " LE "'; }
vm_no_link_either
vm_ok gatt 60 "$BIN/mirror" gatt $SIM --adapter hci0 --json
enc=$(python3 -I -S - "$OUT/gatt.log" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
j = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
print([c["valueHandle"] for s in j["services"] for c in s["characteristics"] if c["uuid"] == "12345678-1234-5678-1234-56789abcdef3"][0])
PY
) || vm_fail "no Test Encrypt Characteristic (12345678-…-56789abcdef3) in mirror gatt's JSON"
vm_log "Test Encrypt Characteristic: value handle $enc"
vm_no_link_either
vm_ok write-encrypted 60 "$BIN/mirror" write $SIM $enc text:coexist --adapter hci0 --security medium
vm_no_link_either
vm_ok read-encrypted 60 "$BIN/mirror" read $SIM $enc --adapter hci0 --security medium
vm_grep "$OUT/read-encrypted.log" '"coexist"' "an encrypted write and read of the Test Encrypt Characteristic on bluetoothd's bond"
vm_grep "$OUT/example.log" "TestEncryptCharacteristic Read" "the example server served the encrypted read"
vm_no_grep "$OUT/read-encrypted.log" "loaded .* long term key" "mirror loaded none of its store's keys (bluetoothd owns them)"
vm_grep "$OUT/read-encrypted.log" "^note: bluetoothd runs: it holds the keys on this machine, so mirror loads none of its own bonds; the link encrypts with bluetoothd's bond with $SIM \($INFO\)" "mirror says it uses bluetoothd's bond"
vm_no_link_either
vm_run pair-refused 30 "$BIN/mirror" pair $SIM --adapter hci0
[ "$VM_RC" = 7 ] || vm_fail "mirror pair under bluetoothd exited $VM_RC (expected 7, unsupported)"
vm_grep "$OUT/pair-refused.log" "bluetoothd runs \(pid [0-9]+\) and owns pairing.*bluetoothctl pair $SIM" "mirror pair refuses under bluetoothd with the bluetoothctl advice"
vm_ok bonds-list 15 "$BIN/mirror" bonds list
vm_grep "$OUT/bonds-list.log" "^$SIM \(public\) on $CENTRAL: .*held by bluetoothd  $INFO" "bonds list shows bluetoothd's bond from /var/lib/bluetooth"
vm_grep "$OUT/bonds-list.log" "^$SIM \(public\) on $CENTRAL: .*  $BOND" "and mirror's own"
store_after=$(cd "$XDG_STATE_HOME" && find . -type f -exec sha256sum {} + | sort)
[ "$store_before" = "$store_after" ] || vm_fail "mirror's bond store changed under bluetoothd: before [$store_before] after [$store_after]"
vm_log "ok: mirror's bond store is byte-identical (sha256 of every file) and has no new file"
vm_stop btmon 5 TERM
btmon -r "$OUT/hci.btsnoop" >"$OUT/hci-bluez.txt" 2>&1 || true
# Every SMP Pairing Request is bluetoothctl's, before its Disconnect: mirror's connections paired none.
sed -n '/MGMT Command: Disconnect (0x0014)/,$p' "$OUT/hci-bluez.txt" >"$OUT/hci-after-bluetoothctl.txt"
vm_grep "$OUT/hci-bluez.txt" "SMP: Pairing Request" "btmon: bluetoothctl's pairing ran SMP"
vm_no_grep "$OUT/hci-after-bluetoothctl.txt" "SMP: Pairing Request" "btmon: no SMP Pairing Request from mirror's connections"
vm_ok start-encryption-bluez 10 sh -c "grep -A4 'HCI Command: LE Start Encryption' '$OUT/hci-after-bluetoothctl.txt' | grep -q 'Long term key: $bluez_ltk'"
vm_log "ok: btmon: LE Start Encryption with bluetoothd's LTK $bluez_ltk"
