# vm-about: mirror-sim on hci1 (LE CID 4, advertising through raw HCI) and `mirror scan` from hci0 over a real LE link: COMPLETE and the ZIP
# vm-timeout: 180
vm_need mirror mirror-sim
vm_controllers

# The simulator listens on hci1's ATT fixed channel and enables advertising itself (raw HCI).
vm_bg sim "$BIN/mirror-sim" --adapter hci1 --advertise mirror-sim
vm_wait_log sim "listening on LE CID 4 on hci1" 20

# A scan over the LE link; the upload goes over loopback inside the guest.
mkdir -p "$OUT/uploads"
vm_run scan 90 "$BIN/mirror" scan 00:AA:01:01:00:01 --adapter hci0 --upload-host 127.0.0.1 --upload-port 0 \
  --upload-dir "$OUT/uploads" --settle 0.1 --timeout 30 --json
vm_json "$OUT/scan.log" 'j["outcome"] == "complete" and j["scanState"] == "complete" and j["upload"]["entries"] == ["mesh.ply", "measurements.json"]' \
  "the scan completed over LE and the ZIP arrived"

# The misaligned story over the same link, after a reconnection (advertising comes back after the disconnect).
vm_stop sim 5 TERM
vm_bg sim2 "$BIN/mirror-sim" --adapter hci1 --advertise mirror-sim --scale misaligned
vm_wait_log sim2 "listening on LE CID 4 on hci1" 20
vm_run scan-misaligned 90 "$BIN/mirror" scan 00:AA:01:01:00:01 --adapter hci0 --upload-host 127.0.0.1 --upload-port 0 \
  --upload-dir "$OUT/uploads" --timeout 30 --json
vm_json "$OUT/scan-misaligned.log" 'j["outcome"] == "error" and j["scanError"] == "scaleAlignment"' "SCALE_ALIGNMENT over LE"
