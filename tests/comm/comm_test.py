#!/usr/bin/env python3
"""Multi-process tests of the communicator (lib/communicator.h,
lib/gradient_exchanger.h): each case launches N ranks of comm_rank on
loopback with tools/launch.py and requires every rank to exit 0 with no
failed CHECK. Ranks-per-node emulates nodes for the hierarchical mode.

    comm_test.py [--launch PATH] [--rank PATH] [--only SUBSTRING]
"""
import argparse
import os
import subprocess
import sys
import time

ALL = ("none;fp16;bf16;topk:ratio=0.01;approx_topk:ratio=0.05;randomk:ratio=0.1,seed=7;"
       "qsgd:bits=4,bucket=64;sign:bucket=32")
# k = 1 from a tiny ratio, fp16 values with varint indices (uneven frame
# sizes across ranks), raw u32 indices (the default is varint), 2-bit
# QSGD, approximate top-k at 0.1 %.
EXTRA = ("topk:ratio=0.000001;topk:ratio=0.02,values=fp16,indices=varint;"
         "topk:ratio=0.01,indices=raw;qsgd:bits=2,bucket=100;approx_topk:ratio=0.001")

# (name, nproc, ranks per node, scenario, args)
CASES = [
    ("flat 2 ranks, every codec", 2, 0, "reference",
     [f"specs={ALL};{EXTRA}", "sizes=0,1,7,1000,4099"]),
    ("flat 3 ranks, every codec", 3, 0, "reference", [f"specs={ALL}", "sizes=0,5,3001"]),
    ("flat 8 ranks", 8, 0, "reference",
     ["specs=topk:ratio=0.01;sign:bucket=32;fp16;randomk:ratio=0.05", "sizes=0,1,2000",
      "steps=2"]),
    ("hier 4 = 2 nodes x 2, every codec", 4, 2, "reference",
     [f"specs={ALL};{EXTRA}", "hier=1", "sizes=0,1,7,1000,4099"]),
    ("hier 3 = 3 nodes x 1", 3, 1, "reference", [f"specs={ALL}", "hier=1", "sizes=0,7,4099"]),
    ("hier 6 = 2 nodes x 3", 6, 3, "reference",
     ["specs=topk:ratio=0.01;qsgd:bits=4,bucket=64;randomk:ratio=0.1,seed=7;bf16", "hier=1",
      "sizes=0,2,1000,4099", "steps=2"]),
    ("hier 2 = 1 node x 2", 2, 2, "reference",
     ["specs=topk:ratio=0.01;sign:bucket=32", "hier=1", "sizes=0,1,1001"]),
    ("mismatch length", 3, 0, "mismatch", ["kind=length"]),
    ("mismatch spec", 3, 0, "mismatch", ["kind=spec"]),
    ("mismatch step", 3, 0, "mismatch", ["kind=step"]),
    ("mismatch dense vs compressed", 3, 0, "mismatch", ["kind=path"]),
    ("mismatch dense section length", 3, 0, "mismatch", ["kind=dense_length"]),
    # The same mismatches after bucket 0 was agreed once: the one-round
    # exchange checks the table once the blocks are in. (A length change
    # is refused by the odd rank's residual before anything is sent.)
    ("mismatch step, late", 3, 0, "mismatch", ["kind=step", "late=1"]),
    ("mismatch dense section length, late", 3, 0, "mismatch", ["kind=dense_length", "late=1"]),
    ("every rank changes a bucket's dense section", 3, 0, "reshape", []),
    ("every rank changes a bucket's dense section, QSGD", 2, 0, "reshape",
     ["spec=qsgd:bits=4,bucket=64"]),
    ("mismatch length hier", 4, 2, "mismatch", ["kind=length", "hier=1"]),
    ("mismatch spec hier", 4, 2, "mismatch", ["kind=spec", "hier=1"]),
    # Issue 19: a dense job with two secrets must fail on both ranks.
    ("wrong secret, method none", 2, 0, "auth", ["kind=secret", "spec=none"]),
    ("wrong job, method none", 2, 0, "auth", ["kind=job", "spec=none"]),
    ("wrong secret", 3, 0, "auth", ["kind=secret"]),
    ("wrong job", 3, 0, "auth", ["kind=job"]),
    ("wrong secret, frames with a dense section", 3, 0, "auth", ["kind=secret", "dense=1"]),
    ("wrong secret hier", 4, 2, "auth", ["kind=secret", "hier=1"]),
    ("async + checkpoint flat", 3, 0, "async", ["spec=topk:ratio=0.05"]),
    # 1 MB buckets: the last compressed bucket and the dense one are both
    # open at the end of backprop, and the dense tail rides in its frames.
    ("async + checkpoint flat, the dense tail rides", 3, 0, "async",
     ["spec=topk:ratio=0.05", "bucket_bytes=1000000", "expect_ride=1"]),
    ("async + checkpoint flat, the dense tail rides, random-k", 2, 0, "async",
     ["spec=randomk:ratio=0.05", "bucket_bytes=1000000", "expect_ride=1"]),
    # fp16 on 4 ranks: the cast allreduce, staged (Prepare on the compute
    # thread, Complete on the comm thread) against the synchronous call.
    ("async + checkpoint flat, fp16 by the cast allreduce", 4, 0, "async", ["spec=fp16"]),
    ("async + checkpoint hier", 4, 2, "async", ["spec=qsgd:bits=4,bucket=64", "hier=1"]),
    ("rank dies mid-step", 3, 0, "fault", ["timeout_ms=4000"]),
    ("rank dies mid-step hier", 4, 2, "fault", ["timeout_ms=4000", "hier=1"]),
    ("rank dies before a barrier", 3, 0, "fault", ["timeout_ms=4000", "barrier=1"]),
    ("stopped rank named by WaitAll", 3, 0, "stop", ["timeout_ms=2000"]),
    ("stopped rank named by WaitAll, method none", 3, 0, "stop", ["timeout_ms=2000", "spec=none"]),
]


