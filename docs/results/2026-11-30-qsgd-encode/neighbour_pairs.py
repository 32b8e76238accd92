# Neighbouring elements' rounding hashes within one step, for candidate
# hashes (numpy; /usr/bin/python3). For each of 8 random keys and
# distances d in {1,...,65536} over 2^22 indices: the correlation of
# u_i and u_{i+d} (in standard errors) and the chi-square of the joint
# histogram of their top four bits (256 cells, 255 degrees of freedom).
#   one16: Round((i + add) ^ mix), the round's shifts 16/16/16
#   one15: the same with lowbias32's middle shift 15
#   two: ElementHash, Round(Round(i + add) ^ mix)
#   mulfirst16: Round((i * 0x9e3779b9 + add) ^ mix): RoundingHash (kept)
#   mulfirst16b, mulfirst: the stride applied after the add; shift 15
import numpy as np
M=np.uint32
def rnd(x,s2=16):
    x = x ^ (x >> M(16)); x = x * M(0x7feb352d); x = x ^ (x >> M(s2)); x = x * M(0x846ca68b); return x ^ (x >> M(16))
variants={
 'mulfirst16': lambda i,add,mix: rnd((i*M(0x9e3779b9)+add)^mix,16),
 'mulfirst16b': lambda i,add,mix: rnd((i+add)*M(0x9e3779b9)^mix,16),
 'one16': lambda i,add,mix: rnd((i+add)^mix),
 'one15': lambda i,add,mix: rnd((i+add)^mix,15),
 'two':   lambda i,add,mix: rnd(rnd(i+add)^mix),
 'mulfirst': lambda i,add,mix: rnd((i*M(0x9e3779b9)+add)^mix,15),
}
N=1<<22
for name,f in variants.items():
  rng=np.random.default_rng(7)
  tot=[]
  for trial in range(8):
    add=M(rng.integers(0,2**32)); mix=M(rng.integers(0,2**32))
    i=np.arange(N,dtype=np.uint32)
    h=f(i,add,mix)
    u=(h>>M(8)).astype(np.float64)/2**24
    out=[]
    for d in [1,2,3,4,8,16,256,4096,65536]:
        a=u[:-d]-0.5; b=u[d:]-0.5
        corr=(a*b).mean()/(1/12)
        j=np.bincount(((h[:-d]>>M(28)).astype(np.int64)*16+(h[d:]>>M(28)).astype(np.int64)),minlength=256)
        ej=(N-d)/256; cj=((j-ej)**2/ej).sum()
        out.append((corr*np.sqrt(N),cj))
    tot.append(out)
  t=np.array(tot)
  print(f"{name:9s} max|r|sd={np.abs(t[:,:,0]).max():.1f} mean r sd={t[:,:,0].mean():+.2f} chi mean={t[:,:,1].mean():.0f} max={t[:,:,1].max():.0f}")
