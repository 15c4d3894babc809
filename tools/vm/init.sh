#!/bin/busybox sh
# PID 1 of the VM rig's initramfs. Loads the Bluetooth, AF_ALG, virtio and 9p modules, mounts the host's
# root read-only (9p tag "host") and the run's read-write results directory (9p tag "out"), prepares fresh
# proc/sys/dev and tmpfs mounts inside it, chroots into it to run tools/vm/guest.sh, then powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
echo "vm-init: up $(cut -d' ' -f1 /proc/uptime) s"

fail() {
  echo "vm-init: error: $*"
  sync
  poweroff -f
}

while read -r m; do
  insmod "/modules/$m" || echo "vm-init: insmod $m failed"
done < /modules/order

opts=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o "$opts,ro,cache=loose" host /host || fail "cannot mount the host's root (9p tag host)"
mount -t proc proc /host/proc || fail "mount proc"
mount -t sysfs sysfs /host/sys || fail "mount sysfs"
mount -t devtmpfs devtmpfs /host/dev || fail "mount devtmpfs"
mkdir -p /host/dev/pts 2>/dev/null
mount -t devpts devpts /host/dev/pts 2>/dev/null
mount -t tmpfs tmpfs /host/dev/shm 2>/dev/null
for d in /host/tmp /host/run /host/var/lib/bluetooth /host/var/tmp; do
  [ -d "$d" ] && { mount -t tmpfs tmpfs "$d" || fail "mount tmpfs on $d"; }
done
mkdir -p /host/tmp/vm /host/run/dbus
mount -t 9p -o "$opts" out /host/tmp/vm || fail "cannot mount the results share (9p tag out)"
[ -f /host/tmp/vm/env ] || fail "the results share has no env file"
REPO=$(sed -n 's/^REPO=//p' /host/tmp/vm/env | tr -d "'\"")
# A checkout under a directory the guest covers with a fresh tmpfs (/tmp, /run, /var/tmp) is out of sight in the
# chroot: mount the repository's own share (9p tag repo, read-only) at its path there.
if [ ! -f "/host$REPO/tools/vm/guest.sh" ]; then
  mkdir -p "/host$REPO" && mount -t 9p -o "$opts,ro" repo "/host$REPO" || fail "cannot mount the repository (9p tag repo) at $REPO"
fi
echo "vm-init: chroot $(cut -d' ' -f1 /proc/uptime) s"
chroot /host /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 TERM=dumb /bin/bash "$REPO/tools/vm/guest.sh" /tmp/vm
echo "vm-init: guest.sh exited $? at $(cut -d' ' -f1 /proc/uptime) s"
sync
umount /host/tmp/vm 2>/dev/null
poweroff -f
