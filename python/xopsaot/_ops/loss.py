"""Cross entropy with class-index targets (torch's F.cross_entropy: ignore_index, reduction, label_smoothing), and
linear_cross_entropy, which computes the logits x @ weight.T + bias chunk by chunk of rows so that the full
(tokens, vocab) logits never exist."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._arrays import View, round_float32
from .._call import Call, resolve
from .._library import CrossEntropyOptions
from .._registry import register
from .matmul import _check_lm_head, _k_contiguous, _rows
from .softmax import softmax_family_reference

REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}  # the C header's xopsaot_reduction
TARGET_DTYPES = ("int64", "int32")


def cross_entropy_reference(
    logits: np.ndarray, target: np.ndarray, ignore_index: int, label_smoothing: float
) -> np.ndarray:
    """Per-row losses in float32 of logits (rows, classes) and target (rows,); 0 where target is ignore_index."""
    x = logits.astype(np.float32)
    lse = softmax_family_reference(x, 1, "logsumexp")
    valid = target != ignore_index
    picked = np.take_along_axis(x, np.where(valid, target, 0)[:, None].astype(np.int64), axis=1)[:, 0]
    loss = lse - np.float32(1 - label_smoothing) * picked
    if label_smoothing > 0:
        loss = loss - np.float32(label_smoothing) * x.mean(axis=1, dtype=np.float32)
    return np.where(valid, loss, np.float32(0)).astype(np.float32)


def reduce_reference(loss: np.ndarray, target: np.ndarray, ignore_index: int, reduction: str, shape: tuple):
    """Per-row losses as reduction says: reshaped to `shape` ("none"), summed, or averaged over counted rows."""
    if reduction == "none":
        return loss.reshape(shape)
    total = loss.sum(dtype=np.float32)
    if reduction == "sum":
        return np.asarray(total, np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):  # no counted row: NaN, as torch
        return np.asarray(total / np.float32((target != ignore_index).sum()), np.float32)


def _options(op: str, ignore_index: Any, reduction: Any, label_smoothing: Any) -> CrossEntropyOptions:
    ignore_index = check.integer(op, "ignore_index", ignore_index)
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction is {reduction!r}; supported: 'none', 'mean', 'sum'")
    smoothing = check.finite_float(op, "label_smoothing", label_smoothing)
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing is {smoothing}; it must be in [0, 1]")
    return CrossEntropyOptions(ignore_index, smoothing, REDUCTIONS[reduction])


def _check_target(op: str, target: View, shape: tuple) -> None:
    if target.dtype not in TARGET_DTYPES:
        floats = " (class-probability targets are not supported)" if target.dtype in check.FLOATS else ""
        raise TypeError(f"{op}: target.dtype is {target.dtype}; supported: int64, int32 (class indices){floats}")
    if target.shape != shape:
        raise ValueError(
            f"{op}: target must have shape {check.shape_text(shape)}, got {check.shape_text(target.shape)}"
        )


def _check_target_values(op: str, target: np.ndarray, classes: int, ignore_index: int) -> None:
    bad = (target != ignore_index) & ((target < 0) | (target >= classes))
    if bad.any():
        value = int(target[bad].flat[0])
        raise ValueError(f"{op}: target holds {value}, outside [0, {classes}) and not ignore_index ({ignore_index})")


def _validated(op: str, call: Call, target: View, classes: int, options: CrossEntropyOptions, validate: Any):
    """The target's host values when they are checked (always on the CPU path), else None."""
    if call.on_gpu and not (check.boolean(op, "validate", validate) and call.can_read_back()):
        return None
    host = call.host(target)
    _check_target_values(op, host, classes, options.ignore_index)
    return host


