#!/bin/bash
# Alternating A/B of the dense tail on the emulated 4-host cluster (README config).
cd /work/main
# off: the same binary with the dense tail's own ring.
printf '#!/bin/sh\nexec /work/main/bazel-bin/tools/exchange_bench "$@" --carry_dense_tail=false\n' > /tmp/eb0.sh
chmod +x /tmp/eb0.sh
for r in 1 2 3; do
  for v in off on; do
    if [ $v = off ]; then EB=/tmp/eb0.sh; else EB=bazel-bin/tools/exchange_bench; fi
    timeout 900 /usr/bin/python3 tools/cluster_bench.py --links 1gbit,2500mbit --iters 20 \
      --methods 'topk:ratio=0.01' --peers "" --no_latency_probe --transport_bench "" --no_alone \
      --exchange_bench $EB --timeline_dir /tmp/res/tl-$v-$r --out_dir /tmp/res/cb --name ab-$v-$r \
      > /tmp/res/ab-$v-$r.txt 2>&1
    grep "gradwire topk" /tmp/res/ab-$v-$r.txt | head -2 | cut -c1-90 | sed "s/^/$v $r /"
  done
done
