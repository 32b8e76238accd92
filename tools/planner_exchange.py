#!/usr/bin/env python3
"""The planner's exchange model: the library's own cost model per bucket.

Every per-bucket figure of the dense ring, the sparse allgather and the
sparse allreduce comes from lib/comm/exchange_cost_model.h through the
Python binding (gradwire.exchange_cost, gradwire.choose_exchange): the
formulas exist once, in the library, and the Communicator picks with them.
What this module adds is only what the library's model does not know:

  * placement at scale: N nodes x G GPUs share one NIC per node. A ring
    (the dense ring, the sparse allgather's ring above 16 ranks) crosses
    each NIC once per direction: a rank's link is the NIC. An exchange
    whose messages go to every rank (the sparse allreduce's reduce-scatter
    and Bruck allgather, the direct allgather up to 16 ranks) sends
    (P-G)/(P-1) of each rank's bytes off-node, G ranks at once: a rank's
    link is NIC / (G (P-G)/(P-1)). Hierarchically, the cross-node stage
    runs G groups of N ranks (one per node) side by side: NIC / G each.
  * the library's hierarchical mode: world agreement (one direct round), a
    dense reduce-scatter in the node, the cross-node stage on a 1/G shard
    (the Communicator's choice between allgather and allreduce), a dense
    allgather in the node; its dense buckets in two levels too (the
    library's sealed ring across nodes on a 1/G shard between the node
    stages: Communicator::DenseHierarchical), where flat plans run the
    world's ring;
  * the hierarchical dense baseline (what a tuned dense stack, e.g.
    NCCL's, runs at scale): dense reduce-scatter in node, G dense rings of
    n/G across nodes sharing the NIC, allgather in node; a textbook ring
    with no agreement rounds (the baseline's best case);
  * intra-node links (NVLink-class bytes/s and a step latency).

The library's choice for a flat bucket is choose_exchange with the model
a Communicator would agree on: its measurement (a Bruck allgather across
the whole group) sees the all-to-all link, NIC / (G (P-G)/(P-1)).
Iteration time = sum over buckets (no overlap of compression and wire).
"""

import argparse
import json
import math
import shlex
import sys

import planner  # noqa: F401  (the extension loader and the bucket plan)

TCP_GOODPUT = planner.TCP_GOODPUT
KINDS = ("dense_ring", "sparse_allgather", "sparse_allreduce")
LABEL = {"dense_ring": "dense ring", "sparse_allgather": "sparse allgather",
         "sparse_allreduce": "sparse allreduce"}

# PREDICTED codec rates of a GPU (byte floors at planner.GPU_BYTES_PER_S):
# encode reads g and e and writes e (12 bytes per element), decode writes
# 8 bytes per entry, a dense pass moves 4 bytes per element, and the sparse
# allreduce's entry costs 11 decodes (the library's CPU ratio). Not measured
# in this project. The CPU of a message is the host's: the library's default.
GPU_RATES = {"encoded_elements_per_second": planner.GPU_BYTES_PER_S / 12,
             "decoded_entries_per_second": planner.GPU_BYTES_PER_S / 8,
             "reduced_entries_per_second": planner.GPU_BYTES_PER_S / 8 / 11,
             "streamed_elements_per_second": planner.GPU_BYTES_PER_S / 4}
# The model's fields that are rates or CPU costs (not the link's).
RATE_KEYS = ("encoded_elements_per_second", "decoded_entries_per_second",
             "reduced_entries_per_second", "streamed_elements_per_second",
             "seconds_per_message")


def _gw():
    return planner.gradwire_extension()


def library_rates():
    d = _gw().EXCHANGE_MODEL_DEFAULTS
    return {k: d[k] for k in RATE_KEYS}


