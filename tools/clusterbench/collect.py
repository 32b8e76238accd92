"""From the ranks' result files to one case's figures: the gradwire and DDP
cases, the transport-only rows, the derived figures (utilisation, floors,
speedups) and the targets of issues 5 and 18 judged on the run."""

# TCP payload per byte a tbf shaper counts on a 1500-byte MTU Ethernet
# link (1448 B of payload per 1514 B frame with timestamps): the goodput
# ceiling of a shaped link.
TCP_GOODPUT = 1448.0 / 1514.0
# Issue 5's speedup goals per (codec, density): (end to end, wire time).
GOALS = {("topk", 0.01): (10, 20), ("approx_topk", 0.001): (25, 100)}
PER_RANK_KEYS = ("iter_ms_median", "iter_ms_p90", "compress_ms_median", "auth_ms_median",
                 "wire_ms_median", "sync_ms_median", "transfer_ms_median",
                 "process_cpu_ms_median")


class Where:
    """What every case of one profile x link shares."""

    def __init__(self, args, profile, params, link, link_bps):
        self.fields = {"profile": profile, "params": params, "link": link, "link_bps": link_bps,
                       "world_size": args.world, "hosts": args.hosts,
                       "ranks_per_host": args.ranks_per_host}


def per_rank(rank_results):
    """Each rank's own medians from its result file."""
    out = []
    for r in rank_results:
        row = {"rank": r["rank"], "iter_ms_median": r["iter_ms"]["median"],
               "iter_ms_p90": r["iter_ms"]["p90"],
               "bytes_sent_per_iter": r["bytes_sent_per_iter"],
               "bytes_received_per_iter": r["bytes_received_per_iter"]}
        row.update({k: r.get(k) for k in PER_RANK_KEYS if k not in row})
        out.append(row)
    return out


def _bytes_off_node(results):
    """What the given ranks' messages put on their host's shaped link per
    iteration, the larger direction: their bytes less those they counted
    as intra-node (which stay on the host's loopback).

    For one rank, its own figure (bytes_on_wire_per_rank). For the ranks of
    host 0 together, what crosses that host's link: an exchange whose every
    rank sends off-node (an allgather, hierarchical top-k's cross-node
    phase) loads it with all of theirs, a ring with one edge each way. Only
    the hierarchical exchange counts its intra-node bytes apart (its node
    group's); a flat one counts a message to a rank on the same host as
    off-node, so summing its ranks would count those twice."""
    sent = sum(r["bytes_sent_per_iter"] - r.get("intra_node_bytes_sent_per_iter", 0)
               for r in results)
    received = sum(r["bytes_received_per_iter"] - r.get("intra_node_bytes_received_per_iter", 0)
                   for r in results)
    return max(sent, received)


def gradwire_case(where, m, rank_results, alone):
    """The case dict of gradwire method `m`; `alone` holds the one-host figures
    per canonical spec: {"compress_ms", "cpu_ms", "loopback_cpu_ms",
    "loopback_cpu_ms_hierarchical"} (the last for hierarchical methods)."""
    res = rank_results[0]
    ranks = per_rank(rank_results)
    solo = alone.get(m["spec"], {})
    case = {"system": "gradwire", **where.fields,
            "method": m["name"], "spec_text": m["spec_text"], "codec": m["codec"],
            "density": m["density"], "bits": m["bits"], "hierarchical": m["hierarchical"],
            "spec": res.get("compression"),
            "iter_ms_median": res["iter_ms"]["median"], "iter_ms_p90": res["iter_ms"]["p90"],
            "iter_ms_min": res["iter_ms"]["min"], "iter_ms_max": res["iter_ms"]["max"],
            "slowest_rank_iter_ms_median": max(r["iter_ms_median"] for r in ranks),
            "bytes_sent_per_rank": res["bytes_sent_per_iter"],
            "bytes_received_per_rank": res["bytes_received_per_iter"],
            "intra_node_bytes_sent_per_rank": res.get("intra_node_bytes_sent_per_iter", 0),
            "bytes_on_wire_per_rank": _bytes_off_node([res]),
            "bytes_on_host_link": _bytes_off_node(
                rank_results[:where.fields["ranks_per_host"]] if m["hierarchical"] else [res]),
            # Wire time includes waiting for slower peers; the rank that
            # waited least bounds the transfer itself.
            "wire_ms_min_rank": min(r["wire_ms_median"] for r in ranks),
            "compress_alone_ms": solo.get("compress_ms"),
            # Rank 0's process CPU (all threads, user + system) per timed
            # step, the alone runs', and the loopback runs' mean per rank (medians of three).
            "cpu_alone_ms": solo.get("cpu_ms"),
            "cpu_loopback_ms": solo.get("loopback_cpu_ms_hierarchical" if m["hierarchical"]
                                        else "loopback_cpu_ms"),
            "per_rank": ranks}
    # sync: the part of wire time in agreement rounds (waiting for the
    # slowest peer to arrive); transfer: the rest, every rank present.
    for key in ("compress_ms_median", "auth_ms_median", "wire_ms_median", "sync_ms_median",
                "transfer_ms_median", "wait_ms_median", "copy_ms_median", "span_ms_median",
                "overlap_fraction_median", "pipeline_depth", "process_cpu_ms_median",
                "dense_buckets", "compressed_buckets", "dense_tail_rides"):
        case[key] = res.get(key)
    return case


