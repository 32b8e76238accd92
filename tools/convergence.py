#!/usr/bin/env python3
"""Convergence experiment: a small CNN on Fashion-MNIST, 4 data-parallel ranks,
dense allreduce vs gradwire's compressed exchanges vs PyTorch's PowerSGD.

    convergence.py all --out DIR [--seeds 0,1,2] [--epochs 3] [--emulate --link 1gbit]
    convergence.py run --method topk1 --seed 0 --out DIR ...   (one run)
    convergence.py report --out DIR                             (table + PNG curves)
    convergence.py prepare --data_dir DIR                      (pack + check the data)
    convergence.py rank ...                                      (one rank; internal)

Every run uses the same seed-dependent initialization, data order and
hyperparameters; only the gradient exchange differs (METHODS). The *_mc
methods move SGD's momentum and weight decay (same values) from the
optimizer into the hook, for DGC's momentum correction (gradwire.ddp). Rank 0
evaluates test accuracy every --eval_every iterations (evaluation time is
not counted in the wall clock) and writes run.json: the curve
(iteration, training seconds, accuracy, loss), final accuracy, seconds per
epoch, and bytes on the wire per iteration: measured at each emulated
host's interface (all traffic, TCP/IP headers included) with --emulate,
from gradwire's own counters for gradwire runs, and as the analytic ring
volume 2(P-1)/P x 4n for DDP's dense allreduce on loopback.

Data: Debian's dataset-fashion-mnist, read through gradwire's data cache
(lib/cache, Python side lib/python/gradwire/data.py). `prepare` (run first by
`run` and `all`) packs the IDX files once into OUT/fashion-mnist-packed
(--data_dir; shards + MANIFEST, one 785-byte record per example) and checks
that the cached, decoded, normalized images and labels equal the IDX files'
for 1000 random indices per split, exactly (bit for bit), so accuracies stay
comparable with runs from before the cache. Each rank reads its training
examples through a DataCache: a memory tier (--cache_memory_mb), a disk tier
in its own temp dir (--cache_disk_mb), then the packed directory; a
Prefetcher reads ahead in the epoch's order, which is the same
torch.randperm order as before. The test set is read once from the packed
directory. Each run's JSON holds the cache statistics per rank and epoch
(reads, memory/disk hits, reads and bytes from the source, time spent
reading) and table.md sums them per method. The source is the directory
even with --emulate (the namespaces share the file system): a data server
on rank 0's host would put the dataset on the same shaped links whose
interface counters measure the gradient exchange.
--emulate runs each rank in its own network namespace of an emulated
cluster (tools/emulated_cluster.py, its own lock-owned "gwc<token>-*" namespaces, links shaped to
--link); otherwise ranks share loopback. Run with Debian's /usr/bin/python3
(python3-torch) after `bazel build //lib/python:_gradwire.so //lib/python:_gradwire_data.so`.
"""
import argparse
import json
import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA_DIR = "/usr/share/datasets/fashion-mnist"

# name -> (label, kind, setting)
METHODS = {
    "dense": ("dense allreduce (DDP default)", "ddp", None),
    "topk1": ("top-k 1 % + EF", "gradwire", "topk:ratio=0.01"),
    "topk0.1": ("top-k 0.1 % + EF", "gradwire", "topk:ratio=0.001"),
    "approx_topk1": ("approx top-k 1 % + EF", "gradwire", "approx_topk:ratio=0.01"),
    "qsgd4": ("QSGD 4-bit + EF", "gradwire", "qsgd:bits=4,bucket=512"),
    "sign": ("sign + EF", "gradwire", "sign:bucket=1024,ef=on"),
    "topk1_noef": ("top-k 1 % without EF", "gradwire", "topk:ratio=0.01,ef=off"),
    # DGC's momentum correction and masking in the hook (gradwire.ddp
    # momentum=): the same SGD momentum and weight decay, applied by the
    # hook instead of the optimizer (see lib/python/gradwire/ddp.py).
    "topk1_mc": ("top-k 1 % + EF + momentum correction", "gradwire", "topk:ratio=0.01"),
    "topk0.1_mc": ("top-k 0.1 % + EF + momentum correction", "gradwire", "topk:ratio=0.001"),
    "powersgd2": ("PyTorch PowerSGD rank 2", "powersgd", 2),
    "auto": ("gradwire auto", "gradwire", "auto"),
}
DEFAULT_METHODS = list(METHODS)
MOMENTUM, WEIGHT_DECAY = 0.9, 5e-4  # every run's SGD


