"""Normalization ops: rms_norm (with the fused residual add servers use)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._arrays import rows_view_ok
from .._call import resolve
from .._registry import register


def rms_norm_reference(
    x: np.ndarray, weight: np.ndarray, eps: float, residual: Optional[np.ndarray] = None
) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """(y, h): h = x + residual (or x), y = h / sqrt(mean(h^2) + eps) * weight, in float32."""
    h = x.astype(np.float32)
    if residual is not None:
        h = h + residual.astype(np.float32)
    mean_square = np.mean(np.square(h), axis=-1, keepdims=True)
    y = h / np.sqrt(mean_square + np.float32(eps)) * weight.astype(np.float32)
    return y, (h if residual is not None else None)


@register
def rms_norm(x: Any, weight: Any, eps: float = 1e-6, residual: Any = None, *, backend: Optional[str] = None) -> Any:
    """RMS norm over the last dim. With residual, returns (rms_norm(x + residual), x + residual) in one pass."""
    op = "rms_norm"
    call, (vx, vw, vr) = resolve(op, backend, ("x", "weight", "residual"), (x, weight, residual))
    eps = check.finite_float(op, "eps", eps, minimum=0.0)
    check.dtype(op, "x", vx, check.FLOATS)
    check.same_dtype(op, ("x", vx), ("weight", vw), ("residual", vr))
    if vx.ndim < 1:
        raise ValueError(f"{op}: x must have at least 1 dim, got a scalar")
    if vw.shape != (vx.shape[-1],):
        raise ValueError(
            f"{op}: weight must have shape ({vx.shape[-1]},) to match x's last dim, got {check.shape_text(vw.shape)}"
        )
    check.same_shape(op, ("x", vx), ("residual", vr))
    if not call.on_gpu:
        y, h = rms_norm_reference(call.host(vx), call.host(vw), eps, None if vr is None else call.host(vr))
        y = call.result(y, vx.dtype)
        return y if h is None else (y, call.result(h, vx.dtype))
    if not rows_view_ok(vx.shape, vx.strides):
        vx = call.contiguous(vx)
    if vr is not None and not rows_view_ok(vr.shape, vr.strides):
        vr = call.contiguous(vr)
    vw = call.contiguous(vw)
    out = call.empty_like(vx)
    residual_out = None if vr is None else call.empty_like(vx)
    call.launch("xopsaot_rms_norm", (vx, vw, vr, out, residual_out), eps)
    return out.obj if residual_out is None else (out.obj, residual_out.obj)