@register
def cross_entropy(
    logits: Any,
    target: Any,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    *,
    validate: bool = True,
    backend: Optional[str] = None,
) -> Any:
    """torch's F.cross_entropy with class-index targets: logits (classes,), (N, classes) or (N, classes, d...)
    (classes along dim 1, as torch), target int64/int32 of the other dims; computed in float32, the result in the
    logits' dtype ((N, d...) for reduction "none", else a scalar). validate=True copies target to the host to check
    its values (skipped during CUDA graph capture); validate=False trusts them (a target out of range then gives
    NaN)."""
    op = "cross_entropy"
    call, (vx, vt) = resolve(op, backend, ("logits", "target"), (logits, target))
    check.dtype(op, "logits", vx, check.FLOATS)
    if vx.ndim < 1:
        raise ValueError(f"{op}: logits must have a class dim, got a scalar")
    classes = vx.shape[0] if vx.ndim == 1 else vx.shape[1]
    target_shape = () if vx.ndim == 1 else vx.shape[:1] + vx.shape[2:]
    _check_target(op, vt, target_shape)
    options = _options(op, ignore_index, reduction, label_smoothing)
    if classes == 0:
        raise ValueError(f"{op}: logits has 0 classes")
    host_target = _validated(op, call, vt, classes, options, validate)
    fw = call.framework
    rows_first = vx.ndim == 1 or vx.ndim == 2
    if not call.on_gpu:
        x = call.host(vx)
        x = x.reshape(1, classes) if vx.ndim == 1 else np.moveaxis(x, 1, -1).reshape(-1, classes)
        t = host_target.reshape(-1)
        loss = cross_entropy_reference(x, t, options.ignore_index, options.label_smoothing)
        return call.result(reduce_reference(loss, t, options.ignore_index, reduction, target_shape), vx.dtype)
    if not rows_first:  # classes last, then rows
        vx = fw.view(fw.moveaxis(vx.obj, 1, vx.ndim - 1))
    vx = call.rows(vx)
    vt = call.contiguous(vt)
    out = call.empty(target_shape if reduction == "none" else (), vx.dtype)
    call.launch("xopsaot_cross_entropy", (vx, vt, out), options)
    return out.obj


@register
def linear_cross_entropy(
    x: Any,
    weight: Any,
    target: Any,
    bias: Any = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    *,
    chunk_rows: int = 0,
    validate: bool = True,
    backend: Optional[str] = None,
) -> Any:
    """cross_entropy(x @ weight.T + bias, target, ...) without the full logits: x (..., hidden), weight (vocab,
    hidden), bias (vocab,), target (...) int64/int32. The logits of chunk_rows rows at a time (0 chooses the most
    that fit in 256 MiB) are computed into a workspace, rounded to x's dtype as x @ weight.T stores them, and
    reduced; peak extra memory is one chunk of logits plus a float32 loss per row."""
    op = "linear_cross_entropy"
    call, (vx, vw, vt, vb) = resolve(op, backend, ("x", "weight", "target", "bias"), (x, weight, target, bias))
    hidden, vocab = _check_lm_head(op, call, vx, vw, vb)
    _check_target(op, vt, vx.shape[:-1])
    options = _options(op, ignore_index, reduction, label_smoothing)
    chunk_rows = check.integer(op, "chunk_rows", chunk_rows, minimum=0)
    host_target = _validated(op, call, vt, vocab, options, validate)
    if not call.on_gpu:
        host = call.host
        h = host(vx).reshape(-1, hidden).astype(np.float32)
        w = host(vw).astype(np.float32)
        b = None if vb is None else host(vb).astype(np.float32)
        t = host_target.reshape(-1)
        step = chunk_rows or max(1, (256 << 20) // (vocab * 4))
        losses = []
        for first in range(0, h.shape[0], step):  # chunked here too: a 32k x 256k vocabulary must fit in memory
            logits = h[first : first + step] @ w.T
            if b is not None:
                logits += b
            logits = round_float32(logits, vx.dtype)  # as the GPU's chunk stores them
            losses.append(
                cross_entropy_reference(logits, t[first : first + step], options.ignore_index, options.label_smoothing)
            )
        loss = np.concatenate(losses) if losses else np.zeros(0, np.float32)
        return call.result(reduce_reference(loss, t, options.ignore_index, reduction, vx.shape[:-1]), vx.dtype)
    xr = _rows(call, vx)
    vt = call.contiguous(vt)
    out = call.empty(vx.shape[:-1] if reduction == "none" else (), vx.dtype)
    call.launch("xopsaot_linear_cross_entropy", (xr, _k_contiguous(call, vw), vb, vt, out), options, chunk_rows)
    return out.obj
