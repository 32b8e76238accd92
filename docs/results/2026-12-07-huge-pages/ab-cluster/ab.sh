# OLD, NEW: checkouts built by tools/benchmark.sh (567d798, 54ae6e1); run in OLD
cd OLD
for i in 1 2 3 4 5; do
  for v in old new; do
    if [ $v = old ]; then b=OLD/bazel-bin/tools/exchange_bench; else b=NEW/bazel-bin/tools/exchange_bench; fi
    /usr/bin/python3 tools/cluster_bench.py --exchange_bench $b --methods 'topk:ratio=0.01;approx_topk:ratio=0.01' --peers '' --no_latency_probe --transport_reps 0 --out_dir /tmp/abx --name $v-$i > /tmp/abx/$v-$i.log 2>&1
  done
done
echo ALLDONE
