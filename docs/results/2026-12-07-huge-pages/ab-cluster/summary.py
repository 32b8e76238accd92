import json,glob,statistics,collections,sys
# usage: summary.py DIR (the old-N.json and new-N.json that ab.sh wrote)
rows=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1] + '/*.json')):
    v=f.split('/')[-1].split('-')[0]
    d=json.load(open(f))
    for c in d['cases']:
        if c.get('system')=='gradwire' and c['method']!='none':
            m=c['method'].split(':')[0]
            for k in ('iter_ms_median','cpu_alone_ms','cpu_loopback_ms','process_cpu_ms_median'):
                rows[(m,k)][v].append(c[k])
        if c.get('system')=='gradwire' and c['method']=='none':
            rows[('none','iter_ms_median')][v].append(c['iter_ms_median'])
for (m,k),d in sorted(rows.items()):
    print('%-12s %-22s' % (m,k), '  '.join('%s %.1f [%s]' % (v, statistics.median(x), ' '.join('%.1f'%y for y in x)) for v,x in sorted(d.items(), reverse=True)))
