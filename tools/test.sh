#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, then runs the unit and integration tests (the hostile-peer
# reliability tests among them), the whole suite again under ThreadSanitizer, the list of waits (tools/lint/waits.py),
# a bounded fuzz run of each libFuzzer target under AddressSanitizer (the ATT decoder, the engine, the capture reader; FUZZ_SECONDS
# each, default 15), the library checks (tools/library-check.sh: the DocC catalog, the embedding example), the
# syscalls of a shell write (tools/perf/shell-syscalls.sh), the write path's instruction budget
# (tools/perf/write-budget.sh), then the end-to-end scenarios in a VM with a real Linux
# Bluetooth stack (tools/vm/run.sh, needs root or sudo).
# Ends with one line "tests: N passed, N failed" over every stage. VM_SKIP=1 leaves the VM stage out;
# TSAN_SKIP=1 the ThreadSanitizer stage.
set -euo pipefail
cd "$(dirname "$0")/.."
# stage NAME: prints how long the stage before it took ("time: NAME N s"), for the 40-minute budget.
stage_t=$SECONDS
stage() { echo "time: $1 $((SECONDS - stage_t)) s"; stage_t=$SECONDS; }
tools/setup.sh --no-build
stage setup
swift build
stage build
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
swift test --disable-swift-testing 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# XCTest's summary of the whole run, "Executed N tests, with [K tests skipped and] F failures" under "Test Suite 'All
# tests'" ('Selected tests' when tests are skipped, as in the sanitizer stage): a skipped test is not a passed one, so
# it counts as failed. A run that died before it (a crash, a signal) has only some suite's line: that is no summary,
# one failure, with the log's end shown (never an exit of this script: the function does not fail).
summary_re="Executed [0-9]+ tests?, with ([0-9]+ tests? skipped and )?[0-9]+ failures?"
all_summary() { { grep -A1 -E "^Test Suite '(All|Selected) tests' (passed|failed)" "$1" | grep -E "$summary_re" | tail -n 1; } || true; }
skipped_of() { sed -nE 's/.*with ([0-9]+) tests? skipped.*/\1/p' <<<"$1" | grep . || echo 0; }
summary=$(all_summary "$log")
if [ -z "$summary" ]; then
    tail -n 40 "$log"
    echo "tests: swift test printed no summary of all tests (exit $status): it ended before its end"
    passed=0; failed=1; status=1
else
    ran=$(sed -E 's/.*Executed ([0-9]+) tests?.*/\1/' <<<"$summary")
    failed=$(( $(sed -E 's/.* ([0-9]+) failures?.*/\1/' <<<"$summary") + $(skipped_of "$summary") ))
    passed=$((ran - failed))
    [ "$failed" -eq 0 ] || status=1
fi
stage xctest

# The whole suite under ThreadSanitizer, in a build directory of its own, but for fan-outs of subprocesses that the
# plain stage runs whole and that hold no concurrency of their own (every example against a fresh simulator; one
# check per rule's fault; mirror check against each hostile server; the Debian package): they are not counted here. Every test that runs counts, and a race report fails the stage
# even when every assertion held. The floods are smaller: a sanitized build runs ~10x slower.
if [ "${TSAN_SKIP:-0}" != 1 ]; then
    set +e
    RELIABILITY_FLOOD=100000 RELIABILITY_STORM=20000 RELIABILITY_CYCLES=1000 \
        swift test --disable-swift-testing --sanitize=thread --scratch-path .build/tsan \
        --skip ExamplesTests --skip CheckCommandTests.testEveryRuleIsBrokenByItsFaultAndByNothingElse \
        --skip HostileCheckTests --skip PackageTests >"$log" 2>&1
    tsan_status=$?
    set -e
    tsan_summary=$(all_summary "$log")
    races=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
    if [ -z "$tsan_summary" ]; then
        tail -n 40 "$log"
        echo "tsan: swift test --sanitize=thread printed no summary of all tests (exit $tsan_status): it ended before its end"
        failed=$((failed + 1)); status=1
    else
        tsan_ran=$(sed -E 's/.*Executed ([0-9]+) tests?.*/\1/' <<<"$tsan_summary")
        tsan_failed=$(( $(sed -E 's/.* ([0-9]+) failures?.*/\1/' <<<"$tsan_summary") + $(skipped_of "$tsan_summary") ))
        grep -E "error: |WARNING: ThreadSanitizer|SUMMARY: ThreadSanitizer" "$log" | head -n 40 || true
        echo "tsan: $tsan_ran tests, $tsan_failed failed, $races race reports"
        passed=$((passed + tsan_ran - tsan_failed))
        failed=$((failed + tsan_failed))
        if [ "$races" -gt 0 ]; then failed=$((failed + 1)); fi
        if [ "$tsan_status" -ne 0 ] || [ "$tsan_failed" -gt 0 ] || [ "$races" -gt 0 ]; then status=1; fi
    fi
