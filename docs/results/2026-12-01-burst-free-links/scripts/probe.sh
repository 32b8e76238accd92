# host 0 sends M bytes to host 1 after 300 ms idle, host 1 answers one byte; times each
M=${1:-150000}
ip netns exec $GWC_NS_1 /usr/bin/python3 -c "
import socket
s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('0.0.0.0',5557));s.listen(1)
c,_=s.accept();c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)
while True:
  n=0
  while n<$M:
    b=c.recv(1<<20)
    if not b: raise SystemExit
    n+=len(b)
  c.sendall(b'k')" &
sleep 0.5
ip netns exec $GWC_NS_0 /usr/bin/python3 -c "
import socket,time,statistics
s=socket.create_connection(('$GWC_ADDR_1',5557));s.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)
buf=b'x'*$M; ts=[]
for i in range(12):
  time.sleep(0.3); t=time.perf_counter(); s.sendall(buf); s.recv(1); ts.append((time.perf_counter()-t)*1e3)
print('M',$M,'ms',[round(x,1) for x in ts],'median',round(statistics.median(ts[2:]),1),'M/r ms',round($M*8/20e6*1e3,1))"
wait
