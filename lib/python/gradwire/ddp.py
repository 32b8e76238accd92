"""PyTorch DDP communication hook: gradwire's compressed exchange with error feedback.

    import gradwire.ddp
    dist.init_process_group("gloo", ...)        # gradwire meets its peers through it
    model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    state = gradwire.ddp.GradwireState(method="topk", ratio=0.01)
    model.register_comm_hook(state, gradwire.ddp.hook)
    ...
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "gradwire": state.state_dict()}, f"ckpt.rank{rank}.pt")  # residuals are per rank
    state.load_state_dict(torch.load(f"ckpt.rank{rank}.pt")["gradwire"])
    state.close()                               # collective, before exiting

Rendezvous: through torch.distributed (process_group=, default the default
group): ranks, world size and the store come from it; constructing is
collective and checks, on every rank together, that all ranks hold the same
job secret and settings (spec, warm-up, momentum, ...): a mismatch raises
gradwire.MismatchError on every rank, before any training step.

What it does with each GradBucket (DDP's fused, flattened gradients):
- Iterations < warmup_iters: dense averaging (the sealed ring allreduce), like
  DGC's and PowerSGD's warm-up; at least 1, because DDP rebuilds its
  buckets after the first iteration and residuals are tied to a bucket's
  length.
- Afterwards the bucket is split by tensor, by the library's path rule
  (gradwire.path_for): with spec "none" every tensor is exchanged dense
  (ring allreduce); otherwise tensors with fewer than
  dense_below_elements elements and 1-D tensors (biases, norm scales) are
  exchanged dense, the rest compressed by the spec, with an
  error-feedback residual keyed by the bucket index. A small dense part
  rides, exact, in the compressed exchange's own frames, so a mixed bucket
  costs one exchange (combine_dense_below_bytes). Shapes come from
  bucket.parameters() (torch >= 1.10); without them the whole bucket takes
  one path by its size.
- float16 and bfloat16 buckets are widened to float32 (exact), exchanged
  (residuals and momentum stay float32) and rounded back to the bucket's
  dtype (tensor.copy_: to nearest, ties to even).
- CUDA buckets take the device path (docs/device_path.md: its C++ side ran
  on an H200; the hook's CUDA buckets have not yet run on a GPU): the
  bucket's data pointer and the CUDA stream current when DDP hands it over
  go to Communicator.allreduce_mean_device, which compresses on the GPU and
  moves only frames through the host.
  Without momentum correction and auto mode only (UnsupportedError);
  other device types are refused likewise.
- The exchange runs on one background thread (overlap=True), in the order
  DDP hands buckets over, which is the same on every rank; the hook returns
  a Future that completes when the bucket is averaged, so backprop of the
  remaining layers continues meanwhile. overlap=False exchanges inline.
- A restored state exchanges by the checkpoint's buckets until DDP's are the
  same (gradwire/_regroup.py): a restart, under another bucket_cap_mb too, is
  bit for bit.
- A failed exchange fails its Future with the original exception (DDP's
  backward then raises a RuntimeError naming it, "...gradwire.MismatchError:
  ..."), is kept as state.failure, and fails every later bucket at once.

Momentum correction (DGC, Lin et al., ICLR 2018): sparsifying the gradient
and applying momentum after the exchange delays and distorts the momentum
of every dropped coordinate; instead the hook takes over SGD's momentum and
weight decay: per tensor d = g + wd * w, then compressed tensors accumulate
the velocity locally, u = m * u + d, and send u through the error-feedback
exchange (the residual accumulates velocity), after which u is zeroed where
this rank's frame carried it in full (momentum factor masking); dense
tensors average d and then u = m * u + avg(d), exactly torch.optim.SGD's
momentum. The bucket returns the update direction. momentum_correction=True
with optimizer= a torch.optim.SGD with momentum, for a selection codec
(topk, approx_topk, randomk; flat exchange), takes them over: the state sets
the optimizer's momentum and weight decay to 0 and applies them itself
(gradwire/_momentum.py); or momentum= and weight_decay= give them, with a
plain SGD optimizer. Off by default: after the default warm-up it did not
help in the runs measured (docs/results/2026-11-24-convergence.md); after a
short warm-up it does.

spec "auto" (or "auto:ratio=0.01" for the floor): warm-up iterations also
measure the backward pass and each bucket's dense exchange (averaged over
ranks, so every rank decides the same), then decide per bucket: dense if
its exchange hides behind the backward computation still to come, else
top-k at the largest density from a ladder (gradwire._auto) whose predicted
exchange hides. state.auto_report says what was chosen and why.

exchange= picks how compressed parts travel: "auto" (default) lets the
library's cost model (lib/comm/exchange_cost_model.h) choose per bucket
among the dense ring, the sparse allgather, the sparse allreduce
(docs/sparse_allreduce.md) and, for fp16/bf16, the cast allreduce
(docs/cast_allreduce.md); "allgather", "sparse_allreduce",
"cast_allreduce" or "dense" force one. state.bucket_exchanges (per bucket
index: the exchange taken, the reason, the model's estimates) and
state.exchange_report show the choice; totals() counts
sparse_allreduce_buckets and cast_allreduce_buckets.

Pickling (as torch's PowerSGDState): a state pickles its settings and its
state_dict(), not its process group, secret or connections; the unpickled
state joins the default process group (or state.process_group, set before
first use) at its first use, collectively, and restores the state_dict then.

Newer PyTorch: the hook only uses GradBucket.index/buffer/is_last/
parameters and torch.futures.Future, stable since 1.10; the extension has
no torch C++ dependency (tensors cross by DLPack).
"""

