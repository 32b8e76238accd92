"""Runs the cases of one benchmark: every case's ranks in the emulated hosts
(or on loopback), supervised by gwtools.ranks, then the JSON result file each
rank wrote read back. Nothing here parses what a rank prints."""

import os
import re
import secrets
import statistics
import sys
import time

from clusterbench import TOOLS, BenchError
from clusterbench.cli import PEER_HOOKS
from gwtools import ports, ranks, results

# The one-host figures the planner takes as inputs (compression alone, and
# the run's ranks' CPU per step on loopback, behind the shared-core bound)
# are medians of at least this many steps, whatever --iters is: with
# --iters 3 one disturbed loopback run gave VGG-16 top-k 250 ms of CPU a
# step where its ranks spent 133-166 ms in the run itself, and the bound
# over-predicted that case by 72 % (docs/results/2026-12-01-grid-head.md).
FIGURE_MIN_ITERS = 9
# Compression alone is the median of this many processes' medians: one
# process's median of 9 steps moved 25.7-34.5 ms of CPU between six
# consecutive runs of the same top-k 1 % on the 2-vCPU Zen 3 guest (the
# spread is between processes, not steps), which moved the CPU-floor
# target of two README runs 1.39 <-> 2.24 (docs/results/2026-12-06-zen3-s74.md).
ALONE_RUNS = 3
# The run's ranks' CPU per step on loopback is likewise the median of this
# many runs' (each the mean over ranks of their medians): five consecutive
# runs of BERT-base top-k 1 % on the 2-vCPU Zen 4 guest read 125-161 ms a
# rank-step, where the same ranks spent 113-115 ms in the shaped runs
# (docs/results/2026-12-07-zen4-grid.md).
LOOPBACK_RUNS = 3


class CaseFailed(BenchError):
    """A case's ranks failed. `outcome` (gwtools.ranks.Outcome) says how;
    `addresses` maps the emulated hosts' addresses to their ranks."""

    def __init__(self, label, outcome, addresses=None):
        self.label = label
        self.outcome = outcome
        self.addresses = addresses
        super().__init__(outcome.report(addresses))

    def to_json(self):
        return {"case": self.label, "report": str(self),
                **self.outcome.to_json(self.addresses)}


