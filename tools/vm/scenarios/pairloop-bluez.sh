# vm-about: a probe, not a check: bluetoothctl pairs hci0 with hci1 under one bluetoothd (BlueZ's example-gatt-server on hci1), removes both bonds and pairs again, VM_PAIRLOOP times (default 20), with bluetoothd's debug log and core dumps, to catch bluetoothd 5.66's rare crash in pair-bluez
# vm-manual: yes
# vm-timeout: 1500
SIM=00:AA:01:01:00:01
CENTRAL=00:AA:01:00:00:00
rounds=${VM_PAIRLOOP:-20}
ulimit -c unlimited
echo "$OUT/core.%p" >/proc/sys/kernel/core_pattern
dmesg_start=$(dmesg | wc -l)
: >"$OUT/main.conf"
# No bond left by an earlier scenario of the same boot (pair-bluez): bluetoothd would load it and list no new device.
rm -rf /var/lib/bluetooth/$CENTRAL /var/lib/bluetooth/$SIM
# bluetoothd with -d: its last debug lines name the function it was in when it died.
VM_BTMON=0
vm_big_buffers
vm_bg btvirt btvirt -l2 -L
vm_wait "hci0 and hci1" 15 test -e /sys/class/bluetooth/hci1 -a -e /sys/class/bluetooth/hci0
mkdir -p /run/dbus; rm -f /run/dbus/system_bus_socket
vm_bg dbus dbus-daemon --system --nofork --nopidfile
vm_wait "the system bus" 15 test -S /run/dbus/system_bus_socket
vm_bg bluetoothd /usr/sbin/bluetoothd -n -d -f "$OUT/main.conf"
vm_wait "bluetoothd on the bus" 20 dbus-send --system --print-reply --dest=org.bluez / org.freedesktop.DBus.Introspectable.Introspect
vm_ok hci1-power 20 btmgmt -i hci1 power on
vm_ok hci1-connectable 20 btmgmt -i hci1 connectable on
vm_ok hci1-advertising 20 btmgmt -i hci1 advertising on
vm_ok hci0-power 20 btmgmt -i hci0 power on
example=/usr/share/doc/bluez-test-scripts/examples/example-gatt-server
vm_ok example-patch 20 patch -s -o "$OUT/example-gatt-server" $example "$REPO/tools/vm/peers/example-gatt-server.patch"
vm_bg example /usr/bin/python3 -u "$OUT/example-gatt-server" hci1
vm_wait_log example "^GATT application registered" 40
vm_btctl_agent
ok=0 crashed=0
for round in $(seq 1 "$rounds"); do
  kill -0 "$(vm_pid bluetoothd)" 2>/dev/null || { crashed=1; break; }
  before=$(wc -l <"$OUT/btctl.log")
  printf '%s\n' "select $CENTRAL" "scan on" >&5
  vm_wait "round $round: Device $SIM" 40 sh -c "tail -n +$before '$OUT/btctl.log' | grep -q 'NEW.*Device $SIM'"
  printf '%s\n' "scan off" "pair $SIM" >&5
  answers=0
  deadline=$(( $(vm_now) + 60 * 1000000 ))
  until tail -n +"$before" "$OUT/btctl.log" | grep -qE "Pairing successful|Failed to pair"; do
    kill -0 "$(vm_pid bluetoothd)" 2>/dev/null || { crashed=1; break 2; }
    [ "$(vm_now)" -gt $deadline ] && { vm_log "round $round: no end of pairing in 60 s"; break 2; }
    n=$(tail -n +"$before" "$OUT/btctl.log" | grep -oE "Request (confirmation|authorization)" | wc -l)
    [ "$n" -gt $answers ] && { echo yes >&5; answers=$n; }
    sleep 0.2
  done
  vm_log "round $round: $(tail -n +"$before" "$OUT/btctl.log" | grep -oE "Pairing successful|Failed to pair[^\r]*" | head -n 1) ($answers answers)"
  ok=$((ok + 1))
  mark=$(wc -l <"$OUT/btctl.log")
  printf '%s\n' "disconnect $SIM" "remove $SIM" >&5
  vm_wait "round $round: $SIM removed" 20 sh -c "tail -n +$mark '$OUT/btctl.log' | grep -q 'DEL.*Device $SIM'"
  printf '%s\n' "select $SIM" "remove $CENTRAL" >&5
  vm_wait "round $round: $CENTRAL removed" 20 sh -c "tail -n +$mark '$OUT/btctl.log' | grep -q 'DEL.*Device $CENTRAL'"
  vm_wait "round $round: no LE link" 20 sh -c '! hcitool -i hci0 con | grep -q " LE "'
  vm_ok "discov-$round" 15 btmgmt -i hci1 discov yes
done
vm_log "rounds done: $ok, bluetoothd crashed: $crashed"
dmesg | tail -n +$((dmesg_start + 1)) | grep -i -E "segfault|traps|bluetoothd" >"$OUT/dmesg-crash.log"
cat "$OUT/dmesg-crash.log"
for c in "$OUT"/core.*; do
  [ -f "$c" ] || continue
  gdb -batch -ex "bt 30" -ex "info registers rip" /usr/sbin/bluetoothd "$c" >"$OUT/gdb.log" 2>&1
  sed 's/^/    | /' "$OUT/gdb.log" | tail -n 45
done
tail -n 40 "$OUT/bluetoothd.log" | sed 's/^/    bt| /'
[ $crashed = 0 ] || vm_fail "bluetoothd crashed after $ok rounds"
