#!/usr/bin/env python3
"""planner.py's model against a cluster_bench run: calibration (CPU ns per
compressed element, from each codec's compression alone), the link the run
demonstrated, and a row per case comparing the measured iteration with the
prediction (tools/clusterbench writes them into its JSON and report).

    planner.py --validate RUN.json    # the command-line way in
"""
import sys

from planner import (TCP_GOODPUT, case_method, compressed_elements,
                     parse_method, predict, shapes_for)


# How sharply the step turns from the uncontended chain to the shared-core
# CPU bound: the step is (chain^q + bound^q)^(1/q), 2^(1/q) = 1.22 x either
# where they are equal. Chosen on ten AMD grids and three README runs (Zen 3,
# Zen 4; 426 cases; q from 1.5 to 9.75 by 0.25, fewest cases off by over
# 20 %), then checked on the Intel VM's runs (90 cases): two off by over
# 20 % against six with max(ranks/cores x compression + wire, bound)
# (docs/results/2026-12-03-shared-core-step.md).
SHARED_CORE_SMOOTHING = 3.5


def shared_core_step(chain_s, bound_s, q=SHARED_CORE_SMOOTHING):
    """A step on cores its ranks share: the smooth maximum of the chain one
    rank runs uncontended (host work, compression alone, wire) and the
    ranks' CPU per step over the cores. Each alone where it dominates; where
    the two are close the ranks queue for the cores part of the step and the
    step is longer than both."""
    return (chain_s ** q + bound_s ** q) ** (1.0 / q)


def calibration(results):
    """CPU ns per compressed element (alone) per canonical spec (flat or not)."""
    cal = {}
    for c in results["cases"]:
        if c["system"] != "gradwire" or c.get("compress_alone_ms") is None:
            continue
        m = parse_method(c["spec"])
        n = compressed_elements(shapes_for(c["profile"]), m)
        if n:
            cal[m["spec"]] = c["compress_alone_ms"] * 1e6 / n
    return cal


def _dense_cases(results):
    """The run's dense gradwire cases (one per profile x link)."""
    return [c for c in results["cases"] if c["system"] == "gradwire" and c["codec"] == "none"]


def _beyond_averaging_and_macs_ms(case, ms):
    """A dense case's `ms` less its averaging and MAC times, at least 0."""
    return max(0.0, ms - (case.get("compress_ms_median") or 0)
               - (case.get("auth_ms_median") or 0))


def host_overhead_ns(results):
    """Per-element host cost outside codec, MACs and wire (copying gradients
    into buckets and back, thread hand-off), from each dense gradwire run:
    (iter - wire - averaging - MACs) / n. Keyed by (profile, link).

    The run's wire time excludes its MAC time (ExchangeStats: auth_time is
    taken out of wire_time), and the model's sealed ring already charges
    the MACs (sealed_mac_s). Left in, the dense run's MACs of the whole
    gradient would be counted twice for the dense ring and charged to every
    compressed method, which MACs only its frames (and charges them in its
    own terms)."""
    return {(c["profile"], c["link"]):
            _beyond_averaging_and_macs_ms(c, c["iter_ms_median"] - c["wire_ms_median"])
            * 1e6 / c["params"] for c in _dense_cases(results)}


def link_cpu_ns_per_byte(results):
    """Host CPU per byte a rank moves over the run's link, from each dense
    gradwire run: (its process CPU per step - averaging - MACs) / its bytes
    on the wire (the larger direction). Keyed by (profile, link). This is
    the kernel's TCP path over the emulated hosts' 1500-byte veth links
    (per-packet work the loopback's 64 KiB packets mostly avoid) plus the
    transport's copies: 0.55-0.72 ns a byte on the Zen 4 VM, 0.80-1.15 on
    the Zen 3 one. Runs without the dense case's process CPU give none."""
    return {(c["profile"], c["link"]):
            _beyond_averaging_and_macs_ms(c, c["process_cpu_ms_median"])
            * 1e6 / c["bytes_on_wire_per_rank"]
            for c in _dense_cases(results)
            if c.get("process_cpu_ms_median") and c.get("bytes_on_wire_per_rank")}


def link_goodput(results, profile, link):
    """Bytes/s per direction the run's transport-only bench achieved (the
    better of its largest allgatherv and its dense ring; the link figure: on
    a 2-core host, 10 Gbit/s veth + tbf is CPU-bound well below the nominal
    rate), or None."""
    t = results.get("transport", {}).get(profile, {}).get(link)
    if not t:
        return None
    rates = []
    rows = [r for r in t["rows"] if r.get("bytes_received_per_rank")]
    if rows:
        big = max(rows, key=lambda r: r["bytes_received_per_rank"])
        rates.append(big["bytes_received_per_rank"] / (big["ms"] / 1e3))
    p = t["world_size"]
    for r in t["rows"]:
        if r["name"].startswith("allreduce ring") and r["ms"] > 0 and p > 1:
            rates.append(2 * (p - 1) / p * 4 * t["n"] / (r["ms"] / 1e3))
    # The best the link demonstrated in this run (either collective).
    return max(rates) if rates else None


