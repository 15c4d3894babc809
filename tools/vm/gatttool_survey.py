#!/usr/bin/env python3
"""A survey of a device by BlueZ's own gatttool, on one connection, for a capture of it (tools/vm/scenarios/clone.sh).

Drives `gatttool -I` over a pty (gatttool_bench.py says why): `connect`, then `primary`, `characteristics`,
`char-desc` (each over the whole handle range) and `char-read-hnd H` for each handle of --read, one at a time. Each
step waits for its count of answer lines, known from the live clone DEVICE_FILE (services, characteristics, every
attribute): no wait on silence. Prints what each step saw. Every wait is bounded by --timeout.
Usage: gatttool_survey.py ADAPTER PEER DEVICE_FILE [--read H,H,...] [--timeout S]
"""
import argparse
import json
import os
import pty
import re
import select
import subprocess
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\x01|\x02")


class Gatttool:
    def __init__(self, adapter, peer, timeout):
        self.timeout = timeout
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(["gatttool", "-i", adapter, "-b", peer, "-t", "public", "-I"],
                                     stdin=slave, stdout=slave, stderr=slave, close_fds=True, start_new_session=True)
        os.close(slave)
        os.set_blocking(master, False)
        self.fd = master
        self.text = ""

    def pump(self, until, what):
        """Reads (and writes nothing) until until(text) holds; fails after the timeout."""
        deadline = time.monotonic() + self.timeout
        while not until(self.text):
            if "Disconnected" in self.text or "connect error" in self.text:
                self.fail(f"gatttool lost the link while waiting for {what}")
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail(f"waited {self.timeout} s for {what}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    self.fail(f"gatttool ended while waiting for {what}")
                self.text += ANSI.sub("", data.decode("utf-8", "replace")).replace("\r", "\n")

    def command(self, line, pattern, n, what):
        """Sends `line`, then waits for n lines after it matching `pattern`."""
        start = len(self.text)
        os.write(self.fd, (line + "\n").encode())
        self.pump(lambda t: len(re.findall(pattern, t[start:])) >= n, what)
        return re.findall(pattern, self.text[start:])

    def fail(self, message):
        sys.stderr.write(self.text[-3000:] + "\n")
        self.close()
        sys.exit("gatttool_survey: " + message)

    def close(self):
        try:
            os.write(self.fd, b"disconnect\nquit\n")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


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
    g = Gatttool(a.adapter, a.peer, a.timeout)
    os.write(g.fd, b"connect\n")
    g.pump(lambda t: "Connection successful" in t, "the connection")
    primary = g.command("primary", r"attr handle: 0x[0-9a-f]{4}, end grp handle", len([s for s in services if s.get("primary", True)]),
                        "the primary services")
    found = g.command("characteristics", r"handle: 0x[0-9a-f]{4}, char properties", len(chars), "the characteristics")
    desc = g.command("char-desc", r"handle: 0x[0-9a-f]{4}, uuid: [0-9a-f-]{36}", attributes, "every attribute's type")
    reads = []
    for h in [int(x, 0) for x in a.read.split(",") if x]:
        reads += g.command("char-read-hnd 0x%04x" % h, r"Characteristic value/descriptor(?: read failed)?: [^\n]*", 1,
                           "the read of 0x%04x" % h)
    g.close()
    refused = [r for r in reads if "read failed" in r]
    print(f"gatttool: {len(primary)} primary services, {len(found)} characteristics, {len(desc)} attributes' types, "
          f"{len(reads)} reads ({len(refused)} refused) on one connection")


main()
