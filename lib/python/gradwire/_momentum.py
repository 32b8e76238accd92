"""Which momentum correction a GradwireState applies (gradwire.ddp, module doc).

DGC's momentum correction needs SGD's momentum and weight decay inside the
hook: given explicitly (momentum=, weight_decay=, with a plain SGD
optimizer), or taken over from the optimizer with momentum_correction=True:
a torch.optim.SGD with momentum > 0 (no Nesterov, no dampening, one
momentum and weight decay for every parameter group) and a selection codec
(topk, approx_topk, randomk) on the flat exchange. Taking over sets the
groups' momentum and weight_decay to 0 and records the originals in the
groups as gradwire_momentum / gradwire_weight_decay, which
optimizer.state_dict() saves, so a state built after a restored optimizer
takes over the same values again.

Off by default: with the default 200-iteration warm-up it cost top-k
accuracy in the short Fashion-MNIST runs it was measured on (it helps after
a short warm-up; docs/results/2026-11-24-convergence.md).
"""

SELECTION_METHODS = ("topk", "approx_topk", "randomk")


def _error(message):
    import gradwire
    return gradwire._error(gradwire.InvalidArgumentError, message)


def _from_optimizer(optimizer):
    """(momentum, weight_decay, reason): what SGD `optimizer` applies, or a
    reason (str) it cannot be taken over (then the numbers are None)."""
    import torch
    if not isinstance(optimizer, torch.optim.SGD):
        return None, None, f"the optimizer is {type(optimizer).__name__}, not torch.optim.SGD"
    groups = optimizer.param_groups
    ms = {g.get("gradwire_momentum", g.get("momentum", 0.0)) for g in groups}
    wds = {g.get("gradwire_weight_decay", g.get("weight_decay", 0.0)) for g in groups}
    if len(ms) != 1 or len(wds) != 1:
        return None, None, "its parameter groups differ in momentum or weight decay"
    if any(g.get("nesterov") for g in groups):
        return None, None, "it uses Nesterov momentum"
    if any(g.get("dampening", 0.0) for g in groups):
        return None, None, "it uses dampening"
    m, wd = float(ms.pop()), float(wds.pop())
    if m <= 0.0:
        return None, None, "it has no momentum"
    return m, wd, None


def resolve(method, auto, hierarchical, optimizer, momentum_correction, momentum,
            weight_decay):
    """(momentum, weight_decay) the hook applies (0, 0: none), taking them
    over from `optimizer` when that is decided. Raises InvalidArgumentError
    for settings that cannot work together."""
    if momentum_correction not in (None, True, False):
        raise _error(f"momentum_correction must be None (off unless momentum= is given), "
                     f"True or False, got {momentum_correction!r}")
    why_not = None
    if auto:
        why_not = "spec 'auto' decides its codec only after the warm-up"
    elif hierarchical:
        why_not = "the hierarchical exchange (its mask is this rank's own selection)"
    elif method not in SELECTION_METHODS:
        why_not = f"method {method!r} is not a selection codec ({', '.join(SELECTION_METHODS)})"
    if momentum is not None or weight_decay is not None:
        # Given explicitly (with a plain SGD optimizer).
        m, wd = float(momentum or 0.0), float(weight_decay or 0.0)
        if optimizer is not None:
            raise _error("pass optimizer= or momentum=/weight_decay=, not both")
        if momentum_correction is False and m > 0.0:
            raise _error("momentum= asks for momentum correction; momentum_correction=False "
                         "refuses it")
        if not 0.0 <= m < 1.0 or wd < 0.0:
            raise _error(f"momentum must be in [0, 1) and weight_decay >= 0, got {m!r} and "
                         f"{wd!r}")
        if m == 0.0 and wd > 0.0:
            raise _error("weight_decay here belongs to momentum correction; with momentum=0 "
                         "leave weight decay to the optimizer")
        if m > 0.0 and why_not:
            raise _error(f"momentum correction is not available with {why_not}")
        return m, wd
    if not momentum_correction:
        return 0.0, 0.0
    if optimizer is None:
        raise _error("momentum_correction=True needs optimizer= (torch.optim.SGD with "
                     "momentum) or momentum=")
    m, wd, unusable = _from_optimizer(optimizer)
    if unusable or why_not:
        raise _error(f"momentum correction cannot take over this optimizer: "
                     f"{unusable or why_not}")
    for g in optimizer.param_groups:
        g["gradwire_momentum"], g["gradwire_weight_decay"] = m, wd
        g["momentum"], g["weight_decay"] = 0.0, 0.0
    return m, wd
