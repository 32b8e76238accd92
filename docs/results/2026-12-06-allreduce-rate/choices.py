"""Each case's measured model (scaling.json): both kinds' predictions, the
choice, and the same with the allreduce priced at 11 of the case's own
decodes (the rule before reduced_entries_per_second).
/usr/bin/python3 choices.py PACKAGE_DIR scaling.json"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import gradwire as g  # noqa: E402

d = json.load(open(sys.argv[2]))
n = int(d.get("settings", {}).get("elements", 16777216))
measured = {(c["spec"], c["exchange"]): c["ms"] for c in d["cases"]}
for c in d["cases"]:
    m, p, spec = c["model"], int(c["hosts"]), c["spec"]
    old = dict(m, reduced_entries_per_second=m["decoded_entries_per_second"] / 11)
    row = []
    for name, model in (("new", m), ("old", old)):
        ag = g.exchange_cost("sparse_allgather", p, n, spec, **model)["seconds"] * 1e3
        ar = g.exchange_cost("sparse_allreduce", p, n, spec, **model)["seconds"] * 1e3
        row.append(f"{name}: allgather {ag:6.1f} allreduce {ar:6.1f} -> "
                   f"{g.choose_exchange(p, n, spec, **model)}")
    mag = measured.get((spec, "sparse_allgather"))
    mar = measured.get((spec, "sparse_allreduce"))
    print(f"{c['name']:24s} measured allgather {mag} allreduce {mar} | decoded "
          f"{m['decoded_entries_per_second']:.3g} reduced {m['reduced_entries_per_second']:.3g} | "
          + " | ".join(row))
