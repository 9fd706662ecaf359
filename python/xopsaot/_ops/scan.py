"""Scans along one dim: cumsum (torch's, plus reverse and varlen restarts) and logcumsumexp."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._call import resolve
from .._registry import register
from .softmax import normalize_dim

INTEGERS = ("int32", "int64", "bool")
CODES = {"cumsum": 0, "logcumsumexp": 1}  # XOPSAOT_SCAN_*


def result_dtype(dtype: str) -> str:
    """torch's: floats keep their dtype, integers and bool sum into int64."""
    return "int64" if dtype in INTEGERS else dtype


def scan_reference(x: np.ndarray, dim: int, op: str, reverse: bool = False, cu: Optional[np.ndarray] = None):
    """In float64 (floats) or int64, along dim; with cu (int32 cumulative lengths, dim 0) each sequence and the
    tokens after the last one are scanned on their own."""
    wide = x.astype(np.int64 if x.dtype.kind in "iub" else np.float64)
    bounds = [0, wide.shape[dim]] if cu is None else sorted({*cu.astype(np.int64).tolist(), wide.shape[0]})
    out = np.empty_like(wide)
    for first, last in zip(bounds[:-1], bounds[1:]):
        part = np.take(wide, np.arange(first, last), axis=dim)
        if reverse:
            part = np.flip(part, axis=dim)
        with np.errstate(invalid="ignore"):  # -inf - -inf inside logaddexp
            done = np.cumsum(part, axis=dim) if op == "cumsum" else np.logaddexp.accumulate(part, axis=dim)
        if reverse:
            done = np.flip(done, axis=dim)
        index = [slice(None)] * wide.ndim
        index[dim] = slice(first, last)
        out[tuple(index)] = done
    return out


def _scan(op: str, x: Any, dim: Any, reverse: bool, cu_seqlens: Any, validate: bool, backend: Optional[str]) -> Any:
    call, (vx, vcu) = resolve(op, backend, ("input", "cu_seqlens"), (x, cu_seqlens))
    check.dtype(op, "input", vx, check.FLOATS + (INTEGERS if op == "cumsum" else ()))
    dim = normalize_dim(op, dim, max(vx.ndim, 1))
    reverse = check.boolean(op, "reverse", reverse)
    if vcu is not None:
        check.index_tensor(op, "cu_seqlens", vcu)
        if dim != 0 or vx.ndim < 1:
            raise ValueError(f"{op}: cu_seqlens needs dim=0 (the packed token dim), got dim={dim}")
        if vcu.shape[0] < 1:
            raise ValueError(f"{op}: cu_seqlens must have batch + 1 >= 1 entries")
    cu = None
    if vcu is not None and (not call.on_gpu or (check.boolean(op, "validate", validate) and call.can_read_back())):
        cu = call.host(vcu)
        total = vx.shape[0]
        check.cu_seqlens(op, "cu_seqlens", cu, total, total, "the token count")
    if not call.on_gpu:
        host = call.host(vx).reshape(vx.shape or (1,))
        out = scan_reference(host, dim, op, reverse, cu).reshape(vx.shape)
        return call.result(out, result_dtype(vx.dtype))
    vx = call.contiguous(vx)
    out = call.empty(vx.shape, result_dtype(vx.dtype))
    call.launch("xopsaot_scan", (vx, out, vcu), dim, CODES[op], int(reverse))
    return out.obj


@register
def cumsum(
    input: Any,
    dim: int,
    *,
    reverse: bool = False,
    cu_seqlens: Any = None,
    validate: bool = True,
    backend: Optional[str] = None,
) -> Any:
    """torch's cumsum along dim (float16/bfloat16 sum in float32; int32, int64 and bool give int64). reverse=True
    sums from the end. cu_seqlens (int32 (batch + 1,), dim 0 of a packed (total_tokens, ...) input) restarts the
    sum at each sequence; tokens after the last sequence are summed as one more. validate=True checks cu_seqlens on
    the host (skipped during graph capture)."""
    return _scan("cumsum", input, dim, reverse, cu_seqlens, validate, backend)


@register
def logcumsumexp(input: Any, dim: int, *, backend: Optional[str] = None) -> Any:
    """torch's logcumsumexp: log(cumsum(exp(input))) along dim without overflow, computed in float32."""
    return _scan("logcumsumexp", input, dim, False, None, True, backend)
