#!/usr/bin/env python3
"""Reads ATT out of a btmon capture (btsnoop, Linux monitor datalink 2001), for the VM scenarios.

Usage: btsnoop_att.py FILE [--adapter N] [--answered] [--list] [--smp]
  --adapter N  the controller index (default 0: hci0, our side)
  --smp        prints every SMP PDU (CID 6; Pairing Failed with its reason) and Encryption Change event of the
               adapter, every connection: time, direction, name
  --list       prints every ATT PDU of the adapter's last connection: time, direction, opcode
  --answered   checks that every request and indication the peer sent on the adapter's last connection
               got its response (or an Error Response naming it, or a confirmation) from our side;
               exit 1 naming each one that did not.
"""
import struct
import sys

REQUESTS = {0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20}
NAMES = {0x01: "Error Response", 0x02: "Exchange MTU Request", 0x03: "Exchange MTU Response",
         0x04: "Find Information Request", 0x05: "Find Information Response",
         0x06: "Find By Type Value Request", 0x07: "Find By Type Value Response",
         0x08: "Read By Type Request", 0x09: "Read By Type Response", 0x0A: "Read Request",
         0x0B: "Read Response", 0x0C: "Read Blob Request", 0x0D: "Read Blob Response",
         0x0E: "Read Multiple Request", 0x0F: "Read Multiple Response",
         0x10: "Read By Group Type Request", 0x11: "Read By Group Type Response", 0x12: "Write Request",
         0x13: "Write Response", 0x16: "Prepare Write Request", 0x17: "Prepare Write Response",
         0x18: "Execute Write Request", 0x19: "Execute Write Response", 0x1B: "Handle Value Notification",
         0x1D: "Handle Value Indication", 0x1E: "Handle Value Confirmation", 0x20: "Read Multiple Variable Request",
         0x21: "Read Multiple Variable Response", 0x52: "Write Command"}


def records(path):
    data = open(path, "rb").read()
    if data[:8] != b"btsnoop\0":
        sys.exit(f"{path}: not a btsnoop file")
    version, datalink = struct.unpack(">II", data[8:16])
    if datalink != 2001:
        sys.exit(f"{path}: datalink {datalink}, expected 2001 (Linux monitor)")
    off = 16
    while off + 24 <= len(data):
        orig, incl, flags, drops, ts = struct.unpack(">IIIIq", data[off:off + 24])
        off += 24
        yield (ts - 0x00DCDDB30F2F8000) / 1e6, flags >> 16, flags & 0xFFFF, data[off:off + incl]
        off += incl


SMP_NAMES = {0x01: "Pairing Request", 0x02: "Pairing Response", 0x03: "Pairing Confirm", 0x04: "Pairing Random",
             0x05: "Pairing Failed", 0x06: "Encryption Information", 0x07: "Central Identification",
             0x08: "Identity Information", 0x09: "Identity Address Information", 0x0A: "Signing Information",
             0x0B: "Security Request", 0x0C: "Pairing Public Key", 0x0D: "Pairing DHKey Check",
             0x0E: "Pairing Keypress Notification"}


def smp_lines(path, adapter):
    """SMP PDUs (Vol 3 Part H §3.3; one ACL fragment each) and Encryption Change events (Vol 4 Part E §7.7.8)."""
    for t, index, opcode, pkt in records(path):
        if index != adapter:
            continue
        if opcode == 3 and len(pkt) >= 3 and pkt[0] == 0x08:
            yield f"{t:.6f} Encryption Change status 0x{pkt[2]:02x}"
        elif opcode in (4, 5) and len(pkt) >= 9 and struct.unpack("<H", pkt[6:8])[0] == 6:
            code = pkt[8]
            extra = f" reason 0x{pkt[9]:02x}" if code == 0x05 and len(pkt) > 9 else ""
            yield f"{t:.6f} {'tx' if opcode == 4 else 'rx'} SMP {SMP_NAMES.get(code, hex(code))}{extra}"


def att_pdus(path, adapter):
    """(time, 'rx'|'tx', handle, pdu) for CID 4 on the adapter's last LE connection, reassembled."""
    pdus = []
    partial = {}  # (direction, handle) -> [expected length, bytes]
    for t, index, opcode, pkt in records(path):
        if index != adapter:
            continue
        if opcode == 3 and len(pkt) >= 3 and pkt[0] == 0x3E and pkt[2] in (0x01, 0x0A):
            pdus, partial = [], {}  # a new LE connection: keep only what follows the last one
            continue
        if opcode not in (4, 5) or len(pkt) < 4:
            continue
        direction = "tx" if opcode == 4 else "rx"
        hf, length = struct.unpack("<HH", pkt[:4])
        handle, pb = hf & 0x0FFF, (hf >> 12) & 0x3
        body = pkt[4:4 + length]
        key = (direction, handle)
        if pb == 0x1:  # continuation
            if key in partial:
                partial[key][1] += body
        else:
            if len(body) < 4:
                continue
            l2len = struct.unpack("<H", body[:2])[0]
            partial[key] = [l2len + 4, bytearray(body)]
        if key in partial and len(partial[key][1]) >= partial[key][0]:
            frame = bytes(partial.pop(key)[1])
            cid = struct.unpack("<H", frame[2:4])[0]
            if cid == 4 and len(frame) > 4:
                pdus.append((t, direction, handle, frame[4:]))
    return pdus


def main():
    args = sys.argv[1:]
    path = args[0]
    adapter = int(args[args.index("--adapter") + 1]) if "--adapter" in args else 0
    if "--smp" in args:
        for line in smp_lines(path, adapter):
            print(line)
        return 0
    pdus = att_pdus(path, adapter)
    if "--list" in args:
        for t, d, h, p in pdus:
            print(f"{t:.6f} {d} handle {h} {NAMES.get(p[0], hex(p[0]))} ({len(p)} bytes)")
    if "--answered" in args:
        pending = []  # the peer's requests and indications, in order
        answered = unanswered = 0
        for t, d, h, p in pdus:
            op = p[0]
            if d == "rx" and (op in REQUESTS or op == 0x1D):
                pending.append((t, op))
            elif d == "tx" and pending:
                t0, req = pending[0]
                if (req == 0x1D and op == 0x1E) or (op == req + 1 and req != 0x1D) or \
                        (op == 0x01 and len(p) >= 5 and p[1] == req):
                    answer = NAMES.get(op, hex(op))
                    if op == 0x01:
                        answer += f" 0x{p[4]:02x}"
                    print(f"answered: {NAMES.get(req, hex(req))} -> {answer} in {(t - t0) * 1000:.1f} ms")
                    pending.pop(0)
                    answered += 1
        for t0, req in pending:
            print(f"UNANSWERED: {NAMES.get(req, hex(req))} at {t0:.3f}")
            unanswered += 1
        print(f"{answered} answered, {unanswered} unanswered, {len(pdus)} ATT PDUs on the last connection")
        if unanswered or answered == 0:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
