#!/usr/bin/env python3
"""A survey of a device by BlueZ's own gatttool, on one connection, for a capture of it (tools/vm/scenarios/clone.sh).

Drives `gatttool -I` over a pty (gatttool_bench.py's driver, which says why): `connect`, then `primary`,
`characteristics`, `char-desc` (each over the whole handle range) and `char-read-hnd H` for each handle of --read,
one at a time. Each step waits for its count of answer lines, known from the live clone DEVICE_FILE (services,
characteristics, every attribute): no wait on silence. Prints what it saw. Every wait is bounded by --timeout.
Usage: gatttool_survey.py ADAPTER PEER DEVICE_FILE [--read H,H,...] [--timeout S]
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's directory out
from gatttool_bench import Gatttool  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\x01|\x02")


class Survey(Gatttool):
    """gatttool -I with its whole output kept as text, escapes removed."""
    text = ""

    def _take(self, data):
        super()._take(data)
        self.text += ANSI.sub("", data.decode("utf-8", "replace")).replace("\r", "\n")

    def command(self, line, pattern, n, what):
        """Sends `line`, then waits for n lines after it matching `pattern`; returns them."""
        start = len(self.text)
        self.send(line)
        found = lambda: re.findall(pattern, self.text[start:])
        self.wait_until(lambda: len(found()) >= n, what, lambda: f"{len(found())} of {n}")
        return found()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("adapter")
    ap.add_argument("peer")
    ap.add_argument("device_file")
    ap.add_argument("--read", default="")
    ap.add_argument("--timeout", type=float, default=20)
    a = ap.parse_args()
    device = json.load(open(a.device_file))
    services = device["services"]
    chars = [c for s in services for c in s["characteristics"]]
    # Every attribute: service declarations, includes, characteristic declarations and values, descriptors.
    attributes = sum(1 + len(s.get("includes", [])) + sum(2 + len(c["descriptors"]) for c in s["characteristics"])
                     for s in services)
    g = Survey(a.adapter, a.peer, "public", a.timeout)
    g.send("connect")
    g.wait("Connection successful", 1, "the connection")
    primary = g.command("primary", r"attr handle: 0x[0-9a-f]{4}, end grp handle",
                        len([s for s in services if s.get("primary", True)]), "the primary services")
    found = g.command("characteristics", r"handle: 0x[0-9a-f]{4}, char properties", len(chars), "the characteristics")
    desc = g.command("char-desc", r"handle: 0x[0-9a-f]{4}, uuid: [0-9a-f-]{36}", attributes, "every attribute's type")
    reads = []
    for h in [int(x, 0) for x in a.read.split(",") if x]:
        reads += g.command("char-read-hnd 0x%04x" % h, r"Characteristic value/descriptor: [^\n]*", 1, "the read of 0x%04x" % h)
    g.close()
    print(f"gatttool: {len(primary)} primary services, {len(found)} characteristics, {len(desc)} attributes' types, "
          f"{len(reads)} values read, on one connection")


main()
