#!/usr/bin/env python3
"""gradwire inside a plain torch.distributed job (issue 15).

Driver (what Bazel runs): each case is one job of 2 ranks started by
torch.multiprocessing.spawn, which call
init_process_group("gloo", init_method="tcp://127.0.0.1:PORT") and build
GradwireState(process_group=...) on a group of their own. The environment
holds no rank variables (RANK, WORLD_SIZE, MASTER_ADDR, ...) and no gradwire
variable but the secret ($GRADWIRE_JOB_SECRET_FILE, a 0600 file). Cases:
  train          top-k 5 % + EF trains an MLP: the loss falls (last 5 steps'
                 mean < 0.6 x the first 5's); nothing is left on disk
                 (no rendezvous directory appears);
  train again    the same command again, same port: passes too (no job key
                 left behind collides);
  two states     two models, two GradwireStates (top-k and QSGD) in one job,
                 trained in turns: both losses fall;
  wrong secret   rank 1 passes another secret: every rank raises
                 MismatchError at construction, naming the ranks, in < 10 s;
  different spec rank 1 asks for another ratio: the same, naming both specs;
  different warm-up  rank 1 another warmup_iters: the same (hook settings);
  bad arguments  30 constructions with a bad argument on every rank raise
                 InvalidArgumentError at once; a good one then joins and
                 averages (a failed one once deleted store keys a peer
                 was reading: it hung, or later constructions failed);
  closed state   after close() a backward fails at once naming the closed
                 state (it hung forever), and close() again does nothing;
  missing peer   rank 1 never constructs: rank 0 gets CommunicationError
                 naming rank 1 within its timeout_s (torch's bare "Socket
                 Timeout" RuntimeError before).
Each rank prints PASS; the driver wants one per rank.

    torch_pg_test.py --package_dir lib/python [--python /usr/bin/python3] \
        [--only "train,two states"]
"""
import os
import sys
import tempfile
import time

import spawn_cases  # beside this file

# Variables a launcher would set; none may be needed.
LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE")
WORLD = 2
STORE_DIR = "/tmp/gradwire-rendezvous"  # the environment path's default directory

# (name, case function, expected error substrings or None)
CASES = [
    ("train", "train", None),
    ("train again", "train", None),
    ("two states", "two_states", None),
    ("wrong secret", "wrong_secret",
     ["MismatchError", "collective mismatch in job secret at rendezvous",
      "rank 0 holds one secret, rank 1 another"]),
    ("different spec", "different_spec",
     ["MismatchError", "collective mismatch in settings at rendezvous",
      "rank 0 spec=topk:ratio=0.05", "rank 1 spec=topk:ratio=0.1"]),
    ("different warm-up", "different_warmup",
     ["MismatchError", "rank 0 hook.warmup_iters=2 vs rank 1 hook.warmup_iters=3"]),
    ("bad arguments", "bad_arguments", None),
    ("closed state", "closed_state", None),
    ("missing peer", "missing_peer", None),
]


def driver(args):
    if spawn_cases.torch_missing(args.python):
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        env = spawn_cases.case_env(tmp, args.package_dir, drop=LAUNCHER_ENV)
        failed = ran = 0
        port = spawn_cases.free_port()
        for name, case, expect in CASES:
            if args.only and name not in args.only.split(","):
                continue
            if name != "train again":  # the same job again: same command, same port
                port = spawn_cases.free_port()
            ok, _ = spawn_cases.run_case(args, __file__, name, case, port, env, WORLD, timeout=300)
            failed += not ok
            ran += 1
        print(f"{ran - failed} passed, {failed} failed")
        return 1 if failed else 0


def listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def mlp(torch, seed, width=512):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, 10))


def task(torch, rank):
    """A fixed task (labels from a random teacher); this rank's shard."""
    gen = torch.Generator().manual_seed(7)
    teacher = torch.randn(64, 10, generator=gen)
    x = torch.randn(2048, 64, generator=gen)
    y = (x @ teacher).argmax(1)
    return x[rank::WORLD], y[rank::WORLD]


class Trainer:
    def __init__(self, torch, ddp, x, y):
        self.torch, self.ddp, self.x, self.y = torch, ddp, x, y
        self.opt = torch.optim.SGD(ddp.parameters(), lr=0.2, momentum=0.9)
        self.losses = []

    def step(self, i):
        b = (i * 64) % self.x.shape[0]
        self.opt.zero_grad()
        loss = self.torch.nn.functional.cross_entropy(self.ddp(self.x[b:b + 64]),
                                                      self.y[b:b + 64])
        loss.backward()
        self.opt.step()
        self.losses.append(float(loss))

    def fell(self, ratio=0.6):
        first, last = sum(self.losses[:5]) / 5, sum(self.losses[-5:]) / 5
        return last < ratio * first, f"{first:.3f} -> {last:.3f}"


