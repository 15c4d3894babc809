# vm-about: (manual: not in --all) the perf measurement for two builds in one boot: a base mirror (.build/perf-ab/mirror, tools/vm/perf-ab.sh REV builds it) and this tree's, alternating, three runs each per MTU
# vm-timeout: 2400
# vm-manual: yes
# One boot's runs spread by +-25% (the bare loop's CPU per write moves with where the scheduler puts btvirt and
# mirror-sim), so a change is judged base against new in the same boot, run by run, the order swapped each run.
vm_need mirror mirror-sim
base="$REPO/.build/perf-ab/mirror"
[ -x "$base" ] || vm_fail "no base build at $base: tools/vm/perf-ab.sh REV builds one"
vm_big_buffers
vm_controllers
vm_sim sim
peer=00:AA:01:01:00:01
n=0
bench() {
  n=$((n + 1))
  vm_ok "$1" 400 "$2" bench $peer --adapter hci0 --handle 0x0012 --size 20 --mtu "$3" --count 1000 --rounds 3 \
    --warmup 100 --json
  vm_wait_log sim "connection $n closed" 20
}
for mtu in 517 23; do
  for run in 1 2 3; do
    if [ $((run % 2)) = 1 ]; then
      bench "base-$mtu-$run" "$base" $mtu; bench "new-$mtu-$run" "$BIN/mirror" $mtu
    else
      bench "new-$mtu-$run" "$BIN/mirror" $mtu; bench "base-$mtu-$run" "$base" $mtu
    fi
  done
done
for side in base new; do
  mkdir -p "$OUT/$side"
  for f in "$OUT"/$side-*.log; do cp "$f" "$OUT/$side/perf-${f##*/$side-}"; done
  vm_ok "table-$side" 30 python3 -I -S "$REPO/tools/vm/perf_table.py" "$OUT/$side"/perf-*.log
  vm_log "$side:"
  sed 's/^/    | /' "$OUT/table-$side.log"
done
