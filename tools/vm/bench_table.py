#!/usr/bin/env python3
"""Checks the bench scenario's counts at the peer and prints the side-by-side table (tools/vm/scenarios/bench.sh).

usage: bench_table.py SIM_LOG MIRROR_JSON:CONNECTION... [--gatttool GATTTOOL_JSON:CONNECTION]...

SIM_LOG is mirror-sim's output: for each closed connection N a line "connection N closed: ...; received R Write
Requests, C Write Commands" (an Enhanced ATT bearer's counts go to its client's connection). Each MIRROR_JSON is `mirror bench --json` over connection N: the peer must have
counted 2 x warm-up + mirror's writes + the bare loop's writes of each mode (the bare loop runs on the same
connection with its own warm-up), with --bearers N also its one-bearer rounds and the Client Supported Features
write that opened the bearers. Each GATTTOOL_JSON is tools/vm/gatttool_bench.py's output: the peer must have
counted exactly the Write Requests and Write Commands it sent; its figures go in the row of the same MTU and size. Prints "FAIL ..." and exits 1 at the first mismatch; else
one "ok ..." line per check, then the table of writes/s: mirror, gatttool and the bare loop, per mode and MTU.
"""
import json
import re
import sys


def load(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    docs, pos, decoder = [], 0, json.JSONDecoder()
    while True:
        start = text.find("{", pos)
        if start < 0:
            break
        try:
            doc, pos = decoder.raw_decode(text, start)
            docs.append(doc)
        except ValueError:
            pos = start + 1
    if not docs:
        sys.exit(f"FAIL no JSON object in {path}")
    return docs[-1]


def peer_counts(sim_log):
    """What mirror-sim received per client: an Enhanced ATT bearer's connection ("connection N opened: ... (Enhanced
    ATT bearer of connection C, ...)") counts for its client C."""
    counts, client = {}, {}
    for line in open(sim_log, encoding="utf-8", errors="replace"):
        m = re.search(r"connection (\d+) opened: .*\(Enhanced ATT bearer of connection (\d+)", line)
        if m:
            client[int(m.group(1))] = int(m.group(2))
        m = re.search(r"connection (\d+) closed: .*; received (\d+) Write Requests, (\d+) Write Commands", line)
        if m:
            conn = client.get(int(m.group(1)), int(m.group(1)))
            r, c = counts.get(conn, (0, 0))
            counts[conn] = (r + int(m.group(2)), c + int(m.group(3)))
    return counts


def eatt_extra(mode):
    """With --bearers N (N > 1, bearers open): the one-bearer rounds of the same run, and the Client Supported
    Features write (a Write Request, with the EATT bit) that opened the bearers."""
    b = mode.get("bearers")
    if not b or b["writers"] < 2:
        return 0
    return b["oneBearer"]["writes"] + 1


def check(ok, what):
    if not ok:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok {what}")


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    counts = peer_counts(args[0])
    mirrors, gatttools = [], []
    i = 1
    while i < len(args):
        if args[i] == "--gatttool":
            path, conn = args[i + 1].rsplit(":", 1)
            gatttools.append((load(path), int(conn)))
            i += 2
            continue
        path, conn = args[i].rsplit(":", 1)
        mirrors.append((load(path), int(conn)))
        i += 1

    for j, conn in mirrors:
        check(conn in counts, f"mirror-sim logged what it received on connection {conn}")
        want = {m["mode"]: 2 * j["warmup"] + m["writes"] + m["bare"]["writes"] + eatt_extra(m) for m in j["modes"]}
        got = {"with-response": counts[conn][0], "without-response": counts[conn][1]}
        for mode, n in want.items():
            check(got[mode] == n, f"MTU {j['mtu']} {mode}: the peer counted {got[mode]} writes of {n} "
                                  f"(2 x {j['warmup']} warm-up + mirror's and the bare loop's)")
    for g, conn in gatttools:
        check(conn in counts, f"mirror-sim logged what it received on connection {conn} (gatttool, MTU {g['mtu']})")
        sent = g["sent"]
        check(counts[conn] == (sent["writeRequests"], sent["writeCommands"]),
              f"gatttool at MTU {g['mtu']}: the peer counted {counts[conn][0]} Write Requests and {counts[conn][1]} "
              f"Write Commands, gatttool sent {sent['writeRequests']} and {sent['writeCommands']}")

    # The table: one row per MTU and mode.
    print()
    print("writes/s over the LE link (median round; TCG, so compare within a run only)")
    header = f"{'MTU':>4} {'size':>4}  {'mode':<17} {'mirror':>8} {'gatttool':>9} {'bare loop':>10} {'mirror/bare':>12} {'gatttool/bare':>14}"
    print(header)
    print("-" * len(header))
    for j, _ in mirrors:
        same = [g for g, _ in gatttools if g["mtu"] == j["mtu"] and g["size"] == j["size"]]
        gmodes = {m["mode"]: m for m in same[0]["modes"]} if same else {}
        for m in j["modes"]:
            g = gmodes.get(m["mode"])
            bare = m["bare"]["writesPerSecond"]
            grate = f"{g['writesPerSecond']:>9}" if g else f"{'-':>9}"
            gratio = f"{g['writesPerSecond'] / bare:>14.2f}" if g and bare else f"{'-':>14}"
            print(f"{j['mtu']:>4} {j['size']:>4}  {m['mode']:<17} {m['writesPerSecond']:>8.0f} {grate} {bare:>10.0f} "
                  f"{m['ratioToBare']:>12.2f} {gratio}")


if __name__ == "__main__":
    main()
