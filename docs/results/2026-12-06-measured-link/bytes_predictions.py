"""The library's predictions for each case of a scaling.json whose models
carry seconds_per_byte: as measured, and with seconds_per_byte 0; the CPU
per rank each implies (compute x cores_per_rank) against the run's, and
the decodes per entry the run's CPU would need.
/usr/bin/python3 bytes_predictions.py DIR_WITH_GRADWIRE_PACKAGE scaling.json"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import gradwire as g  # noqa: E402

d = json.load(open(sys.argv[2]))
n = int(d.get("settings", {}).get("elements", 16777216))
for c in d["cases"]:
    m, p = c["model"], int(c["hosts"])
    m0 = dict(m, seconds_per_byte=0.0)
    e = g.exchange_cost(c["exchange"], p, n, c["spec"], **m)
    e0 = g.exchange_cost(c["exchange"], p, n, c["spec"], **m0)
    run_cpu = (c.get("cpu_ms_all_ranks") or 0) / p
    k = int(float(c["spec"].split("=")[1]) * n)
    nodec = g.exchange_cost(c["exchange"], p, n, c["spec"],
                            **dict(m, decoded_entries_per_second=1e30))["compute_s"]
    need = (run_cpu / 1e3 - nodec * m["cores_per_rank"]) * m["decoded_entries_per_second"] / k
    print(f"{c['name']:22s} step {c['ms']:6.1f} ms, CPU/rank {run_cpu:6.1f} | model "
          f"{e['seconds'] * 1e3:6.1f} ({100 * (e['seconds'] * 1e3 / c['ms'] - 1):+.0f} %), CPU "
          f"{e['compute_s'] * m['cores_per_rank'] * 1e3:6.1f} | without bytes "
          f"{e0['seconds'] * 1e3:6.1f} ({100 * (e0['seconds'] * 1e3 / c['ms'] - 1):+.0f} %), CPU "
          f"{e0['compute_s'] * m['cores_per_rank'] * 1e3:6.1f} | seconds_per_byte "
          f"{m['seconds_per_byte'] * 1e9:.3f} ns | picks "
          f"{g.choose_exchange(p, n, c['spec'], **m)} (without bytes "
          f"{g.choose_exchange(p, n, c['spec'], **m0)}) | decodes/entry the run needs {need:.1f}")
