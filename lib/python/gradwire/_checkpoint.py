"""GradwireState.load_state_dict's check of a checkpoint (state_dict()'s
dict), every field before anything is restored: a checkpoint is outside
input (a file, another run), and a bad field taken as it was broke the next
step (iteration=-5, warmup_iters=0) or failed half-way through a restore."""

import math

import torch

import gradwire


def _invalid(message):
    return gradwire._error(gradwire.InvalidArgumentError, message)


def check_state_dict(state):
    """A state_dict()'s fields, each of its type and range, before anything
    is restored; returns its momentum velocities by bucket index and its
    layouts (bucket index -> the first places of its parameters, as
    tuples; checkpoints from before layouts were saved hold none)."""
    def bad(what):
        return _invalid(f"gradwire.ddp: checkpoint {what}")
    if not isinstance(state, dict):
        raise bad(f"must be a dict from state_dict(), got {type(state).__name__}")
    if state.get("version") != 1:
        raise _invalid(f"gradwire.ddp: unknown state version {state.get('version')!r}")
    for key, least in (("iteration", 0), ("warmup_iters", 1)):
        value = state.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise bad(f"{key} must be an int >= {least}, got {value!r}")
    if not isinstance(state.get("residuals"), bytes):
        raise bad(f"residuals must be bytes (save_state()), got "
                  f"{type(state.get('residuals')).__name__}")
    for key, kinds in (("auto_residuals", bytes), ("auto_spec", str), ("auto_plan", dict),
                       ("auto_report", str)):
        if state.get(key) is not None and not isinstance(state[key], kinds):
            raise bad(f"{key} must be {kinds.__name__} or None, got {state[key]!r:.80}")
    scale = state.get("loss_scale")  # _loss_scale.py: the scale the residuals are in
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                              or not math.isfinite(scale) or scale <= 0):
        raise bad(f"loss_scale must be a positive finite number or None, got {scale!r:.80}")
    out = {}
    for i, u in _per_bucket(state, "velocity", bad):
        if not isinstance(u, torch.Tensor) or not u.is_floating_point():
            raise bad(f"velocity[{i}] must be a floating-point tensor, got {type(u).__name__}")
        out[i] = u.clone()
    places = {}
    for i, where in _per_bucket(state, "layouts", bad):
        if (not isinstance(where, (list, tuple)) or not where or not all(
                isinstance(w, (list, tuple)) and len(w) == 2 and all(
                    isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in w)
                for w in where)):
            raise bad(f"layouts[{i}] must be a list of [bucket index, position] pairs, got "
                      f"{where!r:.80}")
        places[i] = tuple(tuple(w) for w in where)
    place_owners(places)
    return out, places


def place_owners(layouts):
    """Each parameter place of `layouts` (bucket index -> its places) ->
    (bucket index, position): the map gradwire/_regroup.py re-lays DDP's
    first iteration by. A parameter sits in one bucket at one position:
    InvalidArgumentError for a place named twice."""
    owners = {}
    for i in sorted(layouts):
        for pos, w in enumerate(layouts[i]):
            if w in owners:
                raise _invalid(f"gradwire.ddp: checkpoint layouts name the parameter place "
                               f"{list(w)} twice (buckets {owners[w][0]} and {i})")
            owners[w] = (i, pos)
    return owners


def _per_bucket(state, key, bad):
    """The checkpoint's dict `key` (bucket index -> value; absent: empty) as
    (index, value) pairs, each index an int >= 0 (or its digits)."""
    entries = state.get(key) or {}
    if not isinstance(entries, dict):
        raise bad(f"{key} must be a dict, got {type(entries).__name__}")
    out = []
    for i, value in entries.items():
        if isinstance(i, str) and i.isascii() and i.isdigit():
            i = int(i)
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise bad(f"{key} keys must be bucket indices (int >= 0), got {i!r:.80}")
        out.append((i, value))
    return out
