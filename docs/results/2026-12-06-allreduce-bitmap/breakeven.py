import sys, json
sys.path.insert(0, sys.argv[1])
import gradwire
out = {}
for link, bps in (("10gbit", 1.25e9), ("1gbit", 1.25e8)):
    for spec in ("topk:ratio=0.001", "topk:ratio=0.01", "topk:ratio=0.05", "randomk:ratio=0.01"):
        for n in (13107200, 26214400):
            first = None
            for p in (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256):
                if gradwire.choose_exchange(p, n, spec, bytes_per_second=bps) == "sparse_allreduce":
                    first = p
                    break
            out[f"{link} {spec} n={n}"] = first
for k, v in out.items():
    print(f"{k}: allreduce from P = {v}")
