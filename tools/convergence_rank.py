"""One rank of tools/convergence.py (its `rank` and `prepare` commands): the
Fashion-MNIST CNN trained with one gradient exchange, the data read through
gradwire's DataCache. Run by convergence.py, one process per rank."""

import math
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA_DIR = "/usr/share/datasets/fashion-mnist"

# name -> (label, kind, setting): the gradwire kinds' setting is a spec string.
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
    # The sparse allreduce (Ok-Topk style, lib/comm/sparse_allreduce.h)
    # forced for every compressed bucket instead of the cost model's pick.
    "topk1_sar": ("top-k 1 % + EF, sparse allreduce", "gradwire", "topk:ratio=0.01"),
    "topk0.1_sar": ("top-k 0.1 % + EF, sparse allreduce", "gradwire", "topk:ratio=0.001"),
    # The 16-bit casts through the cast allreduce (lib/comm/cast_allreduce.h),
    # forced: its owners round the averages to 16 bits and keep the
    # rounding in their error feedback. (The cost model picks it too for
    # this model's buckets since Communicator::DenseRides; before, their
    # small dense part tied them to the allgather.)
    "fp16": ("fp16 + EF, cast allreduce", "gradwire", "fp16"),
    "bf16": ("bf16 + EF, cast allreduce", "gradwire", "bf16"),
    "powersgd2": ("PyTorch PowerSGD rank 2", "powersgd", 2),
    "auto": ("gradwire auto", "gradwire", "auto"),
}
# GradwireState(exchange=) per method; the others: "auto" (the cost model).
EXCHANGE = {"topk1_sar": "sparse_allreduce", "topk0.1_sar": "sparse_allreduce",
            "fp16": "cast_allreduce", "bf16": "cast_allreduce"}
MOMENTUM, WEIGHT_DECAY = 0.9, 5e-4  # every run's SGD


def gradwire_data():
    sys.path.insert(0, os.path.join(ROOT, "lib", "python"))
    import gradwire.data
    return gradwire.data


# ---------------------------------------------------------------- prepare
def _pack_once(data, args):
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


def prepare_main(args):
    """Packs the IDX files into args.data_dir once (kept if a valid pack is there), then
    checks that what the cache serves, decoded and normalized as the ranks do, equals
    the IDX files' images and labels for a sample of indices of both splits."""
    import numpy as np
    data = gradwire_data()
    _pack_once(data, args)
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
def make_net(nn, F):
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
    return Net()


def tx_bytes():
    """Inside an emulated host (ip netns exec remounts /sys), this rank's
    interface counter: everything it sent, headers included."""
    try:
        with open("/sys/class/net/eth0/statistics/tx_bytes") as f:
            return int(f.read())
    except OSError:
        return None


def serialized_powersgd_hook(powerSGD_hook):
    """One bucket's PowerSGD at a time. Its stages issue allreduces from the
    gloo process group's completion callbacks; with two buckets in flight the
    ranks issued them in different orders and Gloo aborted ("op.preamble.length
    <= op.nbytes. 268 vs 48"), so each bucket waits for the previous bucket's
    future first."""
    last = [None]

    def hook(st, bucket):
        if last[0] is not None and not bucket.index() == 0:
            last[0].wait()
        last[0] = powerSGD_hook.powerSGD_hook(st, bucket)
        return last[0]
    return hook


