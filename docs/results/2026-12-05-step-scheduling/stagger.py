"""Per timeline dir: median over steps of (latest rank's step start - earliest), and the
median over steps of (last rank's end - earliest start), i.e. the job's step."""
import json, glob, sys, statistics as st
for d in sys.argv[1:]:
    starts, ends = {}, {}
    for f in glob.glob(d + "/*topk*.rank*.json"):
        for e in json.load(open(f))["traceEvents"]:
            if e.get("name") == "step" and e.get("ph") == "X":
                s = e["args"]["step"]
                starts.setdefault(s, []).append(e["ts"] / 1e3)
                ends.setdefault(s, []).append((e["ts"] + e["dur"]) / 1e3)
    spread = [max(v) - min(v) for s, v in starts.items() if len(v) == 4]
    job = [max(ends[s]) - min(starts[s]) for s in starts if len(starts[s]) == 4]
    print("%-28s steps %2d  start spread median %5.1f ms (max %5.1f)  job step median %6.1f ms" % (
        d.split('/')[-2] + '/' + d.split('/')[-1], len(spread), st.median(spread), max(spread), st.median(job)))