fi
stage tsan

# The list of waits (tools/lint/waits.py): every wait in Sources/ is listed with its bound and a test that runs into
# it. One item, failed on an unlisted wait, a stale entry or a missing trigger test.
if /usr/bin/python3 tools/lint/waits.py; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    status=1
fi
stage lint

# A bounded fuzz run of each libFuzzer target under AddressSanitizer (FUZZ_SECONDS each, default 15): one item
# each, failed on any crash, hang or leak.
for target in fuzz-att-decode fuzz-engine fuzz-capture; do
    if tools/fuzz/run.sh "$target" "${FUZZ_SECONDS:-15}"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        status=1
    fi
done
stage fuzz

# The library as an embedder meets it: the GATTPeer DocC catalog (a broken symbol link fails it) and Examples/embed
# built by path and run against mirror-sim, its output compared line for line. One item each.
for check in docs example; do
    if tools/library-check.sh "$check"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        status=1
    fi
done
stage library-check
# One concurrency rule made true: a shell write runs on the link's loop (at most 8 syscalls, no clone, at most 1
# futex per write; strace counts, not times). One item.
if tools/perf/shell-syscalls.sh 300; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    status=1
fi
stage shell-syscalls

# The write path's instruction budget (tools/perf/write-budget.sh): client-only instructions per Write Request and per
# Write Command of the release `mirror bench --loopback` under callgrind, against a ceiling (fails when over) and the
# 1.3x target (printed with its gap; docs/performance.md). Counts, not times. It builds the release products the VM
# stage runs (`swift build -c release`, so that stage finds them built); its own runs (three, the median gated) take about 30 s. One item.
if tools/perf/write-budget.sh; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    status=1
fi
stage write-budget

# The VM stage: the release products, then every scenario in tools/vm/scenarios/.
if [ "${VM_SKIP:-0}" != 1 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  set +e
  swift build -c release >"$log" 2>&1
  build=$?
  if [ "$build" -ne 0 ]; then
    tail -n 40 "$log"
    echo "vm: swift build -c release failed (exit $build): no VM scenarios ran"
    failed=$((failed + 1)); status=1
  else
    $SUDO tools/vm/run.sh --all 2>&1 | tee "$log"
    vm_status=${PIPESTATUS[0]}
    vm_summary=$(grep -E "^vm: [0-9]+ passed, [0-9]+ failed$" "$log" | tail -n 1)
    if [ -z "$vm_summary" ]; then
      echo "vm: tools/vm/run.sh printed no summary (exit $vm_status)"
      failed=$((failed + 1))
    else
      passed=$((passed + $(sed -E 's/^vm: ([0-9]+) passed.*/\1/' <<<"$vm_summary")))
      failed=$((failed + $(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$vm_summary")))
    fi
    [ "$vm_status" -eq 0 ] || status=1
  fi
  set -e
fi
stage vm
[ "$failed" -eq 0 ] || status=1
echo "time: all $SECONDS s"
echo "tests: $passed passed, $failed failed"
exit "$status"
