"""The softmax family over one dim, any length along it (on the GPU up to 2^31 - 65536 elements, a ValueError past
that): softmax, log_softmax and logsumexp (torch's names and results), computed in float32 by one kernel."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._call import resolve
from .._registry import register

KINDS = {"softmax": 0, "log_softmax": 1, "logsumexp": 2}  # the C header's xopsaot_softmax_kind


def softmax_family_reference(x: np.ndarray, dim: int, kind: str, keepdim: bool = False) -> np.ndarray:
    x = x.astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):  # rows of -inf: NaN softmax, -inf logsumexp, as torch
        top = np.max(x, axis=dim, keepdims=True, initial=-np.inf)
        safe = np.where(np.isneginf(top), np.float32(0), top)
        total = np.sum(np.exp(x - safe), axis=dim, keepdims=True)
        if kind == "softmax":
            return np.exp(x - safe) / total
        if kind == "log_softmax":
            return x - safe - np.log(total)
        lse = safe + np.log(total)
    return lse if keepdim else np.squeeze(lse, axis=dim)


def normalize_dim(op: str, dim: Any, ndim: int) -> int:
    dim = check.integer(op, "dim", dim)
    if not -ndim <= dim < ndim:
        raise ValueError(f"{op}: dim {dim} is out of range for {ndim} dims (expected {-ndim} to {ndim - 1})")
    return dim % ndim


def _run(op: str, x: Any, dim: Any, keepdim: bool, backend: Optional[str]) -> Any:
    call, (vx,) = resolve(op, backend, ("x",), (x,))
    check.dtype(op, "x", vx, check.FLOATS)
    if vx.ndim < 1:
        raise ValueError(f"{op}: x must have at least 1 dim, got a scalar")
    dim = normalize_dim(op, dim, vx.ndim)
    keepdim = check.boolean(op, "keepdim", keepdim)
    if not call.on_gpu:
        return call.result(softmax_family_reference(call.host(vx), dim, op, keepdim), vx.dtype)
    fw = call.framework
    last = vx.ndim - 1
    if dim != last:  # the kernel reduces contiguous rows: bring dim last
        vx = fw.view(fw.moveaxis(vx.obj, dim, last))
    vx = call.rows(vx)
    if op == "logsumexp":
        out = call.empty(vx.shape[:-1] + ((1,) if keepdim else ()), vx.dtype)
    else:
        out = call.empty_like(vx)
    call.launch("xopsaot_softmax_family", (vx, out), KINDS[op])
    if dim == last or (op == "logsumexp" and not keepdim):
        return out.obj
    return fw.moveaxis(out.obj, last, dim)


@register
def softmax(x: Any, dim: int = -1, *, backend: Optional[str] = None) -> Any:
    """exp(x) / sum(exp(x)) along `dim`, computed in float32; any length along dim."""
    return _run("softmax", x, dim, False, backend)


@register
def log_softmax(x: Any, dim: int = -1, *, backend: Optional[str] = None) -> Any:
    """x - logsumexp(x) along `dim` (torch's log_softmax), computed in float32; any length along dim."""
    return _run("log_softmax", x, dim, False, backend)


@register
def logsumexp(x: Any, dim: int, keepdim: bool = False, *, backend: Optional[str] = None) -> Any:
    """log(sum(exp(x))) along one `dim` (torch's logsumexp with an int dim), computed in float32; -inf for an
    empty dim or a row of -inf."""
    return _run("logsumexp", x, dim, keepdim, backend)
