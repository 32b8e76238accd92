#!/usr/bin/env python3
"""Scaling benchmark of the sparse allreduce (lib/comm/sparse_allreduce.h)
against the sparse allgather and the dense ring, on emulated hosts.

For each host count (default 4, 8, 16) it builds an emulated cluster
(tools/emulated_cluster.py: one network namespace per host, shaped links
into a switch; --shaper htb-fair by default: links without bursts that
serve each peer in turn, pure ACKs first), runs
one rank per host of tools/scaling_rank with each exchange on the same
synthetic profile (--buckets buckets of
--elements fp32), and reports time and bytes per rank against P, with the
cost model's prediction beside every measurement. One run writes
    <out>/scaling.md    the table (and the done-when figures)
    <out>/scaling.json  every measurement and prediction
    <out>/scaling.png   time and bytes per rank vs P (log scale)

    /usr/bin/python3 tools/scaling_bench.py --out /tmp/scaling   # needs root
        [--hosts 4,8,16] [--link 20mbit] [--elements 16777216] [--buckets 1]
        [--densities 0.01,0.001] [--iters 3] [--warmup 1] [--dense_iters 1]

Time of one iteration = the slowest rank's, from a barrier to its last
bucket (all ranks start together); the figure is the median over
iterations. Bytes = the most any rank sent or received per iteration.
Link rates: every rank of an emulated host shares this machine's cores, so
the links must be slow enough that the wire, not the CPU, dominates even
with 16 ranks on two cores: 20 Mbit/s by default (see docs/sparse_allreduce.md).
"""
import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulated_cluster  # noqa: E402
from gwtools import rates, spec as gwspec  # noqa: E402

# The links of a scaling run: 20 Mbit/s stands in for a fast link, every
# time scaled up, so the link must not send a burst that a fast link would
# not: htb-ack's 128 KiB bucket is 52 ms of a 20 Mbit/s link, the size of
# the 0.1 % exchanges, and it let them finish faster than their bytes
# (docs/results/2026-12-01-burst-free-links.md). htb-fair's bucket is
# 2 ms of the rate, as htb-ack's is at 1 Gbit/s.
SHAPER = "htb-fair"


def run_case(cluster, binary, exchange, spec, a, job):
    """Runs one exchange on every host; returns its figures."""
    iters, warmup = (a.dense_iters, 0) if exchange == "dense_ring" else (a.iters, a.warmup)
    store = tempfile.mkdtemp(prefix="scaling-store-", dir=a.out)
    procs = []
    for r in range(cluster.hosts):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRADWIRE_")}
        env.update({"RANK": str(r), "WORLD_SIZE": str(cluster.hosts), "LOCAL_RANK": "0",
                    "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(r), "GRADWIRE_JOB_ID": job,
                    "GRADWIRE_STORE_DIR": store, "GRADWIRE_JOB_SECRET": a.secret})
        argv = [binary, f"--exchange={exchange}", f"--compression={spec}",
                f"--elements={a.elements}", f"--buckets={a.buckets}", f"--iters={iters}",
                f"--warmup={warmup}", f"--bind_address={cluster.address(r)}",
                f"--event_loop_nice={a.event_loop_nice}", f"--timeout_ms={a.timeout_ms}"]
        if a.receive_window is not None:
            argv.append(f"--receive_window={a.receive_window}")
        procs.append(cluster.popen(r, argv, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True))
    results, failed = [], []
    deadline = time.monotonic() + a.case_timeout
    try:
        for r, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"{exchange} {spec} on {cluster.hosts} hosts did not end "
                                   f"within --case_timeout={a.case_timeout:g} s") from None
            for line in out.splitlines():
                if line.startswith("RESULT "):
                    results.append(json.loads(line[len("RESULT "):]))
            if p.returncode != 0:
                failed.append(f"rank {r} exited {p.returncode}: {out[-2000:]}")
    finally:
        for p in procs:  # none outlives its case, whatever ended it
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(store, ignore_errors=True)
    if failed or len(results) != cluster.hosts:
        raise RuntimeError(f"{exchange} {spec} on {cluster.hosts} hosts failed: " +
                           "; ".join(failed))
    iters = len(results[0]["iter_ms"])

    def slowest_each(value):
        """value(res, i) at each iteration i, the slowest rank's ([] where a
        rank binary does not report it)."""
        try:
            return [max(value(res, i) for res in results) for i in range(iters)]
        except (KeyError, IndexError):
            return []

    slowest = slowest_each(lambda res, i: res["iter_ms"][i])
    wire_all = slowest_each(lambda res, i: res["wire_ms_iters"][i])
    transfer_all = slowest_each(
        lambda res, i: res["wire_ms_iters"][i] - res["sync_ms_iters"][i])
    return {
        "ms": statistics.median(slowest), "ms_all": slowest,
        "bytes_sent": max(res["bytes_sent_per_iter"] for res in results),
        "bytes_received": max(res["bytes_received_per_iter"] for res in results),
        "compress_ms": max(res["compress_ms_per_iter"] for res in results),
        # Time inside the transport's calls (bytes and rounds; sync: the
        # agreement and size rounds within it), the slowest rank's.
        "wire_ms": max(res.get("wire_ms_per_iter", 0.0) for res in results),
        "sync_ms": max(res.get("sync_ms_per_iter", 0.0) for res in results),
        "wire_ms_ranks": [res.get("wire_ms_per_iter") for res in results],
        # The same per iteration (the slowest rank's), and its median: one
        # iteration a busy machine stalls moves the mean, not the median.
        "wire_ms_all": wire_all,
        "wire_ms_median": statistics.median(wire_all) if wire_all else None,
        # Less the agreement rounds (waiting for the last rank to arrive):
        # the transfer proper, per iteration, and its median.
        "transfer_ms_all": transfer_all,
        "transfer_ms_median": statistics.median(transfer_all) if transfer_all else None,
        # Every rank's process CPU per iteration, summed: over the machine's
        # cores, a floor on the iteration's time when ranks share them.
        "cpu_ms_all_ranks": sum(res.get("cpu_ms_per_iter", 0.0) for res in results),
        "selection_rounds": max(res["selection_rounds"] for res in results),
        # The library's measurement of this run (AgreeExchangeModel: the same on every rank).
        "model": results[0].get("model"),
    }


