cd /work/main
F='(Encode/(topk:ratio=0.1|qsgd:bits=(6|8),bucket=512)/25600000|DecodeAverage4/(approx_topk|topk):ratio=0.1/1048576)'
for r in 1 2 3 4; do for b in old new; do
  echo "== $b $r"
  taskset -c 1 /tmp/cb_$b --cold --benchmark_filter="$F" --benchmark_min_time=0.2 --benchmark_color=false 2>&1 | grep -A12 "^vs_memcpy" | grep " / "
done; done
