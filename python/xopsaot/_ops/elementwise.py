"""Elementwise ops with torch's names, broadcasting, type promotion and out=.

Operands are arrays or Python scalars. The result dtype follows torch's rules (tensors with dims outrank 0-d
tensors, which outrank Python scalars, unless the lower-ranked operand is of a higher category: bool < integer <
float; a Python float is float32, a Python int int64). Supported dtypes: bool, int32, int64, float16, bfloat16,
float32. On the GPU one kernel launch does the op after operands of another dtype than the computation's are
converted (a framework cast, the only extra pass); out= of a dtype other than the result's (torch allows any it can
cast to) gets a copy of the result.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._call import Call, resolve
from .._library import ElementwiseOptions
from .._registry import register

DTYPES = ("bool", "int32", "int64", "float16", "bfloat16", "float32")
_CATEGORY = {"bool": 0, "int32": 1, "int64": 1, "float16": 2, "bfloat16": 2, "float32": 2}
INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}

# XOPSAOT_EW_* (include/xopsaot.h)
CODES = {
    "add": 0, "mul": 1, "div": 2, "div_trunc": 3, "div_floor": 4, "pow": 5, "bitwise_and": 6, "bitwise_or": 7,
    "maximum": 8, "minimum": 9, "eq": 10, "ne": 11, "lt": 12, "le": 13, "gt": 14, "ge": 15, "neg": 16, "abs": 17,
    "exp": 18, "rsqrt": 19, "sin": 20, "cos": 21, "isinf": 22, "isnan": 23, "bitwise_not": 24, "clamp": 25, "sub": 26,
}  # fmt: skip
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
COMPARISON_UFUNCS = dict(
    zip(COMPARISONS, (np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal))
)
FLOAT_MATH = ("exp", "rsqrt", "sin", "cos")  # integer and bool inputs compute in float32, as in torch


# ---- type promotion (torch's result_type) ----


def promote_types(a: str, b: str) -> str:
    if a == b:
        return a
    ca, cb = _CATEGORY[a], _CATEGORY[b]
    if ca != cb:
        return a if ca > cb else b
    return "int64" if ca == 1 else "float32"  # int32/int64; two different floats meet in float32


def scalar_dtype(value) -> str:
    """The dtype a Python scalar takes part in promotion as (torch's default dtype for floats: float32)."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    return "int64" if check.is_integer(value) else "float32"


def _combine(higher: Optional[str], lower: Optional[str]) -> Optional[str]:
    if higher is None or lower is None:
        return higher or lower
    if _CATEGORY[higher] == 2:
        return higher
    if higher == "bool" or _CATEGORY[lower] == 2:
        return promote_types(higher, lower)
    return higher


def result_type(operands) -> str:
    """operands: (rank, dtype) with rank 0 for arrays with dims, 1 for 0-d arrays, 2 for Python scalars."""
    ranks: list[Optional[str]] = [None, None, None]
    for rank, dtype in operands:
        ranks[rank] = dtype if ranks[rank] is None else promote_types(ranks[rank], dtype)
    return _combine(ranks[0], _combine(ranks[1], ranks[2]))


def can_cast(source: str, target: str) -> bool:
    """torch's rule for out=: never to a lower category (float -> integer, integer -> bool)."""
    return _CATEGORY[source] <= _CATEGORY[target]


# ---- NumPy references, in float64 (floats) or wrapping int64 (integers) ----


def _round_to(array: np.ndarray, dtype: str) -> np.ndarray:
    """Values rounded to `dtype` (an operand's conversion to the computation's dtype), as float64 or int64."""
    if dtype == "bfloat16":  # round to nearest even on the float32 bits: NumPy has no bfloat16
        bits = np.asarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
        return bits.view(np.float32).astype(np.float64)
    if _CATEGORY[dtype] == 2:
        return np.asarray(array).astype(dtype).astype(np.float64)
    return np.asarray(array).astype(dtype).astype(np.bool_ if dtype == "bool" else np.int64)


def _int_pow(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    result = np.ones(np.broadcast(base, exponent).shape, dtype=np.int64)
    x = np.broadcast_to(base, result.shape).astype(np.int64)
    e = np.broadcast_to(exponent, result.shape).astype(np.int64)
    power, positive = x, np.where(e > 0, e, 0)
    with np.errstate(over="ignore"):
        while positive.any():  # squaring wraps in int64, as the kernel's integers do
            result = np.where(positive & 1, result * power, result)
            power = power * power
            positive = positive >> 1
    negative = np.where(x == 1, 1, np.where(x == -1, 1 - 2 * (e & 1), 0))
    return np.where(e < 0, negative, result)


def binary_reference(name: str, x, y, compute: str, alpha=1) -> np.ndarray:
    """f(x, y) for NumPy arrays or scalars already promoted to `compute`; comparisons give bool."""
    x, y = _round_to(x, compute), _round_to(y, compute)
    floating, boolean = _CATEGORY[compute] == 2, compute == "bool"
    with np.errstate(all="ignore"):
        if name in COMPARISONS:
            return COMPARISON_UFUNCS[name](x, y)
        if name in ("add", "sub"):
            if boolean:
                return x | (y & bool(alpha))
            a = np.float64(alpha) if floating else np.int64(alpha)
            return x + a * y if name == "add" else x - a * y
        if name == "mul":
            return x & y if boolean else x * y
        if name in ("bitwise_and", "bitwise_or"):
            return x & y if name == "bitwise_and" else x | y
        if name in ("maximum", "minimum"):
            if boolean:
                return x | y if name == "maximum" else x & y
            return np.maximum(x, y) if name == "maximum" else np.minimum(x, y)
        if name == "pow":
            return np.power(x, y) if floating else _int_pow(x, y)
        if name == "div":
            return x / y
        if not floating and np.any(np.broadcast_to(y, np.broadcast(x, y).shape) == 0):
            raise ZeroDivisionError(f"div: integer division by zero (rounding_mode={name[4:]!r})")
        if name == "div_trunc":
            if floating:  # the float32 quotient, as torch (and the GPU) round it before truncating
                return np.trunc((x / y).astype(np.float32)).astype(np.float64)
            return np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))
        return np.floor_divide(x, y)  # div_floor: Python's // for floats and integers
    raise ValueError(name)


