# vm-about: Google Bumble (its own host stack over the HCI user channel on hci1, tools/vm/peers/bumble_peer.py) as a peer nobody here wrote, no bluetoothd: mirror gatt, read (short, and long by Read Blob), write, listen, a notification after a write, the GATT cache on Bumble's Database Hash; mirror pair Just Works, an encrypted read on the bond in new processes (the kernel's keys, then the store's), the authenticated value refused after Just Works (at once, also at --security medium); read --pair with no bond; Passkey Entry with Bumble displaying a fixed passkey, a wrong passkey refused; a resolvable private address paired, then a new one resolved to the bond by the stored IRK; SMP in the capture
# vm-timeout: 560
vm_need mirror
[ -n "${VM_BUMBLE:-}" ] && [ -x "$VM_BUMBLE" ] \
  || vm_fail "no Bumble venv (VM_BUMBLE='${VM_BUMBLE:-}'): tools/vm/bumble-venv.sh could not make it (see run.sh's vm-prepare lines)"
peer=00:AA:01:01:00:01
CENTRAL=00:AA:01:00:00:00
export XDG_STATE_HOME="$OUT/state" XDG_CACHE_HOME="$OUT/xdg-cache"
dmesg_start=$(dmesg | wc -l)

# The controllers: hci0 the kernel's (our side); hci1 down and never powered through mgmt, for Bumble's HCI user
# channel (HCI_CHANNEL_USER binds only a controller that is down: hci_sock.c).
# The capture by hci_capture.py, not btmon -w: BlueZ 5.66's btmon decodes as it writes and has died with SIGSEGV on
# Bumble's traffic (exit 139 at the listen step), taking the rest of the capture with it.
vm_bg capture python3 -I -S "$REPO/tools/vm/hci_capture.py" "$OUT/hci.btsnoop"
vm_wait_log capture "^hci_capture: writing|Traceback" 10
vm_grep "$OUT/capture.log" "^hci_capture: writing" "the HCI capture runs"
vm_bg btvirt btvirt -l2 -L
vm_wait "hci0 and hci1" 15 test -e /sys/class/bluetooth/hci1 -a -e /sys/class/bluetooth/hci0
vm_ok hci0-up 15 hciconfig hci0 up
vm_ok hci1-down 15 hciconfig hci1 down

# bumble_peer STEP [FLAGS...]: Bumble's peer on hci1 (hci-socket:1), its key store in $OUT/STEP-keys.json; waits until
# it advertises, then reads the value handles it logged into h_short, h_long, h_write, h_notify, h_enc, h_auth.
bumble_peer() {
  local step=$1; shift
  vm_bg "$step" "$VM_BUMBLE" -u "$REPO/tools/vm/peers/bumble_peer.py" --transport hci-socket:1 \
    --keystore "$OUT/$step-keys.json" "$@"
  vm_wait_log "$step" "^bumble-peer: advertising|Traceback" 60
  case " $* " in
    *" --privacy "*) vm_grep "$OUT/$step.log" "^bumble-peer: advertising as [0-9A-F:]+ \(random, resolvable\), identity $peer" "Bumble advertises from a resolvable private address" ;;
    *) vm_grep "$OUT/$step.log" "^bumble-peer: advertising as $peer \(public\)" "Bumble advertises on hci1 with the controller's public address" ;;
  esac
  handle() { sed -n "s/^bumble-peer: characteristic 'bumble $1' .* value handle \(0x[0-9A-F]*\)$/\1/p" "$OUT/$step.log"; }
  h_short=$(handle short) h_long=$(handle long) h_write=$(handle write) h_notify=$(handle notify)
  h_enc=$(handle encrypted) h_auth=$(handle authenticated)
  [ -n "$h_short" ] && [ -n "$h_auth" ] || vm_fail "no value handles in $step.log"
}
# forget: mirror and hci0's kernel drop the bond (Unpair Device), so the next pairing runs SMP again.
forget() {
  vm_ok "$1" 15 "$BIN/mirror" bonds remove $peer --adapter hci0
  vm_no_le_link
}

