#!/usr/bin/env python3
"""Performance model of gradwire's gradient exchange: alpha-beta costs of
ring allreduce and ring allgather, plus measured compression time.

It answers "what would an iteration's exchange cost on MY cluster?" for
scales this machine cannot run (e.g. 16 nodes x 8 GPUs at 10/25 Gbit/s),
and checks itself against tools/cluster_bench.py's measurements.

    planner.py --validate bench-results/X.json       # error % per measured case
    planner.py --validate_scaling /tmp/scaling/scaling.json   # scaling_bench.py's run
    planner.py --scale --out docs/results/DATE-planner-scale  # every exchange at scale,
                                     # the library's cost model per bucket (planner_exchange.py)
    planner.py --calibrate bench-results/X.json \\
        --nodes 16 --gpus_per_node 8 --links 10gbit,25gbit \\
        --profiles resnet50,bert_large \\
        --methods 'none;topk:ratio=0.01;approx_topk:ratio=0.001' --hierarchical both

The model (P ranks, n fp32 elements, density rho, B link goodput in
bytes/s, alpha per message):
  dense ring allreduce        agreement + 2(P-1) alpha + 2(P-1)/P * 4n / B (sealed:
                              + chunk tags and GMAC time); agreement = 1 alpha, any P
  sparse allgather            h alpha + (P-1) * s / B, s = payload per rank (one round
                              after a bucket's first exchange);
                              h = 1 (direct) for P <= 16 and s <= 256 KiB, else P-1
                              (top-k: (4 + v)k + frame, v = delta-varint bytes per
                              index for geometric gaps; random-k: 4k; qsgd:
                              nb/8 + 4n/512)
  flat at scale               every one of the N*G ranks is a ring member; a NIC
                              carries one ring edge per direction
  hierarchical (HiTopKComm)   intra-node reduce-scatter, compression of a 1/G
                              shard, G parallel cross-node allgathers sharing the
                              NIC: (N-1) * s_node / B, intra-node allgather; its dense
                              buckets likewise where the library's rule picks it
                              (gradwire.dense_two_level): reduce-scatter in the node,
                              G sealed rings of 2(N-1) steps across nodes on 1/G
                              shards, allgather in the node
  dense tail                  flat: the last dense bucket rides in the last compressed
                              bucket's allgather frames, + (P-1) * 4n_dense / B, no
                              ring, where the library's rule picks it
                              (gradwire.dense_rides_allgather; GradientExchanger)
  compression                 CPU: per-element cost measured alone by cluster_bench;
                              with more ranks than cores, the step is the smooth
                              maximum (planner_validation.shared_core_step) of that
                              chain (its largest compressed bucket's share of the
                              compression at the loopback/alone CPU ratio) and a
                              bound: ranks/cores x one rank's process CPU per step
                              (measured on loopback with the same ranks: codec, decoding
                              every peer's frame, MACs, kernel TCP) + the CPU the case's
                              bytes cost on the shaped link (per byte, from the run's
                              dense case); no transfer time is added (it overlaps);
                              GPU: PREDICTED from byte floors at 3.0 TB/s
                              (REFERENCE.md), not measured in this project yet
  iteration                   serial: compression + wire (no overlap: hierarchical
                              buckets, or pipeline_depth 1);
                              pipelined: max(compress, wire) + one bucket's smaller
                              part (compression of bucket i+1 during wire of bucket i:
                              GradientExchanger's flat buckets at pipeline_depth >= 2)
Validation uses the run's own link figures: per-message latency from its
latency probe and, where the transport-only bench ran, the goodput its
largest allgatherv or dense ring achieved (if below the nominal rate x
TCP goodput). Intra-node transfers (hierarchical mode's reduce-scatter and
allgather over a host's loopback) are modelled as free; on this 2-core
machine they are not (memory copies by the kernel), so hierarchical runs
here are under-predicted.
Validation adds the host-side cost of the dense gradwire run of the same
profile and link (iter - wire - averaging - MACs, per element: copying
gradients into buckets and back), which every gradwire method pays; the
dense run's MACs are not part of it (the sealed ring's model charges them).
Buckets follow the library's own plan (lib/comm/bucket_plan.h through the
Python extension: `bazel build //lib/python:_gradwire.so`, run with
/usr/bin/python3): tensors < 16384 elements or 1-D go dense; the rest fuse
into 25 MiB buckets, one codec call each.
"""