def ddp_case(where, res):
    return {"system": "pytorch", **where.fields,
            "method": "ddp " + res["hook"], "codec": res["hook"],
            "density": None, "bits": None, "hierarchical": False,
            "iter_ms_median": res["exchange_s_median"] * 1e3,
            "iter_ms_p90": res["exchange_s_p90"] * 1e3,
            "ddp_iteration_ms_median": res["iteration_s_median"] * 1e3,
            "ddp_compute_ms_median": res["compute_s_median"] * 1e3,
            "torch_version": res.get("torch_version")}


def transport_figures(res, link_bps):
    """transport_bench's rows with bytes received, link utilisation and the
    sparse allgather's speedup over the dense ring added."""
    hosts = res["world_size"]
    rows = []
    for row in res["rows"]:
        row = dict(row)
        if "payload_bytes_per_rank" in row:
            row["bytes_received_per_rank"] = row["payload_bytes_per_rank"] * (hosts - 1)
            if link_bps:
                row["link_util"] = (row["bytes_received_per_rank"] * 8 /
                                    (row["ms"] / 1e3) / link_bps)
        if "density" in row and row["x_dense_ring"] > 0:
            row["wire_speedup_vs_dense_ring"] = 1.0 / row["x_dense_ring"]
        rows.append(row)
    return {"n": res["n"], "world_size": hosts, "rows": rows}


def _ratio(a, b):
    return a / b if a is not None and b else None


def derive(case, link_bps, shaped, dense):
    """Adds utilisation, floor and speedups to one gradwire case. The link
    figures count every byte on the host's link (bytes_on_host_link; runs
    recorded before it: the rank's own)."""
    it = case["iter_ms_median"] / 1e3
    wire = case["wire_ms_median"] / 1e3
    b = case.get("bytes_on_host_link") or case["bytes_on_wire_per_rank"]
    if shaped:
        case["link_util"] = b * 8 / it / link_bps if it > 0 else None
        case["wire_util"] = b * 8 / wire / link_bps if wire > 0 else None
        floor_wire = b * 8 / link_bps
        case["floor_wire_ms"] = floor_wire * 1e3
        alone = case.get("compress_alone_ms")
        # The floor: compression measured alone (one rank, machine to
        # itself). With P ranks sharing this machine's cores compression
        # cannot run that fast in the run, so the in-run floor uses the
        # compression time the run measured.
        case["floor_ms"] = max(floor_wire * 1e3, alone if alone is not None else 0.0)
        case["x_floor"] = _ratio(case["iter_ms_median"], case["floor_ms"])
        inrun = case.get("compress_ms_median") if case["codec"] != "none" else 0.0
        case["floor_inrun_ms"] = max(floor_wire * 1e3, inrun or 0.0)
        case["x_floor_inrun"] = _ratio(case["iter_ms_median"], case["floor_inrun_ms"])
    if dense is not None:
        case["speedup"] = dense["iter_ms_median"] / case["iter_ms_median"]
        case["wire_speedup"] = _ratio(dense["wire_ms_median"], case["wire_ms_median"])
        case["wire_speedup_min_rank"] = _ratio(dense["wire_ms_min_rank"],
                                               case.get("wire_ms_min_rank"))
        case["transfer_speedup"] = (_ratio(dense["transfer_ms_median"],
                                           case["transfer_ms_median"])
                                    if dense.get("transfer_ms_median") else None)


def best_dense(cases):
    """REFERENCE.md: compare against the optimized dense path, the faster of
    gradwire's dense allreduce and DDP's default (cases of one profile x link)."""
    denses = [c["iter_ms_median"] for c in cases
              if c["codec"] == "none" and c["iter_ms_median"] > 0]
    if denses:
        best = min(denses)
        for c in cases:
            c["best_dense_ms"] = best
            c["speedup_vs_best_dense"] = _ratio(best, c["iter_ms_median"])


# --- the targets of issues 5 and 18 ------------------------------------------

def _target(out, name, value, goal, ok, note=""):
    out.append({"target": name, "value": value, "goal": goal, "met": bool(ok), "note": note})


def cpu_floor(c, cores):
    """Issue 18's floor of a compressed case whose ranks outnumber this
    machine's cores: max(the wire floor, ranks / cores x one rank's process
    CPU per step alone), in ms, and the same with the loopback runs' CPU
    per rank (every rank's share of decoding P frames, kernel TCP, hand-offs
    and memory contention included) in place of the alone figure; None
    where the run has not the figures."""
    alone, loop = c.get("cpu_alone_ms"), c.get("cpu_loopback_ms")
    wire = c.get("floor_wire_ms")
    if (c["codec"] == "none" or not cores or c["world_size"] <= cores or alone is None
            or wire is None):
        return None
    share = c["world_size"] / cores
    return (max(wire, share * alone),
            max(wire, share * loop) if loop is not None else None)


