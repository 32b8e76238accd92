# Per rank and step: delay from encode end to transfer start (bucket 1 and 2),
# and the time each transfer started relative to the last rank's start.
import json, glob, sys, statistics
pat = sys.argv[1]
rows = {}
for f in sorted(glob.glob(pat)):
    ev = json.load(open(f))["traceEvents"]
    rank = f.split("rank")[-1].split(".")[0]
    by = {}
    for e in ev:
        if e.get("ph") != "X" or e["name"] == "step":
            continue
        a = e["args"]
        by[(a["step"], a["bucket"], e["name"])] = (e["ts"], e["ts"] + e["dur"])
    steps = sorted({k[0] for k in by})
    d1, d2 = [], []
    for s in steps:
        for b, d in ((1, d1), (2, d2)):
            if (s, b, "encode") in by and (s, b, "transfer") in by:
                prev_end = by.get((s, b - 1, "transfer"), (0, 0))[1] if b > 1 else 0
                ready = max(by[(s, b, "encode")][1], prev_end)
                d.append((by[(s, b, "transfer")][0] - ready) / 1e3)
    print(f"rank {rank}: delay encode/prev-transfer end -> transfer start, ms: b1 median "
          f"{statistics.median(d1):.1f} max {max(d1):.1f}; b2 median {statistics.median(d2):.1f} max {max(d2):.1f}")