# 1. GATT against Bumble's server (Just Works peer: NoInputNoOutput).
bumble_peer bumble --io none --control "$OUT/bumble.control"
vm_ok gatt 60 "$BIN/mirror" gatt $peer --adapter hci0 --json --read
vm_json "$OUT/gatt.log" \
  '[s["uuid"] for s in j["services"]][:2] == ["1800", "1801"]' "mirror gatt: GAP and GATT first" \
  "[c.get('value') for s in j['services'] for c in s['characteristics'] if c['uuid'] == '2a00'] == ['$(printf 'Bumble peer' | od -An -tx1 | tr -d ' \n')']" "Device Name 'Bumble peer'" \
  "any(s['uuid'].lower() == '6e400000-b5a3-f393-e0a9-e50e24dc4179' and len(s['characteristics']) == 6 for s in j['services'])" "the test service with its 6 characteristics" \
  "any(c['uuid'] == '2b2a' for s in j['services'] for c in s['characteristics'])" "Bumble serves a Database Hash"
vm_ok read-short 40 "$BIN/mirror" read $peer "$h_short" --adapter hci0 --json
vm_json "$OUT/read-short.log" "j['handle'] == $h_short and j['text'] == 'hello from bumble'" "read: 'hello from bumble'"
# At MTU 23 the 286-byte value takes a Read Request and Read Blob Requests (Part F §3.4.4.5).
vm_ok read-long 60 "$BIN/mirror" read $peer "$h_long" --adapter hci0 --mtu 23 --json --trace
vm_json "$OUT/read-long.log" \
  "j['text'] == ''.join('%03d:bumble-long-value;' % i for i in range(13))" "the long value (286 bytes) read whole"
vm_grep "$OUT/read-long.log" "Read Blob Request" "by Read Blob Requests"
vm_ok write 40 "$BIN/mirror" write $peer "$h_write" 4d6972726f72 --adapter hci0 --json
vm_grep "$OUT/bumble.log" "^bumble-peer: write from $CENTRAL: 4d6972726f72" "Bumble got the write"
vm_ok read-back 40 "$BIN/mirror" read $peer "$h_write" --adapter hci0 --json
vm_json "$OUT/read-back.log" "j['text'] == 'Mirror'" "read back: 'Mirror'"
# listen: Bumble notifies once the CCCD write arrives.
vm_ok listen 40 "$BIN/mirror" listen $peer "$h_notify" --adapter hci0 --count 1 --json
vm_json "$OUT/listen.log" \
  "js[0]['event'] == 'subscribed' and any(e.get('kind') == 'notification' and e.get('text') == 'subscribed' and e.get('handle') == $h_notify for e in js)" "listen: the notification after the CCCD write" \
  "j['received'] == 1" "listen: one received"
# A notification after a write to another characteristic, on one connection (a shell).
printf '%s\n' "subscribe $h_notify" "write $h_write 4e6f74696679" "read $h_write" >"$OUT/shell.in"
vm_ok shell 60 sh -c 'exec "$1" shell "$2" --adapter hci0 <"$3"' shell "$BIN/mirror" $peer "$OUT/shell.in"
vm_grep "$OUT/shell.log" "notification $(printf '0x%04X' "$h_notify") .*Notify" "the shell printed the notification Bumble sent after the write"
# The GATT cache: the gatt above stored the database under Bumble's Database Hash; a warm gatt reads only the hash.
vm_ok cache-list 10 "$BIN/mirror" cache list --json
vm_json "$OUT/cache-list.log" "len(j['entries']) == 1 and j['entries'][0]['target'] == '$peer'" "the database is cached under Bumble's hash"
# mirror computes §7.3's hash over what it discovered and compares: Bumble serves it least significant octet first
# (as PTS and Zephyr do), which mirror takes silently; a mismatch would be a "finding:", bluetoothd's order a "note:".
vm_no_grep "$OUT/gatt.log" "^(note|finding): .*Database Hash" "mirror's own §7.3 hash of the database agrees with the one Bumble serves"
vm_no_le_link
vm_ok warm 60 "$BIN/mirror" gatt $peer --adapter hci0 --trace
vm_count "$OUT/warm.log" '^[0-9:.]+ > (Read|Find)[A-Za-z ]+ Request' 1 "the warm gatt sent one read: the Database Hash"
vm_grep "$OUT/warm.log" "Read By Type Request 0x0001-0xFFFF type 2b2a" "the Database Hash's Read By Type"

