# vm-about: the socket bearer over a real LE link: bearer-e2e listen on hci1 (its own advertising), connect from hci0, PDUs echoed both ways; a connect to nobody fails in time
# vm-timeout: 150
vm_need bearer-e2e
vm_controllers
peer=00:AA:01:01:00:01

# 1. 50 PDUs of 20 bytes, each echoed back by the listener.
vm_bg listen1 "$BIN/bearer-e2e" listen --adapter hci1 --advertise vm-bearer --accept-timeout 60
vm_wait_log listen1 '"event":"advertising"' 20
vm_run connect1 40 "$BIN/bearer-e2e" connect $peer --adapter hci0 --timeout 20 --count 50 --size 20
vm_json "$OUT/connect1.log" 'j["ok"] is True and j["echoed"] == 50' "hci0 sent 50 PDUs and got each echo back"
# The listener exits when the link ends. Over LE the kernel reports the central's disconnect (Remote User
# Terminated) as recv ECONNRESET rather than end of file, and bearer-e2e then exits 1: the scenario checks
# what the listener saw, not its exit status.
vm_join listen1 15
vm_json "$OUT/listen1.log" '[e["event"] for e in js if "event" in e][:3] == ["listening", "advertising", "accepted"] and js[-1]["event"] == "closed" and js[-1]["pdus"] == 50 and (js[-1]["kind"] == "closedByPeer" or js[-1].get("errno") == "ECONNRESET")' "hci1 accepted, received 50 PDUs, saw the peer close" \
  'sum(1 for e in js if e.get("event") == "pdu" and e["length"] == 20 and e["opcode"] == "0x52") == 50' "hci1's 50 PDUs were 20-byte Write Commands"

# 2. PDUs of 515 bytes (an ATT MTU of 517 less 2): each crosses the 192-byte ACL buffers in 3 fragments.
vm_bg listen2 "$BIN/bearer-e2e" listen --adapter hci1 --advertise vm-bearer --accept-timeout 60
vm_wait_log listen2 '"event":"advertising"' 20
vm_run connect2 40 "$BIN/bearer-e2e" connect $peer --adapter hci0 --timeout 20 --count 20 --size 515
vm_json "$OUT/connect2.log" 'j["ok"] is True and j["echoed"] == 20 and j["size"] == 515' "20 PDUs of 515 bytes echoed intact"
vm_join listen2 15
vm_json "$OUT/listen2.log" 'sum(1 for e in js if e.get("event") == "pdu" and e["length"] == 515) == 20' "hci1 received 20 whole 515-byte PDUs"

# 3. Nobody advertises this address: the connect must fail with a clear error within its deadline.
vm_run nobody 30 "$BIN/bearer-e2e" connect 00:AA:01:09:09:09 --adapter hci0 --timeout 5
[ "$VM_RC" = 1 ] || vm_fail "connect to nobody exited $VM_RC, expected 1"
vm_json "$OUT/nobody.log" 'j["ok"] is False and j["stage"] == "connect" and (j.get("kind") == "connectTimedOut" or j.get("errno") in ("ECONNREFUSED", "ETIMEDOUT")) and len(j["error"]) > 20' "a connect to nobody fails as a timeout or ECONNREFUSED, with a sentence" \
  'j["elapsed_ms"] <= 5000 + 3000' "it gave up within its 5 s deadline (+3 s)"
vm_log "nobody: $(tail -n 1 "$OUT/nobody.log")"
