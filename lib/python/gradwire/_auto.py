"""auto mode's decision (gradwire.ddp, spec "auto"): per bucket, dense or a
top-k density, from the warm-up's measurements of backward and dense
exchange times. A pure function, tested without ranks."""

AUTO_LADDER = (0.1, 0.03, 0.01, 0.003, 0.001)


def choose_auto_plan(buckets, backward_s, world_size, floor=0.001, tail_fraction=0.1,
                     ladder=AUTO_LADDER):
    """Decides, per bucket, dense or a top-k density. Returns (plan, ratio, report).

    buckets: [{"index", "elements", "ready_s" (seconds after the first bucket
    was ready), "dense_s" (measured dense exchange seconds)}]; backward_s:
    seconds from the first bucket ready to the last (computation the
    exchanges can hide behind).

    Model: one worker exchanges buckets in ready order. A bucket's
    exchange hides if it finishes before the next bucket is ready (the
    queue never grows); the last bucket, which nothing hides, must finish
    within tail_fraction * backward_s. Top-k at density r moves about
    r * P times the bytes of the dense ring allreduce (P-1 frames of 8rn
    bytes received, against 2(P-1)/P * 4n), so its predicted time is
    max(r * P, 0.05) * dense_s (the 5 % floor stands for the fixed per-call
    cost and the encode). Greedily per bucket: dense if it hides, else the
    largest density (>= floor) that hides, else the floor. One density is
    used for every compressed bucket (one codec, one communicator): the
    smallest any bucket needed.
    """
    buckets = sorted(buckets, key=lambda b: b["ready_s"])
    plan, lines, needed = {}, [], []
    finish = 0.0
    for j, b in enumerate(buckets):
        last = j == len(buckets) - 1
        deadline = (backward_s * (1 + tail_fraction) if last else buckets[j + 1]["ready_s"])
        start = max(finish, b["ready_s"])
        options = [("dense", b["dense_s"])]
        options += [(r, max(r * world_size, 0.05) * b["dense_s"]) for r in ladder
                    if r >= floor and r * world_size < 1]
        choice, cost = options[-1] if len(options) > 1 else options[0]
        for opt, t in options:
            if start + t <= deadline:
                choice, cost = opt, t
                break
        finish = start + cost
        plan[b["index"]] = choice
        if choice != "dense":
            needed.append(choice)
        lines.append(
            f"bucket {b['index']}: {b['elements']} elements, dense exchange "
            f"{b['dense_s'] * 1e3:.1f} ms, ready at {b['ready_s'] * 1e3:.1f} ms, must finish by "
            f"{deadline * 1e3:.1f} ms -> " +
            ("dense (hides behind backward)" if choice == "dense" else
             f"top-k {choice:g} (predicted {cost * 1e3:.1f} ms)"))
    ratio = min(needed) if needed else None
    if ratio is not None:
        for i, c in plan.items():
            if c != "dense":
                plan[i] = ratio
    head = (f"auto: backward {backward_s * 1e3:.1f} ms, {len(buckets)} buckets, "
            f"{world_size} ranks; " +
            ("network is not the bottleneck: all dense" if ratio is None else
             f"compressing {len(needed)} bucket(s) with topk:ratio={ratio:g}"))
    return plan, ratio, "\n".join([head] + lines)
