"""Elementwise ops against independent float64 / int64 references, on the CPU path (NumPy) and on the GPU (marker
gpu, outputs poisoned): every op and dtype, the result dtypes of torch's promotion (written out per case, and checked
against torch itself on the GPU), broadcasting in every form the kernels distinguish, non-contiguous and misaligned
views, out= (same dtype, a wider dtype, in place) and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import torch_or_skip, unexercised

import xopsaot
from xopsaot import _library

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
FLOATS = ["float16", "bfloat16", "float32"]
INTS = ["int32", "int64"]
ALL = FLOATS + INTS + ["bool"]
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
GPU_USED: set[int] = set()


def ran(where):
    if where == "gpu":
        GPU_USED.add(_library.last_variant())


# ---- arrays and references ----


def numpy_dtype(dtype: str):
    if dtype == "bfloat16":
        return pytest.importorskip("ml_dtypes").bfloat16
    return np.dtype(dtype)


def values(rng, shape, dtype: str, kind: str = "any") -> np.ndarray:
    """Random host values of dtype. kind: "any", "nonzero" (away from 0, random sign), "positive", "small" (within
    +-4 for integers, +-2 for floats: exponents whose powers stay finite)."""
    return np.asarray(_values(rng, shape, dtype, kind))


def _values(rng, shape, dtype: str, kind: str):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in INTS:
        low, high = {"small": (-4, 5), "nonzero": (1, 50), "positive": (1, 50)}.get(kind, (-50, 51))
        data = rng.integers(low, high, size=shape)
        if kind == "nonzero":
            data *= rng.choice([-1, 1], size=shape)
        return data.astype(dtype)
    data = np.asarray(rng.uniform(-2, 2, shape) if kind == "small" else rng.standard_normal(shape) * 2)
    if kind in ("nonzero", "positive"):
        data = np.abs(data) + 0.25
        if kind == "nonzero":
            data *= rng.choice([-1, 1], size=shape)
    return data.astype(np.float32).astype(numpy_dtype(dtype))


def on(where: str, host: np.ndarray):
    if where == "cpu":
        return host
    torch = torch_or_skip()
    if host.dtype.name == "bfloat16":
        return torch.from_numpy(host.astype(np.float32)).to(torch.bfloat16).cuda()
    return torch.from_numpy(host.copy()).cuda()  # copy, not ascontiguousarray: that makes a 0-d array 1-d


def to_host(x) -> np.ndarray:
    if hasattr(x, "detach"):
        torch = torch_or_skip()
        torch.cuda.synchronize()
        x = x.detach().cpu()
        return (x.float() if x.dtype == torch.bfloat16 else x).numpy()
    return np.asarray(x)


def dtype_name(x) -> str:
    return str(x.dtype).replace("torch.", "")


def wide(x, dtype: str) -> np.ndarray:
    """Host values converted to dtype (the promotion) then widened exactly: float64, int64 or bool."""
    x = np.asarray(x)
    if dtype == "bool":
        return x.astype(bool)
    if dtype in INTS:
        return x.astype(dtype).astype(np.int64)
    if x.dtype.name == "bfloat16" or dtype == "bfloat16":
        return x.astype(np.float32).astype(numpy_dtype(dtype)).astype(np.float32).astype(np.float64)
    return x.astype(np.float32 if x.dtype.name == "bfloat16" else x.dtype).astype(dtype).astype(np.float64)


def int_power(base, exponent):
    out = np.empty(np.broadcast(base, exponent).shape, dtype=np.int64)
    for i, (b, e) in enumerate(np.broadcast(base, exponent)):
        b, e = int(b), int(e)
        value = b**e if e >= 0 else (1 if b == 1 else (-1 if e % 2 else 1) if b == -1 else 0)
        out.flat[i] = (value + 2**63) % 2**64 - 2**63  # wrapped to int64
    return out


def reference(op: str, x, y, compute: str, **kw):
    """The op on values already converted to `compute`: float64 for floats, wrapping int64 for integers."""
    a, b = wide(x, compute), (wide(y, compute) if y is not None else None)
    floating = compute in FLOATS
    with np.errstate(all="ignore"):
        table = {
            "add": lambda: (a | (b & bool(kw.get("alpha", 1)))) if compute == "bool" else a + kw.get("alpha", 1) * b,
            "sub": lambda: a - kw.get("alpha", 1) * b,
            "mul": lambda: (a & b) if compute == "bool" else a * b,
            "div": lambda: a / b,
            # float32 quotients, as torch's opmath for float16/bfloat16/float32: rounding may reach an integer
            "trunc": lambda: np.trunc((a / b).astype(np.float32)) if floating else np.fix(a / b).astype(np.int64),
            "floor": lambda: np.floor(a / b) if floating else a // b,
            "pow": lambda: np.power(a, b) if floating else int_power(a, b),
            "maximum": lambda: np.maximum(a, b),
            "minimum": lambda: np.minimum(a, b),
            "eq": lambda: a == b,
            "ne": lambda: a != b,
            "lt": lambda: a < b,
            "le": lambda: a <= b,
            "gt": lambda: a > b,
            "ge": lambda: a >= b,
            "bitwise_and": lambda: a & b,
            "bitwise_or": lambda: a | b,
            "neg": lambda: -a,
            "abs": lambda: np.abs(a),
            "exp": lambda: np.exp(a),
            "rsqrt": lambda: 1 / np.sqrt(a),
            "sin": lambda: np.sin(a),
            "cos": lambda: np.cos(a),
            "isinf": lambda: np.isinf(a) if floating else np.zeros(a.shape, bool),
            "isnan": lambda: np.isnan(a) if floating else np.zeros(a.shape, bool),
            "bitwise_not": lambda: ~a,
            "clamp": lambda: np.minimum(np.maximum(a, kw["min"]), kw["max"]),
        }
        return table[op]()


def check(actual, expected, dtype: str, what: str) -> None:
    """Exact for integers and bool; floats within the dtype's tolerance of max(|expected|, 1), NaN where expected."""
    assert dtype_name(actual) == dtype, f"{what}: dtype {dtype_name(actual)} != {dtype}"
    a = to_host(actual)
    e = np.broadcast_to(expected, a.shape)
    assert a.shape == np.shape(expected) or np.shape(expected) == (), f"{what}: shape {a.shape}"
    if dtype not in FLOATS:
        wrapped = e.astype(dtype)  # int64 arithmetic narrowed to int32 wraps as the kernels' int32 arithmetic does
        bad = np.flatnonzero(a.astype(np.int64) != wrapped.astype(np.int64))
        first = f"first at {bad[0]}: {a.flat[bad[0]]} != {wrapped.flat[bad[0]]}" if bad.size else ""
        assert bad.size == 0, f"{what}: {bad.size} values differ, {first}"
        return
    a = a.astype(np.float64)
    nan = np.isnan(e)
    assert np.array_equal(np.isnan(a), nan), f"{what}: NaN where the reference has none or the reverse"
    same_inf = (a == e) | nan
    err = np.where(same_inf, 0.0, np.abs(a - e) / np.maximum(np.abs(e), 1.0))
    assert err.max(initial=0.0) <= TOLERANCE[dtype], f"{what}: max error {err.max():.2e}"


