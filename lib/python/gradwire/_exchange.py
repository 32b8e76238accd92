"""How GradwireState exchanges one DDP bucket (gradwire.ddp, module doc):
the bucket's layout by the library's path rule, the dense / compressed /
mixed exchanges, and DGC's momentum correction. A mixin: GradwireState
holds the communicators and settings these methods use. Buckets arrive
here as float32 (GradwireState widens float16 / bfloat16 ones)."""

import functools
import time

import torch

import gradwire
from gradwire._regroup import Regroup

_FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16)


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


def _parameters(bucket):
    """The bucket's parameters in buffer order, or None where GradBucket
    does not say."""
    try:
        return list(bucket.parameters())
    except (AttributeError, RuntimeError):
        return None


def _regrouped(regroup, i, flat, inner):
    """Checkpoint bucket i's exchange ended (on the exchange thread): its
    averages go back (an exception raised here would be lost in torch's
    callback, and DDP would wait forever: it fails every Future instead)."""
    try:
        try:
            inner.wait()
        except Exception as e:  # noqa: BLE001 - the exchange's failure, for DDP
            regroup.returned(i, flat, e)
            return
        regroup.returned(i, flat)
    except Exception as e:  # noqa: BLE001
        regroup.fail(e)


class _Bucket:
    """A checkpoint bucket put together by Regroup, as the GradBucket
    methods _segments and _momentum_inputs use."""

    def __init__(self, index, buffer, params):
        self._index, self._buffer, self._params = index, buffer, params

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def parameters(self):
        return self._params