import argparse
import functools
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_profiles  # noqa: E402
from gwtools import rates, spec  # noqa: E402

# The gradwire package (lib/python/gradwire, in the source tree and in
# Bazel runfiles alike); it finds the built extension itself.
PACKAGE_DIR = os.path.join(os.path.dirname(HERE), "lib", "python")
_gradwire = None

# TCP payload per byte on a 1500-byte-MTU Ethernet link (1448/1514 with
# TCP timestamps): what a shaper's or NIC's line rate leaves for data.
TCP_GOODPUT = 1448.0 / 1514.0
FRAME_OVERHEAD = 72 + 8 + 32 + 64  # header, checksum, MAC, descriptor (approx.)
GPU_BYTES_PER_S = 3.0e12  # H100 achievable (REFERENCE.md); a prediction, not a measurement


def parse_rate(text):
    return rates.parse_rate(text, "--links")


def parse_method(text, hierarchical=False):
    """A spec string (gwtools.spec grammar) and the hierarchical switch, as the
    dict (codec, density, bits, hierarchical, ...) the model reads."""
    return spec.method(text, hierarchical)


def case_method(case):
    """The method a cluster_bench case ran: its canonical spec and switch."""
    return parse_method(case["spec"], case["hierarchical"])


# --- the plan: which elements go dense, which through the codec -------------

class ExtensionMissing(RuntimeError):
    """gradwire's Python extension cannot be loaded."""


def gradwire_extension():
    """The gradwire package with its extension loaded, or ExtensionMissing
    saying how to build it."""
    global _gradwire
    if _gradwire is None:
        if PACKAGE_DIR not in sys.path:
            sys.path.insert(0, PACKAGE_DIR)
        try:
            import gradwire
        except (ImportError, OSError) as e:
            raise ExtensionMissing(
                f"the bucket plan comes from gradwire's Python extension, which did not load: "
                f"{e}\nBuild it (bazel build //lib/python:_gradwire.so) and run planner.py "
                f"with the interpreter it is built for, /usr/bin/python3 (this is "
                f"{sys.executable})") from e
        _gradwire = gradwire
    return _gradwire


@functools.lru_cache(maxsize=64)
def _library_plan(shapes_key, bucket_bytes, dense_below, dense_1d, compressing):
    """gradwire.bucket_plan of the tensors in backprop order (shapes_key: the
    shapes as a tuple of tuples), once per setting: predict() and the
    validation ask for the same plan many times."""
    return tuple(gradwire_extension().bucket_plan(
        "topk" if compressing else "none", list(reversed(shapes_key)),
        bucket_bytes=bucket_bytes, dense_below_elements=dense_below,
        dense_one_dimensional=dense_1d))


def library_plan(shapes, bucket_bytes=25 << 20, dense_below=16384, dense_1d=True,
                 compressing=True):
    """The library's own plan (gradwire.bucket_plan): GradientExchanger's
    buckets as dicts, the tensors taken in backprop order. compressing=False:
    method "none"."""
    return _library_plan(tuple(tuple(s) for s in shapes), bucket_bytes, dense_below, dense_1d,
                         compressing)


def bucket_plan(shapes, bucket_bytes=25 << 20, dense_below=16384, dense_1d=True,
                compressing=True):
    """(dense bucket sizes, compressed bucket sizes) in elements, as
    GradientExchanger fuses them (library_plan)."""
    plan = library_plan(shapes, bucket_bytes, dense_below, dense_1d, compressing)
    return ([b["elements"] for b in plan if b["path"] == "dense"],
            [b["elements"] for b in plan if b["path"] == "compressed"])


