#!/bin/bash
# A/B of exchange_bench binaries on 4 loopback ranks, forced sparse allreduce.
# usage: ab.sh ROUNDS SPEC OUTDIR
rounds=$1; spec=$2; out=$3; mkdir -p $out
export GRADWIRE_JOB_SECRET=$(openssl rand -hex 32)
for r in $(seq 1 $rounds); do
  for b in $BINS; do
    /usr/bin/python3 /work/main/tools/launch.py --nproc ${NPROC:-4} -- /tmp/eb_$b --profile_file=/tmp/resnet50.profile \
      --iters=10 --warmup=2 --bucket_size_mb=${BUCKET_MB:-50} --event_loop_nice=19 --spec=$spec \
      --exchange=sparse_allreduce --json_out=$out/$b.r$r.{rank}.json > $out/$b.r$r.log 2>&1
    /usr/bin/python3 - "$out" "$b" "$r" <<'PY'
import json,sys
out,b,r=sys.argv[1:]
js=[json.load(open(f"{out}/{b}.r{r}.{k}.json")) for k in range(int(__import__("os").environ.get("NPROC","4")))]
n=len(js); it=sum(j["iter_ms"]["median"] for j in js)/n; cpu=sum(j["process_cpu_ms_median"] for j in js)/n
comp=sum(j["compress_ms_median"] for j in js)/n; ov=sum(j["overlap_fraction_median"] for j in js)/n
print(f"{b} round {r}: iter {it:.1f} ms, process CPU {cpu:.1f} ms, compress {comp:.1f} ms, overlap {ov:.2f} (means over ranks of medians)")
PY
  done
done
