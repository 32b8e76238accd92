#!/usr/bin/env python3
"""End-to-end gradient-exchange benchmark on an emulated Ethernet cluster.

For every profile x link rate x method it brings up an emulated cluster
(tools/emulated_cluster.py: one network namespace per host, tbf-shaped veth
links to a switch namespace), starts the ranks of tools/exchange_bench
inside the hosts (one rank per host, or --ranks_per_host ranks sharing a
host's loopback as the GPUs of one node), runs warm-up then timed
iterations, and collects what each rank measured. The PyTorch peers
(tools/ddp_peer.py: DDP's default allreduce, the fp16 hook and PowerSGD
rank 1 and 4) run on the same cluster, same profile, same run.

    /usr/bin/python3 tools/cluster_bench.py                    # README defaults
    /usr/bin/python3 tools/cluster_bench.py --links 1gbit,10gbit \\
        --methods none,topk=0.01,approx_topk=0.001,topk=0.01+hier --ranks_per_host 2

Methods: "none" (dense Gloo ring allreduce), "CODEC[=X][+hier]" where CODEC
is topk, approx_topk, randomk (X = density k/n), qsgd (X = bits), sign,
fp16 or bf16; "+hier" selects the hierarchical (HiTopKComm) exchange.
Peers: none, fp16, powersgd1, powersgd4 (DDP hooks), or "" for no peers.

Outputs: a table on stdout, a progress line per case on stderr, and in
--out_dir a JSON file with every figure and the exact configuration
(machine, date, kernel, netem availability, shaping) and a PNG plot.

Figures, per case (rank 0's medians unless noted):
  iter       exchange time of one iteration: first Submit .. WaitAll
  MB/rank    payload bytes on the host's link per rank per iteration, the
             larger of sent and received (links are shaped in each direction;
             intra-node bytes, on the host's loopback, excluded)
  util       MB/rank x 8 / iter / link rate  (wire: / wire time instead)
  compress   encode + EF + decode-accumulate time inside the run (the
             ranks share this machine's cores); "alone" is the same
             codec's time for one rank with the machine to itself
  floor      max(MB/rank x 8 / link rate, compression time alone)
  speedup    dense iter / iter (and dense wire / wire)
Must run as root for namespaces; otherwise ranks run on loopback and the
results are marked unshaped.
"""

import argparse
import datetime
import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import emulated_cluster  # noqa: E402
import model_profiles  # noqa: E402
import planner  # noqa: E402

CODECS_DENSITY = ("topk", "approx_topk", "randomk")
CODECS_BITS = ("qsgd",)
CODECS_PLAIN = ("sign", "fp16", "bf16")
PEER_HOOKS = {"none": ("none", None), "fp16": ("fp16", None),
              "powersgd1": ("powersgd", 1), "powersgd4": ("powersgd", 4)}
# TCP payload per byte a tbf shaper counts on a 1500-byte MTU Ethernet
# link (1448 B of payload per 1514 B frame with timestamps): the goodput
# ceiling of a shaped link.
TCP_GOODPUT = 1448.0 / 1514.0


class BenchError(RuntimeError):
    pass


# --- methods ---------------------------------------------------------------

def parse_method(text):
    """'topk=0.01+hier' -> dict(name, codec, density, bits, hierarchical)."""
    t = text.strip()
    hier = t.endswith("+hier")
    if hier:
        t = t[: -len("+hier")]
    codec, _, arg = t.partition("=")
    m = {"name": text.strip(), "codec": codec, "density": None, "bits": None,
         "hierarchical": hier}
    if codec == "none":
        if arg or hier:
            raise BenchError(f"method {text!r}: 'none' takes no argument and is never hierarchical")
    elif codec in CODECS_DENSITY:
        try:
            m["density"] = float(arg) if arg else 0.01
        except ValueError:
            raise BenchError(f"method {text!r}: density must be a number in (0, 1]")
        if not 0 < m["density"] <= 1:
            raise BenchError(f"method {text!r}: density must be in (0, 1]")
    elif codec in CODECS_BITS:
        try:
            m["bits"] = int(arg) if arg else 4
        except ValueError:
            raise BenchError(f"method {text!r}: bits must be an integer in [1, 8]")
        if not 1 <= m["bits"] <= 8:
            raise BenchError(f"method {text!r}: bits must be in [1, 8]")
    elif codec in CODECS_PLAIN:
        if arg:
            raise BenchError(f"method {text!r}: {codec} takes no argument")
    else:
        raise BenchError(f"unknown method {text!r}; use none, "
                         f"{'/'.join(CODECS_DENSITY)}=DENSITY, qsgd=BITS, "
                         f"{'/'.join(CODECS_PLAIN)}, each optionally +hier")
    return m


def method_flags(m):
    flags = [f"--compression={m['codec']}"]
    if m["density"] is not None:
        flags.append(f"--compression_ratio={m['density']}")
    if m["bits"] is not None:
        flags.append(f"--quant_bits={m['bits']}")
    if m["hierarchical"]:
        flags.append("--hierarchical")
    return flags


# --- machine description ---------------------------------------------------

def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
    return {
        "hostname": socket.gethostname(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "git_commit": commit + ("-dirty" if dirty else ""),
        "loadavg_start": list(os.getloadavg()),
    }


# --- running ranks ---------------------------------------------------------

class Ranks:
    """Processes of one case, each in its host's namespace (or local)."""

    def __init__(self, cluster, logdir, label):
        self.cluster = cluster
        self.logdir = logdir
        self.label = label
        self.procs = []
        self.logs = []

    def start(self, rank, host, argv, env):
        path = os.path.join(self.logdir, f"{self.label}.rank{rank}.log")
        log = open(path, "w")
        cmd = self.cluster.command(host, argv) if self.cluster is not None else argv
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                             start_new_session=True)
        self.procs.append(p)
        self.logs.append((path, log))

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            p.wait()

    def wait(self, timeout_s, progress):
        """Waits for all ranks; kills the rest when one fails or on timeout."""
        deadline = time.monotonic() + timeout_s
        t0 = time.monotonic()
        try:
            while True:
                codes = [p.poll() for p in self.procs]
                bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
                if bad:
                    self.kill()
                    r, c = bad[0]
                    raise BenchError(f"{self.label}: rank {r} exited with status {c}:\n" +
                                     self.tail(r))
                if all(c == 0 for c in codes):
                    return
                if time.monotonic() > deadline:
                    self.kill()
                    raise BenchError(f"{self.label}: timed out after {timeout_s:.0f} s:\n" +
                                     self.tail(0))
                progress(time.monotonic() - t0)
                time.sleep(0.05)
        except BaseException:
            self.kill()  # Ctrl-C or a signal: no rank outlives the benchmark
            raise
        finally:
            for _, log in self.logs:
                log.close()

    def output(self, rank):
        with open(self.logs[rank][0], errors="replace") as f:
            return f.read()

    def tail(self, rank, lines=15):
        return "\n".join("    " + l for l in self.output(rank).splitlines()[-lines:])


