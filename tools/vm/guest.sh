#!/bin/bash
# Runs inside the VM, chrooted into the host's root: brings loopback up, then runs each scenario named in
# $RUNS/env (tools/vm/scenarios/NAME.sh, with tools/vm/lib.sh's helpers) in turn, each under its own time
# limit, with its logs in $RUNS/NAME/ and its exit status in $RUNS/NAME/result (also: started, seconds,
# ended = uptime at its end). Started by init.sh as: guest.sh RUNS_DIR (the read-write share).
RUNS=${1:?usage: guest.sh RUNS_DIR}
# shellcheck disable=SC1090
. "$RUNS/env"
export REPO VM_TIMEOUT_SCALE VM_BTVIRT VM_BTVIRT_SETPHY VM_BUMBLE VM_FAULT VM_PAIRLOOP
export BIN="$REPO/.build/release"
ip link set lo up || echo "guest: ip link set lo up failed" >&2
uptime_s() { cut -d' ' -f1 /proc/uptime; }

for SCENARIO in $SCENARIOS; do
  OUT="$RUNS/$SCENARIO"
  mkdir -p "$OUT"
  eval "VM_LIMIT=\${LIMIT_${SCENARIO//[^A-Za-z0-9_]/_}:-120}"
  # The guest's root is the host's, read-only: each scenario's GATT cache and shell history go to its own
  # directory (so scenarios do not share a cache, and a cache write works as on a user's machine).
  XDG_CACHE_HOME="$OUT/xdg-cache" XDG_STATE_HOME="$OUT/xdg-state"
  export OUT SCENARIO VM_LIMIT XDG_CACHE_HOME XDG_STATE_HOME
  : > "$OUT/started"
  {
    echo "guest: $SCENARIO starting at $(uptime_s) s (uptime), kernel $(uname -r)"
    cd "$OUT" || exit 1
    # Just under the scenario's limit: a stuck step is stopped here and leaves its logs.
    inner=$(( VM_LIMIT > 15 ? VM_LIMIT - 5 : 10 ))
    t0=${EPOCHREALTIME/./}
    timeout -k 5 "$inner" /bin/bash -c '
      . "$REPO/tools/vm/lib.sh"
      trap vm_cleanup EXIT
      trap "vm_log \"scenario killed: over its limit\"; exit 124" TERM
      . "$REPO/tools/vm/scenarios/$SCENARIO.sh"
    ' &
    group=$!   # timeout(1) leads its own process group
    wait $group
    rc=$?
    # Whatever the scenario left behind (a forked child of a stopped step) goes with its group.
    kill -KILL -- "-$group" 2>/dev/null
    t=$(( ${EPOCHREALTIME/./} - t0 ))
    [ $rc -eq 124 ] && echo "guest: $SCENARIO did not finish within $inner s"
    echo "guest: $SCENARIO exit $rc at $(uptime_s) s (uptime)"
    # The next scenario starts its own controllers: wait (bounded) until these are gone.
    for _ in $(seq 100); do
      compgen -G "/sys/class/bluetooth/hci*" >/dev/null || break
      sleep 0.1
    done
    compgen -G "/sys/class/bluetooth/hci*" >/dev/null && echo "guest: controllers still present after $SCENARIO: $(ls /sys/class/bluetooth)"
    printf '%d.%d\n' $((t / 1000000)) $(((t % 1000000) / 100000)) > "$OUT/seconds"
    uptime_s > "$OUT/ended"
    echo "$rc" > "$OUT/result"
  } >>"$OUT/guest.log" 2>&1
done
sync
