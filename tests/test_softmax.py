"""The softmax family (softmax, log_softmax, logsumexp) against float64 references, on the CPU path (NumPy) and on
the GPU (marker gpu, outputs poisoned with NaN): every dtype, any dim, lengths at the kernels' block edges and past
the looping threshold (100k+), Hopper's rows held in shared memory by a program or a cluster of programs (each
config's capacity and one vector past it), keepdim, rows of -inf and empty dims (torch's results), views, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import host64 as host
from arrays import on_path as arr
from arrays import unexercised
from reference64 import assert_close, f64

import xopsaot
from xopsaot import _library

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
DTYPES = ["float16", "bfloat16", "float32"]
GPU_USED: set[int] = set()


def ran(where):
    if where == "gpu":
        GPU_USED.add(_library.last_variant())


def family64(x, dim, kind, keepdim=False):
    x = f64(x)
    top = x.max(axis=dim, keepdims=True)
    lse = top + np.log(np.exp(x - top).sum(axis=dim, keepdims=True))
    if kind == "softmax":
        return np.exp(x - lse)
    if kind == "log_softmax":
        return x - lse
    return lse if keepdim else np.squeeze(lse, axis=dim)


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "logsumexp"])
def test_softmax_family(request, rng, where, kind):
    if where == "gpu":
        request.getfixturevalue("poison")
    op = getattr(xopsaot, kind)
    cases = [((1,), 0), ((3, 17), -1), ((2, 8193), 1), ((4, 100_003), 1), ((6, 5, 7), 1), ((2, 9), 0), ((5, 4096), 1)]
    cases += [((3, 160), 1), ((3, 1008), 1), ((2, 5008), 1), ((2, 8208), 1)]  # aligned rows: each block's variant
    cases += [((2, 20000), 1), ((2, 40000), 1), ((2, 131072), 1)]  # long rows: held whole, steps of 8192 and 16384
    for dtype in DTYPES:
        for shape, dim in cases:
            x = arr(rng, shape, dtype, where, scale=3.0)
            for keepdim in (False, True) if kind == "logsumexp" else (False,):
                out = op(x, dim, keepdim=keepdim) if kind == "logsumexp" else op(x, dim=dim)
                ran(where)
                ref = family64(x, dim % len(shape), kind, keepdim)
                assert out.shape == ref.shape and out.dtype == x.dtype, (kind, shape, dim, keepdim)
                # log-domain results near 0 are compared in absolute terms (floor 1)
                assert_close(host(out), ref, dtype, f"{kind} {dtype} {shape} dim={dim} keepdim={keepdim}", floor=1.0)
        wide = arr(rng, (4, 600), dtype, where, scale=3.0)
        for what, view in (("row-strided", wide[:, :300]), ("strided", wide[:, ::2]), ("transposed", wide.T)):
            out = op(view, -1) if kind == "logsumexp" else op(view, dim=-1)
            assert_close(host(out), family64(view, view.ndim - 1, kind), dtype, f"{kind} {what}", floor=1.0)


# Hopper's softmax_held_kernel and softmax_cluster_kernel: each config's capacity and one 16-byte vector past it, over
# the rows per multiprocessor each needs. 16-bit rows of 16384 are the 32 KB config's; 114704-131072 (past 224 KB)
# take the held kernel's tail in registers from 16 rows per multiprocessor, clusters of 4 from 4 rows; 196608-262144
# clusters of 8 from one row (shares of 48 KB or more); 131088 and 262160 loop. Float32 rows of 57360-65536, and
# 98320-131072, alike.
SIXTEEN_BIT = (
    (8208, 4), (16384, 4), (16400, 4), (32784, 4), (57360, 4), (114704, 16), (131072, 16), (114704, 4), (131072, 8),
    (131088, 1), (196624, 1), (262144, 1), (262160, 1),
)  # fmt: skip
FLOAT32 = (
    (8208, 4), (16400, 4), (28688, 4), (57360, 16), (65536, 16), (57360, 4), (65536, 4), (65552, 1), (98320, 1),
    (131072, 1), (131088, 1),
)  # fmt: skip
HELD_LENGTHS = {"float16": SIXTEEN_BIT, "bfloat16": SIXTEEN_BIT, "float32": FLOAT32}


@pytest.mark.gpu
def test_held_rows(rng, poison):
    """Rows of 8193-262144 16-bit elements (131072 float32) take Hopper's softmax_held_kernel (a program per row) or
    softmax_cluster_kernel (a cluster of programs per row) where their configs send them, softmax_kernel
    elsewhere: every length above, rows a stride apart, a row of -inf (NaN out) and one whose first half is -inf (its
    max comes late, in another program of a cluster). Every output is checked written (poisoned with NaN); 24 rows,
    the -inf ones among them, against float64."""
    torch = pytest.importorskip("torch")
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    for dtype, lengths in HELD_LENGTHS.items():
        for n, per_sm in lengths:
            n_rows = per_sm * sm_count
            others = torch.ones(n_rows, dtype=torch.bool)
            others[5] = False
            x = arr(rng, (n_rows, n + 64), dtype, "gpu", scale=3.0)[:, :n]  # rows 64 elements apart, still aligned
            x[5] = -float("inf")
            x[7, : n // 2] = -float("inf")
            rows = sorted({0, 7, n_rows - 1, *rng.choice(range(8, n_rows), 21, replace=False).tolist()})
            for kind in ("softmax", "log_softmax"):
                out = getattr(xopsaot, kind)(x, -1)
                ran("gpu")
                assert not torch.isnan(out[others]).any().item(), (kind, dtype, n)
                assert torch.isnan(out[5]).all().item(), (kind, dtype, n)
                got, ref = host(out[rows]), family64(x[rows], 1, kind)
                finite = np.isfinite(ref)  # log_softmax is -inf where x is
                assert (np.isneginf(got) == ~finite).all(), (kind, dtype, n)
                assert_close(got[finite], ref[finite], dtype, f"{kind} {dtype} {n_rows} x {n}", floor=1.0)
            del x, out


@pytest.mark.parametrize("where", PATHS)
def test_softmax_family_edges(rng, where):
    """Rows of -inf and empty dims give torch's results: NaN softmax and log_softmax, logsumexp -inf; -inf elements
    elsewhere count as zero weight, on rows held whole and looping."""
    x = arr(rng, (3, 40), "float32", where)
    x[1] = -float("inf")
    lse = host(xopsaot.logsumexp(x, 1))
    assert np.isneginf(lse[1]) and np.isfinite(lse[[0, 2]]).all()
    assert np.isnan(host(xopsaot.softmax(x))[1]).all() and np.isnan(host(xopsaot.log_softmax(x))[1]).all()
    # looping rows (steps of 8192): a row of -inf, and one whose first 20000 elements are -inf (its max comes late)
    for dtype in DTYPES:
        x = arr(rng, (3, 40000), dtype, where, scale=3.0)
        x[1] = -float("inf")
        x[2, :20000] = -float("inf")
        for kind in ("softmax", "log_softmax", "logsumexp"):
            got = host(getattr(xopsaot, kind)(x, -1))
            out, ref = got[[0, 2]], family64(x, 1, kind)[[0, 2]]
            finite = np.isfinite(ref)  # log_softmax is -inf where x is
            assert (np.isneginf(out) == ~finite).all(), kind
            assert_close(out[finite], ref[finite], dtype, f"{kind} {dtype} long rows with -inf", floor=1.0)
            assert np.isneginf(got[1]).all() if kind == "logsumexp" else np.isnan(got[1]).all(), kind
    for n_rows, n in ((0, 5), (3, 0)):
        empty = arr(rng, (n_rows, n), "float32", where)
        out = host(xopsaot.logsumexp(empty, 1))
        assert out.shape == (n_rows,) and np.isneginf(out).all()
        assert host(xopsaot.softmax(empty)).shape == (n_rows, n)


@pytest.mark.parametrize("where", PATHS)
def test_softmax_family_bad_input(rng, where):
    x = arr(rng, (3, 4), "float32", where)
    with pytest.raises(ValueError, match=r"logsumexp: dim 2 is out of range for 2 dims \(expected -2 to 1\)"):
        xopsaot.logsumexp(x, 2)
    with pytest.raises(TypeError, match="log_softmax: dim must be an int, got 1.5"):
        xopsaot.log_softmax(x, 1.5)
    with pytest.raises(TypeError, match="logsumexp: keepdim must be a bool, got 'yes'"):
        xopsaot.logsumexp(x, 1, keepdim="yes")


@pytest.mark.gpu
def test_every_softmax_variant_was_checked():
    """After the tests above (file order): each softmax_kernel, softmax_held_kernel and softmax_cluster_kernel variant
    compiled for this GPU ran."""
    missing = unexercised({"softmax_kernel", "softmax_held_kernel", "softmax_cluster_kernel"}, GPU_USED)
    assert not missing, f"softmax variants never exercised: {missing}"
