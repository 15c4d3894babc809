#!/usr/bin/env python3
"""Compares `mirror gatt --json --read` with BlueZ's gatttool for the same peer (used by the VM's gatt scenario).

Usage: gatt_compare.py MIRROR_JSON GATTTOOL_PRIMARY GATTTOOL_CHARACTERISTICS GATTTOOL_CHAR_DESC
Checks that both tools found the same services (start, end, UUID), the same characteristics (declaration
handle, properties, value handle, UUID) and the same descriptors (handle, UUID). Prints one line per check;
exit 0 when all agree.
"""
import json
import re
import sys

BASE = "-0000-1000-8000-00805f9b34fb"
PROPS = ["broadcast", "read", "write-without-response", "write", "notify", "indicate",
         "authenticated-signed-writes", "extended-properties"]


def full(uuid):
    """A UUID in gatttool's 128-bit lowercase form."""
    u = uuid.lower()
    if len(u) == 4:
        return "0000" + u + BASE
    if len(u) == 8:
        return u + BASE
    return u


def bits(names):
    return sum(1 << PROPS.index(n) for n in names)


def main():
    mirror_path, primary_path, chars_path, desc_path = sys.argv[1:5]
    # mirror's notes on stderr (the GATT cache's) come before its JSON in the step's log.
    text = open(mirror_path).read()
    m = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
    failures = 0

    def check(what, ours, theirs):
        nonlocal failures
        if ours == theirs:
            print(f"agree: {what}: {len(ours)}")
        else:
            failures += 1
            print(f"DIFFER: {what}")
            print(f"  mirror only:   {sorted(ours - theirs)}")
            print(f"  gatttool only: {sorted(theirs - ours)}")

    services = {(s["start"], s["end"], full(s["uuid"])) for s in m["services"] if s["primary"]}
    g_services = set()
    for line in open(primary_path):
        r = re.search(r"attr handle = 0x([0-9a-f]{4}), end grp handle = 0x([0-9a-f]{4}) uuid: ([0-9a-f-]{36})", line)
        if r:
            g_services.add((int(r[1], 16), int(r[2], 16), r[3]))
    check("primary services (start, end, uuid)", services, g_services)

    chars = {(c["handle"], bits(c["properties"]), c["valueHandle"], full(c["uuid"]))
             for s in m["services"] for c in s["characteristics"]}
    g_chars = set()
    for line in open(chars_path):
        r = re.search(r"handle = 0x([0-9a-f]{4}), char properties = 0x([0-9a-f]{2}), char value handle = 0x([0-9a-f]{4}), uuid = ([0-9a-f-]{36})", line)
        if r:
            g_chars.add((int(r[1], 16), int(r[2], 16), int(r[3], 16), r[4]))
    check("characteristics (handle, properties, value handle, uuid)", chars, g_chars)

    # gatttool --char-desc lists every handle (Find Information): keep those that are neither service or
    # characteristic declarations nor characteristic values, i.e. the descriptors.
    values = {c["valueHandle"] for s in m["services"] for c in s["characteristics"]}
    descs = {(d["handle"], full(d["uuid"])) for s in m["services"] for c in s["characteristics"] for d in c["descriptors"]}
    g_descs = set()
    declarations = {full(u) for u in ("2800", "2801", "2802", "2803")}
    for line in open(desc_path):
        r = re.search(r"handle = 0x([0-9a-f]{4}), uuid = ([0-9a-f-]{36})", line)
        if r and r[2] not in declarations and int(r[1], 16) not in values:
            g_descs.add((int(r[1], 16), r[2]))
    check("descriptors (handle, uuid)", descs, g_descs)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
