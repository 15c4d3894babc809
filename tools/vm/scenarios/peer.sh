# vm-about: bluetoothd's GATT server on hci1 answers BlueZ's gatttool on hci0 (the peer the CLI is checked against)
# vm-timeout: 150
vm_gatt_peer
peer=00:AA:01:01:00:01
vm_ok gatttool-primary 40 gatttool -i hci0 -b $peer -t public --primary
vm_grep "$OUT/gatttool-primary.log" "attr handle = 0x0001, end grp handle = 0x0007 uuid: 00001800-" "GAP service 0x0001-0x0007"
vm_grep "$OUT/gatttool-primary.log" "attr handle = 0x0008, end grp handle = 0x0011 uuid: 00001801-" "GATT service 0x0008-0x0011"
vm_ok gatttool-read 40 gatttool -i hci0 -b $peer -t public --char-read -a 0x0003
vm_grep "$OUT/gatttool-read.log" "value/descriptor: 42 6c 75 65 5a 20 35 2e 36 36" "Device Name reads 'BlueZ 5.66'"
vm_run gatttool-write 40 gatttool -i hci0 -b $peer -t public --char-write-req -a 0x0003 -n 41
vm_grep "$OUT/gatttool-write.log" "Attribute can't be written" "bluetoothd refuses a write to Device Name"
