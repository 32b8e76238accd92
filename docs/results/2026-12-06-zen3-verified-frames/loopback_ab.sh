#!/bin/bash
# Loopback A/B of exchange_bench builds: 4 ranks (tools/launch.py), ResNet-50's profile, 50 MiB buckets.
# usage: loopback_ab.sh ROUNDS SPEC... ; binaries /tmp/eb_old (4edabb3) and /tmp/eb_new (the change)
rounds=$1; shift
cd /work/main
for i in $(seq $rounds); do
  for spec in "$@"; do
    for b in old new; do
      out=$(timeout 300 /usr/bin/python3 tools/launch.py --nproc 4 -- /tmp/eb_$b --profile_file=/tmp/resnet50.profile \
        --iters=10 --warmup=2 --bucket_size_mb=50 --event_loop_nice=19 --spec=$spec 2>&1 | grep "iter median")
      cpu=$(echo "$out" | sed -n 's/.*process CPU \([0-9.]*\) ms per step.*/\1/p' | sort -n | tr '\n' ' ')
      step=$(echo "$out" | sed -n 's/.*iter median \([0-9.]*\) ms.*/\1/p' | sort -n | tr '\n' ' ')
      comp=$(echo "$out" | sed -n 's/.*compress \([0-9.]*\) ms.*/\1/p' | sort -n | tr '\n' ' ')
      echo "r$i $spec $b | cpu/step: $cpu| step: $step| compress: $comp"
    done
  done
done
