#!/bin/bash
# Helpers for VM scenarios (sourced inside the guest by guest.sh). Every wait is bounded; a step's output
# goes to $OUT/STEP.log; the first failed assertion ends the scenario with a message in guest.log.
# Time limits given to these helpers are multiplied by VM_TIMEOUT_SCALE.

VM_PIDS=()
# Clock in microseconds from bash itself: every fork costs about 50 ms under TCG.
vm_now() { local t=${EPOCHREALTIME/./}; echo "$t"; }
VM_T0=$(vm_now)

# vm_secs MICROSECONDS: "S.SS".
vm_secs() { printf '%d.%02d' $(($1 / 1000000)) $((($1 % 1000000) / 10000)); }

# vm_log MESSAGE: a timestamped line in guest.log (seconds since the scenario started).
vm_log() { printf '[%6s] %s\n' "$(vm_secs $(($(vm_now) - VM_T0)))" "$*"; }

# vm_fail MESSAGE: ends the scenario as failed.
vm_fail() { vm_log "FAIL: $*"; exit 1; }

# vm_scaled SECONDS: a time limit multiplied by VM_TIMEOUT_SCALE (at least 1).
vm_scaled() {
  local s=${VM_TIMEOUT_SCALE:-1}
  if [[ $s =~ ^[0-9]+$ ]]; then echo $(($1 * s))
  else awk -v l="$1" -v s="$s" 'BEGIN { v = l * s; if (v < 1) v = 1; printf "%d", v }'
  fi
}

# vm_run STEP LIMIT CMD...: runs CMD with a time limit, output in $OUT/STEP.log; sets VM_RC, returns it.
vm_run() {
  local step=$1 limit; limit=$(vm_scaled "$2"); shift 2
  local t; t=$(vm_now)
  timeout -k 3 "$limit" "$@" >"$OUT/$step.log" 2>&1
  VM_RC=$?
  local took; took=$(vm_secs $(($(vm_now) - t)))
  if [ $VM_RC -eq 124 ] || [ $VM_RC -eq 137 ]; then
    vm_log "step $step: killed after its limit of $limit s ($*)"
  else
    vm_log "step $step: exit $VM_RC in $took s"
  fi
  return $VM_RC
}

# vm_ok STEP LIMIT CMD...: vm_run, and the scenario fails unless CMD exits 0.
vm_ok() {
  local step=$1
  vm_run "$@" && return 0
  sed 's/^/    | /' "$OUT/$step.log" | tail -n 20
  vm_fail "$step exited $VM_RC"
}

# vm_bg STEP CMD...: starts CMD in the background (output in $OUT/STEP.log); stopped by vm_cleanup.
vm_bg() {
  local step=$1; shift
  "$@" >"$OUT/$step.log" 2>&1 &
  VM_PIDS+=($!)
  eval "VM_PID_${step//[^A-Za-z0-9_]/_}=$!"
  vm_log "started $step (pid $!): $*"
}

# vm_pid STEP: the pid of a vm_bg step.
vm_pid() { eval "echo \${VM_PID_${1//[^A-Za-z0-9_]/_}:-}"; }

# vm_wait WHAT LIMIT CMD...: retries CMD every 0.1 s until it succeeds; fails the scenario after LIMIT s.
vm_wait() {
  local what=$1 limit; limit=$(vm_scaled "$2"); shift 2
  local deadline=$(($(vm_now) + limit * 1000000))
  until "$@" >/dev/null 2>&1; do
    [ "$(vm_now)" -gt $deadline ] && vm_fail "waited $limit s for $what"
    sleep 0.1
  done
  vm_log "ready: $what"
}

# vm_wait_log STEP PATTERN LIMIT: waits until $OUT/STEP.log has a line matching PATTERN (grep -E).
vm_wait_log() { vm_wait "'$2' in $1.log" "$3" grep -qE "$2" "$OUT/$1.log"; }

