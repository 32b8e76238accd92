import sys, time, threading
sys.path.insert(0, "/tmp/pkg"); sys.path.insert(0, "/work/main/tests/python")
import gradwire as g
from thread_ranks_test import ThreadStore, SECRET
def on_threads(f, n):
    out=[None]*n
    def run(r):
        try: out[r]=f(r)
        except Exception as e: out[r]=e
    ts=[threading.Thread(target=run,args=(r,)) for r in range(n)]
    [t.start() for t in ts]; [t.join() for t in ts]; return out
res={None:[], "measure":[]}
for i in range(6):
    for m in (None, "measure"):
        st=ThreadStore(); t0=time.time()
        kw={} if m is None else {"exchange_model": m}
        cs=on_threads(lambda r: g.Communicator("topk:ratio=0.01", SECRET, store=st, rank=r, world_size=2, job_id="t%d%s"%(i,m), timeout_s=20, **kw), 2)
        res[m].append((time.time()-t0)*1e3)
        for c in cs: assert not isinstance(c, Exception), c
        on_threads(lambda r: cs[r].close(), 2)
import statistics
for m,v in res.items(): print(m, "median %.1f ms"%statistics.median(v), ["%.0f"%x for x in v])
