# vm-about: faults over a real LE link: a dropped response (timeout naming what it waited for), a peer that hangs up mid-request, a slow answer, our adapter going down under a connection, nobody at the address, no such adapter
# vm-timeout: 240
vm_need mirror mirror-sim
vm_controllers
peer=00:AA:01:01:00:01
# The simulator's next three requests to cloudToken (value handle 0x0012): dropped, then hung up on, then
# answered 1.5 s late.
vm_sim sim --fault drop:cloudToken --fault disconnect:cloudToken --fault delay:cloudToken:1500

# 1. No response: the ATT timeout (--timeout 5) fires, says what it waited for, exit 5.
vm_run write-dropped 40 "$BIN/mirror" write $peer 0x0012 41 --adapter hci0 --timeout 5 --json
[ "$VM_RC" = 5 ] || vm_fail "write with a dropped response exited $VM_RC (expected 5)"
vm_json "$OUT/write-dropped.log" \
  'j["error"]["kind"] == "timeout" and j["error"]["waitingFor"] == "Write Response" and j["error"]["handle"] == 18 and j["error"]["seconds"] == 5' \
  "a dropped Write Request: exit 5, timed out after 5 s waiting for Write Response on 0x0012"

# 2. The peer closes the link when the request arrives: connection lost, exit 6.
vm_run write-hangup 40 "$BIN/mirror" write $peer 0x0012 41 --adapter hci0 --timeout 10 --json
[ "$VM_RC" = 6 ] || vm_fail "write to a peer that hangs up exited $VM_RC (expected 6)"
vm_json "$OUT/write-hangup.log" '"error" in j and j["error"]["exitStatus"] == 6 and len(j["error"]["message"]) > 20' "the peer hung up mid-request: exit 6 with a sentence"
vm_log "hangup: $(grep -m 1 '"message"' "$OUT/write-hangup.log")"

# 3. A late answer within the deadline is a success.
t0=$(vm_now)
vm_ok write-late 40 "$BIN/mirror" write $peer 0x0012 41 --adapter hci0 --timeout 10 --json
took=$(( ($(vm_now) - t0) / 1000 ))
[ $took -ge 1500 ] || vm_fail "the delayed write returned in $took ms, before the peer's 1.5 s delay"
vm_log "ok: a Write Response 1.5 s late is a success (the write took $took ms)"

# 4. Our adapter goes down under a live connection: the client reports the loss, exit 6, and does not hang.
#    (Text output: it says on stderr when it has subscribed.)
vm_bg listen "$BIN/mirror" listen $peer --adapter hci0
vm_wait_log listen "^subscribed to" 40
vm_ok hci0-down 15 hciconfig hci0 down
vm_join listen 20
[ "$VM_RC" = 6 ] || { sed 's/^/    | /' "$OUT/listen.log"; vm_fail "mirror listen exited $VM_RC when hci0 went down (expected 6)"; }
vm_log "ok: hci0 down under a connection: mirror listen ends with exit 6: $(grep -m 1 '^mirror:' "$OUT/listen.log")"
vm_ok hci0-up-again 15 hciconfig hci0 up

# 5. Nobody advertises this address: no connection within --timeout, exit 5.
vm_run nobody 40 "$BIN/mirror" read 00:AA:01:09:09:09 0x0003 --adapter hci0 --timeout 5 --json
[ "$VM_RC" = 5 ] || vm_fail "read from nobody exited $VM_RC (expected 5)"
vm_json "$OUT/nobody.log" 'j["error"]["exitStatus"] == 5 and "00:AA:01:09:09:09" in j["error"]["message"]' "nobody at the address: exit 5, naming it"

# 6. No such adapter.
vm_run no-adapter 30 "$BIN/mirror" read $peer 0x0003 --adapter hci7 --json
[ "$VM_RC" != 0 ] || vm_fail "read through hci7 (no such adapter) exited 0"
vm_json "$OUT/no-adapter.log" '"error" in j and "hci7" in j["error"]["message"]' "no such adapter: an error naming hci7 (exit $VM_RC)"
