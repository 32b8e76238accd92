#!/usr/bin/env python3
"""Multi-process tests of the region exchanges -- the sparse allreduce
(lib/comm/sparse_allreduce.h) with the collectives under it
(transport/sparse_collectives.h), and the cast allreduce
(lib/comm/cast_allreduce.h): every case runs N ranks of
sparse_allreduce_rank (or, for scenarios named "cast ...",
cast_allreduce_rank) on loopback through tools/launch.py; a case passes
when every rank exits 0 with no FAILED check.

    sparse_allreduce_test.py --launch tools/launch.py --rank RANK_BINARY
        --cast_rank CAST_RANK_BINARY [--only TEXT]
"""
import argparse
import subprocess
import sys
import time

SPARSE = ("topk:ratio=0.01;approx_topk:ratio=0.05;randomk:ratio=0.1,seed=7;"
          "topk:ratio=0.02,values=fp16;topk:ratio=0.01,indices=raw,values=bf16;"
          "randomk:ratio=0.05,seed=3,values=bf16;approx_topk:ratio=0.001,values=fp16;"
          "topk:ratio=0.000001;topk:ratio=0.05,ef=off")
# Dense enough that region frames switch to the dense layout (SparCML).
DENSE = "topk:ratio=0.9;topk:ratio=0.7,indices=raw;randomk:ratio=0.9,seed=1"