def _case_targets(out, c, transport, cores):
    where = f"{c['profile']} {c['link']} P={c['world_size']} {c['method']}"
    if c.get("x_floor") is not None:
        _target(out, f"{where}: iter within 1.5x of its floor", round(c["x_floor"], 2), "<= 1.5",
                c["x_floor"] <= 1.5,
                f"floor {c['floor_ms']:.0f} ms (in-run compression: x{c['x_floor_inrun']:.2f})")
    floors = cpu_floor(c, cores)
    if floors is not None:
        x = c["iter_ms_median"] / floors[0]
        loop = ("" if floors[1] is None else
                f"; x{c['iter_ms_median'] / floors[1]:.2f} with the loopback runs' CPU per "
                f"rank ({c['cpu_loopback_ms']:.1f} ms)")
        _target(out, f"{where}: iter within 1.5x of max(wire floor, ranks/cores x CPU alone)",
                round(x, 2), "<= 1.5", x <= 1.5,
                f"floor {floors[0]:.0f} ms = max({c['floor_wire_ms']:.0f}, {c['world_size']}/"
                f"{cores} x {c['cpu_alone_ms']:.1f} ms of one rank's CPU alone){loop}")
    g = GOALS.get((c["codec"], c["density"]))
    if not g or c["hierarchical"] or c.get("speedup") is None:
        return
    _target(out, f"{where}: end-to-end speedup over dense", round(c["speedup"], 2), f">= {g[0]}",
            c["speedup"] >= g[0], f"vs best dense path {c.get('speedup_vs_best_dense', 0):.2f}x")
    ws = max(c.get("wire_speedup") or 0, c.get("wire_speedup_min_rank") or 0)
    _target(out, f"{where}: wire-time speedup over dense", round(ws, 1), f">= {g[1]}", ws >= g[1],
            "in-exchange wire time (includes waiting for slower peers)")
    ts = c.get("transfer_speedup")
    if ts is not None:
        _target(out, f"{where}: transfer-time speedup over dense", round(ts, 1), f">= {g[1]}",
                ts >= g[1], f"wire time less its agreement rounds ({c['sync_ms_median']:.0f} "
                f"of {c['wire_ms_median']:.0f} ms waiting for the slowest peer to arrive)")
    for r in (transport or {}).get("rows", []):
        if r.get("density") == c["density"]:
            v = r.get("wire_speedup_vs_dense_ring", 0)
            _target(out, f"{c['profile']} {c['link']}: sparse allgather alone (no codec) at "
                    f"{c['density']:g} vs dense ring", round(v, 1), f">= {g[1]}", v >= g[1],
                    "transport only: sizes round + allgatherv of k pairs")


def _link_targets(out, prof, link, here, transport):
    psgd = [c for c in here if c["method"] == "ddp powersgd_rank4"]
    comp = [c for c in here if c["system"] == "gradwire" and c["codec"] != "none"]
    if psgd and comp:
        best = min(comp, key=lambda c: c["iter_ms_median"])
        worst = max(comp, key=lambda c: c["iter_ms_median"])
        _target(out, f"{prof} {link}: gradwire faster than DDP + PowerSGD rank 4",
                f"{worst['iter_ms_median']:.0f} ms ({worst['method']}) .. "
                f"{best['iter_ms_median']:.0f} ms ({best['method']}) vs "
                f"{psgd[0]['iter_ms_median']:.0f} ms", "faster",
                worst["iter_ms_median"] < psgd[0]["iter_ms_median"])
    big = [r for r in (transport or {}).get("rows", []) if "link_util" in r]
    if big:
        r = max(big, key=lambda r: r["payload_bytes_per_rank"])
        _target(out, f"{prof} {link}: allgatherv {r['payload_bytes_per_rank'] >> 20} MiB/rank "
                "link utilisation", f"{100 * r['link_util']:.0f}%", ">= 85%",
                r["link_util"] >= 0.85)


def evaluate_targets(results):
    """The targets of issues 5 and 18, judged on this run's figures (where it has them)."""
    out = []
    transport = results.get("transport", {})
    cores = results.get("config", {}).get("machine", {}).get("cores")
    for c in results["cases"]:
        if c["system"] == "gradwire" and c.get("link_bps"):
            _case_targets(out, c, transport.get(c["profile"], {}).get(c["link"]), cores)
    pairs = sorted({(c["profile"], c["link"]) for c in results["cases"]})
    for prof, link in pairs:
        here = [c for c in results["cases"] if c["profile"] == prof and c["link"] == link]
        _link_targets(out, prof, link, here, transport.get(prof, {}).get(link))
    rows = results.get("planner_validation") or []
    if rows:
        worst = max(abs(r["error_pct"]) for r in rows)
        _target(out, "planner within 20 % of every measured case", f"worst {worst:.1f}%",
                "<= 20%", worst <= 20)
    return out
