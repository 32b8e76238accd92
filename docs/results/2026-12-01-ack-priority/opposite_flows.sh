# flows both ways at once between host 0 and 1; then show the ACK class's packets
N=${1:-4000000}
for pair in "0 1 5555" "1 0 5556"; do set -- $pair
ip netns exec $(eval echo \$GWC_NS_$2) python3 -c "
import socket,time
s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('0.0.0.0',$3));s.listen(1)
c,_=s.accept();n=0;t=time.time()
while True:
  b=c.recv(1<<20)
  if not b: break
  n+=len(b)
print('$1->$2', n, round(n*8/(time.time()-t)/1e6,2),'Mbit/s')" & done
sleep 0.5
ip netns exec $GWC_NS_0 python3 -c "
import socket
s=socket.create_connection(('$GWC_ADDR_1',5555)); s.sendall(b'x'*$N); s.close()" &
ip netns exec $GWC_NS_1 python3 -c "
import socket
s=socket.create_connection(('$GWC_ADDR_0',5556)); s.sendall(b'x'*$N); s.close()" &
wait
tc -n $GWC_NS_0 -s class show dev eth0 | grep -A2 "class htb 2:10\|class htb 2:20" | grep -v "^ *rate\|lended"