def unary_reference(name: str, x, compute: str, low=None, high=None) -> np.ndarray:
    x = _round_to(x, compute)
    floating = _CATEGORY[compute] == 2
    with np.errstate(all="ignore"):
        if name == "neg":
            return -x
        if name == "abs":
            return np.abs(x)
        if name == "exp":
            return np.exp(x)
        if name == "rsqrt":
            return 1.0 / np.sqrt(x)
        if name in ("sin", "cos"):
            return np.sin(x) if name == "sin" else np.cos(x)
        if name == "isinf":
            return np.isinf(x) if floating else np.zeros(x.shape, dtype=bool)
        if name == "isnan":
            return np.isnan(x) if floating else np.zeros(x.shape, dtype=bool)
        if name == "bitwise_not":
            return ~x
        if name == "clamp":  # NaN bounds propagate, and min > max gives max, as in torch
            if low is not None:
                x = np.maximum(x, low)
            return x if high is None else np.minimum(x, high)
    raise ValueError(name)


# ---- the op layer ----


class _Operand:
    """One input: an array (view set) or a Python scalar (value set)."""

    __slots__ = ("name", "value", "view", "rank", "dtype")

    def __init__(self, name: str, value, view=None):
        self.name, self.value, self.view = name, value, view
        if view is None:
            self.rank, self.dtype = 2, scalar_dtype(value)
        else:
            self.rank, self.dtype = (0 if view.ndim else 1), view.dtype


def _is_scalar(value) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def _prepare(op: str, names: tuple, values: tuple, out: Any, backend: Optional[str]):
    """Resolve the arrays among values (and out), check dtypes, and describe each operand."""
    arrays = [v for v in values if not _is_scalar(v)]
    if not arrays:
        kinds = ", ".join(type(v).__name__ for v in values)
        raise TypeError(f"{op}: at least one operand must be an array, got {kinds}")
    array_names = tuple(n for n, v in zip(names, values) if not _is_scalar(v))
    call, views = resolve(op, backend, array_names + ("out",), tuple(arrays) + (out,))
    if out is not None and call.framework.name == "jax":
        raise TypeError(f"{op}: out= needs a mutable array; JAX arrays are immutable")
    by_name = dict(zip(array_names, views))
    operands = []
    for name, value in zip(names, values):
        view = by_name.get(name)
        if view is not None:
            check.dtype(op, name, view, DTYPES)
        operands.append(_Operand(name, value, view))
    out_view = views[-1]
    if out_view is not None:
        check.dtype(op, "out", out_view, DTYPES)
    return call, operands, out_view


