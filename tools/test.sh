#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, then runs the unit and integration tests and a
# bounded fuzz run of the ATT decoder (FUZZ_SECONDS, default 30).
# Ends with one line "tests: N passed, N failed" over every stage.
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

echo "tests: $passed passed, $failed failed"
exit "$status"
