# summ.py DIR: per benchmark row, each binary's median wall ms and vs_memcpy, round by round,
# from ab.sh's DIR/BIN-rN.json (Google Benchmark JSON with repetitions' aggregates).
import json,sys,glob,collections,os
d=sys.argv[1]; res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(d+'/*.json')):
    b=os.path.basename(f).rsplit('-r',1)[0]
    for x in json.load(open(f))["benchmarks"]:
        if x.get('aggregate_name')=='median':
            res[x['run_name']][b].append((x['real_time'], x['vs_memcpy']))
for row,bs in res.items():
    print(row)
    for b,v in sorted(bs.items()):
        print('  %-10s ms %s  vs %s'%(b,' '.join('%.3f'%t for t,_ in v),' '.join('%.3f'%s for _,s in v)))
