"""cross_entropy and linear_cross_entropy against a float64 reference written here (log-softmax taken directly), on
the CPU path and on the GPU (outputs poisoned): every dtype and reduction, label smoothing, ignored rows, int32 and
int64 targets, 1 and 17 classes, tile edges, 100k+ classes, torch's (N, C, d...) layout, a 256k vocabulary computed
in chunks, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import host64 as host
from arrays import on_path as arr
from arrays import torch_or_skip, unexercised
from reference64 import assert_close, f64

import xopsaot
from xopsaot import _library

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
FLOATS = ["float16", "bfloat16", "float32"]
REDUCTIONS = ["none", "mean", "sum"]
GPU_USED: set[int] = set()
# (rows, classes): one class, 17, 1024 and 1025, the block (4096) and past it, 100k+ classes
SHAPES = [(1, 1), (17, 17), (5, 1024), (3, 1025), (3, 4096), (4, 4097), (2, 100_003)]


def ran(where):
    if where == "gpu":  # every kernel the last call launched (a reduction, the LM head's chunks)
        GPU_USED.update(_library.recent_variants())


def targets(rng, rows, classes, where, dtype="int64", ignore_index=-100, ignored=0.2):
    t = rng.integers(0, classes, size=rows)
    t[rng.random(rows) < ignored] = ignore_index
    t = t.astype(dtype)
    return t if where == "cpu" else torch_or_skip().from_numpy(t).cuda()


def cross_entropy64(x, t, ignore_index=-100, reduction="mean", smoothing=0.0):
    """x (rows, classes), t (rows,)."""
    x, t = f64(x), np.asarray(host(t)).astype(np.int64)
    logp = x - x.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    valid = t != ignore_index
    nll = -logp[np.arange(len(t)), np.where(valid, t, 0)]
    smooth = smoothing * logp.mean(axis=1) if smoothing else 0.0  # 0 * -inf is NaN: skip the term at 0
    loss = np.where(valid, (1 - smoothing) * nll - smooth, 0.0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / valid.sum() if valid.any() else np.nan


@pytest.mark.parametrize("where", PATHS)
def test_cross_entropy(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS:
        for rows, classes in SHAPES:
            x = arr(rng, (rows, classes), dtype, where, scale=3.0)
            for target_dtype in ("int64", "int32"):
                t = targets(rng, rows, classes, where, target_dtype)
                for reduction in REDUCTIONS:
                    for smoothing in (0.0, 0.1):
                        out = xopsaot.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing)
                        ran(where)
                        assert str(out.dtype).replace("torch.", "") == dtype
                        expected = cross_entropy64(x, t, reduction=reduction, smoothing=smoothing)
                        what = f"{dtype} {(rows, classes)} {target_dtype} {reduction} {smoothing}"
                        if not np.isfinite(expected).all():  # every row ignored: the mean is NaN, as in torch
                            assert np.isnan(host(out)).all(), what
                            continue
                        assert_close(host(out), expected, dtype, what, floor=1.0)


@pytest.mark.parametrize("where", PATHS)
def test_cross_entropy_forms(request, rng, where):
    """One sample (classes,), torch's (N, C, d...) layout, strided rows, a custom ignore_index, full
    smoothing, every row ignored, logits of -inf outside a row's allowed classes."""
    if where == "gpu":
        request.getfixturevalue("poison")
    x = arr(rng, (7,), "float32", where)
    t = np.array(3) if where == "cpu" else torch_or_skip().tensor(3).cuda()
    out = xopsaot.cross_entropy(x, t)
    assert out.shape == ()
    assert_close(host(out), cross_entropy64(f64(x)[None], np.array([3])), "float32", "one sample")

    x = arr(rng, (2, 11, 3, 4), "bfloat16", where)
    t = targets(rng, 2 * 3 * 4, 11, where).reshape(2, 3, 4)
    out = xopsaot.cross_entropy(x, t, reduction="none")
    assert out.shape == (2, 3, 4)
    rows = np.moveaxis(f64(x), 1, -1).reshape(-1, 11)
    expected = cross_entropy64(rows, host(t).reshape(-1), reduction="none").reshape(2, 3, 4)
    assert_close(host(out), expected, "bfloat16", "(N, C, d...)", floor=1.0)

    x = arr(rng, (18, 300), "float16", where)[::2]  # rows read with a stride of 600
    t = targets(rng, 9, 300, where, ignore_index=5, ignored=0.3)
    out = xopsaot.cross_entropy(x, t, ignore_index=5, label_smoothing=1.0)
    assert_close(host(out), cross_entropy64(x, t, 5, "mean", 1.0), "float16", "ignore 5, smoothing 1", floor=1.0)

    t = targets(rng, 9, 300, where, ignored=1.0)
    assert np.isnan(host(xopsaot.cross_entropy(x, t)))
    assert host(xopsaot.cross_entropy(x, t, reduction="sum")) == 0

    masked = np.where(rng.random((6, 50)) < 0.5, -np.inf, rng.standard_normal((6, 50))).astype(np.float32)
    masked[:, 0] = 1.0  # the target's class stays allowed
    xm = masked if where == "cpu" else torch_or_skip().from_numpy(masked).cuda()
    tm = np.zeros(6, np.int64) if where == "cpu" else torch_or_skip().zeros(6, dtype=torch_or_skip().int64).cuda()
    out = xopsaot.cross_entropy(xm, tm, reduction="none")
    finite = np.where(np.isinf(masked), -1e300, masked.astype(np.float64))  # exp underflows to 0 here
    assert_close(host(out), cross_entropy64(finite, np.zeros(6, np.int64), reduction="none"), "float32", "-inf")