# ---- binary ops: every op x dtype x broadcast form ----

# op -> (function, keyword arguments, input dtypes, kind of y's values)
BINARY = {
    "add": (xopsaot.add, {"alpha": 1}, ALL, "any"),
    "add_alpha": (xopsaot.add, {"alpha": 3}, FLOATS + INTS, "any"),
    "sub": (xopsaot.sub, {"alpha": 2}, FLOATS + INTS, "any"),
    "mul": (xopsaot.mul, {}, ALL, "any"),
    "div": (xopsaot.div, {}, FLOATS, "nonzero"),
    "trunc": (xopsaot.div, {"rounding_mode": "trunc"}, FLOATS + INTS, "nonzero"),
    "floor": (xopsaot.div, {"rounding_mode": "floor"}, FLOATS + INTS, "nonzero"),
    "pow": (xopsaot.pow, {}, FLOATS + INTS, "small"),
    "maximum": (xopsaot.maximum, {}, ALL, "any"),
    "minimum": (xopsaot.minimum, {}, ALL, "any"),
    "bitwise_and": (xopsaot.bitwise_and, {}, INTS + ["bool"], "any"),
    "bitwise_or": (xopsaot.bitwise_or, {}, INTS + ["bool"], "any"),
    **{name: (getattr(xopsaot, name), {}, ALL, "any") for name in ("eq", "ne", "lt", "le", "gt", "ge")},
}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def y_forms(rng, shape, dtype, kind):
    """y broadcast against x of `shape` in each form: same shape, a row (bias), a column, one element (0-d), a
    Python scalar, and a non-contiguous view."""
    rows = int(np.prod(shape[:-1]))
    forms = {
        "same": values(rng, shape, dtype, kind),
        "row": values(rng, shape[-1:], dtype, kind),
        "column": values(rng, shape[:-1] + (1,), dtype, kind),
        "0-d": values(rng, (), dtype, kind),
        "strided": values(rng, shape[:-1] + (2 * shape[-1],), dtype, kind)[..., ::2],
    }
    scalar = values(rng, (), dtype, kind).item()
    forms["scalar"] = bool(scalar) if dtype == "bool" else (int(scalar) if dtype in INTS else float(scalar))
    assert rows >= 1
    return forms


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("case", list(BINARY))
def test_binary(request, rng, where, case):
    if where == "gpu":
        request.getfixturevalue("poison")
    fn, kw, dtypes, kind = BINARY[case]
    name = {"add_alpha": "add"}.get(case, case)
    alpha = {k: v for k, v in kw.items() if k == "alpha"}
    for dtype in dtypes:
        result = "bool" if case in COMPARISONS else dtype
        x_kind = ("positive" if dtype in FLOATS else "small") if case == "pow" else "any"

        def run(x, y, x_host, y_host, what, dtype=dtype, result=result):
            out = fn(x, y, **kw)
            ran(where)
            check(out, reference(name, x_host, y_host, dtype, **alpha), result, f"{case} {dtype} {what}")

        for shape in [(17,), (3, 1000), (2, 3, 64)]:
            x = values(rng, shape, dtype, x_kind)
            for form, y in y_forms(rng, shape, dtype, kind).items():
                if case == "pow" and form == "scalar" and dtype in INTS:
                    y = abs(y)  # a negative Python exponent of integers is an error (tested below)
                run(on(where, x), on(where, y) if isinstance(y, np.ndarray) else y, x, y, f"{shape} y {form}")
        # views of x: misaligned and strided (the strided kernel), transposed: the narrow tile (rows of 24), tiles
        # of 16 rows that stay within one run of the transposed dim (48 and 64 of them), in 2 and 3 dims, and the
        # tall aligned tile (runs of 256 and 128 rows of 48 columns: a partial column tile)
        xs, y = values(rng, (2 * 640 + 1,), dtype, x_kind), values(rng, (640,), dtype, kind)
        run(on(where, xs)[1:641], on(where, y), xs[1:641], y, "misaligned x")
        run(on(where, xs)[:1280:2], on(where, y), xs[:1280:2], y, "strided x")
        xt, t = values(rng, (24, 40), dtype, x_kind), values(rng, (40, 24), dtype, kind)
        run(on(where, xt).T, on(where, t), xt.T, t, "transposed x")
        xt, t = values(rng, (100, 48), dtype, x_kind), values(rng, (48, 100), dtype, kind)
        run(on(where, xt).T, on(where, t), xt.T, t, "transposed x, whole tiles")
        xt, t = values(rng, (3, 80, 64), dtype, x_kind), values(rng, (3, 64, 80), dtype, kind)
        run(on(where, xt).swapaxes(1, 2), on(where, t), xt.swapaxes(1, 2), t, "batched transposed x, whole tiles")
        xt, t = values(rng, (48, 256), dtype, x_kind), values(rng, (256, 48), dtype, kind)
        run(on(where, xt).T, on(where, t), xt.T, t, "transposed x, aligned")
        xt, t = values(rng, (2, 48, 128), dtype, x_kind), values(rng, (2, 128, 48), dtype, kind)
        run(on(where, xt).swapaxes(1, 2), on(where, t), xt.swapaxes(1, 2), t, "batched transposed x, aligned")
        # the scalar as x
        scalar_x = {"bool": True, "int32": 3, "int64": 3}.get(dtype, 1.5)
        run(scalar_x, on(where, t), np.asarray(scalar_x).astype(numpy_dtype(dtype)), t, "scalar x")


