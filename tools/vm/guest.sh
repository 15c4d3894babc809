#!/bin/bash
# Runs inside the VM, chrooted into the host's root: brings loopback up, then runs one scenario
# (tools/vm/scenarios/$SCENARIO.sh, with tools/vm/lib.sh's helpers) under its time limit and writes its
# exit status to $OUT/result. Started by init.sh as: guest.sh OUT_DIR (the read-write results share).
OUT=${1:?usage: guest.sh OUT_DIR}
# shellcheck disable=SC1091
. "$OUT/env"
export OUT SCENARIO REPO VM_TIMEOUT_SCALE VM_LIMIT
export BIN="$REPO/.build/release"
cd "$OUT" || exit 1
exec >>"$OUT/guest.log" 2>&1
echo "guest: $SCENARIO starting at $(cut -d' ' -f1 /proc/uptime) s (uptime), kernel $(uname -r)"
ip link set lo up || echo "guest: ip link set lo up failed"
# Leave a quarter of the VM's limit (at least 20 s) for boot and power-off, so that a stuck step is
# stopped here and still leaves its logs, before the host kills qemu.
margin=$(( VM_LIMIT / 4 > 20 ? VM_LIMIT / 4 : 20 ))
inner=$(( VM_LIMIT - margin > 10 ? VM_LIMIT - margin : 10 ))
timeout -k 5 "$inner" /bin/bash -c '
  . "$REPO/tools/vm/lib.sh"
  trap vm_cleanup EXIT
  trap "vm_log \"scenario killed: over its limit\"; exit 124" TERM
  . "$REPO/tools/vm/scenarios/$SCENARIO.sh"
'
rc=$?
[ $rc -eq 124 ] && echo "guest: $SCENARIO did not finish within $inner s"
echo "guest: $SCENARIO exit $rc at $(cut -d' ' -f1 /proc/uptime) s (uptime)"
sync
echo "$rc" > "$OUT/result"
sync
