#!/usr/bin/env python3
# mirror shell against the same commands one-shot, over an LE link (the shell-timing scenario): the time from
# `mirror shell` starting to its first prompt, and per command from Enter to the next prompt, against the
# wall-clock time of `mirror COMMAND TARGET ...` run alone (each connecting, exchanging the MTU, closing). Each
# one-shot and each shell starts on a fresh link (none left on the adapter: the kernel keeps one 2 s after its
# last socket closes, and a command started then would reuse it). Prints the medians as a table, then JSON.
# usage: shell_timing.py MIRROR TARGET ADAPTER RUNS
import json, os, pty, select, statistics, subprocess, sys, time

mirror, target, adapter, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# The same work both ways: a Read Request, a Write Request (cloudToken's value handle), the discovery, the MTU,
# the link (what the shell prints after its connect).
commands = [["read", "0x0003"], ["write", "0x0012", "41"], ["gatt"], ["mtu"], ["link"]]
prompt = f"mirror {target}> ".encode()

def no_link(limit=20):
    """Waits (bounded) until the adapter has no LE link left."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        out = subprocess.run(["hcitool", "-i", adapter, "con"], capture_output=True, text=True).stdout
        if " LE " not in out:
            return
        time.sleep(0.1)
    sys.exit(f"shell_timing: an LE link stayed on {adapter} for {limit} s")

def expect(fd, buf, start, want, limit):
    """Reads the pty until `want` appears at or after `start`; returns (buf, index after it)."""
    end = time.monotonic() + limit
    while buf.find(want, start) < 0:
        left = end - time.monotonic()
        r, _, _ = select.select([fd], [], [], max(0.0, left))
        if not r:
            sys.exit(f"shell_timing: no {want!r} within {limit} s; got: {buf[start:].decode('utf-8', 'replace')}")
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            sys.exit(f"shell_timing: the shell ended before {want!r}: {buf[start:].decode('utf-8', 'replace')}")
        buf += chunk
    at = buf.find(want, start)
    return buf, at + len(want)

shell_start, shell_cmd, one_shot = [], {" ".join(c): [] for c in commands}, {" ".join(c): [] for c in commands}
for run in range(runs):
    no_link()
    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        os.execv(mirror, [mirror, "shell", target, "--adapter", adapter])
    buf, pos = expect(fd, b"", 0, prompt, 60)
    shell_start.append(time.monotonic() - t0)
    for c in commands:
        line = " ".join(c)
        t = time.monotonic()
        os.write(fd, line.encode() + b"\r")
        buf, pos = expect(fd, buf, pos, prompt, 60)
        shell_cmd[line].append(time.monotonic() - t)
    os.write(fd, b"quit\r")
    os.waitpid(pid, 0)
    os.close(fd)
    for c in commands:
        no_link()
        t = time.monotonic()
        p = subprocess.run([mirror, c[0], target, *c[1:], "--adapter", adapter], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"shell_timing: mirror {' '.join(c)} exited {p.returncode}: {p.stderr}")
        one_shot[" ".join(c)].append(time.monotonic() - t)

ms = lambda xs: round(statistics.median(xs) * 1000)
print(f"medians of {runs} runs, wall clock, LE link hci0 -> mirror-sim on hci1 (btvirt, qemu TCG)")
print(f"  {'':24} {'mirror shell':>14} {'one-shot':>10}")
print(f"  {'start to first prompt':24} {ms(shell_start):>11} ms {'':>10}")
for c in commands:
    line = " ".join(c)
    print(f"  {line:24} {ms(shell_cmd[line]):>11} ms {ms(one_shot[line]):>7} ms")
print(json.dumps({"runs": runs, "shellStartMs": ms(shell_start),
                  "commands": [{"command": " ".join(c), "shellMs": ms(shell_cmd[" ".join(c)]), "oneShotMs": ms(one_shot[" ".join(c)])}
                               for c in commands]}))
