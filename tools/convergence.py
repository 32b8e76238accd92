#!/usr/bin/env python3
"""Convergence experiment: a small CNN on Fashion-MNIST, 4 data-parallel ranks,
dense allreduce vs gradwire's compressed exchanges vs PyTorch's PowerSGD.

    convergence.py all --out DIR [--seeds 0,1,2] [--epochs 3] [--emulate --link 1gbit]
    convergence.py run --method topk1 --seed 0 --out DIR ...   (one run)
    convergence.py report --out DIR                             (table + PNG curves)
    convergence.py prepare --data_dir DIR                      (pack + check the data)
    convergence.py rank ...                                      (one rank; internal)

The rank and data preparation live in tools/convergence_rank.py, the report
in tools/convergence_report.py.

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
Prefetcher reads ahead in the epoch's order. By default (--data_order sticky)
each rank keeps one shard of the training set for the whole run, reshuffled
within each epoch, so its own tiers serve every epoch after the first;
--data_order reshuffle is the torch.randperm order of the runs before
(DistributedSampler's: the set reshuffled across the ranks each epoch, which
per-rank tiers serve only 25 % of epoch 2 and 44 % of epoch 3, issue 18).
The test set is read once from the packed directory. Each run's JSON holds
the cache statistics per rank and epoch (reads, memory/disk hits, reads and
bytes from the source, time spent reading) and table.md sums them per method. The source is the directory
even with --emulate (the namespaces share the file system): a data server
on rank 0's host would put the dataset on the same shaped links whose
interface counters measure the gradient exchange.
--emulate runs each rank in its own network namespace of an emulated
cluster (tools/emulated_cluster.py, its own lock-owned "gwc<token>-*" namespaces, links shaped to
--link); otherwise ranks share loopback. Run with Debian's /usr/bin/python3
(python3-torch) after `bazel build //lib/python:_gradwire.so //lib/python:_gradwire_data.so`.
"""
import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from convergence_rank import DATA_DIR, METHODS, prepare_main, rank_main  # noqa: E402
from convergence_report import report  # noqa: E402
from gwtools import ports, ranks, results  # noqa: E402

# Every method but the 16-bit casts (--methods fp16,bf16 adds them), so the
# default experiment keeps its length.
DEFAULT_METHODS = [m for m in METHODS if m not in ("fp16", "bf16")]
TRAINING_FLAGS = ("epochs", "iters", "batch", "lr", "lr_schedule", "warmup", "eval_every",
                  "test_samples", "bucket_cap_mb", "cache_memory_mb", "cache_disk_mb",
                  "data_order", "hook_defaults")


# ---------------------------------------------------------------- one run
def iface_tx_bytes(cluster, hosts):
    total = 0
    for h in range(hosts):
        out = subprocess.run(cluster.command(h, ["cat", "/sys/class/net/eth0/statistics/tx_bytes"]),
                             capture_output=True, text=True)
        total += int(out.stdout.strip() or 0)
    return total


def rank_env(args, rank, job_id, store, port, cluster):
    """torchrun's variables and gradwire's rendezvous: one emulated host per
    rank, or every rank on loopback as one node."""
    emulated = cluster is not None
    env = ranks.torchrun_env(os.environ, rank, args.nproc, 1 if emulated else args.nproc,
                             MASTER_ADDR=cluster.address(0) if emulated else "127.0.0.1",
                             MASTER_PORT=port, GRADWIRE_STORE_DIR=store, GRADWIRE_JOB_ID=job_id)
    env["PYTHONPATH"] = os.path.join(ROOT, "lib", "python") + os.pathsep + env.get("PYTHONPATH", "")
    if emulated:
        env.update({"GLOO_SOCKET_IFNAME": "eth0", "GRADWIRE_IFACE": "eth0"})
    return env


def run_ranks(args, method, seed, rank_cmd, cluster):
    """The run's ranks, output forwarded; returns the supervision's Outcome."""
    store = tempfile.mkdtemp(prefix="gradwire-conv-")
    port = 29500 + (os.getpid() % 1000) if cluster is not None else ports.free_port()
    job_id = f"conv-{method}-{seed}-{secrets.token_hex(3)}"
    group = ranks.RankGroup(f"{method} seed {seed}", forward=sys.stdout,
                            wrap=cluster.command if cluster is not None else None)
    secret = secrets.token_hex(16)
    try:
        for r in range(args.nproc):
            env = rank_env(args, r, job_id, store, port, cluster)
            env.setdefault("GRADWIRE_JOB_SECRET", secret)
            group.start(r, rank_cmd, env, host=r)
        return group.supervise(args.timeout, linger_s=10, grace_s=3)
    finally:
        group.stop(0)
        shutil.rmtree(store, ignore_errors=True)


