#!/usr/bin/env bash
# The main job on the embedded default: one body scan against the bundled mirror simulator.
# Installs what is missing, builds, starts mirror-sim on a temporary unix: socket, runs `mirror scan` against
# it (extra arguments go to `mirror scan`, e.g. --json), and exits with the scan's status (0: complete, ZIP
# received and checked).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --no-build
exec tools/demo-scan.sh "$@"