def dense_tail(shapes, bucket_bytes, m, p):
    """(dense elements, compressed elements) of the dense tail that rides
    in its compressed bucket's frames (GradientExchanger's
    carry_dense_tail), or None: the buckets still open at the end of
    backprop are one dense and one compressed bucket, flat, the compressed
    one takes the sparse allgather and the library's cost model
    (gradwire.dense_rides_allgather, default model as the runs use) prefers
    riding to a ring of its own."""
    if m["codec"] == "none" or m["hierarchical"] or p < 2:
        return None
    plan = library_plan(shapes, bucket_bytes)
    tail_dense = [b["elements"] for b in plan if b["tail"] and b["path"] == "dense"]
    tail_comp = [b["elements"] for b in plan if b["tail"] and b["path"] == "compressed"]
    if len(tail_dense) != 1 or len(tail_comp) != 1 or tail_dense[0] == 0:
        return None
    if library_exchange(m, p, tail_comp[0]) != "sparse_allgather":
        return None
    if not gradwire_extension().dense_rides_allgather(p, tail_dense[0]):
        return None
    return tail_dense[0], tail_comp[0]


def varint_index_bytes(density):
    """Expected bytes of one delta-varint index (the top-k default) when
    gaps are geometric with mean 1/density: one byte, plus one for each
    7-bit group the gap - 1 needs beyond the first. Measured on the
    ResNet-50 profile: 1.28 bytes at 1 %, 1.78 at 0.1 % (model 1.28, 1.88)."""
    q = 1.0 - min(1.0, max(density, 1e-12))
    return 1.0 + sum(q ** (1 << (7 * j)) for j in (1, 2, 3, 4))


def payload_bytes(m, n):
    """Bytes one rank contributes for a compressed bucket of n elements."""
    c = m["codec"]
    if c in ("topk", "approx_topk"):
        k = max(1, round(m["density"] * n)) if n else 0
        return (4 + varint_index_bytes(m["density"])) * k + FRAME_OVERHEAD
    if c == "randomk":
        k = max(1, round(m["density"] * n)) if n else 0
        return 4 * k + FRAME_OVERHEAD
    if c == "qsgd":
        return math.ceil(n * m["bits"] / 8) + 4 * math.ceil(n / 512) + FRAME_OVERHEAD
    if c == "sign":
        return math.ceil(n / 8) + 4 * math.ceil(n / 512) + FRAME_OVERHEAD
    if c in ("fp16", "bf16"):
        return 2 * n + FRAME_OVERHEAD
    raise ValueError(c)


def gpu_compress_s(m, n, contributions):
    """PREDICTED GPU time: encode (+EF) and decode-accumulate byte floors
    at GPU_BYTES_PER_S (REFERENCE.md byte floors)."""
    c = m["codec"]
    if c in ("topk", "approx_topk", "randomk"):
        k = max(1, round(m["density"] * n))
        enc = 12 * n + 8 * k          # read g, read e, write e + selected pairs
        dec = 4 * n + 8 * contributions * k
    elif c in ("qsgd", "sign"):
        bits = m["bits"] or 1
        enc = 12 * n + n * bits / 8 + 4 * n / 512
        dec = 4 * n + contributions * (n * bits / 8 + 4 * n / 512)
    else:  # fp16/bf16 casts
        enc = 4 * n + 2 * n
        dec = 4 * n + contributions * 2 * n
    return (enc + dec) / GPU_BYTES_PER_S


# --- alpha-beta costs --------------------------------------------------------

def ring_allreduce_s(p, nbytes, bw, alpha):
    if p <= 1 or nbytes == 0:
        return 0.0
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes / bw


# transport/sealed_ring.h: dense buffers (and hierarchical intra-node stages)
# ride a ring in segments of up to 1 MiB, each with a 28-byte AES-256-GMAC
# trailer; one core MACs 10.4 GB/s (docs/communicator.md, measured).
SEALED_SEGMENT_BYTES, CHUNK_TRAILER_BYTES, GMAC_BYTES_PER_S = 1 << 20, 28, 10.4e9


