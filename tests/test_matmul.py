"""The matmul family (mm, bmm, addmm, linear, gate_linear) against float64 references written here, on the CPU path
and on the GPU (outputs poisoned): every dtype, sizes of 1, 17 and tile edges, both layouts of the second operand,
broadcast addmm inputs, every activation, bias and residual, leading dims and non-contiguous views, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from arrays import host64 as host
from arrays import on_path as arr
from arrays import torch_or_skip, unexercised
from reference64 import activation64, assert_close, f64

import xopsaot
from xopsaot import _library

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
FLOATS = ["float16", "bfloat16", "float32"]
ACTS = ["relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"]
GPU_USED: set[int] = set()
# (M, K, N): ones, 17, tile edges +-1, a K tail, N that misses the 16-element alignment
SHAPES = [(1, 1, 1), (17, 33, 17), (16, 64, 128), (128, 64, 256), (129, 65, 255), (1, 300, 64), (64, 8, 40)]
# decode batches (the narrow tiles: 16 rows by 256-deep K steps, 64 by 128; aligned sizes): whole K steps with
# and without a tail, a column tail, the tiles' row edges
SHAPES += [(5, 512, 64), (16, 592, 80), (64, 272, 48), (33, 256, 32)]
# 65 to 256 rows (64 x 64 tiles up to 8192 columns), and past 256 rows the 128-row tile's aligned variant
SHAPES += [(65, 128, 96), (300, 64, 48)]
# one row against a transposed weight (gemv_kernel, 8 rows of 512-deep steps, 256 in float32): whole steps, a K
# tail and a row edge, the hinted variant (rows of a multiple of 16); (1, 300, 64) above takes the unhinted one
SHAPES += [(1, 1024, 16), (1, 1040, 37)]
# up to 16 and 32 rows against a transposed weight of more than 32 rows per SM (16 x 64 and 32 x 64 tiles of
# 128-deep steps): 8208 rows are past that on GPUs of up to 256 SMs
SHAPES += [(16, 272, 8208), (17, 128, 8208)]
# 17 to 32 rows on other weights (32 x 32 tiles of 256-deep steps): whole steps and a K tail
SHAPES += [(24, 528, 48)]
# on Hopper, past those tiles (more than 256 rows, or 65 or more against more than 8192 columns) matmul_ws: tiles of
# 64-deep steps read by TMA (zeros past every edge), 128 x 128 where 128 x 256 ones would not fill the GPU: the last
# row tile of 1 row, a K tail of 8, a column tail of 8; one partly filled row tile of 8200 columns; then more tiles
# than multiprocessors (H100: 162 of 128 x 128, 165 of 128 x 256), so that programs take several tiles and the
# ring's phases carry across them
SHAPES += [(257, 136, 520), (72, 64, 8200), (2200, 72, 1032), (4100, 72, 1032)]
# 65 to 256 rows against at most 8192 columns where the tiles would not fill the GPU and K has 96 or more steps: K in
# slices of 48 or more steps whose float32 sums matmul_reduce_kernel adds up and finishes (H100: slices of 49 and 48
# steps, K's tail in the last; 57, 57, 57 and 54 over two row tiles; 51, 51 and 50 for one partial row tile)
SHAPES += [(128, 6208, 512), (200, 14400, 520), (65, 9728, 64)]


def ran(where):
    if where == "gpu":  # every kernel the last call launched (a reduction, the LM head's chunks)
        GPU_USED.update(_library.recent_variants())


def transposed(rng, shape, dtype, where):
    """An array of `shape` that is contiguous along its first dim (a transposed view)."""
    x = arr(rng, shape[::-1], dtype, where)
    return x.T


def linear64(x, w, bias=None, act=None, residual=None, gate=None, gate_act=None):
    a = f64(x)
    if gate is not None:
        a = (a if gate_act is None else activation64(a, gate_act)) * f64(gate)
    y = a @ f64(w).T
    y = y + (0 if bias is None else f64(bias))
    y = y if act is None else activation64(y, act)
    return y + (0 if residual is None else f64(residual))


@pytest.mark.parametrize("where", PATHS)
def test_mm_and_bmm(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS:
        for m, k, n in SHAPES:
            a = arr(rng, (m, k), dtype, where)
            for b in (arr(rng, (k, n), dtype, where), transposed(rng, (k, n), dtype, where)):
                out = xopsaot.mm(a, b)
                ran(where)
                assert_close(host(out), f64(a) @ f64(b), dtype, f"mm {dtype} {(m, k, n)}")
        a, b = arr(rng, (3, 17, 40), dtype, where), arr(rng, (3, 40, 24), dtype, where)
        assert_close(host(xopsaot.bmm(a, b)), np.matmul(f64(a), f64(b)), dtype, f"bmm {dtype}")
        ran(where)
        # batches past 256 rows: matmul_kernel's 128-row tile (matmul_ws takes 2-D products only), either layout
        a = arr(rng, (2, 300, 64), dtype, where)
        for b in (arr(rng, (2, 64, 48), dtype, where), arr(rng, (2, 48, 64), dtype, where).swapaxes(1, 2)):
            assert_close(host(xopsaot.bmm(a, b)), np.matmul(f64(a), f64(b)), dtype, f"bmm {dtype} 300 rows")
            ran(where)


@pytest.mark.parametrize("where", PATHS)
def test_addmm(request, rng, where):
    """input as a full matrix, a bias row, a column and one element; alpha and beta; either layout of mat2."""
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS:
        for m, k, n in SHAPES:
            a = arr(rng, (m, k), dtype, where)
            for b in (arr(rng, (k, n), dtype, where), transposed(rng, (k, n), dtype, where)):
                for input_shape in ((m, n), (n,), (m, 1), (1, n), ()):
                    c = arr(rng, input_shape, dtype, where)
                    out = xopsaot.addmm(c, a, b, beta=0.5, alpha=-2.0)
                    ran(where)
                    scaled, product = 0.5 * f64(c), 2.0 * (f64(a) @ f64(b))
                    terms = max(np.abs(scaled).max(), np.abs(product).max())  # the sum may cancel: judge by these
                    what = f"addmm {dtype} {(m, k, n)} input {input_shape}"
                    assert_close(host(out), scaled - product, dtype, what, floor=terms)
    # beta 0 ignores input: its NaN does not propagate
    a, b = arr(rng, (5, 7), "float32", where), arr(rng, (7, 3), "float32", where)
    nan = np.full((5, 3), np.nan, np.float32)
    c = nan if where == "cpu" else torch_or_skip().from_numpy(nan).cuda()
    assert_close(host(xopsaot.addmm(c, a, b, beta=0)), f64(a) @ f64(b), "float32", "beta 0")


@pytest.mark.parametrize("where", PATHS)
def test_linear(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS:
        for m, k, n in SHAPES:
            x = arr(rng, (m, k), dtype, where)
            w = arr(rng, (n, k), dtype, where, scale=1 / math.sqrt(k))
            bias, res = arr(rng, (n,), dtype, where), arr(rng, (m, n), dtype, where)
            assert_close(host(xopsaot.linear(x, w)), linear64(x, w), dtype, f"linear {dtype} {(m, k, n)}")
            ran(where)
            for act in [None] + ACTS:
                out = xopsaot.linear(x, w, bias, activation=act, residual=res)
                ran(where)
                terms = max(np.abs(linear64(x, w, bias, act)).max(), np.abs(f64(res)).max())  # the sum may cancel
                what = f"linear {dtype} {(m, k, n)} {act}"
                assert_close(host(out), linear64(x, w, bias, act, res), dtype, what, floor=terms)
    # leading dims, a strided x (every other row), a weight given transposed, no bias but a residual
    x = arr(rng, (2, 6, 3, 64), "bfloat16", where)[:, ::2]
    w = arr(rng, (64, 48), "bfloat16", where).T
    res = arr(rng, (2, 3, 3, 48), "bfloat16", where)
    out = xopsaot.linear(x, w, residual=res)
    assert out.shape == (2, 3, 3, 48)
    assert_close(host(out), linear64(x, w, residual=res), "bfloat16", "strided linear")


@pytest.mark.parametrize("where", PATHS)
def test_gate_linear(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS:
        for m, k, n in SHAPES:
            x1, x2 = arr(rng, (m, k), dtype, where), arr(rng, (m, k), dtype, where)
            w = arr(rng, (n, k), dtype, where, scale=1 / math.sqrt(k))
            bias, res = arr(rng, (n,), dtype, where), arr(rng, (m, n), dtype, where)
            for act in [None] + ACTS:
                out = xopsaot.gate_linear(x1, x2, w, bias, res, act=act)
                ran(where)
                expected = linear64(x1, w, bias, residual=res, gate=x2, gate_act=act)
                terms = max(np.abs(expected - f64(res)).max(), np.abs(f64(res)).max())  # the sum may cancel
                assert_close(host(out), expected, dtype, f"gate_linear {dtype} {(m, k, n)} {act}", floor=terms)
        out = xopsaot.gate_linear(x1, x2, w)  # act silu by default, no bias or residual
        assert_close(host(out), linear64(x1, w, gate=x2, gate_act="silu"), dtype, "gate_linear default")
    # x1 and x2 with different strides, leading dims
    x1 = arr(rng, (3, 5, 32), "float16", where)
    x2 = arr(rng, (5, 3, 32), "float16", where)
    x2 = x2.transpose(0, 1) if hasattr(x2, "detach") else np.swapaxes(x2, 0, 1)
    w = arr(rng, (16, 32), "float16", where, scale=0.2)
    out = xopsaot.gate_linear(x1, x2, w, act="sigmoid")
    assert_close(host(out), linear64(x1, w, gate=x2, gate_act="sigmoid"), "float16", "strided gate_linear")


@pytest.mark.parametrize("where", PATHS)
def test_matmul_family_bad_input(rng, where):
    a, b = arr(rng, (4, 8), "float32", where), arr(rng, (8, 5), "float32", where)
    with pytest.raises(ValueError, match=r"mm: input must have 2 dims"):
        xopsaot.mm(arr(rng, (2, 4, 8), "float32", where), b)
    with pytest.raises(ValueError, match=r"mm: input's last dim \(8\) must equal mat2's second-to-last dim \(4\)"):
        xopsaot.mm(a, a)
    with pytest.raises(ValueError, match=r"bmm: input has 2 batch entries but mat2 has 3"):
        xopsaot.bmm(arr(rng, (2, 4, 8), "float32", where), arr(rng, (3, 8, 5), "float32", where))
    with pytest.raises(TypeError, match=r"mm: mat2.dtype is float16 but input.dtype is float32"):
        xopsaot.mm(a, arr(rng, (8, 5), "float16", where))
    with pytest.raises(ValueError, match=r"addmm: input of shape \(3,\) does not broadcast"):
        xopsaot.addmm(arr(rng, (3,), "float32", where), a, b)
    with pytest.raises(TypeError, match=r"addmm: input must be an array, got None"):
        xopsaot.addmm(None, a, b)
    with pytest.raises(TypeError, match=r"addmm: beta must be a finite float"):
        xopsaot.addmm(arr(rng, (5,), "float32", where), a, b, beta=float("nan"))
    w = arr(rng, (5, 8), "float32", where)
    with pytest.raises(ValueError, match=r"linear: weight has shape \(5, 7\) but the input has 8 features"):
        xopsaot.linear(a, arr(rng, (5, 7), "float32", where))
    with pytest.raises(ValueError, match=r"linear: activation is 'swish'; supported: None, 'relu'"):
        xopsaot.linear(a, w, activation="swish")
    with pytest.raises(ValueError, match=r"linear: bias must have shape \(5,\), got \(4,\)"):
        xopsaot.linear(a, w, arr(rng, (4,), "float32", where))
    with pytest.raises(ValueError, match=r"linear: residual must have the output's shape \(4, 5\), got \(5, 4\)"):
        xopsaot.linear(a, w, residual=arr(rng, (5, 4), "float32", where))
    with pytest.raises(ValueError, match=r"gate_linear: x2 has shape \(4, 7\) but x1 has shape \(4, 8\)"):
        xopsaot.gate_linear(a, arr(rng, (4, 7), "float32", where), w)
    with pytest.raises(ValueError, match=r"gate_linear: act is 'elu'"):
        xopsaot.gate_linear(a, a, w, act="elu")
    with pytest.raises(TypeError, match=r"linear: x.dtype is int32"):
        xopsaot.linear(np.ones((4, 8), np.int32) if where == "cpu" else torch_or_skip().ones(4, 8).int().cuda(), w)


@pytest.mark.gpu
def test_every_matmul_variant_was_checked():
    missing = unexercised({"matmul_kernel", "gemv_kernel", "matmul_ws", "matmul_reduce_kernel"}, GPU_USED)
    assert not missing, f"matmul variants never exercised: {missing}"