# (name, ranks, scenario, arguments)
CASES = [
    ("collectives 1 rank", 1, "collectives", []),
    ("collectives 2 ranks", 2, "collectives", []),
    ("collectives 5 ranks", 5, "collectives", []),
    ("collectives 8 ranks", 8, "collectives", []),
    # direct_max=0: the groups behave as above 16 ranks (halving and
    # doubling, recursive doubling, folding in the ranks past 4 or 8).
    ("collectives 8 ranks, as above 16", 8, "collectives", ["direct_max=0"]),
    ("collectives 7 ranks, as above 16", 7, "collectives", ["direct_max=0"]),
    ("selection 3 ranks", 3, "selection", []),
    ("selection 8 ranks", 8, "selection", []),
    ("every sparse codec, 2 ranks", 2, "reference",
     [f"specs={SPARSE}", "sizes=0,1,7,1000,4099"]),
    ("every sparse codec, 3 ranks, smooth data", 3, "reference",
     [f"specs={SPARSE}", "sizes=0,5,3001", "data=smooth", "expect_uneven=1"]),
    ("uneven and empty regions, 5 ranks", 5, "reference",
     ["specs=topk:ratio=0.01;randomk:ratio=0.1,seed=7;approx_topk:ratio=0.02,values=bf16",
      "sizes=3,1000,4099", "plan=uneven"]),
    ("even regions, 4 ranks", 4, "reference",
     ["specs=topk:ratio=0.03;randomk:ratio=0.02,seed=9", "sizes=2,999", "balance=0"]),
    ("dense layouts (SparCML), 3 ranks", 3, "reference",
     [f"specs={DENSE}", "sizes=1,600,2001", "expect_dense=1"]),
    ("8 ranks", 8, "reference",
     ["specs=topk:ratio=0.01;randomk:ratio=0.05,seed=2;topk:ratio=0.02,values=fp16",
      "sizes=0,7,2000,5003", "steps=2", "data=smooth"]),
    ("communicator picks the exchange, flat 4 ranks", 4, "communicator", []),
    ("communicator picks the exchange, hier 4 nodes x 2", 8, "communicator",
     ["hier=1", "per_node=2", "n=40000"]),
    ("communicator, sparse allreduce forced, flat 4 ranks", 4, "communicator",
     ["exchange=sparse_allreduce"]),
    ("communicator, sparse allgather forced, flat 4 ranks", 4, "communicator",
     ["exchange=sparse_allgather"]),
    ("agreement by recursive doubling (as above 16 ranks), 5 ranks", 5, "reference",
     ["specs=topk:ratio=0.02;randomk:ratio=0.05,seed=4", "sizes=0,9,3001", "direct_max=0"]),
    ("as above 16 ranks (halving histograms), 8 ranks", 8, "reference",
     ["specs=topk:ratio=0.01;approx_topk:ratio=0.02", "sizes=5,4099", "data=smooth",
      "steps=2", "direct_max=0"]),
    ("mismatch length", 3, "mismatch", ["kind=length"]),
    ("mismatch length, agreement by recursive doubling", 5, "mismatch",
     ["kind=length", "direct_max=0"]),
    ("mismatch spec", 3, "mismatch", ["kind=spec"]),
    ("mismatch step", 4, "mismatch", ["kind=step"]),
    ("wrong secret", 3, "auth", ["kind=secret"]),
    ("wrong job", 3, "auth", ["kind=job"]),
    ("one forged contribution, seen by its owner only", 4, "auth", ["kind=tamper"]),
    ("forged random-k contribution", 3, "auth",
     ["kind=tamper", "spec=randomk:ratio=0.1,seed=5"]),
    ("rank dies", 3, "fault", ["timeout_ms=4000"]),
    # The cast allreduce: bit for bit the casts' allgather rounded to 16
    # bits (the owner's residual keeping the rounding), at half the ring's
    # bytes; empty regions where n < P.
    ("cast: 1 rank", 1, "cast reference", ["sizes=0,1,1000"]),
    ("cast: fp16 and bf16, 2 ranks", 2, "cast reference", ["sizes=0,1,7,1000,100003"]),
    ("cast: 3 ranks", 3, "cast reference", ["sizes=0,2,4099", "specs=fp16;bf16;fp16:ef=off"]),
    ("cast: 4 ranks", 4, "cast reference", ["sizes=3,1000,100003", "steps=3"]),
    ("cast: 5 ranks, empty regions", 5, "cast reference", ["sizes=0,1,3,4,4099"]),
    ("cast: 8 ranks", 8, "cast reference", ["sizes=7,5003,100003"]),
    ("cast: 5 ranks, agreement by recursive doubling", 5, "cast reference",
     ["sizes=0,3,3001", "direct_max=0"]),
    ("cast: communicator picks it, flat 4 ranks", 4, "cast communicator", []),
    ("cast: communicator picks it, flat 3 ranks", 3, "cast communicator", ["spec=bf16"]),
    ("cast: communicator keeps the allgather, flat 2 ranks", 2, "cast communicator",
     ["spec=bf16"]),
    ("cast: communicator, hier 4 nodes x 2", 8, "cast communicator",
     ["hier=1", "per_node=2", "n=40000"]),
    ("cast: mismatch length", 3, "cast mismatch", ["kind=length"]),
    ("cast: mismatch spec", 4, "cast mismatch", ["kind=spec"]),
    ("cast: mismatch step, by recursive doubling", 5, "cast mismatch",
     ["kind=step", "direct_max=0"]),
    ("cast: wrong secret", 3, "cast auth", ["kind=secret"]),
    ("cast: wrong job", 3, "cast auth", ["kind=job"]),
    ("cast: one forged contribution, seen by its owner only", 4, "cast auth", ["kind=tamper"]),
    ("cast: rank dies", 4, "cast fault", ["timeout_ms=4000"]),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--launch", required=True)
    parser.add_argument("--rank", required=True)
    parser.add_argument("--cast_rank", required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    failed = []
    start = time.monotonic()
    for name, nproc, scenario, extra in CASES:
        if args.only not in name:
            continue
        per_node = [e.split("=")[1] for e in extra if e.startswith("per_node=")]
        cmd = [sys.executable, args.launch, f"--nproc={nproc}", f"--timeout={args.timeout}"]
        cmd += [f"--ranks_per_node={per_node[0]}"] if per_node else []
        binary = args.rank
        if scenario.startswith("cast "):
            binary, scenario = args.cast_rank, scenario[len("cast "):]
        cmd += ["--", binary, scenario] + [e for e in extra if not e.startswith("per_node=")]
        t0 = time.monotonic()
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = run.stdout.splitlines()
        checks = sum(1 for l in lines if l.endswith(" ok"))
        bad = [l for l in lines if " FAILED " in l or "SETUP" in l]
        ok = run.returncode == 0 and checks > 0 and not bad
        print(f"{'PASS' if ok else 'FAIL'} {name}: {checks} checks, "
              f"{time.monotonic() - t0:.1f} s", flush=True)
        for l in lines:
            if l.startswith("[rank 0]") and any(k in l for k in ("INFO", "MISMATCH", "AUTH",
                                                                 "FAULT")):
                print("    " + l, flush=True)
        if not ok:
            failed.append(name)
            print("\n".join(lines[-80:]), flush=True)
    print(f"{len(failed)} failed, {time.monotonic() - start:.1f} s total")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
