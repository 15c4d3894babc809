# vm-about: mirror-sim on hci1 and `mirror wifi` from hci0 over a real LE link: the list flow (0x31, count, SSIDs), a join with its notifications, the status
# vm-timeout: 150
vm_need mirror mirror-sim
vm_controllers

vm_sim sim --wifi offline --networks alpha,beta
vm_ok wifi-status-before 60 "$BIN/mirror" wifi status 00:AA:01:01:00:01 --adapter hci0 --json
vm_json "$OUT/wifi-status-before.log" 'j["event"] == "result" and j["status"] == "notConnected"' "wifi status over LE: notConnected"
vm_ok wifi-list 60 "$BIN/mirror" wifi list 00:AA:01:01:00:01 --adapter hci0 --json
vm_json "$OUT/wifi-list.log" 'j["event"] == "result" and j["networks"] == ["alpha", "beta"]' "wifi list over LE (0x31, wifiNumNetworks, wifiNetworkSSIDEnum)"
vm_ok wifi-join 60 "$BIN/mirror" wifi join 00:AA:01:01:00:01 beta --adapter hci0 --json
vm_json "$OUT/wifi-join.log" 'j["event"] == "result" and j["status"] == "connected" and j["ssid"] == "beta"' "wifi join over LE: connected"
vm_grep "$OUT/wifi-join.log" '"event":"notification".*"decoded":"connecting"' "the join's connecting notification arrived"
vm_run wifi-join-unknown 60 "$BIN/mirror" wifi join 00:AA:01:01:00:01 nowhere --adapter hci0 --json
[ "$VM_RC" = 1 ] || vm_fail "joining an unknown SSID exited $VM_RC (expected 1)"
vm_json "$OUT/wifi-join-unknown.log" 'j["status"] == "failed"' "an unknown SSID ends failed"