def _broadcast_shape(op: str, operands) -> tuple:
    shapes = [o.view.shape for o in operands if o.view is not None]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        text = " and ".join(f"{o.name} {check.shape_text(o.view.shape)}" for o in operands if o.view is not None)
        raise ValueError(f"{op}: shapes do not broadcast: {text}") from None


def _scalar_value(op: str, operand: _Operand, compute: str):
    """A Python scalar as the computation uses it: float, or an int wrapped to the dtype (as torch does)."""
    value = operand.value
    if _CATEGORY[compute] == 2:
        return float(value)
    if compute == "bool":
        return int(bool(value))
    if not check.is_integer(value) and not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {operand.name}={value!r} is a float but the computation is {compute}")
    value = int(value)
    low, high = INT_RANGE["int64"]
    if not low <= value <= high:
        raise ValueError(f"{op}: {operand.name}={value} does not fit in int64")
    return value


def _check_out(op: str, out_view, shape: tuple, result: str) -> None:
    if out_view is None:
        return
    if tuple(out_view.shape) != shape:
        raise ValueError(f"{op}: out has shape {check.shape_text(out_view.shape)} but the result has shape "
                         f"{check.shape_text(shape)}")  # fmt: skip
    if not can_cast(result, out_view.dtype):
        raise TypeError(f"{op}: the result's dtype {result} can't be cast to out's dtype {out_view.dtype}")


def _finish_host(call: Call, array: np.ndarray, result: str, out_view) -> Any:
    if out_view is None:
        return call.result(array, result)
    if out_view.dtype != result:  # rounded to the result's dtype first, as the GPU path's copy is
        array = _round_to(array, result)
    call.framework.assign(out_view.obj, array)
    return out_view.obj


def _launch(call: Call, op: str, code: int, operands, compute: str, result: str, shape, out_view, options) -> Any:
    """The GPU path: convert operands to `compute`, run the kernel into out (or a new array) and return it."""
    views = []
    for o in operands:
        view = o.view
        if view is not None and view.dtype != compute:
            view = call.framework.view(call.framework.astype(view.obj, compute))
        views.append(view)
    target = out_view if out_view is not None and out_view.dtype == result else call.empty(shape, result)
    options.op = code
    x, y = (views + [None])[:2]
    call.launch("xopsaot_elementwise", (x, y, target), ctypes.byref(options))
    if out_view is not None and target is not out_view:
        call.not_replayable()  # the copy into out happens outside the recorded launches
        call.framework.copy_into(out_view.obj, target.obj)
        return out_view.obj
    return target.obj


def _options(operands, compute: str, op: str, alpha=None) -> ElementwiseOptions:
    options = ElementwiseOptions()
    for i, o in enumerate(operands[:2]):
        if o.view is None:
            options.scalar_operand = i + 1
            value = _scalar_value(op, o, compute)
            if _CATEGORY[compute] == 2:
                options.scalar = value
            else:
                options.scalar_int = value
    if alpha is not None:
        if _CATEGORY[compute] == 2:
            options.alpha = float(alpha)
        else:
            options.alpha_int = int(alpha)
    return options


