#!/usr/bin/env python3
"""Re-validates stored cluster_bench runs with planner_validation and scores
the shared-core step: the model before 2026-12-03 (compression at ranks/cores
x its time alone in the chain, then max with the CPU bound) against the
smooth maximum (chain^q + bound^q)^(1/q) for a range of q.

    /usr/bin/python3 refit.py --fit A.json ... --check B.json ...

Needs gradwire's extension (bazel build //lib/python:_gradwire.so), as
planner.py does. Only compressed gradwire cases with a CPU bound count
(ranks outnumber cores and the run measured the loopback CPU)."""
import argparse
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import planner_validation as pv  # noqa: E402


def cases(paths):
    out = []
    for path in paths:
        with open(path) as f:
            rows, _ = pv.validate(json.load(f), 50e-6)
        for r in rows:
            if r.get("chain_ms") is None:
                continue
            alone = r["predicted_compress_ms"]
            out.append(dict(run=os.path.relpath(path, os.path.join(ROOT, "docs", "results")),
                            profile=r["profile"], link=r["link"], method=r["method"],
                            measured=r["measured_ms"], chain=r["chain_ms"],
                            bound=r["cpu_bound_ms"], alone=alone, share=r["cpu_share"]))
    return out


def old_model(c):
    return max(c["chain"] + (c["share"] - 1) * c["alone"], c["bound"])


def smooth(q):
    return lambda c: pv.shared_core_step(c["chain"], c["bound"], q)


def score(model, cs):
    err = [100 * (model(c) - c["measured"]) / c["measured"] for c in cs]
    return {"cases": len(err), "over_20pct": sum(abs(e) > 20 for e in err),
            "mean_abs_pct": sum(map(abs, err)) / len(err), "worst_pct": max(err, key=abs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", nargs="+", required=True, help="runs q is chosen on")
    ap.add_argument("--check", nargs="*", default=[], help="runs that only check it")
    ap.add_argument("--json_out")
    a = ap.parse_args()
    per_path = {path: cases([path]) for path in a.fit + a.check}
    fit = [c for path in a.fit for c in per_path[path]]
    check = [c for path in a.check for c in per_path[path]]
    qs = [q / 4 for q in range(6, 40)]
    scan = {q: score(smooth(q), fit) for q in qs}
    best = min(qs, key=lambda q: (scan[q]["over_20pct"], scan[q]["mean_abs_pct"]))
    out = {"fit_runs": a.fit, "check_runs": a.check, "best_q": best,
           "scan": {str(q): s for q, s in scan.items()}, "per_run": {}}
    print(f"q chosen on {len(fit)} cases of {len(a.fit)} runs: {best} "
          f"(now in planner_validation: {pv.SHARED_CORE_SMOOTHING})")
    print(f"{'run':58s} {'n':>3s}  {'before: >20% mean worst':>24s}  "
          f"{'q=' + str(best) + ': >20% mean worst':>24s}")
    for path, cs in per_path.items():
        if not cs:
            continue
        b, n = score(old_model, cs), score(smooth(best), cs)
        tag = "fit" if path in a.fit else "check"
        out["per_run"][cs[0]["run"]] = {"role": tag, "before": b, "after": n}
        print(f"{cs[0]['run'][:52]:52s} {tag:>5s} {len(cs):3d}  {b['over_20pct']:6d} "
              f"{b['mean_abs_pct']:6.1f}% {b['worst_pct']:+7.1f}%  {n['over_20pct']:6d} "
              f"{n['mean_abs_pct']:6.1f}% {n['worst_pct']:+7.1f}%")
    for name, cs in (("fit", fit), ("check", check)):
        if cs:
            b, n = score(old_model, cs), score(smooth(best), cs)
            out[name] = {"before": b, "after": n}
            print(f"all {name} runs: {len(cs)} cases; before {b['over_20pct']} over 20 % (mean "
                  f"|error| {b['mean_abs_pct']:.1f} %), after {n['over_20pct']} "
                  f"({n['mean_abs_pct']:.1f} %)")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
