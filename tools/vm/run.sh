#!/usr/bin/env bash
# The end-to-end rig: boots Debian's kernel (Bluetooth as modules) under qemu (TCG), chroots into the
# host's root shared read-only over 9p, and runs scenario scripts (tools/vm/scenarios/NAME.sh: BlueZ's
# linked virtual controllers from btvirt, peers, and the project's release build) in it.
# Usage: tools/vm/run.sh [--list | --all | SCENARIO...]
#   (needs root; builds nothing: run `swift build -c release` first; --all runs every scenario, by name, but those
#   marked "# vm-manual: yes", such as perf, which run only when named)
# Prints "vm: NAME passed|failed (N.N s)" per scenario and "vm: N passed, N failed" last;
# exits 0 only when every named scenario passed. One VM boot runs them all in turn (VM_ISOLATE=1: one boot
# each). Logs: tools/vm/cache/runs/NAME/ (guest.log, each step's own STEP.log, hci.btsnoop) and
# tools/vm/cache/runs/console-FIRST.log (kernel and init). Environment: VM_CACHE (cache directory),
# VM_TIMEOUT_SCALE (multiplies every scenario's time limit, default 1), VM_ISOLATE=1 (one boot per scenario),
# VM_QEMU_EXTRA (more qemu options), VM_BTVIRT (the btvirt vm_controllers_dual starts), VM_BTVIRT_SETPHY (the one link-phy starts; default:
# tools/vm/btvirt-setphy.sh builds it into the cache), VM_FAULT (a fault a scenario injects into its own rig, to
# test its recovery: bluetoothd-segv, pair-bluez), VM_PAIRLOOP (pairloop-bluez's rounds, default 20). The guest also gets VM_BUMBLE (the python3 of prepare.sh's Bumble venv).
# The time printed per scenario is measured in the guest (the boot is printed once, on stderr).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${VM_CACHE:-$here/cache}
scale=${VM_TIMEOUT_SCALE:-1}

