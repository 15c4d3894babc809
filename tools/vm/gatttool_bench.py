#!/usr/bin/env python3
"""The `mirror bench` workload through BlueZ's gatttool, for a side-by-side figure (tools/vm/scenarios/bench.sh).

gatttool's non-interactive --char-write (Write Command) hangs, so this drives `gatttool -I` over a pty (its
readline echoes every character: the output must be read while the input is written, or both block):
`connect`, `mtu N`, then per mode a warm-up and --rounds rounds of --count writes of --size bytes to --handle:
- with response: one `char-write-req` at a time, each waiting for "Characteristic value was written
  successfully" (its Write Response);
- without response: --count `char-write-cmd` lines at once, then `char-read-hnd HANDLE` as a barrier: the peer
  answers the Read Request after the commands before it (ATT is in order), so a round is timed until the peer
  took them in, as `mirror bench` times its commands.
Prints one JSON object: the MTU, and per mode the writes, the median round's writes/s and every round's, and the
requests and commands sent (warm-up included), which the peer's own count must match. Every wait is bounded.
"""
import argparse
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

WRITTEN = "Characteristic value was written successfully"
READ = "Characteristic value/descriptor"  # the barrier's answer: the value, or "... read failed: ..."
FAILURES = ("Error:", "Characteristic Write Request failed", "Command Failed", "Disconnected", "connect error")


class Gatttool:
    """gatttool -I on a pty: `send` queues input, `wait` pumps both ways until a marker was seen N times."""

    def __init__(self, adapter, peer, addr_type, timeout):
        self.timeout = timeout
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(["gatttool", "-i", adapter, "-b", peer, "-t", addr_type, "-I"],
                                     stdin=slave, stdout=slave, stderr=slave, close_fds=True, start_new_session=True)
        os.close(slave)
        os.set_blocking(master, False)
        self.fd = master
        self.pending = b""
        self.counts = {}
        self.tail = ""
        self.log = []

    def send(self, line):
        self.pending += (line + "\n").encode()

    def count(self, marker):
        return self.counts.get(marker, 0)

    def _take(self, data):
        text = data.decode("utf-8", "replace")
        self.log.append(text)
        chunk = self.tail + text
        for marker in (WRITTEN, READ, "Connection successful", "MTU was exchanged successfully") + FAILURES:
            n = chunk.count(marker)
            if n:
                self.counts[marker] = self.counts.get(marker, 0) + n
        # Long enough that no marker fits inside it whole (so none is counted twice), short enough to split none.
        keep = max(len(m) for m in (WRITTEN, READ) + FAILURES) - 1
        self.tail = chunk[-keep:]

    def wait(self, marker, n, what):
        self.wait_until(lambda: self.count(marker) >= n, what, lambda: f"{self.count(marker)} of {n} '{marker}'")

    def wait_until(self, done, what, progress=lambda: "not yet"):
        """Pumps both ways until done() holds; fails on a failure marker or after the timeout."""
        deadline = time.monotonic() + self.timeout
        while not done():
            for failure in FAILURES:
                if self.count(failure):
                    self.fail(f"gatttool said '{failure}' while waiting for {what}")
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail(f"waited {self.timeout} s for {what} ({progress()})")
            r, w, _ = select.select([self.fd], [self.fd] if self.pending else [], [], left)
            if w:
                try:
                    sent = os.write(self.fd, self.pending[:4096])
                    self.pending = self.pending[sent:]
                except BlockingIOError:
                    pass
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.fail(f"gatttool ended (exit {self.proc.poll()}) while waiting for {what}")
                self._take(data)

    def fail(self, message):
        tail = "".join(self.log)[-1500:]
        sys.stderr.write(f"gatttool_bench: {message}\n--- gatttool's last output ---\n{tail}\n")
        self.close()
        sys.exit(1)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.write(self.fd, b"exit\n")
            except OSError:
                pass
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        os.close(self.fd)


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2] if s else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapter", default="hci0")
    ap.add_argument("--peer", required=True)
    ap.add_argument("--type", default="public", choices=["public", "random"])
    ap.add_argument("--handle", required=True, help="the value handle, 0x0012")
    ap.add_argument("--size", type=int, default=20)
    ap.add_argument("--count", type=int, default=100, help="writes per mode and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--mtu", type=int, default=517)
    ap.add_argument("--timeout", type=float, default=30, help="seconds for each wait")
    a = ap.parse_args()

    value = "".join(f"{(i * 7 + 1) & 0xFF:02x}" for i in range(a.size))  # the bytes `mirror bench` writes
    g = Gatttool(a.adapter, a.peer, a.type, a.timeout)
    g.send("connect")
    g.wait("Connection successful", 1, "the connection")
    g.send(f"mtu {a.mtu}")
    g.wait("MTU was exchanged successfully", 1, "Exchange MTU")
    mtu_text = "".join(g.log).split("MTU was exchanged successfully:")[-1].split()[0]
    mtu = int("".join(ch for ch in mtu_text if ch.isdigit()))
    sent = {"requests": 0, "commands": 0, "barriers": 0}

    def requests(n):
        start = time.monotonic()
        for _ in range(n):
            g.send(f"char-write-req {a.handle} {value}")
            sent["requests"] += 1
            g.wait(WRITTEN, sent["requests"], f"Write Response {sent['requests']}")
        return time.monotonic() - start

    def commands(n):
        start = time.monotonic()
        for _ in range(n):
            g.send(f"char-write-cmd {a.handle} {value}")
        sent["commands"] += n
        g.send(f"char-read-hnd {a.handle}")
        sent["barriers"] += 1
        g.wait(READ, sent["barriers"], f"the Read Response after {n} Write Commands")
        return time.monotonic() - start

    modes = []
    for name, run in (("with-response", requests), ("without-response", commands)):
        run(a.warmup)
        seconds = [run(a.count) for _ in range(a.rounds)]
        rates = [a.count / s for s in seconds]
        modes.append({"mode": name, "writes": a.count * a.rounds, "writesPerSecond": round(median(rates)),
                      "bytesPerSecond": round(median(rates) * a.size), "roundsWritesPerSecond": [round(r) for r in rates]})
    g.close()
    print(json.dumps({"tool": "gatttool", "peer": a.peer, "handle": a.handle, "size": a.size, "mtu": mtu,
                      "warmup": a.warmup, "rounds": a.rounds, "modes": modes,
                      "sent": {"writeRequests": sent["requests"], "writeCommands": sent["commands"],
                               "readRequests": sent["barriers"]}}))


if __name__ == "__main__":
    main()
