#!/usr/bin/env python3
"""A training job killed and restarted from its checkpoint in fresh processes.

DDP lays its buckets out anew after its first iteration in a process, and a
checkpoint's residuals and velocities are laid out as after that rebuild. In
fresh processes DDP's first iteration hands other buckets; the restored
GradwireState re-lays them into the checkpoint's buckets
(gradwire/_regroup.py), so the restarted job repeats the uninterrupted one
bit for bit. Before, that first iteration was averaged dense (a plain SGD
step under momentum correction): 2.4e-3 and 7.0e-3 from the uninterrupted
parameters here; before that, a restored state took DDP's first layout for
the checkpoint's and kept it (biases compressed, ranks apart under momentum
correction).

Driver (what Bazel runs): per case, three jobs of 2 ranks under
torch.multiprocessing.spawn (spawn_cases.py): "full" trains STEPS steps;
"part1" trains CUT steps, saves model, optimizer and state_dict() per rank
and exits without close(); "part2" (fresh processes) restores them and
trains the rest. Two models: "emb" (one bucket, whose order DDP's rebuild
changes) and "perm" (layers defined in another order than they run: DDP
1.13's first iteration hands one bucket, its rebuild makes 4 in another
order); "unused" is "perm" under find_unused_parameters=True, where DDP's
first buckets are capped and never rebuilt (each checkpoint bucket is one
of them: several real Futures). The driver requires:
  - in part2, DDP's first layout differed from the checkpoint's (re-laid
    into after the first iteration, state._relay), and DDP's rebuilt
    buckets were the checkpoint's (no longer re-laid at the end);
  - part2's ranks end identical, each with the uninterrupted run's
    parameters and losses, bit for bit;
  - part2's buckets took the compressed element counts of the full run
    (state.bucket_exchanges), and without momentum correction every bias
    (dense by the path rule) averaged exactly.
A fourth job ("other", where OTHER names a bucketing for the case's model)
restores part1's checkpoint into DDP with another bucketing. "perm" at
bucket_cap_mb 0.2 (rebuilt into 7 buckets): the hook keeps exchanging by the
checkpoint's buckets (state._relay still set at the end), and the driver
requires of it what it requires of part2, bit for bit with the uninterrupted
run (until 2026-12-01 this was refused with InvalidArgumentError once DDP had
rebuilt its buckets). "unused"'s checkpoint into a DDP without
find_unused_parameters: a parameter is known by where it sat in DDP's first
iteration, and that differs here (capped buckets against one), so the first
backward raises InvalidArgumentError's message on every rank (no hang).
Prints SKIPPED (and passes) only where torch cannot be imported.

    ddp_restart_test.py --package_dir lib/python [--python /usr/bin/python3]
"""
import os
import sys
import tempfile

import spawn_cases  # beside this file

WORLD = 2
STEPS, CUT = 30, 15
# (name, spec, momentum correction, model)
CASES = [("topk 5% + EF", "topk:ratio=0.05", False, "emb"),
         ("topk 5% + EF + momentum correction", "topk:ratio=0.05", True, "emb"),
         ("topk 1% + EF, 4 buckets", "topk:ratio=0.01", False, "perm"),
         ("topk 1% + EF, find_unused_parameters", "topk:ratio=0.01", False, "unused"),
         ("topk 1% + EF + momentum correction, 4 buckets", "topk:ratio=0.01", True, "perm")]
BUCKET_CAP_MB = {"emb": 25, "perm": 0.5, "unused": 0.5}
# model -> (bucket_cap_mb, find_unused_parameters, the refusal wanted or
# None) of its "other" job
OTHER = {"perm": (0.2, False, None),
         "unused": (0.5, False, "holds 21 parameters, not those the checkpoint lays out")}