def sealed_ring_bytes(p, nbytes):
    """Bytes a rank sends in the sealed ring allreduce: 2(P-1) chunks + trailers."""
    chunk = nbytes / max(p, 1)
    segments = math.ceil(chunk / SEALED_SEGMENT_BYTES)
    return 2 * (p - 1) * (chunk + segments * CHUNK_TRAILER_BYTES) if p > 1 and nbytes else 0.0


def sealed_mac_s(p, nbytes, cpu_share=1.0):
    """A rank's MAC time in a sealed ring allreduce (verify 2(P-1), seal P
    chunks) on its share of a core; each half alone costs about half."""
    return (3 * (p - 1) + 1) / p * nbytes / GMAC_BYTES_PER_S * cpu_share if p > 1 else 0.0


def sealed_ring_allreduce_s(p, nbytes, bw, alpha, cpu_share=1.0):
    """The dense path: 2(P-1) steps over the trailered bytes, MACs serial."""
    if p <= 1 or nbytes == 0:
        return 0.0
    return 2 * (p - 1) * alpha + sealed_ring_bytes(p, nbytes) / bw + sealed_mac_s(p, nbytes,
                                                                                    cpu_share)


# transport/gloo_group.h GroupOptions: gathers go direct (one message hop)
# in groups of up to this many ranks; allgatherv only for blocks up to this.
DIRECT_MAX_RANKS = 16
DIRECT_MAX_BLOCK_BYTES = 256 << 10


def agreement_s(p, alpha):
    """The agreement round before every collective: one direct hop, any P."""
    return alpha if p > 1 else 0.0


def allgather_s(p, nbytes_per_rank, bw, alpha):
    """The frames' allgatherv: direct or ring, the same bytes per link."""
    if p <= 1:
        return 0.0
    direct = p <= DIRECT_MAX_RANKS and nbytes_per_rank <= DIRECT_MAX_BLOCK_BYTES
    return (1 if direct else p - 1) * alpha + (p - 1) * nbytes_per_rank / bw


def library_exchange(m, p, n):
    """The exchange the library's Communicator picks for a flat compressed
    bucket of n elements on p ranks with its default cost model
    (gradwire.choose_exchange; exchange_bench does not measure the link,
    and the hook keeps the defaults unless given exchange_model=):
    "dense_ring", "sparse_allgather", "sparse_allreduce" or "cast_allreduce"."""
    if p < 2:
        return "sparse_allgather"
    return gradwire_extension().choose_exchange(p, n, m["spec"])


