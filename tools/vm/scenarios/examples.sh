# vm-about: every example of mirror's --help and README that needs an adapter (an LE address; doctor, adapters, discover), run against mirror-sim on hci1 from hci0 (ExamplesTests runs the unix: ones); a discover interrupted by Ctrl-C leaves the controller able to scan again
# vm-timeout: 400
vm_need mirror mirror-sim
vm_controllers
vm_sim sim
vm_ok examples 360 python3 -I -S "$REPO/tools/vm/examples.py" "$BIN" "$REPO" "$OUT/examples"
sed 's/^/    | /' "$OUT/examples.log" | grep -v '^    | *$' | head -60

# A discover cut short by SIGINT must turn the LE scan off (LE Set Scan Enable 0x00) before it exits: the next
# discover's LE Set Scan Parameters would otherwise be refused (Command Disallowed, 0x0C) by a still-scanning controller.
vm_bg discover-cut "$BIN/mirror" discover --adapter hci0 --duration 30
vm_wait_log discover-cut '00:AA:01:01:00:01' 20
vm_stop discover-cut 10 INT
[ "$VM_RC" = 130 ] || vm_fail "discover interrupted by SIGINT exited $VM_RC (expected 130, the signals table)"
vm_ok discover-again 30 "$BIN/mirror" discover --adapter hci0 --duration 2 --json
grep -q '00:AA:01:01:00:01' "$OUT/discover-again.log" || vm_fail "the discover after an interrupted one did not see the simulator"