# vm_stop STEP [LIMIT] [SIGNAL]: sends SIGNAL (default INT), then waits up to LIMIT s (default 5) for
# the step to exit; SIGKILL after that. Sets VM_RC to its exit status.
vm_stop() {
  local pid; pid=$(vm_pid "$1"); local limit=${2:-5} sig=${3:-INT}
  [ -n "$pid" ] || vm_fail "vm_stop: no background step $1"
  kill -"$sig" "$pid" 2>/dev/null
  local deadline=$(($(vm_now) + $(vm_scaled "$limit") * 1000000))
  while kill -0 "$pid" 2>/dev/null && [ "$(vm_now)" -lt $deadline ]; do sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { vm_log "step $1 ignored SIG$sig for $limit s: SIGKILL"; kill -KILL "$pid"; }
  wait "$pid" 2>/dev/null; VM_RC=$?
  vm_log "stopped $1: exit $VM_RC"
}

# vm_join STEP LIMIT: waits up to LIMIT s for a background step to exit on its own; sets VM_RC.
vm_join() {
  local pid; pid=$(vm_pid "$1"); local limit; limit=$(vm_scaled "$2")
  local deadline=$(($(vm_now) + limit * 1000000))
  while kill -0 "$pid" 2>/dev/null && [ "$(vm_now)" -lt $deadline ]; do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"; wait "$pid" 2>/dev/null
    vm_fail "$1 did not exit within $limit s"
  fi
  wait "$pid"; VM_RC=$?
  vm_log "$1 exited $VM_RC"
}