def cost(kind, ranks, elements, spec, bytes_per_second, alpha_s, rates):
    """One bucket's cost: the library's EstimateExchange (a dict)."""
    if ranks < 2 or elements == 0:
        return {"kind": kind, "bytes_sent": 0.0, "bytes_received": 0.0, "rounds": 0.0,
                "wire_s": 0.0, "compute_s": 0.0, "seconds": 0.0}
    return _gw().exchange_cost(kind, ranks, elements, spec if kind != "dense_ring" else "none",
                               bytes_per_second=bytes_per_second, seconds_per_round=alpha_s,
                               **rates)


def all_to_all_share(p, g):
    """How many ranks' off-node bytes one NIC carries at once in an exchange
    that sends to every rank (G on a node, (P-G)/(P-1) of each off-node)."""
    return max(1.0, g * (p - g) / (p - 1)) if p > 1 else 1.0


def flat_link(kind, p, g, nic):
    """A rank's link (bytes/s) in a flat exchange of `kind` over P = N G."""
    if kind == "dense_ring" or (kind == "sparse_allgather" and p > planner.DIRECT_MAX_RANKS):
        return nic  # a ring: one edge per NIC and direction
    return nic / all_to_all_share(p, g)


def intra_s(g, elements, intra_bps, intra_alpha_s):
    """One dense reduce-scatter (or allgather) of n fp32 inside a node."""
    if g < 2 or not intra_bps:
        return 0.0
    return (g - 1) * intra_alpha_s + (g - 1) / g * 4 * elements / intra_bps


def textbook_ring_s(p, elements, bw, alpha_s):
    """A tuned dense ring allreduce (no agreement): 2(P-1) steps."""
    if p < 2:
        return 0.0
    return 2 * (p - 1) * alpha_s + 2 * (p - 1) / p * 4 * elements / bw


class Setting:
    """A cluster: nodes x gpus, each node's NIC, latencies, codec rates."""

    def __init__(self, nodes, gpus, link_bps, alpha_s=50e-6, intra_bps=100e9,
                 intra_alpha_s=5e-6, rates=None, goodput=TCP_GOODPUT):
        self.nodes, self.gpus, self.p = nodes, gpus, nodes * gpus
        self.nic = link_bps / 8 * goodput
        self.alpha_s, self.intra_bps, self.intra_alpha_s = alpha_s, intra_bps, intra_alpha_s
        self.rates = rates or dict(GPU_RATES)


def _add(total, c, seconds=None):
    total["seconds"] += c["seconds"] if seconds is None else seconds
    total["wire_s"] += c.get("wire_s", 0.0)
    total["nic_bytes"] += max(c.get("bytes_sent", 0.0), c.get("bytes_received", 0.0))
    total["rounds"] += c.get("rounds", 0.0)


def _empty(name):
    return {"plan": name, "seconds": 0.0, "wire_s": 0.0, "nic_bytes": 0.0, "rounds": 0.0,
            "choices": {}}