def predict(shapes, m, nodes, gpus_per_node, link_bps, alpha_s=50e-6, goodput=TCP_GOODPUT,
            intra_bytes_per_s=None, cpu_ns_per_element=None, cpu_share=1.0,
            bucket_bytes=25 << 20, measured_bytes_per_s=None, agreement=True):
    """Predicted exchange of one iteration. Returns a dict of seconds/bytes.

    nodes x gpus_per_node ranks; link_bps is each node's NIC; intra-node
    transfers use intra_bytes_per_s (None: free, as loopback is here).
    """
    p = nodes * gpus_per_node
    bw = link_bps / 8 * goodput
    if measured_bytes_per_s:  # what this host really moves per direction (may be CPU-bound)
        bw = min(bw, measured_bytes_per_s)
    compressing = m["codec"] != "none"
    dense_b, comp_b = bucket_plan(shapes, bucket_bytes, compressing=compressing)
    # The dense tail riding in its compressed bucket's frames: no ring of
    # its own; its (P - 1) x 4 bytes an element join that allgather.
    rider = dense_tail(shapes, bucket_bytes, m, p)
    if rider:
        dense_b = list(dense_b)
        dense_b.remove(rider[0])
    intra = intra_bytes_per_s
    wire = 0.0
    nic_bytes = 0.0

    def sealed_ring(n):
        """(seconds, NIC bytes) of one sealed ring over all p ranks of n
        floats; a NIC carries one ring edge."""
        secs = sealed_ring_allreduce_s(p, 4 * n, bw, alpha_s, cpu_share)
        if agreement:  # gradwire's agreement round before every collective
            secs += agreement_s(p, alpha_s)
        return secs, sealed_ring_bytes(p, 4 * n)

    def dense_bucket(n):
        """(seconds, NIC bytes) of a dense bucket: the world's sealed ring, or
        in hierarchical mode with several GPUs and nodes the node stages and
        g sealed rings across the nodes on 1/g shards sharing the NIC
        (Communicator::DenseHierarchical)."""
        g = gpus_per_node
        if not (m["hierarchical"] and gradwire_extension().dense_two_level(
                nodes, g, n, bytes_per_second=bw, seconds_per_round=alpha_s)):
            return sealed_ring(n)
        shard = math.ceil(n / g)
        secs = sealed_ring_allreduce_s(nodes, 4 * shard, bw / g, alpha_s, cpu_share)
        if agreement:
            secs += agreement_s(nodes, alpha_s)
        if intra:  # the node's reduce-scatter and allgather: one ring's worth
            secs += ring_allreduce_s(g, 4 * n, intra, alpha_s)
        secs += sealed_mac_s(g, 4 * n, cpu_share)  # both sealed halves in the node
        return secs, g * sealed_ring_bytes(nodes, 4 * shard)

    for n in dense_b:
        secs, nbytes = dense_bucket(n)
        wire += secs
        nic_bytes += nbytes
    cpu_elements = 0
    gpu_s = 0.0
    for n in comp_b:
        kind = None if m["hierarchical"] else library_exchange(m, p, n)
        if m["hierarchical"]:
            g = gpus_per_node
            shard = math.ceil(n / g)
            if g > 1 and intra:
                wire += ring_allreduce_s(g, 4 * n, intra, alpha_s) / 2  # reduce-scatter half
            # Both sealed intra-node halves MAC on the CPU, loopback or not.
            wire += sealed_mac_s(g, 4 * n, cpu_share)
            s = payload_bytes(m, shard)
            # g parallel cross-node rings share the NIC: it carries g * s per step.
            # world-wide agreement (descriptors inside one agreement round),
            # then descriptors and frames across nodes (one round each).
            wire += (agreement_s(p, alpha_s) + agreement_s(nodes, alpha_s) +
                     allgather_s(nodes, s, bw / g, alpha_s))
            nic_bytes += (nodes - 1) * g * s
            if g > 1 and intra:
                wire += ring_allreduce_s(g, 4 * n, intra, alpha_s) / 2  # allgather half
            cpu_elements += shard
            gpu_s += gpu_compress_s(m, shard, nodes)
        elif kind == "cast_allreduce":
            # lib/comm/cast_allreduce.h: agreement, a 16-bit alltoall of
            # (P-1)/P 2n bytes (P-1 waves), the verdict (log2 P hops), and
            # the sealed ring allgather of the 16-bit averages (half a ring
            # of 2n bytes).
            wire += (agreement_s(p, alpha_s) + (p - 1) * alpha_s + (p - 1) / p * 2 * n / bw +
                     math.ceil(math.log2(p)) * alpha_s + agreement_s(p, alpha_s) +
                     sealed_ring_allreduce_s(p, 2 * n, bw, alpha_s, cpu_share) / 2)
            nic_bytes += (p - 1) / p * 4 * n
            cpu_elements += n
        elif kind == "dense_ring":
            # The library's cost model (defaults: the runs do not measure
            # the link) sends this bucket by the sealed ring, uncompressed:
            # fp16 or bf16 on 4 ranks, whose frames would move as many bytes.
            secs, nbytes = sealed_ring(n)
            wire += secs
            nic_bytes += nbytes
        else:
            s = payload_bytes(m, n)
            if rider and n == rider[1]:
                s += 4 * rider[0]  # the dense section (its header is noise)
                rider = None
            # After a bucket's first exchange, descriptor and frame travel
            # as one bounded block: no agreement round (sparse_allgather.h).
            wire += allgather_s(p, s, bw, alpha_s)
            nic_bytes += (p - 1) * s
            cpu_elements += n
            gpu_s += gpu_compress_s(m, n, p)
    # The largest compressed bucket's share of the compressed elements: the
    # part of the compression a pipeline of buckets cannot hide behind
    # another bucket's transfer (its encode first, or its decode last).
    frac = max(comp_b) / max(1, sum(comp_b)) if comp_b else 0.0
    out = {"wire_s": wire, "nic_bytes_per_iter": nic_bytes,
           "dense_buckets": len(dense_b), "compressed_buckets": len(comp_b),
           "largest_bucket_share": frac,
           "gpu_compress_s_predicted": gpu_s if compressing else 0.0}
    if compressing and cpu_ns_per_element is not None:
        cpu = cpu_elements * cpu_ns_per_element * 1e-9 * cpu_share
        out["cpu_compress_s"] = cpu
        out["cpu_serial_s"] = cpu + wire
        out["cpu_pipelined_s"] = max(cpu, wire) + min(cpu, wire) * frac
    out["gpu_serial_s"] = gpu_s + wire
    out["gpu_pipelined_s"] = max(gpu_s, wire) + min(gpu_s, wire) * frac
    return out