if [ "${1:-}" = "--list" ]; then
  for f in "$here"/scenarios/*.sh; do
    n=$(basename "$f" .sh)
    printf '%-12s %s\n' "$n" "$(sed -n 's/^# vm-about: //p' "$f" | head -n 1)"
  done
  exit 0
fi
if [ "${1:-}" = "--all" ]; then
  # smoke first: it checks the rig alone (kernel, btvirt, BlueZ's l2test), before any project code runs.
  # A scenario marked "# vm-manual: yes" (a measurement, not a check) runs only when named.
  set -- $( { [ -f "$here/scenarios/smoke.sh" ] && echo smoke
              for f in "$here"/scenarios/*.sh; do
                n=$(basename "$f" .sh)
                [ "$n" = smoke ] || grep -q '^# vm-manual: yes' "$f" || echo "$n"
              done; } )
fi
[ $# -gt 0 ] || { echo "usage: tools/vm/run.sh [--list | --all | SCENARIO...]" >&2; exit 2; }

# One run at a time per cache directory (the kernel fetch and runs/NAME are shared).
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 1800 9 || { echo "vm: another run holds $cache/.lock for more than 1800 s"; exit 1; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

t0=$(now)
boot=$(timeout 1800 "$here/prepare.sh" "$cache")
status=$?
if [ $status -ne 0 ]; then
  echo "vm: the rig could not be prepared (tools/vm/prepare.sh exit $status)"
  for name in "$@"; do echo "vm: $name failed (0.0 s)"; done
  echo "vm: 0 passed, $# failed"
  exit 1
fi
kernel=$(awk '$1=="kernel"{print $2}' <<<"$boot")
initrd=$(awk '$1=="initrd"{print $2}' <<<"$boot")
VM_BUMBLE=$(awk '$1=="bumble"{print $2}' <<<"$boot")
echo "vm: prepared in $(elapsed "$t0" "$(now)") s ($(basename "$(dirname "$kernel")"))" >&2
# The btvirt with LE Set PHY (BlueZ 5.66 + upstream's commit), for the scenarios that ask for a PHY (link-phy):
# built once into the cache; when it cannot be built, VM_BTVIRT_SETPHY stays empty and those scenarios fail.
if [ -z "${VM_BTVIRT_SETPHY:-}" ]; then
  VM_BTVIRT_SETPHY=$(timeout 600 "$here/btvirt-setphy.sh" "$cache" 2>"$cache/btvirt-setphy.log") \
    || { VM_BTVIRT_SETPHY=""; echo "vm: btvirt with LE Set PHY not built: $(tail -n 1 "$cache/btvirt-setphy.log")" >&2; }
fi

# qboot (qemu-system-data) reaches the kernel about a second sooner than SeaBIOS under TCG.
bios=""
[ -f /usr/share/qemu/qboot.rom ] && bios="-bios /usr/share/qemu/qboot.rom"

runs="$cache/runs"
mkdir -p "$runs"

# boot NAMES...: one VM that runs the named scenarios in turn (guest.sh), each under its own limit; the host
# kills qemu after the sum of their limits plus 60 s for boot and power-off. Console: $runs/console-FIRST.log.
boot() {
  local names=("$@") total=60 n limit
  local console="$runs/console-${names[0]}.log"
  rm -f "$console" "$runs/qemu.log"
  for n in "${names[@]}"; do total=$((total + ${limits[$n]})); done
  {
    printf 'REPO=%q\n' "$repo"
    printf 'VM_TIMEOUT_SCALE=%q\n' "$scale"
    printf 'VM_BTVIRT=%q\n' "${VM_BTVIRT:-}"
    printf 'VM_BTVIRT_SETPHY=%q\n' "${VM_BTVIRT_SETPHY:-}"
    printf 'VM_BUMBLE=%q\n' "${VM_BUMBLE:-}"
    printf 'VM_FAULT=%q\n' "${VM_FAULT:-}"
    printf 'VM_PAIRLOOP=%q\n' "${VM_PAIRLOOP:-}"
    printf 'SCENARIOS=%q\n' "${names[*]}"
    for n in "${names[@]}"; do printf 'LIMIT_%s=%q\n' "${n//[^A-Za-z0-9_]/_}" "${limits[$n]}"; done
  } > "$runs/env"
  local start; start=$(now)
  # shellcheck disable=SC2086
  timeout -k 5 "$total" qemu-system-x86_64 \
    -accel tcg -cpu max -m 1024 -smp 2 $bios ${VM_QEMU_EXTRA:-} \
    -nodefaults -no-user-config -display none -no-reboot \
    -serial "file:$console" \
    -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 quiet loglevel=5 panic=-1 mitigations=off" \
    -virtfs "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$runs,mount_tag=out,security_model=none,multidevs=remap" \
    -virtfs "local,path=$repo,mount_tag=repo,security_model=none,readonly=on,multidevs=remap" \
    </dev/null >"$runs/qemu.log" 2>&1
  local qrc=$?
  local took; took=$(elapsed "$start" "$(now)")
  local booted; booted=$(tr -d '\r' <"$console" | sed -n 's/^vm-init: chroot \([0-9.]*\) s$/\1/p' | head -n 1)
  echo "vm: one boot for ${names[*]}: ${took} s in all, ${booted:-?} s to the chroot (qemu exit $qrc)" >&2
  # A guest kernel that oopsed fails the scenario it happened in and every later one of this boot.
  local oops oops_at=""
  oops=$(grep -m 1 -E "kernel BUG at|Oops:|general protection fault|list_del corruption|BUG: unable to handle|Kernel panic" "$console" 2>/dev/null)
  [ -n "$oops" ] && oops_at=$(sed -n 's/^\[ *\([0-9]*\)\.[0-9]*\].*/\1/p' <<<"$oops")
  # An oops while the kernel boots, before any scenario started (under TCG with two vCPUs the kernel's int3-based
  # code patching can trap on a stale translation: "Oops: int3" in early boot), is the emulator's, not a
  # scenario's: said, and the VM booted once more. A second one fails the scenarios as any oops does.
  if [ -n "$oops" ] && [ -z "${VM_REBOOTED:-}" ] && ! ls "$runs/${names[0]}/started" >/dev/null 2>&1; then
    echo "vm: the guest kernel oopsed while booting, before any scenario started: ${oops#\[*\] }; booting again" >&2
    cp "$console" "$runs/console-${names[0]}-boot-oops.log"
    VM_REBOOTED=1 boot "$@"
    return
  fi
  for n in "${names[@]}"; do
    local out="$runs/$n" result secs reason=""
    result=$(cat "$out/result" 2>/dev/null)
    secs=$(cat "$out/seconds" 2>/dev/null)
    local ended; ended=$(cat "$out/ended" 2>/dev/null)
    if [ -n "$oops_at" ] && { [ -z "$ended" ] || [ "${ended%.*}" -ge "$oops_at" ]; }; then
      reason="the guest kernel oopsed: ${oops#\[*\] } (see $(basename "$console"))"
    elif [ -z "$result" ] && [ -f "$out/started" ]; then
      reason="the guest did not finish it: qemu $( [ $qrc -eq 124 ] || [ $qrc -eq 137 ] && echo "killed after $total s" || echo "exit $qrc")"
    elif [ -z "$result" ]; then
      reason="not run: the guest stopped before it (qemu exit $qrc)"
    elif [ "$result" != 0 ]; then
      reason="scenario exit $result"
    fi
    if [ -z "$reason" ]; then
      echo "vm: $n passed (${secs:-?} s)"; passed=$((passed + 1)); continue
    fi
    echo "vm: $n: $reason"
    echo "vm: $n: logs in $out"
    [ -f "$out/guest.log" ] && sed 's/^/  guest| /' "$out/guest.log" | tail -n 40
    failed=$((failed + 1))
    if [ -z "$result" ] || [ -n "$oops_at" ]; then
      [ -s "$runs/qemu.log" ] && sed 's/^/  qemu| /' "$runs/qemu.log" | tail -n 20
      sed 's/^/  console| /' "$console" 2>/dev/null | tail -n 30
    fi
    echo "vm: $n failed (${secs:-0.0} s)"
  done
}

