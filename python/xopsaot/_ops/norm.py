"""Normalization ops: rms_norm and layer_norm (with the fused residual add servers use), the gated norm_gate, and
group_norm. The first three run one kernel (xopsaot_norm); the NumPy references sit beside them."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._arrays import View
from .._call import resolve
from .._library import NormOptions
from .._registry import register

NORMS = ("rms", "layer")
GATE_ACTS = ("silu", "sigmoid")
GATE_POSITIONS = ("pre", "post")


def _activation(gate: np.ndarray, act: str) -> np.ndarray:
    g = gate.astype(np.float32)
    sigmoid = 1.0 / (1.0 + np.exp(-g))
    return g * sigmoid if act == "silu" else sigmoid


def row_norm_reference(
    x: np.ndarray,
    weight: Optional[np.ndarray],
    bias: Optional[np.ndarray],
    eps: float,
    norm: str = "rms",
    offset: float = 0.0,
    residual: Optional[np.ndarray] = None,
    gate: Optional[np.ndarray] = None,
    gate_act: str = "silu",
    gate_pos: str = "pre",
) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """(y, h) in float32 over the last dim: h = x + residual (or x); v = h, or h * act(gate) before the norm;
    y = (v - mean if layer) / sqrt(mean of squares + eps) * (offset + weight) + bias, times act(gate) after."""
    h = x.astype(np.float32)
    if h.size == 0:
        return h, (h if residual is not None else None)
    if residual is not None:
        h = h + residual.astype(np.float32)
    v = h * _activation(gate, gate_act) if gate is not None and gate_pos == "pre" else h
    if norm == "layer":
        v = v - np.mean(v, axis=-1, keepdims=True)
    y = v / np.sqrt(np.mean(np.square(v), axis=-1, keepdims=True) + np.float32(eps))
    if weight is not None:
        y = y * (np.float32(offset) + weight.astype(np.float32))
    if bias is not None:
        y = y + bias.astype(np.float32)
    if gate is not None and gate_pos == "post":
        y = y * _activation(gate, gate_act)
    return y, (h if residual is not None else None)


def group_norm_reference(
    x: np.ndarray, num_groups: int, weight: Optional[np.ndarray], bias: Optional[np.ndarray], eps: float
) -> np.ndarray:
    """torch's group_norm in float32: x (N, C, *) normalized per sample over each group of channels."""
    if x.size == 0:
        return x.astype(np.float32)
    n, c = x.shape[:2]
    v = x.astype(np.float32).reshape(n, num_groups, -1)
    v = v - np.mean(v, axis=-1, keepdims=True)
    y = (v / np.sqrt(np.mean(np.square(v), axis=-1, keepdims=True) + np.float32(eps))).reshape(x.shape)
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.astype(np.float32).reshape(per_channel)
    if bias is not None:
        y = y + bias.astype(np.float32).reshape(per_channel)
    return y


