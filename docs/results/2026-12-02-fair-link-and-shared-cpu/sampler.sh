while [ ! -f /tmp/q1/stop ]; do
  n=$(pgrep -f "exchange_bench.*topk" | wc -l)
  echo "$n $(head -1 /proc/stat)"
  sleep 0.2
done
