#!/bin/bash
# One rank's CPU per step: world size 1; four ranks on loopback pinned to
# one core (one rank runs at a time); four ranks on loopback, both cores.
cd /work/main
OUT=/tmp/s87/bw
EB="bazel-bin/tools/exchange_bench --profile_file=/tmp/s87/resnet50.txt --iters=40 --warmup=3 --bucket_size_mb=50 --event_loop_nice=19 --spec=${SPEC:-topk:ratio=0.01}"
for r in 1 2 3; do
  /usr/bin/python3 tools/launch.py --nproc 1 -- $EB 2>&1 | grep "process CPU" | sed "s/^/world1 r$r /" >> $OUT/serial.txt
  taskset -c 0 /usr/bin/python3 tools/launch.py --nproc 4 -- $EB 2>&1 | grep "process CPU" | sed "s/^/pinned r$r /" >> $OUT/serial.txt
  /usr/bin/python3 tools/launch.py --nproc 4 -- $EB 2>&1 | grep "process CPU" | sed "s/^/loop2 r$r /" >> $OUT/serial.txt
done
