"""The perf scenario's table: per MTU and mode, mirror's and the bare loop's CPU per write and their ratio,
for each run and as the median of the runs (mirror bench --json files named perf-MTU-RUN.log).
With --spread (the perf-confirm scenario, issue 38 point 5; files named confirm-MTU-RUN.log): per MTU and mode over
the runs, the median and min-max of mirror's CPU per write over its bare loop's (cpuRatioToBare), of its writes/s
over the bare loop's (ratioToBare: the round trip's inverse for Write Requests, the command rate for Write
Commands), of the batch call's CPU over the bare loop's (--batch), and the medians of the CPU per write and the p50
round trip."""
import json
import re
import statistics
import sys

spread_table = sys.argv[1:2] == ["--spread"]
rows = {}
for path in sys.argv[2 if spread_table else 1:]:
    m = re.search(r"(?:perf|confirm)-(\d+)-(\d+)\.log$", path)
    if not m:
        continue
    try:
        j = json.load(open(path))
    except ValueError:
        print("skipped %s: not a finished mirror bench --json" % path)
        continue
    for mode in j["modes"]:
        rows.setdefault((int(m.group(1)), mode["mode"]), []).append(mode)


def spread(xs):
    xs = [x for x in xs if x is not None]
    return "%.2f (%.2f-%.2f)" % (statistics.median(xs), min(xs), max(xs)) if xs else "-"


def med(xs):
    xs = [x for x in xs if x is not None]
    return "%.0f" % statistics.median(xs) if xs else "-"


if spread_table:
    print("%-4s %-17s %4s  %-20s %-20s %-20s %-11s %-11s %s" % (
        "MTU", "mode", "runs", "CPU mirror/bare", "writes/s mirror/bare", "CPU batch/bare", "CPU us", "bare CPU us",
        "p50 round trip us"))
    for (mtu, mode), ms in sorted(rows.items()):
        print("%-4d %-17s %4d  %-20s %-20s %-20s %-11s %-11s %s" % (
            mtu, mode, len(ms), spread([x.get("cpuRatioToBare") for x in ms]), spread([x.get("ratioToBare") for x in ms]),
            spread([x.get("batch", {}).get("cpuRatioToBare") for x in ms]),
            med([x["cpuMicrosecondsPerWrite"] for x in ms]), med([x.get("bare", {}).get("cpuMicrosecondsPerWrite") for x in ms]),
            med([x.get("latencyMicroseconds", {}).get("p50") for x in ms])))
    sys.exit(0)

print("%-5s %-17s %-40s %s" % ("MTU", "mode", "runs: mirror/bare CPU us per write (ratio)", "median ratio"))
for (mtu, mode), ms in sorted(rows.items()):
    runs = [(x["cpuMicrosecondsPerWrite"], x["bare"]["cpuMicrosecondsPerWrite"], x["cpuRatioToBare"]) for x in ms]
    cells = " ".join("%.0f/%.0f(%.2f)" % r for r in runs)
    print("%-5d %-17s %-40s %.2f" % (mtu, mode, cells, statistics.median(r[2] for r in runs)))
