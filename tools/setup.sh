#!/usr/bin/env bash
# Installs what the project needs on Debian 12 (idempotent; needs root or sudo for apt-get),
# then builds the package. Usage: tools/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the build and the tests use. Keep this list the one place they are named.
PACKAGES=(libbluetooth-dev libcap-dev libcap2-bin libmicrohttpd-dev libssl-dev zlib1g-dev libedit-dev tshark)
# The second reader of every capture the tests write (btmon -r, beside tshark -r: Sources/TestSupport/CaptureReaders.swift).
PACKAGES+=(bluez)
# The man page's rendering (groff-base, man-db), the Debian package (dpkg-dev: dpkg-shlibdeps; binutils: readelf,
# strip) and the completion's tests (bash): tools/package-deb.sh and MirrorCLITests' ReferenceTests, PackageTests.
PACKAGES+=(groff-base man-db dpkg-dev binutils bash)
# The VM rig (tools/vm): qemu, the initramfs tools, and the Bluetooth stack's user space that runs in the guest
# (bluez, above, too).
PACKAGES+=(qemu-system-x86 busybox-static cpio kmod xz-utils zstd bluez-test-tools dbus iproute2 python3)
# The second GATT peer (tools/vm/peers): BlueZ's example-gatt-server (bluez-test-scripts), its python3 modules, patch.
PACKAGES+=(bluez-test-scripts python3-dbus python3-gi patch)
# The Database Hash computed apart from mirror in the VM (tools/vm/gatt_hash.py: AES-CMAC from python3-cryptography),
# and openssl's CMAC in DatabaseHashTests.
PACKAGES+=(python3-cryptography openssl)
# The syscalls per shell write (tools/perf/shell-syscalls.sh, a counted item of tools/test.sh): strace -f -c.
PACKAGES+=(strace)
# The write path's instruction budget (tools/perf/write-budget.sh, a counted item of tools/test.sh) and its breakdown
# (tools/perf/write-breakdown.sh): valgrind's callgrind. tools/vm/blocks-per-request.sh: qemu-user.
PACKAGES+=(valgrind qemu-user)
# The bumble scenario's peer: Google Bumble (pip) in a venv of Debian's python3 (tools/vm/bumble-venv.sh).
PACKAGES+=(python3-venv)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "${1:-}" != "--no-build" ]; then
  swift build 2>&1 | tail -n 20
fi
