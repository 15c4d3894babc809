# vm-about: btvirt's two controllers, BlueZ's l2test: an LE connection hci0 -> hci1 on CID 4, data both ways
# vm-timeout: 120
# No btmon here: it decodes l2test's payload on CID 4 as ATT and crashes (BlueZ 5.66).
VM_BTMON=0
vm_controllers
vm_advertise hci1

# hci1 listens on the ATT fixed channel; hci0 connects and sends 20 frames of 40 bytes.
vm_bg listen-recv l2test -r -V le_public -J 4 -b 40 -i hci1
vm_wait_log listen-recv "Waiting for connection" 10
vm_ok connect-send 40 l2test -s -V le_public -J 4 -b 40 -N 20 -i hci0 00:AA:01:01:00:01
vm_wait_log listen-recv "Disconnect" 20
vm_stop listen-recv 5 TERM
vm_count "$OUT/listen-recv.log" "40 bytes in" 20 "hci1 received 20 frames of 40 bytes"
vm_no_grep "$OUT/listen-recv.log" "missmatch|failed" "hci1 received them in sequence"

# The other way: hci1 listens and sends, hci0 connects and receives until hci1 closes.
vm_advertise hci1
vm_bg listen-send l2test -w -V le_public -J 4 -b 40 -N 20 -i hci1
vm_wait_log listen-send "Waiting for connection" 10
vm_bg connect-recv l2test -u -V le_public -J 4 -b 40 -i hci0 00:AA:01:01:00:01
vm_join connect-recv 40
vm_count "$OUT/connect-recv.log" "40 bytes in" 20 "hci0 received 20 frames of 40 bytes"
vm_no_grep "$OUT/connect-recv.log" "missmatch|failed" "hci0 received them in sequence"
