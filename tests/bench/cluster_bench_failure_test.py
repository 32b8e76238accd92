#!/usr/bin/env python3
"""A benchmark whose case fails is reported as incomplete everywhere (issue 19).

Runs tools/cluster_bench.py on loopback, 3 ranks, methods "none" then
"topk:ratio=0.01", through a wrapper around exchange_bench that lets the
dense case run normally but makes the top-k case long and SIGKILLs its rank 1
after two seconds (it dies with no output). Then checks that:
  - cluster_bench exits non-zero;
  - stdout, the Markdown, the JSON and the PNG's title say INCOMPLETE;
  - the report shows the survivors' own errors (ranks 0 and 2), names rank 1
    as the suspect, and does not show only the killed rank's empty tail;
  - the rank logs are kept, the failing case's among them;
  - the dense case that did complete is still reported.

    cluster_bench_failure_test.py --tools DIR --exchange_bench PATH
"""

import argparse
import json
import os
import stat
import subprocess
import sys
import tempfile

from check_bench_json import check, summary


WRAPPER = """#!/bin/bash
# exchange_bench, except in the top-k case: every rank runs long, and rank 1
# is killed (SIGKILL, no output of its own) after two seconds.
case " $* " in
  *" --spec=topk"*)
    if [ "$RANK" = 1 ]; then (sleep 2; kill -9 $$) & fi
    exec "{real}" "$@" --iters=1000000 ;;
esac
exec "{real}" "$@"
"""


def png_title(path):
    """The PNG's tEXt "Title" chunk (matplotlib's savefig metadata), or None."""
    with open(path, "rb") as f:
        data = f.read()
    at = data.find(b"tEXtTitle\x00")
    if at < 0:
        return None
    length = int.from_bytes(data[at - 4:at], "big")
    return data[at + 10:at + 4 + length].decode("latin-1")


def run_bench(a, out):
    wrapper = os.path.join(out, "exchange_bench_wrapper.sh")
    with open(wrapper, "w") as f:
        f.write(WRAPPER.replace("{real}", os.path.abspath(a.exchange_bench)))
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
    cmd = [sys.executable, os.path.join(a.tools, "cluster_bench.py"), "--loopback",
           "--exchange_bench", wrapper, "--transport_bench", "", "--peers", "",
           "--hosts", "3", "--params", "200000", "--iters", "3", "--warmup", "1",
           "--methods", "none;topk:ratio=0.01", "--no_alone", "--timeout_ms", "10000",
           "--case_timeout_s", "60", "--out_dir", out, "--name", "failed"]
    env = dict(os.environ, TMPDIR=out)  # the kept rank logs land in the test's directory
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=180, env=env)
    print(p.stdout)
    return p


def check_report(text, where):
    check("INCOMPLETE RUN" in text, f"{where} says INCOMPLETE RUN")
    check("rank 1 (killed by SIGKILL, a signal the supervisor did not send)" in text,
          f"{where} names rank 1, killed from outside, as the suspect")
    for r in (0, 2):
        check(f"rank {r} (exit status 1):" in text, f"{where} shows survivor rank {r}'s exit")
    errors = [line for line in text.splitlines() if "exchange_bench: " in line]
    check(len(errors) >= 2, f"{where} shows the survivors' own errors: {errors[:2]}")
    check("rank 1 (killed by SIGKILL): no output" in text,
          f"{where} lists the killed rank's empty output as such")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tools", required=True)
    p.add_argument("--exchange_bench", required=True)
    a = p.parse_args()
    out = tempfile.mkdtemp(prefix="cluster-bench-failure-", dir=os.environ.get("TEST_TMPDIR"))
    proc = run_bench(a, out)
    check(proc.returncode == 1, f"exit status 1 (got {proc.returncode})")
    check_report(proc.stdout, "stdout")
    with open(os.path.join(out, "failed.json")) as f:
        r = json.load(f)
    check(r["config"]["complete"] is False, "JSON: config.complete is false")
    check([c["method"] for c in r["cases"]] == ["none"], "JSON: the dense case that ran is kept")
    fail = r.get("failure") or {}
    check("topk:ratio=0.01" in fail.get("case", ""), f"JSON: failure names the case: "
          f"{fail.get('case')}")
    check(list(fail.get("suspects", {})) == ["1"], f"JSON: suspects {fail.get('suspects')}")
    with open(os.path.join(out, "failed.md")) as f:
        check_report(f.read(), "Markdown")
    png = os.path.join(out, "failed.png")
    if check(os.path.exists(png), "a PNG of the cases that ran"):
        title = png_title(png) or ""
        check(title.startswith("INCOMPLETE RUN"), f"PNG title: {title[:60]!r}")
    logs = r["config"].get("logs_dir")
    if check(bool(logs) and os.path.isdir(logs), f"rank logs kept: {logs}"):
        failing = [n for n in os.listdir(logs) if n.endswith(".log")]
        texts = {}
        for n in failing:
            with open(os.path.join(logs, n), errors="replace") as f:
                texts[n] = f.read()
        check(sum("exchange_bench: " in t for t in texts.values()) >= 2,
              f"the failing case's logs hold the survivors' errors ({sorted(texts)})")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
