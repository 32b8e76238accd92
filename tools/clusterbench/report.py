"""The run's figures for people: a table on stdout, Markdown and a PNG. A run
that stopped early says INCOMPLETE in each, with the failing ranks' errors."""

import sys

from gwtools import rates
import planner_validation


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def _pct(v):
    return None if v is None else 100 * v


def _mb(c):
    b = c.get("bytes_on_wire_per_rank")
    return b and b / 1e6


# (title, width, cell): the stdout table's columns.
COLUMNS = [
    ("profile", 10, lambda c: c["profile"]), ("link", 7, lambda c: c["link"]),
    ("P", 3, lambda c: str(c["world_size"])), ("system", 8, lambda c: c["system"]),
    ("method", 30, lambda c: c["method"]),
    ("iter ms", 8, lambda c: fmt(c["iter_ms_median"], ".1f")),
    ("p90 ms", 8, lambda c: fmt(c.get("iter_ms_p90"), ".1f")),
    ("MB/rank", 8, lambda c: fmt(_mb(c), ".2f")),
    ("util", 5, lambda c: fmt(_pct(c.get("link_util")), ".0f") + "%"),
    ("w.util", 6, lambda c: fmt(_pct(c.get("wire_util")), ".0f") + "%"),
    ("compr ms", 8, lambda c: fmt(c.get("compress_ms_median"), ".1f")),
    ("alone ms", 8, lambda c: fmt(c.get("compress_alone_ms"), ".1f")),
    ("wire ms", 8, lambda c: fmt(c.get("wire_ms_median"), ".1f")),
    ("wire min", 8, lambda c: fmt(c.get("wire_ms_min_rank"), ".1f")),
    ("floor ms", 8, lambda c: fmt(c.get("floor_ms"), ".1f")),
    ("xfloor", 6, lambda c: fmt(c.get("x_floor"), ".2f")),
    ("xfl.run", 7, lambda c: fmt(c.get("x_floor_inrun"), ".2f")),
    ("speedup", 7, lambda c: fmt(c.get("speedup"), ".2f") + "x"),
    ("x best", 7, lambda c: fmt(c.get("speedup_vs_best_dense"), ".2f") + "x"),
    ("wire x", 7, lambda c: fmt(c.get("wire_speedup"), ".1f") + "x"),
    ("wmin x", 7, lambda c: fmt(c.get("wire_speedup_min_rank"), ".1f") + "x"),
    ("sync ms", 8, lambda c: fmt(c.get("sync_ms_median"), ".1f")),
    ("xfer x", 7, lambda c: fmt(c.get("transfer_speedup"), ".1f") + "x"),
]
LEGEND = (
    "iter = exchange time per iteration (gradwire: first Submit..WaitAll; DDP: iteration "
    "minus the same step without DDP); MB/rank = payload bytes per rank per iteration "
    "(larger of sent/received); util = the bytes on the host's link (hierarchical: every "
    "local rank's cross-node bytes; else MB/rank) x 8 / iter / link rate; w.util = the same "
    "over wire time; wire = rank 0's time inside transport calls (waiting for slower peers "
    "included), wire min = the least of all ranks'; floor = max(host's link bytes x 8 / link "
    "rate, compression time alone), xfl.run = iter / max(the same wire floor, compression "
    "time in the run); speedup = dense gradwire iter / iter; x best = the faster dense "
    "path (gradwire dense or DDP default) / iter; wire x / wmin x = dense wire / "
    "wire (rank 0 / least-waiting rank); sync ms = the part of wire ms spent in agreement "
    "rounds (waiting for the slowest peer to arrive); xfer x = dense (wire - sync) / "
    "(wire - sync).")


def incomplete(results):
    """'INCOMPLETE RUN: ...' for a run that stopped early, else None."""
    if results["config"].get("complete"):
        return None
    f = results.get("failure") or {}
    where = f" at {f['case']}" if f.get("case") else ""
    return (f"INCOMPLETE RUN: stopped{where} ({f.get('reason', 'unknown reason')}); "
            f"{len(results['cases'])} case(s) measured")


def describe_run(cfg):
    m = cfg["machine"]
    return (f"{cfg['cluster']}; {m['cores']} cores ({m['cpu']}), kernel {m['kernel']}, "
            f"{cfg['date_utc']}; load average {m['loadavg_start'][0]:.1f} at start, "
            f"{m.get('loadavg_end', [0])[0]:.1f} at end")


LEFT = ("profile", "link", "system", "method")


def print_table(results, out=sys.stdout):
    align = ["<" if t in LEFT else ">" for t, _, _ in COLUMNS]
    head = " ".join(f"{t:{a}{w}s}" for a, (t, w, _) in zip(align, COLUMNS))
    print(head, file=out)
    print("-" * len(head), file=out)
    for c in results["cases"]:
        print(" ".join(f"{cell(c):{a}{w}s}" for a, (_, w, cell) in zip(align, COLUMNS)), file=out)
    print(f"\n{describe_run(results['config'])}", file=out)
    print(LEGEND, file=out)


