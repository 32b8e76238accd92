#!/usr/bin/env python3
"""A training job killed and restarted from its checkpoint in fresh processes.

DDP lays its buckets out anew after its first iteration in a process, and a
checkpoint's residuals and velocities are laid out as after that rebuild. A
restored GradwireState once took DDP's first, other layout for the
checkpoint's (its layout cache was refreshed only at iteration 0) and kept
it: biases were compressed and weight rows sent dense for the rest of the
run, and with momentum correction each rank's own velocity landed in dense
segments, so the ranks' parameters drifted apart, silently.

Driver (what Bazel runs): per spec, three jobs of 2 ranks under
torch.multiprocessing.spawn (spawn_cases.py): "full" trains STEPS steps;
"part1" trains CUT steps, saves model, optimizer and state_dict() per rank
and exits without close(); "part2" (fresh processes) restores them and
trains the rest. The driver requires:
  - in part2, DDP's first layout differed from the checkpoint's (buckets were
    held for their own layout after the first iteration), and every such
    bucket took its layout back (none held at the end);
  - part2's ranks end with bit-identical parameters (with momentum
    correction they did not);
  - part2's buckets took, from its second iteration on, the compressed
    element counts the full run took (state.bucket_exchanges), and, without
    momentum correction, every bias (dense by the path rule) averaged
    exactly: the checkpoint's layouts, not DDP's first (it compressed them);
  - part2 ends near the full run (its first iteration is a plain dense step,
    docs/python.md): max |difference| < MAX_DRIFT, and its loss falls (the
    last 5 steps' mean below the first 5's).
Prints SKIPPED (and passes) only where torch cannot be imported.

    ddp_restart_test.py --package_dir lib/python [--python /usr/bin/python3]
"""
import os
import sys
import tempfile

import spawn_cases  # beside this file

WORLD = 2
STEPS, CUT = 30, 15
# The restarted run differs from the uninterrupted one by its first step
# (dense, no momentum correction): about 2e-3 (top-k) and 7e-3 (with
# momentum correction) in these runs; the stale layouts gave 7e-3 (top-k) and
# 3e-2 with the ranks apart (momentum correction).
MAX_DRIFT = 0.05
SPECS = [("topk 5% + EF", "topk:ratio=0.05", False),
         ("topk 5% + EF + momentum correction", "topk:ratio=0.05", True)]


def driver(args):
    if spawn_cases.torch_missing(args.python):
        return 0
    import torch
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        env = spawn_cases.case_env(tmp, args.package_dir)
        env["GRADWIRE_RESTART_DIR"] = tmp
        for name, spec, mc in SPECS:
            for part in ("full", "part1", "part2"):
                case = f"{part}:{spec}:{int(mc)}"
                good, _ = spawn_cases.run_case(args, __file__, f"{name}, {part}", case,
                                               spawn_cases.free_port(), env, WORLD, 240)
                ok = ok and good
            if not ok:
                break
            tag = f"{spec}:{int(mc)}".replace(":", "_")
            full = [torch.load(os.path.join(tmp, f"full_{tag}.{r}.pt")) for r in range(WORLD)]
            part2 = [torch.load(os.path.join(tmp, f"part2_{tag}.{r}.pt")) for r in range(WORLD)]
            same = torch.equal(part2[0]["params"], part2[1]["params"])
            drift = (full[0]["params"] - part2[0]["params"]).abs().max().item()
            layouts = part2[0]["elements"] == full[0]["elements"]
            mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
            fell = mean(part2[0]["losses"][-5:]) < mean(full[0]["losses"][:5])
            print(f"{name}: restarted ranks identical {same}; drift from the uninterrupted "
                  f"run {drift:.2e} (< {MAX_DRIFT}); compressed elements per bucket "
                  f"{part2[0]['elements']} (uninterrupted {full[0]['elements']}); loss "
                  f"{mean(full[0]['losses'][:5]):.4f} -> {mean(part2[0]['losses'][-5:]):.4f}",
                  flush=True)
            inexact = sum(p["inexact_biases"] for p in part2)
            if inexact:
                print(f"{name}: {inexact} bias averages after the restart were not exact "
                      "(compressed: a stale layout)", flush=True)
            held = part2[0]["held"]
            if held[0] == 0 or held[1] != 0:
                print(f"{name}: buckets held for the checkpoint's layout after the first / "
                      f"last iteration: {held} (wanted some, then none: DDP's first layout "
                      "must differ from the rebuilt one here, and be taken back)", flush=True)
            if not (same and drift < MAX_DRIFT and layouts and fell and not inexact and
                    held[0] > 0 and held[1] == 0):
                print(f"FAIL {name}")
                ok = False
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


def _Net(torch):
    """An embedding and three layers: DDP's first iteration lays its bucket
    out in another order than its rebuild does (the embedding's gradient is
    ready last), so the checkpoint's layout differs from DDP's first."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(64, 16)
            self.fc1 = torch.nn.Linear(64, 256)   # 16384 weights: compressed
            self.fc2 = torch.nn.Linear(256, 128)  # 32768: compressed
            self.fc3 = torch.nn.Linear(128, 8)    # 1024: dense, as the biases

        def forward(self, tokens):
            h = self.emb(tokens).reshape(tokens.shape[0], -1)
            return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(h)))))
    return Net()


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
    part, spec, mc = case.split(":", 2)[0], *case.split(":", 1)[1].rsplit(":", 1)
    mc = mc == "1"
    tmp = os.environ["GRADWIRE_RESTART_DIR"]
    tag = f"{spec}:{int(mc)}".replace(":", "_")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    torch.manual_seed(0)
    model = _Net(torch)
    ddp = DDP(model, bucket_cap_mb=25)
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
    if part == "part2":
        ck = torch.load(saved)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        state.load_state_dict(ck["gradwire"])
        losses, first = ck["losses"], CUT
    last = CUT if part == "part1" else STEPS
    elements = {}
    for s in range(first, last):
        x, y = batches[s]
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if s == first and part == "part2":
            # The case at hand: DDP's first layout is not the checkpoint's
            # (the buckets held for their own layout are still waiting).
            held_at_first = len(state._held_layouts)
        if s > first:  # from the second iteration in this process on
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
    if part == "part2":
        check_held = (held_at_first, len(state._held_layouts))
    else:
        check_held = None
    torch.save({"params": params, "losses": losses, "inexact_biases": len(inexact),
                "held": check_held,
                "elements": {i: sorted(v) for i, v in elements.items()}},
               os.path.join(tmp, f"{part}_{tag}.{rank}.pt"))
    print("PASS", flush=True)
    sys.stdout.flush()
    os._exit(0)  # Debian torch's process-group teardown can abort


if __name__ == "__main__":
    sys.exit(spawn_cases.main(driver, rank_main, WORLD))