def shapes_for(profile):
    if profile.startswith("params="):
        return model_profiles.profile(None, int(profile.split("=", 1)[1]))
    return model_profiles.profile(profile)


def compressed_elements(shapes, m):
    return sum(bucket_plan(shapes, compressing=True)[1]) if m["codec"] != "none" else 0


def scale_table(profiles, methods, nodes, gpus, links, alpha_s, cal, intra, out=sys.stdout):
    rows = []
    for prof in profiles:
        shapes = shapes_for(prof)
        dense = {}
        for link in links:
            rate = parse_rate(link)
            for m in methods:
                pr = predict(shapes, m, nodes, gpus, rate, alpha_s=alpha_s,
                             intra_bytes_per_s=intra, cpu_ns_per_element=cal.get(m["spec"]))
                if m["codec"] == "none":
                    dense[link] = pr["wire_s"]
                row = {"profile": prof, "nodes": nodes, "gpus_per_node": gpus, "link": link,
                       "method": m["name"], **pr}
                d = dense.get(link)
                best = pr["wire_s"] if m["codec"] == "none" else pr["gpu_pipelined_s"]
                row["gpu_pipelined_speedup_vs_dense"] = d / best if d else None
                rows.append(row)
    print(f"{'profile':10s} {'scale':>6s} {'link':7s} {'method':28s} {'NIC MB':>8s} "
          f"{'wire ms':>8s} "
          f"{'GPU comp*':>9s} {'GPU ser*':>9s} {'GPU pipe*':>9s} {'x dense':>7s} "
          f"{'CPU comp':>9s} {'CPU ser':>8s}", file=out)
    for r in rows:
        cpu = r.get("cpu_compress_s")
        print(f"{r['profile']:10s} {r['nodes']:>2d}x{r['gpus_per_node']:<3d} {r['link']:7s} "
              f"{r['method']:28s} {r['nic_bytes_per_iter'] / 1e6:8.1f} {r['wire_s'] * 1e3:8.1f} "
              f"{r['gpu_compress_s_predicted'] * 1e3:9.2f} {r['gpu_serial_s'] * 1e3:9.1f} "
              f"{r['gpu_pipelined_s'] * 1e3:9.1f} "
              f"{(r['gpu_pipelined_speedup_vs_dense'] or 0):6.2f}x "
              f"{('%.0f' % (cpu * 1e3)) if cpu is not None else '-':>9s} "
              f"{('%.0f' % (r['cpu_serial_s'] * 1e3)) if cpu is not None else '-':>8s}", file=out)
    print("* GPU columns are PREDICTED from byte floors at 3.0 TB/s (no GPU kernel timings are "
          "measured in this project yet); CPU columns use compression per element measured "
          "alone on this machine (one core per rank). ser = compression + wire (no overlap); "
          "pipe = compression of bucket i+1 overlapping the wire of bucket i (GradientExchanger "
          "pipelines flat buckets since comm 06bee87).", file=out)
    return rows


