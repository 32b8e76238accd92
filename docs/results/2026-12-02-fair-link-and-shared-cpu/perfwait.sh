while [ "$(pgrep -f 'exchange_bench.*topk' | wc -l)" -lt 4 ]; do sleep 0.1; done
sleep 0.8
perf record -a -g -q -o /tmp/q1/sys.data -- sleep 1.5 2>/dev/null
