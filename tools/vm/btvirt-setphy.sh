#!/usr/bin/env bash
# Builds btvirt from BlueZ 5.66 (Debian 12's source, bluez_5.66.orig.tar.xz from deb.debian.org, checked against
# the SHA-256 of Debian's .dsc) plus upstream commit 87bafc8d2 "emulator: Add support for BT_HCI_CMD_LE_SET_PHY"
# (tools/vm/patches/btvirt-le-set-phy.patch): Debian's btvirt answers LE Set PHY with 0x01 Unknown HCI Command in
# every mode; this one answers a dual-mode (no -L) controller's LE Set PHY with LE PHY Update Complete. LE Read PHY
# and LE Set Data Length stay unknown (upstream has neither).
# Usage: tools/vm/btvirt-setphy.sh CACHE_DIR   prints the binary's path (CACHE_DIR/btvirt-setphy-5.66), building it
#   once (gcc, no autotools). run.sh passes it to the guest as VM_BTVIRT; vm_controllers_dual starts it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: btvirt-setphy.sh CACHE_DIR}
out="$cache/btvirt-setphy-5.66"
patchfile="$here/patches/btvirt-le-set-phy.patch"
if [ -x "$out" ] && [ "$out" -nt "$patchfile" ]; then echo "$out"; exit 0; fi
url=http://deb.debian.org/debian/pool/main/b/bluez/bluez_5.66.orig.tar.xz
sha=a231fb9d151780edf6d2536c81914e2dbd3daa36b68f486badaf98a7f34021e4
tarball="$cache/bluez_5.66.orig.tar.xz"
if ! echo "$sha  $tarball" | sha256sum -c --status 2>/dev/null; then
  python3 -I -S -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1], timeout=120).read())' \
    "$url" "$tarball.part" >&2 || { echo "btvirt-setphy: could not fetch $url" >&2; exit 1; }
  mv "$tarball.part" "$tarball"
  echo "$sha  $tarball" | sha256sum -c --status || { echo "btvirt-setphy: $tarball does not match Debian's SHA-256 $sha" >&2; exit 1; }
fi
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
tar -xJf "$tarball" -C "$src" --strip-components=1
patch -s -d "$src" -p1 <"$patchfile"
cd "$src"
# The headers as <bluetooth/*.h>, and the two defines the sources want from autoconf's config.h.
mkdir -p lib/bluetooth && cp lib/*.h lib/bluetooth/
printf '#define VERSION "5.66+87bafc8d2"\n#define PACKAGE "bluez"\n' >config.h
# Makefile.tools' emulator_btvirt_SOURCES, and what it uses of libshared-mainloop and libbluetooth-internal.
gcc -O2 -w -DHAVE_CONFIG_H -I. -Ilib -include config.h -o "$out.part" \
  emulator/main.c emulator/serial.c emulator/server.c emulator/vhci.c emulator/btdev.c emulator/bthost.c \
  emulator/smp.c emulator/phy.c emulator/amp.c emulator/le.c \
  src/shared/queue.c src/shared/util.c src/shared/crypto.c src/shared/ecc.c src/shared/mainloop.c \
  src/shared/io-mainloop.c src/shared/timeout-mainloop.c src/shared/mainloop-notify.c src/shared/hci.c \
  src/shared/hci-crypto.c src/shared/btsnoop.c src/shared/ringbuf.c src/shared/log.c lib/bluetooth.c lib/hci.c >&2
mv "$out.part" "$out"
echo "$out"
