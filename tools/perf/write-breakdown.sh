#!/usr/bin/env bash
# Where one write's instructions go, client only (issue 38, point 1): `mirror bench --loopback` (client.write and
# client.writeWithoutResponse from a task on the connection's loop, the product path; the plain peer on its own thread
# in the same process) under valgrind's callgrind with --separate-threads=yes. The peer's threads are left out
# (callgrind_groups.py finds them by PlainPeer's serve and accept loops); every other thread (main, the link's loop,
# the runtime's workers) is the client. Per write = (run of BIG writes - run of SMALL writes) / (BIG - SMALL), so
# start-up, discovery and the round's sort cancel out. Instruction counts are the same from run to run (valgrind runs
# one thread at a time), so this works on a loaded machine where CPU times do not.
#
# Usage: tools/perf/write-breakdown.sh [--json FILE] [--small N] [--big N] [--top N] [LABEL=MIRROR_BINARY ...]
#   default binary: this tree's .build/release/mirror (build it first: swift build -c release --product mirror).
#   --json FILE: the per-write figures of every binary and mode as JSON (what tools/perf/write-budget.sh reads).
#   --top N: also the N functions with the most self instructions per write, per binary and mode.
#   --keep DIR: leave callgrind's files and the per-run JSON in DIR (callgrind_annotate reads them).
# Needs valgrind. callgrind cannot read the DWARF 5 of a Swift 6 build: it runs a copy with the debug sections
# stripped (the symbols stay, which is all the grouping needs).
set -euo pipefail
cd "$(dirname "$0")/../.."
small=2000 big=6000 json="" top=0 keep=""
bins=()
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json=$2; shift 2 ;;
    --small) small=$2; shift 2 ;;
    --big) big=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n 2,18p "$0"; exit 0 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[ ${#bins[@]} -gt 0 ] || bins=("today=.build/release/mirror")
command -v valgrind >/dev/null || { echo "write-breakdown: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
if [ -n "$keep" ]; then
  mkdir -p "$keep"; work=$keep
else
  work=$(mktemp -d /tmp/write-breakdown.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
here=tools/perf
modes=(with-response without-response)
for spec in "${bins[@]}"; do
  label=${spec%%=*} path=${spec#*=}
  [ -x "$path" ] || { echo "write-breakdown: no binary at $path (swift build -c release --product mirror)" >&2; exit 2; }
  objcopy --strip-debug "$path" "$work/$label.bin"
  for mode in "${modes[@]}"; do
    for n in "$small" "$big"; do
      out="$work/$label.$mode.$n"
      valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" "$work/$label.bin" bench --loopback \
        --mode "$mode" --count "$n" --rounds 1 --warmup 100 --bare-loop none >"$out.stdout" 2>"$out.err" \
        || { tail -n 20 "$out.err" >&2; echo "write-breakdown: $label $mode $n writes failed" >&2; exit 1; }
      python3 "$here/callgrind_groups.py" "$out" >"$out.json"
    done
    python3 "$here/callgrind_groups.py" --diff "$work/$label.$mode.$small.json" "$work/$label.$mode.$big.json" \
      $((big - small)) >"$work/$label.$mode.per.json"
    if [ "$top" -gt 0 ]; then
      echo "== $label, $mode: functions by self instructions per write"
      python3 "$here/callgrind_groups.py" --top-diff "$work/$label.$mode.$small" "$work/$label.$mode.$big" \
        $((big - small)) "$top"
    fi
  done
done
python3 - "$work" "$small" "$big" "$json" "${bins[@]}" <<'PY'
import json, sys
sys.path.insert(0, "tools/perf")
from callgrind_groups import GROUPS
work, small, big, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
labels = [s.split("=", 1)[0] for s in sys.argv[5:]]
modes = [("with-response", "Write Request"), ("without-response", "Write Command")]
per = {l: {m: json.load(open(f"{work}/{l}.{m}.per.json")) for m, _ in modes} for l in labels}
cols = [(l, m, name) for m, name in modes for l in labels]
print(f"Client-only instructions per write (callgrind, peer thread excluded, ({big} - {small} writes) / {big - small}); "
      "self (charged: self plus the malloc/ARC, Swift runtime, stdlib and libc work it called)")
print()
print("| group | " + " | ".join(f"{name}, {l}" for l, m, name in cols) + " |")
print("|---|" + "---:|" * len(cols))
for g in GROUPS:
    cells = []
    for l, m, _ in cols:
        s, i = per[l][m]["self"][g], per[l][m]["charged"][g]
        cells.append(f"{s:,.0f} ({i:,.0f})")
    print(f"| {g} | " + " | ".join(cells) + " |")
print("| **client total** | " + " | ".join(f"**{per[l][m]['total']:,.0f}**" for l, m, _ in cols) + " |")
for l in labels:
    for m, _ in modes:
        p = per[l][m]
        p["productPath"] = p["total"] - p["charged"]["bench bookkeeping"]
print("| **product path** (client total - bench bookkeeping, charged) | "
      + " | ".join(f"**{per[l][m]['productPath']:,.0f}**" for l, m, _ in cols) + " |")
print("| (the peer's thread, left out) | " + " | ".join(f"{per[l][m]['peer']:,.0f}" for l, m, _ in cols) + " |")
if out:
    json.dump({"small": small, "big": big, "perWrite": per}, open(out, "w"), indent=1)
PY
