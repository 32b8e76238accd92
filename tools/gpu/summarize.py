#!/usr/bin/env python3
"""Joins gpu_bench and torch_baseline CSVs into the issue's target table.

Usage: python3 tools/gpu/summarize.py bench.csv torch.csv
Targets (issue 3), all ratios within one run:
  exact top-k fp32, n=25.6M, 0.1%: >= 5x faster than torch.topk, and
      time <= 2 reads of 4n at the copy's bandwidth (reads_of_4n <= 2);
  approximate top-k and every quantizer with fused EF: >= 75 % of copy
      bandwidth over their byte floor (fraction_of_copy_bw >= 0.75);
  decode-accumulate of 8 workers at 1 %: within 1.3x of its floor
      (fraction >= 1/1.3).
"""
import csv
import sys


def load(path):
    try:
        with open(path) as f:
            return [r for r in csv.DictReader(f) if r.get("n")]
    except OSError:
        return []


def main():
    bench = load(sys.argv[1]) if len(sys.argv) > 1 else []
    torch = load(sys.argv[2]) if len(sys.argv) > 2 else []
    if not bench:
        print("no benchmark results")
        return 1
    print(f"device: {bench[0]['device']}")
    tk = {(int(r["n"]), float(r["density"])): float(r["median_ms"])
          for r in torch if r["op"] == "torch_topk_abs"}
    tsort = {int(r["n"]): float(r["median_ms"]) for r in torch if r["op"] == "torch_sort_abs"}
    print(f"{'kernel':<26} {'n':>10} {'dens':>6} {'ms':>9} {'frac_bw':>8} {'reads':>6} "
          f"{'vs topk':>8} {'vs sort':>8}  target")
    for r in bench:
        n, d, ms = int(r["n"]), float(r["density"]), float(r["median_ms"])
        frac, reads = float(r["fraction_of_copy_bw"]), float(r["reads_of_4n"])
        kern = r["kernel"]
        vs_topk = tk.get((n, d), 0) / ms if kern.startswith("topk") and (n, d) in tk else None
        vs_sort = tsort.get(n, 0) / ms if kern.startswith("topk") and n in tsort else None
        target = ""
        if kern == "topk_exact" and n == 25600000 and abs(d - 0.001) < 1e-9:
            ok = (vs_topk or 0) >= 5 and reads <= 2
            target = f"{'MET' if ok else 'MISSED'} (>=5x torch.topk, <=2 reads)"
        elif kern.startswith(("topk_approx", "qsgd", "sign", "cast")) and "decode" not in kern:
            target = f"{'MET' if frac >= 0.75 else 'MISSED'} (>=0.75 of copy bw)"
        elif kern == "decode_accumulate_p8" and abs(d - 0.01) < 1e-9:
            target = f"{'MET' if frac >= 1 / 1.3 else 'MISSED'} (<=1.3x floor)"
        fmt = lambda v: f"{v:8.1f}x" if v is not None else f"{'':>9}"
        print(f"{kern:<26} {n:>10} {d:>6g} {ms:>9.3f} {frac:>8.3f} {reads:>6.2f} "
              f"{fmt(vs_topk)}{fmt(vs_sort)}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
