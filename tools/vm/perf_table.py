"""The perf scenario's table: per MTU and mode, mirror's and the bare loop's CPU per write and their ratio,
for each run and as the median of the runs (mirror bench --json files named perf-MTU-RUN.log)."""
import json
import re
import statistics
import sys

rows = {}
for path in sys.argv[1:]:
    m = re.search(r"perf-(\d+)-(\d+)\.log$", path)
    if not m:
        continue
    try:
        j = json.load(open(path))
    except ValueError:
        print("skipped %s: not a finished mirror bench --json" % path)
        continue
    for mode in j["modes"]:
        rows.setdefault((int(m.group(1)), mode["mode"]), []).append(
            (mode["cpuMicrosecondsPerWrite"], mode["bare"]["cpuMicrosecondsPerWrite"], mode["cpuRatioToBare"]))
print("%-5s %-17s %-40s %s" % ("MTU", "mode", "runs: mirror/bare CPU us per write (ratio)", "median ratio"))
for (mtu, mode), runs in sorted(rows.items()):
    cells = " ".join("%.0f/%.0f(%.2f)" % r for r in runs)
    print("%-5d %-17s %-40s %.2f" % (mtu, mode, cells, statistics.median(r[2] for r in runs)))
