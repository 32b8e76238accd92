"""The library's predictions for each case of scaling.json with the case's
measured model, as measured (cores_per_rank 0.5) and with a core a rank.
/usr/bin/python3 share_predictions.py DIR_WITH_GRADWIRE_PACKAGE scaling.json"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import gradwire as g  # noqa: E402

d = json.load(open(sys.argv[2]))
n = int(d.get("settings", {}).get("elements", 16777216))
for c in d["cases"]:
    m = c["model"]
    own = dict(m, cores_per_rank=1.0)

    def pred(model, kind):
        return g.exchange_cost(kind, int(c["hosts"]), n, c["spec"], **model)["seconds"] * 1e3

    print(f"{c['name']:22s} measured {c['ms']:6.1f} ms | cores_per_rank={m['cores_per_rank']:g}"
          f" link {m['bytes_per_second']:.3g} B/s | a core each: allgather"
          f" {pred(own, 'sparse_allgather'):6.1f} allreduce {pred(own, 'sparse_allreduce'):6.1f}"
          f" -> {g.choose_exchange(int(c['hosts']), n, c['spec'], **own)} | as measured:"
          f" allgather {pred(m, 'sparse_allgather'):6.1f} allreduce"
          f" {pred(m, 'sparse_allreduce'):6.1f} -> "
          f"{g.choose_exchange(int(c['hosts']), n, c['spec'], **m)}")
