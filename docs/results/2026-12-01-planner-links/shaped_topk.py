"""exchange_bench (top-k 1 %, 50 MiB buckets) on 4 emulated hosts at 1 Gbit/s,
sampling /proc/stat for 4 s after 6 s; prints the CPU split and rank 3's line.
As root, from the repository root, after `bazel build -c opt //tools:exchange_bench`:

    python3 tools/model_profiles.py resnet50 > /tmp/exp/prof-resnet50.txt
    /usr/bin/python3 docs/results/2026-12-01-planner-links/shaped_topk.py \
        bazel-bin/tools/exchange_bench 150 [--event_loop_nice=0 ...]
"""
import os, sys, subprocess, time, secrets, json
sys.path.insert(0, "tools")
import emulated_cluster
from gwtools import ranks

binary, iters = sys.argv[1], int(sys.argv[2])
extra = sys.argv[3:]
def stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v
secret = secrets.token_hex(32)
with emulated_cluster.EmulatedCluster(4, "1gbit") as cl:
    job = "x" + secrets.token_hex(3)
    store = f"/tmp/exp/store-{job}"; os.makedirs(store)
    procs = []
    for r in range(4):
        env = ranks.torchrun_env({k: v for k, v in os.environ.items() if not k.startswith("GRADWIRE_")},
                                 r, 4, 1, GRADWIRE_JOB_ID=job, GRADWIRE_STORE_DIR=store,
                                 GRADWIRE_JOB_SECRET=secret)
        argv = [binary, "--profile_file=/tmp/exp/prof-resnet50.txt", f"--iters={iters}", "--warmup=3",
                "--bucket_size_mb=50", "--event_loop_nice=19", "--spec=topk:ratio=0.01", "--iface=eth0",
                f"--json_out=/tmp/exp/sh.rank{r}.json"] + extra
        procs.append(subprocess.Popen(cl.command(r, argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    time.sleep(6)
    a = stat(); t0 = time.time(); time.sleep(4); b = stat(); t1 = time.time()
    d = [y - x for x, y in zip(a, b)]
    tot = sum(d)
    names = "user nice system idle iowait irq softirq steal".split()
    print({n: round(100 * d[i] / tot, 1) for i, n in enumerate(names)})
    for p in procs:
        out, _ = p.communicate()
    print([l for l in out.splitlines() if "iter median" in l][-1][:400])
