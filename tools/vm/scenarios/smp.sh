# vm-about: the kernel's SMP between btvirt's controllers, no bluetoothd: both powered through mgmt (btmgmt), hci0 pairs with hci1 (btmgmt pair, NoInputNoOutput: Just Works, each User Confirm answered yes by a btmgmt agent): "Paired with", and btmon shows Pairing Request/Response, Confirm/Random or Public Key, Encryption Change success and New Long Term Key; dmesg has no ECDH or "security requested but not available" error
# vm-timeout: 90
peer=00:AA:01:01:00:01
# dmesg is the boot's: only what this scenario adds counts (an earlier scenario may have raised security without SMP).
dmesg_from=$(( $(dmesg | wc -l) + 1 ))

vm_bg btmon sh -c 'exec btmon -w "$1" >/dev/null' btmon "$OUT/hci.btsnoop"
vm_bg btvirt btvirt -l2 -L
vm_wait "hci0 and hci1" 15 test -e /sys/class/bluetooth/hci1 -a -e /sys/class/bluetooth/hci0
# SMP's fixed channel is registered only when mgmt powers the adapter on (net/bluetooth/hci_sync.c,
# hci_powered_update_sync -> smp_register): `hciconfig up` (vm_controllers) leaves a link without SMP.
for i in hci0 hci1; do
  vm_ok "$i-bondable" 15 btmgmt -i $i bondable on
  vm_ok "$i-io-cap" 15 btmgmt -i $i io-cap 3
  vm_ok "$i-power" 15 btmgmt -i $i power on
done
vm_ok hci1-connectable 15 btmgmt -i hci1 connectable on
vm_ok hci1-advertising 15 btmgmt -i hci1 advertising on

# One interactive btmgmt per adapter as the agent: it prints "User Confirm" and takes its answer as the next input
# line (btmgmt's non-interactive mode never prompts). Each reads a fifo this script keeps open for writing.
agent() { # N FD: btmgmt on hciN reading /tmp/smp-agent-hciN.in, held open on FD
  rm -f "/tmp/smp-agent-hci$1.in"; mkfifo "/tmp/smp-agent-hci$1.in"   # on the guest's tmpfs, not the 9p share
  vm_bg "agent-hci$1" sh -c 'exec btmgmt -i "$1" <"$2"' agent "hci$1" "/tmp/smp-agent-hci$1.in"
  eval "exec $2<>/tmp/smp-agent-hci$1.in"   # read-write: the open does not block on the reader
  echo revision >&"$2"   # mgmt Read Version: its answer shows the agent's mgmt socket is up
}
trap '' PIPE   # a write to an agent that ended fails with EPIPE instead of killing the scenario
agent 0 5
agent 1 6
vm_wait_log agent-hci0 "MGMT Version" 15
vm_wait_log agent-hci1 "MGMT Version" 15

# Just Works (both NoInputNoOutput, Core spec Vol 3 Part H 2.3.5.1): the kernel still asks user space to confirm
# (smp.c: confirm_hint 1); unanswered, pairing ends at SMP's 30 s timeout. Each request is answered once.
# hci0's agent itself pairs: a non-interactive `btmgmt pair` printed nothing to a file here, and exits 0 even when
# pairing failed (BlueZ 5.66 tools/btmgmt.c, pair_rsp); the interactive one prints "Paired with" or the failure.
echo "pair -c 3 -t 1 $peer" >&5
vm_log "hci0's agent: pair -c 3 -t 1 $peer"
done_re="Paired with|Pairing with .* failed|Pairing failed|Unexpected pair_rsp"
answered0=0 answered1=0
deadline=$(( $(vm_now) + $(vm_scaled 30) * 1000000 ))
until grep -qE "$done_re" "$OUT/agent-hci0.log"; do
  [ "$(vm_now)" -gt $deadline ] && vm_fail "waited $(vm_scaled 30) s for the pairing's end in agent-hci0.log ('$done_re'; User Confirm answered: hci0 $answered0, hci1 $answered1)"
  n=$(grep -c "User Confirm [0-9]" "$OUT/agent-hci0.log"); [ "$n" -gt $answered0 ] && { echo yes >&5; answered0=$n; vm_log "hci0: User Confirm answered yes"; }
  n=$(grep -c "User Confirm [0-9]" "$OUT/agent-hci1.log"); [ "$n" -gt $answered1 ] && { echo yes >&6; answered1=$n; vm_log "hci1: User Confirm answered yes"; }
  sleep 0.1
done
vm_log "pairing ended: $(grep -E "$done_re" "$OUT/agent-hci0.log" | tr -d '\r' | tail -n 1)"
[ $((answered0 + answered1)) -gt 0 ] || vm_fail "no User Confirm on either side: SMP did not ask user space (Just Works asks on both)"
vm_grep "$OUT/agent-hci0.log" "Paired with $peer" "btmgmt pair: Paired with $peer"

vm_stop btmon 5 INT
vm_ok btmon-read 30 btmon -r "$OUT/hci.btsnoop"
for pdu in "Pairing Request" "Pairing Response"; do
  vm_grep "$OUT/btmon-read.log" "SMP: $pdu" "btmon: SMP $pdu"
done
if grep -q "SMP: Pairing Public Key" "$OUT/btmon-read.log"; then
  vm_log "ok: btmon: SMP Pairing Public Key (LE Secure Connections)"
else
  vm_grep "$OUT/btmon-read.log" "SMP: Pairing Confirm" "btmon: SMP Pairing Confirm (legacy pairing; no Public Key)"
fi
vm_grep "$OUT/btmon-read.log" "SMP: Pairing Random" "btmon: SMP Pairing Random"
vm_ok encryption 10 sh -c "grep -A3 'HCI Event: Encryption Change' '$OUT/btmon-read.log' | grep -q 'Status: Success'"
vm_log "ok: btmon: an Encryption Change with status Success"
vm_ok pair-complete 10 sh -c "grep -A2 -E '^ +Pair Device \(0x0019\)' '$OUT/btmon-read.log' | grep -q 'Status: Success'"
vm_log "ok: btmon: mgmt's Pair Device completed with status Success"
vm_grep "$OUT/btmon-read.log" "MGMT Event: New Long Term Key" "btmon: mgmt's New Long Term Key event (the bond's LTK)"

dmesg | tail -n +$dmesg_from >"$OUT/dmesg.log"
vm_no_grep "$OUT/dmesg.log" "Unable to create ECDH crypto context" "dmesg: no 'Unable to create ECDH crypto context'"
vm_no_grep "$OUT/dmesg.log" "security requested but not available" "dmesg: no 'security requested but not available'"
