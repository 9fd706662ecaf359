"""cumsum and logcumsumexp against float64 / int64 references written here, on the CPU path and on the GPU (outputs
poisoned): every dtype, scan dims first, middle and last, lengths past the block, reverse, varlen restarts with an
empty sequence and a padding tail, -inf runs, non-contiguous input and bad input."""

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
GPU_USED: set[int] = set()
# shape, dim: last, middle (small and wide inner), first, a long row past several blocks (and chunks)
CASES = [((1,), 0), ((17,), -1), ((3, 1000), -1), ((3, 1000), 0), ((5, 7, 3), 1), ((2, 70, 96), 1), ((100_003,), 0)]
CASES += [((2, 2048), -1), ((2, 2049), -1), ((32, 5), 0)]  # the row block and one past it; a narrow column
CASES += [((264, 16, 8), 1)]  # lanes hinted (n and the lanes' pitch aligned), programs enough not to chunk
# few programs along a long dim: chunks (csrc/ops/scan.c), with the scan dim a multiple of 16 (hinted) or not
CASES += [((3000, 96), 0), ((4096, 80), 0), ((65536,), 0)]
CASES += [((700, 1100), 0)]  # lanes past one block of 512 (masked), in chunks with a short last one


def ran(where):
    if where == "gpu":  # every kernel the last call launched (a chunked scan's two)
        GPU_USED.update(_library.recent_variants())


def ints(rng, shape, dtype, where):
    data = rng.integers(-100, 100, size=shape) if dtype != "bool" else rng.random(shape) < 0.5
    data = np.asarray(data).astype(dtype)
    if where == "cpu":
        return data
    torch = torch_or_skip()
    return torch.from_numpy(data.copy()).cuda()


def cumsum64(x: np.ndarray, dim: int, reverse: bool = False) -> np.ndarray:
    out = np.flip(np.cumsum(np.flip(x, dim), axis=dim), dim) if reverse else np.cumsum(x, axis=dim)
    return out


def logcumsumexp64(x: np.ndarray, dim: int) -> np.ndarray:
    """log(cumsum(exp(x - m))) + m with m the line's max: another formulation than a running logaddexp."""
    m = np.max(x, axis=dim, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.cumsum(np.exp(x - m), axis=dim)) + m


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_floats(request, rng, where, reverse):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS:
        for shape, dim in CASES:
            x = arr(rng, shape, dtype, where)
            out = xopsaot.cumsum(x, dim, reverse=reverse)
            ran(where)
            assert str(out.dtype).replace("torch.", "") == dtype
            assert_close(host(out), cumsum64(f64(x), dim, reverse), dtype, f"cumsum {dtype} {shape} {dim}")
        x = arr(rng, (40, 24), dtype, where)
        assert_close(host(xopsaot.cumsum(x.T, 1, reverse=reverse)), cumsum64(f64(x).T, 1, reverse), dtype, "x.T")