def validate(results, alpha_s):
    cfg = results["config"]
    cores = cfg["machine"].get("cores") or 1
    # The run's bucket size (cluster_bench records it; older runs used 25 MiB).
    bucket_bytes = int(float(cfg.get("bucket_size_mb") or 25) * (1 << 20))
    cal = calibration(results)
    overhead = host_overhead_ns(results)
    link_cpu = link_cpu_ns_per_byte(results)
    rows = []
    for c in results["cases"]:
        if not c.get("link_bps"):
            continue  # unshaped: no link rate to model
        shapes = shapes_for(c["profile"])
        hosts, rph = c["hosts"], c["ranks_per_host"]
        if c["system"] == "gradwire":
            m = case_method(c)
        elif c["codec"] == "none":  # DDP's default allreduce: a dense ring too
            m = parse_method("none")
        else:
            continue
        key = m["spec"]
        probe = results.get("latency_probe", {}).get(c["link"])
        measured_bw = link_goodput(results, c["profile"], c["link"])
        alpha = probe["alpha_us"] * 1e-6 if probe else alpha_s
        share = max(1.0, c["world_size"] / cores)  # every rank of the run shares this machine
        pr = predict(shapes, m, hosts, rph, c["link_bps"], alpha_s=alpha, bucket_bytes=bucket_bytes,
                     cpu_ns_per_element=cal.get(key), cpu_share=share,
                     measured_bytes_per_s=measured_bw, agreement=c["system"] == "gradwire")
        # Overlap shortens the critical path only when a rank's wire time is
        # idle CPU. With more ranks than cores (4 on 2 here) every rank's
        # transfer waits for the others' compression, which is CPU-bound:
        # the CPU is the bottleneck and the serial composition applies.
        pipelined = ((c.get("pipeline_depth") or 1) >= 2 and not m["hierarchical"]
                     and c["world_size"] <= cores)
        if m["codec"] == "none":
            pred = pr["wire_s"]
        elif "cpu_serial_s" in pr:
            # GradientExchanger pipelines flat compressed buckets (pipeline_depth
            # >= 2): compression of bucket i+1 overlaps the wire of bucket i.
            pred = pr["cpu_pipelined_s"] if pipelined else pr["cpu_serial_s"]
        else:
            continue
        host = 0.0
        if c["system"] == "gradwire":
            host = overhead.get((c["profile"], c["link"]), 0.0) * c["params"] * 1e-9
        pred += host
        # Shared cores: with more ranks than cores (4 on 2 here) the step is
        # no shorter than the ranks' CPU work spread over the cores: world /
        # cores x one rank's CPU per step. That CPU is the process CPU of the
        # same ranks on loopback (codec, decoding every peer's frame, MACs,
        # kernel TCP, hand-offs; measured by cluster_bench, no link; for a
        # hierarchical method with its nodes emulated, so its intra-node
        # dense phases, which the model's wire leaves free, count), plus
        # what moving the case's bytes over this link costs beyond loopback
        # (link_cpu_ns_per_byte, from the dense case; the loopback run's own
        # copies of those bytes are then counted twice, so the bound leans
        # high by them). No transfer time is added: the
        # transfer's kernel work and the other ranks' encodes and decodes
        # run while bytes cross (adding the last bucket's transfer overshot
        # by up to 42 % where the wire is most of the step:
        # docs/results/2026-12-01-planner-links.md).
        # The step is then the smooth maximum of that bound and the chain
        # a rank would run uncontended (host + compression alone + wire):
        # either, where it is much the larger, and more than both where
        # they are close, as the ranks then queue for the cores part of
        # the time (shared_core_step).
        # One part of the chain's compression runs as it does in the run,
        # not alone: the largest compressed bucket's share of it (the first
        # bucket's encode and the last one's decode, which no transfer
        # hides) at the rate the ranks show on loopback, their CPU per step
        # there over one rank's alone (every peer's frame decoded, MACs,
        # memory bandwidth shared: about 1.1x on the Intel VM, 1.5x on the
        # Zen 4 one). Where the run measured no CPU alone, nothing is added.
        # (Without it the stored AMD runs were under-predicted by 6 % on
        # average, docs/results/2026-12-07-zen4-grid.md.)
        cpu_bound = None
        chain = None
        exposed_s = 0.0
        compress_s = pr.get("cpu_compress_s", 0.0)  # x share: the ranks' share of a core
        if m["codec"] != "none" and c.get("cpu_loopback_ms") and c["world_size"] > cores:
            moved = (link_cpu.get((c["profile"], c["link"]), 0.0)
                     * (c.get("bytes_on_wire_per_rank") or 0) * 1e-9)
            cpu_bound = c["world_size"] / cores * (c["cpu_loopback_ms"] / 1e3 + moved)
            compress_s /= share  # the chain's: the codec's time alone
            if c.get("cpu_alone_ms"):
                inflation = max(0.0, c["cpu_loopback_ms"] / c["cpu_alone_ms"] - 1.0)
                exposed_s = pr["largest_bucket_share"] * inflation * compress_s
            chain = host + pr["wire_s"] + compress_s + exposed_s
            pred = shared_core_step(chain, cpu_bound)
        # The same model fed the compression time the run itself measured
        # (ranks contending for 2 cores and memory bandwidth): checks the
        # wire and composition part of the model on its own.
        pred_inrun = None
        if m["codec"] != "none" and c.get("compress_ms_median") is not None:
            comp = (c["compress_ms_median"] + (c.get("auth_ms_median") or 0)) / 1e3
            w = pr["wire_s"]
            if pipelined:
                pred_inrun = host + max(comp, w) + min(comp, w) * pr["largest_bucket_share"]
            else:
                pred_inrun = host + comp + w
        meas = c["iter_ms_median"] / 1e3
        row = {"system": c["system"], "profile": c["profile"], "link": c["link"],
               "world_size": c["world_size"], "method": c["method"],
               "measured_ms": meas * 1e3, "predicted_ms": pred * 1e3,
               "error_pct": 100 * (pred - meas) / meas,
               "predicted_inrun_ms": None if pred_inrun is None else pred_inrun * 1e3,
               "error_inrun_pct": None if pred_inrun is None else 100 * (pred_inrun - meas) / meas,
               "predicted_wire_ms": pr["wire_s"] * 1e3,
               "measured_wire_ms": c.get("wire_ms_median"),
               "predicted_compress_ms": compress_s * 1e3,
               "measured_compress_ms": c.get("compress_ms_median"),
               "host_overhead_ms": host * 1e3, "cpu_share": share,
               "cpu_bound_ms": None if cpu_bound is None else cpu_bound * 1e3,
               "chain_ms": None if chain is None else chain * 1e3,
               "exposed_ms": exposed_s * 1e3,
               "composition": ("cpu-bound (shared cores)"
                               if cpu_bound is not None and cpu_bound >= chain
                               else "serial (shared cores)" if cpu_bound is not None
                               else "pipelined" if pipelined and m["codec"] != "none"
                               else "serial"),
               "alpha_us": alpha * 1e6,
               "link_goodput_gbit": (min(c["link_bps"] * TCP_GOODPUT / 8, measured_bw)
                                     if measured_bw else c["link_bps"] * TCP_GOODPUT / 8) * 8e-9}
        if c.get("bytes_on_wire_per_rank"):
            row["predicted_mb_per_rank"] = pr["nic_bytes_per_iter"] / 1e6
            row["measured_mb_per_rank"] = c["bytes_on_wire_per_rank"] / 1e6
        rows.append(row)
    return rows, cal


