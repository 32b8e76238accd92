CC=$3; SS=$4
for i in $(seq 0 $(($1-1))); do ip netns exec $(eval echo \$GWC_NS_$i) sysctl -q -w net.ipv4.tcp_congestion_control=$CC net.ipv4.tcp_slow_start_after_idle=$SS; done
bash /tmp/burst/a2a.sh $1 $2