# Each scenario declares its own time limit ("# vm-timeout: SECONDS", default 120).
declare -A limits
valid=()
passed=0 failed=0
for name in "$@"; do
  [ -n "${limits[$name]+x}" ] && { echo "vm: $name is named twice: it runs once" >&2; continue; }
  script="$here/scenarios/$name.sh"
  rm -rf "${runs:?}/$name"; mkdir -p "$runs/$name"
  if [ ! -f "$script" ]; then
    echo "vm: $name: no such scenario ($script)"
    echo "vm: $name failed (0.0 s)"; failed=$((failed + 1)); continue
  fi
  limit=$(sed -n 's/^# vm-timeout: *\([0-9]*\).*/\1/p' "$script" | head -n 1)
  limits[$name]=$(awk -v l="${limit:-120}" -v s="$scale" 'BEGIN { printf "%d", l * s }')
  valid+=("$name")
done

# One boot for all (each scenario stops what it started; guest.sh waits for the controllers to go away
# between them), or VM_ISOLATE=1: one boot per scenario.
if [ "${#valid[@]}" -gt 0 ]; then
  if [ "${VM_ISOLATE:-0}" = 1 ]; then
    for name in "${valid[@]}"; do boot "$name"; done
  else
    boot "${valid[@]}"
  fi
fi
echo "vm: $passed passed, $failed failed"
[ $failed -eq 0 ] && [ $passed -gt 0 ]