class RankRun:
    """One rank's training run: data, model, exchange, loop, result."""

    def __init__(self, args):
        import datetime

        import torch
        import torch.distributed as dist
        self.torch, self.dist, self.args = torch, dist, args
        torch.set_num_threads(1)
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.label, self.kind, self.setting = METHODS[args.method]
        dist.init_process_group("gloo", rank=self.rank, world_size=self.world,
                                timeout=datetime.timedelta(seconds=300))
        self.state = None

    def open_data(self):
        """Training examples through gradwire's DataCache (a memory tier, then a
        disk tier in this rank's own temp dir, then the packed directory); the
        test set read once, in full, straight from the source."""
        import numpy as np
        a, torch = self.args, self.torch
        self.data = data = gradwire_data()
        self.cache_dir = tempfile.mkdtemp(prefix=f"gradwire-conv-cache-r{self.rank}-")
        # disk_sync off: a scratch cache that dies with the run need not survive a crash.
        self.train = data.FashionMnist.open(
            "train", path=a.data_dir, memory_budget_bytes=int(a.cache_memory_mb * 2**20),
            disk_dir=self.cache_dir if a.cache_disk_mb > 0 else "",
            disk_budget_bytes=int(a.cache_disk_mb * 2**20), disk_sync=False)
        test = data.FashionMnist.open("test", path=a.data_dir)
        self.n_test = min(a.test_samples, len(test))
        xte, yte = test.read(range(self.n_test))
        self.xte = torch.from_numpy(data.normalize(xte))
        self.yte = torch.from_numpy(yte.astype(np.int64))

    def build_model(self):
        """The net under DDP with the method's exchange, and its SGD."""
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.nn.parallel import DistributedDataParallel as DDP
        a, torch = self.args, self.torch
        torch.manual_seed(a.seed)
        self.F = F
        self.model = make_net(nn, F)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.ddp = DDP(self.model, bucket_cap_mb=a.bucket_cap_mb)
        if a.method.endswith("_mc"):  # the hook applies momentum and weight decay
            self.opt = torch.optim.SGD(self.ddp.parameters(), lr=a.lr)
        else:
            self.opt = torch.optim.SGD(self.ddp.parameters(), lr=a.lr, momentum=MOMENTUM,
                                       weight_decay=WEIGHT_DECAY)
        if self.kind == "gradwire":
            import gradwire.ddp
            exchange = EXCHANGE.get(a.method, "auto")
            if a.hook_defaults:
                # The library's defaults for everything but the spec (its
                # warm-up; momentum correction as it decides from the optimizer).
                self.state = gradwire.ddp.GradwireState(self.setting, optimizer=self.opt,
                                                        exchange=exchange)
            else:
                extra = ({"momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY}
                         if a.method.endswith("_mc") else {})
                self.state = gradwire.ddp.GradwireState(self.setting, warmup_iters=a.warmup,
                                                        exchange=exchange, **extra)
            self.ddp.register_comm_hook(self.state, gradwire.ddp.hook)
        elif self.kind == "powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
            ps = powerSGD_hook.PowerSGDState(
                process_group=None, matrix_approximation_rank=self.setting,
                start_powerSGD_iter=max(2, a.warmup), use_error_feedback=True, warm_start=True,
                random_seed=a.seed)
            self.ddp.register_comm_hook(ps, serialized_powersgd_hook(powerSGD_hook))

    def evaluate(self):
        """(accuracy, mean loss) on the test samples, every rank a share."""
        torch, F, model, n = self.torch, self.F, self.model, self.n_test
        model.eval()
        correct = torch.zeros(2)
        with torch.no_grad():
            for s in range(self.rank * 500, n, self.world * 500):
                out = model(self.xte[s:s + 500])
                correct[0] += (out.argmax(1) == self.yte[s:s + 500]).sum()
                correct[1] += F.cross_entropy(out, self.yte[s:s + 500], reduction="sum")
        self.dist.all_reduce(correct)
        model.train()
        return float(correct[0]) / n, float(correct[1]) / n

    def batch(self, it, batches):
        """Iteration it's batch (and the epoch's iterator, new at each epoch start)."""
        import numpy as np
        a, torch, train = self.args, self.torch, self.train
        epoch, pos = divmod(it, self.per_epoch)
        if pos == 0:
            # Prefetched by the cache in this order: batch pos is order[pos*B:(pos+1)*B].
            # sticky: this rank's shard, the same every epoch, so its own tiers
            # serve every epoch after the first; reshuffle: the order of the runs
            # before issue 18 (torch.randperm over the whole set, DistributedSampler's).
            if a.data_order == "sticky":
                order = train.epoch_indices(a.seed, epoch + 1, self.rank, self.world)
            else:
                g = torch.Generator().manual_seed(a.seed * 1000 + epoch)
                order = torch.randperm(len(train), generator=g)[self.rank::self.world].tolist()
            train.cache.begin_epoch(epoch + 1)
            if batches is not None:
                batches.close()
            batches = train.batches(order[:self.per_epoch * a.batch], a.batch)
        images, labels = next(batches)
        xb = torch.from_numpy(self.data.normalize(images))
        return xb, torch.from_numpy(labels.astype(np.int64)), batches

    def step(self, it, xb, yb):
        if self.args.lr_schedule == "cosine":
            # Cosine decay to 0 over the run (per iteration): the final
            # evaluation then measures a settled model, not wherever a
            # constant learning rate left it.
            for group in self.opt.param_groups:
                group["lr"] = self.args.lr * 0.5 * (1 + math.cos(math.pi * it / self.iters))
        self.opt.zero_grad()
        loss = self.F.cross_entropy(self.ddp(xb), yb)
        loss.backward()
        self.opt.step()
        return loss

    def train_loop(self):
        a = self.args
        self.per_epoch = len(self.train) // (a.batch * self.world)
        self.iters = a.iters or int(a.epochs * self.per_epoch)
        self.curve, self.train_s, self.data_s, self.tx_at_warmup = [], 0.0, 0.0, None
        batches = None
        self.dist.barrier()
        for it in range(self.iters):
            t_data = time.perf_counter()
            xb, yb, batches = self.batch(it, batches)
            self.data_s += time.perf_counter() - t_data
            if it == a.warmup:
                self.tx_at_warmup = tx_bytes()
            t0 = time.perf_counter()
            loss = self.step(it, xb, yb)
            self.train_s += time.perf_counter() - t0
            if (it + 1) % a.eval_every == 0 or it + 1 == self.iters:
                acc, test_loss = self.evaluate()
                self.curve.append({"iteration": it + 1, "train_s": self.train_s,
                                   "accuracy": acc, "test_loss": test_loss,
                                   "train_loss": float(loss)})
                if self.rank == 0:
                    print(f"{a.method} seed {a.seed}: iter {it + 1}/{self.iters} "
                          f"{self.train_s:.1f}s acc {acc:.4f} loss {test_loss:.4f}", flush=True)
        batches.close()
        self.train.cache.end_epoch()

    def cache_summaries(self):
        """Every rank's DataCache statistics (a collective)."""
        summary = self.data.summarize_stats(self.train.cache.stats())
        summary["data_s"] = self.data_s
        per_rank = [None] * self.world
        self.dist.all_gather_object(per_rank, summary)
        shutil.rmtree(self.cache_dir, ignore_errors=True)
        return per_rank

    def result(self, per_rank):
        """Rank 0's run.json."""
        a, it = self.args, self.iters
        r = {"method": a.method, "label": self.label, "seed": a.seed, "world_size": self.world,
             "iterations": it, "iterations_per_epoch": self.per_epoch, "params": self.n_params,
             "batch_per_rank": a.batch, "lr": a.lr, "lr_schedule": a.lr_schedule,
             "warmup": self.state.warmup_iters if self.state is not None else a.warmup,
             "hook_defaults": bool(a.hook_defaults),
             "momentum_correction": bool(self.state is not None and self.state.momentum > 0),
             "curve": self.curve,
             "final_accuracy": self.curve[-1]["accuracy"], "train_s": self.train_s,
             "s_per_epoch": self.train_s / it * self.per_epoch,
             "torch": self.torch.__version__,
             "data_cache": {"source": self.train.cache.source,
                            "version": self.train.cache.version,
                            "memory_budget_bytes": int(a.cache_memory_mb * 2**20),
                            "disk_budget_bytes": int(a.cache_disk_mb * 2**20),
                            "order": a.data_order, "ranks": per_rank,
                            "total": {k: sum(p[k] for p in per_rank) for k in per_rank[0]
                                      if k != "epochs"}}}
        if self.state is not None:
            t = self.state.totals()
            r["gradwire_bytes_sent_per_iter"] = t["bytes_sent"] / it
            r["gradwire_bytes_received_per_iter"] = t["bytes_received"] / it
            r["gradwire_totals"] = t
            r["exchange"] = self.state.exchange
            r["bucket_exchanges"] = {str(i): e for i, e in self.state.bucket_exchanges.items()}
            print(self.state.exchange_report, flush=True)
            if self.state.auto:
                r["auto_report"] = self.state.auto_report
                print(self.state.auto_report, flush=True)
        tx_end = tx_bytes()
        if self.tx_at_warmup is not None and tx_end is not None and it > a.warmup:
            # After the dense warm-up: what the method itself costs per step.
            r["steady_iface_bytes_sent_per_iter"] = (tx_end - self.tx_at_warmup) / (it - a.warmup)
        if self.kind == "ddp":
            p = self.world
            r["analytic_bytes_sent_per_iter"] = 2 * (p - 1) / p * 4 * self.n_params
        return r


def rank_main(args):
    from gwtools.results import write_json
    run = RankRun(args)
    run.open_data()
    run.build_model()
    run.train_loop()
    per_rank = run.cache_summaries()
    if run.rank == 0:
        write_json(args.json_out, run.result(per_rank), indent=1)
    if run.state is not None:
        run.state.close()
    run.dist.barrier()
    sys.stdout.flush()
    os._exit(0)  # Debian's torch can abort in process-group teardown