def driver(args):
    if spawn_cases.torch_missing(args.python):
        return 0
    import torch
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        env = spawn_cases.case_env(tmp, args.package_dir)
        env["GRADWIRE_RESTART_DIR"] = tmp
        for name, spec, mc, kind in CASES:
            tag = f"{spec}:{int(mc)}:{kind}"
            parts = ("full", "part1", "part2") + (("other",) if kind in OTHER else ())
            for part in parts:
                good, _ = spawn_cases.run_case(args, __file__, f"{name}, {part}",
                                               f"{part}:{tag}", spawn_cases.free_port(), env,
                                               WORLD, 240)
                ok = ok and good
            if not ok:
                break
            tag = tag.replace(":", "_")
            full = [torch.load(os.path.join(tmp, f"full_{tag}.{r}.pt")) for r in range(WORLD)]
            compared = [p for p in parts[2:] if p == "part2" or OTHER[kind][2] is None]
            for part in compared:
                ok = _restarted_as_full(torch, f"{name}, {part}", full, [
                    torch.load(os.path.join(tmp, f"{part}_{tag}.{r}.pt"))
                    for r in range(WORLD)], part == "other") and ok
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


def _restarted_as_full(torch, name, full, part2, other):
    """Prints part2's (or other's) comparison with the uninterrupted run;
    True if it holds (the driver's list in the module doc)."""
    same = torch.equal(part2[0]["params"], part2[1]["params"]) and all(
        torch.equal(p["params"], f["params"]) and p["losses"] == f["losses"]
        for p, f in zip(part2, full))
    drift = (full[0]["params"] - part2[0]["params"]).abs().max().item()
    layouts = part2[0]["elements"] == full[0]["elements"]
    print(f"{name}: restarted = uninterrupted, bit for bit: {same} (max |difference| "
          f"{drift:.2e}); compressed elements per bucket {part2[0]['elements']} "
          f"(uninterrupted {full[0]['elements']})", flush=True)
    inexact = sum(p["inexact_biases"] for p in part2)
    if inexact:
        print(f"{name}: {inexact} bias averages after the restart were not exact "
              "(compressed: a stale layout)", flush=True)
    # Re-laid into the checkpoint's buckets after the first iteration (DDP's
    # first layout differs from the checkpoint's here), and at the end only
    # under another bucketing (part2's DDP rebuilt as the checkpoint's did).
    wanted = [True, other]
    if part2[0]["relayed"] != wanted:
        print(f"{name}: re-laying after the first / last iteration: "
              f"{part2[0]['relayed']}, wanted {wanted}", flush=True)
    if not (same and layouts and not inexact and part2[0]["relayed"] == wanted):
        print(f"FAIL {name}")
        return False
    return True


def _Net(torch, kind):
    """"emb": an embedding and three layers; DDP's first iteration lays its
    one bucket out in another order than its rebuild does (the embedding's
    gradient is ready last). "perm": eight hidden layers defined in another
    order than they run, 2.2 MB: DDP's one first bucket is rebuilt into 4
    at 0.5 MB, each holding layers far apart in the first one's order."""
    class Emb(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(64, 16)
            self.fc1 = torch.nn.Linear(64, 256)   # 16384 weights: compressed
            self.fc2 = torch.nn.Linear(256, 128)  # 32768: compressed
            self.fc3 = torch.nn.Linear(128, 8)    # 1024: dense, as the biases

        def forward(self, tokens):
            h = self.emb(tokens).reshape(tokens.shape[0], -1)
            return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(h)))))

    class Perm(torch.nn.Module):
        ORDER = (3, 6, 0, 5, 2, 7, 1, 4)

        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(64, 16)
            self.inp = torch.nn.Linear(64, 256)
            self.hidden = torch.nn.ModuleList(torch.nn.Linear(256, 256) for _ in range(8))
            self.out = torch.nn.Linear(256, 8)

        def forward(self, tokens):
            h = torch.tanh(self.inp(self.emb(tokens).reshape(tokens.shape[0], -1)))
            for k in self.ORDER:
                h = torch.tanh(self.hidden[k](h))
            return self.out(h)
    return Emb() if kind == "emb" else Perm()  # "unused": Perm


