import json,sys,statistics
runs=[json.load(open(f))['sizes'] for f in sys.argv[1:]]
rows=[]
for size in runs[0]:
    for codec in runs[0][size]:
        for kind in ['encode_ef','decode_average']:
            vals=[r[size][codec][kind] for r in runs if size in r and codec in r[size]]
            if vals[0] < 0: continue
            med=statistics.median(vals)
            rows.append((size,codec,kind,vals,med))
print("rows with any run under 0.5:")
for size,codec,kind,vals,med in rows:
    if min(vals)<0.5:
        print(f"{codec:45s} {size:>9s} {kind:15s} runs {' '.join(f'{v:.3f}' for v in vals)}  median {med:.3f}{'  <-- median under' if med<0.5 else ''}")
print("median under 0.5:", sum(1 for r in rows if r[4]<0.5), "of", len(rows))
