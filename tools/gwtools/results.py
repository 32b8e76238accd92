"""Result files the ranks write and the benchmarks read."""

import json
import math
import os


def write_json(path, obj, indent=2):
    """Writes `obj` to `path` atomically: readers see the whole file or none."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=indent)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path):
    """The JSON object in `path`, or None when the file is missing or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def percentile(values, q):
    """Nearest-rank percentile, q in [0, 1] (exchange_bench's Percentile)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    # floor(x + 0.5): std::lround's half away from zero, not Python's round-half-even.
    return ordered[min(len(ordered) - 1, int(math.floor(q * (len(ordered) - 1) + 0.5)))]
