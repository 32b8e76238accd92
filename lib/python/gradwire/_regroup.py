"""DDP's buckets re-laid into a restored checkpoint's bucket layouts
(gradwire.ddp, "Checkpoints" in docs/python.md).

DDP lays its buckets out anew after its first iteration in a process (in the
order gradients became ready); a checkpoint's residuals and velocities are
laid out as after that rebuild, by bucket index. In a job restarted from a
checkpoint, DDP's first iteration hands other buckets: the same parameters,
grouped and ordered otherwise; under another bucket_cap_mb its rebuilt
buckets differ too. Regroup takes the buckets DDP hands over apart into their
parameters' gradients and puts together each checkpoint bucket as soon as
every parameter of it has been handed over, in the checkpoint's order; the
hook exchanges it under its own index, with its own residual and velocity,
exactly as the uninterrupted job exchanged it; the averages go back into the
buckets DDP handed over, and each of DDP's Futures completes when every
checkpoint bucket holding a part of it is back. So the restarted job repeats
the uninterrupted one bit for bit, under another bucket_cap_mb too (not with
find_unused_parameters toggled: DDP's first iteration, which names the
parameters, then differs). One Regroup serves one iteration; the hook keeps
re-laying until an iteration in which every bucket DDP hands over is a
checkpoint bucket under its own index (a bucket that is one checkpoint
bucket, in its order, goes through whole, uncopied).

A parameter is known by its place: (bucket index, position) in DDP's first
iteration in its process, the same in every process of one model and
bucketing; a checkpoint's layouts give each of its buckets as places.
Every rank hands the same buckets in the same order, so every rank puts the
checkpoint buckets together in the same order (ascending index among those
completed by one handed bucket): their exchanges match across ranks.

Thread-safe: buckets are added on DDP's thread, exchanges return on the
hook's exchange thread.
"""

import threading

import torch

import gradwire
from gradwire._checkpoint import place_owners


def _mismatch(message):
    return gradwire._error(gradwire.InvalidArgumentError, (
        f"gradwire.ddp: restoring a checkpoint: {message} (another model than the "
        "checkpoint's, or find_unused_parameters toggled?)"))


class Regroup:
    """One iteration's re-laying (module doc). add() per bucket DDP hands
    over, returned() per checkpoint bucket exchanged, finish() after the
    last one; fail() fails every Future not yet completed."""

    def __init__(self, layouts):
        """layouts: checkpoint bucket index -> tuple of places."""
        self.layouts = dict(layouts)
        self._where = place_owners(self.layouts)  # place -> (checkpoint bucket, position)
        self._pieces = {i: [None] * len(p) for i, p in self.layouts.items()}
        self._params = {i: [None] * len(p) for i, p in self.layouts.items()}
        self._missing = {i: len(p) for i, p in self.layouts.items()}
        self._handed = {}   # DDP's bucket index -> [tensor, future, checkpoint buckets left]
        self._holders = {}  # checkpoint bucket -> DDP's bucket indices holding parts of it
        self._taken = set()    # places handed over
        self._in_place = True  # every bucket so far one checkpoint bucket under its own index
        self._lock = threading.Lock()

    def add(self, index, tensor, params, fut, places=None):
        """Takes DDP's bucket `index` (its flat buffer `tensor` and its
        parameters in buffer order, at `places`: by default DDP's first
        iteration's own, (index, position)) whose Future `fut` completes
        later. Returns [(checkpoint index, flat buffer, parameters)] for the
        checkpoint buckets this bucket completed, ascending; raises
        InvalidArgumentError if its parameters are not the checkpoint's."""
        params = list(params or ())
        if sum(p.numel() for p in params) != tensor.numel():
            raise _mismatch(f"bucket {index}'s parameters do not cover its buffer")
        if places is None:
            places = [(index, pos) for pos in range(len(params))]
        places = [tuple(w) if w is not None else None for w in places]
        with self._lock:
            if index in self._handed:
                raise _mismatch(f"DDP handed bucket {index} twice in one iteration")
            owners = [self._where.get(w) for w in places]
            if (not params or len(set(places)) != len(places) or None in owners or
                    not self._taken.isdisjoint(places)):
                raise _mismatch(f"bucket {index} DDP handed over holds {len(params)} "
                                "parameters, not those the checkpoint lays out")
            self._taken.update(places)
            first = owners[0][0]
            if tuple(places) == self.layouts[first]:
                # One checkpoint bucket, in its order: through whole.
                self._pieces[first] = [tensor]
                self._params[first] = params
                self._missing[first] = 0
                self._holders[first] = {index}
                self._handed[index] = [tensor, fut, 1]
                self._in_place = self._in_place and first == index
                return [(first, tensor, params)]
            self._in_place = False
            targets, off = set(), 0
            for (i, pos), p in zip(owners, params):
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
            pieces = self._pieces[i]
            if error is None and not (len(pieces) == 1 and pieces[0] is flat):
                off = 0
                for t in pieces:
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
        """After DDP's last bucket of the iteration: True if every bucket
        DDP handed over was one checkpoint bucket under its own index (the
        checkpoint's layouts are DDP's: re-laying may end); raises (and the
        caller fails every Future) if a checkpoint bucket is incomplete."""
        with self._lock:
            left = sorted(i for i, m in self._missing.items() if m)
            in_place = self._in_place
        if left:
            raise _mismatch(f"checkpoint buckets {left} hold parameters DDP's iteration "
                            "did not hand over")
        return in_place

    def fail(self, error):
        """Fails every Future not yet completed (nothing waits forever)."""
        with self._lock:
            futs = [e[1] for e in self._handed.values() if e[1] is not None]
            for e in self._handed.values():
                e[1] = None
        for fut in futs:
            fut.set_exception(error)