def _transport_note(r):
    note = r["note"]
    if "link_util" in r:
        note += f"; {100 * r['link_util']:.0f}% of the link rate"
    if "wire_speedup_vs_dense_ring" in r:
        note += f"; {r['wire_speedup_vs_dense_ring']:.1f}x faster than the dense ring"
    return note


def print_extras(results, alpha_us, out=sys.stdout):
    """Transport-only figures, the targets of issues 5 and 18 and the planner's validation."""
    for prof, per_link in results["transport"].items():
        for link, t in per_link.items():
            print(f"\nTransport only (bench/transport/transport_bench, no codec), {prof} "
                  f"n={t['n']}, {link}, P={t['world_size']}:", file=out)
            for row in t["rows"]:
                print(f"  {row['name']:34s} {row['ms']:9.2f} ms  {_transport_note(row)}", file=out)
    if results["targets"]:
        print("\nTargets of issues 5 and 18 on this run:", file=out)
        for t in results["targets"]:
            print(f"  [{'MET' if t['met'] else 'MISSED':6s}] {t['target']}: {t['value']} "
                  f"(goal {t['goal']}){'; ' + t['note'] if t['note'] else ''}", file=out)
    if results["planner_validation"]:
        alphas = ", ".join(f"{k} {v['alpha_us']:.0f} us"
                           for k, v in results["latency_probe"].items())
        source = f"from the latency probe: {alphas}" if alphas else f"assumed {alpha_us:g} us"
        print(f"\nPlanner (tools/planner.py; per-message latency {source}) against this run:",
              file=out)
        planner_validation.print_validation(results["planner_validation"], out=out)


def print_failure(results, out=sys.stdout):
    f = results.get("failure")
    if f:
        print(f"\n{incomplete(results)}", file=out)
        print(f.get("report") or f.get("reason"), file=out)
        if results["config"].get("logs_dir"):
            print(f"rank logs kept in {results['config']['logs_dir']}", file=out)


# --- Markdown --------------------------------------------------------------------

def _md_case(c):
    f = fmt
    util = c.get("link_util")
    overlap = c.get("overlap_fraction_median")
    return (
        f"| {c['profile']} | {c['link']} | {c['world_size']} | {c['system']} | {c['method']} | "
        f"{c['iter_ms_median']:.1f} | {f(c.get('iter_ms_p90'), '.1f')} | "
        f"{f(_mb(c), '.2f')} | {f(util and 100 * util, '.0f')}% | "
        f"{f(c.get('compress_ms_median'), '.1f')} / {f(c.get('compress_alone_ms'), '.1f')}"
        f"{'' if overlap is None else ' (overlap %.0f%%)' % (100 * overlap)} | "
        f"{f(c.get('wire_ms_median'), '.1f')} / {f(c.get('wire_ms_min_rank'), '.1f')} | "
        f"{f(c.get('sync_ms_median'), '.1f')} / {f(c.get('transfer_ms_median'), '.1f')} | "
        f"{f(c.get('floor_ms'), '.1f')} | {f(c.get('x_floor'), '.2f')} | "
        f"{f(c.get('speedup'), '.2f')}x | {f(c.get('speedup_vs_best_dense'), '.2f')}x | "
        f"{f(c.get('wire_speedup'), '.1f')}x / {f(c.get('wire_speedup_min_rank'), '.1f')}x | "
        f"{f(c.get('transfer_speedup'), '.1f')}x |")


def _md_head(results):
    cfg = results["config"]
    m = cfg["machine"]
    out = []
    if incomplete(results):
        out += [f"**{incomplete(results)}.** The figures below are what ran before it "
                "stopped; see \"Failure\" at the end.", ""]
    out += [f"{cfg['cluster']}; {m['cores']}-core {m['cpu']}, {m.get('memory_gib')} GiB, kernel "
            f"{m['kernel']}; {cfg['date_utc']}; load average {m['loadavg_start'][0]:.1f} at "
            f"start, {m.get('loadavg_end', [0])[0]:.1f} at end; netem "
            f"{'available' if cfg['netem']['available'] else 'unavailable (delay 0)'}; "
            f"{cfg['iters']} timed iterations after {cfg['warmup']} warm-up; gradwire "
            f"{m['git_commit']}, torch {cfg.get('torch_version')}.", ""]
    return out


