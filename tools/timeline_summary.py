#!/usr/bin/env python3
"""Where a step's time went, from exchange_bench --timeline_out traces.

    exchange_bench ... --timeline_out=/tmp/tl/rank{rank}.json
    python3 tools/timeline_summary.py /tmp/tl/rank*.json [--merge all.json] [--json out.json]

Each file is one rank's Chrome trace (GradientExchanger::StepTimeline of
the timed steps, lib/comm/stage_timeline.h). Per rank, the medians over
steps of:
  step       the step's wall time (first Submit to WaitAll returning);
  encode, transfer, exchange, finish
             the time in each stage, summed over the step's buckets
             (exchange: unstaged buckets' whole exchange);
  compute, comm
             the share of the step each pipeline thread spent in a stage;
  to comm    after a bucket's encode ended, until its transfer began
             (the comm thread busy with an earlier bucket, or not yet
             scheduled), summed over buckets;
  to finish  after a transfer ended, until its finish began;
  first      from the step's start until the first stage began;
  tail       from the last stage's end until WaitAll returned.
Then the step whose wall time is the median of rank 0's, bucket by
bucket: each stage's start and end in ms from the step's start. With
more than one rank, that step on every rank, one line per stage in the
order the stages began, in ms from the earliest rank's start of it (the
ranks' clocks are one machine's in an emulated cluster; across machines
they are only as close as the hosts' clocks): which rank the transfers
waited for. --merge writes every rank's events into one trace
(chrome://tracing, Perfetto).
"""
import argparse
import json
import signal
import statistics
import sys

STAGES = ("encode", "transfer", "exchange", "finish")


def load(path):
    """A rank's trace: {"rank": r, "steps": {step: {"begin", "end", "spans"}}}."""
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"timeline_summary: cannot read {path}: {e}")
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise SystemExit(f"timeline_summary: {path} is not a Chrome trace (no traceEvents list)")
    steps, rank = {}, None
    for e in trace["traceEvents"]:
        if not isinstance(e, dict) or e.get("ph") not in ("X", "i"):
            continue
        try:
            rank = int(e["pid"])
            step = int(e["args"]["step"])
            start = float(e["ts"]) / 1e3
            end = start + float(e.get("dur", 0)) / 1e3
            name = str(e["name"])
        except (KeyError, TypeError, ValueError):
            raise SystemExit(f"timeline_summary: {path}: malformed event {e!r:.200}")
        s = steps.setdefault(step, {"begin": None, "end": None, "spans": []})
        if name == "step":
            s["begin"], s["end"] = start, end
        elif name in STAGES:
            s["spans"].append({"stage": name, "bucket": e["args"].get("bucket"),
                               "start": start, "end": end})
    steps = {k: v for k, v in steps.items() if v["begin"] is not None}
    if not steps:
        raise SystemExit(f"timeline_summary: {path} holds no timed step")
    return {"rank": rank, "path": path, "events": trace["traceEvents"], "steps": steps}


def step_figures(s):
    """One step's figures (ms), as the module's docstring lists them."""
    spans = sorted(s["spans"], key=lambda x: x["start"])
    wall = s["end"] - s["begin"]
    f = {"step": wall}
    for stage in STAGES:
        f[stage] = sum(x["end"] - x["start"] for x in spans if x["stage"] == stage)
    f["compute"] = (f["encode"] + f["finish"]) / wall if wall > 0 else 0.0
    f["comm"] = (f["transfer"] + f["exchange"]) / wall if wall > 0 else 0.0
    by_bucket = {}
    for x in spans:
        by_bucket.setdefault(x["bucket"], {})[x["stage"]] = x
    f["to comm"] = sum(max(0.0, b["transfer"]["start"] - b["encode"]["end"])
                       for b in by_bucket.values() if "encode" in b and "transfer" in b)
    f["to finish"] = sum(max(0.0, b["finish"]["start"] - w["end"])
                         for b in by_bucket.values() if "finish" in b
                         for w in [b.get("transfer") or b.get("exchange")] if w)
    f["first"] = (spans[0]["start"] - s["begin"]) if spans else wall
    f["tail"] = (s["end"] - max(x["end"] for x in spans)) if spans else 0.0
    return f


