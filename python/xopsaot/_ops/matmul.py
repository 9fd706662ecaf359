"""The matmul family, torch's names and results: matmul (1 to 3 dims), mm, bmm, addmm, and the fused forms
linear (activation(x @ weight.T + bias) + residual) and gate_linear ((act(x1) * x2) @ weight.T + bias + residual,
Xopes' op). fp16/bf16 accumulate in float32 on tensor cores; float32 is computed in full float32 (no TF32)."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._arrays import View, contiguous_strides, rows_view_ok
from .._call import Call, resolve
from .._library import GemmOptions
from .._registry import register
from .activation import CODES as ACT_CODES
from .activation import activation_reference

NO_ACT = -1  # xopsaot_gemm_options' "none"


def matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a.astype(np.float32), b.astype(np.float32))


def gemm_reference(
    a: np.ndarray,
    b: np.ndarray,
    *,
    gate: Optional[np.ndarray] = None,
    gate_act: Optional[str] = None,
    input: Optional[np.ndarray] = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    act: Optional[str] = None,
    residual: Optional[np.ndarray] = None,
) -> np.ndarray:
    """act(alpha * (a' @ b) + beta * input) + residual in float32, a' = gate_act(a) * gate when gated."""
    a = a.astype(np.float32)
    if gate is not None:
        a = (a if gate_act is None else activation_reference(a, gate_act)) * gate.astype(np.float32)
    y = np.float32(alpha) * np.matmul(a, b.astype(np.float32))
    if input is not None and beta != 0:  # torch's addmm ignores input when beta is 0
        y = y + np.float32(beta) * input.astype(np.float32)
    if act is not None:
        y = activation_reference(y, act)
    if residual is not None:
        y = y + residual.astype(np.float32)
    return y.astype(np.float32)


def result_shape(op: str, va: View, vb: View, names: tuple = ("a", "b")) -> tuple:
    k_a = va.shape[-1]
    k_b = vb.shape[0] if vb.ndim == 1 else vb.shape[-2]
    if k_a != k_b:
        where = "first" if vb.ndim == 1 else "second-to-last"
        raise ValueError(
            f"{op}: {names[0]}'s last dim ({k_a}) must equal {names[1]}'s {where} dim ({k_b}); shapes "
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


def _product(op: str, call: Call, va: View, vb: View, names: tuple = ("a", "b")) -> Any:
    """a @ b through xopsaot_matmul (operands of 1 to 3 dims, checked)."""
    shape = result_shape(op, va, vb, names)
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


def _operands(op: str, backend: Optional[str], names: tuple, arrays: tuple) -> tuple[Call, list]:
    """Resolve the arrays; every one present must be a float array of the first one's dtype."""
    call, views = resolve(op, backend, names, arrays)
    first = views[0]
    check.dtype(op, names[0], first, check.FLOATS)
    check.same_dtype(op, (names[0], first), *zip(names[1:], views[1:]))
    return call, views


@register
def matmul(a: Any, b: Any, *, backend: Optional[str] = None) -> Any:
    """a @ b like torch.matmul for operands of 1 to 3 dims (a batch of 1 or a 2-D operand broadcasts)."""
    op = "matmul"
    call, (va, vb) = _operands(op, backend, ("a", "b"), (a, b))
    check.ndim(op, "a", va, (1, 2, 3))
    check.ndim(op, "b", vb, (1, 2, 3))
    return _product(op, call, va, vb)


@register
def mm(input: Any, mat2: Any, *, backend: Optional[str] = None) -> Any:
    """torch.mm: input (n, m) @ mat2 (m, p)."""
    op = "mm"
    call, (va, vb) = _operands(op, backend, ("input", "mat2"), (input, mat2))
    check.ndim(op, "input", va, (2,))
    check.ndim(op, "mat2", vb, (2,))
    return _product(op, call, va, vb, ("input", "mat2"))


@register
def bmm(input: Any, mat2: Any, *, backend: Optional[str] = None) -> Any:
    """torch.bmm: input (b, n, m) @ mat2 (b, m, p), one product per batch entry (no broadcasting, as in torch)."""
    op = "bmm"
    call, (va, vb) = _operands(op, backend, ("input", "mat2"), (input, mat2))
    check.ndim(op, "input", va, (3,))
    check.ndim(op, "mat2", vb, (3,))
    if va.shape[0] != vb.shape[0]:
        raise ValueError(f"{op}: input has {va.shape[0]} batch entries but mat2 has {vb.shape[0]}; they must match")
    return _product(op, call, va, vb, ("input", "mat2"))


def _rows(call: Call, view: View) -> View:
    """(..., n) as the 2-D (rows, n) view the C op takes (a copy when the leading dims do not collapse)."""
    if not rows_view_ok(view.shape, view.strides):
        view = call.contiguous(view)
    n = view.shape[-1]
    rows = math.prod(view.shape[:-1])
    stride = view.strides[-2] if view.ndim >= 2 and rows > 1 else n
    return view._replace(shape=(rows, n), strides=(stride, 1))  # a last dim of 1 reads the same with stride 1


def _act_code(op: str, name: str, value: Any, allowed: tuple) -> int:
    if value is None or value == "none":
        return NO_ACT
    if value not in allowed:
        raise ValueError(f"{op}: {name} is {value!r}; supported: None, {', '.join(repr(a) for a in allowed)}")
    return ACT_CODES[value]


def _gemm(call: Call, a: View, b: View, out: View, gate=None, input=None, residual=None, **options: Any) -> None:
    call.launch("xopsaot_gemm", (a, b, gate, input, residual, out), GemmOptions(**options))


@register
def addmm(input: Any, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1, backend: Optional[str] = None) -> Any:
    """torch.addmm: beta * input + alpha * (mat1 @ mat2), input broadcast to (n, p); with beta 0 input is ignored
    (NaN in it does not propagate), as in torch."""
    op = "addmm"
    if input is None:
        raise TypeError(f"{op}: input must be an array, got None")
    call, (va, vb, vi) = _operands(op, backend, ("mat1", "mat2", "input"), (mat1, mat2, input))
    check.ndim(op, "mat1", va, (2,))
    check.ndim(op, "mat2", vb, (2,))
    shape = result_shape(op, va, vb, ("mat1", "mat2"))
    if vi.ndim > 2 or any(n not in (1, m) for n, m in zip(reversed(vi.shape), reversed(shape))):
        raise ValueError(f"{op}: input of shape {check.shape_text(vi.shape)} does not broadcast to {shape}")
    beta = check.finite_float(op, "beta", beta)
    alpha = check.finite_float(op, "alpha", alpha)
    if not call.on_gpu:
        y = gemm_reference(call.host(va), call.host(vb), input=call.host(vi), alpha=alpha, beta=beta)
        return call.result(y, va.dtype)
    if va.strides[-1] != 1 and va.shape[-1] > 1:
        va = call.contiguous(va)
    if 1 not in vb.strides and min(vb.shape) > 1:
        vb = call.contiguous(vb)
    out = call.empty(shape, va.dtype)
    _gemm(call, va, vb, out, input=vi, alpha=alpha, beta=beta, act=NO_ACT, gate_act=NO_ACT)
    return out.obj


def _k_contiguous(call: Call, weight: View) -> View:
    """weight (n, k) with unit stride along k, as the kernels read it (copied if not)."""
    return weight if weight.strides[1] == 1 or weight.shape[1] <= 1 else call.contiguous(weight)


def _weight_t(op: str, call: Call, weight: View, k: int) -> View:
    """weight (n, k) as the (k, n) operand, contiguous along k."""
    check.ndim(op, "weight", weight, (2,))
    if weight.shape[1] != k:
        raise ValueError(
            f"{op}: weight has shape {check.shape_text(weight.shape)} but the input has {k} features; weight must "
            f"be (out_features, {k})"
        )
    weight = _k_contiguous(call, weight)
    return weight._replace(shape=(k, weight.shape[0]), strides=(weight.strides[1], weight.strides[0]))


def _check_weight(op: str, call: Call, x: View, weight: View, bias: Optional[View] = None) -> int:
    """x (..., k), weight (n, k) and bias (n,) of an F.linear-like op: the output features n."""
    if x.ndim < 1:
        raise ValueError(f"{op}: x must have at least 1 dim, got a scalar")
    check.ndim(op, "weight", weight, (2,))
    if weight.shape[1] != x.shape[-1]:
        _weight_t(op, call, weight, x.shape[-1])  # raises
    n = weight.shape[0]
    if bias is not None and bias.shape != (n,):
        raise ValueError(f"{op}: bias must have shape ({n},), got {check.shape_text(bias.shape)}")
    return n


def _check_lm_head(op: str, call: Call, x: View, weight: View, bias: Optional[View]) -> tuple[int, int]:
    """The LM-head ops' operands (linear_cross_entropy, linear_sample), as csrc/ops/lm_head.c checks them: x
    (..., hidden) floating, weight (vocab, hidden) with vocab > 0 and bias (vocab,) of x's dtype -> (hidden, vocab)."""
    check.dtype(op, "x", x, check.FLOATS)
    check.same_dtype(op, ("x", x), ("weight", weight), ("bias", bias))
    vocab = _check_weight(op, call, x, weight, bias)
    if vocab == 0:
        raise ValueError(f"{op}: weight has 0 rows (an empty vocabulary)")
    return x.shape[-1], vocab


def _fused_linear(
    op: str, call: Call, x: View, gate: Optional[View], weight: View, bias, residual, act: str, gate_act: str
) -> Any:
    """act(x' @ weight.T + bias) + residual, x' = gate_act(x) * gate when gated (linear and gate_linear)."""
    shape = x.shape[:-1] + (_check_weight(op, call, x, weight, bias),)
    if residual is not None and residual.shape != shape:
        raise ValueError(
            f"{op}: residual must have the output's shape {check.shape_text(shape)}, got "
            f"{check.shape_text(residual.shape)}"
        )
    act_code, gate_code = _act_code(op, "activation", act, ACTS), _act_code(op, "act", gate_act, ACTS)
    act, gate_act = (None if c == NO_ACT else name for c, name in ((act_code, act), (gate_code, gate_act)))
    if not call.on_gpu:

        def host(view):
            return None if view is None else call.host(view)

        y = gemm_reference(
            call.host(x), call.host(weight).T, gate=host(gate), gate_act=gate_act, input=host(bias), act=act,
            residual=host(residual),
        )  # fmt: skip
        return call.result(y, x.dtype)
    a = _rows(call, x)
    if gate is not None:
        gate = _rows(call, gate)
        if a.strides != gate.strides:  # the gating pass walks both with one set of strides
            a, gate = _rows(call, call.contiguous(x)), _rows(call, call.contiguous(gate))
    out = call.empty(shape, x.dtype)
    options = {"alpha": 1.0, "beta": 1.0, "act": act_code, "gate_act": gate_code}
    residual = None if residual is None else _rows(call, residual)
    w = _weight_t(op, call, weight, x.shape[-1])
    _gemm(call, a, w, _rows(call, out), gate=gate, input=bias, residual=residual, **options)
    return out.obj


ACTS = ("relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")


@register
def linear(
    x: Any,
    weight: Any,
    bias: Any = None,
    activation: Optional[str] = None,
    residual: Any = None,
    *,
    backend: Optional[str] = None,
) -> Any:
    """activation(x @ weight.T + bias) + residual in one kernel (the epilogue fused into the matmul). x (..., k),
    weight (n, k) as torch.nn.functional.linear, bias (n,), residual (..., n); activation None, "relu", "gelu",
    "gelu_tanh", "silu", "sigmoid" or "tanh"; the epilogue runs in float32 and rounds once."""
    op = "linear"
    call, (vx, vw, vb, vr) = _operands(op, backend, ("x", "weight", "bias", "residual"), (x, weight, bias, residual))
    return _fused_linear(op, call, vx, None, vw, vb, vr, activation, None)


@register
def gate_linear(
    x1: Any,
    x2: Any,
    weight: Any,
    bias: Any = None,
    residual: Any = None,
    act: Optional[str] = "silu",
    *,
    backend: Optional[str] = None,
) -> Any:
    """(act(x1) * x2) @ weight.T + bias + residual (Xopes' gate_linear): x1 and x2 (..., k) of one shape, weight
    (n, k), bias (n,), residual (..., n); act "silu" (the default), None, "relu", "gelu", "gelu_tanh", "sigmoid" or
    "tanh". On the GPU the gating is a pass of its own (measured faster than in the matmul's prologue) and bias and
    residual are the product's epilogue; act(x1) * x2 is rounded to the inputs' dtype before the product, as the
    unfused sequence stores it."""
    op = "gate_linear"
    names = ("x1", "x2", "weight", "bias", "residual")
    call, (v1, v2, vw, vb, vr) = _operands(op, backend, names, (x1, x2, weight, bias, residual))
    check.same_shape(op, ("x1", v1), ("x2", v2))
    return _fused_linear(op, call, v1, v2, vw, vb, vr, None, act)
