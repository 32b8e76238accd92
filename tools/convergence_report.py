"""tools/convergence.py's `report`: the runs' table (table.md) and accuracy
curves (PNG) from the run files in OUT."""

import json
import os
import statistics

from convergence_rank import METHODS

WIRE_SOURCES = {"iface_bytes_sent_per_rank_per_iter": "interface",
                "gradwire_bytes_sent_per_iter": "gradwire counters",
                "analytic_bytes_sent_per_iter": "analytic"}


def wire_bytes(r):
    for key, source in WIRE_SOURCES.items():
        if key in r:
            return r[key], source
    return None, "n/a"


def tier_hits_per_epoch(method_runs):
    """'e1 / e2 / ...': the share of each epoch's reads (all ranks, all seeds) that the
    ranks' memory and disk tiers served."""
    reads, hits = {}, {}
    for r in method_runs:
        for rank in r.get("data_cache", {}).get("ranks", []):
            for e in rank["epochs"]:
                reads[e["epoch"]] = reads.get(e["epoch"], 0) + e["reads"]
                hits[e["epoch"]] = (hits.get(e["epoch"], 0) + e["memory_hits"]
                                    + e["disk_hits"])
    return " / ".join(f"{100 * hits[e] / reads[e]:.1f} %" for e in sorted(reads)
                      if reads[e]) or "n/a"


