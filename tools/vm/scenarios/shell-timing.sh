# vm-about: a measurement: mirror shell's time to its first prompt and per command (read, write, gatt, mtu, link) against the same commands one-shot, over an LE link to mirror-sim; medians of 5 (tools/vm/shell_timing.py prints the table)
# vm-manual: yes
# vm-timeout: 400
vm_need mirror mirror-sim
VM_BTMON=0 vm_controllers
vm_sim sim
# The shell keeps its history under XDG_STATE_HOME: the host root is read-only here.
vm_ok timing 360 env HOME="$OUT" XDG_STATE_HOME="$OUT/state" python3 -I -S "$REPO/tools/vm/shell_timing.py" "$BIN/mirror" 00:AA:01:01:00:01 hci0 5
sed 's/^/    | /' "$OUT/timing.log"
