#!/usr/bin/env python3
"""GradScaler's loop on 4 ranks with fp16-rounded gradients, through gradwire's hook.

Emulates mixed-precision training on the CPU (torch 1.13's GradScaler needs CUDA): the
loss is scaled by S, every parameter's gradient is rounded to fp16 on its way into DDP's
bucket (a tensor hook: what an fp16 backward hands over, overflowing to inf above 65504),
and after backward the loop does what GradScaler does: a non-finite gradient skips the
step and halves S, else the gradients are unscaled and SGD steps; S doubles after
--growth_interval clean steps. Model: an MLP 784-512-256-10 on Fashion-MNIST, 64 images
per rank and step, SGD lr 0.05 momentum 0.9, gradwire warm-up --warmup dense steps;
--compress_all sends every tensor through the codec (by default the last layer's 2,560
weights and the biases go dense, and with them most overflows).

Prints one JSON line: steps skipped (the same on every rank?), the scale's path, final
test accuracy (10,000 images), whether the ranks' parameters are bit-identical.

    /usr/bin/python3 amp_overflow.py --package_dir lib/python --spec qsgd:bits=4,bucket=512 \
        [--follow] [--compress_all] [--steps 600] [--growth_interval 100] [--port 29600]
"""
import argparse
import gzip
import json
import os
import sys
import zlib

import numpy as np

WORLD = 4
IDX = "/usr/share/datasets/fashion-mnist"


def idx(name):
    with gzip.open(os.path.join(IDX, name)) as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def data(split):
    prefix = "train" if split == "train" else "t10k"
    x = idx(f"{prefix}-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    return (x - 0.2860) / 0.3530, idx(f"{prefix}-labels-idx1-ubyte.gz").astype(np.int64)


def rank_main(rank, a):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    sys.path.insert(0, a.package_dir)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank,
                            world_size=WORLD)
    import gradwire.ddp

    class Scaler:  # GradScaler's get_scale()
        scale = a.init_scale

        def get_scale(self):
            return self.scale

    scaler = Scaler()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    for p in model.parameters():
        p.register_hook(lambda g: g.half().float())  # an fp16 backward's gradient
    ddp = DDP(model)
    extra = {"loss_scaler": scaler} if a.follow else {}
    if a.compress_all:  # every tensor through the codec (else the small ones go dense)
        extra.update(dense_below_elements=0, dense_one_dimensional=False)
    state = gradwire.ddp.GradwireState(a.spec, warmup_iters=a.warmup, **extra)
    ddp.register_comm_hook(state, gradwire.ddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    x, y = data("train")
    x, y = torch.from_numpy(x[rank::WORLD]), torch.from_numpy(y[rank::WORLD])
    gen = torch.Generator().manual_seed(rank)
    skipped, scales, clean = [], [], 0
    for step in range(a.steps):
        b = torch.randint(0, len(x), (64,), generator=gen)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x[b]), y[b])
        (loss * scaler.scale).backward()
        if any(not bool(torch.isfinite(p.grad).all()) for p in model.parameters()):
            skipped.append(step)
            scaler.scale *= 0.5
            clean = 0
        else:
            for p in model.parameters():
                p.grad.div_(scaler.scale)
            opt.step()
            clean += 1
            if clean == a.growth_interval:
                scaler.scale *= 2.0
                clean = 0
        scales.append(scaler.scale)
    tx, ty = data("test")
    with torch.no_grad():
        acc = float((model(torch.from_numpy(tx)).argmax(1) == torch.from_numpy(ty))
                    .float().mean())
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    crc = zlib.crc32(flat.numpy().tobytes())
    everyone = [None] * WORLD
    dist.all_gather_object(everyone, (skipped, crc))
    nonfinite = state.totals().get("nonfinite", 0)
    state.close()
    if rank == 0:
        print(json.dumps({
            "spec": a.spec, "follow": a.follow, "compress_all": a.compress_all, "steps": a.steps,
            "skipped": len(skipped), "skipped_steps": skipped[:40],
            "same_skips_every_rank": all(s == skipped for s, _ in everyone),
            "ranks_bit_identical": len({c for _, c in everyone}) == 1,
            "scale_first_last_min_max": [scales[0], scales[-1], min(scales), max(scales)],
            "test_accuracy": round(acc, 4), "parameters_finite": bool(torch.isfinite(flat).all()),
            "nonfinite_elements_rank0": nonfinite, "gradwire": gradwire.extension_path}),
            flush=True)
    sys.stdout.flush()
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--package_dir", required=True)
    ap.add_argument("--spec", default="topk:ratio=0.01")
    ap.add_argument("--follow", action="store_true", help="pass loss_scaler= (newer builds)")
    ap.add_argument("--compress_all", action="store_true",
                    help="dense_below_elements=0, dense_one_dimensional=False")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--init_scale", type=float, default=2.0 ** 16)
    ap.add_argument("--growth_interval", type=int, default=100)
    ap.add_argument("--port", type=int, default=29600)
    a = ap.parse_args()
    a.package_dir = os.path.abspath(a.package_dir)
    import torch.multiprocessing as mp
    mp.spawn(rank_main, args=(a,), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main()