def summarize(ranks):
    rows = []
    for r in ranks:
        figs = [step_figures(s) for s in r["steps"].values()]
        row = {"rank": r["rank"], "steps": len(figs)}
        for k in figs[0]:
            row[k] = statistics.median(f[k] for f in figs)
        rows.append(row)
    return rows


def print_rows(rows, out):
    cols = ["step", "encode", "transfer", "exchange", "finish", "to comm", "to finish", "first",
            "tail"]
    print("per rank, medians over steps (ms; compute/comm: share of the step in a stage):",
          file=out)
    print(f"{'rank':>4s} {'steps':>5s} " + " ".join(f"{c:>9s}" for c in cols)
          + f" {'compute':>8s} {'comm':>6s}", file=out)
    for r in rows:
        print(f"{r['rank']:4d} {r['steps']:5d} " + " ".join(f"{r[c]:9.1f}" for c in cols)
              + f" {100 * r['compute']:7.0f}% {100 * r['comm']:5.0f}%", file=out)


def span_line(bucket, stage, start, end, t0):
    """One stage's line of a step view: start and end in ms from t0."""
    return (f"bucket {bucket!s:>3s} {stage:9s} {start - t0:8.1f} -> {end - t0:8.1f}  "
            f"({end - start:.1f})")


def print_median_step(rank, out):
    steps = sorted(rank["steps"].items(), key=lambda kv: kv[1]["end"] - kv[1]["begin"])
    number, s = steps[len(steps) // 2]
    print(f"\nrank {rank['rank']}, step {number} (its median, {s['end'] - s['begin']:.1f} ms), "
          "ms from the step's start:", file=out)
    for x in sorted(s["spans"], key=lambda x: x["start"]):
        print("  " + span_line(x["bucket"], x["stage"], x["start"], x["end"], s["begin"]),
              file=out)
    return number


def print_step_all_ranks(ranks, number, out):
    """Step `number` on every rank that has it, on one clock."""
    have = [r for r in ranks if number in r["steps"]]
    t0 = min(r["steps"][number]["begin"] for r in have)
    print(f"\nstep {number} on every rank, ms from the earliest rank's start of it:", file=out)
    lines = []  # (start, rank, end, stage, bucket): sorted by start, then rank
    for r in have:
        s = r["steps"][number]
        lines.append((s["begin"], r["rank"], s["end"], "step", ""))
        lines += [(x["start"], r["rank"], x["end"], x["stage"], x["bucket"]) for x in s["spans"]]
    for start, rank, end, stage, bucket in sorted(lines, key=lambda x: x[:2]):
        print(f"  rank {rank:3d} " + span_line(bucket, stage, start, end, t0), file=out)


def main(argv=None):
    # Piped into head: stop quietly when the reader goes.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("traces", nargs="+", help="exchange_bench --timeline_out files, one per rank")
    p.add_argument("--merge", help="write every rank's events into one trace file here")
    p.add_argument("--json", help="write the per-rank medians as JSON here")
    a = p.parse_args(argv)
    ranks = sorted((load(path) for path in a.traces), key=lambda r: r["rank"])
    rows = summarize(ranks)
    print_rows(rows, sys.stdout)
    number = print_median_step(ranks[0], sys.stdout)
    if len(ranks) > 1:
        print_step_all_ranks(ranks, number, sys.stdout)
    if a.merge:
        events = [e for r in ranks for e in r["events"]]
        with open(a.merge, "w") as f:
            json.dump({"displayTimeUnit": "ms", "traceEvents": events}, f)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ranks": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