def plans(dense_buckets, comp_buckets, spec, s):
    """Every plan's iteration cost for one model's buckets (elements each).

    Returns {plan name: {seconds, wire_s, nic_bytes (per rank, summed over
    buckets), rounds, choices ({kind: buckets})}}."""
    p, g, n_nodes = s.p, s.gpus, s.nodes
    out = {}
    cross_link = s.nic / g
    # Dense buckets (small and 1-D tensors; Communicator::Dense): the
    # world's dense ring in the flat plans; in the hierarchical ones, where
    # the library's rule picks two levels (gradwire.dense_two_level with the
    # model a hierarchical Communicator agrees on), a reduce-scatter in the
    # node, the library's sealed ring across nodes on each 1/G shard (G
    # rings sharing the NIC) and an allgather in the node
    # (Communicator::DenseHierarchical).
    dense_part = _empty("dense part")
    dense_part_hier = _empty("dense part, hierarchical")
    for n in dense_buckets:
        _add(dense_part, cost("dense_ring", p, n, spec, s.nic, s.alpha_s, s.rates))
        if _gw().dense_two_level(n_nodes, g, n, bytes_per_second=cross_link,
                                 seconds_per_round=s.alpha_s, **s.rates):
            c = cost("dense_ring", n_nodes, math.ceil(n / g), spec, cross_link, s.alpha_s,
                     s.rates)
            local = 2 * intra_s(g, n, s.intra_bps, s.intra_alpha_s)
            _add(dense_part_hier, c, c["seconds"] + local)
        else:
            _add(dense_part_hier, cost("dense_ring", p, n, spec, s.nic, s.alpha_s, s.rates))
    # Flat: each kind alone for every compressed bucket, and the library's choice.
    a2a = s.nic / all_to_all_share(p, g)
    for kind in KINDS + ("chosen",):
        t = _empty(f"flat {LABEL.get(kind, 'chosen')}")
        for n in comp_buckets:
            k = (_gw().choose_exchange(p, n, spec, bytes_per_second=a2a,
                                       seconds_per_round=s.alpha_s, **s.rates)
                 if kind == "chosen" else kind)
            t["choices"][k] = t["choices"].get(k, 0) + 1
            _add(t, cost(k, p, n, spec, flat_link(k, p, g, s.nic), s.alpha_s, s.rates))
        out[t["plan"]] = t
    # The library's hierarchical mode: cross-node stage on a 1/G shard, G
    # groups sharing the NIC; the Communicator picks allgather or allreduce.
    for kind in ("sparse_allgather", "sparse_allreduce", "chosen"):
        t = _empty(f"hierarchical {LABEL.get(kind, 'chosen')}")
        for n in comp_buckets:
            shard = math.ceil(n / g)
            k = kind
            if kind == "chosen":
                k = _gw().choose_exchange(n_nodes, shard, spec, bytes_per_second=cross_link,
                                          seconds_per_round=s.alpha_s, **s.rates)
                k = "sparse_allreduce" if k == "sparse_allreduce" else "sparse_allgather"
            t["choices"][k] = t["choices"].get(k, 0) + 1
            c = cost(k, n_nodes, shard, spec, cross_link, s.alpha_s, s.rates)
            local = 2 * intra_s(g, n, s.intra_bps, s.intra_alpha_s)
            _add(t, c, c["seconds"] + local + (s.alpha_s if p > 1 else 0.0))
        out[t["plan"]] = t
    # The hierarchical dense baseline (every bucket, dense ones included).
    base = _empty("hierarchical dense (tuned baseline)")
    for n in list(dense_buckets) + list(comp_buckets):
        shard = math.ceil(n / g)
        wire = textbook_ring_s(n_nodes, shard, s.nic / g, s.alpha_s)
        local = 2 * intra_s(g, n, s.intra_bps, s.intra_alpha_s)
        nbytes = 2 * (n_nodes - 1) / n_nodes * 4 * shard if n_nodes > 1 else 0.0
        _add(base, {"seconds": wire + local, "wire_s": wire, "bytes_sent": nbytes,
                    "rounds": 2 * (n_nodes - 1)})
    base["choices"] = {"dense_ring": len(dense_buckets) + len(comp_buckets)}
    out[base["plan"]] = base
    # Every gradwire plan also runs the dense buckets, as its mode does.
    for name, t in out.items():
        if not name.startswith("hierarchical dense"):
            part = dense_part_hier if name.startswith("hierarchical") else dense_part
            for key in ("seconds", "wire_s", "nic_bytes", "rounds"):
                t[key] += part[key]
    # The library's plan: the faster of its two modes (flat / hierarchical),
    # each with its per-bucket choice.
    best = min(("flat chosen", "hierarchical chosen"), key=lambda k: out[k]["seconds"])
    out["library plan"] = dict(out[best], plan=f"library plan ({best})")
    return out


# --- validation against tools/scaling_bench.py -----------------------------

