#!/usr/bin/env bash
# The main job on the embedded default. Installs what is missing, builds, then runs it.
# Until the bundled mirror simulator lands, this is the ATT codec demo.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --no-build
swift build -c release --product mirror >/dev/null
exec .build/release/mirror "$@"
