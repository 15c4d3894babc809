# vm-about: (manual: not in --all) the client's CPU per write over a real LE link against its bare socket loop on the same connection, three runs per MTU
# vm-timeout: 1500
# vm-manual: yes
# What the L2CAP goal measures: mirror bench's process CPU per write (every thread) against the bare
# loop's, round by round on the same connection (the bearer lends its socket), 1000 writes per round, 3 rounds,
# 100 warm-up writes, three runs per MTU. tools/vm/perf_table.py prints the medians of cpuRatioToBare.
# The other processes (btvirt, btmon, mirror-sim) run on vCPU 0 and mirror on vCPU 1, so that both loops meet the
# same placement: unpinned, the bare loop's own CPU per write swung from 380 to 660 µs within one boot (under TCG a
# switch to another process on mirror's vCPU is dear); pinned, 204-220 in that boot (216-407 in another, where the
# host itself was busier: the spread left is the emulator's). tools/vm/scenarios/perfprobe.sh compares the two.
vm_need mirror mirror-sim
vm_big_buffers
vm_controllers
vm_sim sim
peer=00:AA:01:01:00:01
for p in $(pgrep -x btvirt) $(pgrep -x btmon) $(vm_pid sim); do vm_ok "pin-$p" 10 taskset -a -c -p 0 "$p"; done
n=0
for mtu in 517 23; do
  for run in 1 2 3; do
    n=$((n + 1))
    vm_ok "perf-$mtu-$run" 400 taskset -c 1 "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --mtu $mtu \
      --count 1000 --rounds 3 --warmup 100 --json
    vm_wait_log sim "connection $n closed" 20
  done
done
vm_ok perf-table 30 python3 -I -S "$REPO/tools/vm/perf_table.py" "$OUT"/perf-*.log
sed 's/^/    | /' "$OUT/perf-table.log"