def run_one(args, method, seed, cluster=None):
    """One method x seed; returns its result (run.json) or None if it failed."""
    os.makedirs(args.out, exist_ok=True)
    json_out = os.path.join(args.out, f"{method}.seed{seed}.json")
    rank_cmd = [args.python, os.path.abspath(__file__), "rank", "--method", method,
                "--seed", str(seed), "--json_out", json_out, "--data_dir", args.data_dir]
    for flag in TRAINING_FLAGS:
        rank_cmd += [f"--{flag}", str(getattr(args, flag))]
    t0 = time.time()
    tx0 = iface_tx_bytes(cluster, args.nproc) if cluster is not None else None
    outcome = run_ranks(args, method, seed, rank_cmd, cluster)
    result = results.read_json(json_out) if outcome.ok else None
    if result is None:
        print(f"[convergence] {method} seed {seed} FAILED (status {outcome.exit_status()})\n"
              + outcome.report(), flush=True)
        return None
    result["run_wall_s"] = time.time() - t0
    if cluster is not None:
        tx = iface_tx_bytes(cluster, args.nproc) - tx0
        result["iface_bytes_sent_per_rank_per_iter"] = tx / args.nproc / result["iterations"]
        result["network"] = f"emulated cluster, {args.nproc} hosts, {args.link} links"
    else:
        result["network"] = "loopback"
    results.write_json(json_out, result, indent=1)
    return result


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
    # A rank's shard is 11.8 MB (15,000 examples); with --data_order reshuffle a
    # rank touches ~27 MB in 3 epochs, more than memory, so the disk tier
    # serves part of the reads too; the report shows hits per tier and epoch.
    p.add_argument("--cache_memory_mb", type=float, default=16.0,
                   help="per rank's data cache memory tier (0: none)")
    p.add_argument("--cache_disk_mb", type=float, default=256.0,
                   help="per rank's disk tier in a temp dir (0: none)")
    p.add_argument("--data_order", choices=("sticky", "reshuffle"), default="sticky",
                   help="sticky: each rank one shard for the run, reshuffled within each "
                        "epoch; reshuffle: the whole set across the ranks each epoch "
                        "(DistributedSampler's order, the runs before issue 18)")


def build_parser():
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
            p.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                           help="comma-separated experiment names: " + ", ".join(METHODS))
            p.add_argument("--seeds", default="0,1,2")
    rep = sub.add_parser("report")
    rep.add_argument("--out", required=True)
    return parser


def prepare(args):
    """Runs `prepare` with the run's interpreter; True if the data is ready."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "lib", "python") + os.pathsep + env.get("PYTHONPATH", "")
    rc = subprocess.call([args.python, os.path.abspath(__file__), "prepare", "--data_dir",
                          args.data_dir, "--idx_dir", args.idx_dir], env=env)
    if rc != 0:
        print(f"[convergence] preparing the data failed (status {rc})", flush=True)
    return rc == 0


def experiment(args, methods, cluster):
    """`run` (one method and seed) or `all` (every method x seed, then the report)."""
    if args.cmd == "run":
        return 0 if run_one(args, args.method, args.seed, cluster) else 1
    failed = 0
    for seed in [int(s) for s in args.seeds.split(",")]:
        for m in methods:
            failed += run_one(args, m, seed, cluster) is None
    report(args)
    return 1 if failed else 0


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd == "rank":
        return rank_main(args)
    if args.cmd == "prepare":
        return prepare_main(args)
    if args.cmd == "report":
        return report(args)
    methods = [m for m in getattr(args, "methods", "").split(",") if m]
    for m in methods:
        if m not in METHODS:
            parser.error(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    args.data_dir = os.path.abspath(args.data_dir or os.path.join(args.out, "fashion-mnist-packed"))
    if not prepare(args):
        return 1
    if not args.emulate:
        return experiment(args, methods, None)
    import emulated_cluster
    with emulated_cluster.EmulatedCluster(args.nproc, link=args.link, delay=args.delay,
                                          subnet="10.252.0.0/16") as cluster:
        print(f"[convergence] {cluster.describe()}", flush=True)
        return experiment(args, methods, cluster)


if __name__ == "__main__":
    sys.exit(main())
