"""PyTorch DDP communication hook: gradwire's compressed exchange with error feedback.

    import gradwire.ddp
    state = gradwire.ddp.GradwireState("topk:ratio=0.01", warmup_iters=10)
    model = torch.nn.parallel.DistributedDataParallel(model)
    model.register_comm_hook(state, gradwire.ddp.hook)
    ...
    torch.save({"model": model.state_dict(), "gradwire": state.state_dict()},
               f"ckpt.rank{rank}.pt")          # residuals are per rank
    state.load_state_dict(torch.load(f"ckpt.rank{rank}.pt")["gradwire"])
    state.close()                               # collective, before exiting

What it does with each GradBucket (DDP's fused, flattened gradients):
- Iterations < warmup_iters: dense averaging (Gloo ring allreduce), like
  DGC's and PowerSGD's warm-up; at least 1, because DDP rebuilds its
  buckets after the first iteration and residuals are tied to a bucket's
  length.
- Afterwards the bucket is split by tensor, by the library's path rule
  (gradwire.path_for): with spec "none" every tensor is exchanged dense
  (ring allreduce); otherwise tensors with fewer than
  dense_below_elements elements and 1-D tensors (biases, norm scales) are
  exchanged dense, the rest compressed by the spec ("topk:ratio=0.01",
  "qsgd:bits=4,bucket=512", "sign:bucket=1024", ... as in the C++ library
  and its --compression flags), with an error-feedback residual keyed by
  the bucket index (the spec's ef= setting turns it off). A small dense
  part rides, exact, in the compressed exchange's own frames, so a mixed
  bucket costs one exchange (combine_dense_below_bytes). Shapes come from
  bucket.parameters() (torch >= 1.10); without them the whole bucket takes
  one path by its size.
- The exchange runs on one background thread (overlap=True), in the order
  DDP hands buckets over, which is the same on every rank; the hook returns
  a Future that completes when the bucket is averaged, so backprop of the
  remaining layers continues meanwhile. overlap=False exchanges inline and
  returns a completed Future.

momentum=m (> 0, with weight_decay=wd): DGC's momentum correction (Lin et
al., ICLR 2018). Sparsifying the gradient and applying momentum after the
exchange delays and distorts the momentum of every dropped coordinate;
instead the hook takes over SGD's momentum and weight decay: per tensor
d = g + wd * w, then compressed tensors accumulate the velocity locally,
u = m * u + d, and send u through the error-feedback exchange (the
residual accumulates velocity, not gradient), after which u is zeroed
where this rank's frame carried it in full (momentum factor masking);
dense tensors average d and then u = m * u + avg(d), which is exactly
torch.optim.SGD's momentum. The bucket returns the update direction, so
the optimizer must be plain SGD: torch.optim.SGD(params, lr) with no
momentum and no weight decay. The velocities are part of state_dict().
Flat exchanges with top-k/approx top-k/random-k only.

spec "auto" (or "auto:ratio=0.01" for the floor): warm-up iterations also
measure the backward pass and each bucket's dense exchange (averaged over
ranks, so every rank decides the same), then decide per bucket: dense if
its exchange hides behind the backward computation still to come, else
top-k at the largest density from a ladder (0.1, 0.03, 0.01, 0.003,
0.001, floored by ratio) whose predicted exchange hides. state.auto_report
says what was chosen and why (see choose_auto_plan).

Newer PyTorch: the hook only uses GradBucket.index/buffer/is_last/
parameters and torch.futures.Future, stable since 1.10; the extension has
no torch C++ dependency, so the same _gradwire.so works with any torch
built for the same Python. CPU tensors only: a CUDA bucket is refused with
a clear error (GPU buffers would go through the device-pointer + stream
path of the CUDA build; future work).
"""

import queue
import threading
import time

import torch

import gradwire

AUTO_LADDER = (0.1, 0.03, 0.01, 0.003, 0.001)
_AUTO_SUFFIX = "/auto"