def read_results(path):
    """A cluster_bench JSON file; ValueError naming it when it cannot be read."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not JSON: {e}") from None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--validate", help="cluster_bench JSON: compare predictions with it")
    p.add_argument("--calibrate", help="cluster_bench JSON whose per-element compression "
                   "times (alone) feed the CPU columns (default: --validate's)")
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--gpus_per_node", type=int, default=8)
    p.add_argument("--links", default="10gbit,25gbit")
    p.add_argument("--profiles", default="resnet50,bert_large")
    p.add_argument("--methods", default="none;topk:ratio=0.01;approx_topk:ratio=0.001",
                   help="compression specs separated by ';' (specs contain commas), e.g. "
                   "'none;topk:ratio=0.01;qsgd:bits=4'")
    p.add_argument("--hierarchical", choices=spec.HIERARCHICAL_CHOICES, default="both",
                   help="predict each compressed method flat (off), hierarchical (on) or both")
    p.add_argument("--alpha_us", type=float, default=50.0,
                   help="per-message latency (TCP over veth here ~50 us; datacenter ~25 us)")
    p.add_argument("--intra_gbytes", type=float, default=100.0,
                   help="intra-node GB/s at scale (NVLink-class); 0 = free")
    p.add_argument("--json_out")
    args = sys.argv[1:] if argv is None else argv
    if any(t.split("=")[0] in ("--validate_scaling", "--scale") for t in args):
        import planner_exchange  # the library's cost model per bucket (sparse allreduce)
        return planner_exchange.main(args)
    a = p.parse_args(argv)
    if not 1 <= a.nodes <= 1 << 20:
        p.error(f"--nodes must be in 1..1048576, got {a.nodes}")
    if not 1 <= a.gpus_per_node <= 1024:
        p.error(f"--gpus_per_node must be in 1..1024, got {a.gpus_per_node}")
    if not 0 <= a.alpha_us <= 1e9:  # NaN fails too
        p.error(f"--alpha_us must be a time in [0, 1e9] us, got {a.alpha_us}")
    if not 0 <= a.intra_gbytes <= 1e6:
        p.error(f"--intra_gbytes must be in [0, 1e6] GB/s, got {a.intra_gbytes}")
    if a.json_out and not os.path.isdir(os.path.dirname(os.path.abspath(a.json_out))):
        p.error(f"--json_out={a.json_out}: its directory does not exist")
    try:
        gradwire_extension()
    except ExtensionMissing as e:
        print(f"planner: {e}", file=sys.stderr)
        return 2
    alpha = a.alpha_us * 1e-6
    report = {"alpha_us": a.alpha_us, "tcp_goodput": TCP_GOODPUT,
              "gpu_bytes_per_s_predicted": GPU_BYTES_PER_S}
    import planner_validation  # noqa: E402  (imports this module)
    cal = {}
    cal_src = a.calibrate or a.validate
    current = cal_src  # the file being read, for the error
    try:
        if cal_src:
            cal = planner_validation.calibration(read_results(cal_src))
        if a.validate:
            current = a.validate
            results = read_results(a.validate)
            rows, _ = planner_validation.validate(results, alpha)
            print("Validation against", a.validate)
            planner_validation.print_validation(rows)
            report["validation"] = rows
            print()
    except (KeyError, TypeError, AttributeError, IndexError) as e:
        print(f"planner: {current} is not a cluster_bench result file "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"planner: {e}", file=sys.stderr)
        return 2
    try:
        profiles = [t for t in a.profiles.split(",") if t]
        methods = spec.method_list(a.methods, a.hierarchical)
        links = [t for t in a.links.split(",") if t]
        for t in links:
            parse_rate(t)
        print(f"Predicted exchange per iteration at {a.nodes} nodes x {a.gpus_per_node} GPUs "
              f"(alpha {a.alpha_us:g} us, TCP goodput {TCP_GOODPUT:.3f} of line rate)")
        report["scale"] = scale_table(profiles, methods, a.nodes, a.gpus_per_node, links, alpha,
                                      cal, a.intra_gbytes * 1e9 if a.intra_gbytes > 0 else None)
        report["cpu_ns_per_element"] = cal
    except ValueError as e:
        print(f"planner: {e}", file=sys.stderr)
        return 2
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
