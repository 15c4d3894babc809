# vm-about: probe: where a Write Request's CPU goes over a real LE link under TCG: single operations (tools/vm/probes), syscalls per write (strace -c), user/system time and context switches (GNU time) with and without the bare loop, and pinned runs alternating
# vm-timeout: 1500
# vm-manual: yes
# Findings only (logged as "finding: ..."; tools/vm/README.md keeps them): it fails only when the rig does.
# perf record and perf stat's context-switch count oopsed this guest kernel under TCG (int3 in __schedule: the
# static key they flip is patched while another vCPU runs it), so GNU time counts instead.
vm_need mirror mirror-sim
vm_sim_link

# 1. What single operations cost in this guest (compiled here with the host's cc, when it has one).
if command -v cc >/dev/null; then
  for p in ops atomics syscall-pages wakeup-pages; do
    vm_run "cc-$p" 120 cc -O2 -o "$OUT/$p" "$REPO/tools/vm/probes/$p.c" -lpthread && vm_run "probe-$p" 300 "$OUT/$p"
  done
  [ -x "$OUT/wakeup-pages" ] && vm_run probe-wakeup-pages-1 300 "$OUT/wakeup-pages" same
  for f in probe-ops probe-atomics probe-syscall-pages probe-wakeup-pages probe-wakeup-pages-1; do
    [ -f "$OUT/$f.log" ] && vm_log "finding: $f: $(tr '\n' ';' < "$OUT/$f.log")"
  done
else
  vm_log "finding: no cc on the host: single-operation probes skipped"
fi
vm_log "finding: clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"

figures() {
  python3 -I -S -c 'import json,sys; m=json.load(open(sys.argv[1]))["modes"][0]; b=m.get("bare", {}); print("mirror %s us/write, bare %s, ratio %s" % (m["cpuMicrosecondsPerWrite"], b.get("cpuMicrosecondsPerWrite"), m.get("cpuRatioToBare")))' "$1"
}

# 2. Syscalls per write and where the time goes: without the bare loop (the GATT client alone), then with it on
# the same connection (the difference is the bare loop's).
for loop in none same-connection; do
  n=$((n + 1))
  vm_run "strace-$loop" 600 strace -f -c -o "$OUT/strace-$loop.txt" "$BIN/mirror" bench $peer --adapter hci0 \
    --handle 0x0012 --size 20 --mtu 23 --mode with-response --count 2000 --rounds 1 --warmup 50 --json --bare-loop $loop
  vm_wait_log sim "connection $n closed" 20
  vm_log "finding: strace $loop (2000 writes + 50 warm-up): $(awk '$NF ~ /^(sendto|recvmsg|epoll_wait|poll|futex)$/ { printf "%s %s (%s errors); ", $NF, $4, ($5 ~ /^[0-9]+$/ ? $5 : 0) }' "$OUT/strace-$loop.txt")"
  n=$((n + 1))
  vm_run "time-$loop" 600 /usr/bin/time -v -o "$OUT/time-$loop.txt" "$BIN/mirror" bench $peer --adapter hci0 \
    --handle 0x0012 --size 20 --mtu 23 --mode with-response --count 2000 --rounds 1 --warmup 50 --json --bare-loop $loop
  vm_wait_log sim "connection $n closed" 20
  vm_log "finding: time $loop: $(figures "$OUT/time-$loop.log"); $(grep -E 'User time|System time|context switches' "$OUT/time-$loop.txt" | tr -s ' \t' ' ' | tr '\n' ';')"
done

# 3. Unpinned against pinned (btvirt and mirror-sim on vCPU 0, mirror on vCPU 1), alternating, as the perf
# scenario measures.
pin() { for p in $(pgrep -x btvirt) $(vm_pid sim); do taskset -a -c -p "$1" "$p" >/dev/null; done; }
for pinned in no yes no yes no yes; do
  n=$((n + 1))
  if [ $pinned = yes ]; then pin 0; pre="taskset -c 1"; else pin 0,1; pre=""; fi
  vm_run "pin-$n" 600 $pre "$BIN/mirror" bench $peer --adapter hci0 --handle 0x0012 --size 20 --mtu 23 \
    --mode with-response --count 1000 --rounds 3 --warmup 100 --json
  vm_wait_log sim "connection $n closed" 20
  vm_log "finding: pinned=$pinned: $(figures "$OUT/pin-$n.log")"
done
