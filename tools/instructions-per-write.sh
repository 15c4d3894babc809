#!/usr/bin/env bash
# Instructions per write of `mirror bench --loopback` (the host stack and its in-process plain peer), counted by
# valgrind's callgrind: the same on every run, so two builds compare exactly where CPU times on a shared machine
# do not. The figure is the difference between a 6000-write and a 2000-write run over 4000: start-up, discovery and
# the round's sort cancel out. Prints each build's figure per mode and NEW/BASE.
# Usage: tools/instructions-per-write.sh BASE_MIRROR [NEW_MIRROR]   (default NEW: .build/release/mirror; needs valgrind)
# callgrind cannot read the DWARF 5 of a Swift 6 build ("unhandled dwarf2 abbrev form code 0x25"): it runs a copy
# with the debug sections stripped (symbols stay, which is all a count needs).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: tools/instructions-per-write.sh BASE_MIRROR [NEW_MIRROR]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instructions-per-write: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d /tmp/ipw.XXXXXX)
trap 'rm -rf "$work"' EXIT
per_write() {  # BINARY MODE -> instructions per write
  local n total=()
  for n in 2000 6000; do
    valgrind --tool=callgrind --callgrind-out-file="$work/out" "$1" bench --loopback --mode "$2" --count $n --rounds 1 \
      --warmup 100 --bare-loop none >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    total+=("$(sed -nE 's/.*Collected : ([0-9]+).*/\1/p' "$work/err")")
  done
  echo $(( (total[1] - total[0]) / 4000 ))
}
objcopy --strip-debug "$1" "$work/base"
objcopy --strip-debug "${2:-.build/release/mirror}" "$work/new"
for mode in with-response without-response; do
  b=$(per_write "$work/base" $mode)
  n=$(per_write "$work/new" $mode)
  python3 -c "import sys; b,n=int(sys.argv[2]),int(sys.argv[3]); print(f'{sys.argv[1]}: base {b}, new {n} instructions per write; new/base {n/b:.3f}')" $mode "$b" "$n"
done
