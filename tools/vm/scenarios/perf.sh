# vm-about: (manual: not in --all) the client's CPU per write over a real LE link against its bare socket loop on the same connection, three runs per MTU
# vm-timeout: 1500
# vm-manual: yes
# What the L2CAP goal measures: mirror bench's process CPU per write (every thread) against the bare
# loop's, round by round on the same connection (the bearer lends its socket), 1000 writes per round, 3 rounds,
# 100 warm-up writes, three runs per MTU. tools/vm/perf_table.py prints the medians of cpuRatioToBare.
vm_need mirror mirror-sim
vm_big_buffers
vm_controllers
vm_sim sim
peer=00:AA:01:01:00:01
n=0
for mtu in 517 23; do
  for run in 1 2 3; do
    n=$((n + 1))
    vm_ok "perf-$mtu-$run" 400 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --mtu $mtu \
      --count 1000 --rounds 3 --warmup 100 --json
    vm_wait_log sim "connection $n closed" 20
  done
done
vm_ok perf-table 30 python3 -I -S "$REPO/tools/vm/perf_table.py" "$OUT"/perf-*.log
sed 's/^/    | /' "$OUT/perf-table.log"
