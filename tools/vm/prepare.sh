#!/usr/bin/env bash
# Prepares the VM rig's boot files: installs the Debian packages it needs (tools/setup.sh holds the list),
# fetches Debian's kernel package (Bluetooth as modules) and builds a busybox initramfs with the
# Bluetooth, AF_ALG, virtio and 9p modules. Both are cached under the cache directory, once per kernel
# version (and per init.sh / module list for the initramfs).
# Usage: tools/vm/prepare.sh CACHE_DIR   Prints three lines: "kernel PATH" (vmlinux, or vmlinuz), "initrd PATH" and
# "bumble PATH" (the python3 of Bumble's venv, tools/vm/bumble-venv.sh; empty when it could not be made).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: prepare.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

say() { echo "vm-prepare: $*" >&2; }
die() { echo "vm-prepare: error: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "the rig needs root (qemu's 9p share of / and the initramfs device nodes)"

# 1. Packages (qemu, busybox-static, cpio, kmod, bluez, bluez-test-tools, dbus): one list, in tools/setup.sh.
timeout 900 "$here/../setup.sh" --no-build >&2 || die "tools/setup.sh failed or took more than 900 s"

# 2. Which kernel: a meta package's dependency, e.g. linux-image-6.12-amd64 -> linux-image-6.12.117+deb12-amd64.
#    Debian 12's 6.12 kernel first: its 6.1 kernel (linux-image-amd64 -> linux-image-6.1.0-57-amd64) oopses
#    with "list_del corruption" in hci_chan_del (from l2cap_sock_release) when an LE CID 4 socket that
#    carried PDUs larger than the controller's 192-byte ACL buffer is closed after the link went down
#    (seen with BlueZ's l2test -b 515 as with our bearer). VM_KERNEL_META chooses another meta package.
kernel_package() { timeout 60 apt-cache depends "$1" 2>/dev/null | awk '$1=="Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}'; }
kpkg=""
for meta in ${VM_KERNEL_META:-linux-image-6.12-amd64 linux-image-amd64}; do
  kpkg=$(kernel_package "$meta" || true)
  [ -n "$kpkg" ] && break
done
if [ -z "$kpkg" ]; then
  say "apt-cache knows no kernel meta package: running apt-get update"
  timeout 600 apt-get update -qq >&2 || say "apt-get update failed"
  for meta in ${VM_KERNEL_META:-linux-image-6.12-amd64 linux-image-amd64}; do
    kpkg=$(kernel_package "$meta" || true)
    [ -n "$kpkg" ] && break
  done
fi
newest_cached() { ls -d "$cache"/kernel-*/ 2>/dev/null | while read -r d; do [ -f "$d/vmlinuz" ] && basename "$d"; done | sort -V | tail -n 1; }
if [ -z "$kpkg" ]; then
  kdirname=$(newest_cached)
  [ -n "$kdirname" ] || die "no kernel package name from apt-cache and no cached kernel"
  say "no kernel package name from apt-cache: using the cached $kdirname"
else
  kdirname="kernel-${kpkg#linux-image-}"
fi
kdir="$cache/$kdirname"
kver=${kdirname#kernel-}

# 3. The kernel package, extracted (not installed): vmlinuz and the modules tree with depmod's index.
if [ ! -f "$kdir/vmlinuz" ]; then
  tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  say "fetching $kpkg (70 to 110 MB, once per kernel version)"
  if ! (cd "$tmp" && timeout 900 apt-get download -q "$kpkg" >&2); then
    rm -rf "$tmp"; trap - EXIT
    kdirname=$(newest_cached)
    [ -n "$kdirname" ] || die "apt-get download $kpkg failed (or took more than 900 s) and no kernel is cached"
    say "apt-get download $kpkg failed: using the cached $kdirname"
    kdir="$cache/$kdirname"; kver=${kdirname#kernel-}
  else
    timeout 300 dpkg-deb -x "$tmp"/*.deb "$tmp/root" || die "dpkg-deb -x failed"
    [ -f "$tmp/root/boot/vmlinuz-$kver" ] || die "$kpkg has no boot/vmlinuz-$kver"
    grep -q '^CONFIG_BT=m' "$tmp/root/boot/config-$kver" || die "$kpkg: CONFIG_BT is not a module"
    mkdir -p "$tmp/k"
    mv "$tmp/root/boot/vmlinuz-$kver" "$tmp/k/vmlinuz"
    mv "$tmp/root/boot/config-$kver" "$tmp/k/config"
    mkdir -p "$tmp/k/root"
    mv "$tmp/root/lib" "$tmp/k/root/lib"
    timeout 300 depmod -b "$tmp/k/root" "$kver" || die "depmod failed"
    rm -rf "$kdir"
    mv "$tmp/k" "$kdir"
    rm -rf "$tmp"; trap - EXIT
  fi
fi

# 3b. The uncompressed kernel: with CONFIG_PVH qemu enters an ELF vmlinux directly, which skips the
#     firmware's kernel loading and the xz decompression (3 to 7 s per boot under TCG).
kernel="$kdir/vmlinuz"
if grep -q '^CONFIG_PVH=y' "$kdir/config" 2>/dev/null; then
  if [ ! -f "$kdir/vmlinux" ]; then
    timeout 300 python3 - "$kdir/vmlinuz" "$kdir/vmlinux.part" <<'PY' && mv "$kdir/vmlinux.part" "$kdir/vmlinux" || say "no vmlinux extracted: booting vmlinuz"
import lzma, subprocess, sys
data = open(sys.argv[1], "rb").read()
elf = b""
xz, zst = data.find(b"\xfd7zXZ\x00"), data.find(b"\x28\xb5\x2f\xfd")
if xz >= 0:      # Debian 6.1
    elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[xz:])
elif zst >= 0:   # Debian 6.12; zstd stops at the end of the frame and complains about what follows
    elf = subprocess.run(["zstd", "-dc"], input=data[zst:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
if elf[:4] != b"\x7fELF":
    sys.exit("no xz or zstd stream in vmlinuz that holds an ELF image")
open(sys.argv[2], "wb").write(elf)
PY
  fi
  [ -f "$kdir/vmlinux" ] && kernel="$kdir/vmlinux"
fi

# 4. The initramfs: busybox-static, /init, and the modules in load order (each with its dependencies
#    first, as modprobe --show-depends resolves them against depmod's output).
#    SMP's ECDH key (net/bluetooth/smp.c, smp_add_cid: crypto_alloc_kpp "ecdh-nist-p256") takes its private key
#    from the default RNG ("stdrng": drbg seeded by jitterentropy_rng, with sha512_generic and ctr): loaded before
#    ecdh_generic, else "Unable to create ECDH crypto context" and no SMP. Debian's 6.12 builds all four in.
modules=(af_alg algif_skcipher algif_hash cmac ecb crc16 sha512_generic ctr jitterentropy_rng drbg ecc rfkill ecdh_generic bluetooth hci_vhci
         netfs fscache virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
         9pnet 9pnet_virtio 9p)
key=$( { cat "$here/init.sh"; echo "${modules[*]}"; sha256sum /bin/busybox; } | sha256sum | cut -c1-12)
initrd="$kdir/initrd-$key.gz"
if [ ! -f "$initrd" ]; then
  say "building the initramfs for $kver"
  [ -x /bin/busybox ] || die "/bin/busybox missing (package busybox-static)"
  tmp=$(mktemp -d "$cache/.initrd.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp"/{bin,dev,proc,sys,host,modules}
  cp /bin/busybox "$tmp/bin/busybox"
  install -m 0755 "$here/init.sh" "$tmp/init"
  mknod -m 600 "$tmp/dev/console" c 5 1
  mknod -m 666 "$tmp/dev/null" c 1 3
  : > "$tmp/modules/order"
  for m in "${modules[@]}"; do
    # A module a newer kernel folded into another (fscache into netfs in 6.8) is skipped with a note;
    # a missing one that matters shows up as init's "cannot mount" or btvirt's failure.
    deps=$(timeout 60 modprobe -d "$kdir/root" -S "$kver" --show-depends "$m" 2>&1) || { say "no module $m in $kver: skipped"; continue; }
    while read -r kind path _; do
      [ "$kind" = insmod ] || continue          # "builtin NAME" lines: nothing to load
      name=$(basename "$path")
      case "$name" in
        *.ko.xz)  name=${name%.xz};  grep -qx "$name" "$tmp/modules/order" || xz -dc "$path" > "$tmp/modules/$name" ;;
        *.ko.zst) name=${name%.zst}; grep -qx "$name" "$tmp/modules/order" || zstd -qdc "$path" > "$tmp/modules/$name" ;;
        *.ko)     grep -qx "$name" "$tmp/modules/order" || cp "$path" "$tmp/modules/$name" ;;
        *) die "unexpected module file $path" ;;
      esac
      grep -qx "$name" "$tmp/modules/order" || echo "$name" >> "$tmp/modules/order"
    done <<<"$deps"
  done
  (cd "$tmp" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) > "$initrd.part"
  mv "$initrd.part" "$initrd"
  cp "$tmp/modules/order" "$kdir/modules-$key.order"
  rm -rf "$tmp"; trap - EXIT
fi
# 5. Google Bumble for the bumble scenario's peer (a test peer only): a venv in the cache, once per pinned set. Without
#    it (PyPI out of reach) the rig still runs, and the bumble scenario fails saying why.
bumble=$(timeout 900 "$here/bumble-venv.sh" "$cache") || { say "no Bumble venv: tools/vm/bumble-venv.sh failed"; bumble=""; }
echo "kernel $kernel"
echo "initrd $initrd"
echo "bumble $bumble"