# ---------------------------------------------------------------- data
def gradwire_data():
    sys.path.insert(0, os.path.join(ROOT, "lib", "python"))
    import gradwire.data
    return gradwire.data


def prepare_main(args):
    """Packs the IDX files into args.data_dir once (kept if a valid pack is there), then
    checks that what the cache serves, decoded and normalized as the ranks do, equals
    the IDX files' images and labels for a sample of indices of both splits."""
    import numpy as np
    data = gradwire_data()
    try:
        cache = data.DataCache(path=args.data_dir, verify_shards=True)
        if cache.dataset_id != "fashion-mnist" or cache.num_samples() != 70000:
            raise ValueError(f"{cache.dataset_id}, {cache.num_samples()} samples")
        print(f"[convergence] using packed Fashion-MNIST in {args.data_dir} "
              f"(version {cache.version})", flush=True)
    except (OSError, ValueError) as e:
        if os.path.exists(os.path.join(args.data_dir, "MANIFEST")):
            print(f"[convergence] repacking {args.data_dir}: {e}", flush=True)
        summary = data.pack_fashion_mnist(args.idx_dir, args.data_dir)
        print(f"[convergence] packed Fashion-MNIST from {args.idx_dir} into {args.data_dir}: "
              f"{summary['shards']} shards, {summary['samples']} samples, version "
              f"{summary['version']}", flush=True)
    rng = np.random.default_rng(12345)
    checked = 0
    for split in ("train", "test"):
        images, labels = data.fashion_mnist_idx(args.idx_dir, split)
        ds = data.FashionMnist.open(split, path=args.data_dir)
        if len(ds) != len(labels):
            raise SystemExit(f"packed {split} has {len(ds)} samples, IDX {len(labels)}")
        sample = np.concatenate([[0, len(labels) - 1],
                                 rng.choice(len(labels), args.check_samples, replace=False)])
        x, y = ds.read(sample)
        # What the ranks train and evaluate on, against what they did before the cache:
        # numpy over the whole IDX array, then indexed.
        before_x = ((images.astype(np.float32) / 255 - data.FASHION_MNIST_MEAN)
                    / data.FASHION_MNIST_STD)[:, None][sample]
        before_y = labels.astype(np.int64)[sample]
        if not (np.array_equal(data.normalize(x), before_x)
                and np.array_equal(y.astype(np.int64), before_y)):
            raise SystemExit(f"packed {split} data differs from the IDX files in "
                             f"{args.data_dir}; delete it to repack")
        checked += len(sample)
    print(f"[convergence] cached images/labels equal the IDX files' for {checked} sampled "
          "indices", flush=True)
    return 0


