#!/usr/bin/env python3
"""The probe of the page: 2 ranks, DDP hook, rank 1's loss times NaN or inf at iteration 2;
prints what rank 0's first weight averaged to. Usage (from the repository root):
  GRADWIRE_PACKAGE_DIR=lib/python /usr/bin/python3 nan_probe.py "topk:ratio=0.01;none;sign"
"""
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, os.environ.get("GRADWIRE_PACKAGE_DIR", "lib/python"))  # the build to probe
os.environ.setdefault("GRADWIRE_JOB_SECRET", os.urandom(16).hex())  # children inherit it
import gradwire.ddp

def run(rank, world, spec, bad):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29511", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    st = gradwire.ddp.GradwireState(spec, warmup_iters=1)
    ddp.register_comm_hook(st, gradwire.ddp.hook)
    for it in range(4):
        x = torch.randn(8, 256)
        loss = ddp(x).sum()
        if it == 2 and rank == 1:
            loss = loss * (float("nan") if bad == "nan" else float("inf"))
        loss.backward()
        g = model[0].weight.grad
        if rank == 0:
            print(spec, bad, "it", it, "finite:", bool(torch.isfinite(g).all()),
                  "nan:", int(torch.isnan(g).sum()), "inf:", int(torch.isinf(g).sum()), flush=True)
        for p in model.parameters(): p.grad = None
    st.close()
    dist.destroy_process_group()

if __name__ == "__main__":
    for spec in sys.argv[1].split(";"):
        for bad in ("nan", "inf"):
            mp.spawn(run, args=(2, spec, bad), nprocs=2)
