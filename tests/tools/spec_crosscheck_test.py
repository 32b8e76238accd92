#!/usr/bin/env python3
"""tools/gwtools/spec.py against the library's own parser (CompressionSpec::Parse,
through the Python binding's canonical_spec): for a corpus of spec strings, both
accept with the same canonical string, or both refuse.

    spec_crosscheck_test.py --package_dir lib/python --tools_dir tools
"""

import argparse
import itertools
import random
import sys

CORPUS = [
    "none", "fp16", "bf16", "topk", "approx_topk", "randomk", "qsgd", "sign",
    "topk:ratio=0.01", "approx_topk:ratio=0.001", "qsgd:bits=4", "qsgd:bits=4,bucket=512",
    "sign:bucket=1024,ef=on", "topk:ratio=0.01,ef=off", "randomk:ratio=0.01,seed=7",
    "topk:ratio=0.01,values=fp16,indices=raw", " topk : ratio = 0.5 , values = bf16 ",
    "topk:ratio=1e-3", "topk:ratio=1E-3", "topk:ratio=+0.25", "topk:ratio=.5", "topk:ratio=1.",
    "topk:ratio=1", "topk:ratio=0.1234567890123", "topk:ratio=inf", "topk:ratio=nan",
    "topk:ratio=1e-400", "topk:ratio=-0", "topk:ratio=0x1p-3", "topk:ratio=0x.8",
    "topk:ratio=0x1.0p-1", "topk:ratio=0xg", "topk:ratio=1_0",
    "qsgd:bits=+3", "qsgd:bits=-3", "qsgd:bits=08", "qsgd:bits=4.0", "qsgd:bits=99999999999",
    "sign:bucket=4294967295", "sign:bucket=4294967296", "sign:bucket=+7", "sign:bucket=-0",
    "randomk:seed=18446744073709551615", "randomk:seed=18446744073709551616",
    "topk:", "topk:,", "topk:ratio", "topk:ratio=", "topk:=1", "topk:ratio=0.1,ratio=0.1",
    "topk:Ratio=0.1", "TOPK", "top k", "", ":", "topk:ratio=0.1,", "none:ef=on",
    "fp16:values=fp16", "topk:indices=none", "topk:values=packed", "topk:ef=default",
    "topk=0.01", "topk:ratio=0.01;none", "topk:ratio=0.1:bits=2", "qsgd:bits=4 2",
    # Digits and spaces outside ASCII (Python's \d, int() and float() take them).
    "qsgd:bits=\u0663", "topk:ratio=\u0660.\u0660\u0661", "qsgd:bucket=\uff15\uff11\uff12",
    "qsgd:bits=4\u00a0", "\u2003topk", "topk:ratio=0.01\u3000", "randomk:seed=\u0967",
    "topk:ratio=1e\u0663",
]


def random_corpus(n, seed=1):
    rng = random.Random(seed)
    methods = ["none", "topk", "approx_topk", "randomk", "qsgd", "sign", "fp16", "x"]
    values = {"ratio": ["0.01", "1", "0", "2", "1e-2", "abc", "0.3333333333333333"],
              "bits": ["1", "8", "9", "0", "4x"], "bucket": ["1", "0", "512", "65536"],
              "ef": ["on", "off", "default", "yes"], "seed": ["0", "42", "-1"],
              "values": ["fp32", "fp16", "bf16", "int8"], "indices": ["raw", "varint", "x"]}
    out = []
    for _ in range(n):
        keys = rng.sample(sorted(values), rng.randint(0, 3))
        items = [f"{k}={rng.choice(values[k])}" for k in keys]
        text = rng.choice(methods)
        if items or rng.random() < 0.1:
            text += ":" + ",".join(items)
        out.append(text)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--package_dir", required=True)
    p.add_argument("--tools_dir", required=True)
    a = p.parse_args()
    sys.path[:0] = [a.package_dir, a.tools_dir]
    import gradwire
    from gwtools import spec

    mismatches = []
    accepted = refused = 0
    for text in itertools.chain(CORPUS, random_corpus(400)):
        try:
            mine = spec.parse_spec(text).canonical()
        except spec.SpecError as e:
            mine = f"refused ({e})"
        try:
            theirs = gradwire.canonical_spec(text)
        except ValueError as e:
            theirs = f"refused ({e})"
        if mine.startswith("refused") != theirs.startswith("refused") or (
                not mine.startswith("refused") and mine != theirs):
            mismatches.append(f"{text!r}: gwtools {mine}; library {theirs}")
        elif mine.startswith("refused"):
            refused += 1
        else:
            accepted += 1
    for m in mismatches:
        print("MISMATCH", m)
    print(f"{accepted} accepted and {refused} refused alike, {len(mismatches)} mismatches")
    return 1 if mismatches or not accepted or not refused else 0


if __name__ == "__main__":
    sys.exit(main())