def print_validation(rows, out=sys.stdout):
    print(f"{'system':8s} {'profile':10s} {'link':6s} {'P':>2s} {'method':28s} {'measured':>9s} "
          f"{'predicted':>9s} {'error':>7s} {'wire m/p':>15s} {'compr m/p':>15s} {'MB m/p':>15s} "
          f"{'pred(in-run compr)':>18s}  composition", file=out)
    for r in rows:
        wm = r.get("measured_wire_ms")
        cm = r.get("measured_compress_ms")
        print(f"{r['system']:8s} {r['profile']:10s} {r['link']:6s} {r['world_size']:2d} "
              f"{r['method']:28s} {r['measured_ms']:8.1f}m {r['predicted_ms']:8.1f}m "
              f"{r['error_pct']:+6.1f}% "
              f"{(f'{wm:.0f}' if wm is not None else '-'):>7s}/{r['predicted_wire_ms']:<7.0f} "
              f"{(f'{cm:.0f}' if cm is not None else '-'):>7s}/{r['predicted_compress_ms']:<7.0f} "
              f"{r.get('measured_mb_per_rank', 0):7.1f}/"
              f"{r.get('predicted_mb_per_rank', 0):<7.1f} "
              + (f"{r['predicted_inrun_ms']:8.1f}m {r['error_inrun_pct']:+6.1f}%"
                 if r.get("predicted_inrun_ms") is not None else f"{'-':>17s}")
              + f"  {r['composition']}"
              + (f" (chain {r['chain_ms']:.0f}m, cpu bound {r['cpu_bound_ms']:.0f}m)"
                 if r.get("cpu_bound_ms") else ""),
              file=out)
    if rows:
        worst = max(abs(r["error_pct"]) for r in rows)
        mean = sum(abs(r["error_pct"]) for r in rows) / len(rows)
        print(f"planner error: mean |error| {mean:.1f} %, worst {worst:.1f} % over {len(rows)} "
              "cases (m = measured, p = predicted; compression from the codec's time alone; with "
              "ranks sharing cores, the smooth maximum of that chain, with its largest bucket's "
              "compression at the run's loopback rate, and the shared-core CPU bound)", file=out)
        inrun = [abs(r["error_inrun_pct"] if r.get("error_inrun_pct") is not None else
                     r["error_pct"]) for r in rows]
        print(f"with the run's own compression times: mean |error| {sum(inrun) / len(inrun):.1f} "
              f"%, worst {max(inrun):.1f} %", file=out)


# --- scale-out predictions ----------------------------------------------------
