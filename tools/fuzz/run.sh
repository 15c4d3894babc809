#!/usr/bin/env bash
# Builds a libFuzzer target of tools/fuzz (release, with the fuzzer and address sanitizers) and runs it
# for a bounded time over the committed seed corpus. Exits non-zero if the fuzzer finds a crash
# (the crashing input is saved under tools/fuzz/.build/artifacts/).
# usage: tools/fuzz/run.sh TARGET SECONDS     e.g. tools/fuzz/run.sh fuzz-att-decode 60
set -euo pipefail
cd "$(dirname "$0")"
if [ $# -ne 2 ]; then
    echo "usage: tools/fuzz/run.sh TARGET SECONDS" >&2
    exit 2
fi
target=$1
seconds=$2
case "$seconds" in ''|*[!0-9]*) echo "run.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;; esac
seeds=corpus/$target
[ -d "$seeds" ] || { echo "run.sh: no seed corpus at tools/fuzz/$seeds" >&2; exit 2; }

# The root package publishes its test scaffolding (HostilePeer, TestSupport) only when asked (Package.swift).
export MIRROR_FUZZ_PRODUCTS=1

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# SwiftPM passes `--sanitize fuzzer --sanitize address` to swiftc as two -sanitize flags, and the Swift driver keeps
# only the last one: the Swift code would get AddressSanitizer but no coverage instrumentation, so libFuzzer would
# fuzz blind ("no interesting inputs were found"). The combined flag, passed last, restores both.
build=(swift build -c release --product "$target" --sanitize fuzzer --sanitize address -Xswiftc -sanitize=fuzzer,address)
if ! "${build[@]}" >"$log" 2>&1; then
    cat "$log"
    echo "run.sh: building $target failed" >&2
    exit 1
fi
grep -vE '^\[[0-9]+/[0-9]+\]' "$log" || true
bin="$("${build[@]}" --show-bin-path)/$target"

# New inputs go to a scratch corpus; the committed seeds are read only.
work=.build/corpus/$target
artifacts=.build/artifacts
mkdir -p "$work" "$artifacts"

# Swift's backtracer would kill the fuzzer before it saves the crashing input.
set +e
SWIFT_BACKTRACE=enable=no "$bin" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$target-" "$work" "$seeds" >"$log" 2>&1
status=$?
set -e
runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
secs=$(sed -nE 's/^Done [0-9]+ runs in ([0-9]+) second.*/\1/p' "$log" | tail -n 1)
if [ "$status" -ne 0 ]; then
    tail -n 60 "$log"
    echo "fuzz: $target FAILED (exit $status: a crash, a timeout or running out of memory) after ${runs:-?} inputs; the input is saved under tools/fuzz/$artifacts/"
    exit 1
fi
rate=""
if [ -n "$runs" ] && [ -n "$secs" ] && [ "$secs" -gt 0 ]; then rate=" ($((runs / secs)) per second)"; fi
echo "fuzz: $target ran ${runs:-?} inputs in ${secs:-?} s${rate}, no crash"
