# vm-about: (manual: not in --all) issue 38 point 5: mirror bench against its bare loop on the same LE link, both modes, MTU 23 and 517, five runs each alternating in one boot (--batch: the batch calls too); perf_table.py --spread's medians and spreads
# vm-timeout: 2400
# vm-manual: yes
# Each run alternates mirror's rounds with the bare loop's on the same connection (5 rounds of 300 writes per mode,
# 20-byte values); the MTU order is swapped run by run. One boot's runs spread 15-25 % on a quiet host and several-fold
# on a loaded one: the table gives the median and the min-max of the runs' ratios, never one run.
vm_need mirror mirror-sim
vm_sim_link
for run in 1 2 3 4 5; do
  order="23 517"; [ $((run % 2)) = 0 ] && order="517 23"
  for mtu in $order; do
    n=$((n + 1))
    vm_ok "confirm-$mtu-$run" 600 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --mtu "$mtu" \
      --count 300 --rounds 5 --warmup 50 --batch --json
    vm_wait_log sim "connection $n closed" 20
  done
done
vm_ok confirm-table 30 python3 -I -S "$REPO/tools/vm/perf_table.py" --spread "$OUT"/confirm-*.log
sed 's/^/    | /' "$OUT/confirm-table.log"
