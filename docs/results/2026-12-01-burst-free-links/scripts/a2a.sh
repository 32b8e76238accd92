H=$1; M=$2; T0=$(python3 -c "import time;print(time.monotonic()+1)")
ADDRS=$(for i in $(seq 0 $((H-1))); do eval echo -n \$GWC_ADDR_$i,; done); ADDRS=${ADDRS%,}
for i in $(seq 0 $((H-1))); do ip netns exec $(eval echo \$GWC_NS_$i) /usr/bin/python3 /tmp/burst/a2a.py $i $ADDRS $M $T0 & done; wait