import queue
import threading
import time

import torch

import gradwire
from gradwire import _checkpoint
from gradwire import _momentum
from gradwire._auto import AUTO_LADDER, choose_auto_plan  # noqa: F401 (public here)
from gradwire._exchange import BucketExchange
from gradwire._loss_scale import LossScaleFollower, check_scaler

__all__ = ["GradwireState", "hook", "choose_auto_plan", "AUTO_LADDER", "DEFAULT_WARMUP_ITERS",
           "EXCHANGES"]

# Dense iterations before compression starts, by default: chosen on two
# Fashion-MNIST settings, then measured on six others (docs/python.md,
# "Defaults"; docs/results/2026-11-24-convergence.md).
DEFAULT_WARMUP_ITERS = 200

_AUTO_SUFFIX = "/auto"
# What __getstate__ keeps of a state besides its state_dict().
_CONFIG = ("spec", "auto", "auto_floor", "warmup_iters", "dense_below_elements",
           "dense_one_dimensional", "overlap", "auto_tail_fraction", "momentum", "weight_decay",
           "combine_dense_below_bytes", "exchange", "_secret_file", "_args")
EXCHANGES = ("auto", "allgather", "sparse_allreduce", "cast_allreduce", "dense")
_SPARSE = ("topk", "approx_topk", "randomk")
_CASTS = ("fp16", "bf16")


def _invalid(message):
    return gradwire._error(gradwire.InvalidArgumentError, message)


def _unwrap(fut):
    """The bucket, or the original exception raised again: in a then()
    callback, so DDP's future fails (at the C++ level) with its message."""
    return fut.value()


