# vm-about: faults over a real LE link: a dropped response (timeout naming what it waited for), a peer that hangs up mid-request, a slow answer, our adapter going down under a connection, nobody at the address, no such adapter, the peer process killed in the middle of a long write, the controller removed (btvirt killed) under a running listen
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

# 7. The peer's process killed in the middle of a long write: 300 bytes at MTU 23 are 17 Prepare Write parts; a
#    fresh simulator holds back its answer to the 5th (delay, so that the kill lands mid-write every time) and is
#    killed (SIGKILL) once that part arrived. Its socket closes with it, the kernel drops the link about 4 s
#    later, and mirror must end then with a named disconnect error (not at its 20 s ATT timeout).
vm_stop sim 10
# Step 4's link is still up on hci1's side: btvirt tells hci1 nothing when hci0 resets, so the kernel on hci1 keeps
# that link until about 4 s after its last socket closed (the simulator's, just now). A connection from hci0 before
# then gets the same handle, is taken for that stale link on hci1 (no accept) and dropped with it.
vm_wait "no LE link left on hci1" 20 sh -c '! hcitool -i hci1 con | grep -q " LE "'
vm_sim sim-killed --token-limit 512 --fault delay:cloudToken:60000@5
value=$(python3 -I -S -c 'print(bytes(range(256)).hex() + bytes(range(44)).hex())')
vm_bg write-killed "$BIN/mirror" write $peer 0x0012 "$value" --long --adapter hci0 --mtu 23 --timeout 20 --json --trace
vm_wait_log sim-killed "fault delay:cloudToken:60000 on Prepare Write Request" 40
t0=$(vm_now)
kill -KILL "$(vm_pid sim-killed)"
vm_log "killed mirror-sim (SIGKILL) with the 5th Prepare Write Request unanswered"
vm_join write-killed 40
us=$(($(vm_now) - t0))
vm_log "mirror write ended $(vm_secs $us) s after the kill, exit $VM_RC"
# The kernel keeps the peer's side of the link up about 4 s after its last socket closed (twice the 2 s
# disconnect delay, for a link the peer accepted), then disconnects: well before the 20 s ATT timeout.
[ $us -lt $(($(vm_scaled 15) * 1000000)) ] || vm_fail "mirror write took $(vm_secs $us) s to end after the peer was killed (expected the link to drop within $(vm_scaled 15) s)"
vm_grep "$OUT/write-killed.log" "> Prepare Write Request handle 0x0012 offset 72 " "the 5th part (offset 72) went out before the kill"
vm_no_grep "$OUT/write-killed.log" "Execute Write Request" "no Execute Write was sent"
[ "$VM_RC" = 6 ] || { sed 's/^/    | /' "$OUT/write-killed.log" | tail -n 12; vm_fail "mirror write --long exited $VM_RC when the peer was killed (expected 6)"; }
vm_json "$OUT/write-killed.log" \
  'j["error"]["kind"] == "connection" and j["error"]["exitStatus"] == 6 and j["error"]["during"] == "Prepare Write Request to handle 0x0012" and "ECONNRESET" in j["error"]["reason"] and "00:AA:01:01:00:01 closed the link" in j["error"]["reason"]' \
  "peer killed mid long write: exit 6, disconnected during the Prepare Write Request to 0x0012: ECONNRESET, the peer closed the link"
vm_log "killed peer: $(grep -m 1 '"message"' "$OUT/write-killed.log")"

# 8. The controller removed under a running listen: btvirt killed (SIGKILL), so hci0 and hci1 are unregistered.
#    Last, because the controllers are gone for good.
vm_sim sim-last
vm_bg listen-gone "$BIN/mirror" listen $peer 0x000c --adapter hci0 --json --trace
vm_wait_log listen-gone "< Write Response" 40
t0=$(vm_now)
kill -KILL "$(vm_pid btvirt)"
vm_log "killed btvirt (SIGKILL) under mirror listen, subscribed to scanState"
vm_join listen-gone 30
us=$(($(vm_now) - t0))
vm_log "mirror listen ended $(vm_secs $us) s after the controller went away, exit $VM_RC"
[ $us -lt $(($(vm_scaled 5) * 1000000)) ] || vm_fail "mirror listen took $(vm_secs $us) s to end after btvirt was killed (expected under $(vm_scaled 5) s)"
[ "$VM_RC" = 6 ] || { sed 's/^/    | /' "$OUT/listen-gone.log" | tail -n 12; vm_fail "mirror listen exited $VM_RC when btvirt was killed (expected 6)"; }
vm_json "$OUT/listen-gone.log" \
  'j["error"]["kind"] == "connection" and j["error"]["exitStatus"] == 6 and j["error"]["during"] == "the notification stream" and "ECONNABORTED" in j["error"]["reason"] and "removed" in j["error"]["reason"]' \
  "controller removed under listen: exit 6, disconnected during the notification stream: ECONNABORTED, the adapter went down or was removed"
vm_log "controller removed: $(grep -m 1 '"message"' "$OUT/listen-gone.log")"
