#!/usr/bin/env bash
# The syscalls one `mirror shell` write costs over unix: against mirror-sim (issue 35's figure): strace -f -c of a
# shell fed N lines of `write cloudToken text:abc`, minus the same shell fed none, divided by N. Prints the total
# per write and the calls that make it, then checks the goal: at most 8 per write, no clone, at most 1 futex.
# Counts, not times: the same binary gives the same figures on a loaded machine. Usage: tools/perf/shell-syscalls.sh [N]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-300}
bin=$(swift build --show-bin-path)
work=$(mktemp -d)
sim_pid=""
cleanup() { [ -z "$sim_pid" ] || kill "$sim_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
"$bin/mirror-sim" "unix:$work/sim.sock" >"$work/sim.log" 2>&1 &
sim_pid=$!
for _ in $(seq 100); do [ -S "$work/sim.sock" ] && break; sleep 0.1; done
[ -S "$work/sim.sock" ] || { cat "$work/sim.log"; echo "shell-syscalls: mirror-sim did not listen within 10 s"; exit 1; }
: >"$work/in0.txt"
for _ in $(seq "$n"); do echo "write cloudToken text:abc"; done >"$work/in$n.txt"
for k in 0 "$n"; do
    strace -f -c -o "$work/strace$k.txt" "$bin/mirror" shell "unix:$work/sim.sock" <"$work/in$k.txt" >"$work/out$k.txt" 2>&1
done
wrote=$(grep -c "^wrote 3 bytes to 0x0012" "$work/out$n.txt" || true)
[ "$wrote" = "$n" ] || { tail -n 5 "$work/out$n.txt"; echo "shell-syscalls: $wrote of $n writes were answered"; exit 1; }
/usr/bin/python3 - "$work/strace0.txt" "$work/strace$n.txt" "$n" <<'PY'
import sys
def calls(path):
    d = {}
    for line in open(path):
        p = line.split()
        if len(p) >= 5 and p[0][0].isdigit() and p[-1] != "total":
            d[p[-1]] = int(p[3])
    return d
base, run, n = calls(sys.argv[1]), calls(sys.argv[2]), int(sys.argv[3])
per = {k: (run.get(k, 0) - base.get(k, 0)) / n for k in set(base) | set(run)}
total = sum(per.values())
print(f"shell-syscalls: {total:.2f} syscalls per write ({n} writes, strace -f -c, minus a shell fed none)")
for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:8]:
    if abs(v) >= 0.005:
        print(f"  {k:<16} {v:.2f}")
clones = per.get("clone3", 0) + per.get("clone", 0)
futex = per.get("futex", 0)
ok = total <= 8 and clones * n < 1 and futex <= 1
print(f"shell-syscalls: goal at most 8 per write, no clone, at most 1 futex: {'met' if ok else 'NOT met'} "
      f"({total:.2f}, {clones * n:.0f} clones in all, {futex:.2f} futex)")
sys.exit(0 if ok else 1)
PY
