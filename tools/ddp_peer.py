#!/usr/bin/env python3
"""PyTorch DDP on a model profile's tensors: the peer gradwire is measured against.

One process per rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as torchrun
sets them; GLOO_SOCKET_IFNAME picks the interface). The model has exactly
the profile's parameter tensors (tools/model_profiles.py) and a forward pass
whose gradient is a fixed random tensor per parameter, so backward does
almost no arithmetic and an iteration is DDP's gradient exchange:

    iteration  = forward + backward (with DDP's bucketed allreduce) + sync
    compute    = the same forward + backward without DDP, timed first
    exchange   = iteration - compute   (what gradwire's exchange time means)

Hooks: none (DDP's default allreduce), fp16 (fp16_compress_hook), powersgd
(PowerSGDState, --powersgd_rank; compression starts after the warm-up).

Every rank writes --json_out (give each rank its own path): the job's
medians and p90s (the same on every rank: compute is the slowest rank's)
and the rank's own medians, with "ok": true; or, when it fails,
{"ok": false, "rank": R, "error": "..."} and exit status 1.
Run with Debian's /usr/bin/python3 (python3-torch 1.13, CPU, gloo).
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_profiles  # noqa: E402
from gwtools.results import percentile, write_json  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="resnet50")
    parser.add_argument("--params", type=int, help="synthetic profile of N floats")
    parser.add_argument("--hook", choices=["none", "fp16", "powersgd"], default="none")
    parser.add_argument("--powersgd_rank", type=int, default=4)
    parser.add_argument("--bucket_cap_mb", type=float, default=25.0)
    parser.add_argument("--bucket_view", type=int, choices=[0, 1], default=1,
                        help="DDP gradient_as_bucket_view (gradwire's exchange_bench "
                             "--bucket_views is the same zero-copy setting)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--timeout_s", type=float, default=120.0)
    parser.add_argument("--json_out", help="this rank's result file")
    args = parser.parse_args(argv)
    if args.iters < 1 or args.warmup < 0:
        parser.error("--iters must be >= 1 and --warmup >= 0")
    if args.hook == "powersgd" and args.powersgd_rank < 1:
        parser.error("--powersgd_rank must be >= 1")
    return args


def profile_model(torch, shapes, rank):
    """A module with the profile's parameters whose gradient is a fixed,
    rank-specific random tensor per parameter (backward does no real work)."""
    class ProfileModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            gen = torch.Generator().manual_seed(1234 + rank)
            self.weights = torch.nn.ParameterList(
                [torch.nn.Parameter(torch.zeros(s)) for s in shapes])
            # d(loss)/d(p) == g: a fixed, rank-specific gradient per tensor.
            self.grads = [torch.randn(s, generator=gen) * 1e-3 for s in shapes]

        def forward(self):
            return sum((p * g).sum() for p, g in zip(self.weights, self.grads))
    return ProfileModel()


def step(m):
    m.zero_grad(set_to_none=False)
    m().backward()


def wrap_ddp(args, model, shapes):
    """DDP around `model` with the hook asked for; returns (ddp, bucket_cap_mb)."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    bucket_cap_mb = args.bucket_cap_mb
    if args.hook == "powersgd":
        # torch 1.13's PowerSGD hook issues its second and third allreduce
        # from INSIDE future callbacks on Gloo's worker threads. With two or
        # more buckets in flight that deadlocks (both worker threads block
        # in such waits; seen on the emulated cluster), and with more
        # worker threads the callbacks race, so ranks issue allreduces in
        # different orders and Gloo aborts on a size mismatch. One bucket
        # for the whole model (DDP's documented _DEFAULT_FIRST_BUCKET_BYTES
        # knob plus the cap) keeps PowerSGD correct; backward here is
        # nearly free, so the lost overlap costs it nothing.
        model_mb = sum(model_profiles.numel(s) for s in shapes) * 4 / 2**20
        bucket_cap_mb = max(bucket_cap_mb, model_mb + 1)
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(bucket_cap_mb * 2**20)
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb,
              gradient_as_bucket_view=bool(args.bucket_view))
    if args.hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=args.powersgd_rank,
            start_powerSGD_iter=max(2, args.warmup), use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    return ddp, bucket_cap_mb


def timed_steps(args, module, barrier=None):
    """Seconds of each step after the warm-up (a barrier first, if given)."""
    times = []
    for i in range(args.warmup + args.iters):
        if barrier is not None:
            barrier()
        t0 = time.perf_counter()
        step(module)
        times.append(time.perf_counter() - t0)
    return times[args.warmup:]


def run(args):
    """Times DDP on the profile; returns this rank's result dict."""
    import datetime
    import faulthandler
    import signal

    import torch
    import torch.distributed as dist

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks of a hung peer
    torch.set_num_threads(1)  # ranks share the machine's cores
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    shapes = model_profiles.profile(args.profile, args.params)
    model = profile_model(torch, shapes, rank)
    compute = timed_steps(args, model)  # compute-only baseline: no DDP, no communication
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    ddp, bucket_cap_mb = wrap_ddp(args, model, shapes)
    iteration = timed_steps(args, ddp, dist.barrier)

    # Every rank's medians, so each reports the slowest (the step waits for it).
    mine = torch.tensor([statistics.median(iteration), statistics.median(compute)])
    everyone = [torch.zeros(2) for _ in range(world)]
    dist.all_gather(everyone, mine)
    compute_med = max(float(t[1]) for t in everyone)
    exchange = [max(0.0, t - compute_med) for t in iteration]
    return {
        "ok": True, "rank": rank, "system": "pytorch_ddp",
        "hook": args.hook if args.hook != "powersgd" else f"powersgd_rank{args.powersgd_rank}",
        "torch_version": torch.__version__,
        "profile": args.profile if args.params is None else f"params={args.params}",
        "params": sum(model_profiles.numel(s) for s in shapes), "tensors": len(shapes),
        "world_size": world, "bucket_cap_mb": bucket_cap_mb,
        "warmup": args.warmup, "iters": args.iters,
        "iteration_s_median": statistics.median(iteration),
        "iteration_s_p90": percentile(iteration, 0.9),
        "compute_s_median": compute_med,
        "exchange_s_median": statistics.median(exchange),
        "exchange_s_p90": percentile(exchange, 0.9),
        "own_iteration_s_median": float(mine[0]),
        "own_compute_s_median": float(mine[1]),
    }


def main(argv=None):
    args = parse_args(argv)
    status = 0
    try:
        result = run(args)
        if result["rank"] == 0:
            print(json.dumps(result), flush=True)
    except Exception as e:  # a peer gone, a timeout: say so in the result file too
        result = {"ok": False, "rank": int(os.environ.get("RANK", -1)),
                  "error": f"{type(e).__name__}: {e}"}
        print(f"ddp_peer: {result['error']}", file=sys.stderr, flush=True)
        status = 1
    if args.json_out:
        write_json(args.json_out, result)
    # Debian's torch 1.13 sometimes aborts in process-group teardown after
    # the work is done; leave without running it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
