# vm-about: an unprivileged user: mirror gatt needs no capability; mirror discover (raw HCI) fails with exit 7 and the setcap advice, then works once the binary has cap_net_raw,cap_net_admin
# vm-timeout: 200
vm_need mirror mirror-sim
vm_controllers
vm_sim sim
peer=00:AA:01:01:00:01
# A copy on the guest's tmpfs (the 9p share is read-only and carries no file capabilities).
mkdir -p /tmp/caps && cp "$BIN/mirror" /tmp/caps/mirror && chmod 0755 /tmp/caps /tmp/caps/mirror
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)

# 1. The L2CAP CID 4 socket needs no capability: an unprivileged user reads the database.
vm_ok nobody-gatt 60 "${nobody[@]}" /tmp/caps/mirror gatt $peer --adapter hci0 --json
vm_json "$OUT/nobody-gatt.log" 'any(s["uuid"] == "6d697272-6f72-7369-6d00-000000000000" for s in j["services"])' "user nobody: mirror gatt finds the mirror's service without any capability"

# 2. Raw HCI (the LE scan) needs CAP_NET_RAW and CAP_NET_ADMIN: refused, with the advice, exit 7.
vm_run nobody-discover 40 "${nobody[@]}" /tmp/caps/mirror discover --adapter hci0 --duration 3 --json
[ "$VM_RC" = 7 ] || { sed 's/^/    | /' "$OUT/nobody-discover.log"; vm_fail "discover without capabilities exited $VM_RC (expected 7)"; }
vm_json "$OUT/nobody-discover.log" '"error" in j and "setcap" in json.dumps(j) and ("CAP_NET_RAW" in json.dumps(j) or "cap_net_raw" in json.dumps(j))' "without capabilities: exit 7, naming the capability and setcap"

# 3. The same binary with file capabilities, the same unprivileged user: the scan finds the simulator.
vm_ok setcap 20 setcap cap_net_raw,cap_net_admin+ep /tmp/caps/mirror
vm_ok getcap 20 getcap /tmp/caps/mirror
vm_grep "$OUT/getcap.log" "cap_net_admin,cap_net_raw[=+]ep" "the copy carries cap_net_raw,cap_net_admin"
vm_ok caps-discover 60 "${nobody[@]}" /tmp/caps/mirror discover --adapter hci0 --duration 4 --json
vm_json "$OUT/caps-discover.log" 'any(d.get("address") == "00:AA:01:01:00:01" and d.get("name") == "mirror-sim" for d in (js if isinstance(js[0], dict) and "address" in js[0] else (j if isinstance(j, list) else j.get("devices", []))))' "user nobody with file capabilities: discover finds 00:AA:01:01:00:01 \"mirror-sim\""
