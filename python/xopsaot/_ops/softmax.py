"""Softmax over one dim, any length along it."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._arrays import rows_view_ok
from .._call import resolve
from .._registry import register


def softmax_reference(x: np.ndarray, dim: int) -> np.ndarray:
    x = x.astype(np.float32)
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def normalize_dim(op: str, dim: Any, ndim: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    if not -ndim <= dim < ndim:
        raise ValueError(f"{op}: dim {dim} is out of range for {ndim} dims (expected {-ndim} to {ndim - 1})")
    return int(dim) % ndim


@register
def softmax(x: Any, dim: int = -1, *, backend: Optional[str] = None) -> Any:
    """exp(x) / sum(exp(x)) along `dim`, computed in float32; any length along dim."""
    op = "softmax"
    call, (vx,) = resolve(op, backend, ("x",), (x,))
    check.dtype(op, "x", vx, check.FLOATS)
    if vx.ndim < 1:
        raise ValueError(f"{op}: x must have at least 1 dim, got a scalar")
    dim = normalize_dim(op, dim, vx.ndim)
    if not call.on_gpu:
        return call.result(softmax_reference(call.host(vx), dim), vx.dtype)
    fw = call.framework
    last = vx.ndim - 1
    if dim != last:  # the kernel reduces contiguous rows: bring dim last
        vx = fw.view(fw.moveaxis(vx.obj, dim, last))
    if not rows_view_ok(vx.shape, vx.strides):
        vx = call.contiguous(vx)
    out = call.empty_like(vx)
    call.launch("xopsaot_softmax", (vx, out))
    return out.obj if dim == last else fw.moveaxis(out.obj, last, dim)
