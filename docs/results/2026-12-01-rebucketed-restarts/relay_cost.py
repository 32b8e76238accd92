#!/usr/bin/env python3
"""What re-laying into a checkpoint's buckets costs per step (2026-12-01 page).

Two ranks on loopback (torch.multiprocessing.spawn), an MLP of 24 layers
512 x 512 (25 MB of float32 gradients, about 1 MB a layer), top-k 1 % + EF. Job "save" trains
8 steps at bucket_cap_mb 4 and saves; jobs "same" (bucket_cap_mb 4) and
"other" (bucket_cap_mb 1.5) restore it in fresh processes and train 14 steps;
the median of steps 4..14 (after DDP's rebuild and re-laying's end in "same")
is printed, with whether re-laying was still on at the end.

    GRADWIRE_JOB_SECRET_FILE=... PYTHONPATH=<package dir> \
        /usr/bin/python3 relay_cost.py --dir /tmp/relay [--rounds 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def rank_main(rank, job, port, tmp):
    import torch
    import torch.distributed as dist
    import gradwire.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    torch.manual_seed(0)
    layers = []
    for _ in range(24):
        layers += [torch.nn.Linear(512, 512), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers)
    ddp = DDP(model, bucket_cap_mb=1.5 if job == "other" else 4)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    state = gradwire.ddp.GradwireState("topk:ratio=0.01", warmup_iters=2)
    ddp.register_comm_hook(state, gradwire.ddp.hook)
    saved = os.path.join(tmp, f"ckpt.{rank}.pt")
    if job != "save":
        ck = torch.load(saved)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        state.load_state_dict(ck["gradwire"])
    g = torch.Generator().manual_seed(rank)
    times = []
    for _ in range(8 if job == "save" else 14):
        x = torch.randn(64, 512, generator=g)
        t0 = time.perf_counter()
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    if job == "save":
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                    "gradwire": state.state_dict()}, saved)
    elif rank == 0:
        print(f"{job}: median step {1e3 * statistics.median(times[3:]):.1f} ms, "
              f"re-laying at the end: {state._relay is not None}, "
              f"{len(state._layouts)} checkpoint buckets exchanged", flush=True)
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--job", default="")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    if args.job:
        import torch.multiprocessing as mp
        mp.spawn(rank_main, args=(args.job, args.port, args.dir), nprocs=2, join=True)
        return
    os.makedirs(args.dir, exist_ok=True)
    port = 29731
    for job in ["save"] + ["same", "other"] * args.rounds:
        port += 1
        subprocess.run([sys.executable, __file__, "--dir", args.dir, "--job", job,
                        "--port", str(port)], check=True)


if __name__ == "__main__":
    main()
