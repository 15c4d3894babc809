#!/usr/bin/env bash
# The end-to-end rig: boots Debian's kernel (Bluetooth as modules) under qemu (TCG), chroots into the
# host's root shared read-only over 9p, starts BlueZ's linked virtual controllers (btvirt) and runs one
# scenario script (tools/vm/scenarios/NAME.sh) per VM boot against the project's release build.
# Usage: tools/vm/run.sh [--list | --all | SCENARIO...]
#   (needs root; builds nothing: run `swift build -c release` first; --all runs every scenario, by name)
# Prints "vm: NAME passed|failed (N.N s)" per scenario and "vm: N passed, N failed" last;
# exits 0 only when every named scenario passed. Logs: tools/vm/cache/runs/NAME/ (console.log, guest.log,
# each step's own STEP.log, hci.btsnoop). Environment: VM_CACHE (cache directory), VM_TIMEOUT_SCALE
# (multiplies every scenario's time limit, default 1), VM_KEEP_GOING=0 (stop at the first failure),
# VM_QEMU_EXTRA (more qemu options).
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
  set -- $( { [ -f "$here/scenarios/smoke.sh" ] && echo smoke
              for f in "$here"/scenarios/*.sh; do n=$(basename "$f" .sh); [ "$n" = smoke ] || echo "$n"; done; } )
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
echo "vm: prepared in $(elapsed "$t0" "$(now)") s ($(basename "$(dirname "$kernel")"))" >&2

# qboot (qemu-system-data) reaches the kernel about a second sooner than SeaBIOS under TCG.
bios=""
[ -f /usr/share/qemu/qboot.rom ] && bios="-bios /usr/share/qemu/qboot.rom"

passed=0 failed=0
for name in "$@"; do
  script="$here/scenarios/$name.sh"
  out="$cache/runs/$name"
  rm -rf "$out"; mkdir -p "$out"
  if [ ! -f "$script" ]; then
    echo "vm: $name: no such scenario ($script)"
    echo "vm: $name failed (0.0 s)"; failed=$((failed + 1)); continue
  fi
  # A scenario declares its own time limit for the whole VM run ("# vm-timeout: SECONDS").
  limit=$(sed -n 's/^# vm-timeout: *\([0-9]*\).*/\1/p' "$script" | head -n 1)
  limit=$(awk -v l="${limit:-120}" -v s="$scale" 'BEGIN { printf "%d", l * s }')
  {
    printf 'SCENARIO=%q\n' "$name"
    printf 'REPO=%q\n' "$repo"
    printf 'VM_TIMEOUT_SCALE=%q\n' "$scale"
    printf 'VM_LIMIT=%q\n' "$limit"
  } > "$out/env"
  start=$(now)
  # shellcheck disable=SC2086
  timeout -k 5 "$limit" qemu-system-x86_64 \
    -accel tcg -cpu max -m 1024 -smp 2 $bios ${VM_QEMU_EXTRA:-} \
    -nodefaults -no-user-config -display none -no-reboot \
    -serial "file:$out/console.log" \
    -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 quiet loglevel=5 panic=-1 mitigations=off" \
    -virtfs "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$out,mount_tag=out,security_model=none,multidevs=remap" \
    </dev/null >"$out/qemu.log" 2>&1
  qrc=$?
  took=$(elapsed "$start" "$(now)")
  result=$(cat "$out/result" 2>/dev/null)
  # A guest kernel that oopsed fails the scenario whatever its steps saw, and is named as the cause.
  oops=$(grep -m 1 -E "kernel BUG at|Oops:|general protection fault|list_del corruption|BUG: unable to handle|Kernel panic" "$out/console.log" 2>/dev/null)
  if [ "$result" = 0 ] && [ $qrc -eq 0 ] && [ -z "$oops" ]; then
    echo "vm: $name passed ($took s)"; passed=$((passed + 1)); continue
  fi
  if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then
    echo "vm: $name: the guest did not finish within $limit s: qemu killed"
  elif [ -z "$result" ]; then
    echo "vm: $name: the guest wrote no result (qemu exit $qrc)"
  else
    echo "vm: $name: scenario exit $result"
  fi
  [ -n "$oops" ] && echo "vm: $name: the guest kernel oopsed: ${oops#\[*\] } (see console.log)"
  echo "vm: $name: logs in $out"
  [ -s "$out/qemu.log" ] && sed 's/^/  qemu| /' "$out/qemu.log" | tail -n 20
  [ -f "$out/guest.log" ] && sed 's/^/  guest| /' "$out/guest.log" | tail -n 40
  sed 's/^/  console| /' "$out/console.log" 2>/dev/null | tail -n 30
  echo "vm: $name failed ($took s)"; failed=$((failed + 1))
  [ "${VM_KEEP_GOING:-1}" = 0 ] && break
done
echo "vm: $passed passed, $failed failed"
[ $failed -eq 0 ] && [ $passed -eq $# ]
