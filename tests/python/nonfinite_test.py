#!/usr/bin/env python3
"""Overflow steps under loss scaling: one rank's NaN or infinity reaches every rank.

AMP's GradScaler skips a step when the averaged gradients hold a NaN or an
infinity, and every rank must decide alike. A dense allreduce shows one
rank's overflow to all; a compressing exchange need not (top-k never selects
a NaN, QSGD and sign zero a non-finite bucket, random-k sends what its seed
picks), so gradwire flags such a rank's frame and every receiver decodes it
as NaN (lib/codec/codec.h, "Non-finite policy"; the sparse allreduce carries
the flag in its agreement round).

Driver (what Bazel runs): two jobs of 4 ranks started by
torch.multiprocessing.spawn (init_process_group("gloo", "tcp://...")):
  flat          every sparse and quantizing spec through each exchange that
                takes it (allgather, sparse_allreduce, cast_allreduce, the
                dense ring);
  hierarchical  2 emulated nodes x 2 ranks (GROUP_RANK), top-k and QSGD.
Each configuration trains an MLP (a 32768-element weight compressed; biases
and a small weight dense, riding in the frames where the allgather carries
them) for 8 steps with a loss-scaler loop as GradScaler runs it (scale the
loss; after backward, a non-finite gradient skips the step and halves the
scale, else unscale and step). Steps 3 and 5 plant one bad element on one
rank (NaN in the compressed weight; +inf in a bias, then -inf in the
weight) through a tensor hook, so it reaches DDP's bucket. Checked on every
rank: exactly steps 3 and 5 see a non-finite gradient, the same on every
rank; every other step is finite (nothing stayed in a residual); the
parameters end finite and bit-identical across ranks; the planting rank's
totals() count the non-finite elements.
(torch 1.13's GradScaler itself needs CUDA; the loop is its logic.)

    nonfinite_test.py --package_dir lib/python [--python /usr/bin/python3] [--only flat]
"""
import os
import sys
import tempfile
import zlib

import spawn_cases  # beside this file

WORLD = 4
STEPS, WARMUP = 8, 1
# step -> (rank that plants, parameter index, element, value)
PLANTS = {3: (1, 0, 1234, float("nan")), 5: (2, 1, 0, float("inf"))}
PLANTS_LATE = {5: (3, 0, 4095, float("-inf"))}  # a second element on another rank, same step
FLAT = [("topk:ratio=0.01", "allgather"), ("topk:ratio=0.01", "sparse_allreduce"),
        ("approx_topk:ratio=0.01", "sparse_allreduce"), ("randomk:ratio=0.01", "allgather"),
        ("randomk:ratio=0.01", "sparse_allreduce"), ("qsgd:bits=4,bucket=512", "allgather"),
        ("sign", "allgather"), ("fp16", "cast_allreduce"), ("bf16", "allgather"),
        ("topk:ratio=0.01", "dense")]
HIERARCHICAL = [("topk:ratio=0.01", "auto"), ("qsgd:bits=4,bucket=512", "auto")]
CASES = {"flat": FLAT, "hierarchical": HIERARCHICAL}


def driver(args):
    if spawn_cases.torch_missing(args.python):
        return 0
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        env = spawn_cases.case_env(tmp, args.package_dir)
        cases = [c for c in CASES if not args.only or c in args.only.split(",")]
        for case in cases:
            ok, _ = spawn_cases.run_case(args, __file__, case, case, spawn_cases.free_port(), env,
                                         WORLD * len(CASES[case]), timeout=600)
            failed += not ok
    print(f"{len(cases) - failed} passed, {failed} failed" if failed == 0 else f"{failed} failed")
    return 1 if failed else 0


def rank_main(rank, case, port):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    if case == "hierarchical":
        os.environ["GROUP_RANK"] = str(rank // 2)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    import gradwire.ddp
    ok = True
    for spec, exchange in CASES[case]:
        failures, check = spawn_cases.checker(rank)
        kwargs = {"hierarchical": True, "emulate_nodes": True} if case == "hierarchical" else {}
        train(torch, dist, gradwire, rank, spec, exchange, kwargs, check)
        print(f"{'PASS' if not failures else 'FAILED'} {spec} {exchange}: {failures}", flush=True)
        ok = ok and not failures
    sys.stdout.flush()
    os._exit(0 if ok else 1)  # Debian torch's process-group teardown can abort


def train(torch, dist, gradwire, rank, spec, exchange, kwargs, check):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    ddp = DDP(model)
    state = gradwire.ddp.GradwireState(spec, warmup_iters=WARMUP, exchange=exchange, **kwargs)
    ddp.register_comm_hook(state, gradwire.ddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    params = list(model.parameters())  # weight 0 (32768, compressed), bias 0, weight 1, bias 1
    targets = [params[0], params[1]]
    step_now = [0]

    def planter(which):
        def plant(grad):
            for table in (PLANTS, PLANTS_LATE):
                who, index, element, value = table.get(step_now[0], (None, None, None, None))
                if who == rank and index == which:
                    grad = grad.clone()
                    grad.view(-1)[element] = value
            return grad
        return plant

    for i, p in enumerate(targets):
        p.register_hook(planter(i))
    gen = torch.Generator().manual_seed(7 + rank)
    scale, skipped = 2.0 ** 12, []
    for step in range(STEPS):
        step_now[0] = step
        opt.zero_grad()
        x = torch.randn(32, 64, generator=gen)
        loss = torch.nn.functional.cross_entropy(ddp(x), torch.arange(32) % 10)
        (loss * scale).backward()
        found_inf = any(not bool(torch.isfinite(p.grad).all()) for p in params)
        if found_inf:  # GradScaler: skip the step, back off
            skipped.append(step)
            scale /= 2
        else:
            for p in params:
                p.grad.div_(scale)
            opt.step()
    want = sorted(PLANTS)
    check(skipped == want, f"{spec} / {exchange}: steps {skipped} were non-finite, want {want}")
    everyone = [None] * WORLD
    dist.all_gather_object(everyone, skipped)
    check(all(s == skipped for s in everyone), f"ranks skipped different steps: {everyone}")
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    check(bool(torch.isfinite(flat).all()), "parameters are not finite")
    crc = zlib.crc32(flat.numpy().tobytes())
    crcs = [None] * WORLD
    dist.all_gather_object(crcs, crc)
    check(len(set(crcs)) == 1, f"parameters differ across ranks: {crcs}")
    # Elements planted in the compressed weight are counted by its codec.
    planted = sum(1 for t in (PLANTS, PLANTS_LATE) for w, i, *_ in t.values()
                  if w == rank and i == 0)
    nonfinite = state.totals().get("nonfinite", 0)
    if exchange != "dense" and "hierarchical" not in kwargs:  # else the node leaders encode
        check((nonfinite > 0) == (planted > 0),
              f"totals() count {nonfinite} non-finite elements, {planted} planted here")
    state.close()


if __name__ == "__main__":
    sys.exit(spawn_cases.main(driver, rank_main, WORLD))
