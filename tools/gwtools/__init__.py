"""What gradwire's command-line tools share (tools/ only; lib/ never imports it).

    gwtools.spec     the compression-spec grammar ("topk:ratio=0.01"): a Python
                     mirror of CompressionSpec::Parse/ToString, plus method lists
                     and the hierarchical switch the benchmarks take
    gwtools.rates    link rates, times and loss percentages ("1gbit", "100us")
    gwtools.ports    free loopback TCP ports
    gwtools.ranks    rank-process supervision: start, watch, stop on failure or
                     timeout, exit codes, log tails and a failure report that
                     names the missing or failing ranks
    gwtools.results  JSON result files written atomically, percentiles

Plain Python 3 (no torch, no extension module), so every tool and test can
import it with whichever interpreter runs them.
"""
