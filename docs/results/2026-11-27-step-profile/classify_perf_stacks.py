import collections, sys
samples=[]; cur=None
for line in open(sys.argv[1]):
    if not line.startswith((' ','\t')) and line.strip():
        if cur: samples.append(cur)
        cur={'head':line.strip(),'syms':[]}
    elif line.strip() and cur is not None:
        parts=line.strip().split(None,1)
        cur['syms'].append(parts[1] if len(parts)>1 else parts[0])
if cur: samples.append(cur)
samples=[s for s in samples if 'exchange_bench' in s['head'] or 'gloo' in s['head']]
def cls(s):
    st=' '.join(s['syms']); leaf=s['syms'][0] if s['syms'] else ''
    if 'Encode' in st and ('EncodeStage' in st or 'SparseAllgather::Encode' in st):
        if 'AccumulateAndCollect' in st: return 'encode: EF add + candidate pass (AccumulateAndCollect)'
        if 'TopKCompress' in st: return 'encode: top-k selection/emit (rest of TopKCompress)'
        if 'Auth' in st or 'Sign' in st: return 'encode: MAC'
        return 'encode: frame, indices, other'
    if 'FinishStage' in st or 'DecodeAverage' in st or 'SparseAllgather::Finish' in st:
        if 'memset' in leaf: return 'decode: zero the bucket (memset)'
        if 'SparseAverage' in st: return 'decode: scatter-add + average'
        if 'DecodeIndices' in st: return 'decode: varint indices'
        if 'Verify' in st or 'Auth' in st: return 'decode: MAC verify'
        return 'decode: other'
    if 'PlanTensorLocked' in st or 'Submit' in st: return 'submit: plan/copy into bucket'
    if ('Main' in st or ' main' in st or st.startswith('main')) and 'Submit' not in st and 'Barrier' not in st: return 'bench, untimed (gradient reset)'
    if 'munmap' in st: return 'munmap (freeing large buffers)'
    if 'epoll' in st or 'gloo' in st.lower() or 'tcp' in st or 'sock' in st or 'sendmsg' in st or 'recvmsg' in st: return 'transport (gloo loop, sockets)'
    if 'ComputeLoop' in st: return 'exchanger other'
    return 'other'
c=collections.Counter(cls(s) for s in samples)
tot=sum(c.values()); bench=c['bench, untimed (gradient reset)']
print('samples',tot,'of which untimed bench',bench)
for k,v in c.most_common(30):
    print(f'{100*v/tot:5.1f}%  {100*v/(tot-bench) if k.startswith("bench")==False else 0:5.1f}% of step  {k}')
if len(sys.argv)>2:
    want=sys.argv[2]
    d=collections.Counter()
    for s in samples:
        if cls(s)==want:
            d[' < '.join(x.split('(')[0][-38:] for x in s['syms'][:6])]+=1
    for k,v in d.most_common(12): print(v,k)
