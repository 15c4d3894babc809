# vm-about: (manual: not in --all) Write Commands on their own (issue 38 point 4), MTU 23: strace -f -c of a base mirror (.build/perf-ab/mirror, tools/vm/perf-ab.sh REV builds it) and this tree's, alone and with the bare loop; user and system time per command (GNU time, two counts); backpressure per command; sendmmsg on CID 4 (tools/vm/probes/sendmmsg-cid4.c)
# vm-timeout: 2400
# vm-manual: yes
# Without a base build it measures this tree and its bare loop only. Per-command figures divide by the commands sent
# (count + warm-up); the bare loop's are the difference between `--bare-loop same-connection` and `none`.
# tools/vm/writecmd_table.py prints the table.
vm_need mirror mirror-sim
base="$REPO/.build/perf-ab/mirror"
sides="new"
if [ -x "$base" ]; then sides="base new"; else vm_log "finding: no base build at $base: this tree and its bare loop only"; fi
command -v strace >/dev/null || vm_fail "no strace on the host (apt-get install strace)"
vm_sim_link
warm=50
bench() {  # STEP BIN COUNT LOOP [WRAPPER...]: one without-response run at MTU 23, 20-byte values
  local step=$1 bin=$2 count=$3 loop=$4; shift 4
  n=$((n + 1))
  vm_ok "$step" 900 "$@" "$bin" bench $peer --adapter hci0 --handle 0x0012 --size 20 --mtu 23 --mode without-response \
    --count "$count" --rounds 1 --warmup $warm --bare-loop "$loop" --json
  vm_wait_log sim "connection $n closed" 20
}
binary() { if [ "$1" = base ]; then echo "$base"; else echo "$BIN/mirror"; fi; }

# 1. Syscalls per Write Command, each build alone and with its bare loop on the same link.
for side in $sides; do
  for loop in none same-connection; do
    bench "strace-$side-$loop" "$(binary $side)" 3000 $loop strace -f -c -o "$OUT/strace-$side-$loop.txt"
  done
done
# 2. User and system time per command (GNU time, whose figures have 10 ms steps: 21000 commands minus 1000, start-up
#    and connect cancel out) and the backpressure per command, no strace; sides alternated, twice.
for run in 1 2; do
  order="$sides"; [ $run = 2 ] && order=$(echo $sides | tr ' ' '\n' | tac | tr '\n' ' ')
  for side in $order; do
    for count in 1000 21000; do
      bench "time-$side-$run-$count" "$(binary $side)" $count none /usr/bin/time -f "time: %U %S %w %c" -o "$OUT/time-$side-$run-$count.txt"
    done
  done
done
# 3. Each build's CPU per command against its bare loop on the same link (cpuRatioToBare, command rate), 3 rounds of
#    3000 each, sides alternated, three runs.
for run in 1 2 3; do
  order="$sides"; [ $run = 2 ] && order=$(echo $sides | tr ' ' '\n' | tac | tr '\n' ' ')
  for side in $order; do
    n=$((n + 1))
    vm_ok "ratio-$side-$run" 900 "$(binary $side)" bench $peer --adapter hci0 --handle 0x0012 --size 20 --mtu 23 \
      --mode without-response --count 3000 --rounds 3 --warmup $warm --json
    vm_wait_log sim "connection $n closed" 20
  done
done
# 4. sendmmsg on CID 4: 3000 Write Commands by send() one at a time, by sendmmsg in batches of 8 and of 32, three
#    times in turn; the peer's count says whether each message arrived as one PDU.
if command -v cc >/dev/null; then
  vm_ok cc-sendmmsg 300 cc -O2 -o "$OUT/sendmmsg-cid4" "$REPO/tools/vm/probes/sendmmsg-cid4.c" -lbluetooth
  n=$((n + 1))
  vm_ok sendmmsg 600 "$OUT/sendmmsg-cid4" $peer 3000 1 8 32 32 8 1 1 8 32
  vm_wait_log sim "connection $n closed" 20
  vm_log "finding: sendmmsg probe: $(tr '\n' ';' < "$OUT/sendmmsg.log")"
  vm_log "finding: the peer: $(grep "connection $n closed" "$OUT/sim.log" | sed 's/.*; received/received/') (27000 sent)"
  vm_grep "$OUT/sim.log" "connection $n closed: .*received 0 Write Requests, 27000 Write Commands" "every sendmmsg message one Write Command at the peer"
else
  vm_log "finding: no cc on the host: the sendmmsg probe skipped"
fi
vm_ok writecmd-table 30 python3 -I -S "$REPO/tools/vm/writecmd_table.py" "$OUT" $sides
sed 's/^/    | /' "$OUT/writecmd-table.log"
