import json,sys
t=json.load(open(sys.argv[1]))
ev=t['traceEvents'] if isinstance(t,dict) else t
X=[e for e in ev if e.get('ph')=='X']
steps=sorted(set(e['args'].get('step') for e in X if 'args' in e))
s=steps[int(sys.argv[2]) if len(sys.argv)>2 else len(steps)//2]
sel=[e for e in X if e.get('args',{}).get('step')==s]
t0=min(e['ts'] for e in sel)
for e in sorted(sel,key=lambda e:(e['ts'])):
    a=e.get('args',{})
    print(e['pid'], e['tid'], e['name'], a.get('bucket',''), round((e['ts']-t0)/1000,1), round((e['ts']+e['dur']-t0)/1000,1))