# ---------------------------------------------------------------- one rank
def rank_main(args):
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    label, kind, setting = METHODS[args.method]
    import datetime
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))

    # Training examples through gradwire's DataCache: memory tier, then a disk
    # tier in this rank's own temp dir, then the packed directory.
    data = gradwire_data()
    cache_dir = tempfile.mkdtemp(prefix=f"gradwire-conv-cache-r{rank}-")
    # disk_sync off: a scratch cache that dies with the run need not survive a crash.
    train = data.FashionMnist.open("train", path=args.data_dir,
                                   memory_budget_bytes=int(args.cache_memory_mb * 2**20),
                                   disk_dir=cache_dir if args.cache_disk_mb > 0 else "",
                                   disk_budget_bytes=int(args.cache_disk_mb * 2**20),
                                   disk_sync=False)
    # The test set is read once, in full, straight from the source.
    test = data.FashionMnist.open("test", path=args.data_dir)
    n_test = min(args.test_samples, len(test))
    xte, yte = test.read(range(n_test))
    xte = torch.from_numpy(data.normalize(xte))
    yte = torch.from_numpy(yte.astype(np.int64))

    class Net(nn.Module):
        # conv 1->32 (800) and 32->64 (51200), fc 1024->256 (262144),
        # fc 256->10 (2560): 2 tensors big enough to compress, the rest
        # (biases, small) dense by the default rule.
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 32, 5)
            self.c2 = nn.Conv2d(32, 64, 5)
            self.f1 = nn.Linear(64 * 4 * 4, 256)
            self.f2 = nn.Linear(256, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.c1(x)), 2)
            x = F.max_pool2d(F.relu(self.c2(x)), 2)
            return self.f2(F.relu(self.f1(x.flatten(1))))

    torch.manual_seed(args.seed)
    model = Net()
    n_params = sum(p.numel() for p in model.parameters())
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    state = None
    if args.method.endswith("_mc"):  # the hook applies momentum and weight decay
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    else:
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=MOMENTUM,
                              weight_decay=WEIGHT_DECAY)
    if kind == "gradwire":
        import gradwire.ddp
        if args.hook_defaults:
            # The library's defaults for everything but the spec (its
            # warm-up; momentum correction as it decides from the optimizer).
            state = gradwire.ddp.GradwireState(setting, optimizer=opt)
        else:
            extra = {}
            if args.method.endswith("_mc"):
                extra = {"momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY}
            state = gradwire.ddp.GradwireState(setting, warmup_iters=args.warmup, **extra)
        ddp.register_comm_hook(state, gradwire.ddp.hook)
    elif kind == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        ps = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=setting,
                                         start_powerSGD_iter=max(2, args.warmup),
                                         use_error_feedback=True, warm_start=True,
                                         random_seed=args.seed)
        # One bucket's PowerSGD at a time. Its stages issue allreduces from
        # the gloo process group's completion callbacks; with two buckets in
        # flight the ranks issued them in different orders and Gloo aborted
        # ("op.preamble.length <= op.nbytes. 268 vs 48"), so each bucket
        # waits for the previous bucket's future first.
        last = [None]

        def serialized_powersgd(st, bucket):
            if last[0] is not None and not bucket.index() == 0:
                last[0].wait()
            last[0] = powerSGD_hook.powerSGD_hook(st, bucket)
            return last[0]
        ddp.register_comm_hook(ps, serialized_powersgd)

    per_epoch = len(train) // (args.batch * world)
    iters = args.iters or int(args.epochs * per_epoch)

    def evaluate():
        model.eval()
        correct = torch.zeros(2)
        with torch.no_grad():
            for s in range(rank * 500, n_test, world * 500):
                out = model(xte[s:s + 500])
                correct[0] += (out.argmax(1) == yte[s:s + 500]).sum()
                correct[1] += F.cross_entropy(out, yte[s:s + 500], reduction="sum")
        dist.all_reduce(correct)
        model.train()
        return float(correct[0]) / n_test, float(correct[1]) / n_test

    def tx_bytes():
        # Inside an emulated host (ip netns exec remounts /sys), this rank's
        # interface counter: everything it sent, headers included.
        try:
            with open("/sys/class/net/eth0/statistics/tx_bytes") as f:
                return int(f.read())
        except OSError:
            return None

    curve = []
    train_s = 0.0
    tx_at_warmup = None
    batches = None
    data_s = 0.0
    dist.barrier()
    for it in range(iters):
        epoch, pos = divmod(it, per_epoch)
        t_data = time.perf_counter()
        if pos == 0:
            # The same order as ever (so accuracies stay comparable), prefetched
            # by the cache in that order: batch pos is order[pos*B:(pos+1)*B].
            g = torch.Generator().manual_seed(args.seed * 1000 + epoch)
            order = torch.randperm(len(train), generator=g)[rank::world]
            train.cache.begin_epoch(epoch + 1)
            if batches is not None:
                batches.close()
            batches = train.batches(order[:per_epoch * args.batch].tolist(), args.batch)
        images, labels = next(batches)
        xb = torch.from_numpy(data.normalize(images))
        yb = torch.from_numpy(labels.astype(np.int64))
        data_s += time.perf_counter() - t_data
        if it == args.warmup:
            tx_at_warmup = tx_bytes()
        if args.lr_schedule == "cosine":
            # Cosine decay to 0 over the run (per iteration): the final
            # evaluation then measures a settled model, not wherever a
            # constant learning rate left it.
            for group in opt.param_groups:
                group["lr"] = args.lr * 0.5 * (1 + math.cos(math.pi * it / iters))
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(ddp(xb), yb)
        loss.backward()
        opt.step()
        train_s += time.perf_counter() - t0
        if (it + 1) % args.eval_every == 0 or it + 1 == iters:
            acc, test_loss = evaluate()
            curve.append({"iteration": it + 1, "train_s": train_s, "accuracy": acc,
                          "test_loss": test_loss, "train_loss": float(loss)})
            if rank == 0:
                print(f"{args.method} seed {args.seed}: iter {it + 1}/{iters} "
                      f"{train_s:.1f}s acc {acc:.4f} loss {test_loss:.4f}", flush=True)
    batches.close()
    train.cache.end_epoch()
    cache_summary = data.summarize_stats(train.cache.stats())
    cache_summary["data_s"] = data_s
    per_rank = [None] * world
    dist.all_gather_object(per_rank, cache_summary)
    shutil.rmtree(cache_dir, ignore_errors=True)
    result = None
    if rank == 0:
        result = {
            "method": args.method, "label": label, "seed": args.seed, "world_size": world,
            "iterations": iters, "iterations_per_epoch": per_epoch, "params": n_params,
            "batch_per_rank": args.batch, "lr": args.lr, "lr_schedule": args.lr_schedule,
            "warmup": (state.warmup_iters if state is not None else args.warmup),
            "hook_defaults": bool(args.hook_defaults),
            "momentum_correction": bool(state is not None and state.momentum > 0),
            "curve": curve, "final_accuracy": curve[-1]["accuracy"],
            "train_s": train_s, "s_per_epoch": train_s / iters * per_epoch,
            "torch": torch.__version__,
            "data_cache": {
                "source": train.cache.source, "version": train.cache.version,
                "memory_budget_bytes": int(args.cache_memory_mb * 2**20),
                "disk_budget_bytes": int(args.cache_disk_mb * 2**20),
                "ranks": per_rank,
                "total": {k: sum(r[k] for r in per_rank) for k in per_rank[0]
                          if k != "epochs"},
            },
        }
        if state is not None:
            t = state.totals()
            result["gradwire_bytes_sent_per_iter"] = t["bytes_sent"] / iters
            result["gradwire_bytes_received_per_iter"] = t["bytes_received"] / iters
            result["gradwire_totals"] = t
            if state.auto:
                result["auto_report"] = state.auto_report
                print(state.auto_report, flush=True)
        tx_end = tx_bytes()
        if tx_at_warmup is not None and tx_end is not None and iters > args.warmup:
            # After the dense warm-up: what the method itself costs per step.
            result["steady_iface_bytes_sent_per_iter"] = (tx_end - tx_at_warmup) / (
                iters - args.warmup)
        if kind == "ddp":
            result["analytic_bytes_sent_per_iter"] = 2 * (world - 1) / world * 4 * n_params
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=1)
    if state is not None:
        state.close()
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)  # Debian's torch can abort in process-group teardown


