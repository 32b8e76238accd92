"""Error feedback under loss scaling: residuals follow the loss scale.

A loss scaler (torch.cuda.amp.GradScaler, or any object with get_scale())
multiplies the loss by a scale S before backward, so the gradients the hook
exchanges, and the residuals error feedback keeps of them, are S times the
true ones; the scaler unscales the averaged gradient by the S of its step.
When it changes S (halved after a non-finite step, doubled after
growth_interval clean ones), a residual made under the old scale would be
unscaled by the new one, and applied at twice or half its weight. With
GradwireState(loss_scaler=...), the hook reads the scale at each
iteration's first bucket and, when it changed from S to S', divides every
residual by S / S' before that iteration's exchanges: exact for the powers
of two GradScaler steps by, so a scaled run averages exactly S times what
the unscaled run averages (tests/python/nonfinite_test.py, "loss scale").

The scale the residuals are in goes into state_dict() ("loss_scale"), so a
restart that restores the scaler's own state goes on consistently.
"""

import math

import gradwire


def check_scaler(scaler, momentum):
    """The loss_scaler argument, checked: None or an object with get_scale()."""
    if scaler is None:
        return None
    if not callable(getattr(scaler, "get_scale", None)):
        raise gradwire._error(gradwire.UnsupportedError,
                              f"loss_scaler must have get_scale() (a torch.cuda.amp.GradScaler), "
                              f"got {type(scaler).__name__}")
    if momentum > 0.0:
        raise gradwire._error(gradwire.UnsupportedError,
                              "loss_scaler with momentum correction: it adds weight decay to "
                              "the gradient itself, which the scaler has scaled; use one or "
                              "the other")
    return scaler


def read_scale(scaler):
    """scaler.get_scale() as a positive finite float, or InvalidArgumentError."""
    raw = scaler.get_scale()
    try:
        scale = float(raw)
    except (TypeError, ValueError):
        scale = math.nan
    if not math.isfinite(scale) or scale <= 0.0:
        raise gradwire._error(gradwire.InvalidArgumentError,
                              f"loss_scaler.get_scale() must be a positive finite number, got "
                              f"{raw!r}")
    return scale


class LossScaleFollower:
    """Mixed into GradwireState: keeps its residuals in the scaler's scale."""

    def _follow_loss_scale(self, step):
        """At a bucket of iteration `step`: on the iteration's first, if the
        scale changed since the residuals were made, divides them (after the
        exchange thread has finished everything queued)."""
        if self.loss_scaler is None or self._scale_step == step:
            return
        self._scale_step = step
        scale = read_scale(self.loss_scaler)
        before, self._residual_scale = self._residual_scale, scale
        if before is None or before == scale:
            return
        self._drain()
        for comm in (self.comm, self.auto_comm):
            if comm is not None:
                comm.divide_residuals(before / scale)
