"""Both vs_memcpy figures of pairs.sh's runs side by side, and their spread.

    python3 pairs.py pairs-1.txt pairs-2.txt pairs-3.txt
"""
import re, sys, statistics
rows = {}
for p in sys.argv[1:]:
    for line in open(p):
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        if not line.startswith(("Encode/", "DecodeAverage4/")) or "real_time" not in line:
            continue
        f = line.split()
        r = rows.setdefault(f[0].replace("/real_time", ""), {"paired": [], "apart": [], "ms": []})
        r["paired"].append(float(f[-2])); r["apart"].append(float(f[-1])); r["ms"].append(float(f[1]))
print(f"{'row':48s} {'paired (runs)':20s} {'apart (runs)':20s} ms")
sp, sa = [], []
for k, r in rows.items():
    f = lambda v: " ".join(f"{x:.3f}" for x in v)
    print(f"{k:48s} {f(r['paired']):20s} {f(r['apart']):20s} {f(r['ms'])}")
    if len(r["paired"]) > 1:
        sp.append((max(r["paired"]) - min(r["paired"])) / statistics.median(r["paired"]))
        sa.append((max(r["apart"]) - min(r["apart"])) / statistics.median(r["apart"]))
if sp:
    print(f"rows {len(sp)}; relative range (max-min)/median over runs, median over rows: paired {statistics.median(sp):.3f}, apart {statistics.median(sa):.3f}; mean paired {statistics.mean(sp):.3f} apart {statistics.mean(sa):.3f}")
    under = lambda key: sum(1 for r in rows.values() for x in r[key] if x < 0.5)
    print("figures under 0.5: paired", under("paired"), "apart", under("apart"), "of", sum(len(r['paired']) for r in rows.values()))
