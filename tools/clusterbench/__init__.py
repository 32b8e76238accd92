"""The parts of tools/cluster_bench.py (the README's benchmark):

    cli      flags and their checks (the user-facing help lives there)
    run      the cases: ranks of exchange_bench, transport_bench and
             ddp_peer on the emulated cluster, supervised by gwtools.ranks
    collect  the ranks' JSON result files -> one case's figures, derived
             figures (utilisation, floors, speedups), the targets of issues 5 and 18
    report   the stdout table, Markdown and PNG, each marked INCOMPLETE
             when the run stopped early
    driver   the loop over profiles x links x methods and the run's result
"""

import os
import sys

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TOOLS)
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)


class BenchError(RuntimeError):
    """A case could not run or gave no result; the message says why."""