def _batches(torch, rank, batch=32):
    """This rank's STEPS batches of 4 tokens and a teacher's targets."""
    g = torch.Generator().manual_seed(1234)
    teacher, table = torch.randn(64, 8, generator=g), torch.randn(64, 16, generator=g)
    out = []
    for s in range(STEPS):
        tokens = torch.randint(0, 64, (batch, 4),
                               generator=torch.Generator().manual_seed(10 * s + rank))
        out.append((tokens, torch.tanh(table[tokens].reshape(batch, -1) @ teacher)))
    return out


def rank_main(rank, case, port):
    import torch
    import torch.distributed as dist
    import gradwire.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    part, rest = case.split(":", 1)
    spec, mc, kind = rest.rsplit(":", 2)
    mc = mc == "1"
    tmp = os.environ["GRADWIRE_RESTART_DIR"]
    tag = rest.replace(":", "_")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    torch.manual_seed(0)
    model = _Net(torch, kind)
    cap, unused, refusal = (OTHER[kind] if part == "other" else
                            (BUCKET_CAP_MB[kind], kind == "unused", None))
    ddp = DDP(model, bucket_cap_mb=cap, find_unused_parameters=unused)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    settings = {"optimizer": opt, "momentum_correction": True} if mc else {}
    state = gradwire.ddp.GradwireState(spec, warmup_iters=5, **settings)
    # Without momentum correction the hook returns the average: every bias
    # (1-D, the path rule's dense) must equal the exact mean of the ranks'
    # gradients; in a compressed segment (a stale layout) it would not.
    inexact = []

    def checked(st, bucket):
        exact = bucket.buffer().clone()
        dist.all_reduce(exact)
        exact /= WORLD
        spans, off = [], 0
        for p in bucket.parameters():
            if p.dim() == 1:
                spans.append((off, off + p.numel()))
            off += p.numel()

        def compare(fut):
            out = fut.value()
            inexact.extend((a, b) for a, b in spans if not torch.equal(out[a:b], exact[a:b]))
            return out
        return gradwire.ddp.hook(st, bucket).then(compare)
    ddp.register_comm_hook(state, gradwire.ddp.hook if mc else checked)
    batches = _batches(torch, rank)
    losses, first = [], 0
    saved = os.path.join(tmp, f"ckpt_{tag}.{rank}.pt")
    if part in ("part2", "other"):
        ck = torch.load(saved)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        state.load_state_dict(ck["gradwire"])
        losses, first = ck["losses"], CUT
    if refusal is not None:
        try:
            for x, y in batches[CUT:CUT + 3]:
                opt.zero_grad()
                ((ddp(x) - y) ** 2).mean().backward()
                opt.step()
            print(f"rank {rank}: CHECK FAILED: another bucketing's checkpoint was taken")
        except RuntimeError as e:
            print(f"rank {rank}: {'PASS' if refusal in str(e) else 'CHECK FAILED: ' + str(e)}",
                  flush=True)
        sys.stdout.flush()
        os._exit(0)
    last = CUT if part == "part1" else STEPS
    elements = {}
    for s in range(first, last):
        x, y = batches[s]
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if s == first:
            relayed_at_first = state._relay is not None
        if s > 0:  # after the warm-up's first iteration
            for index, e in state.bucket_exchanges.items():
                if e["exchange"] != "dense_ring":
                    elements.setdefault(index, set()).add(e["elements"])
    if part == "part1":
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                    "gradwire": state.state_dict(), "losses": losses}, saved)
        dist.barrier()
        print("PASS", flush=True)
        sys.stdout.flush()
        os._exit(0)  # killed: no close()
    state.close()
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    torch.save({"params": params, "losses": losses, "inexact_biases": len(inexact),
                "relayed": [relayed_at_first, state._relay is not None],
                "elements": {i: sorted(v) for i, v in elements.items()}},
               os.path.join(tmp, f"{part}_{tag}.{rank}.pt"))
    print("PASS", flush=True)
    sys.stdout.flush()
    os._exit(0)  # Debian torch's process-group teardown can abort


if __name__ == "__main__":
    sys.exit(spawn_cases.main(driver, rank_main, WORLD))
