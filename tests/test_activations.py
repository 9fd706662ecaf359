"""Activations and gated activations against float64 references, on the CPU path (NumPy) and on the GPU (marker
gpu, outputs poisoned with NaN): every dtype, awkward sizes, misaligned and non-contiguous views, bad input. Errors
are relative to max(|reference|, 1): a tail value such as gelu(-5) ~ 1e-6 is only as exact as float32 arithmetic of
the textbook formula allows (torch's too)."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import host64 as host
from arrays import on_path as arr
from arrays import unexercised
from reference64 import activation64, assert_close, f64

import xopsaot
from xopsaot import _library

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
DTYPES = ["float16", "bfloat16", "float32"]
GPU_USED: set[int] = set()
# op, the reference's name, extra arguments
ELEMENTWISE = {
    "relu": ("relu", {}),
    "gelu": ("gelu", {}),
    "gelu_tanh": ("gelu_tanh", {"approximate": "tanh"}),
    "silu": ("silu", {}),
    "sigmoid": ("sigmoid", {}),
    "tanh": ("tanh", {}),
}
GATED = {
    "silu_and_mul": ("silu", {}),
    "gelu_and_mul": ("gelu", {}),
    "gelu_tanh_and_mul": ("gelu_tanh", {"approximate": "tanh"}),
}


def ran(where):
    if where == "gpu":
        GPU_USED.add(_library.last_variant())


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("case", list(ELEMENTWISE))
def test_activation(request, rng, where, case):
    if where == "gpu":
        request.getfixturevalue("poison")
    name, kw = ELEMENTWISE[case]
    op = getattr(xopsaot, case.removesuffix("_tanh"))
    for dtype in DTYPES:
        for shape in [(1,), (17,), (3, 1000), (2, 3, 2049), (100_003,)]:
            x = arr(rng, shape, dtype, where, scale=3.0)
            out = op(x, **kw)
            ran(where)
            assert type(out) is type(x) and out.shape == x.shape and out.dtype == x.dtype
            assert_close(host(out), activation64(x, name), dtype, f"{case} {dtype} {shape}", floor=1.0)
        wide = arr(rng, (2 * 4097 + 1,), dtype, where, scale=3.0)
        views = {"misaligned": wide[1:4098], "strided": wide[::2], "transposed": wide[:4096].reshape(64, 64).T}
        for what, view in views.items():
            out = op(view, **kw)
            ran(where)
            assert_close(host(out), activation64(view, name), dtype, f"{case} {dtype} {what}", floor=1.0)


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("case", list(GATED))
def test_gated_activation(request, rng, where, case):
    if where == "gpu":
        request.getfixturevalue("poison")
    name, kw = GATED[case]
    op = getattr(xopsaot, case.replace("_tanh", ""))
    for dtype in DTYPES:
        for shape in [(1, 2), (17, 34), (3, 5, 2000), (2, 2048), (4, 2 * 4097), (2, 4096)]:
            x = arr(rng, shape, dtype, where, scale=3.0)
            out = op(x, **kw)
            ran(where)
            d = shape[-1] // 2
            assert out.shape == shape[:-1] + (d,) and out.dtype == x.dtype
            ref = activation64(x[..., :d], name) * f64(x[..., d:])
            assert_close(host(out), ref, dtype, f"{case} {dtype} {shape}", floor=1.0)
        wide = arr(rng, (6, 3000), dtype, where, scale=3.0)
        for what, view in (("row-strided", wide[:, :2000]), ("strided last dim", wide[:, ::3])):
            out = op(view, **kw)
            d = view.shape[-1] // 2
            assert_close(host(out), activation64(view[:, :d], name) * f64(view[:, d:]), dtype, f"{case} {what}", 1.0)


@pytest.mark.parametrize("where", PATHS)
def test_activation_bad_input(rng, where):
    x = arr(rng, (4, 7), "float32", where)
    with pytest.raises(ValueError, match=r"silu_and_mul: x's last dim must be even .*got shape \(4, 7\)"):
        xopsaot.silu_and_mul(x)
    with pytest.raises(ValueError, match="gelu: approximate is 'fast'; supported: 'none', 'tanh'"):
        xopsaot.gelu(x, approximate="fast")
    with pytest.raises(ValueError, match="gelu_and_mul: approximate is 'erf'"):
        xopsaot.gelu_and_mul(x[:, :6], approximate="erf")
    ints = arr(rng, (4, 8), "float32", where)
    ints = ints.astype("int32") if where == "cpu" else ints.to(__import__("torch").int32)
    with pytest.raises(TypeError, match="relu: x.dtype is int32; supported: float16, bfloat16, float32"):
        xopsaot.relu(ints)


@pytest.mark.gpu
def test_gelu_tail_and_special_values(poison):
    """The GPU's gelu (erf form) in float32: within 1e-5 relative to float64 down to x = -5.5, where the textbook
    0.5 x (1 + erf(x / sqrt 2)) loses every digit to cancellation; torch's values at the extremes (gelu(-inf) is NaN
    there too: -inf * 0), but 0 below x = -5.65 where gelu is under 5e-8 in magnitude."""
    torch = pytest.importorskip("torch")
    grid = np.linspace(-5.5, 8.0, 200_001)
    x = torch.tensor(grid, dtype=torch.float32, device="cuda")
    out = host(xopsaot.gelu(x))
    ran("gpu")
    ref = activation64(x, "gelu")
    assert_close(out, ref, "float32", "gelu float32 on [-5.5, 8]")
    relative = np.abs(out - ref) / np.maximum(np.abs(ref), 1e-30)
    assert relative.max() <= 1e-5, f"max relative error {relative.max():.2e} at x = {grid[relative.argmax()]}"
    special = [-float("inf"), -1e30, -100.0, -6.0, -0.0, 0.0, 6.0, 100.0, 1e30, float("inf"), float("nan")]
    x = torch.tensor(special, dtype=torch.float32, device="cuda")
    expected = torch.nn.functional.gelu(x.cpu().double()).float().numpy()
    np.testing.assert_allclose(host(xopsaot.gelu(x)), expected, rtol=1e-6, atol=5e-8)


@pytest.mark.gpu
def test_every_activation_variant_was_checked():
    """After the tests above (file order): each activation variant compiled for this GPU ran."""
    missing = unexercised({"activation_kernel", "gated_activation_kernel"}, GPU_USED)
    assert not missing, f"activation variants never exercised: {missing}"