@pytest.mark.parametrize("where", PATHS)
def test_cumsum_integers_give_int64(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in ("int32", "int64", "bool"):
        for shape, dim in CASES:
            x = ints(rng, shape, dtype, where)
            for reverse in (False, True):
                out = xopsaot.cumsum(x, dim, reverse=reverse)
                ran(where)
                assert str(out.dtype).replace("torch.", "") == "int64"
                expected = cumsum64(np.asarray(host(x)).astype(np.int64), dim, reverse)
                assert np.array_equal(host(out).astype(np.int64), expected), f"{dtype} {shape} {dim} {reverse}"


@pytest.mark.parametrize("where", PATHS)
def test_cumsum_varlen(request, rng, where):
    """Restarts at each sequence (one empty); the tokens after the last sequence are summed on their own."""
    if where == "gpu":
        request.getfixturevalue("poison")
    for bounds, total in (([0, 0, 17, 100, 250], 300), ([0, 0, 17, 1500, 2600], 2700)):  # the second in chunks
        cu_host = np.array(bounds, dtype=np.int32)
        cu = cu_host if where == "cpu" else torch_or_skip().from_numpy(cu_host).cuda()
        for dtype in ("float32", "bfloat16", "int32"):
            shape = (total, 4, 8)
            x = arr(rng, shape, dtype, where) if dtype != "int32" else ints(rng, shape, dtype, where)
            for reverse in (False, True):
                out = xopsaot.cumsum(x, 0, reverse=reverse, cu_seqlens=cu)
                ran(where)
                x64 = f64(x)
                starts = bounds[1:]
                expected = np.concatenate(
                    [cumsum64(x64[a:b], 0, reverse) for a, b in zip(starts, starts[1:] + [total])]
                )
                if dtype == "int32":
                    assert np.array_equal(host(out), expected)
                else:
                    assert_close(host(out), expected, dtype, f"varlen {dtype} {bounds} {reverse}")


@pytest.mark.parametrize("where", PATHS)
def test_logcumsumexp(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in FLOATS:
        for shape, dim in CASES:
            x = arr(rng, shape, dtype, where, scale=4.0)
            out = xopsaot.logcumsumexp(x, dim)
            ran(where)
            assert_close(host(out), logcumsumexp64(f64(x), dim), dtype, f"logcumsumexp {dtype} {shape}", floor=1.0)
    for lanes in (False, True):  # each line a row (the last dim), then a column (lanes after the scan dim, chunked)

        def lines(x, lanes=lanes):
            """logcumsumexp along each row of x, computed as rows or as the columns of a contiguous x.T."""
            xx = np.ascontiguousarray(x.T) if lanes else x
            xx = xx if where == "cpu" else torch_or_skip().from_numpy(xx).cuda()
            got = host(xopsaot.logcumsumexp(xx, 0 if lanes else 1))
            ran(where)
            return got.T if lanes else got

        # a leading run of -inf stays -inf, then the line continues from the first finite value
        x = np.full((2, 600), -np.inf, dtype=np.float32)
        x[:, 300:] = rng.standard_normal((2, 300))
        got = lines(x)
        assert np.all(got[:, :300] == -np.inf)
        want = logcumsumexp64(x[:, 300:].astype(np.float64), 1)
        assert_close(got[:, 300:], want, "float32", f"-inf run, lanes {lanes}", floor=1.0)
        # values far below a later maximum (a shift by the block's max would flush them to 0), across a block edge
        x = rng.standard_normal((2, 3000)).astype(np.float32)
        x[:, :2500] -= 1000.0
        x[:, 2040:2060] += 2000.0
        want = np.logaddexp.accumulate(x.astype(np.float64), axis=1)
        assert_close(lines(x), want, "float32", f"wide range, lanes {lanes}", floor=1.0)
        # a NaN, then +inf, as torch: NaN from the NaN on; +inf from the +inf on (a second one, and the blocks after
        # it, too); finite before either
        x = rng.standard_normal((3, 5000)).astype(np.float32)
        x[0, 1000] = np.nan
        x[1, [2500, 2600]] = np.inf
        x[2, 100] = np.inf
        x[2, 200] = np.nan
        got = lines(x)
        assert np.isnan(got[0, 1000:]).all() and np.isposinf(got[1, 2500:]).all()
        assert np.isposinf(got[2, 100:200]).all() and np.isnan(got[2, 200:]).all()
        want = np.logaddexp.accumulate(x.astype(np.float64), axis=1)
        assert_close(got[0, :1000], want[0, :1000], "float32", f"before a NaN, lanes {lanes}", floor=1.0)
        assert_close(got[1, :2500], want[1, :2500], "float32", f"before +inf, lanes {lanes}", floor=1.0)
    # the same across chunks of a 1-D line (chunks of 4288: the spike inside the fifth, the shift ending in the sixth)
    x = rng.standard_normal(30000).astype(np.float32)
    x[:25000] -= 1000.0
    x[20400:20600] += 2000.0
    xx = x if where == "cpu" else torch_or_skip().from_numpy(x).cuda()
    got = host(xopsaot.logcumsumexp(xx, 0))
    ran(where)
    assert_close(got, np.logaddexp.accumulate(x.astype(np.float64)), "float32", "wide range, chunks", floor=1.0)


@pytest.mark.parametrize("where", PATHS)
def test_scan_bad_input(rng, where):
    x = arr(rng, (4, 8), "float32", where)
    with pytest.raises(ValueError, match=r"cumsum: dim 2 is out of range for 2 dims"):
        xopsaot.cumsum(x, 2)
    with pytest.raises(TypeError, match="logcumsumexp: input.dtype is int32; supported: float16, bfloat16, float32"):
        xopsaot.logcumsumexp(ints(rng, (4, 8), "int32", where), 0)

    def index(values, dtype="int32"):
        host_values = np.array(values, dtype=dtype)
        return host_values if where == "cpu" else torch_or_skip().from_numpy(host_values).cuda()

    with pytest.raises(ValueError, match="cumsum: cu_seqlens needs dim=0"):
        xopsaot.cumsum(x, 1, cu_seqlens=index([0, 4]))
    with pytest.raises(ValueError, match="cumsum: cu_seqlens.dtype is int64; it must be int32"):
        xopsaot.cumsum(x, 0, cu_seqlens=index([0, 4], "int64"))
    with pytest.raises(ValueError, match="cumsum: cu_seqlens must start at 0 and never decrease"):
        xopsaot.cumsum(x, 0, cu_seqlens=index([0, 3, 2]))
    with pytest.raises(ValueError, match="cumsum: cu_seqlens ends at 9 but the packed tensor has 4 tokens"):
        xopsaot.cumsum(x, 0, cu_seqlens=index([0, 9]))


@pytest.mark.gpu
def test_every_scan_variant_was_checked():
    missing = unexercised({"scan_kernel", "scan_totals_kernel"}, GPU_USED)
    assert not missing, f"scan variants never exercised: {missing}"
