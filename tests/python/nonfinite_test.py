#!/usr/bin/env python3
"""Overflow steps under loss scaling: one rank's NaN or infinity reaches every rank.

AMP's GradScaler skips a step when the averaged gradients hold a NaN or an
infinity, and every rank must decide alike. A dense allreduce shows one
rank's overflow to all; a compressing exchange need not (top-k never selects
a NaN, QSGD and sign zero a non-finite bucket, random-k sends what its seed
picks), so gradwire flags such a rank's frame and every receiver decodes it
as NaN (lib/codec/codec.h, "Non-finite policy"; the sparse allreduce carries
the flag in its agreement round).

Driver (what Bazel runs): three jobs of 4 ranks started by
torch.multiprocessing.spawn (init_process_group("gloo", "tcp://...")), and
one of one process:
  flat          every sparse and quantizing spec through each exchange that
                takes it (allgather, sparse_allreduce, cast_allreduce, the
                dense ring);
  hierarchical  2 emulated nodes x 2 ranks (GROUP_RANK), top-k and QSGD.
  loss scale    error feedback follows the loss scale (loss_scaler=,
                gradwire/_loss_scale.py): for top-k (allgather and sparse
                allreduce), random-k and QSGD, a run whose scale goes
                2^10 -> 2^9 -> 2^11 (GradScaler's steps) ends with exactly the
                parameters of the unscaled run, bit for bit; without
                loss_scaler= the same scaled run ends elsewhere (the residual
                unscaled by another scale than it was made in); a
                state_dict carries the residuals' scale.
  arguments     loss_scaler= and divide_residuals() refuse bad values.
In flat and hierarchical, each configuration trains an MLP (a 32768-element
weight compressed; biases and a small weight dense, riding in the frames
where the allgather carries them) for 8 steps with a loss-scaler loop as
GradScaler runs it (scale the loss; after backward, a non-finite gradient
skips the step and halves the scale, else unscale and step). Steps 3 and 5
plant one bad element on one rank (NaN in the compressed weight; +inf in a
bias, then -inf in the weight) through a tensor hook, so it reaches DDP's
bucket. Checked on every rank: exactly steps 3 and 5 see a non-finite
gradient, the same on every rank; every other step is finite (nothing stayed
in a residual); the parameters end finite and bit-identical across ranks;
flat: the planting rank's totals() count the non-finite elements.
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
# step -> [(rank that plants, parameter index, element, value)]
PLANTS = {3: [(1, 0, 1234, float("nan"))],
          5: [(2, 1, 0, float("inf")), (3, 0, 4095, float("-inf"))]}
FLAT = [("topk:ratio=0.01", "allgather"), ("topk:ratio=0.01", "sparse_allreduce"),
        ("approx_topk:ratio=0.01", "sparse_allreduce"), ("randomk:ratio=0.01", "allgather"),
        ("randomk:ratio=0.01", "sparse_allreduce"), ("qsgd:bits=4,bucket=512", "allgather"),
        ("sign", "allgather"), ("fp16", "cast_allreduce"), ("bf16", "allgather"),
        ("topk:ratio=0.01", "dense")]
HIERARCHICAL = [("topk:ratio=0.01", "auto"), ("qsgd:bits=4,bucket=512", "auto")]
# scale per step: warm-up and two compressed steps at 2^10, a backoff, a growth
SCALES = [2.0 ** 10] * 3 + [2.0 ** 9] * 2 + [2.0 ** 11] * 3
FOLLOW = [("topk:ratio=0.01", "allgather"), ("topk:ratio=0.01", "sparse_allreduce"),
          ("randomk:ratio=0.01", "allgather"), ("qsgd:bits=4,bucket=512", "allgather")]
CASES = {"flat": FLAT, "hierarchical": HIERARCHICAL, "loss scale": FOLLOW, "arguments": None}


class FakeScaler:
    """GradScaler's get_scale() (torch 1.13's GradScaler needs CUDA)."""

    def __init__(self, scale):
        self.scale = scale

    def get_scale(self):
        return self.scale


def driver(args):
    if spawn_cases.torch_missing(args.python):
        return 0
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        env = spawn_cases.case_env(tmp, args.package_dir)
        cases = [c for c in CASES if not args.only or c in args.only.split(",")]
        for case in cases:
            passes = 1 if CASES[case] is None else WORLD * len(CASES[case])
            ok, _ = spawn_cases.run_case(args, __file__, case, case, spawn_cases.free_port(), env,
                                         passes, timeout=600)
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
        if case == "loss scale":
            follow(torch, dist, gradwire, rank, spec, exchange, check)
        else:
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
            for who, index, element, value in PLANTS.get(step_now[0], []):
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
    planted = sum(1 for plants in PLANTS.values() for w, i, *_ in plants if w == rank and i == 0)
    nonfinite = state.totals().get("nonfinite", 0)
    if exchange != "dense" and "hierarchical" not in kwargs:  # else the node leaders encode
        check((nonfinite > 0) == (planted > 0),
              f"totals() count {nonfinite} non-finite elements, {planted} planted here")
    state.close()


def scaled_run(torch, dist, gradwire, rank, spec, exchange, scales, follow_scale):
    """STEPS steps of SGD on an MLP, the loss times scales[step] and the
    averaged gradient divided by it; returns the parameters' crc32 and the
    state_dict's loss_scale."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    ddp = DDP(model)
    scaler = FakeScaler(scales[0])
    state = gradwire.ddp.GradwireState(spec, warmup_iters=WARMUP, exchange=exchange,
                                       loss_scaler=scaler if follow_scale else None)
    ddp.register_comm_hook(state, gradwire.ddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(7 + rank)
    for step in range(STEPS):
        scaler.scale = scales[step]
        opt.zero_grad()
        x = torch.randn(32, 64, generator=gen)
        loss = torch.nn.functional.cross_entropy(ddp(x), torch.arange(32) % 10)
        (loss * scales[step]).backward()
        for p in model.parameters():
            p.grad.div_(scales[step])
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    saved = state.state_dict().get("loss_scale")
    state.close()
    return zlib.crc32(flat.numpy().tobytes()), saved


def follow(torch, dist, gradwire, rank, spec, exchange, check):
    unscaled, saved = scaled_run(torch, dist, gradwire, rank, spec, exchange, [1.0] * STEPS, True)
    check(saved == 1.0, f"unscaled run: state_dict loss_scale {saved!r}")
    followed, saved = scaled_run(torch, dist, gradwire, rank, spec, exchange, SCALES, True)
    check(saved == SCALES[-1], f"state_dict loss_scale {saved!r}, want {SCALES[-1]}")
    stale, saved = scaled_run(torch, dist, gradwire, rank, spec, exchange, SCALES, False)
    check(saved is None, f"without loss_scaler=: state_dict loss_scale {saved!r}")
    print(f"rank {rank}: {spec} {exchange}: crc32 unscaled {unscaled:08x}, scaled and followed "
          f"{followed:08x}, scaled without loss_scaler= {stale:08x}", flush=True)
    check(followed == unscaled, "the scaled run with loss_scaler= differs from the unscaled one")
    check(stale != unscaled, "without loss_scaler= the scaled run still equals the unscaled one: "
          "the schedule does not test the residuals")


def arguments_case():
    """loss_scaler= and divide_residuals() errors, in one process."""
    import gradwire
    import gradwire.ddp
    failures = []
    bad = [({"loss_scaler": object()}, TypeError, "loss_scaler must have get_scale()"),
           ({"loss_scaler": FakeScaler(1.0), "momentum": 0.9}, TypeError,
            "loss_scaler with momentum correction")]
    spawn_cases.expect_refusals(lambda **kw: gradwire.ddp.GradwireState(warmup_iters=2, **kw),
                                bad, failures)
    from gradwire import _loss_scale
    for value in (0.0, -1.0, float("nan"), float("inf"), "x", None):
        try:
            _loss_scale.read_scale(FakeScaler(value))
            failures.append(f"get_scale() {value!r}: no error")
        except gradwire.InvalidArgumentError as e:
            if "must be a positive finite number" not in str(e):
                failures.append(f"get_scale() {value!r}: {e}")
    os.environ["GRADWIRE_STORE_DIR"] = tempfile.mkdtemp()
    os.environ.update(RANK="0", WORLD_SIZE="1", GRADWIRE_JOB_ID="nonfinite-arguments")
    comm = gradwire.Communicator("topk:ratio=0.1")
    for value, cls in ((0.0, ValueError), (-2.0, ValueError), (float("nan"), ValueError),
                       (float("inf"), ValueError), (1e-50, ValueError), ("x", TypeError)):
        try:
            comm.divide_residuals(value)
            failures.append(f"divide_residuals({value!r}): no error")
        except Exception as e:  # noqa: BLE001
            if not isinstance(e, cls):
                failures.append(f"divide_residuals({value!r}): {type(e).__name__}: {e}")
    comm.divide_residuals(0.5)  # a good one still works: nothing was poisoned
    comm.close()
    print("PASS" if not failures else f"FAILED: {failures}", flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(spawn_cases.main(driver, rank_main, WORLD, single={"arguments": arguments_case}))
