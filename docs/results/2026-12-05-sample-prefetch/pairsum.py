# pairsum.py DIR: pair.sh's pairs per row: each build's wall ms and vs_memcpy, new / old per pair.
import json,sys,glob,collections,os,statistics
d=sys.argv[1]; res=collections.defaultdict(dict)
for f in glob.glob(d+'/*.json'):
    b,rest=os.path.basename(f).split('-',1)
    p=rest.rsplit('-p',1)[1][:-5]
    for x in json.load(open(f))["benchmarks"]:
        res[(x['run_name'],int(p))][b]=(x['real_time'],x.get('vs_memcpy',0))
rows=sorted(set(r for r,_ in res))
for row in rows:
    ps=sorted(p for r,p in res if r==row)
    a=[res[(row,p)]['cb_head'] for p in ps if len(res[(row,p)])==2]; b=[res[(row,p)]['cb_sample'] for p in ps if len(res[(row,p)])==2]
    ratios=[y[0]/x[0] for x,y in zip(a,b)]
    print(row); print('  head   ms', ' '.join('%.3f'%x[0] for x in a), ' vs', ' '.join('%.3f'%x[1] for x in a))
    print('  sample ms', ' '.join('%.3f'%x[0] for x in b), ' vs', ' '.join('%.3f'%x[1] for x in b))
    print('  sample/head', ' '.join('%.3f'%r for r in ratios), ' median %.3f, faster in %d of %d'%(statistics.median(ratios), sum(r<1 for r in ratios), len(ratios)))
