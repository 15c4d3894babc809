#!/usr/bin/env bash
# Makes the Python venv of the bumble scenario's peer (Google Bumble, a test peer only: nothing in the build or a
# user's path needs Python) under the VM cache, with Debian's /usr/bin/python3 (it has AF_BLUETOOTH, which Bumble's
# hci-socket transport needs) and exactly the versions in peers/bumble-requirements.txt. Once per requirements file.
# Usage: tools/vm/bumble-venv.sh CACHE_DIR   Prints the venv's python3 (a path the guest sees when CACHE_DIR is under
# the repository or the host's root, not /tmp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: bumble-venv.sh CACHE_DIR}
req="$here/peers/bumble-requirements.txt"
mkdir -p "$cache"; cache=$(cd "$cache" && pwd)
venv="$cache/bumble-venv"
stamp=$(sha256sum "$req" | cut -c1-16)
if [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$stamp" ]; then
  echo "bumble-venv: installing $(grep -m1 '^bumble==' "$req") into $venv" >&2
  rm -rf "$venv" "$venv.part"
  timeout 120 /usr/bin/python3 -m venv "$venv.part"
  timeout 600 "$venv.part/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req" >&2
  # The venv's scripts name their own path: made in place of the final one, so move it before its first use.
  mv "$venv.part" "$venv"
  sed -i "s#$venv.part#$venv#g" "$venv"/bin/* 2>/dev/null || true
  echo "$stamp" > "$venv/.requirements"
fi
"$venv/bin/python3" -c 'import bumble, socket; socket.AF_BLUETOOTH' >&2
echo "$venv/bin/python3"
