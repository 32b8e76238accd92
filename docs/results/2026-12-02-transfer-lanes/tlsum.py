import json,sys,glob,statistics as st,collections
for path in sorted(glob.glob(sys.argv[1]+"/*topk*.rank*.json")):
    ev=json.load(open(path))["traceEvents"]
    steps={e["args"]["step"]:(e["ts"],e["dur"]) for e in ev if e.get("name")=="step"}
    acc=collections.defaultdict(list)
    for e in ev:
        if e.get("ph")!="X" or e["name"]=="step": continue
        s=e["args"]["step"]; t0=steps[s][0]
        acc[(e["name"],e["args"].get("bucket"))].append(((e["ts"]-t0)/1e3,(e["ts"]+e["dur"]-t0)/1e3))
    print(path.split("/")[-1], "step median %.1f"%st.median(d/1e3 for _,d in steps.values()))
    for k,v in sorted(acc.items(), key=lambda kv: st.median(a for a,_ in kv[1])):
        print("   %-10s b%s  %6.1f -> %6.1f"%(k[0],k[1],st.median(a for a,_ in v),st.median(b for _,b in v)))
