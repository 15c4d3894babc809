#!/usr/bin/env python3
# `mirror check --json`'s findings against a peer nobody here wrote, compared with the expected ones: each given as
# ID="why this is a finding of that server" (the reason is printed beside it). Fails on a finding not expected, or
# an expected one missing, so a change in the peer or in the checker shows. Usage: check_expect.py LOG [ID=WHY ...]
import json, sys
path, pairs = sys.argv[1], sys.argv[2:]
text = open(path, encoding="utf-8", errors="replace").read()
start = text.find("{")
if start < 0:
    print(f"FAIL no JSON report in {path}")
    sys.exit(2)
report, _ = json.JSONDecoder().raw_decode(text, start)
expected = dict(p.split("=", 1) for p in pairs)
found = {f["id"]: f for f in report["findings"]}
ok = True
for fid, f in sorted(found.items()):
    why = expected.get(fid)
    mark = "expected" if why else "UNEXPECTED"
    ok &= why is not None
    print(f"{mark} {fid} {f['level']} ({f['citation']}): {f['observed']}" + (f"\n    why: {why}" if why else ""))
for fid in sorted(set(expected) - set(found)):
    ok = False
    print(f"MISSING {fid}: expected ({expected[fid]}) but not found")
print(f"checked {len(report.get('checked', []))} rules, {len(found)} findings, not checked: {report.get('notChecked')}")
sys.exit(0 if ok else 1)
