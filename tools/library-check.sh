#!/usr/bin/env bash
# The library as an embedder meets it, two checks (each prints "library-check: NAME ok" or fails naming why):
#   docs     the GATTPeer DocC catalog built by the toolchain's own docc (swift-symbolgraph-extract, then
#            docc convert --warnings-as-errors): a broken symbol link fails it
#   example  Examples/embed, a package of its own that depends on this one by path, built and run against a fresh
#            mirror-sim on a unix: socket; its output must be Examples/embed/expected-output.txt line for line
# Usage: tools/library-check.sh docs|example (after `swift build`).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(swift build --show-bin-path)
work=$(mktemp -d)
sim_pid=""
cleanup() { [ -z "$sim_pid" ] || kill "$sim_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

case "${1:-}" in
docs)
    mkdir -p "$work/symbols"
    # The C modules under GATTPeer's imports are found by their module maps in the build directory.
    maps=()
    for m in "$bin"/*.build/module.modulemap; do maps+=(-Xcc "-fmodule-map-file=$m"); done
    swift-symbolgraph-extract -module-name GATTPeer -I "$bin/Modules" -target "$(uname -m)-unknown-linux-gnu" \
        -minimum-access-level public -output-dir "$work/symbols" "${maps[@]}"
    docc convert Sources/GATTPeer/GATTPeer.docc --additional-symbol-graph-dir "$work/symbols" --output-dir "$work/docs" \
        --warnings-as-errors --fallback-display-name GATTPeer --fallback-bundle-identifier GATTPeer
    echo "library-check: docs ok"
    ;;
example)
    # SwiftPM keeps a path dependency's build plan: a file removed from this package since the last build of the
    # example leaves it missing an input, so a failed build is tried once more from a clean build directory.
    if ! swift build --package-path Examples/embed >"$work/build.log" 2>&1; then
        echo "library-check: building Examples/embed failed; once more from a clean Examples/embed/.build"
        rm -rf Examples/embed/.build
        swift build --package-path Examples/embed 2>&1 | tail -n 20
    fi
    example_bin=$(swift build --package-path Examples/embed --show-bin-path)
    sock="$work/sim.sock"
    "$bin/mirror-sim" "unix:$sock" >"$work/sim.log" 2>&1 &
    sim_pid=$!
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
    [ -S "$sock" ] || { cat "$work/sim.log"; echo "library-check: mirror-sim did not listen on $sock within 10 s"; exit 1; }
    timeout 60 "$example_bin/embed" "unix:$sock" >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; echo "library-check: embed failed"; exit 1; }
    if ! diff -u Examples/embed/expected-output.txt "$work/out.txt"; then
        echo "library-check: embed's output differs from Examples/embed/expected-output.txt"
        exit 1
    fi
    # The README's "Use it as a library" block quotes the example: each of its lines must be one of main.swift's.
    /usr/bin/python3 - <<'PY'
import re, sys
readme = open("README.md").read()
section = readme.split("## Use it as a library", 1)[1]
block = re.search(r"```swift\n(.*?)```", section, re.S).group(1)
source = {l.strip() for l in open("Examples/embed/Sources/embed/main.swift")}
missing = [l for l in block.splitlines() if l.strip() and l.strip() not in source]
for l in missing: print("library-check: the README quotes a line Examples/embed does not have: " + l)
sys.exit(1 if missing else 0)
PY
    echo "library-check: example ok ($(grep -cv '^\s*$\|^\s*//' Examples/embed/Sources/embed/main.swift) lines of its own)"
    ;;
*)
    echo "usage: tools/library-check.sh docs|example" >&2
    exit 2
    ;;
esac
