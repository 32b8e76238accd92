#!/usr/bin/env python3
"""The DDP hook's exchange choice (GradwireState(exchange=...), issue 17).

Driver (what Bazel runs): each case is one job of 4 ranks started by
torch.multiprocessing.spawn (init_process_group("gloo", "tcp://...")),
training an MLP whose one DDP bucket holds a compressed weight (32768
elements) and a dense part (biases, a small weight) for 20 steps, top-k 5 %
+ EF, 2 dense warm-up steps. Cases:
  allgather / sparse_allreduce / dense   the exchange forced: every bucket
      after the warm-up took it, by the communicator's own counters
      (totals(): sparse_allreduce_buckets, compressed_buckets) and by
      state.bucket_exchanges (exchange, reason naming exchange=, the cost
      model's estimates for all three kinds); the loss falls; every rank
      ends with bit-identical parameters; the state pickles with its
      exchange. The driver also wants the three jobs' final parameters to
      differ from each other (the same data, seeds and spec: only the
      exchange differs), so a choice that is ignored fails here even if a
      counter lied.
  auto        the cost model's choice, and bucket_exchanges' reasons equal
      gradwire.choose_exchange / exchange_cost with the model the ranks
      agreed on (state.comm.exchange_model), which is the 1 Gbit/s link
      the state was given (exchange_model=, passed on to the Communicator
      and pickled with the state).
  mismatch    rank 1 asks for sparse_allreduce, the others for auto: every
      rank raises MismatchError at construction, naming hook.exchange.
  arguments   (one process, no ranks) exchange= errors: TypeError for a
      non-str, ValueError for an unknown name or sparse_allreduce with a
      non-sparse spec, each naming the argument and no command-line flag;
      exchange_model= errors likewise.
Each rank prints PASS; the driver wants one per rank.

    ddp_exchange_test.py --package_dir lib/python [--python /usr/bin/python3] [--only auto]
"""
import os
import pickle
import sys
import tempfile
import zlib

import spawn_cases  # beside this file

WORLD = 4
STEPS, WARMUP = 20, 2
SPEC = "topk:ratio=0.05"
# exchange= -> the kind it must produce (Communicator.exchange_for's names)
FORCED = {"allgather": "sparse_allgather", "sparse_allreduce": "sparse_allreduce",
          "dense": "dense_ring"}
ONE_GBIT = {"bytes_per_second": 1.25e8}  # the auto case's link
CASES = ["arguments", "allgather", "sparse_allreduce", "dense", "auto", "mismatch"]


def driver(args):
    if spawn_cases.torch_missing(args.python):
        return 0
    failed, checksums = 0, {}
    with tempfile.TemporaryDirectory() as tmp:
        env = spawn_cases.case_env(tmp, args.package_dir)
        cases = [c for c in CASES if not args.only or c in args.only.split(",")]
        for case in cases:
            ok, out = spawn_cases.run_case(args, __file__, case, case, spawn_cases.free_port(), env,
                                           1 if case == "arguments" else WORLD, timeout=400)
            for line in out.splitlines():
                if line.startswith("checksum "):
                    checksums[case] = line.split()[1]
            failed += not ok
    forced = {c: checksums.get(c) for c in FORCED if c in cases}
    if len(forced) > 1:
        print(f"final parameters' crc32 per exchange: {forced}")
        if None in forced.values() or len(set(forced.values())) != len(forced):
            print("FAIL: the forced exchanges did not all give different results")
            failed += 1
    print(f"{len(cases) - failed} passed, {failed} failed" if failed == 0 else f"{failed} failed")
    return 1 if failed else 0


def arguments_case():
    """exchange= errors, before any rank is contacted."""
    import gradwire
    import gradwire.ddp
    failures = []
    bad = [({"exchange": 3}, TypeError, "exchange must be a str"),
           ({"exchange": None}, TypeError, "exchange must be a str"),
           ({"exchange": "ring"}, ValueError, "exchange must be one of 'auto', 'allgather', "
            "'sparse_allreduce', 'cast_allreduce', 'dense', got 'ring'"),
           ({"exchange": "cast_allreduce", "spec": "topk:ratio=0.01"}, ValueError,
            "exchange='cast_allreduce' needs an fp16 or bf16 spec"),
           ({"exchange": "sparse_allreduce", "spec": "qsgd:bits=4"}, ValueError,
            "exchange='sparse_allreduce' needs a sparse spec"),
           ({"exchange": "sparse_allreduce", "spec": "none"}, ValueError,
            "exchange='sparse_allreduce' needs a sparse spec")]
    spawn_cases.expect_refusals(lambda **kw: gradwire.ddp.GradwireState(warmup_iters=2, **kw),
                                bad, failures, forbid="--")
    for value, cls in (("bogus", ValueError), (7, TypeError)):
        try:
            gradwire.Communicator("topk", exchange=value)
            failures.append(f"Communicator(exchange={value!r}): no error")
        except Exception as e:  # noqa: BLE001
            if not isinstance(e, cls) or "exchange must be" not in str(e):
                failures.append(f"Communicator(exchange={value!r}): {type(e).__name__}: {e}")
    # exchange_model= (which GradwireState passes on): checked before any rendezvous.
    spawn_cases.expect_refusals(
        lambda **kw: gradwire.Communicator("topk", **kw),
        [({"exchange_model": {"link": 1e9}}, ValueError, "exchange_model: unknown key 'link'"),
         ({"exchange_model": {"bytes_per_second": -1}}, ValueError,
          "exchange_model's bytes_per_second must be a positive finite number"),
         ({"exchange_model": 1e9}, TypeError, "exchange_model must be None, 'measure', a dict")],
        failures, forbid="--")
    print("PASS" if not failures else f"FAILED: {failures}", flush=True)
    return 0 if not failures else 1