def host_addresses(cluster, world, per_host):
    """{address of host h: [its ranks]}, or None on loopback (one address)."""
    if cluster is None:
        return None
    return {cluster.address(h): [r for r in range(world) if r // per_host == h]
            for h in range(cluster.hosts)}


class Progress:
    """The "[case/total] text ... N s" lines on stderr (rewritten in place on a tty)."""

    def __init__(self):
        self.case_no = 0
        self.total = 0
        self.tty = sys.stderr.isatty()

    def show(self, text, elapsed=None, final=False):
        line = f"[{self.case_no}/{self.total}] {text}"
        if elapsed is not None:
            line += f" ... {elapsed:.0f} s"
        if self.tty:
            sys.stderr.write("\r\033[K" + line + ("\n" if final else ""))
        elif final or elapsed is None:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def ticker(self, text):
        last = [-1.0]

        def tick(elapsed):
            if self.tty and elapsed - last[0] >= 1.0:
                last[0] = elapsed
                self.show(text, elapsed)
        return tick


class Bench:
    """The run's settings (args), its scratch directory and its job secret."""

    def __init__(self, args, run_dir):
        self.a = args
        self.run_dir = run_dir
        self.secret = secrets.token_hex(32)
        self.progress = Progress()

    def rank_env(self, rank, world, per_host, job):
        base = {k: v for k, v in os.environ.items()
                if not k.startswith("GRADWIRE_") and not k.startswith("OMPI_COMM_WORLD_")}
        store = os.path.join(self.run_dir, "store-" + job)
        os.makedirs(store, exist_ok=True)
        return ranks.torchrun_env(base, rank, world, per_host, GRADWIRE_JOB_ID=job,
                                  GRADWIRE_STORE_DIR=store, GRADWIRE_JOB_SECRET=self.secret)

    def supervise(self, group, what, cluster, world, per_host, tick=None):
        """Waits for the case's ranks; CaseFailed unless every rank exited 0."""
        outcome = group.supervise(self.a.case_timeout_s, linger_s=self.a.linger_s,
                                  grace_s=1.0, tick=tick)
        if not outcome.ok:
            raise CaseFailed(f"{what} ({group.label})", outcome,
                             host_addresses(cluster, world, per_host))

    def read_results(self, label, paths):
        """Every rank's result file, each "ok"; BenchError naming what is missing."""
        out = []
        for rank, path in enumerate(paths):
            res = results.read_json(path)
            if res is None:
                raise BenchError(f"{label}: rank {rank} exited 0 but wrote no result ({path})")
            if not res.get("ok", False):
                raise BenchError(f"{label}: rank {rank} reports: {res.get('error')}")
            out.append(res)
        return out

    def _group(self, name, cluster=None):
        return ranks.RankGroup(name, log_dir=self.run_dir,
                               wrap=cluster.command if cluster is not None else None)

    # -- gradwire ----------------------------------------------------------
    def exchange_argv(self, profile_file, m, flat=False, min_iters=1):
        """exchange_bench's command line for method `m` with this run's
        settings; `flat` drops --hierarchical (the one-host measurements);
        at least `min_iters` timed steps."""
        a = self.a
        argv = [a.exchange_bench, f"--profile_file={profile_file}",
                f"--iters={max(a.iters, min_iters)}",
                f"--warmup={a.warmup}", f"--bucket_size_mb={a.bucket_size_mb}",
                f"--timeout_ms={a.timeout_ms}",
                f"--bucket_views={'true' if a.bucket_views else 'false'}",
                f"--event_loop_nice={a.event_loop_nice}", f"--spec={m['spec_text']}"]
        if a.pipeline_depth:
            argv.append(f"--pipeline_depth={a.pipeline_depth}")
        if m["hierarchical"] and not flat:
            argv.append("--hierarchical")
        return argv

    def run_exchange(self, name, what, cluster, argv, world, per_host, tick=None):
        """exchange_bench on `world` ranks (per_host per emulated host, or all on
        loopback); returns every rank's result."""
        paths = [os.path.join(self.run_dir, f"{name}.rank{r}.json") for r in range(world)]
        job = f"{name}-{secrets.token_hex(3)}"
        group = self._group(name, cluster)
        extra = [f"--json_out={os.path.join(self.run_dir, name)}.rank{{rank}}.json"]
        if cluster is not None:
            extra.append(f"--iface={self.a.iface}")
        elif per_host < world:
            extra.append("--emulate_nodes")
        for rank in range(world):
            group.start(rank, argv + extra, self.rank_env(rank, world, per_host, job),
                        host=rank // per_host)
        self.supervise(group, what, cluster, world, per_host, tick)
        return self.read_results(f"{what} ({name})", paths)

    def run_gradwire(self, cluster, profile_file, m, label):
        """One gradwire case on the run's ranks; returns every rank's result."""
        a = self.a
        self.progress.case_no += 1
        text = f"{label} gradwire {m['name']} P={a.world}"
        self.progress.show(text)
        t0 = time.monotonic()
        argv = self.exchange_argv(profile_file, m)
        if a.timeline_dir:
            os.makedirs(a.timeline_dir, exist_ok=True)
            stem = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{label}-{m['name']}")
            argv.append(f"--timeline_out={os.path.join(a.timeline_dir, stem)}.rank{{rank}}.json")
        res = self.run_exchange(f"case{self.progress.case_no}", text, cluster, argv, a.world,
                                a.ranks_per_host, self.progress.ticker(text))
        self.progress.show(text + f": {res[0]['iter_ms']['median']:.1f} ms/iter "
                           f"({time.monotonic() - t0:.0f} s)", final=True)
        return res

    def compression_alone(self, profile_file, m):
        """One rank, loopback, machine to itself: the codec's own time (ms per
        step, auth included) and the process CPU that step took (ms), each
        the median over ALONE_RUNS processes."""
        ms, cpu = [], []
        for _ in range(ALONE_RUNS):
            res = self.run_exchange(f"alone-{secrets.token_hex(3)}", f"{m['spec_text']} alone",
                                    None, self.exchange_argv(profile_file, m, flat=True,
                                                             min_iters=FIGURE_MIN_ITERS), 1, 1)[0]
            ms.append(res["compress_ms_median"] + res.get("auth_ms_median", 0.0))
            cpu.append(res.get("process_cpu_ms_median"))
        return (statistics.median(ms),
                statistics.median(cpu) if all(c is not None for c in cpu) else None)

    def exchange_cpu_loopback(self, profile_file, m, hierarchical=False):
        """The run's ranks on loopback, no link shaping, sharing this machine's
        cores as the run's ranks do: the process CPU (all threads, user +
        system) of one rank's step, median per rank, averaged over ranks.
        It is the CPU cost of the exchange itself (codec, decode of every
        peer's frame, MACs, the kernel's TCP work, thread hand-offs; for a
        hierarchical exchange, its nodes emulated on loopback, the
        intra-node dense phases too); the planner's shared-core bound is
        world / cores x this. The median over LOOPBACK_RUNS runs; None if
        any rank of any run reported no CPU."""
        world = self.a.world
        per_host = self.a.ranks_per_host if hierarchical else world
        per_run = []
        for _ in range(LOOPBACK_RUNS):
            res = self.run_exchange(f"cpu-{secrets.token_hex(3)}",
                                    f"{m['spec_text']} on loopback (CPU per rank-step)", None,
                                    self.exchange_argv(profile_file, m, flat=not hierarchical,
                                                       min_iters=FIGURE_MIN_ITERS),
                                    world, per_host)
            cpu = [r.get("process_cpu_ms_median") for r in res]
            if not cpu or any(c is None for c in cpu):
                return None
            per_run.append(sum(cpu) / len(cpu))
        return statistics.median(per_run)

    # -- transport only ----------------------------------------------------
    def run_transport(self, cluster, n, label):
        """bench/transport/transport_bench on the cluster, one rank per host:
        dense ring vs the sparse allgather alone (no codec) and allgatherv
        throughput on large payloads. Returns rank 0's JSON."""
        a = self.a
        self.progress.case_no += 1
        name = f"case{self.progress.case_no}"
        text = f"{label} transport_bench (no codec) P={a.hosts}"
        self.progress.show(text)
        job = f"tb{self.progress.case_no}-{secrets.token_hex(3)}"
        group = self._group(name, cluster)
        path = os.path.join(self.run_dir, f"{name}.json")
        for rank in range(a.hosts):
            env = self.rank_env(rank, a.hosts, 1, job)
            if cluster is not None:
                env["GRADWIRE_IFACE"] = a.iface
            argv = [a.transport_bench, f"n={n}", f"reps={a.transport_reps}"]
            group.start(rank, argv + ([f"json_out={path}"] if rank == 0 else []), env, host=rank)
        t0 = time.monotonic()
        self.supervise(group, text, cluster, a.hosts, 1, self.progress.ticker(text))
        res = results.read_json(path)
        if res is None:
            raise BenchError(f"{name}: transport_bench rank 0 wrote no result ({path})")
        self.progress.show(text + f": {len(res['rows'])} figures "
                           f"({time.monotonic() - t0:.0f} s)", final=True)
        return res

    # -- PyTorch DDP -------------------------------------------------------
    def ddp_argv(self, profile_args, peer):
        a = self.a
        hook, rank_r = PEER_HOOKS[peer]
        argv = [a.python, os.path.join(TOOLS, "ddp_peer.py"), *profile_args,
                f"--hook={hook}", f"--iters={a.iters}", f"--warmup={a.warmup}",
                f"--bucket_cap_mb={a.bucket_size_mb}", f"--bucket_view={a.bucket_views}",
                f"--timeout_s={a.timeout_ms / 1000.0}"]
        return argv + ([f"--powersgd_rank={rank_r}"] if rank_r is not None else [])

    def run_ddp(self, cluster, profile_args, peer, label):
        """One DDP peer case; returns rank 0's result (the job's figures)."""
        a = self.a
        self.progress.case_no += 1
        name = f"case{self.progress.case_no}"
        text = f"{label} pytorch_ddp {peer} P={a.world}"
        self.progress.show(text)
        group = self._group(name, cluster)
        port = 29500 + (self.progress.case_no % 500) if cluster is not None else ports.free_port()
        paths = [os.path.join(self.run_dir, f"{name}.rank{r}.json") for r in range(a.world)]
        for rank in range(a.world):
            env = self.rank_env(rank, a.world, a.ranks_per_host, "ddp")
            env.update({"MASTER_ADDR": cluster.address(0) if cluster is not None else "127.0.0.1",
                        "MASTER_PORT": str(port),
                        "GLOO_SOCKET_IFNAME": a.iface if cluster is not None else "lo",
                        "OMP_NUM_THREADS": "1"})
            group.start(rank, self.ddp_argv(profile_args, peer) + [f"--json_out={paths[rank]}"],
                        env, host=rank // a.ranks_per_host)
        t0 = time.monotonic()
        self.supervise(group, text, cluster, a.world, a.ranks_per_host,
                       self.progress.ticker(text))
        res = self.read_results(f"{text} ({name})", paths)[0]
        self.progress.show(text + f": {res['exchange_s_median'] * 1e3:.1f} ms/iter exchange "
                           f"({time.monotonic() - t0:.0f} s)", final=True)
        return res
