# vm-about: mirror-sim on hci1 (its own raw HCI advertising) and `mirror scan` from hci0: a complete scan with the upload over loopback, then the known failures (a misaligned scale, Wi-Fi offline, a latched mirror)
# vm-timeout: 240
vm_need mirror mirror-sim
vm_controllers

# 1. A complete scan: COMPLETE notified, the ZIP posted to the receiver on 127.0.0.1, stored intact.
vm_sim sim-ok
vm_scan scan-ok 60 --timeout 40
[ "$VM_RC" = 0 ] || vm_fail "mirror scan exited $VM_RC (expected 0)"
vm_json "$OUT/scan-ok.log" \
  'j["event"] == "result" and j["outcome"] == "complete" and j["scanState"] == "complete" and j["scanError"] == "noError" and j["finalRead"] is True and j["preflightScanState"] == "invalid" and j["resetAttempted"] is False' "a complete scan, final read COMPLETE / noError" \
  'sorted(j["upload"]["entries"]) == ["measurements.json", "mesh.ply"] and j["upload"]["bytes"] > 0 and __import__("hashlib").sha256(open(j["upload"]["path"], "rb").read()).hexdigest() == j["upload"]["sha256"]' "the ZIP (mesh.ply, measurements.json) arrived intact over loopback" \
  '[e["decoded"] for e in js if e.get("event") == "notification" and e.get("characteristic") == "scanState"][-1:] == ["complete"] and any(e.get("event") == "subscribed" and e.get("characteristic") == "scanError" for e in js)' "scanState and scanError subscribed; COMPLETE came as a notification"

# 2. The same simulator again: a second connection to a mirror whose state survived (COMPLETE):
#    the pre-flight read sees it, cancelScan resets it, and the scan completes.
vm_scan scan-again 60 --timeout 40
[ "$VM_RC" = 0 ] || vm_fail "the second scan exited $VM_RC (expected 0)"
vm_json "$OUT/scan-again.log" 'j["outcome"] == "complete" and j["preflightScanState"] == "complete" and j["resetAttempted"] is True and j["resetWorked"] is True' "a second scan resets the earlier COMPLETE first (cancelScan) and completes"
vm_stop sim-ok 10 TERM

# 3. The scale is misaligned: SCALE_ALIGNMENT arrives as a notification before the Write Response.
vm_sim sim-misaligned --scale misaligned
vm_scan scan-misaligned 60 --timeout 30
[ "$VM_RC" != 0 ] || vm_fail "a scan on a misaligned scale exited 0"
vm_json "$OUT/scan-misaligned.log" 'j["outcome"] == "error" and j["scanState"] == "error" and j["scanError"] == "scaleAlignment" and j["upload"] is None' "misaligned scale: ERROR / scaleAlignment, no upload"
vm_stop sim-misaligned 10 TERM

# 4. Wi-Fi offline: the cloudToken write latches ERROR / PROCESSOR_BUSY.
vm_sim sim-offline --wifi offline
vm_scan scan-offline 60 --timeout 30
[ "$VM_RC" != 0 ] || vm_fail "a scan with Wi-Fi offline exited 0"
vm_json "$OUT/scan-offline.log" 'j["outcome"] == "error" and j["scanState"] == "error" and j["scanError"] == "processorBusy"' "Wi-Fi offline: ERROR / processorBusy"
vm_stop sim-offline 10 TERM

# 5. A mirror latched at ERROR from an earlier session that ignores cancelScan (wedged): the
#    pre-flight read sees ERROR, the reset is tried and reported as not working, and no scan is faked.
vm_sim sim-wedged --latched-error --cancel-resets no
vm_scan scan-wedged 60 --timeout 20
[ "$VM_RC" != 0 ] || vm_fail "a scan on a wedged mirror exited 0"
vm_json "$OUT/scan-wedged.log" 'j["preflightScanState"] == "error" and j["resetAttempted"] is True and j["resetWorked"] is False and j["outcome"] != "complete"' "latched ERROR that cancelScan does not clear: the reset is reported as failed"
vm_stop sim-wedged 10 TERM
