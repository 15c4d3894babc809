# vm-about: an unprivileged user: mirror gatt needs no capability; mirror discover (the management socket) fails with exit 7 and the setcap advice, then works once the binary has cap_net_raw,cap_net_admin; that copy holds no capability on any thread while listen waits on the peer (after its keeper sent --interval), and none while discover scans; an LE link has one thread of its own (its loop), with --pair too, counted from /proc
# vm-timeout: 300
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
# 4. Least privilege over LE, before the raw-HCI scans below: the setcap'd copy as nobody keeps its capabilities
#    on one keeper thread only until the connect's privileged work is done (here --interval's LE Connection Update, which needs CAP_NET_RAW at the
#    send), then no thread holds any while it waits on the peer (listen: the simulator sends only on change).
caps_threads() { # PID LOG: one line per live thread: name, CapPrm, CapEff, NoNewPrivs (a thread that ends meanwhile is left out)
  local t comm st
  for t in /proc/$1/task/*; do
    comm=$(cat "$t/comm" 2>/dev/null) && st=$(cat "$t/status" 2>/dev/null) || continue
    printf '%s %s\n' "$comm" "$(grep -E '^(CapPrm|CapEff|NoNewPrivs):' <<<"$st" | tr -s '\t\n' '  ')"
  done >"$2"
}
vm_bg caps-listen "${nobody[@]}" /tmp/caps/mirror listen $peer scanState --adapter hci0 --interval 30
vm_wait_log caps-listen "^subscribed to 0x[0-9A-F]{4} .*scanState" 60
caps_threads "$(vm_pid caps-listen)" "$OUT/caps-listen-threads.log"
vm_log "threads of the waiting listen: $(wc -l <"$OUT/caps-listen-threads.log")"
sed 's/^/    | /' "$OUT/caps-listen-threads.log"
[ "$(wc -l <"$OUT/caps-listen-threads.log")" -ge 2 ] || vm_fail "expected several threads in the waiting listen"
if grep -vqE 'CapPrm: 0000000000000000 CapEff: 0000000000000000 NoNewPrivs: 1' "$OUT/caps-listen-threads.log"; then
  vm_fail "a thread of the waiting listen still holds a capability (or lacks NoNewPrivs)"
fi
vm_log "ok: every thread of the waiting listen: CapPrm 0, CapEff 0, NoNewPrivs 1"
# The link's own threads (issue 35): the loop ("att-bearer") alone; the HCI link monitor, the SMP watch, the pairing
# agent and the signals are sources of it. Their threads, where a caller has no loop, are named: hci-link,
# smp-watch, pair-agent, mirror-signals. The rest are the process's fixed ones (main, the Swift runtime's pool).
link_threads() { # STEP LOG: counts the waiting command's threads from /proc; fails past one of the link's own
  local t own total
  for t in /proc/$(vm_pid "$1")/task/*; do cat "$t/comm" 2>/dev/null; done >"$OUT/$2"
  total=$(wc -l <"$OUT/$2")
  own=$(grep -cE '^(att-bearer|hci-link|smp-watch|pair-agent|mirror-signals)$' "$OUT/$2")
  vm_log "threads of $1: $total in all, $own of the LE link's own: $(sort "$OUT/$2" | uniq -c | tr -s ' \n' '  ')"
  [ "$own" -le 1 ] || vm_fail "$1: $own threads of the LE link's own (expected at most 1, its loop)"
  [ "$own" = 1 ] && grep -qx att-bearer "$OUT/$2" || vm_fail "$1: the link's loop thread (att-bearer) is not there"
}
link_threads caps-listen caps-listen-comm.log
vm_log "ok: the LE link (monitor and signals on its loop) has one thread of its own"
vm_grep "$OUT/caps-listen.log" "^link: --interval 30: granted" "the keeper sent --interval's LE Connection Update before the drop: granted"
vm_stop caps-listen 10

vm_ok caps-discover 60 "${nobody[@]}" /tmp/caps/mirror discover --adapter hci0 --duration 4 --json
vm_json "$OUT/caps-discover.log" 'any(d.get("address") == "00:AA:01:01:00:01" and d.get("name") == "mirror-sim" for d in (js if isinstance(js[0], dict) and "address" in js[0] else (j if isinstance(j, list) else j.get("devices", []))))' "user nobody with file capabilities: discover finds 00:AA:01:01:00:01 \"mirror-sim\""

# 5. discover drops them once its management socket is bound (the kernel trusts the socket from the bind on): while
#    the scan runs no thread holds any, and the scan still finds the simulator.
vm_bg caps-discover-live "${nobody[@]}" /tmp/caps/mirror discover --adapter hci0 --duration 6
vm_alive caps-discover-live 2 "discover scans"
caps_threads "$(vm_pid caps-discover-live)" "$OUT/caps-discover-threads.log"
sed 's/^/    | /' "$OUT/caps-discover-threads.log"
if grep -vqE 'CapPrm: 0000000000000000 CapEff: 0000000000000000 NoNewPrivs: 1' "$OUT/caps-discover-threads.log"; then
  vm_fail "a thread of the running discover holds a capability"
fi
vm_log "ok: while discover scans no thread holds a capability"
vm_join caps-discover-live 30
[ "$VM_RC" = 0 ] || vm_fail "the discover with the keeper exited $VM_RC"
vm_grep "$OUT/caps-discover-live.log" "mirror-sim" "the scan the keeper ran found the simulator"

# 6. --pair: the pairing agent's management socket and the SMP failure watch join the loop; still one thread of the
#    link's own while it waits (root: the agent's socket needs CAP_NET_ADMIN; the simulator answers Just Works).
export XDG_STATE_HOME="$OUT/state"
vm_stop sim 10 TERM
vm_sim sim-pair --io none
vm_bg caps-pair-listen "$BIN/mirror" listen $peer scanState --adapter hci0 --pair
vm_wait_log caps-pair-listen "^subscribed to 0x[0-9A-F]{4} .*scanState" 90
link_threads caps-pair-listen caps-pair-listen-comm.log
vm_log "ok: with --pair (agent, SMP watch, monitor and signals on the loop) the LE link has one thread of its own"
vm_stop caps-pair-listen 10
[ "$VM_RC" = 0 ] || vm_fail "listen --pair ended with $VM_RC at SIGINT (expected 0: listen's clean end)"
vm_grep "$OUT/caps-pair-listen.log" "^pair: " "the agent on the loop served the link's pairing"
vm_ok caps-unpair 15 "$BIN/mirror" bonds remove $peer --adapter hci0
vm_run caps-unpair-hci1 15 btmgmt -i hci1 unpair -t 1 00:AA:01:00:00:00
vm_stop sim-pair 10 TERM