# ---------------------------------------------------------------- one run
def iface_tx_bytes(cluster, hosts):
    total = 0
    for h in range(hosts):
        out = subprocess.run(cluster.command(h, ["cat", "/sys/class/net/eth0/statistics/tx_bytes"]),
                             capture_output=True, text=True)
        total += int(out.stdout.strip() or 0)
    return total


def run_one(args, method, seed, cluster=None):
    os.makedirs(args.out, exist_ok=True)
    json_out = os.path.join(args.out, f"{method}.seed{seed}.json")
    python = args.python
    rank_cmd = [python, os.path.abspath(__file__), "rank", "--method", method,
                "--seed", str(seed), "--json_out", json_out, "--data_dir", args.data_dir]
    for flag in ("epochs", "iters", "batch", "lr", "lr_schedule", "warmup", "eval_every",
                 "test_samples", "hook_defaults",
                 "bucket_cap_mb", "cache_memory_mb", "cache_disk_mb"):
        rank_cmd += [f"--{flag}", str(getattr(args, flag))]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "lib", "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("GRADWIRE_JOB_SECRET", secrets.token_hex(16))
    t0 = time.time()
    if cluster is None:
        cmd = [python, os.path.join(HERE, "launch.py"), f"--nproc={args.nproc}",
               f"--timeout={args.timeout}", "--"] + rank_cmd
        rc = subprocess.call(cmd, env=env)
        tx = None
    else:
        store = tempfile.mkdtemp(prefix="gradwire-conv-")
        tx0 = iface_tx_bytes(cluster, args.nproc)
        procs = []
        port = 29500 + (os.getpid() % 1000)
        job_id = f"conv-{method}-{seed}-{secrets.token_hex(3)}"
        for r in range(args.nproc):
            e = dict(env)
            e.update({"RANK": str(r), "WORLD_SIZE": str(args.nproc), "LOCAL_RANK": "0",
                      "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(r),
                      "MASTER_ADDR": cluster.address(0), "MASTER_PORT": str(port),
                      "GLOO_SOCKET_IFNAME": "eth0", "GRADWIRE_IFACE": "eth0",
                      "GRADWIRE_STORE_DIR": store,
                      "GRADWIRE_JOB_ID": job_id})
            procs.append(cluster.popen(r, rank_cmd, env=e))
        deadline = time.time() + args.timeout
        rc = 0
        try:
            while any(p.poll() is None for p in procs):
                bad = [p.returncode for p in procs if p.returncode not in (None, 0)]
                if bad or time.time() > deadline:
                    rc = bad[0] if bad else 124
                    break
                time.sleep(0.2)
            else:
                rc = max((p.returncode for p in procs), key=abs)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            shutil.rmtree(store, ignore_errors=True)
        tx = iface_tx_bytes(cluster, args.nproc) - tx0
    if rc != 0 or not os.path.exists(json_out):
        print(f"[convergence] {method} seed {seed} FAILED (status {rc})", flush=True)
        return None
    with open(json_out) as f:
        result = json.load(f)
    result["run_wall_s"] = time.time() - t0
    if tx is not None:
        result["iface_bytes_sent_per_rank_per_iter"] = tx / args.nproc / result["iterations"]
        result["network"] = f"emulated cluster, {args.nproc} hosts, {args.link} links"
    else:
        result["network"] = "loopback"
    with open(json_out, "w") as f:
        json.dump(result, f, indent=1)
    return result


