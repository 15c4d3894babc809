# vm-about: every example of mirror's --help and README that needs an adapter (an LE address; doctor, adapters, discover), run against mirror-sim on hci1 from hci0 (ExamplesTests runs the unix: ones); a discover interrupted by Ctrl-C leaves the controller able to scan again
# vm-timeout: 400
vm_need mirror mirror-sim
vm_controllers
# The bench example floods Write Commands at a simulator that logs each one: an LE fixed channel has no flow control,
# so a full receive buffer drops PDUs (the barrier's Read Request among them) unless it is large (as in the bench scenario).
vm_big_buffers
vm_sim sim --io none
vm_ok examples 360 python3 -I -S "$REPO/tools/vm/examples.py" "$BIN" "$REPO" "$OUT/examples"
sed 's/^/    | /' "$OUT/examples.log" | grep -v '^    | *$' | head -60

# A discover cut short by SIGINT stops the kernel's discovery (Stop Discovery) and exits 130; the next discover
# scans (a discovery left running would make its Start Discovery Busy), and a connect after it gets its link: a raw
# active scan used to leave the kernel's discovery state FINDING, and the kernel then never scanned for a connect.
vm_bg discover-cut "$BIN/mirror" discover --adapter hci0 --duration 30
sleep 3  # the simulator advertises every 100 ms: 3 s into the scan it has been seen
vm_stop discover-cut 10 INT
[ "$VM_RC" = 130 ] || vm_fail "discover interrupted by SIGINT exited $VM_RC (expected 130, the signals table)"
grep -q '00:AA:01:01:00:01' "$OUT/discover-cut.log" || vm_fail "the interrupted discover did not print the simulator it had seen"
vm_ok discover-again 30 "$BIN/mirror" discover --adapter hci0 --duration 2 --json
grep -q '00:AA:01:01:00:01' "$OUT/discover-again.log" || vm_fail "the discover after an interrupted one did not see the simulator"
vm_ok gatt-after-discover 60 "$BIN/mirror" gatt 00:AA:01:01:00:01 --adapter hci0
