#!/bin/bash
# Forced pairs on the transformer profile, 4 loopback ranks: process CPU per step (rank mean).
out=/tmp/arab/slope; mkdir -p $out
export GRADWIRE_JOB_SECRET=$(openssl rand -hex 32)
for ratio in 0.001 0.01 0.02 0.05; do
 for ex in sparse_allgather sparse_allreduce; do
  for b in old new3; do
    [ $ex = sparse_allgather ] && [ $b = old ] && continue
    /usr/bin/python3 /work/main/tools/launch.py --nproc 4 -- /tmp/eb_$b --profile_file=/tmp/transformer.profile \
      --iters=6 --warmup=2 --bucket_size_mb=50 --event_loop_nice=19 --spec=topk:ratio=$ratio \
      --exchange=$ex --json_out=$out/$b.$ex.$ratio.{rank}.json > $out/$b.$ex.$ratio.log 2>&1
    /usr/bin/python3 - "$out" "$b.$ex.$ratio" <<'PY'
import json,sys
out,name=sys.argv[1:]
js=[json.load(open(f"{out}/{name}.{k}.json")) for k in range(4)]
n=len(js); it=sum(j["iter_ms"]["median"] for j in js)/n; cpu=sum(j["process_cpu_ms_median"] for j in js)/n
print(f"{name}: iter {it:.1f} ms, process CPU {cpu:.1f} ms, params {js[0]['params']}")
PY
  done
 done
done
