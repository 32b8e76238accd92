#!/usr/bin/env python3
"""Scores the planner's shared-core step on every stored cluster_bench run
under docs/results/ (and any extra runs named on the command line) for a
few alternatives: the smooth maximum (chain^q + bound^q)^(1/q) with the
chain charged f x (ranks/cores - 1) x compression alone more, f constant or
f x the largest compressed bucket's share of the compressed elements.

    GRADWIRE_EXTENSION=.../_gradwire.so /usr/bin/python3 scan.py [RUN.json ...]

Needs gradwire's extension (bazel build //lib/python:_gradwire.so)."""
import glob
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import planner_validation as pv  # noqa: E402
from planner import bucket_plan, shapes_for  # noqa: E402


def load_rows(paths):
    rows, fracs = [], {}
    for p in paths:
        try:
            with open(p) as f:
                d = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict) or "cases" not in d or "config" not in d:
            continue
        if not any(isinstance(c, dict) and c.get("cpu_loopback_ms") for c in d["cases"]):
            continue
        rs, _ = pv.validate(d, 50e-6)
        date = d["config"].get("date_utc", "")[:10]
        bb = int(float(d["config"].get("bucket_size_mb") or 25) * (1 << 20))
        for r in rs:
            if r.get("chain_ms") is None:
                continue
            key = (r["profile"], bb)
            if key not in fracs:
                comp = bucket_plan(shapes_for(r["profile"]), bb, compressing=True)[1]
                fracs[key] = max(comp) / max(1, sum(comp)) if comp else 0.0
            rows.append(dict(date=date, run=p, profile=r["profile"], frac=fracs[key],
                             measured=r["measured_ms"], chain=r["chain_ms"],
                             bound=r["cpu_bound_ms"], alone=r["predicted_compress_ms"],
                             share=r["cpu_share"]))
    return rows


def model(q, f, by_frac):
    def step(r):
        extra = f * (r["frac"] if by_frac else 1.0) * (r["share"] - 1) * r["alone"]
        return ((r["chain"] + extra) ** q + r["bound"] ** q) ** (1 / q)
    return step


def score(step, rows):
    err = [100 * (step(r) - r["measured"]) / r["measured"] for r in rows]
    return (sum(abs(e) > 20 for e in err), len(err), sum(map(abs, err)) / len(err),
            sum(err) / len(err))


def main():
    stored = sorted(glob.glob(os.path.join(ROOT, "docs", "results", "**", "*.json"),
                              recursive=True))
    extra = [os.path.abspath(p) for p in sys.argv[1:]]
    rows = load_rows(stored + [p for p in extra if p not in stored])
    sets = {"all": rows, "since 12-02": [r for r in rows if r["date"] >= "2026-12-02"],
            "12-07 zen4": [r for r in rows if "2026-12-07-zen4-grid" in r["run"]]}
    for prof in ("resnet50", "vgg16", "bert_base"):
        sets["since 12-02 " + prof] = [r for r in sets["since 12-02"] if r["profile"] == prof]
    print("runs' largest compressed bucket share:",
          sorted({(r["profile"], round(r["frac"], 2)) for r in rows}))
    print("columns: cases over 20 % / cases, mean |error| %, mean error %")
    variants = [(3.5, 0.0, False)] + [(q, f, by) for q in (2.5, 3.0, 3.5, 4.0, 5.0)
                                      for f in (0.5, 1.0) for by in (False, True)]
    variants += [(q, 0.0, False) for q in (2.5, 3.0, 4.0)]
    for q, f, by in variants:
        cells = []
        for name, rs in sets.items():
            if rs:
                over, n, mean, bias = score(model(q, f, by), rs)
                cells.append(f"{name}: {over}/{n} {mean:.1f} {bias:+.1f}")
        tag = "(now)" if (q, f) == (pv.SHARED_CORE_SMOOTHING, 0.0) else ""
        print(f"q={q:.1f} f={f:.1f}{'*frac' if by else '     '} {tag:5s} " + " | ".join(cells))


if __name__ == "__main__":
    main()