# ---- unary ops ----

UNARY = {
    "neg": (FLOATS + INTS, "any"),
    "abs": (FLOATS + INTS, "any"),
    "exp": (FLOATS, "any"),
    "rsqrt": (FLOATS, "positive"),
    "sin": (FLOATS, "any"),
    "cos": (FLOATS, "any"),
    "isinf": (ALL, "any"),
    "isnan": (ALL, "any"),
    "bitwise_not": (INTS + ["bool"], "any"),
}


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("case", list(UNARY))
def test_unary(request, rng, where, case):
    if where == "gpu":
        request.getfixturevalue("poison")
    dtypes, kind = UNARY[case]
    fn = getattr(xopsaot, case)
    for dtype in dtypes:
        result = "bool" if case in ("isinf", "isnan") else dtype
        for shape in [(1,), (17,), (3, 1000), (100_003,)]:
            x = values(rng, shape, dtype, kind)
            out = fn(on(where, x))
            ran(where)
            check(out, reference(case, x, None, dtype), result, f"{case} {dtype} {shape}")
        x = values(rng, (2 * 4097 + 1,), dtype, kind)
        views = (("misaligned", on(where, x)[1:4098], x[1:4098]), ("strided", on(where, x)[::2], x[::2]))
        for what, view, host in views:
            out = fn(view)
            ran(where)
            check(out, reference(case, host, None, dtype), result, f"{case} {dtype} {what}")


