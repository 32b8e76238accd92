"""End-to-end gradient-exchange benchmark on an emulated Ethernet cluster.

For every profile x link rate x method it brings up an emulated cluster
(tools/emulated_cluster.py: one network namespace per host, tbf-shaped veth
links to a switch namespace), starts the ranks of tools/exchange_bench
inside the hosts (one rank per host, or --ranks_per_host ranks sharing a
host's loopback as the GPUs of one node), runs warm-up then timed
iterations, and reads the JSON result file each rank writes. The PyTorch
peers (tools/ddp_peer.py: DDP's default allreduce, the fp16 hook and
PowerSGD rank 1 and 4) run on the same cluster, same profile, same run.

    /usr/bin/python3 tools/cluster_bench.py                    # README defaults
    /usr/bin/python3 tools/cluster_bench.py --links 1gbit,10gbit \\
        --methods 'none;topk:ratio=0.01;approx_topk:ratio=0.001' \\
        --hierarchical both --ranks_per_host 2

Methods: the library's compression spec strings (lib/codec/compression_spec.h),
separated by ';' because specs contain commas: "none" (dense ring
allreduce), "topk:ratio=0.01", "approx_topk:ratio=0.001", "randomk:ratio=0.01",
"qsgd:bits=4", "sign", "fp16", "bf16", with any further settings
("topk:ratio=0.01,values=fp16,indices=raw"). --hierarchical off|on|both runs
each compressed method flat, hierarchical (HiTopKComm) or both; "none" is
always flat and always run (every speedup needs it).
Peers: none, fp16, powersgd1, powersgd4 (DDP hooks), or "" for no peers.

Outputs: a table on stdout, a progress line per case on stderr, and in
--out_dir a JSON file with every figure and the exact configuration
(machine, date, kernel, netem availability, shaping), a Markdown table and
a PNG plot. A run that stops early (a rank fails, a case times out, Ctrl-C)
is marked INCOMPLETE in all four, shows the failing ranks' errors, keeps
the rank logs and exits with status 1.

Figures, per case (rank 0's medians unless noted):
  iter       exchange time of one iteration: first Submit .. WaitAll
  MB/rank    payload bytes on the host's link per rank per iteration, the
             larger of sent and received (links are shaped in each direction;
             intra-node bytes, on the host's loopback, excluded)
  util       MB/rank x 8 / iter / link rate  (wire: / wire time instead)
  compress   encode + EF + decode-accumulate time inside the run (the
             ranks share this machine's cores); "alone" is the same
             codec's time for one rank with the machine to itself
  floor      max(MB/rank x 8 / link rate, compression time alone)
  speedup    dense iter / iter (and dense wire / wire)
Must run as root for namespaces; otherwise ranks run on loopback and the
results are marked unshaped.
"""

import argparse
import os
import sys

from clusterbench import ROOT
from gwtools import rates, spec
import emulated_cluster
import model_profiles

PEER_HOOKS = {"none": ("none", None), "fp16": ("fp16", None),
              "powersgd1": ("powersgd", 1), "powersgd4": ("powersgd", 4)}
DEFAULT_METHODS = "none;topk:ratio=0.01;approx_topk:ratio=0.01"
BUCKET_HELP = (
    "bucket size for both systems (gradwire buckets, DDP bucket_cap_mb). 50 MiB (Horovod "
    "fuses up to 64 MB): the step here has no backward pass to overlap, and four ranks on two "
    "cores pay each bucket's collective rounds and thread hand-offs on shared cores. 4 hosts, "
    "1 Gbit/s, ResNet-50, 25 vs 50 MiB: approx top-k 0.1 %% 60-64 vs 47-49 ms, top-k 1 %% "
    "114-117 vs 109-115 ms, dense and DDP unchanged")
NICE_HELP = (
    "exchange_bench --event_loop_nice: raise the nice value of Gloo's event-loop thread in "
    "every gradwire rank. Emulated hosts share this machine's cores, and Gloo's loop spins on "
    "a pair whose lock a descheduled thread holds (transport/gloo_group.h); at 19 the spin "
    "yields (4 hosts, 1 Gbit/s: approx top-k 81-84 -> 68 ms per step). 0 leaves the loop "
    "alone. DDP peers run PyTorch's own Gloo, untouched")