# ---------------------------------------------------------------- report
def wire_bytes(r):
    for key in ("iface_bytes_sent_per_rank_per_iter", "gradwire_bytes_sent_per_iter",
                "analytic_bytes_sent_per_iter"):
        if key in r:
            return r[key], {"iface_bytes_sent_per_rank_per_iter": "interface",
                            "gradwire_bytes_sent_per_iter": "gradwire counters",
                            "analytic_bytes_sent_per_iter": "analytic"}[key]
    return None, "n/a"


def data_cache_table(runs, order):
    """Where the ranks' training reads came from (gradwire's DataCache), per method:
    all ranks together, mean over seeds."""
    import statistics
    lines = []
    for m in order:
        totals = [r["data_cache"]["total"] for r in runs[m] if "data_cache" in r]
        if not totals:
            continue
        def mean(key):
            return statistics.mean(t[key] for t in totals)
        reads = mean("reads")
        pct = lambda key: f"{100 * mean(key) / reads:.1f} %" if reads else "n/a"
        lines.append(f"| {runs[m][0]['label']} | {len(totals)} | {reads:.0f} | "
                     f"{pct('memory_hits')} | {pct('disk_hits')} | {pct('source_reads')} | "
                     f"{mean('source_bytes') / 1e6:.1f} | {mean('corrupt') + mean('source_errors'):.0f} | "
                     f"{mean('data_s'):.1f} |")
    if not lines:
        return ""
    first = next(r for m in order for r in runs[m] if "data_cache" in r)["data_cache"]
    return (f"\nTraining data through gradwire's DataCache ({first['source']}, version "
            f"{first['version']}; per rank: memory tier {first['memory_budget_bytes'] / 2**20:.0f} MiB, "
            f"disk tier {first['disk_budget_bytes'] / 2**20:.0f} MiB); all ranks, mean over seeds:\n\n"
            "| method | seeds | reads | memory hits | disk hits | from source | source MB | "
            "errors | rank-s reading data |\n|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(lines) + "\n")


def report(args):
    import statistics
    runs = {}
    for name in sorted(os.listdir(args.out)):
        if name.endswith(".json") and ".seed" in name:
            with open(os.path.join(args.out, name)) as f:
                r = json.load(f)
            runs.setdefault(r["method"], []).append(r)
    if not runs:
        print(f"no runs in {args.out}")
        return 1
    order = [m for m in METHODS if m in runs]
    dense = runs.get("dense")
    dense_final = statistics.mean(r["final_accuracy"] for r in dense) if dense else None
    target = dense_final - 0.01 if dense_final is not None else None
    # One evaluation is noisy (the dense run moves by ±0.5 points between
    # neighbouring evaluations): the mean of each run's last three
    # evaluations is reported beside the final one.
    def last3(r):
        return statistics.mean(p["accuracy"] for p in r["curve"][-3:]) * 100
    dense_last3 = statistics.mean(last3(r) for r in dense) if dense else None
    lines = ["| method | seeds | final test accuracy (mean ± spread) | vs dense (points) | "
             "last 3 evaluations (mean; vs dense) | "
             "bytes sent / rank / iter, whole run | after warm-up (rank 0 iface) | s / epoch | "
             "train s to dense's final acc | to dense's − 1 pt |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for m in order:
        rs = runs[m]
        accs = [r["final_accuracy"] * 100 for r in rs]
        mean = statistics.mean(accs)
        spread = (max(accs) - min(accs)) / 2
        b, src = wire_bytes(rs[0])
        b = statistics.mean(wire_bytes(r)[0] for r in rs) if b is not None else None
        spe = statistics.mean(r["s_per_epoch"] for r in rs)
        def reach(goal):
            if goal is None:
                return ""
            times = []
            for r in rs:
                hit = [p["train_s"] for p in r["curve"] if p["accuracy"] >= goal]
                times.append(hit[0] if hit else None)
            return ("not reached" if any(t is None for t in times) else
                    f"{statistics.mean(times):.1f} s")
        vs = f"{mean - dense_final * 100:+.2f}" if dense_final is not None else ""
        whole = f"{b / 1e3:.1f} kB ({src})" if b is not None else "n/a"
        steady = [r.get("steady_iface_bytes_sent_per_iter") for r in rs]
        steady = (f"{statistics.mean(steady) / 1e3:.1f} kB" if all(x is not None for x in steady)
                  else "n/a")
        l3 = statistics.mean(last3(r) for r in rs)
        l3_vs = f"; {l3 - dense_last3:+.2f}" if dense_last3 is not None else ""
        lines.append(f"| {rs[0]['label']} | {len(rs)} | {mean:.2f} ± {spread:.2f} % | {vs} | "
                     f"{l3:.2f} %{l3_vs} | "
                     f"{whole} | {steady} | {spe:.1f} | {reach(dense_final)} | {reach(target)} |")
    first = next(iter(runs.values()))[0]
    head = (f"{first['world_size']} ranks, {first['network'] if 'network' in first else ''}, "
            f"{first['iterations']} iterations ({first['iterations'] / first['iterations_per_epoch']:.2f}"
            f" epochs) of batch {first['batch_per_rank']}/rank, lr {first['lr']} "
            f"({first.get('lr_schedule', 'constant')}), {first['params']} parameters, "
            f"torch {first['torch']}")
    text = head + "\n\n" + "\n".join(lines) + "\n"
    text += data_cache_table(runs, order)
    for m in order:
        for r in runs[m]:
            if "auto_report" in r:
                text += f"\nauto mode (seed {r['seed']}):\n```\n{r['auto_report']}\n```\n"
                break
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no curves (apt-get install python3-matplotlib)")
        return 0
    for xkey, xlabel, fname in (("iteration", "iteration", "accuracy_vs_iteration.png"),
                                ("train_s", "training wall clock (s)", "accuracy_vs_time.png")):
        fig, ax = plt.subplots(figsize=(8, 5))
        for m in order:
            r = runs[m][0]  # first seed's curve
            ax.plot([p[xkey] for p in r["curve"]], [p["accuracy"] * 100 for p in r["curve"]],
                    label=r["label"], marker=".")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"Fashion-MNIST, {head.split(',')[0]} ({first.get('network', '')})",
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, fname), dpi=110)
        plt.close(fig)
    print(f"curves: {args.out}/accuracy_vs_iteration.png, {args.out}/accuracy_vs_time.png")
    return 0