def test_integer_math_promotes_to_float32(rng):
    x = values(rng, (5, 7), "int32", "positive")
    for case in ("exp", "rsqrt", "sin", "cos"):
        check(getattr(xopsaot, case)(x), reference(case, x, None, "float32"), "float32", case)
    check(xopsaot.div(x, 2), x / 2, "float32", "int / int")


@pytest.mark.parametrize("where", PATHS)
def test_special_values(request, where):
    """inf, NaN and signed zeros through isinf/isnan, NaN-propagating maximum/minimum/clamp, division by zero."""
    if where == "gpu":
        request.getfixturevalue("poison")
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5], dtype=np.float32)
    other = np.array([np.nan, 1.0, 0.0, -0.0, 2.0, np.nan, 3.0, -7.0], dtype=np.float32)
    for dtype in FLOATS:
        x, y = special.astype(numpy_dtype(dtype)), other.astype(numpy_dtype(dtype))
        for case in ("isinf", "isnan"):
            check(getattr(xopsaot, case)(on(where, x)), reference(case, x, None, dtype), "bool", f"{case} {dtype}")
        for case in ("maximum", "minimum", "div", "eq", "ne", "lt", "ge"):
            out = getattr(xopsaot, case)(on(where, x), on(where, y))
            result = "bool" if case in COMPARISONS else dtype
            check(out, reference(case, x, y, dtype), result, f"{case} {dtype} special")
        out = xopsaot.clamp(on(where, x), -1.5, 2.0)
        check(out, reference("clamp", x, None, dtype, min=-1.5, max=2.0), dtype, f"clamp {dtype} special")
        out = xopsaot.clamp(on(where, x), min=float("nan"))
        check(out, np.full(x.shape, np.nan), dtype, f"clamp {dtype} NaN bound")


# ---- clamp ----


