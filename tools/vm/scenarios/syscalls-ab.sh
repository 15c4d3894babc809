# vm-about: (manual: not in --all) syscalls per Write Request (strace -f -c) of a base mirror (.build/perf-ab/mirror, tools/vm/perf-ab.sh REV builds it) and this tree's, each without and with its bare loop on the same link
# vm-timeout: 1500
# vm-manual: yes
# Issue 25's syscall goal: a Write Request costs at most the bare loop's syscalls plus one. `mirror bench` alone
# (--bare-loop none) gives the client's count; with the bare loop on the same connection the difference is the
# loop's. 2000 Write Requests and 50 warm-up writes each; the per-write figures count every syscall of every thread
# (the connect and the set-up are a few hundred, under 0.2 per write).
vm_need mirror mirror-sim
base="$REPO/.build/perf-ab/mirror"
[ -x "$base" ] || vm_fail "no base build at $base: tools/vm/perf-ab.sh REV builds one"
command -v strace >/dev/null || vm_fail "no strace on the host (apt-get install strace)"
vm_sim_link
count=2000
for side in base new; do
  bin="$BIN/mirror"; [ $side = base ] && bin="$base"
  for loop in none same-connection; do
    n=$((n + 1))
    vm_ok "strace-$side-$loop" 600 strace -f -c -o "$OUT/strace-$side-$loop.txt" "$bin" bench $peer --adapter hci0 \
      --handle 0x0012 --size 20 --mtu 23 --mode with-response --count $count --rounds 1 --warmup 50 --json --bare-loop $loop
    vm_wait_log sim "connection $n closed" 20
  done
  # strace -c's last line: "100.00 seconds usecs/call calls errors total"; calls is the 4th field.
  total() { awk '$NF == "total" { print $4 }' "$OUT/strace-$side-$1.txt"; }
  per() { awk -v a="$1" -v n=$count 'BEGIN { printf "%.2f", a / n }'; }
  alone=$(total none) both=$(total same-connection)
  vm_log "finding: $side: mirror $(per "$alone") syscalls per Write Request; its bare loop $(per $((both - alone))); $(awk '$NF ~ /^(sendto|recvmsg|recvfrom|epoll_wait|poll|ppoll|futex|epoll_ctl|write|read)$/ { printf "%s %s; ", $NF, $4 }' "$OUT/strace-$side-none.txt")"
done