def runfile(rel):
    for root in (os.environ.get("TEST_SRCDIR", ""), os.environ.get("RUNFILES_DIR", "")):
        if root:
            p = os.path.join(root, "gradwire", rel)
            if os.path.exists(p):
                return p
    return rel


def main():
    # Under --config=tsan: the one benign Gloo race (see tsan.supp).
    if "TSAN_OPTIONS" in os.environ:
        supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tsan.supp")
        os.environ["TSAN_OPTIONS"] += f" suppressions={supp}"
    parser = argparse.ArgumentParser()
    parser.add_argument("--launch", default=runfile("tools/launch.py"))
    parser.add_argument("--rank", default=runfile("tests/comm/comm_rank"))
    parser.add_argument("--only", default="")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    failed = []
    start = time.monotonic()
    for name, nproc, per_node, scenario, extra in CASES:
        if args.only and args.only not in name:
            continue
        cmd = [sys.executable, args.launch, f"--nproc={nproc}", f"--timeout={args.timeout}"]
        if per_node:
            cmd.append(f"--ranks_per_node={per_node}")
        cmd += ["--", args.rank, scenario] + extra
        t0 = time.monotonic()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        secs = time.monotonic() - t0
        out = proc.stdout
        checks = out.count(" ok\n")
        bad = [l for l in out.splitlines() if "FAILED" in l or "SETUP" in l]
        ok = proc.returncode == 0 and not bad and checks > 0
        print(f"{'PASS' if ok else 'FAIL'} {name}: {nproc} ranks, {checks} checks, {secs:.1f} s",
              flush=True)
        for l in out.splitlines():
            if l.split("] ", 1)[-1].startswith(("MISMATCH", "AUTH", "FAULT", "STOP ")) and l.startswith("[rank 0]"):
                print("    " + l, flush=True)
        if not ok:
            failed.append(name)
            print(out[-6000:], flush=True)
    print(f"{len(failed)} failed, {time.monotonic() - start:.1f} s total")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
