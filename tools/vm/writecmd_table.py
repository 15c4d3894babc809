"""The writecmd-ab scenario's table (issue 38 point 4): syscalls per Write Command from strace -f -c, each build
alone and its bare loop (same-connection minus none), then user and system time per command (GNU time, 21000
commands minus 1000) and the backpressure per command, per run, then each build's CPU per command and command
rate against its bare loop's, per run.
Usage: writecmd_table.py OUT_DIR SIDE..."""
import json
import os
import sys

out, sides = sys.argv[1], sys.argv[2:]
sent = 3000 + 50
names = ["sendto", "sendmsg", "sendmmsg", "epoll_ctl", "epoll_wait", "poll", "recvmsg", "recvfrom", "futex"]


def strace(path):
    """{syscall: (calls, errors)} and the total calls of one strace -c file."""
    calls, total = {}, 0
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[3].isdigit():
            errors = int(f[4]) if len(f) == 6 and f[4].isdigit() else 0
            if f[-1] == "total":
                total = int(f[3])
            else:
                calls[f[-1]] = (int(f[3]), errors)
    return calls, total


def row(label, calls, total):
    cells = ["%.2f" % (calls.get(n, (0, 0))[0] / sent) for n in names]
    eagain = calls.get("sendto", (0, 0))[1] + calls.get("sendmsg", (0, 0))[1]
    print("%-22s %s %7.3f %7.2f" % (label, " ".join("%10s" % c for c in cells), eagain / sent, total / sent))


print("syscalls per Write Command (strace -f -c; 3000 + 50 warm-up, MTU 23, 20-byte values)")
print("%-22s %s %7s %7s" % ("", " ".join("%10s" % n for n in names), "EAGAIN", "total"))
for side in sides:
    try:
        alone, alone_total = strace(os.path.join(out, "strace-%s-none.txt" % side))
        both, both_total = strace(os.path.join(out, "strace-%s-same-connection.txt" % side))
    except OSError as e:
        print("%s: %s" % (side, e))
        continue
    row(side + " mirror", alone, alone_total)
    diff = {n: (both.get(n, (0, 0))[0] - alone.get(n, (0, 0))[0], both.get(n, (0, 0))[1] - alone.get(n, (0, 0))[1])
            for n in set(alone) | set(both)}
    row(side + " bare loop", diff, both_total - alone_total)

print()
print("per Write Command, GNU time (21000 - 1000 commands), no strace: user and system us, voluntary and involuntary")
print("context switches; from the 21000 run's JSON: CPU us per write (rounds), backpressure waits per command")
for side in sides:
    for run in (1, 2):
        try:
            t = {c: open(os.path.join(out, "time-%s-%d-%d.txt" % (side, run, c))).read().split("time:")[1].split()
                 for c in (1000, 21000)}
            j = json.load(open(os.path.join(out, "time-%s-%d-21000.log" % (side, run))))["modes"][0]
        except (OSError, IndexError, ValueError, KeyError) as e:
            print("%s run %d: %s" % (side, run, e))
            continue
        d = [(float(t[21000][i]) - float(t[1000][i])) for i in range(4)]
        bp = j.get("backpressure", {})
        print("%-5s run %d: user %.1f us, system %.1f us, %.2f voluntary, %.2f involuntary switches; CPU %.1f us/write; "
              "backpressure %.3f waits per command (%.3f s)" % (
                  side, run, d[0] * 1e6 / 20000, d[1] * 1e6 / 20000, d[2] / 20000, d[3] / 20000,
                  j["cpuMicrosecondsPerWrite"], bp.get("waits", 0) / max(1, j["writes"]), bp.get("seconds", 0)))

print()
print("against the bare loop on the same link (3 rounds of 3000 per run): CPU per command mirror/bare, command rate")
print("mirror/bare, CPU us per command mirror and bare")
for side in sides:
    for run in (1, 2, 3):
        try:
            j = json.load(open(os.path.join(out, "ratio-%s-%d.log" % (side, run))))["modes"][0]
        except (OSError, ValueError, KeyError, IndexError) as e:
            print("%s run %d: %s" % (side, run, e))
            continue
        print("%-5s run %d: CPU %.2fx, rate %.2fx; %.1f / %.1f us" % (
            side, run, j.get("cpuRatioToBare", 0), j.get("ratioToBare", 0), j["cpuMicrosecondsPerWrite"],
            j.get("bare", {}).get("cpuMicrosecondsPerWrite", 0)))
