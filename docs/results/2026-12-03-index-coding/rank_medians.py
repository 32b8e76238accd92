# The planner error against rank 0's median step and against the median (and mean) of
# the ranks' medians, per stored run (2026-12-03-index-coding.md). From docs/results/:
#   /usr/bin/python3 2026-12-03-index-coding/rank_medians.py RUN.json ...
import json
import os
import statistics as st
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'tools'))
import planner_validation as pv  # noqa: E402
paths = sys.argv[1:]
def score(rows):
    e = [r for r in rows]
    return sum(abs(x) > 20 for x in e), sum(map(abs, e)) / max(1, len(e))
tot = {"r0": [], "mom": [], "mean": []}
for p in paths:
    res = json.load(open(p))
    rows, _ = pv.validate(res, 50e-6)
    # the cases in order, matched by (system, profile, link, method)
    key = lambda c: (c["system"], c["profile"], c["link"], c["method"])
    byk = {key(c): c for c in res["cases"]}
    e = {"r0": [], "mom": [], "mean": []}
    for r in rows:
        c = byk[key(r)]
        if r["system"] != "gradwire" or not c.get("per_rank"):
            continue
        m = [x["iter_ms_median"] for x in c["per_rank"]]
        for name, meas in (("r0", c["iter_ms_median"]), ("mom", st.median(m)), ("mean", st.mean(m))):
            e[name].append(100 * (r["predicted_ms"] - meas) / meas)
    for k in e: tot[k] += e[k]
    print(f"{p[:60]:60s} n={len(e['r0']):3d} " + "  ".join(f"{k}: {score(v)[0]:2d} {score(v)[1]:5.1f}%" for k, v in e.items()))
print("all", len(tot["r0"]), "  ".join(f"{k}: >20% {score(v)[0]} mean|e| {score(v)[1]:.1f}%" for k, v in tot.items()))
