# vm-about: (manual: not in --all) issue 38 point 5: mirror bench against its bare loop on the same LE link, both modes, MTU 23 and 517, five runs each alternating in one boot (--batch: the batch calls too); perf_confirm_table.py's medians and spreads
# vm-timeout: 2400
# vm-manual: yes
# Each run alternates mirror's rounds with the bare loop's on the same connection (3 rounds of 500 writes per mode,
# 20-byte values); the MTU order is swapped run by run. One boot's runs spread 15-25 %: the table gives the median
# and the min-max of the runs' ratios, never one run.
vm_need mirror mirror-sim
vm_big_buffers
VM_BTMON=0
vm_controllers
vm_sim sim
peer=00:AA:01:01:00:01
n=0
runs=${VM_CONFIRM_RUNS:-5}
for run in $(seq 1 "$runs"); do
  order="23 517"; [ $((run % 2)) = 0 ] && order="517 23"
  for mtu in $order; do
    n=$((n + 1))
    vm_ok "confirm-$mtu-$run" 600 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --mtu "$mtu" \
      --count 500 --rounds 3 --warmup 50 --batch --json
    vm_wait_log sim "connection $n closed" 20
  done
done
vm_ok confirm-table 30 python3 -I -S "$REPO/tools/vm/perf_confirm_table.py" "$OUT"/confirm-*.log
sed 's/^/    | /' "$OUT/confirm-table.log"