# ---------------------------------------------------------------- main
def add_training_flags(p):
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--iters", type=int, default=0, help="overrides --epochs when > 0")
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--lr_schedule", choices=("constant", "cosine"), default="cosine",
                   help="cosine: decay to 0 over the run; constant: the fixed rate of the "
                        "2-epoch table in docs/python.md")
    p.add_argument("--warmup", type=int, default=20, help="dense warm-up iterations")
    p.add_argument("--hook_defaults", type=int, default=0,
                   help="1: gradwire runs use GradwireState(spec, optimizer=opt), the library's "
                        "defaults (its warm-up and momentum-correction choice) instead of "
                        "--warmup and the *_mc methods' explicit settings")
    p.add_argument("--eval_every", type=int, default=100)
    p.add_argument("--test_samples", type=int, default=10000)
    p.add_argument("--bucket_cap_mb", type=float, default=25.0)
    # Smaller than the ~27 MB a rank touches in 3 epochs, so the disk tier
    # serves part of the reads too; the report shows hits per tier.
    p.add_argument("--cache_memory_mb", type=float, default=16.0,
                   help="per rank's data cache memory tier (0: none)")
    p.add_argument("--cache_disk_mb", type=float, default=256.0,
                   help="per rank's disk tier in a temp dir (0: none)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rank")
    r.add_argument("--method", choices=list(METHODS), required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json_out", required=True)
    r.add_argument("--data_dir", required=True, help="packed Fashion-MNIST (prepare)")
    add_training_flags(r)
    pr = sub.add_parser("prepare")
    pr.add_argument("--data_dir", required=True)
    pr.add_argument("--idx_dir", default=DATA_DIR)
    pr.add_argument("--check_samples", type=int, default=1000,
                    help="random indices per split compared with the IDX files")
    for name in ("run", "all"):
        p = sub.add_parser(name)
        p.add_argument("--out", required=True)
        p.add_argument("--nproc", type=int, default=4)
        p.add_argument("--python", default="/usr/bin/python3")
        p.add_argument("--timeout", type=float, default=3600)
        p.add_argument("--emulate", action="store_true", help="one emulated host per rank")
        p.add_argument("--link", default="1gbit")
        p.add_argument("--delay", default="0us", help="needs sch_netem in the kernel")
        p.add_argument("--data_dir", default="",
                       help="packed Fashion-MNIST (default OUT/fashion-mnist-packed; packed once)")
        p.add_argument("--idx_dir", default=DATA_DIR, help="Fashion-MNIST IDX files to pack")
        add_training_flags(p)
        if name == "run":
            p.add_argument("--method", choices=list(METHODS), required=True)
            p.add_argument("--seed", type=int, default=0)
        else:
            p.add_argument("--methods", default=",".join(DEFAULT_METHODS))
            p.add_argument("--seeds", default="0,1,2")
    rep = sub.add_parser("report")
    rep.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    if args.cmd == "rank":
        return rank_main(args)
    if args.cmd == "prepare":
        return prepare_main(args)
    if args.cmd == "report":
        return report(args)
    args.data_dir = os.path.abspath(args.data_dir or os.path.join(args.out, "fashion-mnist-packed"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "lib", "python") + os.pathsep + env.get("PYTHONPATH", "")
    rc = subprocess.call([args.python, os.path.abspath(__file__), "prepare", "--data_dir",
                          args.data_dir, "--idx_dir", args.idx_dir], env=env)
    if rc != 0:
        print(f"[convergence] preparing the data failed (status {rc})", flush=True)
        return 1
    cluster = None
    if args.emulate:
        sys.path.insert(0, HERE)
        import emulated_cluster
        cluster = emulated_cluster.EmulatedCluster(args.nproc, link=args.link, delay=args.delay,
                                                   subnet="10.252.0.0/16")
        cluster.__enter__()
        print(f"[convergence] {cluster.describe()}", flush=True)
    try:
        if args.cmd == "run":
            return 0 if run_one(args, args.method, args.seed, cluster) else 1
        methods = [m for m in args.methods.split(",") if m]
        for m in methods:
            if m not in METHODS:
                parser.error(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
        failed = 0
        for seed in [int(s) for s in args.seeds.split(",")]:
            for m in methods:
                failed += run_one(args, m, seed, cluster) is None
        report(args)
        return 1 if failed else 0
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)


if __name__ == "__main__":
    sys.exit(main())
