import subprocess, sys, re, statistics, collections
# usage: abm.py FILTER ROUNDS BIN...
filt, rounds, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
res = collections.defaultdict(lambda: collections.defaultdict(list))
for r in range(rounds):
    for b in bins:
        out = subprocess.run(['taskset','-c','1',b,'--cold','--benchmark_color=false','--benchmark_min_time=0.2','--benchmark_filter='+filt], capture_output=True, text=True).stdout
        for line in re.sub(r'\x1b\[[0-9;]*m','',out).splitlines():
            m = re.match(r'^(Encode|DecodeAverage4)/(\S+)\s.*\s([\d.]+)\s*$', line)
            if m: res[m.group(1)+'/'+m.group(2)][b].append(float(m.group(3)))
sys.stdout.flush()
for row in sorted(res):
    print(row, '  '.join('%s %.3f [%s]' % (b.split('/')[-1], statistics.median(v), ' '.join('%.2f'%x for x in v)) for b, v in res[row].items()))