class GradwireState(BucketExchange, LossScaleFollower):
    """Per-process state of the hook: communicator(s), plan, residuals, stats.

    spec: a gradwire spec string ("topk:ratio=0.01", "qsgd:bits=4,bucket=512",
        "none", ...) or "auto" / "auto:ratio=R"; or method= with typed
        settings (ratio=, bits=, bucket=, error_feedback=, seed=, values=,
        indices=: gradwire.make_spec). Default: top-k 1 % with error feedback.
    secret / secret_file: the job secret (str/bytes, >= 16 bytes) or a file
        holding it; default $GRADWIRE_JOB_SECRET, then $GRADWIRE_JOB_SECRET_FILE.
    process_group: the torch.distributed group to exchange in (default: the
        default group).
    warmup_iters: dense iterations before compression starts (>= 1).
    optimizer, momentum_correction: DGC momentum correction (module doc):
        momentum_correction=True takes SGD's momentum and weight decay over
        from optimizer=; momentum=, weight_decay= set them explicitly
        instead. Off by default.
    dense_below_elements, dense_one_dimensional: the library's path rule
        (gradwire.path_for).
    overlap: exchange on a background thread (see module doc).
    auto_tail_fraction: auto mode: the last bucket's exchange (nothing can
        hide it) may take at most this fraction of the backward time.
    combine_dense_below_bytes: a mixed bucket whose dense part would cost
        each rank at most this many received bytes as an allgather
        ((P-1) x 4 x elements) sends it inside the compressed exchange's
        frames (one exchange); a larger dense part gets a ring allreduce of
        its own. 0: always separate.
    exchange: how compressed parts travel: "auto" (the library's cost model
        picks per bucket among the dense ring, the sparse allgather, the
        sparse allreduce and the cast allreduce), "allgather",
        "sparse_allreduce" (O(k) bytes per rank as P grows; sparse specs:
        topk, approx_topk, randomk), "cast_allreduce" (16-bit reduce-scatter
        and 16-bit allgather of the averages; fp16, bf16) or "dense" (the ring, nothing
        compressed). state.bucket_exchanges and
        state.exchange_report say which each bucket took and why.
    loss_scaler: a torch.cuda.amp.GradScaler (anything with get_scale()):
        residuals follow its scale (gradwire/_loss_scale.py). Not pickled.
    Remaining keyword arguments go to gradwire.Communicator (hierarchical,
    timeout_s, dense_algorithm, event_loop_nice, emulate_nodes, iface).
    """

    def __init__(self, spec=None, secret=None, *, process_group=None, method=None, ratio=None,
                 bits=None, bucket=None, error_feedback=None, seed=None, values=None,
                 indices=None, warmup_iters=DEFAULT_WARMUP_ITERS, optimizer=None,
                 momentum_correction=None, momentum=None, weight_decay=None,
                 dense_below_elements=16384, dense_one_dimensional=True, overlap=True,
                 auto_tail_fraction=0.1, combine_dense_below_bytes=256 * 1024, secret_file=None,
                 exchange="auto", loss_scaler=None, **communicator_args):
        if spec is None and method is None:
            spec = "topk:ratio=0.01"
        raw = spec if spec is not None else method
        self.auto = isinstance(raw, str) and (raw == "auto" or raw.startswith("auto:"))
        self.auto_floor = 0.001
        if isinstance(warmup_iters, bool) or not isinstance(warmup_iters, int):
            raise gradwire._error(gradwire.UnsupportedError,
                                  f"warmup_iters must be an int, got {warmup_iters!r}")
        if warmup_iters < 1:
            raise _invalid("warmup_iters must be >= 1 (DDP rebuilds its buckets after the "
                           "first iteration)")
        if self.auto:
            others = {"bits": bits, "bucket": bucket, "error_feedback": error_feedback,
                      "seed": seed, "values": values, "indices": indices}
            given = [k for k, v in others.items() if v is not None]
            if given:
                raise _invalid(f"spec 'auto' takes only ratio= (the density floor), got "
                               f"{', '.join(given)}")
            if warmup_iters < 2:
                raise _invalid("spec 'auto' needs warmup_iters >= 2 (iteration 0 runs DDP's "
                               "bucket rebuild, later warm-up iterations are measured)")
            self.auto_floor = self._auto_floor(raw, ratio)
            self.spec = "none"
        else:
            self.spec = gradwire.make_spec(spec, method=method, ratio=ratio, bits=bits,
                                           bucket=bucket, error_feedback=error_feedback,
                                           seed=seed, values=values, indices=indices)
        self.exchange = self._check_exchange(exchange)
        self.momentum, self.weight_decay = _momentum.resolve(
            self.spec.split(":", 1)[0], self.auto, communicator_args.get("hierarchical", False),
            optimizer, momentum_correction, momentum, weight_decay)
        self.loss_scaler = check_scaler(loss_scaler, self.momentum)
        if combine_dense_below_bytes < 0:
            raise _invalid("combine_dense_below_bytes must be >= 0")
        if not 0 < auto_tail_fraction:
            raise _invalid("auto_tail_fraction must be > 0")
        self.combine_dense_below_bytes = combine_dense_below_bytes
        self.warmup_iters = warmup_iters
        self.dense_below_elements = dense_below_elements
        self.dense_one_dimensional = dense_one_dimensional
        self.overlap = overlap
        self.auto_tail_fraction = auto_tail_fraction
        self.process_group = process_group
        self._secret = secret
        self._secret_file = secret_file
        self._args = dict(communicator_args)
        self._reset()
        self._start()

    def _check_exchange(self, exchange):
        if not isinstance(exchange, str):
            raise gradwire._error(gradwire.UnsupportedError,
                                  f"exchange must be a str, got {type(exchange).__name__}")
        if exchange not in EXCHANGES:
            raise _invalid(f"exchange must be one of {', '.join(map(repr, EXCHANGES))}, got "
                           f"{exchange!r}")
        method = self.spec.split(":", 1)[0]
        if exchange == "sparse_allreduce" and not self.auto and method not in _SPARSE:
            raise _invalid(f"exchange='sparse_allreduce' needs a sparse spec "
                           f"({', '.join(_SPARSE)}), got {self.spec!r}")
        if exchange == "cast_allreduce" and not self.auto and method not in _CASTS:
            raise _invalid(f"exchange='cast_allreduce' needs an fp16 or bf16 spec, got "
                           f"{self.spec!r}")
        return exchange

    @staticmethod
    def _auto_floor(raw, ratio):
        floor = ratio
        if ":" in raw:
            key, _, value = raw.split(":", 1)[1].partition("=")
            if key != "ratio" or ratio is not None:
                raise _invalid(f"auto accepts only ratio=R (the density floor), got {raw!r}")
            try:
                floor = float(value)
            except ValueError:
                raise _invalid(f"auto: ratio must be a number, got {value!r}") from None
        floor = 0.001 if floor is None else float(floor)
        if not 0 < floor <= 1:
            raise _invalid(f"auto: ratio must be in (0, 1], got {floor!r}")
        return floor

    def _reset(self):
        """Everything besides the settings: no connection yet."""
        self._closed = False       # close() was called: every later use fails at once
        self.comm = None
        self.rank = self.world_size = None
        self.failure = None        # the exception that failed an exchange, if one did
        self._fail_fast = None     # ... once the exchange thread has reached it (_fail)
        self._velocity = {}        # momentum correction: bucket index -> u
        self._bucket_params = {}   # ... bucket index -> its parameters (layout of u)
        self._residual_scale = self._scale_step = None  # _loss_scale.py
        self._param_velocity = {}  # ... id(parameter) -> u, across DDP's bucket rebuild
        # The spec whose path rule splits buckets: auto compresses with
        # top-k once it has decided (its communicator's spec is "none").
        self._path_spec = "topk" if self.auto else self.spec
        self.auto_comm = None      # auto: the communicator of the chosen spec
        self.auto_plan = None      # auto: {bucket index: "dense" | ratio}
        self.auto_spec = None
        self.auto_report = ""
        self.iteration = 0
        self._layouts = {}         # bucket index -> ((length, places), [segments])
        # DDP's iterations in this process; where each parameter sat in the
        # first (BucketExchange._segments)
        self._local_iterations, self._first_place = 0, {}
        self._relay = None         # a restored state's layouts, re-laid into (_regroup.py)
        self._regroup = None       # ... this iteration's re-laying
        # auto-mode measurements during warm-up, per iteration
        self._t_first = None
        self._ready = {}           # bucket index -> [seconds after first bucket]
        self._dense_s = {}         # bucket index -> [exchange seconds]
        self._backward = []        # seconds from first to last bucket ready
        self._sizes = {}
        self._queue = None
        self._worker = None
        self._restore = None       # an unpickled state's state_dict, restored on connect
        # bucket index -> the exchange its compressed part took, and why
        # (_exchange.BucketExchange._record)
        self.bucket_exchanges = {}

    def _settings(self):
        """The hook's settings every rank must share (checked at rendezvous)."""
        auto = f"{self.auto_floor!r}" if self.auto else "off"
        return (f"hook.warmup_iters={self.warmup_iters};hook.momentum={self.momentum!r};"
                f"hook.weight_decay={self.weight_decay!r};"
                f"hook.combine_dense_below_bytes={self.combine_dense_below_bytes};"
                f"hook.auto={auto};hook.auto_tail_fraction={self.auto_tail_fraction!r};"
                f"hook.exchange={self.exchange};hook.loss_scaler={self.loss_scaler is not None};")

    def _connect(self, spec, **extra):
        import torch.distributed as dist
        group = self.process_group if self.process_group is not None else dist.group.WORLD
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("gradwire.ddp.GradwireState: torch.distributed is not "
                               "initialized: call torch.distributed.init_process_group first")
        return gradwire.Communicator(
            spec, self._secret, process_group=group, secret_file=self._secret_file,
            dense_below_elements=self.dense_below_elements,
            dense_one_dimensional=self.dense_one_dimensional, settings=self._settings(),
            exchange="auto" if spec.split(":", 1)[0] == "none" else self.exchange,
            **self._args, **extra)

    def _start(self):
        """Joins the group (collective) and starts the exchange thread."""
        self.comm = self._connect(self.spec)
        self.rank, self.world_size = self.comm.rank, self.comm.size
        if self.overlap:
            self._queue = queue.Queue()
            self._worker = threading.Thread(target=self._work, name="gradwire-ddp", daemon=True)
            self._worker.start()
        if self._restore is not None:
            restore, self._restore = self._restore, None
            self.load_state_dict(restore)

    def _ensure_started(self):
        if self._closed:
            e = gradwire._error(gradwire.CommunicationError,
                                "gradwire.ddp: this GradwireState is closed (close() was "
                                "called); make a new one, or load a checkpoint into a new one, "
                                "to go on training")
            e.code = "FAILED_PRECONDITION"
            raise e
        if self.comm is None:
            self._start()

    # -- the exchange --------------------------------------------------
    def _exchange_bucket(self, index, step, tensor, segments, mc):
        """_exchange on a float32 view: float16/bfloat16 buckets are widened
        and rounded back. CUDA buckets: _exchange_device (mc is the stream)."""
        if tensor.device.type == "cuda":
            work = tensor if tensor.dtype == torch.float32 else tensor.float()
            self._exchange_device(index, step, work, segments, mc)
            if work is not tensor:
                tensor.copy_(work)
            return
        if tensor.dtype == torch.float32:
            self._exchange(index, step, tensor, segments, mc)
            return
        work = tensor.float()
        if mc is not None and mc[0] is not None:
            mc = (mc[0].float(), mc[1])
        self._exchange(index, step, work, segments, mc)
        tensor.copy_(work)

    def _work(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            if item[0] == "drained":  # _drain's marker: everything before it is done
                item[1].set_result(None)
            elif item[0] == "failed":  # _fail's marker: every later bucket fails
                self._fail_fast = self._fail_fast or item[1]
            else:
                self._run(*item)

    def _run(self, index, step, tensor, segments, mc, fut):
        if self._fail_fast is not None:
            fut.set_exception(self._fail_fast)
            return
        try:
            self._exchange_bucket(index, step, tensor, segments, mc)
        except Exception as e:  # noqa: BLE001 - handed to DDP through the future
            self.failure = self._fail_fast = e
            fut.set_exception(e)
            return
        fut.set_result(tensor)

    def _fail(self, e):
        """A bucket refused before its exchange (as a checkpoint's layout is
        on every rank): the exchanges queued before it still run, as on the
        ranks that refuse it too, and every later one fails at once."""
        self.failure = self.failure or e
        if self._worker is None:
            self._fail_fast = self._fail_fast or e
        else:
            self._queue.put(("failed", e))

    def _submit(self, bucket):
        fut = torch.futures.Future()
        try:
            self._ensure_started()
            tensor = bucket.buffer()
            self._check_bucket(tensor)
            index, step = bucket.index(), self.iteration
            self._follow_loss_scale(step)
            if self.auto and 1 <= step < self.warmup_iters:
                now = time.perf_counter()
                if self._t_first is None:
                    self._t_first = now
                self._ready.setdefault(index, []).append(now - self._t_first)
                self._sizes[index] = tensor.numel()
            # A restored state's first iteration: by checkpoint bucket.
            regrouped = self._submit_regrouped(bucket, tensor, step, fut)
            if not regrouped:
                segments = self._segments(bucket)
                mc = self._momentum_inputs(bucket, tensor) if self.momentum > 0.0 else None
                if tensor.device.type == "cuda":  # the device path's stream, from this thread
                    mc = torch.cuda.current_stream(tensor.device).cuda_stream
        except Exception as e:  # noqa: BLE001 - handed to DDP through the future
            self._fail(e)
            fut.set_exception(e)
            return fut.then(_unwrap)
        if not regrouped:
            if self.overlap:
                self._queue.put((index, step, tensor, segments, mc, fut))
            else:
                self._run(index, step, tensor, segments, mc, fut)
        if bucket.is_last():
            self._end_iteration(step)
        return fut.then(_unwrap)

    def _end_iteration(self, step):
        if self._local_iterations == 0:
            self._after_first_iteration()
        self._local_iterations += 1
        if self.auto and 1 <= step < self.warmup_iters:
            self._backward.append(time.perf_counter() - self._t_first)
            self._t_first = None
            if step == self.warmup_iters - 1:
                self._drain()
                if self.failure is None:
                    self._decide_auto()
        self.iteration += 1

    def _drain(self):
        """Waits until the worker has exchanged everything queued."""
        if self._worker is not None:
            done = threading.Event()
            fut = torch.futures.Future()
            fut.add_done_callback(lambda _: done.set())
            self._queue.put(("drained", fut))
            done.wait()

    # -- auto mode -----------------------------------------------------
    def _decide_auto(self):
        indices = sorted(self._sizes)
        # Every rank must decide alike: average the measurements (medians
        # over the warm-up) over ranks with a dense exchange, whose result
        # is identical everywhere (iteration 0 is not measured: DDP's
        # bucket rebuild).
        def med(xs):
            xs = sorted(xs)
            return xs[len(xs) // 2]
        meas = [med(self._backward)]
        for i in indices:
            meas += [med(self._ready[i]), med(self._dense_s[i])]
        buf = torch.tensor(meas, dtype=torch.float32)
        self.comm.allreduce_mean(buf, bucket=0xFFFFFFF0, step=self.warmup_iters, path="dense")
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
            self.auto_comm = self._connect(self.auto_spec, job_suffix=_AUTO_SUFFIX)

    # -- checkpoints, pickling, stats, shutdown ------------------------
    def state_dict(self):
        """This rank's hook state (residuals are per rank: save one per rank)."""
        self._ensure_started()
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
            "loss_scale": self._residual_scale,
            "velocity": {i: u.clone() for i, u in self._velocity.items()},
            "layouts": self._checkpoint_layouts(),
        }

    def load_state_dict(self, state):
        """Restores a state_dict() of this rank (same spec and world size).

        Collective in auto mode when the checkpoint chose a compressed spec
        (every rank builds that communicator)."""
        self._ensure_started()
        velocity, layouts = _checkpoint.check_state_dict(state)
        for key in ("rank", "world_size", "spec", "momentum", "weight_decay"):
            # Checkpoints from before momentum correction hold neither: 0.
            saved = state.get(key, 0.0 if key in ("momentum", "weight_decay") else None)
            if saved != getattr(self, key):
                raise _invalid(f"gradwire.ddp: checkpoint has {key}={saved!r}, "
                               f"this state {getattr(self, key)!r}")
        self._drain()
        # All or nothing: the residuals as they were come back if a later
        # part of the checkpoint is refused.
        before = self.comm.save_state()
        self.comm.restore_state(state["residuals"])
        try:
            if state.get("auto_spec") and self.auto_comm is None:
                self.auto_spec = state["auto_spec"]
                self.auto_comm = self._connect(self.auto_spec, job_suffix=_AUTO_SUFFIX)
            if state.get("auto_residuals") is not None:
                if self.auto_comm is None:
                    raise _invalid("gradwire.ddp: checkpoint has auto_residuals but no auto_spec")
                self.auto_comm.restore_state(state["auto_residuals"])
        except BaseException:
            self.comm.restore_state(before)
            raise
        # DDP's buckets re-laid into the checkpoint's until they are the same.
        self._velocity, self._relay = velocity, layouts or None
        self._layouts.clear()
        self._bucket_params, self._param_velocity = {}, {}  # the velocities are the checkpoint's
        self.auto_plan = state.get("auto_plan")
        self.auto_report = state.get("auto_report", "")
        self.iteration = state["iteration"]
        self.warmup_iters = state["warmup_iters"]
        self._residual_scale, self._scale_step = state.get("loss_scale"), None

    def __getstate__(self):
        """Settings and state_dict(); not the process group, the secret or
        the connections (see the module doc)."""
        state = self._restore if self.comm is None else self.state_dict()
        return {"config": {k: getattr(self, k) for k in _CONFIG}, "state": state}

    def __setstate__(self, pickled):
        self.exchange = "auto"  # states pickled before exchange= existed
        for k, v in pickled["config"].items():
            setattr(self, k, v)
        self.process_group = self.loss_scaler = None
        self._secret = None
        self._reset()
        self._restore = pickled["state"]

    def totals(self):
        """Bytes and times of every exchange so far (all communicators)."""
        self._ensure_started()
        out = dict(self.comm.totals())
        if self.auto_comm is not None:
            for k, v in self.auto_comm.totals().items():
                out[k] += v
        return out

    def close(self):
        """Collective orderly shutdown; call on every rank before exiting.
        Afterwards the hook fails each bucket at once (a closed state never
        exchanges again); a second close() does nothing. After a failure
        (state.failure) it only lets go of the connections, without raising."""
        if self._closed:
            return
        self._closed = True
        if self.comm is None:
            return
        if self._worker is not None:
            self._drain()
            self._queue.put(None)
            self._worker.join()
            self._worker = None
        if self.failure is not None:  # poisoned: no orderly shutdown is possible
            self.comm = self.auto_comm = None  # their connections close with them
            return
        if self.auto_comm is not None:
            self.auto_comm.close()
        self.comm.close()


def hook(state, bucket):
    """DDP communication hook: model.register_comm_hook(state, hook)."""
    return state._submit(bucket)
