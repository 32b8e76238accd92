#!/usr/bin/env python3
"""torch.topk / torch.sort baselines for gradwire's GPU benchmark.

Same sizes, densities and data distribution (normal gradients) as
bench/gpu_bench.cu, timed the same way: one warm-up, then --reps calls, each
after a 128 MB read that evicts the L2, each timed alone with CUDA events;
the median is reported. A device-to-device copy of 4n bytes is measured in
the same run, so the figures can be compared with gpu_bench's as ratios.

Output: CSV on stdout (device,op,n,density,k,median_ms,min_ms), a table on
stderr. Usage: python3 tools/gpu/torch_baseline.py [--sizes=...]
[--densities=...] [--reps=N]
"""
import argparse
import statistics
import sys

import torch


def timed(fn, flush, reps):
    fn()
    torch.cuda.synchronize()
    times = []
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        flush.sum()  # a read of 128 MB: leaves the L2 holding nothing of ours
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000000,25600000,110000000,340000000")
    ap.add_argument("--densities", default="0.001,0.01,0.1")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIPPED: torch sees no CUDA device")
        return 0
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0).replace(",", " ")
    flush = torch.empty(32 << 20, dtype=torch.float32, device=dev).normal_()
    print("device,op,n,density,k,median_ms,min_ms")
    print(f"{'op':<28} {'n':>11} {'density':>7} {'median_ms':>10} {'min_ms':>10}", file=sys.stderr)

    def report(op, n, density, k, t):
        print(f"{name},{op},{n},{density},{k},{t[0]:.4f},{t[1]:.4f}", flush=True)
        print(f"{op:<28} {n:>11} {density:>7} {t[0]:>10.4f} {t[1]:>10.4f}", file=sys.stderr, flush=True)

    for n in (int(float(s)) for s in args.sizes.split(",")):
        torch.manual_seed(n)
        x = torch.randn(n, device=dev) * 1e-3
        y = torch.empty_like(x)
        report("torch_copy_4n", n, 0, 0, timed(lambda: y.copy_(x), flush, args.reps))
        report("torch_sort_abs", n, 0, n,
               timed(lambda: torch.sort(x.abs(), descending=True), flush, args.reps))
        for density in (float(d) for d in args.densities.split(",")):
            k = max(1, int(density * n))
            # What users write for magnitude top-k: abs, then topk (indices int64).
            report("torch_topk_abs", n, density, k,
                   timed(lambda: torch.topk(x.abs(), k, sorted=False), flush, args.reps))
            report("torch_topk_abs_sorted", n, density, k,
                   timed(lambda: torch.topk(x.abs(), k), flush, args.reps))
        del x, y
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