def _workload_flags(p):
    p.add_argument("--profiles", default="resnet50",
                   help="comma-separated: " + ", ".join(model_profiles.PROFILES))
    p.add_argument("--params", type=int, help="a synthetic profile of N floats instead")
    p.add_argument("--hosts", type=int, default=4, help="emulated hosts (nodes)")
    p.add_argument("--ranks_per_host", type=int, default=1,
                   help="ranks per host (GPUs per node; they share its loopback)")
    p.add_argument("--links", default="1gbit", help="comma-separated link rates, e.g. 1gbit,10gbit")
    p.add_argument("--delay", default="0us", help="one-way delay per link (needs sch_netem)")
    p.add_argument("--shaper", default=emulated_cluster.DEFAULT_SHAPER,
                   choices=emulated_cluster.SHAPERS,
                   help="the host links' shaper (tools/emulated_cluster.py's SHAPERS; htb-ack: "
                   "pure ACKs served before queued data; tbf: one queue)")
    p.add_argument("--methods", default=DEFAULT_METHODS,
                   help="gradwire methods: compression specs separated by ';' (their grammar "
                   "follows the options), e.g. 'none;topk:ratio=0.01;qsgd:bits=4'; 'none' is "
                   "always run")
    p.add_argument("--hierarchical", choices=spec.HIERARCHICAL_CHOICES, default="off",
                   help="run each compressed method flat (off), hierarchical (on: HiTopKComm, "
                   "nodes = hosts) or both")
    p.add_argument("--peers", default="none,fp16,powersgd1,powersgd4",
                   help="comma-separated PyTorch DDP peers; empty for none")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--bucket_size_mb", type=float, default=50.0, help=BUCKET_HELP)
    p.add_argument("--bucket_views", type=int, choices=[0, 1], default=1,
                   help="1: gradients are written into bucket slots on both sides (gradwire "
                        "GradientSlot, DDP gradient_as_bucket_view): no copy in or out; "
                        "0: both copy")
    p.add_argument("--pipeline_depth", type=int, default=0,
                   help="exchanger pipeline slots (1 = no overlap of compression with the "
                   "wire); 0 = exchange_bench's default")
    p.add_argument("--event_loop_nice", type=int, default=19, help=NICE_HELP)


def _run_flags(p):
    p.add_argument("--timeout_ms", type=int, default=120000, help="deadline of every collective")
    p.add_argument("--case_timeout_s", type=float, default=900)
    p.add_argument("--linger_s", type=float, default=None,
                   help="when a rank fails, how long the others get to fail on their own (so "
                   "their errors show what they saw) before they are stopped; default "
                   "--timeout_ms + 5 s, by when every wait of theirs has hit its deadline")
    p.add_argument("--no_latency_probe", action="store_true",
                   help="skip measuring per-message latency (the planner then assumes --alpha_us)")
    p.add_argument("--no_alone", action="store_true",
                   help="skip measuring each codec's compression time alone (floor)")
    p.add_argument("--exchange_bench", default=os.path.join(ROOT, "bazel-bin/tools/exchange_bench"))
    p.add_argument("--transport_bench",
                   default=os.path.join(ROOT, "bazel-bin/bench/transport/transport_bench"),
                   help="transport-only figures (sparse allgather without codec, allgatherv "
                   "throughput); empty to skip")
    p.add_argument("--transport_reps", type=int, default=3)
    p.add_argument("--python", default="/usr/bin/python3",
                   help="interpreter with torch for the DDP peers")
    p.add_argument("--iface", default="eth0", help="interface inside each emulated host")
    p.add_argument("--loopback", action="store_true",
                   help="do not emulate a cluster: all ranks on loopback, unshaped")
    p.add_argument("--alpha_us", type=float, default=50.0,
                   help="per-message latency the planner's validation assumes where no "
                   "latency probe ran")
    p.add_argument("--out_dir", default=os.path.join(ROOT, "bench-results"))
    p.add_argument("--name", default="", help="file name stem (default: cluster_bench-DATE)")
    p.add_argument("--timeline_dir", default="",
                   help="write each gradwire case's pipeline timeline (exchange_bench "
                   "--timeline_out, one Chrome trace per rank) into this directory; "
                   "tools/timeline_summary.py reads them")
    p.add_argument("--keep_logs", action="store_true",
                   help="keep per-rank logs of a complete run too (an incomplete run's are "
                   "always kept)")


def _check(p, a):
    """Parses the lists and refuses what cannot run, naming the flag."""
    try:
        a.methods_parsed = spec.method_list(a.methods, a.hierarchical)
        a.link_list = [t.strip() for t in a.links.split(",") if t.strip()]
        for t in a.link_list:
            rates.parse_rate(t, "--links")
        rates.parse_time(a.delay, "--delay")
    except ValueError as e:
        p.error(str(e))
    if a.methods_parsed and not any(m["codec"] == "none" for m in a.methods_parsed):
        a.methods_parsed.insert(0, spec.method("none"))  # the baseline every speedup needs
    a.peer_list = [t.strip() for t in a.peers.split(",") if t.strip()]
    for t in a.peer_list:
        if t not in PEER_HOOKS:
            p.error(f"unknown peer {t!r}; use {', '.join(PEER_HOOKS)}")
    a.profile_list = ([f"params={a.params}"] if a.params else
                      [t.strip() for t in a.profiles.split(",") if t.strip()])
    for t in a.profile_list:
        if not t.startswith("params=") and t not in model_profiles.PROFILES:
            p.error(f"unknown profile {t!r}; choose from {', '.join(model_profiles.PROFILES)}")
    if a.hosts < 1 or a.ranks_per_host < 1 or a.hosts * a.ranks_per_host < 2:
        p.error("need --hosts >= 1, --ranks_per_host >= 1 and at least 2 ranks")
    if a.iters < 1 or a.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    if a.linger_s is None:
        a.linger_s = a.timeout_ms / 1000 + 5
    if a.linger_s < 0 or a.case_timeout_s <= 0:
        p.error("--linger_s must be >= 0 and --case_timeout_s > 0")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="cluster_bench.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    _workload_flags(p)
    _run_flags(p)
    a = p.parse_args(argv)
    _check(p, a)
    a.world = a.hosts * a.ranks_per_host
    a.argv = list(sys.argv[1:] if argv is None else argv)
    return a
