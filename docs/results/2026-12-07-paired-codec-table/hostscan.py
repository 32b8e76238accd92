"""The planner's host-overhead term (planner_validation.host_overhead_ns:
a dense case's step beyond its wire, averaging and MACs, per element,
charged to every compressed case of the same profile and link) scored on
every stored cluster_bench run under docs/results/ four ways: as it is,
none, the smallest over the run's links of the profile, their median.

    GRADWIRE_EXTENSION=.../_gradwire.so /usr/bin/python3 hostscan.py
"""
import glob, json, os, sys, statistics
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import planner_validation as pv

orig = pv.host_overhead_ns
def variant(name):
    def f(results):
        h = orig(results)
        if name == "now":
            return h
        if name == "zero":
            return {k: 0.0 for k in h}
        if name == "min_links":  # per profile, the smallest over the run's links
            out = {}
            for (p, l), v in h.items():
                out[(p, l)] = min(vv for (pp, ll), vv in h.items() if pp == p)
            return out
        if name == "median_links":
            out = {}
            for (p, l), v in h.items():
                out[(p, l)] = statistics.median([vv for (pp, ll), vv in h.items() if pp == p])
            return out
    return f

paths = sorted(glob.glob(os.path.join(ROOT, "docs", "results", "**", "*.json"), recursive=True))
runs = []
for p in paths:
    try:
        d = json.load(open(p))
    except Exception:
        continue
    if not isinstance(d, dict) or "cases" not in d or "config" not in d:
        continue
    if not any(isinstance(c, dict) and c.get("system") == "gradwire" and c.get("codec") == "none" and c.get("link_bps") for c in d["cases"]):
        continue
    runs.append((p, d))
print(len(runs), "runs")
for name in ["now", "zero", "min_links", "median_links"]:
    pv.host_overhead_ns = variant(name)
    stats = {}
    for p, d in runs:
        try:
            rows, _ = pv.validate(d, 50e-6)
        except Exception as e:
            continue
        cpu = d["config"].get("machine", {}).get("cpu", "?")
        fam = "intel" if "Intel" in cpu or "Xeon" in cpu else "amd"
        date = d["config"].get("date_utc", "")[:10]
        for r in rows:
            if r["system"] != "gradwire" or r["method"] == "none":
                continue
            for key in (fam, fam + (" recent" if date >= "2026-12-02" else " old"), fam+" shared" if r.get("chain_ms") is not None else fam+" unshared"):
                stats.setdefault(key, []).append(r["error_pct"])
    pv.host_overhead_ns = orig
    cells = []
    for k in sorted(stats):
        e = stats[k]
        cells.append(f"{k}: {sum(abs(x)>20 for x in e)}/{len(e)} {sum(map(abs,e))/len(e):.1f} {sum(e)/len(e):+.1f}")
    print(f"{name:13s}", " | ".join(cells))