# mirror check (issue 27) against Bumble's GATT server: every finding expected, with why (check_expect.py).
vm_no_le_link
# (--timeout 10: Bumble never answers the unassigned request, and the check waits the limit once for it.)
vm_run check 150 "$BIN/mirror" check $peer --adapter hci0 --json --timeout 10
[ "$VM_RC" = 9 ] || vm_fail "mirror check against Bumble exited $VM_RC (9: a SHALL broken, request-not-supported)"
vm_ok check-expect 20 python3 -I -S "$REPO/tools/vm/check_expect.py" "$OUT/check.log" \
  "request-not-supported=Bumble 0.0.236 ignores a request opcode it does not know (gatt_server.py on_gatt_pdu: an opcode outside att.ATT_REQUESTS is 'just ignored'), where Part F §3.4.1.1 wants Request Not Supported; a real Bumble deviation"

# 2. Pairing, no bluetoothd. The encrypted value on the plain link: Bumble refuses with Insufficient Encryption.
vm_run read-plain 40 "$BIN/mirror" read $peer "$h_enc" --adapter hci0
[ "$VM_RC" = 3 ] || vm_fail "the encrypted value on a plain link exited $VM_RC (expected 3)"
vm_grep "$OUT/read-plain.log" "ATT error 0x0F Insufficient Encryption from the peer" "Bumble refuses the encrypted value on a plain link (0x0F)"
vm_no_le_link
vm_ok pair-just-works 90 "$BIN/mirror" pair $peer --adapter hci0
vm_grep "$OUT/pair-just-works.log" "^paired with $peer \(public\) on hci0: Just Works$" "mirror pair reports Just Works"
vm_grep "$OUT/bumble.log" "^bumble-peer: paired with $CENTRAL" "Bumble paired too"
BOND="$XDG_STATE_HOME/mirror/bonds/$CENTRAL/$peer.json"
vm_grep "$OUT/pair-just-works.log" "^bonded: .*kept in $BOND" "mirror kept the bond in its store"
pairings=$(grep -c "^bumble-peer: pairing started" "$OUT/bumble.log")
# A second process on the kernel's keys: encrypted with no pairing.
vm_no_le_link
vm_ok read-encrypted 60 "$BIN/mirror" read $peer "$h_enc" --adapter hci0 --security medium --json
vm_json "$OUT/read-encrypted.log" "j['text'] == 'secret: encrypted link'" "the encrypted value read on the bond"
# The kernel forgets (as after a reboot): the next process loads the store's key first, and Bumble finds its own.
vm_run kernel-forgets 15 btmgmt -i hci0 unpair -t 1 $peer
vm_no_le_link
vm_ok read-from-store 60 "$BIN/mirror" read $peer "$h_enc" --adapter hci0 --security medium
vm_grep "$OUT/read-from-store.log" "^note: loaded 1 long term key" "the stored bond went into the kernel first"
vm_grep "$OUT/read-from-store.log" "secret: encrypted link" "and the encrypted read works on it"
[ "$(grep -c "^bumble-peer: pairing started" "$OUT/bumble.log")" = "$pairings" ] || vm_fail "a read paired again instead of using the bond"
vm_log "ok: two reads in new processes encrypted on the bond; Bumble saw no second pairing"
# Just Works is unauthenticated: the value that needs an authenticated link is refused (0x05) once the link is
# encrypted on the bond (0x0F on the plain link first: mirror raises to medium with the stored key and retries once).
vm_no_le_link
vm_run read-auth-jw 60 "$BIN/mirror" read $peer "$h_auth" --adapter hci0
[ "$VM_RC" = 3 ] || vm_fail "the authenticated value after Just Works exited $VM_RC (expected 3)"
vm_grep "$OUT/read-auth-jw.log" "ATT error 0x05 Insufficient Authentication from the peer" "after Just Works Bumble refuses the authenticated value (0x05)"
vm_grep "$OUT/bumble.log" "authenticated value refused: the link's key is unauthenticated" "on the encrypted link"
# With --security medium on the Just Works bond and no agent, mirror does not raise to high (a MITM pairing nobody
# here answers, which the kernel never reports to the socket: it used to wait 30 s): the 0x05 comes at once, with
# what pairing gives an authenticated key.
vm_no_le_link
vm_run read-auth-jw-medium 25 "$BIN/mirror" read $peer "$h_auth" --adapter hci0 --security medium
[ "$VM_RC" = 3 ] || vm_fail "the authenticated value at --security medium on a Just Works bond exited $VM_RC (expected 3 at once)"
vm_grep "$OUT/read-auth-jw-medium.log" "ATT error 0x05 Insufficient Authentication from the peer" "0x05 named, not a 30 s wait"
vm_grep "$OUT/read-auth-jw-medium.log" "a Just Works bond is not enough" "and the hint says which pairing gives an authenticated key"
# read --pair with no bond: the kernel reports the connect made with BT_SECURITY medium while Bumble's SMP still
# runs, so the first read can meet 0x0F before the Encryption Change; mirror asks for medium again, which holds the
# retry until the link is encrypted, and reads.
forget forget-0
pair_from=$(dmesg | wc -l)
vm_ok read-pair 90 "$BIN/mirror" read $peer "$h_enc" --adapter hci0 --pair
vm_grep "$OUT/read-pair.log" "secret: encrypted link" "read --pair pairs with Bumble and reads the encrypted value"
# In this step the kernel logs one "security requested but not available" while the pairing runs and succeeds,
# read in its sources (6.12): the socket asked for medium before the connect and no LTK is held, so at
# l2cap_conn_ready the ATT channel, first in the connection's list, calls smp_conn_security before the SMP channel
# is ready (conn->smp still NULL: the line, and the ATT channel passed unencrypted, hence the first read's 0x0F);
# smp_conn_security has raised pending_sec_level first, and l2cap_le_conn_ready's own call then starts the pairing.
# So this step's lines are kept apart (read-pair-dmesg.log) from the check below that every other pairing had SMP.
pair_to=$(dmesg | wc -l)
dmesg | sed -n "$((pair_from + 1)),${pair_to}p" >"$OUT/read-pair-dmesg.log"

