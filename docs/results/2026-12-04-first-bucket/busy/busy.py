#!/usr/bin/env python3
"""Share of the machine's two cores busy between two instants, from /proc/stat
lines sampled every 0.1 s ("<unix time> cpu user nice system idle iowait irq
softirq steal ..."). usage: busy.py stat2.txt START END"""
import sys

rows = [l.split() for l in open(sys.argv[1])]
t0, t1 = float(sys.argv[2]), float(sys.argv[3])
sel = [(float(r[0]), list(map(int, r[2:12]))) for r in rows if t0 <= float(r[0]) <= t1]
(_, a), (_, b) = sel[0], sel[-1]
d = [y - x for x, y in zip(a, b)]
tot = sum(d)
print(f"{sel[-1][0] - sel[0][0]:.1f} s: busy {100 * (1 - (d[3] + d[4]) / tot):.1f} %, user "
      f"{100 * (d[0] + d[1]) / tot:.1f} %, system {100 * d[2] / tot:.1f} %, softirq "
      f"{100 * d[6] / tot:.1f} %")