def _binary(op: str, kernel_op: str, x, y, out, backend, alpha=None) -> Any:
    call, operands, out_view = _prepare(op, ("input", "other"), (x, y), out, backend)
    promoted = result_type((o.rank, o.dtype) for o in operands)
    compute = promoted
    if kernel_op == "div" and _CATEGORY[compute] < 2:
        compute = "float32"  # true division of integers
    if kernel_op in ("bitwise_and", "bitwise_or") and _CATEGORY[compute] == 2:
        raise TypeError(f"{op}: bitwise ops need integer or bool operands, got {compute}")
    if compute == "bool" and kernel_op in ("sub", "pow", "div_trunc", "div_floor"):
        what = {"sub": "subtraction"}.get(kernel_op, kernel_op)
        raise TypeError(f"{op}: {what} of bool operands is not supported; supported: integer and float dtypes")
    if alpha is not None:
        _check_alpha(op, alpha, compute)
    if kernel_op == "pow" and _CATEGORY[compute] == 1 and operands[1].view is None and operands[1].value < 0:
        raise ValueError(f"{op}: integers to negative integer powers are not allowed (exponent={operands[1].value})")
    result = "bool" if kernel_op in COMPARISONS else compute
    shape = _broadcast_shape(op, operands)
    _check_out(op, out_view, shape, result)
    if not call.on_gpu:
        values = [call.host(o.view) if o.view is not None else o.value for o in operands]
        array = binary_reference(kernel_op, values[0], values[1], compute, 1 if alpha is None else alpha)
        return _finish_host(call, np.asarray(array).reshape(shape), result, out_view)
    options = _options(operands, compute, op, alpha)  # add and sub always pass alpha
    return _launch(call, op, CODES[kernel_op], operands, compute, result, shape, out_view, options)


def _check_alpha(op: str, alpha, compute: str) -> None:
    """torch's rules: a bool alpha only for bool results, a float alpha only for float results."""
    if not _is_scalar(alpha):
        raise TypeError(f"{op}: alpha must be a number, got {type(alpha).__name__}")
    if isinstance(alpha, (bool, np.bool_)) and compute != "bool":
        raise TypeError(f"{op}: a bool alpha needs bool operands, got alpha={alpha!r} for {compute}")
    if _CATEGORY[compute] < 2 and not (check.is_integer(alpha) or isinstance(alpha, (bool, np.bool_))):
        raise TypeError(f"{op}: for integer and bool operands alpha must be an int, got {alpha!r}")


def _unary(op: str, x, out, backend) -> Any:
    call, operands, out_view = _prepare(op, ("input",), (x,), out, backend)
    dtype = operands[0].dtype
    compute = "float32" if op in FLOAT_MATH and _CATEGORY[dtype] < 2 else dtype
    if op == "bitwise_not" and _CATEGORY[dtype] == 2:
        raise TypeError(f"{op}: input.dtype is {dtype}; supported: int32, int64, bool")
    if op in ("neg", "abs") and dtype == "bool":
        raise TypeError(f"{op}: input.dtype is bool; supported: int32, int64, float16, bfloat16, float32")
    result = "bool" if op in ("isinf", "isnan") else compute
    shape = tuple(operands[0].view.shape)
    _check_out(op, out_view, shape, result)
    if not call.on_gpu:
        return _finish_host(call, unary_reference(op, call.host(operands[0].view), compute), result, out_view)
    return _launch(call, op, CODES[op], operands, compute, result, shape, out_view, ElementwiseOptions())


@register
def add(input: Any, other: Any, *, alpha: Any = 1, out: Any = None, backend: Optional[str] = None) -> Any:
    """input + alpha * other, broadcast and promoted as torch does."""
    return _binary("add", "add", input, other, out, backend, alpha)


@register
def sub(input: Any, other: Any, *, alpha: Any = 1, out: Any = None, backend: Optional[str] = None) -> Any:
    """input - alpha * other."""
    return _binary("sub", "sub", input, other, out, backend, alpha)


@register
def mul(input: Any, other: Any, *, out: Any = None, backend: Optional[str] = None) -> Any:
    """input * other."""
    return _binary("mul", "mul", input, other, out, backend)


ROUNDING_MODES = {None: "div", "trunc": "div_trunc", "floor": "div_floor"}


@register
def div(
    input: Any, other: Any, *, rounding_mode: Optional[str] = None, out: Any = None, backend: Optional[str] = None
) -> Any:
    """input / other: true division (integers give float32), or rounded with rounding_mode "trunc" / "floor"."""
    if rounding_mode not in ROUNDING_MODES:
        raise ValueError(f"div: rounding_mode is {rounding_mode!r}; supported: None, 'trunc', 'floor'")
    return _binary("div", ROUNDING_MODES[rounding_mode], input, other, out, backend)


@register
def pow(input: Any, exponent: Any, *, out: Any = None, backend: Optional[str] = None) -> Any:  # noqa: A001
    """input ** exponent (either may be a Python scalar)."""
    return _binary("pow", "pow", input, exponent, out, backend)