# 3. Passkey Entry: Bumble DisplayOnly showing a fixed passkey, mirror KeyboardOnly typing it (Part H Table 2.8).
forget forget-1
echo "display 654321" >"$OUT/bumble.control"
vm_ok pair-passkey 90 "$BIN/mirror" pair $peer --adapter hci0 --io keyboard --passkey 654321
vm_grep "$OUT/pair-passkey.log" "^paired with $peer \(public\) on hci0: Passkey Entry$" "mirror pair reports Passkey Entry"
vm_grep "$OUT/bumble.log" "^bumble-peer: passkey displayed: 654321" "Bumble displayed the passkey"
vm_grep "$OUT/bumble.log" "^bumble-peer: paired with $CENTRAL: key authenticated=True" "Bumble's side is authenticated"
vm_no_le_link
vm_ok read-auth 60 "$BIN/mirror" read $peer "$h_auth" --adapter hci0 --security high --json
vm_json "$OUT/read-auth.log" "j['text'] == 'secret: authenticated link'" "the authenticated value read on the Passkey Entry bond"
# A wrong passkey: the confirm values differ and SMP fails (Pairing Failed, Confirm Value Failed); exit 1.
forget forget-2
vm_run pair-wrong 90 "$BIN/mirror" pair $peer --adapter hci0 --io keyboard --passkey 111111
[ "$VM_RC" = 1 ] || vm_fail "a wrong passkey exited $VM_RC (expected 1)"
vm_grep "$OUT/pair-wrong.log" "failed: Pair Device answered 0x05 Authentication Failed" "a wrong passkey is named as the kernel's Authentication Failed"
vm_grep "$OUT/bumble.log" "^bumble-peer: pairing failed: CONFIRM_VALUE_FAILED" "Bumble saw the pairing fail (Confirm Value Failed)"
vm_stop bumble 10 TERM