class BucketExchange:
    """The per-bucket exchange of GradwireState (see the module doc)."""

    def _segments(self, bucket):
        """Segments of the bucket's buffer by path, fixed per layout of its
        parameters. A parameter is known by where it sat in DDP's first
        iteration in this process (bucket index, position), the same in every
        process of one model and bucketing: the places a checkpoint's layouts
        name (a restored state's buckets are re-laid into those layouts by
        _submit_regrouped until DDP's are the same)."""
        index, length = bucket.index(), bucket.buffer().numel()
        params = _parameters(bucket)
        if params and sum(p.numel() for p in params) == length:
            self._record_places(index, params)
            places = tuple(self._first_place.get(id(p)) for p in params)
        else:
            params, places = None, None
        cached = self._layouts.get(index)
        if cached is not None and cached[0] == (length, places):
            return cached[1]
        if params is None:
            segments = [_Segment(0, length, self._is_dense(length, False))]
        else:
            segments = []
            offset = 0
            for p in params:
                n = p.numel()
                dense = self._is_dense(n, p.dim() == 1)
                if segments and segments[-1].dense == dense:
                    segments[-1].stop = offset + n
                else:
                    segments.append(_Segment(offset, offset + n, dense))
                offset += n
        self._layouts[index] = ((length, places), segments)
        return segments

    def _record_places(self, index, params):
        """Where DDP's first iteration in this process put each parameter
        (a checkpoint bucket put together by Regroup keeps them)."""
        if self._local_iterations == 0:
            for position, p in enumerate(params):
                self._first_place.setdefault(id(p), (index, position))

    def _submit_regrouped(self, bucket, tensor, step, fut):
        """An iteration of a restored state whose buckets DDP does not (yet)
        hand over as the checkpoint's (self._relay, gradwire/_regroup.py): the
        bucket is taken apart, and each checkpoint bucket it completes is
        exchanged under its own index; `fut` completes once all of the bucket
        is back. False (nothing done) where the bucket takes the plain path:
        no layouts to re-lay into, or a bucket that does not say its
        parameters (GradBucket before torch 1.10: taken as it comes)."""
        params = _parameters(bucket)
        first = self._local_iterations == 0
        if self._regroup is None and (self._relay is None or not params):
            return False
        try:
            if self._regroup is None:
                self._regroup = Regroup(self._relay)
            self._record_places(bucket.index(), params)
            places = None if first else [self._first_place.get(id(p)) for p in params]
            for i, flat, members in self._regroup.add(bucket.index(), tensor, params, fut,
                                                      places):
                part = _Bucket(i, flat, members)
                segments = self._segments(part)
                mc = self._momentum_inputs(part, flat) if self.momentum > 0.0 else None
                if flat.device.type == "cuda":
                    mc = torch.cuda.current_stream(flat.device).cuda_stream
                inner = torch.futures.Future()
                inner.add_done_callback(functools.partial(_regrouped, self._regroup, i, flat))
                if self.overlap:
                    self._queue.put((i, step, flat, segments, mc, inner))
                else:
                    self._run(i, step, flat, segments, mc, inner)
            if bucket.is_last():
                # DDP's buckets are the checkpoint's: the plain path from now
                # on (not after its first iteration, which DDP rebuilds).
                if self._regroup.finish() and not first:
                    self._relay = None
                self._regroup = None
        except Exception as e:  # noqa: BLE001 - handed to DDP through the futures
            self._fail(e)
            if self._regroup is not None:
                self._regroup.fail(e)
                self._regroup = None
            if not fut.done():
                fut.set_exception(e)
        return True

    def _check_bucket(self, tensor):
        if tensor.device.type == "cuda":
            if self.momentum > 0.0 or self.auto:
                raise gradwire._error(
                    gradwire.UnsupportedError,
                    "gradwire.ddp.hook: CUDA buckets take the device path, which does not yet "
                    "do momentum correction or auto mode (momentum=0, auto=False)")
        elif tensor.device.type != "cpu":
            raise gradwire._error(
                gradwire.UnsupportedError,
                f"gradwire.ddp.hook: {tensor.device.type.upper()} buckets are not supported: "
                "train with CPU or CUDA tensors")
        if tensor.dtype not in _FLOAT_TYPES:
            raise gradwire._error(
                gradwire.UnsupportedError,
                f"gradwire.ddp.hook: float32, float16 or bfloat16 buckets only, got "
                f"{tensor.dtype}")

    @staticmethod
    def _momentum_inputs(bucket, tensor):
        """Momentum correction's (weights or None, parameters) of a bucket."""
        params = list(bucket.parameters())
        if sum(p.numel() for p in params) != tensor.numel():
            raise RuntimeError("gradwire.ddp: bucket.parameters() does not cover the "
                               "bucket's buffer; momentum correction needs it")
        # The weights as one flat vector in the bucket's layout (DDP waits
        # for every Future before the optimizer steps, so they do not
        # change while the exchange uses them).
        return torch.cat([p.detach().reshape(-1) for p in params]), params

    def _checkpoint_layouts(self):
        """state_dict's "layouts": bucket index -> its parameters' first
        places, for the layouts its residuals and velocities are in."""
        out = {i: [list(p) for p in places] for i, places in (self._relay or {}).items()}
        for index, ((_, places), _) in self._layouts.items():
            if places is not None and None not in places:
                out[index] = [list(p) for p in places]
        return out

    def _after_first_iteration(self):
        """DDP rebuilds its buckets after its first iteration in a process:
        layouts are found again, and the velocities made in that iteration
        go to their parameters, for the rebuilt buckets (a restored state's
        velocities stay with the checkpoint's buckets, self._relay)."""
        self._layouts.clear()
        if self.momentum > 0.0:
            # Velocities per parameter, to be laid out again in the rebuilt
            # buckets (exactly torch.optim.SGD's momentum).
            self._drain()
            for index, params in self._bucket_params.items():
                u = self._velocity.pop(index)
                off = 0
                for p in params:
                    self._param_velocity[id(p)] = u[off:off + p.numel()].clone()
                    off += p.numel()
            self._bucket_params.clear()

    def _is_dense(self, elements, one_dimensional):
        return gradwire.path_for(self._path_spec, elements, one_dimensional,
                                 self.dense_below_elements, self.dense_one_dimensional) == "dense"

    def _exchange(self, index, step, tensor, segments, mc=None):
        """Averages `tensor` (the bucket's flat buffer) in place (with
        momentum correction: replaces it by the update direction)."""
        if self.momentum > 0.0:
            return self._exchange_corrected(index, step, tensor, segments, *mc)
        warm = step < self.warmup_iters
        flat = tensor
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
            self._record_dense(index, flat.numel())
            return
        if all(not seg.dense for seg in segments):
            self._exchange_mixed(comm, index, step, flat, None)
            return
        # Mixed bucket: gather each path's tensors into one contiguous
        # buffer, exchange, scatter back.
        dense_segs = [s for s in segments if s.dense]
        sparse_segs = [s for s in segments if not s.dense]
        dense, sparse = _gather(tensor, dense_segs), _gather(tensor, sparse_segs)
        self._exchange_mixed(comm, index, step, sparse, dense)
        _scatter(dense, tensor, dense_segs)
        _scatter(sparse, tensor, sparse_segs)

    def _exchange_device(self, index, step, tensor, segments, stream):
        """_exchange for a CUDA bucket (float32, no momentum, no auto): the
        device path (Communicator.allreduce_mean_device; from Python not yet
        run on a GPU), ordered on `stream`, the CUDA stream handle the bucket
        was produced on. A mixed bucket's parts are gathered on the device
        and exchanged separately (the device path has no dense section), so
        its dense part takes the ring."""
        def run(flat, bucket, path):
            self.comm.allreduce_mean_device(flat.data_ptr(), flat.numel(), bucket=bucket,
                                            step=step, stream=stream, path=path)

        if step < self.warmup_iters or all(seg.dense for seg in segments):
            run(tensor, 2 * index, "dense")
            return
        if all(not seg.dense for seg in segments):
            run(tensor, 2 * index + 1, "compressed")
            return
        dense_segs = [s for s in segments if s.dense]
        sparse_segs = [s for s in segments if not s.dense]
        dense, sparse = _gather(tensor, dense_segs), _gather(tensor, sparse_segs)
        run(dense, 2 * index, "dense")
        run(sparse, 2 * index + 1, "compressed")
        _scatter(dense, tensor, dense_segs)
        _scatter(sparse, tensor, sparse_segs)

    def _exchange_mixed(self, comm, index, step, sparse, dense):
        """Averages a bucket's compressed part `sparse` and its dense part
        `dense` (None: none) in place: one exchange when the dense part is
        small enough to ride in the compressed frames, else two."""
        riding = (dense is not None and (self.world_size - 1) * 4 * dense.numel()
                  <= self.combine_dense_below_bytes)
        if dense is None:
            comm.allreduce_mean(sparse, bucket=2 * index + 1, step=step,
                                path="compressed")
        elif riding:
            comm.allreduce_mean_with_dense(sparse, dense, bucket=2 * index + 1,
                                           step=step)
        else:
            self.comm.allreduce_mean(dense, bucket=2 * index, step=step, path="dense")
            comm.allreduce_mean(sparse, bucket=2 * index + 1, step=step,
                                path="compressed")
        self._record(comm, index, sparse.numel(), riding)

    # -- which exchange each bucket took, and why ----------------------
    def _record(self, comm, index, elements, riding):
        """Books the exchange bucket `index`'s compressed part took (from
        the communicator's own counters) and, when it changes, the cost
        model's reasons (Communicator.exchange_estimates)."""
        last = comm.last_call()
        used = ("sparse_allreduce" if last["sparse_allreduce_buckets"] else
                "cast_allreduce" if last["cast_allreduce_buckets"] else
                "sparse_allgather" if last["compressed_buckets"] else "dense_ring")
        entry = self.bucket_exchanges.get(index)
        if entry is None or (entry["exchange"], entry["elements"]) != (used, elements):
            why = comm.exchange_estimates(elements)
            if why["forced"]:
                reason = f"exchange={self.exchange!r}"
            elif riding and why["model_choice"] != used:
                reason = (f"its dense part rides in the allgather's frames (the model alone "
                          f"picks {why['model_choice']}; combine_dense_below_bytes)")
            else:
                reason = why["rule"]
            entry = {"exchange": used, "elements": elements, "reason": reason,
                     "model_choice": why["model_choice"], "model_ranks": why["ranks"],
                     "model_elements": why["elements"], "estimates": why["estimates"],
                     "exchanges": 0}
            self.bucket_exchanges[index] = entry
        entry["exchanges"] += 1

    def _record_dense(self, index, elements):
        entry = self.bucket_exchanges.get(index)
        if entry is None or (entry["exchange"], entry["elements"]) != ("dense_ring", elements):
            entry = {"exchange": "dense_ring", "elements": elements, "exchanges": 0,
                     "reason": "dense path (the path rule, spec 'none' or auto's plan)"}
            self.bucket_exchanges[index] = entry
        entry["exchanges"] += 1

    @property
    def exchange_report(self):
        """One line per bucket exchanged since the warm-up: the exchange its
        compressed part took, why, and the cost model's estimates."""
        lines = [f"exchange={self.exchange!r}, {self.world_size} ranks"]
        for index in sorted(self.bucket_exchanges):
            e = self.bucket_exchanges[index]
            line = (f"bucket {index}: {e['elements']} elements -> {e['exchange']} "
                    f"({e['reason']}), {e['exchanges']} exchanges")
            if e.get("estimates"):
                line += f"; model ({e['model_ranks']} ranks, {e['model_elements']} elements): "
                line += ", ".join(
                    f"{k} {c['seconds'] * 1e3:.3f} ms / {c['bytes_sent'] / 1e3:.1f} kB sent"
                    for k, c in e["estimates"].items())
            lines.append(line)
        return "\n".join(lines)

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
            self.comm.allreduce_mean(tensor, bucket=2 * index, step=step, path="dense")
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
        if self.comm.copy_residual(2 * index + 1, residual):
            # Momentum factor masking: drop what this rank sent in full.
            _scatter(_gather(u, compressed).masked_fill_(residual == 0, 0.0), u, compressed)
        _scatter(sparse, tensor, compressed)
        if dense:
            velocity = _gather(u, dense).mul_(m).add_(flat)
            _scatter(velocity, u, dense)
            _scatter(velocity, tensor, dense)
