# vm-about: mirror pair with no bluetoothd, the simulator on hci1 answering through the same agent: Just Works, then Already Paired, an encrypted read on the kernel's key with no second pairing; Passkey Entry with a fixed passkey on both sides, by mirror pair and by the shell's agent (--io, --passkey, the method reported); a wrong passkey and a missing one named, with the SMP reason; SMP in the capture
# vm-timeout: 300
vm_need mirror mirror-sim
vm_controllers
# Only this scenario's kernel lines count (one boot runs every scenario: an earlier one's raise without SMP is its own).
dmesg_start=$(dmesg | wc -l)
SIM=00:AA:01:01:00:01
CENTRAL=00:AA:01:00:00:00
# The bond store of this scenario (mirror's files under $XDG_STATE_HOME/mirror/bonds).
export XDG_STATE_HOME="$OUT/state"

# vm_unpair: both sides forget the bond, so the next pair runs SMP again: mirror's store and hci0's kernel by
# mirror bonds remove (Unpair Device), hci1's kernel by btmgmt.
vm_unpair() {
  vm_ok unpair-hci0 15 "$BIN/mirror" bonds remove $SIM --adapter hci0
  vm_run unpair-hci1 15 btmgmt -i hci1 unpair -t 1 $CENTRAL
  vm_no_le_link
}

# Just Works: both sides NoInputNoOutput (Core Spec Vol 3 Part H §2.3.5.1, Table 2.8).
vm_sim sim --io none
# hciconfig powered both adapters before any management command: the kernel has no SMP on them until they are
# powered again through the management interface (hci_sync.c), which the simulator's and mirror's agents do.
vm_grep "$OUT/sim.log" "powered hci1 off and on again through the Bluetooth management interface" "the simulator power-cycled its LE-only hci1 through the management interface (SMP)"
vm_ok pair-just-works 90 "$BIN/mirror" pair $SIM --adapter hci0
vm_grep "$OUT/pair-just-works.log" "^note: powered hci0 off and on again through the Bluetooth management interface" "mirror pair power-cycled the idle LE-only hci0 (SMP) and said so"
vm_grep "$OUT/pair-just-works.log" "^paired with $SIM \(public\) on hci0: Just Works$" "mirror pair reports Just Works"
vm_no_grep "$OUT/sim.log" "could not answer|stopped" "the simulator's agent answered what the kernel asked"
vm_grep "$OUT/sim.log" "pairing with 00:AA:01:00:00:00 \(public\): Just Works, answered" "the simulator answered the kernel's Just Works confirmation"
dmesg | tail -n +$((dmesg_start + 1)) >"$OUT/dmesg.log"
vm_no_grep "$OUT/dmesg.log" "security requested but not available|Unable to create .* crypto context" "the kernel had SMP for every pairing"

# The kernel keeps the keys (Set Bondable): a second pair is Already Paired, and an encrypted read needs no pairing.
vm_ok pair-again 60 "$BIN/mirror" pair $SIM --adapter hci0 --json
vm_grep "$OUT/pair-again.log" '"alreadyPaired": ?true' "a second pair finds the kernel's keys (Already Paired)"
vm_no_le_link
vm_ok read-encrypted 60 "$BIN/mirror" read $SIM 0x0003 --adapter hci0 --security medium
vm_grep "$OUT/read-encrypted.log" "mirror-sim" "a read at security medium works on the bond"

# The bond store: mirror pair kept the keys (0600, under XDG_STATE_HOME); a kernel that forgot them (Unpair Device
# on hci0 alone, as a reset or reboot forgets) gets them back (Load Long Term Keys) before the next connection,
# which then encrypts with no second pairing. (After `hciconfig hci0 reset` btvirt's hci0 answered no LE connection
# in this VM, bond or none: that variant is not run here.)
BOND="$XDG_STATE_HOME/mirror/bonds/$CENTRAL/$SIM.json"
vm_grep "$OUT/pair-just-works.log" "^bonded: .*kept in $BOND" "mirror pair kept the bond in the store"
[ "$(stat -c %a "$BOND")" = 600 ] || vm_fail "the bond file is $(stat -c %a "$BOND"), not 0600"
vm_ok bonds-list 15 "$BIN/mirror" bonds list
vm_grep "$OUT/bonds-list.log" "$SIM" "mirror bonds list shows it"
vm_run kernel-forgets 15 btmgmt -i hci0 unpair -t 1 $SIM
vm_no_le_link
answered=$(grep -c "answered" "$OUT/sim.log")
vm_ok read-from-store 60 "$BIN/mirror" read $SIM 0x0003 --adapter hci0 --security medium
vm_grep "$OUT/read-from-store.log" "^note: loaded 1 long term key" "the stored bond went into the kernel first"
vm_grep "$OUT/read-from-store.log" "mirror-sim" "and the encrypted read works on it"
[ "$(grep -c "answered" "$OUT/sim.log")" = "$answered" ] || vm_fail "the read paired again instead of using the stored bond"