def validate_scaling(results, alpha_s=200e-6, cores=None, rates=None):
    """Rows comparing each scaling_bench case (one rank per emulated host,
    --buckets buckets of --elements fp32) with the library's model.

    The link: the case's shaped rate x TCP goodput. Round latency and codec
    rates: what the library measured at the start of the case (its
    AgreeExchangeModel, recorded as the case's "model"; codec rates in CPU
    time, the speed of one core); for older runs without it, `alpha_s` and
    the library's default rates (or `rates`). The P ranks of the run share
    the machine's `cores` cores and encode and decode at the same moments,
    so the model's compute term (one core's) takes max(1, P / cores) times
    as long. A second prediction replaces the model's compute term by the
    case's own measured compute (compress_ms: encode, selection, decode),
    which checks the wire and round terms alone."""
    st = results["settings"]
    cores = cores or st.get("cores") or 2
    link = planner.parse_rate(st["link"])
    n, buckets = int(st["elements"]), int(st.get("buckets", 1))
    rows = []
    for c in results["cases"]:
        p = int(c["hosts"])
        measured = c.get("model")
        share = max(1.0, p / cores)
        if measured:
            alpha = measured["seconds_per_round"]
            # Runs older than a field use the library's default for it.
            use = {k: measured.get(k, v) for k, v in library_rates().items()}
        else:
            alpha = alpha_s
            use = dict(rates or library_rates())
        pred = cost(c["exchange"], p, n, c["spec"], link / 8 * TCP_GOODPUT, alpha, use)
        pred_s = buckets * (pred["wire_s"] + share * pred["compute_s"])
        # The run's own compute (encode, decode, selection: compress_ms)
        # with the model's wire term; the dense ring's averaging is not
        # counted by the run, so it keeps the model's.
        if c["exchange"] == "dense_ring":
            inrun = pred_s
        else:
            inrun = buckets * pred["wire_s"] + (c.get("compress_ms") or 0) / 1e3
        meas_s = c["ms"] / 1e3
        # The case's fastest and slowest iteration (runs older than ms_all: its median).
        spread = c.get("ms_all") or [c["ms"]]
        meas_b = max(c["bytes_sent"], c["bytes_received"])
        pred_b = buckets * max(pred["bytes_sent"], pred["bytes_received"])
        rows.append({"hosts": p, "name": c["name"], "exchange": c["exchange"],
                     "spec": c["spec"], "measured_ms": c["ms"], "predicted_ms": pred_s * 1e3,
                     "measured_range_ms": [min(spread), max(spread)],
                     "error_pct": 100 * (pred_s - meas_s) / meas_s,
                     "predicted_wire_ms": buckets * pred["wire_s"] * 1e3,
                     "predicted_compute_ms": buckets * share * pred["compute_s"] * 1e3,
                     "cpu_share": share,
                     "predicted_inrun_ms": inrun * 1e3,
                     "error_inrun_pct": 100 * (inrun - meas_s) / meas_s,
                     "measured_mb": meas_b / 1e6, "predicted_mb": pred_b / 1e6,
                     "bytes_error_pct": 100 * (pred_b - meas_b) / meas_b if meas_b else 0.0,
                     "rounds": pred["rounds"], "messages": pred.get("messages", 0.0),
                     "round_us": alpha * 1e6,
                     # All ranks' process CPU per iteration over the cores:
                     # the time the machine needs to run them at all.
                     "cpu_floor_ms": (c.get("cpu_ms_all_ranks") or 0.0) / cores,
                     "encode_rate": use["encoded_elements_per_second"],
                     "model_source": "measured in the run" if measured else "defaults"})
    return rows


def _iteration_range(row):
    """A validation row's fastest and slowest iteration (rows older than
    the field: its median twice)."""
    return row.get("measured_range_ms") or [row["measured_ms"]] * 2


