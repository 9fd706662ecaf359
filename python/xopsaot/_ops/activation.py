"""Activations: relu, gelu, silu, sigmoid, tanh (torch's names and results), and the gated silu_and_mul and
gelu_and_mul of inference servers (last dim split in halves). Computed in float32; results in the input's dtype."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._call import resolve
from .._registry import register

# The C header's XOPSAOT_ACT_* codes.
CODES = {"relu": 0, "gelu": 1, "gelu_tanh": 2, "silu": 3, "sigmoid": 4, "tanh": 5}
APPROXIMATIONS = ("none", "tanh")


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 to within 1.5e-7 (Abramowitz and Stegun 7.1.26): NumPy has no erf, and float32 results need
    no more."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def activation_reference(x: np.ndarray, name: str) -> np.ndarray:
    """act(x) in float32."""
    with np.errstate(over="ignore"):  # exp(-x) -> inf in the sigmoids' tails gives the right limit
        return _activate(x.astype(np.float32), name)


def _activate(x: np.ndarray, name: str) -> np.ndarray:
    if name == "relu":
        return np.maximum(x, np.float32(0))
    if name == "gelu":
        return (0.5 * x * (1.0 + _erf(x.astype(np.float64) / np.sqrt(2.0)))).astype(np.float32)
    if name == "gelu_tanh":  # 0.5 * (1 + tanh(u)) = sigmoid(2u), which does not cancel for large negative x
        return x / (1 + np.exp(np.float32(-1.5957691216057308) * (x + np.float32(0.044715) * x**3)))
    sigmoid = 1 / (1 + np.exp(-x))
    if name == "silu":
        return x * sigmoid
    if name == "sigmoid":
        return sigmoid
    return np.tanh(x)


def _gelu_name(op: str, approximate: Any) -> str:
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"{op}: approximate is {approximate!r}; supported: 'none', 'tanh'")
    return "gelu" if approximate == "none" else "gelu_tanh"


def _elementwise(op: str, name: str, x: Any, backend: Optional[str]) -> Any:
    call, (vx,) = resolve(op, backend, ("x",), (x,))
    check.dtype(op, "x", vx, check.FLOATS)
    if not call.on_gpu:
        return call.result(activation_reference(call.host(vx), name), vx.dtype)
    vx = call.contiguous(vx)
    out = call.empty_like(vx)
    call.launch("xopsaot_activation", (vx, out), CODES[name])
    return out.obj


def _gated(op: str, name: str, x: Any, backend: Optional[str]) -> Any:
    call, (vx,) = resolve(op, backend, ("x",), (x,))
    check.dtype(op, "x", vx, check.FLOATS)
    if vx.ndim < 1 or vx.shape[-1] % 2:
        raise ValueError(f"{op}: x's last dim must be even (split in halves), got shape {check.shape_text(vx.shape)}")
    d = vx.shape[-1] // 2
    if not call.on_gpu:
        host = call.host(vx)
        return call.result(activation_reference(host[..., :d], name) * host[..., d:].astype(np.float32), vx.dtype)
    vx = call.rows(vx)
    out = call.empty(vx.shape[:-1] + (d,), vx.dtype)
    call.launch("xopsaot_gated_activation", (vx, out), CODES[name])
    return out.obj


@register
def relu(x: Any, *, backend: Optional[str] = None) -> Any:
    """max(x, 0)."""
    return _elementwise("relu", "relu", x, backend)


@register
def gelu(x: Any, approximate: str = "none", *, backend: Optional[str] = None) -> Any:
    """torch's gelu: x * Phi(x) with erf ("none"), or its tanh approximation ("tanh")."""
    return _elementwise("gelu", _gelu_name("gelu", approximate), x, backend)


@register
def silu(x: Any, *, backend: Optional[str] = None) -> Any:
    """x * sigmoid(x)."""
    return _elementwise("silu", "silu", x, backend)


@register
def sigmoid(x: Any, *, backend: Optional[str] = None) -> Any:
    """1 / (1 + exp(-x))."""
    return _elementwise("sigmoid", "sigmoid", x, backend)


@register
def tanh(x: Any, *, backend: Optional[str] = None) -> Any:
    """tanh(x)."""
    return _elementwise("tanh", "tanh", x, backend)


@register
def silu_and_mul(x: Any, *, backend: Optional[str] = None) -> Any:
    """silu(x[..., :d]) * x[..., d:] for x (..., 2d): the gated MLP's activation, in one pass."""
    return _gated("silu_and_mul", "silu", x, backend)


@register
def gelu_and_mul(x: Any, approximate: str = "none", *, backend: Optional[str] = None) -> Any:
    """gelu(x[..., :d], approximate) * x[..., d:] for x (..., 2d), in one pass."""
    return _gated("gelu_and_mul", _gelu_name("gelu_and_mul", approximate), x, backend)
