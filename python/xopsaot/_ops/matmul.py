"""matmul like torch.matmul for 1-D to 3-D operands (a batch of 1 or a 2-D operand broadcasts)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._arrays import View, contiguous_strides
from .._call import resolve
from .._registry import register


def matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a.astype(np.float32), b.astype(np.float32))


def result_shape(op: str, va: View, vb: View) -> tuple:
    k_a = va.shape[-1]
    k_b = vb.shape[0] if vb.ndim == 1 else vb.shape[-2]
    if k_a != k_b:
        where = "first" if vb.ndim == 1 else "second-to-last"
        raise ValueError(
            f"{op}: a's last dim ({k_a}) must equal b's {where} dim ({k_b}); shapes "
            f"{check.shape_text(va.shape)} and {check.shape_text(vb.shape)}"
        )
    batch_a = va.shape[0] if va.ndim == 3 else None
    batch_b = vb.shape[0] if vb.ndim == 3 else None
    if batch_a is not None and batch_b is not None and batch_a != batch_b and 1 not in (batch_a, batch_b):
        raise ValueError(
            f"{op}: batch dims {batch_a} and {batch_b} do not broadcast; shapes "
            f"{check.shape_text(va.shape)} and {check.shape_text(vb.shape)}"
        )
    batch = () if batch_a is None and batch_b is None else (max(batch_a or 1, batch_b or 1),)
    rows = () if va.ndim == 1 else (va.shape[-2],)
    cols = () if vb.ndim == 1 else (vb.shape[-1],)
    return batch + rows + cols


def as_matrix(view: View, is_left: bool) -> View:
    """The (..., rows, cols) view the C op takes: a 1-D a is a row, a 1-D b a column."""
    if view.ndim > 1:
        return view
    (n,), (s,) = view.shape, view.strides
    if is_left:
        return view._replace(shape=(1, n), strides=(n * s, s))
    return view._replace(shape=(n, 1), strides=(s, 1))


@register
def matmul(a: Any, b: Any, *, backend: Optional[str] = None) -> Any:
    """a @ b like torch.matmul for operands of 1 to 3 dims. fp16/bf16 accumulate in float32 on tensor cores;
    float32 is computed in full float32 (no TF32)."""
    op = "matmul"
    call, (va, vb) = resolve(op, backend, ("a", "b"), (a, b))
    check.dtype(op, "a", va, check.FLOATS)
    check.same_dtype(op, ("a", va), ("b", vb))
    check.ndim(op, "a", va, (1, 2, 3))
    check.ndim(op, "b", vb, (1, 2, 3))
    shape = result_shape(op, va, vb)
    if not call.on_gpu:
        return call.result(matmul_reference(call.host(va), call.host(vb)), va.dtype)
    ma, mb = as_matrix(va, True), as_matrix(vb, False)
    if ma.strides[-1] != 1 and ma.shape[-1] > 1:  # the kernel reads a's rows contiguously
        ma = as_matrix(call.contiguous(va), True)
    if 1 not in mb.strides[-2:] and mb.shape[-1] > 1 and mb.shape[-2] > 1:  # b: either layout
        mb = as_matrix(call.contiguous(vb), False)
    out = call.empty(shape, va.dtype)
    batch = () if max(ma.ndim, mb.ndim) == 2 else (max(m.shape[0] if m.ndim == 3 else 1 for m in (ma, mb)),)
    out_shape = batch + (ma.shape[-2], mb.shape[-1])  # the result seen as (batch, M, N)
    c = out._replace(shape=out_shape, strides=contiguous_strides(out_shape))
    call.launch("xopsaot_matmul", (ma, mb, c))
    return out.obj
