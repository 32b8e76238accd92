# pairsum.py DIR OLD NEW: pair.sh's pairs per row: each binary's wall ms and vs_memcpy, and
# NEW / OLD per pair (median, and in how many pairs NEW was faster).
import json,sys,glob,collections,os,statistics
d,old,new=sys.argv[1:4]; res=collections.defaultdict(dict)
for f in glob.glob(d+'/*.json'):
    b,rest=os.path.basename(f).split('-',1)
    p=rest.rsplit('-p',1)[1][:-5]
    for x in json.load(open(f))["benchmarks"]:
        res[(x['run_name'],int(p))][b]=(x['real_time'],x.get('vs_memcpy',0))
for row in sorted(set(r for r,_ in res)):
    ps=sorted(p for r,p in res if r==row)
    a=[res[(row,p)][old] for p in ps]; b=[res[(row,p)][new] for p in ps]
    ratios=[y[0]/x[0] for x,y in zip(a,b)]
    print(row)
    for name,v in ((old,a),(new,b)):
        print('  %-9s ms %s  vs %s'%(name,' '.join('%.3f'%x[0] for x in v),' '.join('%.3f'%x[1] for x in v)))
    print('  new/old   %s  median %.3f, faster in %d of %d'%(' '.join('%.3f'%r for r in ratios),statistics.median(ratios),sum(r<1 for r in ratios),len(ratios)))