def rank_main(rank, case, port):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    failures, check = spawn_cases.checker(rank)

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    import gradwire
    import gradwire.ddp
    if case == "mismatch":
        try:
            gradwire.ddp.GradwireState(SPEC, warmup_iters=WARMUP,
                                       exchange="sparse_allreduce" if rank == 1 else "auto")
            error = "no error: the state was built"
        except gradwire.Error as e:
            error = f"{type(e).__name__}: {e}"
        print(f"rank {rank}: {error}", flush=True)
        for want in ("MismatchError", "collective mismatch in settings", "exchange=auto",
                     "rank 1 exchange=sparse_allreduce"):
            check(want in error, f"error lacks {want!r}")
    else:
        train(torch, DDP, gradwire, rank, case, check)
    print("PASS" if not failures else f"FAILED: {failures}", flush=True)
    sys.stdout.flush()
    os._exit(0 if not failures else 1)  # Debian torch's process-group teardown can abort


def train(torch, DDP, gradwire, rank, exchange, check):
    import torch.distributed as dist
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    ddp = DDP(model)
    given = {"exchange_model": ONE_GBIT} if exchange == "auto" else {}
    state = gradwire.ddp.GradwireState(SPEC, warmup_iters=WARMUP, exchange=exchange, **given)
    ddp.register_comm_hook(state, gradwire.ddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.2, momentum=0.9)
    gen = torch.Generator().manual_seed(7)
    teacher = torch.randn(64, 10, generator=gen)
    x = torch.randn(4096, 64, generator=gen)
    y = (x @ teacher).argmax(1)
    x, y = x[rank::WORLD], y[rank::WORLD]
    losses = []
    for i in range(STEPS):
        b = (i * 64) % x.shape[0]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x[b:b + 64]), y[b:b + 64])
        loss.backward()
        opt.step()
        losses.append(float(loss))
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    check(last < 0.7 * first, f"loss did not fall enough: {first:.3f} -> {last:.3f}")

    totals, entries = state.totals(), state.bucket_exchanges
    print(f"rank {rank}: loss {first:.3f} -> {last:.3f}; {state.comm.describe()}\n"
          f"{state.exchange_report}", flush=True)
    compressed = [e for e in entries.values() if "estimates" in e]
    check(len(entries) == 1 and len(compressed) == 1,
          f"one bucket with a compressed part expected, got {entries}")
    steady = STEPS - WARMUP
    for e in compressed:
        check(e["exchanges"] == steady, f"{e['exchanges']} exchanges booked, {steady} made")
        check(set(e["estimates"]) == {"dense_ring", "sparse_allgather", "sparse_allreduce"}
              and all(c["seconds"] > 0 and c["bytes_sent"] > 0 for c in e["estimates"].values()),
              f"estimates {e['estimates']}")
        check(e["model_ranks"] == WORLD and e["model_elements"] == 512 * 64,
              f"model input {e['model_ranks']} ranks, {e['model_elements']} elements")
        agreed = state.comm.exchange_model
        if given:
            check(agreed == dict(gradwire.EXCHANGE_MODEL_DEFAULTS, **ONE_GBIT),
                  f"agreed model {agreed}, given {ONE_GBIT}")
        for kind, cost in e["estimates"].items():
            want = gradwire.exchange_cost(kind, WORLD, e["model_elements"], state.spec, **agreed)
            check(cost == want, f"{kind}: estimate {cost} != exchange_cost's {want}")
        choice = gradwire.choose_exchange(WORLD, e["model_elements"], state.spec, **agreed)
        check(e["model_choice"] == choice, f"model_choice {e['model_choice']} != {choice}")
        if exchange in FORCED:
            check(e["exchange"] == FORCED[exchange] and e["reason"] == f"exchange={exchange!r}",
                  f"took {e['exchange']} ({e['reason']}), forced {exchange}")
        else:  # auto: the model's pick, unless the dense part rode in the allgather
            check(e["exchange"] == choice or (e["exchange"] == "sparse_allgather"
                                              and "allgather's frames" in e["reason"]),
                  f"auto took {e['exchange']} ({e['reason']}), the model picks {choice}")
    want_sar = steady if exchange == "sparse_allreduce" else 0
    check(totals["sparse_allreduce_buckets"] == want_sar,
          f"sparse_allreduce_buckets {totals['sparse_allreduce_buckets']}, want {want_sar}")
    if exchange == "dense":
        check(totals["compressed_buckets"] == 0, f"{totals['compressed_buckets']} compressed")
    elif exchange in FORCED:
        check(totals["compressed_buckets"] == steady, f"{totals['compressed_buckets']} compressed")
    clone = pickle.loads(pickle.dumps(state))
    check(clone.exchange == exchange and clone.comm is None,
          f"unpickled exchange {clone.exchange!r}")
    check(clone._args.get("exchange_model") == given.get("exchange_model"),
          f"unpickled communicator arguments {clone._args}")
    # Every rank the same parameters, bit for bit.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    crc = zlib.crc32(flat.numpy().tobytes())
    crcs = [None] * WORLD
    dist.all_gather_object(crcs, crc)
    check(len(set(crcs)) == 1, f"parameters differ across ranks: {crcs}")
    if rank == 0:
        print(f"checksum {crc:08x}", flush=True)
    state.close()


if __name__ == "__main__":
    sys.exit(spawn_cases.main(driver, rank_main, WORLD, single={"arguments": arguments_case}))
