# all-to-all: every host sends M bytes to every other at the same instants
# (shared CLOCK_MONOTONIC), times until it has received M from each
import socket, sys, time, threading, os, statistics
me, hosts, M, t0 = int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4])
P = len(hosts); port = 5700
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", port + me)); srv.listen(P)
out = {}
def connect(j):
    while True:
        try:
            s = socket.create_connection((hosts[j], port + j)); break
        except OSError:
            time.sleep(0.05)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1); out[j] = s
th = [threading.Thread(target=connect, args=(j,)) for j in range(P) if j != me]
[t.start() for t in th]
inc = [srv.accept()[0] for _ in range(P - 1)]
[t.join() for t in th]
buf = b"x" * M; times = []
def recv_all(c, res, k):
    n = 0
    while n < M:
        n += len(c.recv(1 << 20))
    res[k] = time.monotonic()
for it in range(8):
    start = t0 + 1.0 + it * 0.6
    time.sleep(max(0, start - time.monotonic()))
    res = [0] * len(inc)
    rt = [threading.Thread(target=recv_all, args=(c, res, k)) for k, c in enumerate(inc)]
    [t.start() for t in rt]
    st = [threading.Thread(target=out[j].sendall, args=(buf,)) for j in out]
    [t.start() for t in st]; [t.join() for t in st]; [t.join() for t in rt]
    times.append((max(res) - start) * 1e3)
print(me, "median", round(statistics.median(times[1:]), 1), [round(x) for x in times], "M/r", round((P - 1) * M * 8 / 20e6 * 1e3, 1), flush=True)
