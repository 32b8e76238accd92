# usage: [GWDIR=checkout] [TUN=glibc tunables] bash alone.sh N [SPEC]
# one rank alone, as cluster_bench's compression_alone, N times
cd ${GWDIR:-/tmp/rd}
for i in $(seq 1 $1); do
  d=$(mktemp -d)
  GLIBC_TUNABLES=${TUN:-} RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 \
  GRADWIRE_JOB_ID=alone$i GRADWIRE_STORE_DIR=$d GRADWIRE_JOB_SECRET=0123456789abcdef0123456789abcdef \
  ./bazel-bin/tools/exchange_bench --profile=resnet50 --iters=10 --warmup=3 --bucket_size_mb=50 \
     --spec=${2:-topk:ratio=0.01} --json_out=$d/r.json > $d/log 2>&1
  /usr/bin/python3 -c "
import json,sys; r=json.load(open('$d/r.json')); print('%s compress %.1f auth %.1f cpu %.1f iter %.1f' % ('$i', r['compress_ms_median'], r.get('auth_ms_median',0), r['process_cpu_ms_median'], r.get('iter_ms_median',0)))" 2>&1 || tail -3 $d/log
  rm -rf $d
done