@pytest.mark.parametrize("where", PATHS)
def test_clamp(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS + INTS:
        x = values(rng, (3, 1001), dtype)
        ints = dtype in INTS
        for low, high in ((-1, 1), (None, 0), (0, None), (5, -5), (-(2**40), 2**40)):
            if not ints:
                low, high = (None if v is None else v * 0.75 for v in (low, high))
            out = xopsaot.clamp(on(where, x), low, high)
            ran(where)
            inf = np.iinfo(np.int64) if ints else None
            lo = (inf.min if ints else -np.inf) if low is None else low
            hi = (inf.max if ints else np.inf) if high is None else high
            check(out, reference("clamp", x, None, dtype, min=lo, max=hi), dtype, f"clamp {dtype} {low} {high}")
        # array bounds broadcast (two launches) and a float bound promoting integers to float32
        low, high = values(rng, (1001,), dtype), values(rng, (3, 1), dtype)
        out = xopsaot.clamp(on(where, x), on(where, low), on(where, high))
        ran(where)
        check(out, np.minimum(np.maximum(wide(x, dtype), wide(low, dtype)), wide(high, dtype)), dtype, "tensors")
    out = xopsaot.clamp(on(where, values(rng, (5,), "int32")), 0.5)
    assert dtype_name(out) == "float32"


# ---- promotion: the result dtype of mixed operands, as torch defines it ----

# (x dtype or Python scalar, y dtype or Python scalar, 0-d y, op, result dtype)
PROMOTIONS = [
    ("float16", "float32", False, "add", "float32"),
    ("bfloat16", "float16", False, "mul", "float32"),
    ("int32", "int64", False, "add", "int64"),
    ("int32", "float16", False, "sub", "float16"),
    ("bool", "int32", False, "add", "int32"),
    ("float16", "float32", True, "add", "float16"),  # a 0-d tensor of the same category does not widen
    ("int32", "float32", True, "mul", "float32"),  # ... but of a higher category does
    ("int64", 2.5, False, "add", "float32"),  # a Python float is float32
    ("float16", 2.5, False, "mul", "float16"),
    ("int32", 7, False, "add", "int32"),
    ("bool", 3, False, "add", "int64"),
    ("int32", "int32", False, "div", "float32"),  # true division of integers
    ("int32", 2.5, False, "lt", "bool"),
    ("bool", True, False, "bitwise_or", "bool"),
    (2, "bfloat16", False, "pow", "bfloat16"),
]


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("case", PROMOTIONS, ids=lambda c: "-".join(map(str, c)))
def test_promotion(request, rng, where, case):
    if where == "gpu":
        request.getfixturevalue("poison")
    xd, yd, zero_d, op, expected = case

    def operand(d, shape):
        if not isinstance(d, str):
            return d, np.asarray(d)
        host = values(rng, shape, d, "positive" if op in ("div", "pow") else "any")
        return on(where, host), host

    x, x_host = operand(xd, (4, 33))
    y, y_host = operand(yd, () if zero_d else (33,))
    out = getattr(xopsaot, op)(x, y)
    ran(where)
    compute = "float32" if op in ("div", "lt") and expected in ("float32", "bool") else expected
    if op == "lt":
        compute = "float32"
    check(out, reference(op, x_host, y_host, compute), expected, f"{case}")
    if where == "gpu":
        torch = torch_or_skip()
        assert getattr(torch, op)(x, y).dtype == out.dtype  # torch agrees on the dtype


# ---- out= ----


@pytest.mark.parametrize("where", PATHS)
def test_out(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    x, y = values(rng, (8, 300), "float16"), values(rng, (300,), "float16")
    ref = reference("add", x, y, "float16")
    # same dtype: written directly, and returned
    out = on(where, np.zeros((8, 300), np.float16))
    assert xopsaot.add(on(where, x), on(where, y), out=out) is out
    ran(where)
    check(out, ref, "float16", "out= float16")
    # a wider dtype (torch allows any it can cast to): float32 out of a float16 sum
    out32 = on(where, np.zeros((8, 300), np.float32))
    assert xopsaot.add(on(where, x), on(where, y), out=out32) is out32
    check(out32, reference("add", x, y, "float16").astype(np.float16), "float32", "out= float32")
    # in place, with y broadcast over it
    xx = on(where, x.copy())
    assert xopsaot.mul(xx, on(where, y), out=xx) is xx
    ran(where)
    check(xx, reference("mul", x, y, "float16"), "float16", "in place")
    # a strided out writes only its own elements
    big = on(where, np.zeros((8, 600), np.float16))
    xopsaot.add(on(where, x), on(where, y), out=big[:, ::2])
    ran(where)
    check(big[:, ::2], ref, "float16", "strided out")
    assert not to_host(big[:, 1::2]).any()
    # comparisons into bool out
    flags = on(where, np.zeros((8, 300), bool))
    xopsaot.gt(on(where, x), 0.0, out=flags)
    check(flags, wide(x, "float16") > 0, "bool", "bool out")
    with pytest.raises(ValueError, match=r"add: out has shape \(8, 299\) but the result has shape \(8, 300\)"):
        xopsaot.add(on(where, x), on(where, y), out=on(where, np.zeros((8, 299), np.float16)))
    with pytest.raises(TypeError, match="add: the result's dtype float16 can't be cast to out's dtype int32"):
        xopsaot.add(on(where, x), on(where, y), out=on(where, np.zeros((8, 300), np.int32)))


@pytest.mark.gpu
def test_out_overlapping_input_is_refused(rng):
    torch = torch_or_skip()
    x = torch.randn(1000, device="cuda")
    with pytest.raises(ValueError, match="add: x and out share memory but are not the same elements"):
        xopsaot.add(x[1:], 1.0, out=x[:-1])
    with pytest.raises(ValueError, match="out has overlapping elements"):
        xopsaot.add(x[:10], 1.0, out=torch.zeros(1, device="cuda").expand(10))


# ---- bad input ----


@pytest.mark.parametrize("where", PATHS)
def test_bad_input(rng, where):
    f = on(where, values(rng, (4, 3), "float32"))
    i = on(where, values(rng, (4, 3), "int32"))
    b = on(where, values(rng, (4, 3), "bool"))
    with pytest.raises(ValueError, match=r"add: shapes do not broadcast: input \(4, 3\) and other \(4,\)"):
        xopsaot.add(f, on(where, values(rng, (4,), "float32")))
    with pytest.raises(TypeError, match="bitwise_and: bitwise ops need integer or bool operands, got float32"):
        xopsaot.bitwise_and(f, f)
    with pytest.raises(TypeError, match="bitwise_not: input.dtype is float32; supported: int32, int64, bool"):
        xopsaot.bitwise_not(f)
    with pytest.raises(TypeError, match="sub: subtraction of bool operands is not supported"):
        xopsaot.sub(b, b)
    with pytest.raises(TypeError, match="neg: input.dtype is bool"):
        xopsaot.neg(b)
    with pytest.raises(TypeError, match="add: for integer and bool operands alpha must be an int, got 1.5"):
        xopsaot.add(i, i, alpha=1.5)
    with pytest.raises(ValueError, match="div: rounding_mode is 'round'; supported: None, 'trunc', 'floor'"):
        xopsaot.div(f, f, rounding_mode="round")
    with pytest.raises(ValueError, match="clamp: at least one of min and max must not be None"):
        xopsaot.clamp(f)
    with pytest.raises(ValueError, match=r"pow: integers to negative integer powers are not allowed \(exponent=-1\)"):
        xopsaot.pow(i, -1)
    with pytest.raises(TypeError, match="add: at least one operand must be an array"):
        xopsaot.add(1, 2)
    with pytest.raises(TypeError, match="add: other.dtype is float64; supported: bool, int32, int64"):
        xopsaot.add(f, on(where, np.zeros((4, 3))))
    with pytest.raises(TypeError, match="add: input must be an array"):
        xopsaot.add([1.0], f)


def test_integer_division_by_zero_raises_on_the_cpu_path():
    with pytest.raises(ZeroDivisionError, match="div: integer division by zero"):
        xopsaot.div(np.arange(4, dtype=np.int32), np.zeros(4, np.int32), rounding_mode="floor")


@pytest.mark.gpu
def test_every_elementwise_variant_was_checked():
    """After the tests above (file order): each elementwise variant compiled for this GPU ran."""
    missing = unexercised({"elementwise_kernel", "elementwise_strided_kernel"}, GPU_USED)
    assert not missing, f"elementwise variants never exercised: {missing}"