def predict(binary, hosts, spec, a, measured=None):
    """The cost model's prediction (scaling_rank --exchange=predict) at the
    nominal link rate and the round latency the run measured, if any."""
    round_us = [f"--round_us={measured['seconds_per_round'] * 1e6}"] if measured else []
    out = subprocess.run([binary, "--exchange=predict", f"--ranks={hosts}",
                          f"--compression={spec}", f"--elements={a.elements}",
                          f"--buckets={a.buckets}",
                          f"--link_mbit={rates.parse_rate(a.link) / 1e6}"] + round_us,
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.split("PREDICT ", 1)[1])


def plot(cases, hosts, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in sorted({c["name"] for c in cases}):
        pts = sorted((c["hosts"], c) for c in cases if c["name"] == name)
        xs = [h for h, _ in pts]
        style = "--" if "dense" in name else ("-o" if "allreduce" in name else "-s")
        ax_t.plot(xs, [c["ms"] for _, c in pts], style, label=name)
        ax_b.plot(xs, [max(c["bytes_sent"], c["bytes_received"]) / 1e6 for _, c in pts], style,
                  label=name)
    for ax, label in ((ax_t, "time per iteration (ms)"), (ax_b, "MB per rank per iteration")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(hosts)
        ax.set_xticklabels([str(h) for h in hosts])
        ax.set_xlabel("hosts (P)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    ax_b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def parse_list(ap, flag, text, kind, ok, want):
    """--hosts / --densities: comma-separated ASCII numbers, each ok()."""
    try:
        values = [kind(t) for t in text.split(",") if t.strip()]
        if not values or not all(t.strip().isascii() for t in text.split(",")):
            raise ValueError
    except ValueError:
        ap.error(f"{flag} takes comma-separated numbers, got {text!r}")
    for v in values:
        if not ok(v):
            ap.error(f"{flag}: every value must be {want}, got {v:g}")
    return values


def check_args(ap, a):
    """Every flag in its range before any emulated host is built."""
    a.host_list = parse_list(ap, "--hosts", a.hosts, int, lambda h: 2 <= h <= 64, "in 2..64")
    a.density_list = parse_list(ap, "--densities", a.densities, float, lambda d: 0 < d <= 1,
                                "in (0, 1]")
    for d in a.density_list:
        try:
            text = a.spec.format(d=d)
        except (KeyError, IndexError, ValueError) as e:
            ap.error(f"--spec={a.spec!r}: only {{d}} may be substituted ({e})")
        try:
            gwspec.parse_spec(text)
        except gwspec.SpecError as e:
            ap.error(f"--spec gives {text!r}: {e}")
    try:
        rates.parse_rate(a.link)
    except ValueError as e:
        ap.error(f"--link: {e}")
    for flag, value, least, most in (("--elements", a.elements, 1, 1 << 32),
                                     ("--buckets", a.buckets, 1, 1 << 16),
                                     ("--iters", a.iters, 1, 10**6),
                                     ("--warmup", a.warmup, 0, 10**6),
                                     ("--dense_iters", a.dense_iters, 1, 10**6),
                                     ("--timeout_ms", a.timeout_ms, 1, 86400000)):
        if not least <= value <= most:
            ap.error(f"{flag} must be in {least}..{most}, got {value}")
    if a.elements * a.buckets > 1 << 32:
        ap.error(f"--elements x --buckets must be at most 2^32, got {a.elements} x {a.buckets}")
    if not 0 < a.case_timeout <= 86400:
        ap.error(f"--case_timeout must be in (0, 86400] s, got {a.case_timeout}")
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        ap.error(f"--out={a.out} exists and is not a directory")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--hosts", default="4,8,16")
    ap.add_argument("--link", default="20mbit", help="rate of every host link")
    ap.add_argument("--shaper", default=SHAPER, choices=emulated_cluster.SHAPERS,
                    help="the links' shaper (tools/emulated_cluster.py's SHAPERS); htb-fair: "
                    "no burst, so the slow links that let 16 hosts fit act as fast ones "
                    "scaled in time (docs/sparse_allreduce.md)")
    ap.add_argument("--elements", type=int, default=16 << 20, help="fp32 elements per bucket")
    ap.add_argument("--buckets", type=int, default=1)
    ap.add_argument("--densities", default="0.01,0.001")
    ap.add_argument("--spec", default="topk:ratio={d}", help="codec spec; {d} is the density")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--dense_iters", type=int, default=1,
                    help="timed iterations of the dense ring (no warm-up: it has no state, "
                         "and each takes tens of seconds on slow links)")
    ap.add_argument("--event_loop_nice", type=int, default=10)
    ap.add_argument("--receive_window", type=int, default=None,
                    help="peers sending into a rank at once in the direct exchanges (0: all; "
                         "default: the library's, GroupOptions::receive_window)")
    ap.add_argument("--timeout_ms", type=int, default=300000)
    ap.add_argument("--case_timeout", type=float, default=1800)
    ap.add_argument("--rank_binary", default="")
    ap.add_argument("--skip_dense", action="store_true",
                    help="leave out the dense ring (quick runs; no dense figures)")
    a = ap.parse_args()
    check_args(ap, a)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = a.rank_binary or os.path.join(root, "bazel-bin", "tools", "scaling_rank")
    if not os.path.exists(binary):
        sys.exit(f"{binary} not found: bazel build //tools:scaling_rank first")
    ok, why = emulated_cluster.namespaces_available()
    if not ok:
        sys.exit(f"emulated hosts unavailable: {why}")
    os.makedirs(a.out, exist_ok=True)
    a.secret = secrets.token_hex(32)
    hosts, densities = a.host_list, a.density_list
    plan = [] if a.skip_dense else [("dense ring", "dense_ring", a.spec.format(d=densities[0]))]
    for d in densities:
        for exchange in ("sparse_allgather", "sparse_allreduce"):
            plan.append((f"{exchange.replace('_', ' ')} {d * 100:g}%", exchange,
                         a.spec.format(d=d)))
    try:
        cases = run_plan(plan, hosts, binary, a)
    except (RuntimeError, emulated_cluster.ClusterError, subprocess.CalledProcessError) as e:
        sys.exit(f"scaling_bench: {e}")
    report(cases, hosts, densities, a)


def run_plan(plan, hosts, binary, a):
    """Every case of the plan on every host count; the measurements."""
    cases = []
    started = time.monotonic()
    for p in hosts:
        with emulated_cluster.EmulatedCluster(p, a.link, shaper=a.shaper) as cluster:
            for name, exchange, spec in plan:
                t0 = time.monotonic()
                res = run_case(cluster, binary, exchange, spec, a, f"scaling-{p}-{len(cases)}")
                model = predict(binary, p, spec, a, res.get("model"))[exchange]
                res.update({"name": name, "hosts": p, "exchange": exchange, "spec": spec,
                            "predicted": model})
                cases.append(res)
                print(f"[{time.monotonic() - started:6.0f} s] P={p:3d} {name:24s} "
                      f"{res['ms']:9.1f} ms  {res['bytes_sent'] / 1e6:8.3f} MB sent  "
                      f"{res['bytes_received'] / 1e6:8.3f} MB received  "
                      f"(model {model['ms']:.1f} ms; case {time.monotonic() - t0:.0f} s)",
                      flush=True)
    return cases


def report(cases, hosts, densities, a):
    """The table, the JSON, the plot and the planner's validation."""

    def find(name, p):
        return next(c for c in cases if c["name"] == name and c["hosts"] == p)

    lines = [f"# Sparse allreduce scaling: {a.buckets} x {a.elements} fp32 per iteration, "
             f"{a.link} {a.shaper} links, one rank per emulated host", "",
             "| P | exchange | ms/iter | MB sent/rank | MB recv/rank | model ms | "
             "model MB/rank |", "|---|---|---|---|---|---|---|"]
    for c in cases:
        m = c["predicted"]
        lines.append(f"| {c['hosts']} | {c['name']} | {c['ms']:.1f} | "
                     f"{c['bytes_sent'] / 1e6:.3f} | {c['bytes_received'] / 1e6:.3f} | "
                     f"{m['ms']:.1f} | {max(m['bytes_sent'], m['bytes_received']) / 1e6:.3f} |")
    checks = {}
    lo, hi = min(hosts), max(hosts)
    for d in densities:
        name = f"sparse allreduce {d * 100:g}%"
        b = lambda c: max(c["bytes_sent"], c["bytes_received"])  # noqa: E731
        checks[f"bytes/rank P={hi} over P={lo}, {name}"] = b(find(name, hi)) / b(find(name, lo))
    d = densities[0]
    ar = find(f"sparse allreduce {d * 100:g}%", hi)
    checks[f"speedup over sparse allgather, P={hi}, {d * 100:g}%"] = (
        find(f"sparse allgather {d * 100:g}%", hi)["ms"] / ar["ms"])
    if not a.skip_dense:
        checks[f"speedup over dense ring, P={hi}"] = find("dense ring", hi)["ms"] / ar["ms"]
    lines += ["", "| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in checks.items()]
    table = "\n".join(lines) + "\n"
    print(table)
    with open(os.path.join(a.out, "scaling.md"), "w") as f:
        f.write(table)
    with open(os.path.join(a.out, "scaling.json"), "w") as f:
        json.dump({"settings": {**{k: v for k, v in vars(a).items()
                                   if k not in ("secret", "host_list", "density_list")},
                                "cores": os.cpu_count(),
                                "burst_bytes": emulated_cluster.burst_bytes(
                                    rates.parse_rate(a.link), a.shaper),
                                "gso_bytes": emulated_cluster.gso_bytes(
                                    rates.parse_rate(a.link), a.shaper),
                                "queue_seconds": rates.parse_time(
                                    emulated_cluster.TBF_LATENCY)},
                   "cases": cases, "figures": checks}, f, indent=1)
    plot(cases, hosts, os.path.join(a.out, "scaling.png"))
    print(f"wrote {a.out}/scaling.md, scaling.json, scaling.png")
    validate(os.path.join(a.out, "scaling.json"), a.out)


def validate(json_path, out_dir):
    """The planner's validation of this run (tools/planner.py
    --validate_scaling): printed, appended to scaling.md, and written to
    scaling_validation.json. Skipped, saying why, without the extension."""
    import planner
    import planner_exchange
    try:
        planner.gradwire_extension()
    except planner.ExtensionMissing as e:
        print(f"planner validation skipped: {e}")
        return
    with open(json_path) as f:
        results = json.load(f)
    rows = planner_exchange.validate_scaling(results)
    text = ("\n## Planner validation (tools/planner.py --validate_scaling)\n\n" +
            planner_exchange.format_validation(rows) + "\n")
    print(text)
    with open(os.path.join(out_dir, "scaling.md"), "a") as f:
        f.write(text)
    with open(os.path.join(out_dir, "scaling_validation.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
