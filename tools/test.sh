#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, then runs the unit and integration tests, a bounded
# fuzz run of the ATT decoder (FUZZ_SECONDS, default 30), then the end-to-end scenarios in a VM with a real
# Linux Bluetooth stack (tools/vm/run.sh, needs root or sudo).
# Ends with one line "tests: N passed, N failed" over every stage. VM_SKIP=1 leaves the VM stage out.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --no-build
swift build
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
swift test --disable-swift-testing 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
summary=$(grep -E "Executed [0-9]+ tests?, with [0-9]+ failures?" "$log" | tail -n 1)
ran=$(sed -E 's/.*Executed ([0-9]+) tests?.*/\1/' <<<"$summary")
failed=$(sed -E 's/.*with ([0-9]+) failures?.*/\1/' <<<"$summary")
[ -n "$ran" ] || { echo "tests: swift test printed no summary (exit $status)"; exit 1; }
passed=$((ran - failed))

# A bounded fuzz run of the ATT decoder (about 30 s): one more item, failed on any crash.
if tools/fuzz/run.sh fuzz-att-decode "${FUZZ_SECONDS:-30}"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    status=1
fi

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
echo "tests: $passed passed, $failed failed"
exit "$status"