def _choice(op: str, name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{op}: {name} is {value!r}; supported: {', '.join(map(repr, allowed))}")
    return value


def _check_vectors(op: str, vx: View, n: int, what: str, **vectors: Optional[View]) -> None:
    for name, v in vectors.items():
        if v is not None and v.shape != (n,):
            raise ValueError(f"{op}: {name} must have shape ({n},) to match {what}, got {check.shape_text(v.shape)}")


def _row_norm(
    op: str, backend: Optional[str], x: Any, weight: Any, bias: Any, eps: Any, norm: str, offset: Any,
    residual: Any = None, gate: Any = None, gate_act: str = "silu", gate_pos: str = "pre",
) -> Any:  # fmt: skip
    names = ("x", "weight", "bias", "residual", "gate")
    call, (vx, vw, vb, vr, vg) = resolve(op, backend, names, (x, weight, bias, residual, gate))
    eps = check.finite_float(op, "eps", eps, minimum=0.0)
    offset = check.finite_float(op, "offset", offset)
    check.dtype(op, "x", vx, check.FLOATS)
    check.same_dtype(op, ("x", vx), ("weight", vw), ("bias", vb), ("residual", vr), ("gate", vg))
    if vx.ndim < 1:
        raise ValueError(f"{op}: x must have at least 1 dim, got a scalar")
    _check_vectors(op, vx, vx.shape[-1], "x's last dim", weight=vw, bias=vb)
    check.same_shape(op, ("x", vx), ("residual", vr), ("gate", vg))
    if not call.on_gpu:
        host = [None if v is None else call.host(v) for v in (vx, vw, vb, vr, vg)]
        y, h = row_norm_reference(*host[:3], eps, norm, offset, host[3], host[4], gate_act, gate_pos)
        y = call.result(y, vx.dtype)
        return y if h is None else (y, call.result(h, vx.dtype))
    vx, vr, vg = (None if v is None else call.rows(v) for v in (vx, vr, vg))
    vw = None if vw is None else call.contiguous(vw)
    vb = None if vb is None else call.contiguous(vb)
    out = call.empty_like(vx)
    residual_out = None if vr is None else call.empty_like(vx)
    options = NormOptions(NORMS.index(norm), eps, offset, GATE_ACTS.index(gate_act), gate_pos == "pre")
    call.launch("xopsaot_norm", (vx, vw, vb, vr, vg, out, residual_out), options)
    return out.obj if residual_out is None else (out.obj, residual_out.obj)


@register
def rms_norm(
    x: Any, weight: Any = None, eps: float = 1e-6, residual: Any = None, offset: float = 0.0, *,
    backend: Optional[str] = None,
) -> Any:  # fmt: skip
    """RMS norm over the last dim: x / sqrt(mean(x^2) + eps) * (offset + weight); offset=1.0 is the (1 + w)
    form. With residual, returns (rms_norm(x + residual), x + residual) in one pass."""
    return _row_norm("rms_norm", backend, x, weight, None, eps, "rms", offset, residual)


@register
def layer_norm(
    x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5, residual: Any = None, *,
    backend: Optional[str] = None,
) -> Any:  # fmt: skip
    """torch's layer_norm over the last dim: (x - mean) / sqrt(var + eps) * weight + bias (biased variance).
    With residual, returns (layer_norm(x + residual), x + residual) in one pass."""
    return _row_norm("layer_norm", backend, x, weight, bias, eps, "layer", 0.0, residual)


@register
def norm_gate(
    x: Any, gate: Any, weight: Any = None, bias: Any = None, norm: str = "rms", gate_act: str = "silu",
    gate_pos: str = "pre", eps: float = 1e-6, *, backend: Optional[str] = None,
) -> Any:  # fmt: skip
    """A gated norm over the last dim, gate of x's shape: gate_pos="pre" normalizes x * act(gate) (Mamba-2's
    gated RMS norm), "post" returns norm(x) * act(gate); norm "rms" or "layer", act "silu" or "sigmoid"."""
    op = "norm_gate"
    norm = _choice(op, "norm", norm, NORMS)
    gate_act = _choice(op, "gate_act", gate_act, GATE_ACTS)
    gate_pos = _choice(op, "gate_pos", gate_pos, GATE_POSITIONS)
    if gate is None:
        raise TypeError(f"{op}: gate is required (an array of x's shape)")
    return _row_norm(op, backend, x, weight, bias, eps, norm, 0.0, None, gate, gate_act, gate_pos)


@register
def group_norm(
    x: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5, *,
    backend: Optional[str] = None,
) -> Any:  # fmt: skip
    """torch's group_norm: x (N, C, *) with C divisible by num_groups; each sample's groups of C / num_groups
    channels are normalized over their channels and positions, then * weight[c] + bias[c]."""
    op = "group_norm"
    call, (vx, vw, vb) = resolve(op, backend, ("x", "weight", "bias"), (x, weight, bias))
    eps = check.finite_float(op, "eps", eps, minimum=0.0)
    check.dtype(op, "x", vx, check.FLOATS)
    check.same_dtype(op, ("x", vx), ("weight", vw), ("bias", vb))
    if vx.ndim < 2:
        raise ValueError(f"{op}: x must be (N, C, *), got shape {check.shape_text(vx.shape)}")
    num_groups = check.integer(op, "num_groups", num_groups)
    channels = vx.shape[1]
    if num_groups < 1 or channels % num_groups:
        raise ValueError(f"{op}: num_groups is {num_groups}; it must be >= 1 and divide the {channels} channels")
    _check_vectors(op, vx, channels, "x's channels (dim 1)", weight=vw, bias=vb)
    if not call.on_gpu:
        host = [None if v is None else call.host(v) for v in (vx, vw, vb)]
        return call.result(group_norm_reference(host[0], int(num_groups), host[1], host[2], eps), vx.dtype)
    vx = call.contiguous(vx)
    vw = None if vw is None else call.contiguous(vw)
    vb = None if vb is None else call.contiguous(vb)
    out = call.empty_like(vx)
    call.launch("xopsaot_group_norm", (vx, vw, vb, out), int(num_groups), eps)
    return out.obj