# 4. A resolvable private address (Vol 6 Part B §1.3.2.2): Bumble with LE privacy advertises from an RPA made with its
# IRK, and pairing gives its IRK and identity (its public address, Vol 3 Part H §3.6.4-5). mirror pairs with the RPA
# and keeps the bond under the identity; Bumble restarts with a new RPA, the kernel forgets the keys, and a new process
# given that RPA finds the bond by the IRK (Part H §2.2.2's ah), loads it, connects by the identity and reads the
# encrypted value. (Bumble keeps its keys in one file across the restart.)
IRK=0f1e2d3c4b5a69788796a5b4c3d2e1f0
rpa_of() { sed -n 's/^bumble-peer: advertising as \([0-9A-F:]*\) (random, resolvable).*/\1/p' "$OUT/$1.log"; }
bumble_peer rpa-1 --io none --privacy $IRK --keystore "$OUT/rpa-keys.json"
rpa1=$(rpa_of rpa-1)
case "$rpa1" in [4-7]?:*) ;; *) vm_fail "Bumble's address '$rpa1' is not a resolvable private address (top bits 01)" ;; esac
vm_ok pair-rpa 90 "$BIN/mirror" pair "$rpa1" --type random --adapter hci0
vm_grep "$OUT/pair-rpa.log" "^paired with $rpa1 \(random\) on hci0: Just Works$" "mirror pairs with Bumble's RPA"
vm_grep "$OUT/pair-rpa.log" "^bonded: .*IRK.*kept in $XDG_STATE_HOME/mirror/bonds/$CENTRAL/$peer.json$" "and keeps the bond, with Bumble's IRK, under its identity"
vm_stop rpa-1 10 TERM
bumble_peer rpa-2 --io none --privacy $IRK --keystore "$OUT/rpa-keys.json"
rpa2=$(rpa_of rpa-2)
[ -n "$rpa2" ] && [ "$rpa2" != "$rpa1" ] || vm_fail "Bumble's second RPA '$rpa2' is not a new one (first $rpa1)"
vm_run kernel-forgets-rpa 15 btmgmt -i hci0 unpair -t 1 $peer
vm_no_le_link
vm_ok read-rpa 60 "$BIN/mirror" read "$rpa2" "$h_enc" --type random --adapter hci0 --security medium
vm_grep "$OUT/read-rpa.log" "^note: $rpa2 \(resolvable private address\) resolves to the bonded identity $peer \(public\)" "a new RPA resolves to the bonded identity by the stored IRK"
vm_grep "$OUT/read-rpa.log" "loaded 1 long term key" "the identity's key went into the kernel"
vm_grep "$OUT/read-rpa.log" "^note: connecting to the identity $peer \(public\)" "and mirror connects by the identity, which the kernel finds by the RPA"
vm_grep "$OUT/read-rpa.log" "secret: encrypted link" "and the encrypted read works over the new RPA"
[ "$(grep -c "^bumble-peer: pairing started" "$OUT/rpa-2.log")" = 0 ] || vm_fail "the read over the new RPA paired again instead of using the bond"
vm_stop rpa-2 10 TERM

dmesg | sed -n "$((dmesg_start + 1)),${pair_from}p;$((pair_to + 1)),\$p" >"$OUT/dmesg.log"
vm_no_grep "$OUT/dmesg.log" "security requested but not available|Unable to create .* crypto context" "the kernel had SMP for every pairing"
vm_stop capture 5 TERM
[ "$VM_RC" = 0 ] || vm_fail "the HCI capture ended with exit $VM_RC"
# The capture's SMP and Encryption Change (btsnoop_att.py; BlueZ 5.66's btmon -r crashed partway through this one,
# and tshark takes some 14 s in the VM).
vm_ok smp 30 python3 -I -S "$REPO/tools/vm/btsnoop_att.py" "$OUT/hci.btsnoop" --adapter 0 --smp
vm_grep "$OUT/smp.log" "tx SMP Pairing Request$" "SMP Pairing Request from hci0 in the capture"
vm_grep "$OUT/smp.log" "rx SMP Pairing Public Key$" "LE Secure Connections: Bumble's Pairing Public Key"
vm_grep "$OUT/smp.log" "SMP Pairing Failed reason 0x04$" "Pairing Failed, Confirm Value Failed (0x04), on the wrong passkey"
vm_grep "$OUT/smp.log" "Encryption Change status 0x00$" "an Encryption Change with status Success"
