"""Medians of ab_rounds.sh's summaries: per codec, size and direction, the
vs_memcpy of each round before and after, and their medians.

    python3 ab_summary.py DIR   (DIR holds before.N.json and after.N.json)
"""
import glob
import json
import os
import statistics
import sys


def main(folder):
    rows = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        side = os.path.basename(path).split(".")[0]
        with open(path) as f:
            summary = json.load(f)
        for n, codecs in summary["sizes"].items():
            for codec, kinds in codecs.items():
                for kind, x in kinds.items():
                    if x is not None and x >= 0:
                        rows.setdefault((codec, n, kind), {}).setdefault(side, []).append(x)
    print(f"{'codec / n / direction':52s} {'before: median (rounds)':>30s} "
          f"{'after: median (rounds)':>30s}")
    for key in sorted(rows):
        cells = []
        for side in ("before", "after"):
            xs = rows[key].get(side, [])
            cells.append(f"{statistics.median(xs):.3f} ({', '.join(f'{x:.2f}' for x in xs)})"
                         if xs else "-")
        print(f"{' / '.join(key):52s} {cells[0]:>30s} {cells[1]:>30s}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "ab"))
