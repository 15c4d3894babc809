#!/usr/bin/python3
# hci_capture.py FILE: the kernel's HCI monitor channel (every controller's commands, events and ACL data, as btmon
# -w takes them) written to FILE in btsnoop format 2001 (the monitor's opcodes), without decoding anything: BlueZ
# 5.66's btmon decodes while it writes and has crashed (SIGSEGV) on Bumble's traffic, losing the rest of the
# capture. Runs until SIGINT or SIGTERM. Needs CAP_NET_RAW (the VM runs it as root). A test tool only.
import ctypes
import signal
import socket
import struct
import sys
import time

HCI_DEV_NONE = 0xFFFF
HCI_CHANNEL_MONITOR = 2
# Microseconds from 0 AD to the Unix epoch, as btsnoop counts time.
BTSNOOP_EPOCH_DELTA = 0x00DCDDB30F2F8000


def open_monitor():
    s = socket.socket(socket.AF_BLUETOOTH, socket.SOCK_RAW, socket.BTPROTO_HCI)
    # Python's bind for BTPROTO_HCI takes no channel: struct sockaddr_hci { family, dev, channel } through libc.
    addr = struct.pack("<HHH", socket.AF_BLUETOOTH, HCI_DEV_NONE, HCI_CHANNEL_MONITOR)
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(addr, len(addr))
    if libc.bind(s.fileno(), buf, len(addr)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "bind(HCI_CHANNEL_MONITOR): " + __import__("os").strerror(err))
    return s


def main():
    if len(sys.argv) != 2:
        print("usage: hci_capture.py FILE", file=sys.stderr)
        return 2
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    s = open_monitor()
    s.settimeout(0.2)
    with open(sys.argv[1], "wb") as out:
        out.write(b"btsnoop\0" + struct.pack(">II", 1, 2001))
        out.flush()
        print("hci_capture: writing " + sys.argv[1], flush=True)
        count = 0
        while not stop:
            try:
                frame = s.recv(65536)
            except socket.timeout:
                continue
            except InterruptedError:
                continue
            if len(frame) < 6:
                continue
            opcode, index, length = struct.unpack("<HHH", frame[:6])
            payload = frame[6:6 + length]
            micros = int(time.time() * 1_000_000) + BTSNOOP_EPOCH_DELTA
            out.write(struct.pack(">IIIIq", len(payload), len(payload), (index << 16) | opcode, 0, micros) + payload)
            out.flush()
            count += 1
    print("hci_capture: %d packets" % count, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
