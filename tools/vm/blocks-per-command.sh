#!/usr/bin/env bash
# Translated blocks per Write Command, mirror's product path against its bare loop in the same run: counts that come
# out the same on every run, unlike CPU times under TCG (issue 38 point 4: what a Write Command costs the VM beside the
# bare loop's one send). Runs this tree's release `mirror bench --mode without-response --bare-loop same-connection`
# under qemu's user-mode TCG (qemu-x86_64 -d exec,nochain: every block logged) against mirror-sim on a unix: socket,
# and counts the blocks between two entries of cbz_send (the shim's send, which both mirror's bearer and BareATT's
# loop call once per command): sends 300 to 800 of mirror's 1,000, then the bare loop's 1,000 less its last 200
# (its drain's Read Request follows them). Blocks outside the executable (libc's send, pthread_self, memcpy) are
# counted as "shared libraries". Prints both figures, their difference and the functions that run the most blocks.
# Usage: tools/vm/blocks-per-command.sh [--top N] [BIN_DIR]   (default .build/release; needs qemu-user and binutils)
set -euo pipefail
cd "$(dirname "$0")/../.."
top=8
if [ "${1:-}" = "--top" ]; then top=$2; shift 2; fi
bin=${1:-.build/release}
. tools/vm/blocks-trace.sh
blocks_trace blocks-per-command "$bin" --handle 0x0012 --size 20 --mode without-response --count 1000 --rounds 1 \
  --warmup 10 --bare-loop same-connection
python3 - "$work/exec.log" "$bin/mirror" "$top" <<'PY'
import bisect, collections, subprocess, sys
log, binary, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = 0x4000000000  # where qemu-user loads a PIE executable
syms = []
for line in subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split(" ", 2)
    if len(parts) == 3 and parts[1] in "tTwW":
        syms.append((int(parts[0], 16) + base, parts[2]))
syms.sort()
addrs = [a for a, _ in syms]
send = next((a for a, n in syms if n == "cbz_send"), None)
if send is None:
    sys.exit("blocks-per-command: no cbz_send symbol in " + binary)
# The executable's own code ends where its LOAD segments end (readelf); what runs above is a shared library's.
end = base
for line in subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    fields = line.split()
    if fields[:1] == ["LOAD"]:
        end = max(end, base + int(fields[2], 16) + int(fields[5], 16))
# The PLT's stubs (one block per call into a shared library) are named as such, not as the symbol before them.
plt = (0, 0)
for line in subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    fields = line.replace("[ ", "[").split()
    if len(fields) > 5 and fields[1] == ".plt":
        plt = (base + int(fields[3], 16), base + int(fields[3], 16) + int(fields[5], 16))
per = []  # (blocks, Counter of functions) for each send-to-send span
blocks, funcs = 0, collections.Counter()
with open(log) as f:
    for line in f:
        if not line.startswith("Trace"):
            continue
        pc = int(line.split("/")[1], 16)
        if pc == send:
            per.append((blocks, funcs))
            blocks, funcs = 0, collections.Counter()
        blocks += 1
        if plt[0] <= pc < plt[1]:
            funcs["(PLT stubs: one per call into a shared library)"] += 1
        elif base <= pc < end:
            i = bisect.bisect_right(addrs, pc) - 1
            funcs[syms[i][1] if i >= 0 else "?"] += 1
        else:
            funcs["(shared libraries: libc's send, pthread_self, memcpy, the vDSO)"] += 1
if len(per) < 2000:
    sys.exit(f"blocks-per-command: only {len(per)} sends in the trace (wanted mirror's and the bare loop's 1,000 each)")
def window(lo, hi):
    total, c = 0, collections.Counter()
    for b, f in per[lo:hi]:
        total += b
        c.update(f)
    return total / (hi - lo), c, hi - lo
def demangle(names):
    out = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(names), capture_output=True, text=True)
    lines = out.stdout.splitlines() if out.returncode == 0 else []
    return lines if len(lines) == len(names) else names
mirror, mc, mn = window(300, 800)
bare, bc, bn = window(len(per) - 700, len(per) - 200)
print(f"translated blocks per Write Command: mirror {mirror:.1f}, its bare loop {bare:.1f} (difference {mirror - bare:.1f}, ratio {mirror / bare:.2f})")
for label, c, n in (("mirror", mc, mn), ("bare loop", bc, bn)):
    items = c.most_common(top)
    for name, v in zip(demangle([k for k, _ in items]), [v for _, v in items]):
        print(f"  {label:9} {v / n:6.2f}  {name[:140]}")
PY