# vm_alive STEP SECONDS WHAT: asserts that a background step is still running SECONDS from now (it must
# not end by itself in that time: a dropped link, a crash).
vm_alive() {
  local pid; pid=$(vm_pid "$1")
  local deadline=$(($(vm_now) + $2 * 1000000))
  while [ "$(vm_now)" -lt $deadline ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null; VM_RC=$?
      sed 's/^/    | /' "$OUT/$1.log" | tail -n 20
      vm_fail "$1 ended by itself (exit $VM_RC) before $2 s: $3"
    fi
    sleep 0.5
  done
  vm_log "ok: $3 ($1 still running after $2 s)"
}

# vm_cleanup: stops every background step, newest first (the EXIT trap of each scenario).
vm_cleanup() {
  local i pid
  for ((i = ${#VM_PIDS[@]} - 1; i >= 0; i--)); do
    pid=${VM_PIDS[$i]}
    kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
  done
  local deadline=$(($(vm_now) + 2000000))
  while [ "$(vm_now)" -lt $deadline ]; do
    local alive=0
    for pid in "${VM_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for pid in "${VM_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null; done
  VM_PIDS=()
}

# vm_need PRODUCT...: fails unless the release build has these executables.
vm_need() {
  local p
  for p in "$@"; do
    [ -x "$BIN/$p" ] || vm_fail "$BIN/$p is missing: run 'swift build -c release' first"
  done
}

# vm_controllers: starts btvirt's two linked LE-only controllers (hci0 00:AA:01:00:00:00 and
# hci1 00:AA:01:01:00:01), a btmon capture ($OUT/hci.btsnoop; its decoded text would only cost time), and
# powers both on.
# Set VM_BTMON=0 before it to go without the capture.
vm_controllers() {
  [ "${VM_BTMON:-1}" = 0 ] || vm_bg btmon sh -c 'exec btmon -w "$1" >/dev/null' btmon "$OUT/hci.btsnoop"
  vm_bg btvirt btvirt -l2 -L
  vm_wait "hci0 and hci1" 15 test -e /sys/class/bluetooth/hci1 -a -e /sys/class/bluetooth/hci0
  vm_ok hci0-up 15 hciconfig hci0 up
  vm_ok hci1-up 15 hciconfig hci1 up
}

# vm_advertise hciN: makes the controller connectable and advertising (legacy HCI, no bluetoothd).
vm_advertise() { vm_ok "$1-leadv" 15 hciconfig "$1" leadv 0; }

# vm_controllers_dual: btvirt's two linked dual-mode controllers (BR/EDR and LE, Bluetooth 5.2: 2M and Coded
# PHY, extended advertising; same addresses as vm_controllers), the btmon capture, and no bluetoothd: mgmt
# (btmgmt) enables LE, which the kernel leaves off on a dual-mode controller (an LE connect fails with
# ECONNREFUSED before any HCI command), powers both on, and makes hci1 connectable and advertising.
# The kernel then scans, advertises and connects with the extended commands (Vol 4 Part E 7.8.53-7.8.66).
# VM_BTVIRT (run.sh passes it on) names another btvirt, e.g. tools/vm/btvirt-setphy.sh's (LE Set PHY).
vm_controllers_dual() {
  [ "${VM_BTMON:-1}" = 0 ] || vm_bg btmon sh -c 'exec btmon -w "$1" >/dev/null' btmon "$OUT/hci.btsnoop"
  vm_bg btvirt "${VM_BTVIRT:-btvirt}" -l2
  vm_wait "hci0 and hci1" 15 test -e /sys/class/bluetooth/hci1 -a -e /sys/class/bluetooth/hci0
  local i
  for i in hci0 hci1; do
    vm_ok "$i-le" 15 btmgmt -i "$i" le on
    vm_ok "$i-power" 15 btmgmt -i "$i" power on
  done
  vm_ok hci1-connectable 15 btmgmt -i hci1 connectable on
  vm_advertise_dual hci1
}

# vm_advertise_dual hciN: hciN advertising again after a disconnect, on a vm_controllers_dual controller. The
# kernel re-enables its set by itself on Disconnect Complete (the peer's LE Extended Create Connection finds only
# an extended set in btvirt, never legacy advertising): this waits for that, then sets the mgmt flag (a no-op
# when on). Never `advertising off` then `on` there: btvirt 5.66 answers the kernel's disable of the stopped
# set with 0x0C Command Disallowed and it stays off (a second set: `btmgmt -i hciN add-adv -c 1`).
vm_advertise_dual() {
  vm_wait "no LE link left on $1" 20 sh -c "! hcitool -i $1 con | grep -q ' LE '"
  vm_ok "$1-advertising" 15 btmgmt -i "$1" advertising on
}

# vm_json FILE EXPR WHAT [EXPR WHAT]...: asserts Python expressions over the JSON in FILE, in one python3
# run (each start costs about a second under TCG). j is the last line that parses as a JSON object or
# array (else the whole file), js every such line in order (JSON lines). Stops at the first false one.
vm_json() {
  local file=$1; shift
  local out rc
  out=$(python3 -I -S - "$file" "$@" <<'PY'
import json, sys
path, pairs = sys.argv[1], sys.argv[2:]
text = open(path, encoding="utf-8", errors="replace").read()
# Every JSON document that starts a line (one per line, or pretty-printed over several), between log lines.
docs, pos, decoder = [], 0, json.JSONDecoder()
while pos < len(text):
    end = text.find("\n", pos)
    end = len(text) if end < 0 else end
    if text[pos:end].lstrip().startswith(("{", "[")):
        try:
            doc, stop = decoder.raw_decode(text, pos + len(text[pos:end]) - len(text[pos:end].lstrip()))
            docs.append(doc)
            end = text.find("\n", stop)
            end = len(text) if end < 0 else end
        except ValueError:
            pass
    pos = end + 1
if not docs:
    print(f"FAIL no JSON in {path}")
    sys.exit(2)
for i in range(0, len(pairs), 2):
    expr = pairs[i]
    what = pairs[i + 1] if i + 1 < len(pairs) else expr
    try:
        ok = eval(expr, {"j": docs[-1], "js": docs, "json": json})
    except Exception as e:
        print(f"    | {type(e).__name__}: {e}")
        ok = False
    if not ok:
        for line in json.dumps(docs[-1], indent=1)[:3000].splitlines():
            print("    | " + line)
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok {what}")
PY
)
  rc=$?
  local line
  while IFS= read -r line; do
    case $line in
      "ok "*) vm_log "ok: ${line#ok }" ;;
      "FAIL "*) vm_fail "assertion failed on $(basename "$file"): ${line#FAIL }" ;;
      *) echo "$line" ;;
    esac
  done <<<"$out"
  [ $rc -eq 0 ] || vm_fail "assertion failed on $(basename "$file") (python3 exit $rc)"
}

# vm_grep FILE PATTERN [WHAT]: asserts that FILE has a line matching PATTERN (grep -E).
vm_grep() {
  if grep -qE "$2" "$1"; then vm_log "ok: ${3:-$2}"
  else sed 's/^/    | /' "$1" | tail -n 20; vm_fail "${3:-no '$2' in $(basename "$1")}"
  fi
}

# vm_no_grep FILE PATTERN [WHAT]: asserts that no line of FILE matches PATTERN.
vm_no_grep() {
  if grep -qE "$2" "$1"; then grep -E "$2" "$1" | head -n 5 | sed 's/^/    | /'; vm_fail "${3:-'$2' in $(basename "$1")}"
  else vm_log "ok: ${3:-no '$2'}"
  fi
}

# vm_count FILE PATTERN N [WHAT]: asserts that exactly N lines of FILE match PATTERN (grep -E).
vm_count() {
  local n; n=$(grep -cE "$2" "$1")
  if [ "$n" -eq "$3" ]; then vm_log "ok: ${4:-$3 lines match '$2'}"
  else sed 's/^/    | /' "$1" | tail -n 20; vm_fail "${4:-lines matching '$2'}: $n, expected $3"
  fi
}

# vm_big_buffers: 8 MB socket receive buffers for every socket opened after it. An LE fixed channel has no
# flow control: when the peer's socket receive queue is full, the kernel drops what arrives (Write Commands,
# and a request behind them, which then times out after 30 s).
vm_big_buffers() { vm_ok sysctl 10 sysctl -w net.core.rmem_default=8388608 net.core.rmem_max=8388608; }

# vm_sim_link: a measurement's rig (writecmd-ab, perf-confirm, syscalls-ab, perfprobe): big buffers, the
# controllers without btmon's capture, mirror-sim on hci1 (step sim); sets peer (its address) and n (its
# connections so far, for vm_wait_log).
vm_sim_link() {
  vm_big_buffers
  VM_BTMON=0
  vm_controllers
  vm_sim sim
  peer=00:AA:01:01:00:01
  n=0
}

# vm_gatt_peer: BlueZ's own GATT server on hci1, as a peer nobody here wrote: the system D-Bus, bluetoothd,
# and hci1 powered, connectable and advertising through bluetoothd (btmgmt); hci0 powered for the central.
# Serves GAP 0x0001-0x0007 (Device Name value 0x0003 "BlueZ 5.66"), GATT 0x0008-0x0011, Device
# Information 0x0012-0x0014. Larger socket buffers first, so that bluetoothd keeps every Write Command.
vm_gatt_peer() {
  vm_big_buffers
  [ "${VM_BTMON:-1}" = 0 ] || vm_bg btmon sh -c 'exec btmon -w "$1" >/dev/null' btmon "$OUT/hci.btsnoop"
  vm_bg btvirt btvirt -l2 -L
  vm_wait "hci0 and hci1" 15 test -e /sys/class/bluetooth/hci1 -a -e /sys/class/bluetooth/hci0
  mkdir -p /run/dbus
  # An earlier scenario's bus (same boot) leaves its socket behind: the wait below must see the new one.
  rm -f /run/dbus/system_bus_socket
  vm_bg dbus dbus-daemon --system --nofork --nopidfile
  vm_wait "the system bus" 15 test -S /run/dbus/system_bus_socket
  # VM_BLUETOOTHD_CONF: a main.conf of the scenario's own (the eatt scenarios' [GATT] Channels = 3).
  vm_bg bluetoothd /usr/sbin/bluetoothd -n ${VM_BLUETOOTHD_CONF:+-f "$VM_BLUETOOTHD_CONF"}
  vm_wait "bluetoothd on the bus" 20 dbus-send --system --print-reply --dest=org.bluez / org.freedesktop.DBus.Introspectable.Introspect
  vm_ok hci1-power 20 btmgmt -i hci1 power on
  vm_ok hci1-connectable 20 btmgmt -i hci1 connectable on
  vm_ok hci1-advertising 20 btmgmt -i hci1 advertising on
  vm_ok hci0-power 20 btmgmt -i hci0 power on
}

# vm_gatt_peer_conf [--example] LINE...: the scenario's controllers (btvirt and btmon) replaced by vm_gatt_peer's
# (vm_example_gatt_peer's with --example), with bluetoothd reading a main.conf of these lines ($OUT/main.conf; the
# eatt scenarios' "[GATT]" "Channels = 3").
vm_gatt_peer_conf() {
  local peer=vm_gatt_peer
  [ "${1:-}" = --example ] && { peer=vm_example_gatt_peer; shift; }
  vm_stop btvirt 5 TERM
  vm_stop btmon 5 TERM
  vm_wait "hci0 and hci1 gone" 15 sh -c '! test -e /sys/class/bluetooth/hci0 && ! test -e /sys/class/bluetooth/hci1'
  printf '%s\n' "$@" > "$OUT/main.conf"
  VM_BLUETOOTHD_CONF="$OUT/main.conf"
  $peer
}

# vm_example_gatt_peer: vm_gatt_peer, and BlueZ's example-gatt-server as Debian ships it, patched into a copy in
# $OUT (tools/vm/peers/example-gatt-server.patch says what and why), registered with bluetoothd on hci1: Heart Rate,
# Battery and the test service (gatt-example, shell-bluez).
vm_example_gatt_peer() {
  vm_gatt_peer
  local example=/usr/share/doc/bluez-test-scripts/examples/example-gatt-server
  [ -f $example ] || vm_fail "$example is missing (Debian package bluez-test-scripts; tools/setup.sh installs it)"
  vm_ok example-patch 20 patch -s -o "$OUT/example-gatt-server" $example "$REPO/tools/vm/peers/example-gatt-server.patch"
  vm_bg example /usr/bin/python3 -u "$OUT/example-gatt-server" hci1
  vm_wait_log example "^GATT application registered|^Failed|^GattManager1 interface not found|Error" 40
  vm_grep "$OUT/example.log" "^GATT application registered" "example-gatt-server registered its application with bluetoothd on hci1"
}

# vm_btctl_agent: bluetoothctl (step btctl) driven over the fifo /tmp/btctl.in, open on fd 5, registered as
# bluetoothd's NoInputNoOutput default agent (agents are bluetoothd's, not an adapter's: it serves both; each command
# only after bluetoothctl's answer to the one before, or the registration fails), and hci1 made discoverable
# (bluetoothd's discovery lists an LE device only when its advertising flags say so: adapter.c).
vm_btctl_agent() {
  rm -f /tmp/btctl.in; mkfifo /tmp/btctl.in
  vm_bg btctl sh -c 'exec bluetoothctl <"$1"' btctl /tmp/btctl.in
  exec 5<>/tmp/btctl.in
  trap '' PIPE
  vm_wait_log btctl "\[bluetooth\]" 30
  echo "agent NoInputNoOutput" >&5
  vm_wait_log btctl "Agent registered" 30
  echo default-agent >&5
  vm_wait_log btctl "Default agent request successful" 30
  vm_ok hci1-discoverable 15 btmgmt -i hci1 discov yes
}

# vm_sim STEP [FLAGS...]: starts mirror-sim on hci1 (LE CID 4, advertising through its own raw HCI code)
# with the given simulator flags, and waits until it listens.
vm_sim() {
  local step=$1; shift
  # An LE link of an earlier scan that is still being torn down would be reused by the next connect and reset
  # under it: start each simulator with no link left on hci0.
  vm_wait "no LE link left on hci0" 20 sh -c '! hcitool -i hci0 con | grep -q " LE "'
  vm_bg "$step" "$BIN/mirror-sim" --adapter hci1 --advertise mirror-sim "$@"
  vm_wait_log "$step" "^mirror-sim: listening" 30
}

# vm_scan STEP LIMIT [FLAGS...]: `mirror scan` of the simulator on hci1 from hci0 with --json, the upload
# receiver on the guest's loopback, the ZIP in $OUT/STEP.up/. Exit status in $VM_RC; output in STEP.log.
vm_scan() {
  local step=$1 limit=$2; shift 2
  mkdir -p "$OUT/$step.up"
  vm_run "$step" "$limit" "$BIN/mirror" scan 00:AA:01:01:00:01 --adapter hci0 --json \
    --upload-host 127.0.0.1 --upload-port 0 --upload-dir "$OUT/$step.up" "$@"
}

# vm_no_le_link: waits until hci0 has no LE link left. A command started within the kernel's disconnect delay
# (2 s after the last socket closes) reuses the previous command's link, and a peer like bluetoothd keeps that
# link's ATT state (its ATT_MTU) across our processes: wait before a step that offers another --mtu.
vm_no_le_link() { vm_wait "no LE link left on hci0" 20 sh -c '! hcitool -i hci0 con | grep -q " LE "'; }