# --pair on a connecting command: with no bond, the read's connection pairs (the agent answers) and reads.
vm_unpair
vm_ok read-pair 60 "$BIN/mirror" read $SIM 0x0003 --adapter hci0 --pair
vm_grep "$OUT/read-pair.log" "mirror-sim" "read --pair pairs and reads"
vm_run pair-after-read-pair 30 "$BIN/mirror" pair $SIM --adapter hci0 --json
vm_grep "$OUT/pair-after-read-pair.log" '"alreadyPaired": ?true' "read --pair left a bond in the kernel"

# The shell's pair: on the open connection, with the shell's agent (--pair); refused, and said why, without it.
vm_unpair
vm_run shell-pair 60 sh -c "printf 'pair\nread 0x0003\n' | \"\$1\" shell $SIM --adapter hci0 --pair" sh "$BIN/mirror"
vm_grep "$OUT/shell-pair.log" "pair: the link's security is medium" "the shell's pair encrypts the open connection"
vm_grep "$OUT/shell-pair.log" "mirror-sim" "the shell reads after pairing"
vm_run shell-no-agent 60 sh -c "printf 'pair\n' | \"\$1\" shell $SIM --adapter hci0" sh "$BIN/mirror"
vm_grep "$OUT/shell-no-agent.log" "start it with mirror shell TARGET --pair" "the shell's pair without an agent says how"

# A peer that forgot the bond: hci1 drops its key, hci0 still encrypts with its own: the peer answers the LTK
# request negatively and the link's Encryption Change fails with 0x06 PIN or Key Missing (Vol 4 Part E §7.7.8).
vm_run unpair-peer-only 15 btmgmt -i hci1 unpair -t 1 $CENTRAL
vm_no_le_link
vm_run read-lost-bond 60 "$BIN/mirror" read $SIM 0x0003 --adapter hci0 --security medium
[ "$VM_RC" = 6 ] || vm_fail "a read on a bond the peer forgot exited $VM_RC (expected 6, connection)"
vm_grep "$OUT/read-lost-bond.log" "the peer has no key for this bond \(Encryption Change status 0x06 PIN or Key Missing\): it has forgotten the bond" "a lost bond is named, with the HCI status"
vm_grep "$OUT/read-lost-bond.log" "mirror bonds remove $SIM" "and says how to pair again"
vm_grep "$OUT/read-lost-bond.log" "or run the command again with --repair" "and names --repair"
# --repair: the same read removes this host's bond, pairs again on a fresh connection and reads.
vm_no_le_link
vm_ok read-repair 90 "$BIN/mirror" read $SIM 0x0003 --adapter hci0 --security medium --repair
vm_grep "$OUT/read-repair.log" "^repair: encrypting the link to $SIM on hci0 failed: the peer has no key for this bond" "--repair says the peer lost the bond"
vm_grep "$OUT/read-repair.log" "^repair: removed .*/$SIM.json$" "removes this host's bond"
vm_grep "$OUT/read-repair.log" "^repair: paired with $SIM \(public\) on hci0 again: Just Works$" "pairs again"
vm_grep "$OUT/read-repair.log" "mirror-sim" "and reads"
vm_stop sim 10 TERM

# A value the simulator serves only on an encrypted link (--secure): a read with no bond and no agent gets
# Insufficient Encryption (0x0F) from the peer and stops there, saying how to pair (raising BT_SECURITY with nobody to
# answer the kernel's confirmation would end in SMP's 30 s timeout); with --pair the link is encrypted from the
# connect, the simulator's agent answering, and the bond is kept.
vm_unpair
vm_sim sim-secure --io none --secure deviceName
vm_run read-secured 60 "$BIN/mirror" read $SIM 0x0003 --adapter hci0
[ "$VM_RC" = 3 ] || vm_fail "a secured read with no bond and no --pair exited $VM_RC (expected 3, the peer's ATT error)"
vm_grep "$OUT/read-secured.log" "ATT error 0x0F Insufficient Encryption from the peer" "the secured value is refused on the plain link (0x0F)"
vm_grep "$OUT/read-secured.log" "give --pair to pair on this connection" "and the error says how to pair"
vm_unpair
vm_ok read-secured-pair 60 "$BIN/mirror" read $SIM 0x0003 --adapter hci0 --pair
vm_grep "$OUT/read-secured-pair.log" "^pair: bonded: " "read --pair kept the bond"
vm_grep "$OUT/read-secured-pair.log" "mirror-sim" "and read the secured value"
vm_stop sim-secure 10 TERM