RANK_LINE = re.compile(
    r"rank (\d+): .*iter median ([\d.]+) ms p90 ([\d.]+) ms; per iter sent ([\d.]+) MB "
    r"received ([\d.]+) MB(?: \(of which intra-node [\d.]+ / [\d.]+ MB\))?; "
    r"compress ([\d.]+) ms, auth ([\d.]+) ms, wire ([\d.]+) ms"
    r"(?: \(sync ([\d.]+), transfer ([\d.]+)\))?")


CPU_LINE = re.compile(r"process CPU ([\d.]+) ms per step")

TRANSPORT_LINE = re.compile(r"^(\S.*?)\s{2,}([\d.]+) ms\s+([\d.]+)x dense ring\s*(.*)$")


class Bench:
    def __init__(self, args):
        self.args = args
        self.run_dir = tempfile.mkdtemp(prefix="gradwire-cluster-bench-")
        self.secret = secrets.token_hex(32)
        self.case_no = 0
        self.total_cases = 0
        self.tty = sys.stderr.isatty()

    def progress(self, text, elapsed=None, final=False):
        line = f"[{self.case_no}/{self.total_cases}] {text}"
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
                self.progress(text, elapsed)
        return tick

    def rank_env(self, rank, world, per_host, job):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("GRADWIRE_") or k.startswith("OMPI_COMM_WORLD_"):
                del env[k]
        store = os.path.join(self.run_dir, "store-" + job)
        os.makedirs(store, exist_ok=True)
        env.update({
            "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank % per_host), "LOCAL_WORLD_SIZE": str(per_host),
            "GROUP_RANK": str(rank // per_host),
            "GRADWIRE_JOB_ID": job, "GRADWIRE_STORE_DIR": store,
            "GRADWIRE_JOB_SECRET": self.secret,
        })
        return env

    # -- gradwire ----------------------------------------------------------
    def exchange_argv(self, profile_file, extra, m, flat=False):
        """exchange_bench's command line for method `m` with this run's
        settings; `flat` drops --hierarchical (the one-host measurements)."""
        a = self.args
        argv = [a.exchange_bench, f"--profile_file={profile_file}", f"--iters={a.iters}",
                f"--warmup={a.warmup}", f"--bucket_size_mb={a.bucket_size_mb}",
                f"--timeout_ms={a.timeout_ms}",
                f"--bucket_views={'true' if a.bucket_views else 'false'}",
                f"--event_loop_nice={a.event_loop_nice}"]
        if a.pipeline_depth:
            argv.append(f"--pipeline_depth={a.pipeline_depth}")
        return argv + extra + [f for f in method_flags(m) if not (flat and f == "--hierarchical")]

    def run_gradwire(self, cluster, profile_file, extra, m, world, per_host, label):
        a = self.args
        self.case_no += 1
        job = f"gw{self.case_no}-{secrets.token_hex(3)}"
        json_out = os.path.join(self.run_dir, f"case{self.case_no}.json")
        text = f"{label} gradwire {m['name']} P={world}"
        self.progress(text)
        ranks = Ranks(cluster, self.run_dir, f"case{self.case_no}")
        for rank in range(world):
            argv = self.exchange_argv(profile_file, extra, m)
            if rank == 0:
                argv.append(f"--json_out={json_out}")
            if cluster is not None:
                argv.append(f"--iface={a.iface}")
            elif per_host < world:
                argv.append("--emulate_nodes")
            ranks.start(rank, rank // per_host, argv, self.rank_env(rank, world, per_host, job))
        t0 = time.monotonic()
        ranks.wait(a.case_timeout_s, self.ticker(text))
        with open(json_out) as f:
            res = json.load(f)
        per_rank = []
        for rank in range(world):
            mt = RANK_LINE.search(ranks.output(rank))
            if mt:
                per_rank.append({
                    "rank": int(mt.group(1)), "iter_ms_median": float(mt.group(2)),
                    "iter_ms_p90": float(mt.group(3)),
                    "bytes_sent_per_iter": float(mt.group(4)) * 1e6,
                    "bytes_received_per_iter": float(mt.group(5)) * 1e6,
                    "compress_ms_median": float(mt.group(6)),
                    "auth_ms_median": float(mt.group(7)),
                    "wire_ms_median": float(mt.group(8)),
                    "sync_ms_median": mt.group(9) and float(mt.group(9)),
                    "transfer_ms_median": mt.group(10) and float(mt.group(10))})
        res["per_rank"] = per_rank
        self.progress(text + f": {res['iter_ms']['median']:.1f} ms/iter "
                      f"({time.monotonic() - t0:.0f} s)", final=True)
        return res

    def compression_alone(self, profile_file, extra, m):
        """One rank, loopback, machine to itself: the codec's own time (ms per
        step, auth included) and the process CPU that step took (ms)."""
        a = self.args
        job = f"alone-{secrets.token_hex(3)}"
        json_out = os.path.join(self.run_dir, f"{job}.json")
        ranks = Ranks(None, self.run_dir, job)
        argv = self.exchange_argv(profile_file, extra, m, flat=True) + [f"--json_out={json_out}"]
        ranks.start(0, 0, argv, self.rank_env(0, 1, 1, job))
        ranks.wait(a.case_timeout_s, lambda e: None)
        with open(json_out) as f:
            res = json.load(f)
        return (res["compress_ms_median"] + res.get("auth_ms_median", 0.0),
                res.get("process_cpu_ms_median"))

    def exchange_cpu_loopback(self, profile_file, extra, m, world):
        """`world` ranks on loopback, no link shaping, sharing this machine's
        cores as the run's ranks do: the process CPU (all threads, user +
        system) of one rank's step, median per rank, averaged over ranks.
        It is the CPU cost of the exchange itself (codec, decode of every
        peer's frame, MACs, the kernel's TCP work, thread hand-offs); the
        planner's shared-core bound is world / cores x this."""
        a = self.args
        job = f"cpu-{secrets.token_hex(3)}"
        ranks = Ranks(None, self.run_dir, job)
        for rank in range(world):
            ranks.start(rank, 0, self.exchange_argv(profile_file, extra, m, flat=True),
                        self.rank_env(rank, world, world, job))
        ranks.wait(a.case_timeout_s, lambda e: None)
        cpu = [float(mt.group(1)) for r in range(world)
               for mt in [CPU_LINE.search(ranks.output(r))] if mt]
        return sum(cpu) / len(cpu) if len(cpu) == world else None

    # -- transport only ----------------------------------------------------
    def run_transport(self, cluster, n, hosts, label, link_bps):
        """bench/transport/transport_bench on the cluster, one rank per host:
        dense ring vs the sparse allgather alone (no codec) and allgatherv
        throughput on large payloads."""
        a = self.args
        self.case_no += 1
        job = f"tb{self.case_no}-{secrets.token_hex(3)}"
        text = f"{label} transport_bench (no codec) P={hosts}"
        self.progress(text)
        ranks = Ranks(cluster, self.run_dir, f"case{self.case_no}")
        for rank in range(hosts):
            env = self.rank_env(rank, hosts, 1, job)
            if cluster is not None:
                env["GRADWIRE_IFACE"] = a.iface
            ranks.start(rank, rank, [a.transport_bench, f"n={n}", f"reps={a.transport_reps}"], env)
        t0 = time.monotonic()
        ranks.wait(a.case_timeout_s, self.ticker(text))
        rows = []
        for line in ranks.output(0).splitlines():
            mt = TRANSPORT_LINE.match(line)
            if not mt:
                continue
            row = {"name": mt.group(1).strip(), "ms": float(mt.group(2)),
                   "x_dense_ring": float(mt.group(3)), "note": mt.group(4).strip()}
            mb = re.match(r"allgatherv (\d+) MiB/rank", row["name"])
            if mb:
                row["payload_bytes_per_rank"] = int(mb.group(1)) << 20
                row["bytes_received_per_rank"] = row["payload_bytes_per_rank"] * (hosts - 1)
                if link_bps:
                    row["link_util"] = (row["bytes_received_per_rank"] * 8 /
                                        (row["ms"] / 1e3) / link_bps)
            if row["name"].startswith("sparse allgather") and row["x_dense_ring"] > 0:
                row["wire_speedup_vs_dense_ring"] = 1.0 / row["x_dense_ring"]
            rows.append(row)
        self.progress(text + f": {len(rows)} figures ({time.monotonic() - t0:.0f} s)", final=True)
        return {"n": n, "world_size": hosts, "rows": rows}

    # -- PyTorch DDP -------------------------------------------------------
    def run_ddp(self, cluster, profile_args, peer, world, per_host, label):
        a = self.args
        hook, rank_r = PEER_HOOKS[peer]
        self.case_no += 1
        json_out = os.path.join(self.run_dir, f"case{self.case_no}.json")
        text = f"{label} pytorch_ddp {peer} P={world}"
        self.progress(text)
        ranks = Ranks(cluster, self.run_dir, f"case{self.case_no}")
        port = 29500 + (self.case_no % 500) if cluster is not None else _free_port()
        for rank in range(world):
            argv = [a.python, os.path.join(HERE, "ddp_peer.py"), *profile_args,
                    f"--hook={hook}", f"--iters={a.iters}", f"--warmup={a.warmup}",
                    f"--bucket_cap_mb={a.bucket_size_mb}", f"--bucket_view={a.bucket_views}",
                    f"--timeout_s={a.timeout_ms / 1000.0}"]
            if rank_r is not None:
                argv.append(f"--powersgd_rank={rank_r}")
            if rank == 0:
                argv.append(f"--json_out={json_out}")
            env = self.rank_env(rank, world, per_host, "ddp")
            env.update({"MASTER_ADDR": cluster.address(0) if cluster is not None else "127.0.0.1",
                        "MASTER_PORT": str(port),
                        "GLOO_SOCKET_IFNAME": a.iface if cluster is not None else "lo",
                        "OMP_NUM_THREADS": "1"})
            ranks.start(rank, rank // per_host, argv, env)
        t0 = time.monotonic()
        ranks.wait(a.case_timeout_s, self.ticker(text))
        with open(json_out) as f:
            res = json.load(f)
        self.progress(text + f": {res['exchange_s_median'] * 1e3:.1f} ms/iter exchange "
                      f"({time.monotonic() - t0:.0f} s)", final=True)
        return res


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- figures -----------------------------------------------------------------

def derive(case, link_bps, shaped, dense):
    """Adds utilisation, floor and speedups to one gradwire case."""
    it = case["iter_ms_median"] / 1e3
    wire = case["wire_ms_median"] / 1e3
    b = case["bytes_on_wire_per_rank"]
    if shaped:
        case["link_util"] = b * 8 / it / link_bps if it > 0 else None
        case["wire_util"] = b * 8 / wire / link_bps if wire > 0 else None
        floor_wire = b * 8 / link_bps
        case["floor_wire_ms"] = floor_wire * 1e3
        alone = case.get("compress_alone_ms")
        # The issue's floor: compression measured alone (one rank, machine to
        # itself). With P ranks sharing this machine's cores compression
        # cannot run that fast in the run, so the in-run floor uses the
        # compression time the run measured.
        case["floor_ms"] = max(floor_wire * 1e3, alone if alone is not None else 0.0)
        case["x_floor"] = case["iter_ms_median"] / case["floor_ms"] if case["floor_ms"] else None
        inrun = case.get("compress_ms_median") if case["codec"] != "none" else 0.0
        case["floor_inrun_ms"] = max(floor_wire * 1e3, inrun or 0.0)
        case["x_floor_inrun"] = (case["iter_ms_median"] / case["floor_inrun_ms"]
                                 if case["floor_inrun_ms"] else None)
    if dense is not None:
        case["speedup"] = dense["iter_ms_median"] / case["iter_ms_median"]
        case["wire_speedup"] = (dense["wire_ms_median"] / case["wire_ms_median"]
                                if case["wire_ms_median"] > 0 else None)
        case["wire_speedup_min_rank"] = (dense["wire_ms_min_rank"] / case["wire_ms_min_rank"]
                                         if case.get("wire_ms_min_rank") else None)
        case["transfer_speedup"] = (dense["transfer_ms_median"] / case["transfer_ms_median"]
                                    if dense.get("transfer_ms_median")
                                    and case.get("transfer_ms_median") else None)


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def print_table(results, out=sys.stdout):
    head = (f"{'profile':10s} {'link':7s} {'P':>3s} {'system':8s} {'method':22s} "
            f"{'iter ms':>8s} {'p90 ms':>8s} {'MB/rank':>8s} {'util':>5s} {'w.util':>6s} "
            f"{'compr ms':>8s} {'alone ms':>8s} {'wire ms':>8s} {'wire min':>8s} {'floor ms':>8s} "
            f"{'xfloor':>6s} {'xfl.run':>7s} {'speedup':>7s} {'x best':>7s} {'wire x':>7s} "
            f"{'wmin x':>7s} {'sync ms':>8s} {'xfer x':>7s}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for c in results["cases"]:
        pct = lambda v: None if v is None else 100 * v  # noqa: E731
        print(f"{c['profile']:10s} {c['link']:7s} {c['world_size']:3d} {c['system']:8s} "
              f"{c['method']:22s} {c['iter_ms_median']:8.1f} {fmt(c.get('iter_ms_p90'), '8.1f'):>8s} "
              f"{fmt(c.get('bytes_on_wire_per_rank') and c['bytes_on_wire_per_rank'] / 1e6, '8.2f'):>8s} "
              f"{fmt(pct(c.get('link_util')), '4.0f'):>4s}% {fmt(pct(c.get('wire_util')), '5.0f'):>5s}% "
              f"{fmt(c.get('compress_ms_median'), '8.1f'):>8s} {fmt(c.get('compress_alone_ms'), '8.1f'):>8s} "
              f"{fmt(c.get('wire_ms_median'), '8.1f'):>8s} {fmt(c.get('wire_ms_min_rank'), '8.1f'):>8s} "
              f"{fmt(c.get('floor_ms'), '8.1f'):>8s} "
              f"{fmt(c.get('x_floor'), '6.2f'):>6s} {fmt(c.get('x_floor_inrun'), '7.2f'):>7s} "
              f"{fmt(c.get('speedup'), '6.2f'):>6s}x "
              f"{fmt(c.get('speedup_vs_best_dense'), '6.2f'):>6s}x "
              f"{fmt(c.get('wire_speedup'), '6.1f'):>6s}x "
              f"{fmt(c.get('wire_speedup_min_rank'), '6.1f'):>6s}x "
              f"{fmt(c.get('sync_ms_median'), '8.1f'):>8s} "
              f"{fmt(c.get('transfer_speedup'), '6.1f'):>6s}x", file=out)
    cfg = results["config"]
    print(f"\n{cfg['cluster']}; {cfg['machine']['cores']} cores ({cfg['machine']['cpu']}), "
          f"kernel {cfg['machine']['kernel']}, {cfg['date_utc']}; load average "
          f"{cfg['machine']['loadavg_start'][0]:.1f} at start, "
          f"{cfg['machine']['loadavg_end'][0]:.1f} at end", file=out)
    print("iter = exchange time per iteration (gradwire: first Submit..WaitAll; DDP: iteration "
          "minus the same step without DDP); MB/rank = payload bytes per rank per iteration "
          "(larger of sent/received); util = MB/rank x 8 / iter / link rate; w.util = the same "
          "over wire time; wire = rank 0's time inside transport calls (waiting for slower peers "
          "included), wire min = the least of all ranks'; floor = max(MB/rank x 8 / link rate, "
          "compression time alone), xfl.run = iter / max(MB/rank x 8 / link rate, compression "
          "time in the run); speedup = dense gradwire iter / iter; x best = the faster dense "
          "path (gradwire dense or DDP default) / iter; wire x / wmin x = dense wire / "
          "wire (rank 0 / least-waiting rank); sync ms = the part of wire ms spent in agreement "
          "rounds (waiting for the slowest peer to arrive); xfer x = dense (wire - sync) / "
          "(wire - sync).", file=out)


def evaluate_targets(results):
    """Issue 5's targets, judged on this run's figures (where it has them)."""
    out = []

    def add(name, value, goal, ok, note=""):
        out.append({"target": name, "value": value, "goal": goal, "met": bool(ok), "note": note})

    for c in results["cases"]:
        if c["system"] != "gradwire" or not c.get("link_bps"):
            continue
        where = f"{c['profile']} {c['link']} P={c['world_size']} {c['method']}"
        if c.get("x_floor") is not None:
            add(f"{where}: iter within 1.5x of its floor", round(c["x_floor"], 2), "<= 1.5",
                c["x_floor"] <= 1.5,
                f"floor {c['floor_ms']:.0f} ms (in-run compression: x{c['x_floor_inrun']:.2f})")
        goals = {("topk", 0.01): (10, 20), ("approx_topk", 0.001): (25, 100)}
        g = goals.get((c["codec"], c["density"]))
        if g and not c["hierarchical"] and c.get("speedup") is not None:
            add(f"{where}: end-to-end speedup over dense", round(c["speedup"], 2), f">= {g[0]}",
                c["speedup"] >= g[0], f"vs best dense path {c.get('speedup_vs_best_dense', 0):.2f}x")
            ws = max(c.get("wire_speedup") or 0, c.get("wire_speedup_min_rank") or 0)
            add(f"{where}: wire-time speedup over dense", round(ws, 1), f">= {g[1]}", ws >= g[1],
                "in-exchange wire time (includes waiting for slower peers)")
            ts = c.get("transfer_speedup")
            if ts is not None:
                add(f"{where}: transfer-time speedup over dense", round(ts, 1), f">= {g[1]}",
                    ts >= g[1], f"wire time less its agreement rounds ({c['sync_ms_median']:.0f} "
                    f"of {c['wire_ms_median']:.0f} ms waiting for the slowest peer to arrive)")
            t = results.get("transport", {}).get(c["profile"], {}).get(c["link"])
            if t:
                for r in t["rows"]:
                    if r["name"] == f"sparse allgather, density {c['density']:g}":
                        v = r.get("wire_speedup_vs_dense_ring", 0)
                        add(f"{c['profile']} {c['link']}: sparse allgather alone (no codec) at "
                            f"{c['density']:g} vs dense ring", round(v, 1), f">= {g[1]}", v >= g[1],
                            "transport only: sizes round + allgatherv of k pairs")
    for prof in {c["profile"] for c in results["cases"]}:
        for link in {c["link"] for c in results["cases"] if c["profile"] == prof}:
            here = [c for c in results["cases"] if c["profile"] == prof and c["link"] == link]
            psgd = [c for c in here if c["method"] == "ddp powersgd_rank4"]
            comp = [c for c in here if c["system"] == "gradwire" and c["codec"] != "none"]
            if psgd and comp:
                best = min(comp, key=lambda c: c["iter_ms_median"])
                worst = max(comp, key=lambda c: c["iter_ms_median"])
                add(f"{prof} {link}: gradwire faster than DDP + PowerSGD rank 4",
                    f"{worst['iter_ms_median']:.0f} ms ({worst['method']}) .. "
                    f"{best['iter_ms_median']:.0f} ms ({best['method']}) vs "
                    f"{psgd[0]['iter_ms_median']:.0f} ms", "faster",
                    worst["iter_ms_median"] < psgd[0]["iter_ms_median"])
            t = results.get("transport", {}).get(prof, {}).get(link)
            if t:
                big = [r for r in t["rows"] if "link_util" in r]
                if big:
                    r = max(big, key=lambda r: r["payload_bytes_per_rank"])
                    add(f"{prof} {link}: allgatherv {r['payload_bytes_per_rank'] >> 20} MiB/rank "
                        "link utilisation", f"{100 * r['link_util']:.0f}%", ">= 85%",
                        r["link_util"] >= 0.85)
    rows = results.get("planner_validation") or []
    if rows:
        worst = max(abs(r["error_pct"]) for r in rows)
        add("planner within 20 % of every measured case", f"worst {worst:.1f}%", "<= 20%",
            worst <= 20)
    return out


def markdown(results):
    """The run as Markdown (README / docs): table, transport figures, planner."""
    cfg = results["config"]
    m = cfg["machine"]
    out = [f"{cfg['cluster']}; {m['cores']}-core {m['cpu']}, {m.get('memory_gib')} GiB, kernel "
           f"{m['kernel']}; {cfg['date_utc']}; load average {m['loadavg_start'][0]:.1f} at "
           f"start, {m.get('loadavg_end', [0])[0]:.1f} at end; netem "
           f"{'available' if cfg['netem']['available'] else 'unavailable (delay 0)'}; "
           f"{cfg['iters']} timed iterations after {cfg['warmup']} warm-up; gradwire "
           f"{m['git_commit']}, torch {cfg.get('torch_version')}.", "",
           "| profile | link | P | system | method | iter ms (median) | p90 ms | MB/rank on link "
           "| link util | compress ms (in run / alone) | wire ms (rank 0 / least) "
           "| of which sync / transfer | floor ms | x floor | speedup vs gradwire dense "
           "| vs best dense | "
           "wire speedup (rank 0 / least) | transfer speedup |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    for c in results["cases"]:
        b = c.get("bytes_on_wire_per_rank")
        util = c.get("link_util")
        out.append(
            f"| {c['profile']} | {c['link']} | {c['world_size']} | {c['system']} | {c['method']} | "
            f"{c['iter_ms_median']:.1f} | {f(c.get('iter_ms_p90'), '.1f')} | "
            f"{f(b and b / 1e6, '.2f')} | {f(util and 100 * util, '.0f')}% | "
            f"{f(c.get('compress_ms_median'), '.1f')} / {f(c.get('compress_alone_ms'), '.1f')}"
            f"{'' if c.get('overlap_fraction_median') is None else ' (overlap %.0f%%)' % (100 * c['overlap_fraction_median'])} | "
            f"{f(c.get('wire_ms_median'), '.1f')} / {f(c.get('wire_ms_min_rank'), '.1f')} | "
            f"{f(c.get('sync_ms_median'), '.1f')} / {f(c.get('transfer_ms_median'), '.1f')} | "
            f"{f(c.get('floor_ms'), '.1f')} | {f(c.get('x_floor'), '.2f')} | "
            f"{f(c.get('speedup'), '.2f')}x | {f(c.get('speedup_vs_best_dense'), '.2f')}x | "
            f"{f(c.get('wire_speedup'), '.1f')}x / {f(c.get('wire_speedup_min_rank'), '.1f')}x | "
            f"{f(c.get('transfer_speedup'), '.1f')}x |")
    for prof, per_link in results.get("transport", {}).items():
        for link, t in per_link.items():
            out += ["", f"Transport only (no codec; bench/transport/transport_bench), {prof} "
                    f"n = {t['n']}, {link}, P = {t['world_size']}:", "",
                    "| collective | ms | note |", "|---|---|---|"]
            for r in t["rows"]:
                note = r["note"]
                if "link_util" in r:
                    note += f"; {100 * r['link_util']:.0f}% of the link rate"
                if "wire_speedup_vs_dense_ring" in r:
                    note += f"; {r['wire_speedup_vs_dense_ring']:.1f}x faster than the dense ring"
                out.append(f"| {r['name']} | {r['ms']:.2f} | {note} |")
    rows = results.get("planner_validation") or []
    if rows:
        out += ["", "Planner (tools/planner.py) against this run:", "",
                "| system | link | method | measured ms | predicted ms | error | wire m/p | "
                "compress m/p | MB/rank m/p |", "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            out.append(
                f"| {r['system']} | {r['link']} | {r['method']} | {r['measured_ms']:.1f} | "
                f"{r['predicted_ms']:.1f} | {r['error_pct']:+.1f}% | "
                f"{f(r.get('measured_wire_ms'), '.0f')} / {r['predicted_wire_ms']:.0f} | "
                f"{f(r.get('measured_compress_ms'), '.0f')} / {r['predicted_compress_ms']:.0f} | "
                f"{f(r.get('measured_mb_per_rank'), '.1f')} / "
                f"{f(r.get('predicted_mb_per_rank'), '.1f')} |")
        errs = [abs(r["error_pct"]) for r in rows]
        out.append(f"\nMean |error| {sum(errs) / len(errs):.1f} %, worst {max(errs):.1f} %.")
    if results.get("targets"):
        out += ["", "Issue 5 targets on this run:", "", "| target | value | goal | met | note |",
                "|---|---|---|---|---|"]
        for t in results["targets"]:
            out.append(f"| {t['target']} | {t['value']} | {t['goal']} | "
                       f"{'yes' if t['met'] else '**no**'} | {t['note']} |")
    return "\n".join(out) + "\n"


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = results["cases"]
    links = sorted({c["link"] for c in cases},
                   key=lambda l: emulated_cluster.parse_rate(l) if l != "loopback" else 0)
    profiles = sorted({c["profile"] for c in cases})
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
    ax = axes[0]
    plotted = False
    for prof in profiles:
        for link in links:
            series = {}
            for c in cases:
                if (c["system"] == "gradwire" and c["profile"] == prof and c["link"] == link
                        and c.get("density") is not None and c.get("speedup") is not None):
                    key = c["codec"] + (" hier" if c["hierarchical"] else "")
                    series.setdefault(key, []).append((c["density"], c["speedup"]))
            for key, pts in sorted(series.items()):
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        label=f"{prof} {link} {key}")
                plotted = True
    ax.set_xscale("log")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("density k/n")
    ax.set_ylabel("speedup over dense Gloo allreduce (per iteration)")
    ax.set_title("Speedup vs density, per link rate")
    if plotted:
        ax.legend(fontsize=7)
    ax = axes[1]
    labels, wire, other, ddp = [], [], [], []
    for c in cases:
        system = "gradwire" if c["system"] == "gradwire" else "DDP"
        method = c["method"][4:] if c["method"].startswith("ddp ") else c["method"]
        labels.append(f"{c['profile']} {c['link']} {system} {method}")
        total = c["iter_ms_median"]
        if c["system"] == "gradwire":
            w = min(total, c.get("wire_ms_median") or 0.0)
            wire.append(w)
            other.append(total - w)
            ddp.append(0.0)
        else:
            wire.append(0.0)
            other.append(0.0)
            ddp.append(total)
    y = list(range(len(labels)))
    ax.barh(y, wire, color="tab:blue", label="gradwire: in transport calls (wire + waiting)")
    ax.barh(y, other, left=wire, color="tab:orange",
            label="gradwire: compression, MAC, copies")
    ax.barh(y, ddp, color="tab:green", label="PyTorch DDP: exchange")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("exchange time per iteration (ms, median)")
    ax.set_title("Time per iteration per system")
    ax.legend(fontsize=7)
    cfg = results["config"]
    fig.suptitle(f"gradwire cluster_bench: {cfg['cluster']} - {cfg['date_utc']} - "
                 f"{cfg['machine']['cores']}-core {cfg['machine']['cpu']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- main --------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--profiles", default="resnet50",
                   help="comma-separated: resnet50, vgg16, bert_base, transformer")
    p.add_argument("--params", type=int, help="a synthetic profile of N floats instead")
    p.add_argument("--hosts", type=int, default=4, help="emulated hosts (nodes)")
    p.add_argument("--ranks_per_host", type=int, default=1,
                   help="ranks per host (GPUs per node; they share its loopback)")
    p.add_argument("--links", default="1gbit", help="comma-separated link rates, e.g. 1gbit,10gbit")
    p.add_argument("--delay", default="0us", help="one-way delay per link (needs sch_netem)")
    p.add_argument("--methods", default="none,topk=0.01",
                   help="comma-separated gradwire methods (see above); 'none' is always run")
    p.add_argument("--peers", default="none,fp16,powersgd1,powersgd4",
                   help="comma-separated PyTorch DDP peers; empty for none")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--bucket_size_mb", type=float, default=50.0,
                   help="bucket size for both systems (gradwire buckets, DDP bucket_cap_mb). "
                        "50 MiB (Horovod fuses up to 64 MB): the step here has no backward "
                        "pass to overlap, and four ranks on two cores pay each bucket's "
                        "collective rounds and thread hand-offs on shared cores. 4 hosts, "
                        "1 Gbit/s, ResNet-50, 25 vs 50 MiB: approx top-k 0.1 %% 60-64 vs "
                        "47-49 ms, top-k 1 %% 114-117 vs 109-115 ms, dense and DDP unchanged")
    p.add_argument("--bucket_views", type=int, choices=[0, 1], default=1,
                   help="1: gradients are written into bucket slots on both sides (gradwire "
                        "GradientSlot, DDP gradient_as_bucket_view): no copy in or out; "
                        "0: both copy")
    p.add_argument("--pipeline_depth", type=int, default=0,
                   help="exchanger pipeline slots (1 = no overlap of compression with the "
                   "wire); 0 = exchange_bench's default")
    p.add_argument("--event_loop_nice", type=int, default=19,
                   help="exchange_bench --event_loop_nice: raise the nice value of Gloo's "
                        "event-loop thread in every gradwire rank. Emulated hosts share this "
                        "machine's cores, and Gloo's loop spins on a pair whose lock a "
                        "descheduled thread holds (transport/gloo_group.h); at 19 the spin "
                        "yields (4 hosts, 1 Gbit/s: approx top-k 81-84 -> 68 ms per step). "
                        "0 leaves the loop alone. DDP peers run PyTorch's own Gloo, untouched")
    p.add_argument("--timeout_ms", type=int, default=120000, help="deadline of every collective")
    p.add_argument("--case_timeout_s", type=float, default=900)
    p.add_argument("--no_latency_probe", action="store_true",
                   help="skip measuring per-message latency (the planner then assumes --alpha_us)")
    p.add_argument("--no_alone", action="store_true",
                   help="skip measuring each codec's compression time alone (floor)")
    p.add_argument("--exchange_bench", default=os.path.join(ROOT, "bazel-bin/tools/exchange_bench"))
    p.add_argument("--transport_bench",
                   default=os.path.join(ROOT, "bazel-bin/bench/transport/transport_bench"),
                   help="transport-only figures (sparse allgather without codec, allgatherv "
                   "throughput); empty to skip")
    p.add_argument("--transport_reps", type=int, default=3)
    p.add_argument("--python", default="/usr/bin/python3",
                   help="interpreter with torch for the DDP peers")
    p.add_argument("--iface", default="eth0", help="interface inside each emulated host")
    p.add_argument("--loopback", action="store_true",
                   help="do not emulate a cluster: all ranks on loopback, unshaped")
    p.add_argument("--alpha_us", type=float, default=50.0,
                   help="per-message latency the planner's validation assumes where no "
                   "latency probe ran")
    p.add_argument("--out_dir", default=os.path.join(ROOT, "bench-results"))
    p.add_argument("--name", default="", help="file name stem (default: cluster_bench-DATE)")
    p.add_argument("--keep_logs", action="store_true", help="keep per-rank logs")
    a = p.parse_args(argv)
    try:
        a.methods_parsed = [parse_method(t) for t in a.methods.split(",") if t.strip()]
    except BenchError as e:
        p.error(str(e))
    if a.methods_parsed and not any(m["codec"] == "none" for m in a.methods_parsed):
        a.methods_parsed.insert(0, parse_method("none"))  # the baseline every speedup needs
    a.peer_list = [t.strip() for t in a.peers.split(",") if t.strip()]
    for t in a.peer_list:
        if t not in PEER_HOOKS:
            p.error(f"unknown peer {t!r}; use {', '.join(PEER_HOOKS)}")
    a.link_list = [t.strip() for t in a.links.split(",") if t.strip()]
    try:
        for t in a.link_list:
            emulated_cluster.parse_rate(t)
        emulated_cluster.parse_time(a.delay, "--delay")
    except emulated_cluster.ClusterError as e:
        p.error(str(e))
    a.profile_list = ([f"params={a.params}"] if a.params else
                      [t.strip() for t in a.profiles.split(",") if t.strip()])
    for t in a.profile_list:
        if not t.startswith("params=") and t not in model_profiles.PROFILES:
            p.error(f"unknown profile {t!r}; choose from {', '.join(model_profiles.PROFILES)}")
    if a.hosts < 1 or a.ranks_per_host < 1 or a.hosts * a.ranks_per_host < 2:
        p.error("need --hosts >= 1, --ranks_per_host >= 1 and at least 2 ranks")
    if a.iters < 1 or a.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.methods_parsed and not os.access(a.exchange_bench, os.X_OK):
        print(f"cluster_bench: {a.exchange_bench} not found: build it first "
              "(bazel build //tools:exchange_bench) or pass --exchange_bench", file=sys.stderr)
        return 2
    if a.peer_list and not os.access(a.python, os.X_OK):
        print(f"cluster_bench: {a.python} not found (the DDP peers need Debian's python3-torch); "
              "pass --peers= to skip them", file=sys.stderr)
        return 2

    ns_ok, ns_why = (False, "--loopback given") if a.loopback else emulated_cluster.namespaces_available()
    netem_ok, netem_why = emulated_cluster.netem_available() if ns_ok else (False, "no namespaces")
    if not ns_ok:
        print(f"cluster_bench: network namespaces unavailable ({ns_why}): running every rank on "
              "loopback; results are UNSHAPED (no link rate applies)", file=sys.stderr)
    if ns_ok and emulated_cluster.parse_time(a.delay, "--delay") > 0 and not netem_ok:
        print(f"cluster_bench: --delay {a.delay} needs netem, but {netem_why}", file=sys.stderr)
        return 2

    world = a.hosts * a.ranks_per_host
    now = datetime.datetime.now(datetime.timezone.utc)
    stem = a.name or "cluster_bench-" + now.strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(a.out_dir, exist_ok=True)
    json_path = os.path.join(a.out_dir, stem + ".json")
    png_path = os.path.join(a.out_dir, stem + ".png")
    bench = Bench(a)
    gw_methods = a.methods_parsed
    bench.total_cases = len(a.profile_list) * len(a.link_list) * (len(gw_methods) + len(a.peer_list))
    links = a.link_list if ns_ok else ["loopback"]
    run_transport = bool(a.transport_bench) and a.hosts >= 2
    if run_transport and not os.access(a.transport_bench, os.X_OK):
        print(f"cluster_bench: no {a.transport_bench} (bazel build //bench/transport:"
              "transport_bench): skipping the transport-only figures", file=sys.stderr)
        run_transport = False
    if run_transport:
        bench.total_cases += len(a.profile_list) * len(links)
    if ns_ok and not a.no_latency_probe and gw_methods:
        bench.total_cases += len(links)
    if not ns_ok:
        bench.total_cases = len(a.profile_list) * (len(gw_methods) + len(a.peer_list))

    torch_version = subprocess.run(
        [a.python, "-c", "import torch; print(torch.__version__)"], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True).stdout.strip() if a.peer_list else None
    config = {
        "date_utc": now.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": machine_info(),
        "namespaces": {"available": ns_ok, "why_not": ns_why or None},
        "netem": {"available": netem_ok, "why_not": netem_why or None},
        "shaped": ns_ok,
        "shaping": ("tbf on both ends of every host link (host egress and switch-port egress), "
                    "burst max(2 ms of traffic, 128 KiB); ranks within a host use its loopback, "
                    "unshaped" if ns_ok else "none: loopback"),
        "delay": a.delay, "hosts": a.hosts, "ranks_per_host": a.ranks_per_host,
        "world_size": world, "links": links, "profiles": a.profile_list,
        "methods": [m["name"] for m in gw_methods], "peers": a.peer_list,
        "iters": a.iters, "warmup": a.warmup, "bucket_size_mb": a.bucket_size_mb,
        "pipeline_depth": a.pipeline_depth or "exchange_bench default",
        "event_loop_nice": a.event_loop_nice,
        "bucket_views": bool(a.bucket_views),
        "torch_version": torch_version, "tcp_goodput_factor": TCP_GOODPUT,
        "command": " ".join([os.path.basename(sys.argv[0])] + (sys.argv[1:] if argv is None else argv)),
        "cluster": (f"{a.hosts} emulated hosts x {a.ranks_per_host} ranks, "
                    f"{'/'.join(links)} links, delay {a.delay if netem_ok else '0 (no netem)'}"
                    if ns_ok else f"{world} ranks on loopback (UNSHAPED)"),
    }
    results = {"config": config, "cases": [], "latency_probe": {}, "transport": {}}
    probe_file = os.path.join(bench.run_dir, "profile-latency-probe.txt")
    with open(probe_file, "w") as f:
        f.write("64\n")
    cases = results["cases"]
    status = 0
    try:
        for prof in a.profile_list:
            if prof.startswith("params="):
                shapes = model_profiles.profile(None, int(prof.split("=")[1]))
                profile_args = [f"--params={prof.split('=')[1]}"]
                extra = []
            else:
                shapes = model_profiles.profile(prof)
                profile_args = [f"--profile={prof}"]
                extra = []
            profile_file = os.path.join(bench.run_dir, f"profile-{prof}.txt")
            with open(profile_file, "w") as f:
                f.write("\n".join("x".join(str(d) for d in s) for s in shapes) + "\n")
            n_params = sum(model_profiles.numel(s) for s in shapes)
            alone, alone_cpu, loop_cpu = {}, {}, {}
            if not a.no_alone:
                for m in gw_methods:
                    if m["codec"] != "none":
                        key = m["name"].replace("+hier", "")
                        if key not in alone:
                            sys.stderr.write(f"[alone] {prof} {key}: compression time of one rank "
                                             "with the machine to itself\n")
                            alone[key], alone_cpu[key] = bench.compression_alone(
                                profile_file, extra, m)
                            if world > 1:
                                sys.stderr.write(f"[cpu] {prof} {key}: {world} ranks on "
                                                 "loopback, CPU per rank-step\n")
                                loop_cpu[key] = bench.exchange_cpu_loopback(
                                    profile_file, extra, m, world)
            for link in links:
                cluster = None
                if ns_ok:
                    cluster = emulated_cluster.EmulatedCluster(
                        a.hosts, link, delay=a.delay if netem_ok else "0us")
                    cluster.__enter__()
                try:
                    rate = emulated_cluster.parse_rate(link) if ns_ok else None
                    label = f"{prof} {link}"
                    dense = None
                    if ns_ok and not a.no_latency_probe and link not in results["latency_probe"]:
                        # A 64-float dense allreduce: gradwire's agreement
                        # allgather (P-1 steps) then the ring (2(P-1) steps) of one
                        # tiny message each, so iter / (3(P-1)) is the per-message
                        # latency (alpha) of this cluster as loaded right now.
                        res = bench.run_gradwire(cluster, probe_file, [], parse_method("none"),
                                                 world, a.ranks_per_host, label + " latency probe")
                        hops = 3 * (world - 1)
                        results["latency_probe"][link] = {
                            "iter_ms_median": res["iter_ms"]["median"],
                            "iter_ms_p90": res["iter_ms"]["p90"], "ring_steps": hops,
                            "alpha_us": res["iter_ms"]["median"] * 1e3 / hops}
                    for m in gw_methods:
                        res = bench.run_gradwire(cluster, profile_file, extra, m, world,
                                                 a.ranks_per_host, label)
                        slow = max(res["per_rank"], key=lambda r: r["iter_ms_median"],
                                   default=None)
                        case = {
                            "system": "gradwire", "profile": prof, "params": n_params,
                            "link": link, "link_bps": rate, "world_size": world,
                            "hosts": a.hosts, "ranks_per_host": a.ranks_per_host,
                            "method": m["name"], "codec": m["codec"], "density": m["density"],
                            "bits": m["bits"], "hierarchical": m["hierarchical"],
                            "spec": res.get("compression"),
                            "iter_ms_median": res["iter_ms"]["median"],
                            "iter_ms_p90": res["iter_ms"]["p90"],
                            "iter_ms_min": res["iter_ms"]["min"], "iter_ms_max": res["iter_ms"]["max"],
                            "slowest_rank_iter_ms_median": slow and slow["iter_ms_median"],
                            "bytes_sent_per_rank": res["bytes_sent_per_iter"],
                            "bytes_received_per_rank": res["bytes_received_per_iter"],
                            "intra_node_bytes_sent_per_rank":
                                res.get("intra_node_bytes_sent_per_iter", 0),
                            # What crosses the host's shaped link: intra-node
                            # traffic stays on its loopback.
                            "bytes_on_wire_per_rank": max(
                                res["bytes_sent_per_iter"] -
                                res.get("intra_node_bytes_sent_per_iter", 0),
                                res["bytes_received_per_iter"] -
                                res.get("intra_node_bytes_received_per_iter", 0)),
                            "compress_ms_median": res["compress_ms_median"],
                            "auth_ms_median": res.get("auth_ms_median"),
                            "wire_ms_median": res["wire_ms_median"],
                            # Wire time includes waiting for slower peers; the
                            # rank that waited least bounds the transfer itself.
                            "wire_ms_min_rank": min((r["wire_ms_median"] for r in res["per_rank"]),
                                                    default=res["wire_ms_median"]),
                            # The part of wire time in agreement rounds
                            # (waiting for the slowest peer to arrive), and
                            # the rest: the transfer with every rank present.
                            "sync_ms_median": res.get("sync_ms_median"),
                            "transfer_ms_median": res.get("transfer_ms_median"),
                            "wait_ms_median": res.get("wait_ms_median"),
                            "copy_ms_median": res.get("copy_ms_median"),
                            "span_ms_median": res.get("span_ms_median"),
                            "overlap_fraction_median": res.get("overlap_fraction_median"),
                            "pipeline_depth": res.get("pipeline_depth"),
                            "compress_alone_ms": alone.get(m["name"].replace("+hier", "")),
                            # Rank 0's process CPU (all threads, user + system)
                            # per timed step, and the alone run's.
                            "process_cpu_ms_median": res.get("process_cpu_ms_median"),
                            "cpu_alone_ms": alone_cpu.get(m["name"].replace("+hier", "")),
                            "cpu_loopback_ms": loop_cpu.get(m["name"].replace("+hier", "")),
                            "dense_buckets": res.get("dense_buckets"),
                            "compressed_buckets": res.get("compressed_buckets"),
                            "per_rank": res["per_rank"],
                        }
                        if m["codec"] == "none":
                            dense = case
                        cases.append(case)
                        derive(case, rate, ns_ok, dense)
                    if run_transport:
                        results["transport"].setdefault(prof, {})[link] = bench.run_transport(
                            cluster, n_params, a.hosts, label, rate)
                    for peer in a.peer_list:
                        res = bench.run_ddp(cluster, profile_args, peer, world,
                                            a.ranks_per_host, label)
                        case = {
                            "system": "pytorch", "profile": prof, "params": n_params,
                            "link": link, "link_bps": rate, "world_size": world,
                            "hosts": a.hosts, "ranks_per_host": a.ranks_per_host,
                            "method": "ddp " + res["hook"], "codec": res["hook"],
                            "density": None, "bits": None, "hierarchical": False,
                            "iter_ms_median": res["exchange_s_median"] * 1e3,
                            "iter_ms_p90": res["exchange_s_p90"] * 1e3,
                            "ddp_iteration_ms_median": res["iteration_s_median"] * 1e3,
                            "ddp_compute_ms_median": res["compute_s_median"] * 1e3,
                            "torch_version": res.get("torch_version"),
                        }
                        if dense is not None:
                            case["speedup"] = dense["iter_ms_median"] / case["iter_ms_median"]
                        cases.append(case)
                    # REFERENCE.md: compare against the optimized dense path, the
                    # faster of gradwire's dense allreduce and DDP's default.
                    here = [c for c in cases if c["profile"] == prof and c["link"] == link]
                    denses = [c["iter_ms_median"] for c in here
                              if c["codec"] == "none" and c["iter_ms_median"] > 0]
                    if denses:
                        best = min(denses)
                        for c in here:
                            c["best_dense_ms"] = best
                            c["speedup_vs_best_dense"] = (best / c["iter_ms_median"]
                                                          if c["iter_ms_median"] > 0 else None)
                finally:
                    if cluster is not None:
                        cluster.__exit__(None, None, None)
    except BenchError as e:
        print(f"\ncluster_bench: {e}", file=sys.stderr)
        status = 1
    except emulated_cluster.ClusterError as e:
        print(f"\ncluster_bench: cannot emulate the cluster: {e}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        print("\ncluster_bench: interrupted; namespaces removed", file=sys.stderr)
        status = 130
    finally:
        if not a.keep_logs:
            shutil.rmtree(bench.run_dir, ignore_errors=True)
        else:
            print(f"cluster_bench: rank logs kept in {bench.run_dir}", file=sys.stderr)

    config["machine"]["loadavg_end"] = list(os.getloadavg())
    config["complete"] = status == 0
    # The performance model checks itself against this run (tools/planner.py).
    results["planner_validation"] = []
    try:
        results["planner_validation"], _ = planner.validate(results, a.alpha_us * 1e-6)
    except (KeyError, ValueError, ZeroDivisionError) as e:
        results["planner_error"] = str(e)
    results["targets"] = evaluate_targets(results) if cases else []
    with open(json_path, "w") as f:
        json.dump(results, f, indent=2)
    if cases:
        with open(os.path.join(a.out_dir, stem + ".md"), "w") as f:
            f.write(markdown(results))
    if cases:
        print()
        print_table(results)
        for prof, per_link in results["transport"].items():
            for link, t in per_link.items():
                print(f"\nTransport only (bench/transport/transport_bench, no codec), {prof} "
                      f"n={t['n']}, {link}, P={t['world_size']}:")
                for row in t["rows"]:
                    extra = ""
                    if "link_util" in row:
                        extra = f"  {100 * row['link_util']:.0f}% of the link rate"
                    if "wire_speedup_vs_dense_ring" in row:
                        extra = f"  {row['wire_speedup_vs_dense_ring']:.1f}x faster than dense ring"
                    print(f"  {row['name']:34s} {row['ms']:9.2f} ms  {row['note']}{extra}")
        if results["targets"]:
            print("\nIssue 5 targets on this run:")
            for t in results["targets"]:
                print(f"  [{'MET' if t['met'] else 'MISSED':6s}] {t['target']}: {t['value']} "
                      f"(goal {t['goal']}){'; ' + t['note'] if t['note'] else ''}")
        if results["planner_validation"]:
            alphas = ", ".join(f"{k} {v['alpha_us']:.0f} us"
                               for k, v in results["latency_probe"].items())
            print("\nPlanner (tools/planner.py; per-message latency "
                  f"{'from the latency probe: ' + alphas if alphas else f'assumed {a.alpha_us:g} us'}"
                  ") against this run:")
            planner.print_validation(results["planner_validation"])
        try:
            plot(results, png_path)
            print(f"\nplot: {png_path}")
        except Exception as e:  # a missing matplotlib must not lose the figures
            print(f"\ncluster_bench: no plot ({e}); install python3-matplotlib", file=sys.stderr)
    print(f"results: {json_path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