def _gather(tensor, segments):
    """The segments' elements of `tensor`, concatenated (a new tensor)."""
    return torch.cat([tensor[s.start:s.stop] for s in segments])


def _scatter(flat, tensor, segments):
    """Inverse of _gather: copies `flat` back into the segments of `tensor`."""
    k = 0
    for s in segments:
        n = s.stop - s.start
        tensor[s.start:s.stop].copy_(flat[k:k + n])
        k += n


class _Segment:
    """A run of consecutive tensors in a bucket that take one path."""

    __slots__ = ("start", "stop", "dense")

    def __init__(self, start, stop, dense):
        self.start, self.stop, self.dense = start, stop, dense


class GradwireState:
    """Per-process state of the hook: communicator(s), plan, residuals, stats.

    spec: a gradwire spec string, or "auto" / "auto:ratio=R".
    secret: the job secret (str/bytes, >= 16 bytes) or None for
        $GRADWIRE_JOB_SECRET.
    warmup_iters: dense iterations before compression starts (>= 1).
    dense_below_elements, dense_one_dimensional: the settings of the
        library's path rule (gradwire.path_for).
    overlap: exchange on a background thread (see module doc).
    momentum, weight_decay: DGC momentum correction (see module doc);
        momentum=0 (default) leaves momentum to the optimizer.
    auto_tail_fraction: auto mode: the last bucket's exchange (nothing can
        hide it) may take at most this fraction of the backward time.
    combine_dense_below_bytes: a mixed bucket whose dense part would cost
        each rank at most this many received bytes as an allgather
        ((P-1) x 4 x elements) sends it inside the compressed exchange's
        frames, exact (one exchange, two message rounds); a larger dense
        part gets a ring allreduce of its own. 0: always separate.
    Remaining keyword arguments go to gradwire.Communicator (hierarchical,
    timeout_s, dense_algorithm).
    """

    def __init__(self, spec="topk:ratio=0.01", secret=None, warmup_iters=1,
                 dense_below_elements=16384, dense_one_dimensional=True, overlap=True,
                 auto_tail_fraction=0.1, momentum=0.0, weight_decay=0.0,
                 combine_dense_below_bytes=256 * 1024, **communicator_args):
        if warmup_iters < 1:
            raise ValueError("warmup_iters must be >= 1 (DDP rebuilds its buckets after "
                             "the first iteration)")
        self.auto = spec == "auto" or spec.startswith("auto:")
        self.auto_floor = 0.001
        if self.auto and warmup_iters < 2:
            raise ValueError("spec 'auto' needs warmup_iters >= 2 (iteration 0 runs DDP's "
                             "bucket rebuild, later warm-up iterations are measured)")
        if self.auto:
            if ":" in spec:
                key, _, value = spec.split(":", 1)[1].partition("=")
                if key != "ratio":
                    raise ValueError(f"auto accepts only ratio=R (the density floor), got {spec!r}")
                self.auto_floor = float(value)
                if not 0 < self.auto_floor <= 1:
                    raise ValueError(f"auto: ratio must be in (0, 1], got {value!r}")
            self.spec = "none"
        else:
            self.spec = gradwire.canonical_spec(spec)
        if not 0.0 <= momentum < 1.0 or weight_decay < 0.0:
            raise ValueError(f"momentum must be in [0, 1) and weight_decay >= 0, got "
                             f"{momentum!r} and {weight_decay!r}")
        if momentum > 0.0:
            if self.auto:
                raise ValueError("momentum correction is not available with spec 'auto'")
            if communicator_args.get("hierarchical"):
                raise ValueError("momentum correction needs the flat exchange (its mask is "
                                 "this rank's own selection)")
            method = spec.split(":", 1)[0]
            if method not in ("topk", "approx_topk", "randomk"):
                raise ValueError(f"momentum correction needs a selection codec (topk, "
                                 f"approx_topk, randomk), got {spec!r}")
        elif weight_decay > 0.0:
            raise ValueError("weight_decay here belongs to momentum correction; with "
                             "momentum=0 leave weight decay to the optimizer")
        self.momentum = float(momentum)
        self.weight_decay = float(weight_decay)
        self._velocity = {}        # momentum correction: bucket index -> u
        self._bucket_params = {}   # ... bucket index -> its parameters (layout of u)
        self._param_velocity = {}  # ... id(parameter) -> u, across DDP's bucket rebuild
        if combine_dense_below_bytes < 0:
            raise ValueError("combine_dense_below_bytes must be >= 0")
        self.combine_dense_below_bytes = combine_dense_below_bytes
        self.warmup_iters = warmup_iters
        self.dense_below_elements = dense_below_elements
        self.dense_one_dimensional = dense_one_dimensional
        # The spec whose path rule splits buckets: auto compresses with
        # top-k once it has decided (its communicator's spec is "none").
        self._path_spec = "topk" if self.auto else self.spec
        self.overlap = overlap
        self.auto_tail_fraction = auto_tail_fraction
        self._secret = secret
        self._args = dict(communicator_args)
        self.comm = gradwire.Communicator(
            self.spec, secret, dense_below_elements=dense_below_elements,
            dense_one_dimensional=dense_one_dimensional, **self._args)
        self.rank, self.world_size = self.comm.rank, self.comm.size
        self.auto_comm = None      # auto: the communicator of the chosen spec
        self.auto_plan = None      # auto: {bucket index: "dense" | ratio}
        self.auto_spec = None
        self.auto_report = ""
        self.iteration = 0
        self._layouts = {}         # bucket index -> (length, [segments])
        # auto-mode measurements during warm-up, per iteration
        self._t_first = None
        self._ready = {}           # bucket index -> [seconds after first bucket]
        self._dense_s = {}         # bucket index -> [exchange seconds]
        self._backward = []        # seconds from first to last bucket ready
        self._sizes = {}
        self._queue = None
        self._worker = None
        self._failure = None
        if overlap:
            self._queue = queue.Queue()
            self._worker = threading.Thread(target=self._work, name="gradwire-ddp", daemon=True)
            self._worker.start()

    # -- the exchange --------------------------------------------------
    def _layout(self, bucket):
        """Segments of the bucket's buffer by path, fixed per bucket index."""
        index, length = bucket.index(), bucket.buffer().numel()
        cached = self._layouts.get(index)
        if cached is not None and cached[0] == length:
            return cached[1]
        try:
            shapes = [tuple(p.shape) for p in bucket.parameters()]
        except (AttributeError, RuntimeError):
            shapes = None
        if not shapes or sum(_numel(s) for s in shapes) != length:
            dense = self._is_dense(length, False)
            segments = [_Segment(0, length, dense)]
        else:
            segments = []
            offset = 0
            for s in shapes:
                n = _numel(s)
                dense = self._is_dense(n, len(s) == 1)
                if segments and segments[-1].dense == dense:
                    segments[-1].stop = offset + n
                else:
                    segments.append(_Segment(offset, offset + n, dense))
                offset += n
        self._layouts[index] = (length, segments)
        return segments

    def _is_dense(self, elements, one_dimensional):
        return gradwire.path_for(self._path_spec, elements, one_dimensional,
                                 self.dense_below_elements, self.dense_one_dimensional) == "dense"

    def _exchange(self, index, step, tensor, segments, mc=None):
        """Averages `tensor` (the bucket's flat buffer) in place (with
        momentum correction: replaces it by the update direction)."""
        if self.momentum > 0.0:
            return self._exchange_corrected(index, step, tensor, segments, *mc)
        warm = step < self.warmup_iters
        flat = tensor.numpy()
        if warm:
            t0 = time.perf_counter()
            self.comm.allreduce_mean(flat, bucket=2 * index, step=step, path="dense")
            if self.auto and step >= 1:
                self._dense_s.setdefault(index, []).append(time.perf_counter() - t0)
            return
        comm, compress = self.comm, True
        if self.auto:
            choice = self.auto_plan.get(index, "dense")
            compress = choice != "dense"
            comm = self.auto_comm if compress else self.comm
        if not compress or all(seg.dense for seg in segments):
            self.comm.allreduce_mean(flat, bucket=2 * index, step=step, path="dense")
            return
        if all(not seg.dense for seg in segments):
            comm.allreduce_mean(flat, bucket=2 * index + 1, step=step, path="compressed")
            return
        # Mixed bucket: gather each path's tensors into one contiguous
        # buffer, exchange, scatter back.
        dense_segs = [s for s in segments if s.dense]
        sparse_segs = [s for s in segments if not s.dense]
        dense, sparse = _gather(tensor, dense_segs), _gather(tensor, sparse_segs)
        self._exchange_mixed(comm, index, step, sparse, dense)
        _scatter(dense, tensor, dense_segs)
        _scatter(sparse, tensor, sparse_segs)

    def _exchange_mixed(self, comm, index, step, sparse, dense):
        """Averages a bucket's compressed part `sparse` and its dense part
        `dense` (None: none) in place: one exchange when the dense part is
        small enough to ride in the compressed frames, else two."""
        if dense is None:
            comm.allreduce_mean(sparse.numpy(), bucket=2 * index + 1, step=step,
                                path="compressed")
        elif (self.world_size - 1) * 4 * dense.numel() <= self.combine_dense_below_bytes:
            comm.allreduce_mean_with_dense(sparse.numpy(), dense.numpy(), bucket=2 * index + 1,
                                           step=step)
        else:
            self.comm.allreduce_mean(dense.numpy(), bucket=2 * index, step=step, path="dense")
            comm.allreduce_mean(sparse.numpy(), bucket=2 * index + 1, step=step,
                                path="compressed")

    def _exchange_corrected(self, index, step, tensor, segments, weights, params):
        """DGC momentum correction and masking (module doc), in place."""
        m = self.momentum
        if weights is not None:
            tensor.add_(weights, alpha=self.weight_decay)  # d = g + wd * w
        u = self._velocity.get(index)
        if u is None or u.numel() != tensor.numel():
            # A new bucket, or DDP's rebuild after iteration 0: the
            # parameters' velocities carry over (_end_iteration).
            u = torch.zeros_like(tensor)
            off = 0
            for p in params:
                v = self._param_velocity.pop(id(p), None)
                if v is not None:
                    u[off:off + v.numel()].copy_(v)
                off += p.numel()
            self._velocity[index] = u
            self._bucket_params[index] = params
        compressed = [s for s in segments if not s.dense] if step >= self.warmup_iters else []
        if not compressed:
            self.comm.allreduce_mean(tensor.numpy(), bucket=2 * index, step=step, path="dense")
            u.mul_(m).add_(tensor)
            tensor.copy_(u)
            return
        dense = [s for s in segments if s.dense]
        # Compressed tensors: accumulate the velocity locally and send it.
        for s in compressed:
            u[s.start:s.stop].mul_(m).add_(tensor[s.start:s.stop])
        sparse = _gather(u, compressed)
        flat = _gather(tensor, dense) if dense else None
        self._exchange_mixed(self.comm, index, step, sparse, flat)
        residual = torch.empty(sparse.numel(), dtype=torch.float32)
        if self.comm.copy_residual(2 * index + 1, residual.numpy()):
            # Momentum factor masking: drop what this rank sent in full.
            _scatter(_gather(u, compressed).masked_fill_(residual == 0, 0.0), u, compressed)
        _scatter(sparse, tensor, compressed)
        if dense:
            velocity = _gather(u, dense).mul_(m).add_(flat)
            _scatter(velocity, u, dense)
            _scatter(velocity, tensor, dense)

    def _work(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            index, step, tensor, segments, mc, fut = item
            if tensor is None:  # _drain's marker: everything before it is done
                fut.set_result(None)
                continue
            if self._failure is not None:
                fut.set_exception(self._failure)
                continue
            try:
                self._exchange(index, step, tensor, segments, mc)
            except Exception as e:  # noqa: BLE001 - handed to DDP through the future
                self._failure = e
                fut.set_exception(e)
                continue
            fut.set_result(tensor)

    def _submit(self, bucket):
        tensor = bucket.buffer()
        if tensor.device.type != "cpu" or tensor.dtype != torch.float32:
            raise TypeError(f"gradwire.ddp.hook: float32 CPU buckets only, got {tensor.dtype} "
                            f"on {tensor.device} (CUDA buffers: future work)")
        index, step = bucket.index(), self.iteration
        if self.auto and 1 <= step < self.warmup_iters:
            now = time.perf_counter()
            if self._t_first is None:
                self._t_first = now
            self._ready.setdefault(index, []).append(now - self._t_first)
            self._sizes[index] = tensor.numel()
        segments = self._layout(bucket)
        mc = None  # momentum correction: (weights or None, parameters)
        if self.momentum > 0.0:
            params = list(bucket.parameters())
            if sum(p.numel() for p in params) != tensor.numel():
                raise RuntimeError("gradwire.ddp: bucket.parameters() does not cover the "
                                   "bucket's buffer; momentum correction needs it")
            weights = None
            if self.weight_decay > 0.0:
                # The weights as one flat vector in the bucket's layout (DDP
                # waits for every Future before the optimizer steps, so they
                # do not change while the exchange uses them).
                weights = torch.cat([p.detach().reshape(-1) for p in params])
            mc = (weights, params)
        fut = torch.futures.Future()
        if self.overlap:
            if self._failure is not None:
                raise self._failure
            self._queue.put((index, step, tensor, segments, mc, fut))
        else:
            self._exchange(index, step, tensor, segments, mc)
            fut.set_result(tensor)
        if bucket.is_last():
            self._end_iteration(step)
        return fut

    def _end_iteration(self, step):
        if step == 0:
            self._layouts.clear()  # DDP rebuilds its buckets after iteration 0
            if self.momentum > 0.0:
                # Velocities per parameter, to be laid out again in the
                # rebuilt buckets (exactly torch.optim.SGD's momentum).
                self._drain()
                for index, u in self._velocity.items():
                    off = 0
                    for p in self._bucket_params[index]:
                        self._param_velocity[id(p)] = u[off:off + p.numel()].clone()
                        off += p.numel()
                self._velocity.clear()
                self._bucket_params.clear()
        if self.auto and 1 <= step < self.warmup_iters:
            self._backward.append(time.perf_counter() - self._t_first)
            self._t_first = None
            if step == self.warmup_iters - 1:
                self._drain()
                self._decide_auto()
        self.iteration += 1

    def _drain(self):
        """Waits until the worker has exchanged everything queued."""
        if self.overlap:
            done = threading.Event()
            fut = torch.futures.Future()
            fut.add_done_callback(lambda _: done.set())
            self._queue.put((-1, -1, None, None, None, fut))
            done.wait()

    # -- auto mode -----------------------------------------------------
    def _decide_auto(self):
        indices = sorted(self._sizes)
        # Every rank must decide alike: average the measurements (medians
        # over the warm-up) over
        # ranks with a dense exchange, whose result is identical everywhere
        # (iteration 0 is not measured: DDP's bucket rebuild).
        def med(xs):
            xs = sorted(xs)
            return xs[len(xs) // 2]
        meas = [med(self._backward)]
        for i in indices:
            meas += [med(self._ready[i]), med(self._dense_s[i])]
        buf = torch.tensor(meas, dtype=torch.float32)
        self.comm.allreduce_mean(buf.numpy(), bucket=0xFFFFFFF0, step=self.warmup_iters,
                                 path="dense")
        backward = float(buf[0])
        buckets = []
        for j, i in enumerate(indices):
            buckets.append({"index": i, "elements": self._sizes[i],
                            "ready_s": float(buf[1 + 2 * j]), "dense_s": float(buf[2 + 2 * j])})
        plan, ratio, report = choose_auto_plan(buckets, backward, self.world_size,
                                               floor=self.auto_floor,
                                               tail_fraction=self.auto_tail_fraction)
        self.auto_plan = plan
        self.auto_report = report
        if ratio is not None:
            self.auto_spec = gradwire.canonical_spec(f"topk:ratio={ratio}")
            self.auto_comm = gradwire.Communicator(
                self.auto_spec, self._secret, dense_below_elements=self.dense_below_elements,
                dense_one_dimensional=self.dense_one_dimensional, job_suffix=_AUTO_SUFFIX,
                **self._args)

    # -- checkpoints, stats, shutdown -----------------------------------
    def state_dict(self):
        """This rank's hook state (residuals are per rank: save one per rank)."""
        self._drain()
        return {
            "version": 1, "rank": self.rank, "world_size": self.world_size,
            "spec": self.spec, "iteration": self.iteration,
            "warmup_iters": self.warmup_iters,
            "residuals": self.comm.save_state(),
            "auto_plan": self.auto_plan, "auto_spec": self.auto_spec,
            "auto_report": self.auto_report,
            "auto_residuals": self.auto_comm.save_state() if self.auto_comm else None,
            "momentum": self.momentum, "weight_decay": self.weight_decay,
            "velocity": {i: u.clone() for i, u in self._velocity.items()},
        }

    def load_state_dict(self, state):
        """Restores a state_dict() of this rank (same spec and world size).

        Collective in auto mode when the checkpoint chose a compressed spec
        (every rank builds that communicator)."""
        if state.get("version") != 1:
            raise ValueError(f"gradwire.ddp: unknown state version {state.get('version')!r}")
        for key in ("rank", "world_size", "spec", "momentum", "weight_decay"):
            # Checkpoints from before momentum correction hold neither: 0.
            saved = state.get(key, 0.0 if key in ("momentum", "weight_decay") else None)
            if saved != getattr(self, key):
                raise ValueError(f"gradwire.ddp: checkpoint has {key}={saved!r}, "
                                 f"this state {getattr(self, key)!r}")
        self._drain()
        self.comm.restore_state(state["residuals"])
        if state.get("auto_spec") and self.auto_comm is None:
            self.auto_spec = state["auto_spec"]
            self.auto_comm = gradwire.Communicator(
                self.auto_spec, self._secret, dense_below_elements=self.dense_below_elements,
                dense_one_dimensional=self.dense_one_dimensional, job_suffix=_AUTO_SUFFIX,
                **self._args)
        if state.get("auto_residuals") is not None:
            self.auto_comm.restore_state(state["auto_residuals"])
        self._velocity = {int(i): u.clone() for i, u in (state.get("velocity") or {}).items()}
        self.auto_plan = state.get("auto_plan")
        self.auto_report = state.get("auto_report", "")
        self.iteration = state["iteration"]
        self.warmup_iters = state["warmup_iters"]

    def totals(self):
        """Bytes and times of every exchange so far (all communicators)."""
        out = dict(self.comm.totals())
        if self.auto_comm is not None:
            for k, v in self.auto_comm.totals().items():
                out[k] += v
        return out

    def close(self):
        """Collective orderly shutdown; call on every rank before exiting."""
        if self._worker is not None:
            self._drain()
            self._queue.put(None)
            self._worker.join()
            self._worker = None
        if self.auto_comm is not None:
            self.auto_comm.close()
        self.comm.close()


def hook(state, bucket):
    """DDP communication hook: model.register_comm_hook(state, hook)."""
    return state._submit(bucket)


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


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n
