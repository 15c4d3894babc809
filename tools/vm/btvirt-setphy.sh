#!/usr/bin/env bash
# Builds btvirt from BlueZ 5.66 (Debian 12's) plus upstream commit 87bafc8d2 "emulator: Add support for
# BT_HCI_CMD_LE_SET_PHY" (2025-12-16): Debian's btvirt answers LE Set PHY with 0x01 Unknown HCI Command in every
# mode; this one answers a dual-mode (no -L) controller's LE Set PHY with LE PHY Update Complete. LE Read PHY and
# LE Set Data Length stay unknown (upstream has neither).
# Usage: tools/vm/btvirt-setphy.sh BLUEZ_GIT_DIR OUT_FILE   (a clone of https://github.com/bluez/bluez with the
#   5.66 tag and that commit; gcc). Run with VM_BTVIRT=OUT_FILE: vm_controllers_dual starts it instead of btvirt
#   (OUT_FILE under the host's root, e.g. the VM cache, which the guest sees at the same path; not /tmp).
set -euo pipefail
git=${1:?usage: btvirt-setphy.sh BLUEZ_GIT_DIR OUT_FILE}
out=${2:?usage: btvirt-setphy.sh BLUEZ_GIT_DIR OUT_FILE}
commit=87bafc8d2dd559ba52635cd758cdd7c096c01395
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git -C "$git" archive 5.66 | tar -x -C "$src"
git -C "$git" format-patch -1 --stdout "$commit" | patch -s -d "$src" -p1
cd "$src"
# The headers as <bluetooth/*.h>, and the two defines the sources want from autoconf's config.h.
mkdir -p lib/bluetooth && cp lib/*.h lib/bluetooth/
printf '#define VERSION "5.66+%s"\n#define PACKAGE "bluez"\n' "${commit:0:9}" >config.h
# Makefile.tools' emulator_btvirt_SOURCES, and what it uses of libshared-mainloop and libbluetooth-internal.
gcc -O2 -w -DHAVE_CONFIG_H -I. -Ilib -include config.h -o "$out" \
  emulator/main.c emulator/serial.c emulator/server.c emulator/vhci.c emulator/btdev.c emulator/bthost.c \
  emulator/smp.c emulator/phy.c emulator/amp.c emulator/le.c \
  src/shared/queue.c src/shared/util.c src/shared/crypto.c src/shared/ecc.c src/shared/mainloop.c \
  src/shared/io-mainloop.c src/shared/timeout-mainloop.c src/shared/mainloop-notify.c src/shared/hci.c \
  src/shared/hci-crypto.c src/shared/btsnoop.c src/shared/ringbuf.c src/shared/log.c lib/bluetooth.c lib/hci.c
echo "$out"