@pytest.mark.parametrize("where", PATHS)
def test_linear_cross_entropy(request, rng, where):
    """Against cross entropy of the float64 logits; small chunks force several chunks and a ragged last one."""
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS:
        x = arr(rng, (3, 7, 64), dtype, where)
        w = arr(rng, (1000, 64), dtype, where, scale=0.3)
        b = arr(rng, (1000,), dtype, where)
        t = targets(rng, 21, 1000, where).reshape(3, 7)
        for bias in (None, b):
            for reduction in REDUCTIONS:
                for chunk_rows in (0, 1, 8):
                    out = xopsaot.linear_cross_entropy(
                        x, w, t, bias, reduction=reduction, label_smoothing=0.05, chunk_rows=chunk_rows
                    )
                    ran(where)
                    logits = f64(x).reshape(21, 64) @ f64(w).T + (0 if bias is None else f64(bias))
                    expected = cross_entropy64(logits, host(t).reshape(-1), -100, reduction, 0.05)
                    if reduction == "none":
                        expected = expected.reshape(3, 7)
                    what = f"linear_cross_entropy {dtype} {reduction} bias={bias is not None} chunk={chunk_rows}"
                    assert_close(host(out), expected, dtype, what, floor=1.0)


@pytest.mark.gpu
def test_linear_cross_entropy_large_vocabulary(request, rng):
    """A 256k vocabulary in chunks of the default size, against the same loss through the full logits."""
    request.getfixturevalue("poison")
    torch = torch_or_skip()
    x = arr(rng, (600, 256), "bfloat16", "gpu")
    w = arr(rng, (256_000, 256), "bfloat16", "gpu", scale=0.1)
    t = targets(rng, 600, 256_000, "gpu")
    out = xopsaot.linear_cross_entropy(x, w, t, reduction="sum")
    logits = (x.float() @ w.float().T).to(torch.bfloat16)  # rounded as the chunks are
    expected = cross_entropy64(logits, t, reduction="sum")
    assert_close(host(out), expected, "bfloat16", "256k vocabulary", floor=1.0)  # logits rounded in another order


@pytest.mark.parametrize("where", PATHS)
def test_loss_bad_input(rng, where):
    x = arr(rng, (4, 10), "float32", where)
    t = targets(rng, 4, 10, where, ignored=0)
    with pytest.raises(
        TypeError,
        match=r"cross_entropy: target.dtype is float32; supported: int64, int32 \(class "
        r"indices\) \(class-probability targets are not supported\)",
    ):
        xopsaot.cross_entropy(x, x)
    with pytest.raises(ValueError, match=r"cross_entropy: target must have shape \(4,\), got \(3,\)"):
        xopsaot.cross_entropy(x, targets(rng, 3, 10, where))
    with pytest.raises(ValueError, match=r"cross_entropy: reduction is 'avg'; supported: 'none', 'mean', 'sum'"):
        xopsaot.cross_entropy(x, t, reduction="avg")
    with pytest.raises(ValueError, match=r"cross_entropy: label_smoothing is 1.5; it must be in \[0, 1\]"):
        xopsaot.cross_entropy(x, t, label_smoothing=1.5)
    bad = np.array([1, 10, 2, 3]) if where == "cpu" else torch_or_skip().tensor([1, 10, 2, 3]).cuda()
    with pytest.raises(ValueError, match=r"cross_entropy: target holds 10, outside \[0, 10\) and not ignore_index"):
        xopsaot.cross_entropy(x, bad)
    if where == "gpu":  # unchecked, a target out of range gives NaN and reads nothing outside the row
        out = xopsaot.cross_entropy(x, bad, reduction="none", validate=False)
        assert np.isnan(host(out)[1]) and np.isfinite(host(out)[[0, 2, 3]]).all()
    w = arr(rng, (10, 6), "float32", where)
    with pytest.raises(ValueError, match=r"linear_cross_entropy: weight has shape \(10, 6\) but the input has 10"):
        xopsaot.linear_cross_entropy(x, w, t)
    with pytest.raises(ValueError, match=r"linear_cross_entropy: chunk_rows must be >= 0, got -1"):
        xopsaot.linear_cross_entropy(x, arr(rng, (10, 10), "float32", where), t, chunk_rows=-1)
    with pytest.raises(TypeError, match=r"linear_cross_entropy: weight.dtype is float16 but x.dtype is float32"):
        xopsaot.linear_cross_entropy(x, arr(rng, (10, 10), "float16", where), t)
    with pytest.raises(ValueError, match=r"linear_cross_entropy: bias must have shape \(10,\), got \(9,\)"):
        xopsaot.linear_cross_entropy(x, arr(rng, (10, 10), "float32", where), t, bias=arr(rng, (9,), "float32", where))
    with pytest.raises(ValueError, match=r"linear_cross_entropy: weight has 0 rows \(an empty vocabulary\)"):
        xopsaot.linear_cross_entropy(x, arr(rng, (0, 10), "float32", where), t)


@pytest.mark.gpu
def test_every_loss_variant_was_checked():
    missing = unexercised({"cross_entropy_kernel", "loss_reduce_kernel"}, GPU_USED)
    assert not missing, f"cross entropy variants never exercised: {missing}"
