#!/usr/bin/env python3
"""Asserts that a cluster_bench JSON holds sane figures (not timings):
every case present, bytes on the wire equal to what the algorithms must
send, utilisation within the link's capacity, the configuration recorded,
the planner's validation present, and a real PNG next to it."""

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("GWTOOLS_DIR") or os.path.join(HERE, "..", "..", "tools"))
from gwtools import spec  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")
    return cond


def summary():
    """Prints the count of failed checks; the exit status."""
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("all checks passed")
    return 0


def finite_positive(v):
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def check_config(cfg):
    check(cfg.get("complete") is True, "run completed")
    for key in ("date_utc", "machine", "namespaces", "netem", "shaping", "world_size", "links"):
        check(key in cfg, f"config records {key}")
    check(cfg["machine"].get("kernel") and cfg["machine"].get("cores"), "machine: kernel and cores")
    check(isinstance(cfg["netem"].get("available"), bool), "netem availability recorded")
    shaped = cfg["shaped"]
    print(f"cluster: {cfg['cluster']}; shaped={shaped}")
    return shaped


def check_gradwire(gw, P, shaped):
    for name, c in gw.items():
        check(finite_positive(c["iter_ms_median"]), f"{name}: iter median > 0")
        check(c["iter_ms_p90"] >= c["iter_ms_median"], f"{name}: p90 >= median")
        check(finite_positive(c["bytes_on_wire_per_rank"]), f"{name}: bytes on the wire > 0")
        on_link, own = c["bytes_on_host_link"], c["bytes_on_wire_per_rank"]
        check(on_link >= own and (c["ranks_per_host"] > 1 or on_link == own),
              f"{name}: the host's link carries its ranks' bytes")
        check(len(c["per_rank"]) == P, f"{name}: a result file from each of {P} ranks")
        check(sorted(x["rank"] for x in c["per_rank"]) == list(range(P)),
              f"{name}: results of ranks 0..{P - 1}")
        check(spec.parse_spec(c["spec"]) == spec.parse_spec(c["spec_text"]),
              f"{name}: ran the spec asked for ({c['spec']})")
        check(c["wire_ms_median"] >= 0, f"{name}: wire time >= 0")
        # Per step sync <= wire and transfer = wire - sync, so their medians
        # cannot exceed wire's either.
        for part in ("sync_ms_median", "transfer_ms_median"):
            check(0 <= c[part] <= c["wire_ms_median"] + 1e-6,
                  f"{name}: {part} {c[part]} within wire time {c['wire_ms_median']}")
        if shaped:
            # Payload cannot cross a link faster than its rate, except what
            # tbf's token bucket lets through at once: it refills between a
            # step's collectives, so allow one burst (tools/emulated_cluster.py:
            # max(2 ms of traffic, 128 KiB)) per bucket exchanged, plus 10 %
            # for clock granularity on short runs.
            link = c["link_bps"]
            burst = max(link / 8 * 0.002, 128 * 1024)
            rounds = (c.get("dense_buckets") or 0) + (c.get("compressed_buckets") or 0) or 1
            paced = max(0.0, c["bytes_on_wire_per_rank"] - rounds * burst) * 8 / link
            check(c["wire_util"] > 0 and paced <= 1.10 * c["wire_ms_median"] / 1e3,
                  f"{name}: {c['bytes_on_wire_per_rank'] / 1e6:.3f} MB per rank in "
                  f"{c['wire_ms_median']:.2f} ms of wire time (utilisation {c['wire_util']:.2f}; "
                  f"beyond {rounds} tbf burst(s) of {burst / 1e3:.0f} kB, "
                  f"{paced * 1e3:.2f} ms at the link rate)")
            check(c["link_util"] <= c["wire_util"] + 1e-9, f"{name}: link util <= wire util")
            check(finite_positive(c["floor_ms"]), f"{name}: floor > 0")
        if name != "none":
            check(finite_positive(c["compress_ms_median"]), f"{name}: compression time > 0")
            check(finite_positive(c.get("compress_alone_ms")), f"{name}: compression alone > 0")
            # The exchange's CPU per rank-step on loopback (planner's
            # shared-core bound) includes the CPU of one rank's step alone
            # (CPU times both: a loaded machine stretches wall time only).
            check(finite_positive(c.get("cpu_loopback_ms"))
                  and c["cpu_loopback_ms"] >= 0.5 * c["cpu_alone_ms"],
                  f"{name}: loopback CPU per rank-step {c.get('cpu_loopback_ms')} ms "
                  f"(one rank's step alone: {c['cpu_alone_ms']} ms CPU)")
            check(c["compressed_buckets"] >= 1, f"{name}: at least one compressed bucket")
            check(finite_positive(c.get("speedup")), f"{name}: speedup recorded")


def check_dense(dense, gw, P):
    if dense is None:
        return
    n = dense["params"]
    want = 2 * (P - 1) / P * 4 * n  # ring allreduce, bandwidth term
    got = dense["bytes_on_wire_per_rank"]
    check(abs(got - want) <= 0.01 * want + 4096,
          f"dense: {got:.0f} B/rank on the wire, ring allreduce needs {want:.0f}")
    check(dense["compressed_buckets"] == 0, "dense: no compressed bucket")
    for name, c in gw.items():
        if c.get("density"):
            # k pairs from each of P-1 peers (a 4-byte value and at least
            # a 1-byte delta-varint index, the default), plus the dense
            # 1-D rest: far below dense, above the bare pairs.
            pairs = (P - 1) * 5 * c["density"] * n * 0.9
            check(pairs <= c["bytes_on_wire_per_rank"] <= want * max(4 * c["density"], 0.1),
                  f"{name}: {c['bytes_on_wire_per_rank']:.0f} B/rank between {pairs:.0f} "
                  f"and {want * max(4 * c['density'], 0.1):.0f}")


def check_rest(r, ddp, shaped, png):
    for c in ddp:
        check(c["iter_ms_median"] >= 0 and c.get("torch_version"), f"{c['method']}: figures")
    rows = r.get("planner_validation")
    if check(isinstance(rows, list) and (rows or not shaped), "planner validation present"):
        for row in rows:
            check(math.isfinite(row["error_pct"]), f"planner {row['method']}: finite error")
    if png:
        ok = os.path.exists(png)
        if check(ok, f"plot {png} exists"):
            with open(png, "rb") as f:
                head = f.read(8)
            check(head == b"\x89PNG\r\n\x1a\n", "plot is a PNG")
            check(os.path.getsize(png) > 10000, "plot is not empty")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("json")
    p.add_argument("--png")
    p.add_argument("--methods", required=True, help="cluster_bench's --methods (specs, ';')")
    p.add_argument("--hierarchical", default="off", help="cluster_bench's --hierarchical")
    p.add_argument("--peers", default="")
    a = p.parse_args()
    with open(a.json) as f:
        r = json.load(f)
    cfg = r["config"]
    methods = [m["name"] for m in spec.method_list(a.methods, a.hierarchical)]
    peers = [m for m in a.peers.split(",") if m]

    shaped = check_config(cfg)
    cases = r["cases"]
    gw = {c["method"]: c for c in cases if c["system"] == "gradwire"}
    ddp = [c for c in cases if c["system"] == "pytorch"]
    check(sorted(gw) == sorted(methods), f"gradwire cases {sorted(gw)} == {sorted(methods)}")
    check(len(ddp) == len(peers), f"{len(ddp)} DDP cases, want {len(peers)}")

    P = cfg["world_size"]
    check_gradwire(gw, P, shaped)
    check_dense(gw.get("none"), gw, P)
    check_rest(r, ddp, shaped, a.png)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
