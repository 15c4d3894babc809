#!/usr/bin/env bash
# One scan against the bundled simulator: starts mirror-sim on a temporary unix: socket, runs
# `mirror scan unix:PATH` against it (extra arguments go to `mirror scan`, e.g. --json), stops the
# simulator, and exits with the scan's status (0 only when the scan completed and the ZIP arrived).
# The received ZIP stays in the printed directory. MIRROR_SIM_ARGS adds simulator flags, e.g.
#   MIRROR_SIM_ARGS="--scale misaligned" tools/demo-scan.sh      (SCALE_ALIGNMENT before the Write Response)
set -euo pipefail
cd "$(dirname "$0")/.."
config=${MIRROR_BUILD_CONFIG:-debug}
swift build -c "$config" --product mirror-sim >/dev/null
swift build -c "$config" --product mirror >/dev/null
bin=$(swift build -c "$config" --show-bin-path)

work=$(mktemp -d "${TMPDIR:-/tmp}/mirror-demo.XXXXXX")
sock="$work/mirror-sim.sock"
mkfifo "$work/ready"
# shellcheck disable=SC2086
"$bin/mirror-sim" "unix:$sock" --quiet ${MIRROR_SIM_ARGS:-} >"$work/ready" 2>"$work/mirror-sim.log" &
sim=$!
stop_sim() {
  kill "$sim" 2>/dev/null || true
  wait "$sim" 2>/dev/null || true
  rm -f "$work/ready" "$sock"
}
trap stop_sim EXIT
# The simulator prints one line when it listens; reading the FIFO waits for it (or for its exit).
if ! read -r line <"$work/ready" || [ -z "$line" ]; then
  echo "demo-scan: mirror-sim did not start:" >&2
  cat "$work/mirror-sim.log" >&2
  exit 1
fi
echo "demo-scan: $line" >&2
set +e
"$bin/mirror" scan "unix:$sock" --upload-dir "$work" --upload-port 0 "$@"
status=$?
set -e
echo "demo-scan: mirror scan exited with $status; uploads and the simulator's log are in $work" >&2
exit "$status"
