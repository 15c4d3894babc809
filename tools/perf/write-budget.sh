#!/usr/bin/env bash
# The write path's instruction budget, gated (issue 38, point 2): the product path's client-only instructions per Write
# Request and per Write Command (tools/perf/write-breakdown.sh: mirror bench --loopback under callgrind, the peer's
# thread and the bench's own bookkeeping left out), against
#  - the CEILING: what this tree is allowed now (a ratchet: the last measured count plus a small margin). Over it,
#    the gate fails: a change made the write path dearer. Lower it when a cut lands.
#  - the TARGET: the count calibrated to 1.3x the bare loop's CPU per write in the VM (docs/performance.md says how).
#    Printed with the gap; not failed on while the tree is over it (it is: see docs/performance.md).
# A count, not a time: the same binary gives the same figure on a loaded machine (valgrind runs one thread at a time).
# Usage: tools/perf/write-budget.sh [--no-build] [MIRROR_BINARY]   (needs valgrind; builds the release products first,
# the same `swift build -c release` the VM stage of tools/test.sh runs, so that stage finds them built)
set -euo pipefail
cd "$(dirname "$0")/../.."

# Client-only product-path instructions per write (tools/perf/write-breakdown.sh, (6000 - 2000 writes) / 4000).
# 16200a9 (this branch's start): 11,948-11,970 and 1,121-1,198 over five runs each (Write Commands vary with the
# socket's backpressure, Write Requests by 0.1 %). After ATTEngine.Pending became a class (6242fd6): 9,214-9,223 and
# 864-883. After the Write Command fast path went synchronous and inlined (no async frame, no ATTPDU: the codec writes
# the bytes from the caller's value): 9,240-9,252 and 490-532. After tracing became a tap the bearer calls instead of
# a decorator on every PDU (ObservedTransport off the untraced path): 9,125-9,134 and 406-489. After the engine's
# sends skip the bearer's thread check (trySendOnItsLoop): 9,090-9,100 and 400-419. After inEventLoop became one
# thread-local load and the fast path returns a Bool, with its helpers inlined: 9,094-9,109 and 351-401. Each ceiling
# is the last count plus 2 % (requests), or (commands) the widest run-to-run spread seen, about 80, above the highest.
CEILING_REQUEST=9280
CEILING_COMMAND=480
# 1.3x in the VM (linear through 45100e5's and e81ea3c's counts and their VM ratios of one boot; docs/performance.md).
TARGET_REQUEST=3900
# Write Commands: no calibration holds (45100e5 ran more instructions per command than e81ea3c at a lower VM ratio), so
# the reference is 45100e5's count (942-979 over runs), the last tree whose VM ratio was within 1.3x (1.11 / 1.10).
TARGET_COMMAND=958

build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift ;;
    -h|--help) sed -n 2,11p "$0"; exit 0 ;;
    *) break ;;
  esac
done
bin=${1:-.build/release/mirror}
if [ "$build" = 1 ]; then
  log=$(mktemp)
  swift build -c release >"$log" 2>&1 || { tail -n 30 "$log"; rm -f "$log"; echo "write-budget: swift build -c release failed"; exit 1; }
  rm -f "$log"
fi
# Three measurements, the median gated: a Write Command's count moves with the socket's backpressure (392-421 over 11
# runs of one binary, and once 519), so one run is no figure to fail on.
work=$(mktemp -d /tmp/write-budget.XXXXXX)
trap 'rm -rf "$work"' EXIT
for i in 1 2 3; do tools/perf/write-breakdown.sh --json "$work/$i.json" "tree=$bin" >/dev/null; done
python3 - "$work" "$CEILING_REQUEST" "$CEILING_COMMAND" "$TARGET_REQUEST" "$TARGET_COMMAND" <<'PY'
import json, statistics, sys
runs = [json.load(open(f"{sys.argv[1]}/{i}.json"))["perWrite"]["tree"] for i in (1, 2, 3)]
ceilings = {"with-response": int(sys.argv[2]), "without-response": int(sys.argv[3])}
targets = {"with-response": int(sys.argv[4]), "without-response": int(sys.argv[5])}
ok = True
for mode, name in (("with-response", "Write Request"), ("without-response", "Write Command")):
    counts = [r[mode]["total"] - r[mode]["charged"]["bench bookkeeping"] for r in runs]
    n = statistics.median(counts)
    p = runs[counts.index(n)][mode]
    c, t = ceilings[mode], targets[mode]
    within = n <= c
    ok = ok and within
    print(f"write-budget: {name}: {n:,.0f} client instructions per write (product path, the median of "
          f"{', '.join(f'{x:,.0f}' for x in counts)}; client total {p['total']:,.0f}); "
          f"ceiling {c:,} ({n / c:.3f}): {'within' if within else 'OVER'}; "
          + (f"1.3x target {t:,}" if mode == "with-response" else f"reference {t:,} (45100e5's; no calibration holds)")
          + f" ({n / t:.2f}x it, {'%s over' % f'{n - t:,.0f}' if n > t else ('met' if mode == 'with-response' else 'at or under it')})")
print(f"write-budget: ceilings {'held' if ok else 'NOT held'}"
      + ("" if ok else " (a change made the write path dearer: tools/perf/write-breakdown.sh --top 30 says where)"))
sys.exit(0 if ok else 1)
PY