# Passkey Entry: both sides KeyboardOnly, both type 123456 (Table 2.8: each enters the passkey).
vm_unpair
vm_sim sim-passkey --io keyboard --passkey 123456
vm_ok pair-passkey 90 "$BIN/mirror" pair $SIM --adapter hci0 --io keyboard --passkey 123456
vm_grep "$OUT/pair-passkey.log" "^paired with $SIM \(public\) on hci0: Passkey Entry$" "mirror pair reports Passkey Entry"
vm_grep "$OUT/pair-passkey.log" "^bonded: LTK \(both roles\), CSRK \(remote, local\); kept in $XDG_STATE_HOME/mirror/bonds/$CENTRAL/$SIM.json$" "and the bond it kept (the README's transcript)"

# A wrong passkey: the confirm values differ, SMP fails (Pairing Failed, Confirm Value Failed); named, exit 1.
vm_unpair
vm_run pair-wrong 90 "$BIN/mirror" pair $SIM --adapter hci0 --io keyboard --passkey 111111
[ "$VM_RC" = 1 ] || vm_fail "a wrong passkey exited $VM_RC (expected 1)"
vm_grep "$OUT/pair-wrong.log" "failed: Pair Device answered 0x05 Authentication Failed" "a wrong passkey is named as the kernel's Authentication Failed"
vm_grep "$OUT/pair-wrong.log" "SMP Pairing Failed reason 0x04 Confirm Value Failed, sent by the peer" "and by the SMP PDU: the peer's Pairing Failed, Confirm Value Failed (as btmon decodes it)"

# No passkey and no terminal: this host refuses (User Passkey Negative Reply) and says so, exit 4.
vm_unpair
vm_run pair-no-passkey 90 "$BIN/mirror" pair $SIM --adapter hci0 --io keyboard </dev/null
[ "$VM_RC" = 4 ] || vm_fail "a pairing with no passkey to enter exited $VM_RC (expected 4, refused locally)"
vm_grep "$OUT/pair-no-passkey.log" "this host refused: no passkey to enter" "a missing passkey is this host's refusal"
vm_grep "$OUT/pair-no-passkey.log" "SMP Pairing Failed reason 0x01 Passkey Entry Failed, sent by this host's kernel" "and the Pairing Failed this host's kernel sent for it"

# The shell's agent by Passkey Entry: --io keyboard --passkey (a script's standard input is no terminal to ask). The
# connect of --pair pairs (smp.c asks for MITM when this side has IO), and pair --high finds the authenticated key.
vm_unpair
vm_ok shell-pair-passkey 90 sh -c "printf 'pair --high\nread 0x0003\n' | \"\$1\" shell $SIM --adapter hci0 --pair --io keyboard --passkey 123456" sh "$BIN/mirror"
vm_grep "$OUT/shell-pair-passkey.log" "^pair: pairing with $SIM \(public\): Passkey Entry, answered$" "the shell's agent entered the passkey"
vm_grep "$OUT/shell-pair-passkey.log" "^pair: the link's security is high$" "the shell's pair --high has an authenticated key"
vm_grep "$OUT/shell-pair-passkey.log" "^pair: method: Passkey Entry$" "and reports the method: Passkey Entry"
vm_grep "$OUT/shell-pair-passkey.log" "mirror-sim" "the shell reads after pairing"
# No --passkey in a script: the shell's agent refuses, naming --passkey; --pair's agent reports the SMP Pairing Failed
# reason and who sent it, as mirror pair does.
vm_unpair
vm_run shell-pair-no-passkey 90 sh -c "printf 'pair --high\n' | \"\$1\" shell $SIM --adapter hci0 --pair --io keyboard" sh "$BIN/mirror"
# The link ends with the kernel's Authentication Failure, at the connect (before, during or just after Exchange MTU)
# or at pair --high: the connection lost, exit 6, whichever moment it comes.
[ "$VM_RC" = 6 ] || vm_fail "a shell pairing with no passkey to enter exited $VM_RC (expected 6, the connection lost)"
vm_grep "$OUT/shell-pair-no-passkey.log" "Passkey Entry, refused: no passkey to enter \(give --passkey N" "the shell's agent refuses with no --passkey, naming it"
vm_grep "$OUT/shell-pair-no-passkey.log" "^pair: pairing with $SIM failed: SMP Pairing Failed reason 0x01 Passkey Entry Failed, sent by this host's kernel$" "--pair's agent reports the SMP reason and its sender"
vm_stop sim-passkey 10 TERM

# The capture shows SMP itself, not only the management events.
vm_stop btmon 5 TERM
btmon -r "$OUT/hci.btsnoop" >"$OUT/hci.txt" 2>&1 || true
vm_grep "$OUT/hci.txt" "SMP: Pairing Request" "SMP Pairing Request in the capture"
vm_grep "$OUT/hci.txt" "SMP: Pairing Failed" "SMP Pairing Failed (the wrong passkey) in the capture"
vm_grep "$OUT/hci.txt" "Encryption Change" "an Encryption Change in the capture"