def _md_transport(results):
    out = []
    for prof, per_link in results.get("transport", {}).items():
        for link, t in per_link.items():
            out += ["", f"Transport only (no codec; bench/transport/transport_bench), {prof} "
                    f"n = {t['n']}, {link}, P = {t['world_size']}:", "",
                    "| collective | ms | note |", "|---|---|---|"]
            out += [f"| {r['name']} | {r['ms']:.2f} | {_transport_note(r)} |" for r in t["rows"]]
    return out


def _md_planner(results):
    rows = results.get("planner_validation") or []
    if not rows:
        return []
    out = ["", "Planner (tools/planner.py) against this run:", "",
           "| system | link | method | measured ms | predicted ms | error | wire m/p | "
           "compress m/p | MB/rank m/p |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| {r['system']} | {r['link']} | {r['method']} | {r['measured_ms']:.1f} | "
            f"{r['predicted_ms']:.1f} | {r['error_pct']:+.1f}% | "
            f"{fmt(r.get('measured_wire_ms'), '.0f')} / {r['predicted_wire_ms']:.0f} | "
            f"{fmt(r.get('measured_compress_ms'), '.0f')} / {r['predicted_compress_ms']:.0f} | "
            f"{fmt(r.get('measured_mb_per_rank'), '.1f')} / "
            f"{fmt(r.get('predicted_mb_per_rank'), '.1f')} |")
    errs = [abs(r["error_pct"]) for r in rows]
    out.append(f"\nMean |error| {sum(errs) / len(errs):.1f} %, worst {max(errs):.1f} %.")
    return out


def _md_tail(results):
    out = []
    if results.get("targets"):
        out += ["", "Targets of issues 5 and 18 on this run:", "",
                "| target | value | goal | met | note |", "|---|---|---|---|---|"]
        out += [f"| {t['target']} | {t['value']} | {t['goal']} | "
                f"{'yes' if t['met'] else '**no**'} | {t['note']} |" for t in results["targets"]]
    f = results.get("failure")
    if f:
        out += ["", "## Failure", "", (incomplete(results) or "The run failed") + ".", "", "```",
                f.get("report") or f.get("reason"), "```"]
        if results["config"].get("logs_dir"):
            out += ["", f"Rank logs kept in `{results['config']['logs_dir']}`."]
    return out


def markdown(results):
    """The run as Markdown (README / docs): table, transport figures, planner."""
    out = _md_head(results) + [
        "| profile | link | P | system | method | iter ms (median) | p90 ms | MB/rank on link "
        "| link util | compress ms (in run / alone) | wire ms (rank 0 / least) "
        "| of which sync / transfer | floor ms | x floor | speedup vs gradwire dense "
        "| vs best dense | wire speedup (rank 0 / least) | transfer speedup |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    out += [_md_case(c) for c in results["cases"]]
    out += _md_transport(results) + _md_planner(results) + _md_tail(results)
    return "\n".join(out) + "\n"


# --- PNG ---------------------------------------------------------------------------

def _plot_speedups(ax, cases):
    links = sorted({c["link"] for c in cases}, key=rates.rate_sort_key)
    plotted = False
    for prof in sorted({c["profile"] for c in cases}):
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


def _plot_times(ax, cases):
    labels, wire, other, ddp = [], [], [], []
    for c in cases:
        system = "gradwire" if c["system"] == "gradwire" else "DDP"
        method = c["method"][4:] if c["method"].startswith("ddp ") else c["method"]
        labels.append(f"{c['profile']} {c['link']} {system} {method}")
        total = c["iter_ms_median"]
        w = min(total, c.get("wire_ms_median") or 0.0) if c["system"] == "gradwire" else 0.0
        wire.append(w)
        other.append(total - w if c["system"] == "gradwire" else 0.0)
        ddp.append(0.0 if c["system"] == "gradwire" else total)
    y = list(range(len(labels)))
    ax.barh(y, wire, color="tab:blue", label="gradwire: in transport calls (wire + waiting)")
    ax.barh(y, other, left=wire, color="tab:orange", label="gradwire: compression, MAC, copies")
    ax.barh(y, ddp, color="tab:green", label="PyTorch DDP: exchange")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("exchange time per iteration (ms, median)")
    ax.set_title("Time per iteration per system")
    ax.legend(fontsize=7)


def plot_title(results):
    cfg = results["config"]
    title = (f"gradwire cluster_bench: {cfg['cluster']} - {cfg['date_utc']} - "
             f"{cfg['machine']['cores']}-core {cfg['machine']['cpu']}")
    return f"{incomplete(results)}\n{title}" if incomplete(results) else title


def plot(results, path):
    """The PNG; its title (also the PNG's Title text chunk) says INCOMPLETE when it was."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
    _plot_speedups(axes[0], results["cases"])
    _plot_times(axes[1], results["cases"])
    title = plot_title(results)
    fig.suptitle(title, fontsize=9, color="red" if incomplete(results) else "black")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Title": title})
    plt.close(fig)
