#!/usr/bin/env python3
"""The planner's validation of recorded cluster_bench runs under three
versions of tools/planner_validation.py (run from the repository root, with
_gradwire.so built: `bazel build //lib/python:_gradwire.so`):

  old  e82c177  shared-core bound = ranks/cores x loopback CPU + last bucket's transfer
  B    d49e849  ... without the transfer
  C    0e5a93f  ... plus the link's CPU per byte (from the run's dense case)

    /usr/bin/python3 docs/results/2026-12-01-planner-links/compare_bounds.py \
        docs/results/2026-12-01-planner-links/recorded-runs.txt

The list holds one JSON path per line, relative to docs/results/.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.getcwd()
sys.path[:0] = [os.path.join(ROOT, "tools"), os.path.join(ROOT, "lib/python")]
VERSIONS = {"old": "e82c177", "B": "d49e849", "C": "0e5a93f"}


def load(label, commit, tmp):
    path = os.path.join(tmp, f"pv_{label}.py")
    with open(path, "w") as f:
        f.write(subprocess.check_output(["git", "show", f"{commit}:tools/planner_validation.py"],
                                        text=True))
    spec = importlib.util.spec_from_file_location(f"pv_{label}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(listing):
    base = os.path.join(ROOT, "docs/results")
    files = [os.path.join(base, line.strip()) for line in open(listing) if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        versions = {k: load(k, c, tmp) for k, c in VERSIONS.items()}
        totals = {k: {"ok": 0, "n": 0, "worst": 0.0, "sum": 0.0, "over": 0, "under": 0}
                  for k in versions}
        for f in files:
            run = json.load(open(f))
            cells = [os.path.relpath(f, base)]
            for k, pv in versions.items():
                rows, _ = pv.validate(run, 50e-6)
                errs = [r["error_pct"] for r in rows
                        if r["system"] == "gradwire" and r["method"] != "none"]
                t = totals[k]
                t["ok"] += sum(abs(e) <= 20 for e in errs)
                t["n"] += len(errs)
                t["worst"] = max([t["worst"]] + [abs(e) for e in errs])
                t["sum"] += sum(abs(e) for e in errs)
                t["over"] += sum(e > 20 for e in errs)
                t["under"] += sum(e < -20 for e in errs)
                cells.append(f"{k} {sum(abs(e) <= 20 for e in errs)}/{len(errs)}")
            print(" | ".join(cells))
        for k, t in totals.items():
            print(f"{k}: {t['ok']}/{t['n']} within 20 %, worst {t['worst']:.1f} %, mean |error| "
                  f"{t['sum'] / max(1, t['n']):.1f} %, over +20 %: {t['over']}, "
                  f"under -20 %: {t['under']}")


if __name__ == "__main__":
    main(sys.argv[1])