def format_validation(rows, goal_pct=20.0):
    lines = ["| P | exchange | measured ms | iterations ms | model ms | error "
             "| model wire + run's compute ms | error | MB measured | MB model | bytes error "
             "| round us |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = _iteration_range(r)
        lines.append(f"| {r['hosts']} | {r['name']} | {r['measured_ms']:.1f} | "
                     f"{lo:.1f}–{hi:.1f} | "
                     f"{r['predicted_ms']:.1f} | {r['error_pct']:+.1f} % | "
                     f"{r['predicted_inrun_ms']:.1f} | {r['error_inrun_pct']:+.1f} % | "
                     f"{r['measured_mb']:.3f} | {r['predicted_mb']:.3f} | "
                     f"{r['bytes_error_pct']:+.1f} % | {r['round_us']:.0f} |")
    if rows:
        worst = max(abs(r["error_pct"]) for r in rows)
        worst_in = max(abs(r["error_inrun_pct"]) for r in rows)
        worst_b = max(abs(r["bytes_error_pct"]) for r in rows)
        within = sum(abs(r["error_pct"]) <= goal_pct for r in rows)
        inside = sum(lo <= r["predicted_ms"] <= hi
                     for r in rows for lo, hi in [_iteration_range(r)])
        lines += ["", f"time: worst |error| {worst:.1f} % ({within}/{len(rows)} cases within "
                  f"{goal_pct:g} %; the model inside the case's own iterations in "
                  f"{inside}/{len(rows)}); model wire + the run's compute: {worst_in:.1f} %; "
                  f"bytes: worst |error| {worst_b:.1f} %"]
    return "\n".join(lines)


# --- scale predictions -------------------------------------------------------

def predict_scale(profiles, specs, scales, links, alpha_s, intra_bps, rates):
    """Rows: every plan for every profile, spec, (nodes, gpus) and link."""
    rows = []
    for prof in profiles:
        shapes = planner.shapes_for(prof)
        dense_b, comp_b = planner.bucket_plan(shapes, compressing=True)
        for nodes, gpus in scales:
            for link in links:
                s = Setting(nodes, gpus, planner.parse_rate(link), alpha_s, intra_bps,
                            rates=rates)
                for spec in specs:
                    ps = plans(dense_b, comp_b, spec, s)
                    base = ps["hierarchical dense (tuned baseline)"]["seconds"]
                    for name, t in ps.items():
                        rows.append({"profile": prof, "nodes": nodes, "gpus_per_node": gpus,
                                     "link": link, "spec": spec, "plan": t["plan"],
                                     "key": name, "ms": t["seconds"] * 1e3,
                                     "wire_ms": t["wire_s"] * 1e3,
                                     "mb_per_rank": t["nic_bytes"] / 1e6, "rounds": t["rounds"],
                                     "choices": t["choices"],
                                     "speedup_vs_hier_dense": base / t["seconds"]
                                     if t["seconds"] else None})
    return rows


def format_scale(rows):
    lines = ["| profile | scale | link | spec | plan | ms/iter | wire ms | MB/rank | rounds | "
             "buckets by exchange | x hier. dense |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ch = ", ".join(f"{k} {v}" for k, v in sorted(r["choices"].items()))
        lines.append(f"| {r['profile']} | {r['nodes']}x{r['gpus_per_node']} | {r['link']} | "
                     f"{r['spec']} | {r['plan']} | {r['ms']:.1f} | {r['wire_ms']:.1f} | "
                     f"{r['mb_per_rank']:.1f} | {r['rounds']:.0f} | {ch} | "
                     f"{r['speedup_vs_hier_dense']:.2f}x |")
    return "\n".join(lines)


def write_scale(rows, prefix, command, settings):
    """<prefix>.md and <prefix>.json: the table, the command, the settings."""
    headline = [r for r in rows if r["key"] in ("library plan", "hierarchical dense (tuned "
                                                "baseline)", "flat dense ring")]
    md = ["# Planner predictions at scale (library cost model per bucket)", "",
          "```", command, "```", "",
          "Settings: " + ", ".join(f"{k} {v}" for k, v in settings.items()), "",
          "## Headline: the library's plan vs the hierarchical dense baseline", "",
          format_scale(headline), "", "## Every plan", "", format_scale(rows), ""]
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(md))
    with open(prefix + ".json", "w") as f:
        json.dump({"command": command, "settings": settings, "rows": rows}, f, indent=1)


def parse_scales(text):
    """'16x8,64x8' -> [(16, 8), (64, 8)]."""
    out = []
    for t in (x for x in text.split(",") if x):
        try:
            nodes, gpus = (int(v) for v in t.lower().split("x"))
        except ValueError:
            raise ValueError(f"--scales takes NODESxGPUS items like 64x8, got {t!r}") from None
        if not (1 <= nodes <= 1 << 20 and 1 <= gpus <= 1024):
            raise ValueError(f"--scales: nodes must be in 1..1048576 and GPUs in 1..1024, "
                             f"got {t!r}")
        out.append((nodes, gpus))
    return out


def main(argv):
    ap = argparse.ArgumentParser(
        prog="planner.py", description="The planner's exchange modes (tools/planner_exchange.py): "
        "--validate_scaling checks the library's cost model against a scaling_bench run; "
        "--scale predicts every plan at scale with it.")
    ap.add_argument("--validate_scaling", help="scaling_bench.py's scaling.json")
    ap.add_argument("--round_us", type=float, default=200.0,
                    help="validation of a run that did not measure its round latency")
    ap.add_argument("--scale", action="store_true", help="predictions at scale")
    ap.add_argument("--scales", default="16x8,64x8,256x8")
    ap.add_argument("--links", default="10gbit,25gbit")
    ap.add_argument("--profiles", default="resnet50,bert_large")
    ap.add_argument("--specs", default="topk:ratio=0.01;topk:ratio=0.001",
                    help="sparse specs separated by ';'")
    ap.add_argument("--alpha_us", type=float, default=50.0, help="seconds per message step")
    ap.add_argument("--intra_gbytes", type=float, default=100.0,
                    help="intra-node GB/s (NVLink-class); 0 = free")
    ap.add_argument("--codec_rates", choices=("gpu", "library"), default="gpu",
                    help="gpu: PREDICTED byte-floor rates of a GPU codec; library: the "
                    "library's default (CPU) rates")
    ap.add_argument("--out", help="write <out>.md and <out>.json")
    a = ap.parse_args(argv)
    for name, value, most in (("--round_us", a.round_us, 1e9), ("--alpha_us", a.alpha_us, 1e9),
                              ("--intra_gbytes", a.intra_gbytes, 1e6)):
        if not 0 <= value <= most:  # NaN fails too
            ap.error(f"{name} must be in [0, {most:g}], got {value}")
    try:
        planner.gradwire_extension()
    except planner.ExtensionMissing as e:
        print(f"planner: {e}", file=sys.stderr)
        return 2
    try:
        if a.validate_scaling:
            results = planner.read_results(a.validate_scaling)
            try:
                rows = validate_scaling(results, a.round_us * 1e-6)
            except (KeyError, TypeError, AttributeError, IndexError) as e:
                raise ValueError(f"{a.validate_scaling} is not a scaling_bench.py result file "
                                 f"({type(e).__name__}: {e})") from None
            print(f"Validation against {a.validate_scaling}\n")
            print(format_validation(rows))
        if a.scale:
            specs = [t for t in a.specs.split(";") if t]
            for t in specs:
                _gw().canonical_spec(t)
            links = [t for t in a.links.split(",") if t]
            rates = dict(GPU_RATES) if a.codec_rates == "gpu" else library_rates()
            intra = a.intra_gbytes * 1e9 if a.intra_gbytes > 0 else None
            rows = predict_scale([t for t in a.profiles.split(",") if t], specs,
                                 parse_scales(a.scales), links, a.alpha_us * 1e-6, intra, rates)
            print(format_scale(rows))
            if a.out:
                settings = {"alpha_us": a.alpha_us, "intra_gbytes": a.intra_gbytes,
                            "codec_rates": a.codec_rates, **rates, "tcp_goodput": TCP_GOODPUT}
                write_scale(rows, a.out, "/usr/bin/python3 tools/planner.py " +
                            " ".join(shlex.quote(x) for x in argv), settings)
                print(f"wrote {a.out}.md, {a.out}.json")
    except (ValueError, OSError) as e:
        print(f"planner: {e}", file=sys.stderr)
        return 2
    return 0