def data_cache_table(runs, order):
    """Where the ranks' training reads came from (gradwire's DataCache), per method:
    all ranks together, mean over seeds."""
    lines = []
    for m in order:
        totals = [r["data_cache"]["total"] for r in runs[m] if "data_cache" in r]
        if not totals:
            continue

        def mean(key):
            return statistics.mean(t[key] for t in totals)
        reads = mean("reads")

        def pct(key):
            return f"{100 * mean(key) / reads:.1f} %" if reads else "n/a"
        lines.append(f"| {runs[m][0]['label']} | {len(totals)} | {reads:.0f} | "
                     f"{pct('memory_hits')} | {pct('disk_hits')} | {pct('source_reads')} | "
                     f"{mean('source_bytes') / 1e6:.1f} | "
                     f"{mean('corrupt') + mean('source_errors'):.0f} | {mean('data_s'):.1f} | "
                     f"{tier_hits_per_epoch(runs[m])} |")
    if not lines:
        return ""
    first = next(r for m in order for r in runs[m] if "data_cache" in r)["data_cache"]
    return (f"\nTraining data through gradwire's DataCache ({first['source']}, version "
            f"{first['version']}; per rank: memory tier "
            f"{first['memory_budget_bytes'] / 2**20:.0f} MiB, disk tier "
            f"{first['disk_budget_bytes'] / 2**20:.0f} MiB; all ranks, mean over seeds; "
            f"{first.get('order', 'reshuffle')} order):\n\n"
            "| method | seeds | reads | memory hits | disk hits | from source | source MB | "
            "errors | rank-s reading data | tier hits per epoch |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(lines) + "\n")


def load_runs(out):
    """{method: [run, ...]} from OUT's METHOD.seedN.json files."""
    runs = {}
    for name in sorted(os.listdir(out)):
        if name.endswith(".json") and ".seed" in name:
            with open(os.path.join(out, name)) as f:
                r = json.load(f)
            runs.setdefault(r["method"], []).append(r)
    return runs


def last3(r):
    """One evaluation is noisy (the dense run moves by ±0.5 points between
    neighbouring evaluations): the mean of a run's last three evaluations."""
    return statistics.mean(p["accuracy"] for p in r["curve"][-3:]) * 100


def reach(rs, goal):
    """Mean training seconds until the runs reached accuracy `goal`."""
    if goal is None:
        return ""
    times = []
    for r in rs:
        hit = [p["train_s"] for p in r["curve"] if p["accuracy"] >= goal]
        times.append(hit[0] if hit else None)
    return "not reached" if any(t is None for t in times) else f"{statistics.mean(times):.1f} s"


def method_row(rs, dense_final, dense_last3):
    accs = [r["final_accuracy"] * 100 for r in rs]
    mean = statistics.mean(accs)
    spread = (max(accs) - min(accs)) / 2
    b, src = wire_bytes(rs[0])
    b = statistics.mean(wire_bytes(r)[0] for r in rs) if b is not None else None
    spe = statistics.mean(r["s_per_epoch"] for r in rs)
    vs = f"{mean - dense_final * 100:+.2f}" if dense_final is not None else ""
    whole = f"{b / 1e3:.1f} kB ({src})" if b is not None else "n/a"
    steady = [r.get("steady_iface_bytes_sent_per_iter") for r in rs]
    steady = (f"{statistics.mean(steady) / 1e3:.1f} kB" if all(x is not None for x in steady)
              else "n/a")
    l3 = statistics.mean(last3(r) for r in rs)
    l3_vs = f"; {l3 - dense_last3:+.2f}" if dense_last3 is not None else ""
    target = dense_final - 0.01 if dense_final is not None else None
    return (f"| {rs[0]['label']} | {len(rs)} | {mean:.2f} ± {spread:.2f} % | {vs} | "
            f"{l3:.2f} %{l3_vs} | {whole} | {steady} | {spe:.1f} | "
            f"{reach(rs, dense_final)} | {reach(rs, target)} |")


def table(runs, order):
    """The header line and the Markdown table of every method."""
    dense = runs.get("dense")
    dense_final = statistics.mean(r["final_accuracy"] for r in dense) if dense else None
    dense_last3 = statistics.mean(last3(r) for r in dense) if dense else None
    lines = ["| method | seeds | final test accuracy (mean ± spread) | vs dense (points) | "
             "last 3 evaluations (mean; vs dense) | "
             "bytes sent / rank / iter, whole run | after warm-up (rank 0 iface) | s / epoch | "
             "train s to dense's final acc | to dense's − 1 pt |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [method_row(runs[m], dense_final, dense_last3) for m in order]
    first = next(iter(runs.values()))[0]
    head = (f"{first['world_size']} ranks, {first.get('network', '')}, "
            f"{first['iterations']} iterations "
            f"({first['iterations'] / first['iterations_per_epoch']:.2f} epochs) of batch "
            f"{first['batch_per_rank']}/rank, lr {first['lr']} "
            f"({first.get('lr_schedule', 'constant')}), {first['params']} parameters, "
            f"torch {first['torch']}")
    return head, head + "\n\n" + "\n".join(lines) + "\n"


def plot_curves(runs, order, head, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no curves (apt-get install python3-matplotlib)")
        return
    network = next(iter(runs.values()))[0].get("network", "")
    for xkey, xlabel, fname in (("iteration", "iteration", "accuracy_vs_iteration.png"),
                                ("train_s", "training wall clock (s)", "accuracy_vs_time.png")):
        fig, ax = plt.subplots(figsize=(8, 5))
        for m in order:
            r = runs[m][0]  # first seed's curve
            ax.plot([p[xkey] for p in r["curve"]], [p["accuracy"] * 100 for p in r["curve"]],
                    label=r["label"], marker=".")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"Fashion-MNIST, {head.split(',')[0]} ({network})", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, fname), dpi=110)
        plt.close(fig)
    print(f"curves: {out}/accuracy_vs_iteration.png, {out}/accuracy_vs_time.png")


def report(args):
    runs = load_runs(args.out)
    if not runs:
        print(f"no runs in {args.out}")
        return 1
    order = [m for m in METHODS if m in runs]
    head, text = table(runs, order)
    text += data_cache_table(runs, order)
    for m in order:
        for r in runs[m]:
            if "auto_report" in r:
                text += f"\nauto mode (seed {r['seed']}):\n```\n{r['auto_report']}\n```\n"
                break
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    plot_curves(runs, order, head, args.out)
    return 0