def _comparison(name: str):
    def compare(input: Any, other: Any, *, out: Any = None, backend: Optional[str] = None) -> Any:
        return _binary(name, name, input, other, out, backend)

    compare.__name__ = compare.__qualname__ = name
    compare.__doc__ = f"Elementwise {name} (a bool result), after promotion."
    return register(compare)


eq, ne, lt, le, gt, ge = (_comparison(name) for name in COMPARISONS)


@register
def bitwise_and(input: Any, other: Any, *, out: Any = None, backend: Optional[str] = None) -> Any:
    """input & other for integer and bool operands."""
    return _binary("bitwise_and", "bitwise_and", input, other, out, backend)


@register
def bitwise_or(input: Any, other: Any, *, out: Any = None, backend: Optional[str] = None) -> Any:
    """input | other for integer and bool operands."""
    return _binary("bitwise_or", "bitwise_or", input, other, out, backend)


@register
def maximum(input: Any, other: Any, *, out: Any = None, backend: Optional[str] = None) -> Any:
    """The larger of input and other; NaN propagates."""
    return _binary("maximum", "maximum", input, other, out, backend)


@register
def minimum(input: Any, other: Any, *, out: Any = None, backend: Optional[str] = None) -> Any:
    """The smaller of input and other; NaN propagates."""
    return _binary("minimum", "minimum", input, other, out, backend)


def _unary_op(name: str, doc: str, takes_out: bool = True):
    if takes_out:

        def op(input: Any, *, out: Any = None, backend: Optional[str] = None) -> Any:
            return _unary(name, input, out, backend)
    else:

        def op(input: Any, *, backend: Optional[str] = None) -> Any:
            return _unary(name, input, None, backend)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return register(op)


neg = _unary_op("neg", "-input.")
abs = _unary_op("abs", "|input|.")  # noqa: A001
exp = _unary_op("exp", "e ** input (integers give float32).")
rsqrt = _unary_op("rsqrt", "1 / sqrt(input) (integers give float32).")
sin = _unary_op("sin", "sin(input) (integers give float32).")
cos = _unary_op("cos", "cos(input) (integers give float32).")
bitwise_not = _unary_op("bitwise_not", "~input for integers, not input for bool.")
isinf = _unary_op("isinf", "Whether input is +-inf (bool; false for integers and bool).", takes_out=False)
isnan = _unary_op("isnan", "Whether input is NaN (bool; false for integers and bool).", takes_out=False)


@register
def clamp(input: Any, min: Any = None, max: Any = None, *, out: Any = None, backend: Optional[str] = None) -> Any:  # noqa: A002
    """min(max(input, min), max), promoted with the bounds as torch does; a bound may be None, a Python scalar or an
    array (two launches then: maximum, minimum). NaN propagates; min > max gives max."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must not be None")
    if not _is_scalar(min if min is not None else 0) or not _is_scalar(max if max is not None else 0):
        low = input if min is None else maximum(input, min, backend=backend)
        return low if max is None else minimum(low, max, out=out, backend=backend)
    call, operands, out_view = _prepare("clamp", ("input",), (input,), out, backend)
    bounds = [(2, scalar_dtype(b)) for b in (min, max) if b is not None]
    compute = result_type([(operands[0].rank, operands[0].dtype)] + bounds)
    if compute == "bool":
        raise TypeError("clamp: bool input with bool bounds is not supported; supported: integer and float dtypes")
    shape = tuple(operands[0].view.shape)
    _check_out("clamp", out_view, shape, compute)
    if not call.on_gpu:
        array = unary_reference("clamp", call.host(operands[0].view), compute, min, max)
        return _finish_host(call, array, compute, out_view)
    options = ElementwiseOptions()
    if _CATEGORY[compute] == 2:
        options.min = -math.inf if min is None else float(min)
        options.max = math.inf if max is None else float(max)
    else:
        low, high = INT_RANGE["int64"]
        options.min_int = low if min is None else _bound(min, low, high)
        options.max_int = high if max is None else _bound(max, low, high)
    return _launch(call, "clamp", CODES["clamp"], operands, compute, compute, shape, out_view, options)


def _bound(value, low: int, high: int) -> int:
    return int(np.clip(int(value), low, high)) if not isinstance(value, bool) else int(value)
