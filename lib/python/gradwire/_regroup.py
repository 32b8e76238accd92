"""DDP's first iteration in fresh processes, re-laid into a restored
checkpoint's bucket layouts (gradwire.ddp, "Checkpoints" in docs/python.md).

DDP lays its buckets out anew after its first iteration in a process (in the
order gradients became ready); a checkpoint's residuals and velocities are
laid out as after that rebuild, by bucket index. In a job restarted from a
checkpoint, DDP's first iteration hands other buckets: the same parameters,
grouped and ordered otherwise. Regroup takes those buckets apart into their
parameters' gradients and puts together each checkpoint bucket as soon as
every parameter of it has been handed over, in the checkpoint's order; the
hook exchanges it under its own index, with its own residual and velocity,
exactly as the uninterrupted job exchanged it; the averages go back into
the buckets DDP handed over, and each of DDP's Futures completes when every
checkpoint bucket holding a part of it is back. So the restarted job repeats
the uninterrupted one bit for bit.

A parameter is known by its place: (bucket index, position) in DDP's first
iteration in its process, the same in every process of one model and
bucketing; a checkpoint's layouts give each of its buckets as places.
Every rank hands the same buckets in the same order, so every rank puts the
checkpoint buckets together in the same order (ascending index among those
completed by one handed bucket): their exchanges match across ranks.

Thread-safe: buckets are added on DDP's thread, exchanges return on the
hook's exchange thread.
"""

import collections
import threading

import torch

import gradwire
from gradwire._checkpoint import place_owners


def _mismatch(message):
    return gradwire._error(gradwire.InvalidArgumentError, (
        f"gradwire.ddp: restoring a checkpoint: {message} (another model or "
        "bucket_cap_mb than the checkpoint's?)"))


class Regroup:
    """One first iteration's re-laying (module doc). add() per bucket DDP
    hands over, returned() per checkpoint bucket exchanged, finish() after
    the last one; fail() fails every Future not yet completed."""

    def __init__(self, layouts):
        """layouts: checkpoint bucket index -> tuple of places."""
        self.layouts = dict(layouts)
        self._where = place_owners(self.layouts)  # place -> (checkpoint bucket, position)
        # DDP's first-iteration bucket -> how many of its parameters the checkpoint places
        self._per_bucket = collections.Counter(b for b, _ in self._where)
        self._pieces = {i: [None] * len(p) for i, p in self.layouts.items()}
        self._params = {i: [None] * len(p) for i, p in self.layouts.items()}
        self._missing = {i: len(p) for i, p in self.layouts.items()}
        self._handed = {}   # DDP's bucket index -> [tensor, future, checkpoint buckets left]
        self._holders = {}  # checkpoint bucket -> DDP's bucket indices holding parts of it
        self._lock = threading.Lock()

    def add(self, index, tensor, params, fut):
        """Takes DDP's bucket `index` (its flat buffer `tensor` and its
        parameters in buffer order) whose Future `fut` completes later.
        Returns [(checkpoint index, flat buffer, parameters)] for the
        checkpoint buckets this bucket completed, ascending; raises
        InvalidArgumentError if its parameters are not the checkpoint's."""
        params = list(params or ())
        if sum(p.numel() for p in params) != tensor.numel():
            raise _mismatch(f"bucket {index}'s parameters do not cover its buffer")
        with self._lock:
            if index in self._handed:
                raise _mismatch(f"DDP handed bucket {index} twice in its first iteration")
            places = [(index, pos) for pos in range(len(params))]
            if (self._per_bucket[index] != len(params) or
                    any(place not in self._where for place in places)):
                raise _mismatch(f"bucket {index} of DDP's first iteration holds "
                                f"{len(params)} parameters, not those the checkpoint lays out")
            targets, off = set(), 0
            for place, p in zip(places, params):
                i, pos = self._where[place]
                self._pieces[i][pos], self._params[i][pos] = tensor[off:off + p.numel()], p
                self._missing[i] -= 1
                self._holders.setdefault(i, set()).add(index)
                targets.add(i)
                off += p.numel()
            self._handed[index] = [tensor, fut, len(targets)]
            ready = []
            for i in sorted(targets):
                if self._missing[i] == 0:
                    pieces = self._pieces[i]
                    kinds = {(t.dtype, t.device) for t in pieces}
                    if len(kinds) != 1:
                        raise _mismatch(f"checkpoint bucket {i} mixes dtypes or devices {kinds}")
                    ready.append((i, torch.cat(pieces), list(self._params[i])))
            return ready

    def returned(self, i, flat, error=None):
        """Checkpoint bucket i's exchange ended: its averages `flat` go back
        into the buckets DDP handed over (or `error` fails their Futures);
        completes each Future whose every part is back."""
        done = []
        with self._lock:
            if error is None:
                off = 0
                for t in self._pieces[i]:
                    t.copy_(flat[off:off + t.numel()])
                    off += t.numel()
            for index in sorted(self._holders.get(i, ())):
                entry = self._handed[index]
                if entry[1] is None:
                    continue
                entry[2] -= 1
                if error is not None or entry[2] == 0:
                    done.append((entry[1], entry[0]))
                    entry[1] = None
        for fut, tensor in done:
            if error is None:
                fut.set_result(tensor)
            else:
                fut.set_exception(error)

    def finish(self):
        """After DDP's last bucket of the iteration: raises (and the caller
        fails every Future) if a checkpoint bucket is still incomplete."""
        with self._lock:
            left = sorted(i for i, m in self._missing.items() if m)
        if left:
            raise _mismatch(f"checkpoint buckets {left} hold parameters DDP's first iteration "
                            "did not hand over")

    def fail(self, error):
        """Fails every Future not yet completed (nothing waits forever)."""
        with self._lock:
            futs = [e[1] for e in self._handed.values() if e[1] is not None]
            for e in self._handed.values():
                e[1] = None
        for fut in futs:
            fut.set_exception(error)
