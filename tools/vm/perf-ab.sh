#!/usr/bin/env bash
# Builds the release mirror of REV (a commit, default HEAD) into .build/perf-ab/mirror, then runs the VM's perf-ab
# scenario: REV's build against this tree's (.build/release/mirror, built here first), alternating in one boot.
# Usage: tools/vm/perf-ab.sh [REV]   (root, as tools/vm/run.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=$(git rev-parse --verify "${1:-HEAD}^{commit}")
tree=$(mktemp -d /tmp/perf-ab.XXXXXX)
trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"' EXIT
git worktree add --detach "$tree" "$rev" >/dev/null
(cd "$tree" && swift build -c release --product mirror 2>&1 | tail -n 1)
mkdir -p .build/perf-ab
cp "$tree/.build/release/mirror" .build/perf-ab/mirror
echo "perf-ab: base ${rev:0:12} in .build/perf-ab/mirror" >&2
swift build -c release 2>&1 | tail -n 1
exec tools/vm/run.sh perf-ab