def rank_main(rank, case, port):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    failures, check = spawn_cases.checker(rank)

    leaked = [k for k in LAUNCHER_ENV if k in os.environ]
    leaked += [k for k in os.environ if k.startswith("GRADWIRE_") and
               k != "GRADWIRE_JOB_SECRET_FILE"]
    check(not leaked, f"environment holds {leaked}")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    import gradwire
    import gradwire.ddp
    group = dist.new_group(list(range(WORLD)))  # a group of its own, not the default
    x, y = task(torch, rank)
    before = listing(STORE_DIR)
    if case in ("wrong_secret", "different_spec", "different_warmup"):
        kwargs = {"method": "topk", "ratio": 0.05, "warmup_iters": 2}
        if rank == 1:
            if case == "wrong_secret":
                kwargs["secret"] = "not-the-job-secret-0123456789"
            elif case == "different_spec":
                kwargs["ratio"] = 0.1
            else:
                kwargs["warmup_iters"] = 3
        t0 = time.monotonic()
        try:
            gradwire.ddp.GradwireState(process_group=group, **kwargs)
            error = "no error: the state was built"
        except gradwire.Error as e:
            error = f"{type(e).__name__}: {e}"
        elapsed = time.monotonic() - t0
        print(f"rank {rank}: {error} ({elapsed:.2f} s)", flush=True)
        check(elapsed < 10, f"took {elapsed:.1f} s")
        for want in CASE_EXPECT[case]:
            check(want in error, f"error lacks {want!r}")
    elif case == "train":
        model = mlp(torch, 0)
        ddp = DDP(model, process_group=group)
        state = gradwire.ddp.GradwireState(process_group=group, method="topk", ratio=0.05,
                                           error_feedback=True, warmup_iters=2)
        ddp.register_comm_hook(state, gradwire.ddp.hook)
        t = Trainer(torch, ddp, x, y)
        for i in range(30):
            t.step(i)
        ok, how = t.fell()
        print(f"rank {rank}: loss {how}; {state.comm.describe()}", flush=True)
        check(ok, f"loss did not fall enough: {how}")
        check(state.totals()["compressed_buckets"] > 0, "nothing was compressed")
        state.close()
    elif case == "bad_arguments":
        bad = [{"dense_algorithm": "bogus"}, {"event_loop_nice": 99},
               {"timeout_s": float("nan")}, {"exchange": "nope"}]
        for i in range(30):
            t0 = time.monotonic()
            try:
                gradwire.Communicator("topk", process_group=group, **{"timeout_s": 5,
                                                                       **bad[i % 4]})
                error = None
            except gradwire.InvalidArgumentError as e:
                error = e
            check(error is not None, f"construction {i} with {bad[i % 4]} did not fail")
            check(time.monotonic() - t0 < 1, f"construction {i} took {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        comm = gradwire.Communicator("topk", process_group=group, timeout_s=10)
        v = torch.full((64,), float(rank + 1))
        comm.allreduce_mean(v, bucket=0, step=1, path="dense")
        check(float(v[0]) == 1.5, f"average {float(v[0])}")
        check(time.monotonic() - t0 < 10, f"the good construction took {time.monotonic() - t0:.1f} s")
        comm.close()
    elif case == "closed_state":
        ddp = DDP(mlp(torch, 0), process_group=group)
        state = gradwire.ddp.GradwireState(process_group=group, method="topk", ratio=0.05,
                                           warmup_iters=1, timeout_s=10)
        ddp.register_comm_hook(state, gradwire.ddp.hook)
        t = Trainer(torch, ddp, x, y)
        for i in range(3):
            t.step(i)
        state.close()
        t0 = time.monotonic()
        try:
            t.step(3)
            error = "no error"
        except RuntimeError as e:
            error = str(e)
        check("is closed" in error, f"a step after close(): {error[:200]}")
        check(time.monotonic() - t0 < 10, f"it took {time.monotonic() - t0:.1f} s")
        state.close()  # again: nothing
    elif case == "missing_peer":
        if rank == 0:
            t0 = time.monotonic()
            try:
                gradwire.Communicator("topk", process_group=group, timeout_s=3)
                error = None
            except gradwire.CommunicationError as e:
                error = str(e)
            print(f"rank 0: {error} ({time.monotonic() - t0:.1f} s)", flush=True)
            check(error is not None and "waiting for rank 1" in error, f"error: {error}")
            check(time.monotonic() - t0 < 15, f"took {time.monotonic() - t0:.1f} s")
        dist.barrier(group)
    elif case == "two_states":
        # Two models trained in turns (as a GAN's generator and
        # discriminator), each with its own state and spec.
        trainers, states = [], []
        for seed, spec in ((0, "topk:ratio=0.05"), (1, "qsgd:bits=4,bucket=128")):
            ddp = DDP(mlp(torch, seed, width=256 if seed else 512), process_group=group)
            state = gradwire.ddp.GradwireState(spec, process_group=group, warmup_iters=2)
            ddp.register_comm_hook(state, gradwire.ddp.hook)
            trainers.append(Trainer(torch, ddp, x, y))
            states.append(state)
        for i in range(30):
            for t in trainers:
                t.step(i)
        for t, state in zip(trainers, states):
            ok, how = t.fell()
            print(f"rank {rank}: {state.spec}: loss {how}", flush=True)
            check(ok, f"{state.spec}: loss did not fall enough: {how}")
        for state in states:
            state.close()
    check(listing(STORE_DIR) == before, f"{STORE_DIR} changed: {listing(STORE_DIR)}")
    print("PASS" if not failures else f"FAILED: {failures}", flush=True)
    sys.stdout.flush()
    os._exit(0 if not failures else 1)  # Debian torch's process-group teardown can abort


CASE_EXPECT = {case: expect for _, case, expect in CASES if expect}


if __name__ == "__main__":
    sys.exit(spawn_cases.main(driver, rank_main, WORLD))
