"""dropout: Philox4x32-10 against the published known-answer vectors, then masks computed here from the generator
(counter offset + i // 4, output i % 4, top 24 bits) compared exactly with both paths' zeros; kept values, keep rates
within binomial bounds, reproducibility, offsets that continue one stream, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from arrays import host64 as host
from arrays import on_path as arr
from arrays import torch_or_skip, unexercised
from reference64 import assert_close, f64

import xopsaot
from xopsaot import _library
from xopsaot._philox import philox4x32

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
DTYPES = ["float16", "bfloat16", "float32"]
GPU_USED: set[int] = set()


def ran(where):
    if where == "gpu":
        GPU_USED.add(_library.last_variant())


def test_philox_known_answers():
    """Random123's kat_vectors for philox4x32 with 10 rounds: counter, key -> output."""
    m = 0xFFFFFFFF
    cases = [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((m, m, m, m), (m, m), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        (
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
        ),
    ]
    for counter, key, expected in cases:
        assert tuple(int(v) for v in philox4x32(*counter, *key)) == expected


def keep_mask(n: int, p: float, seed: int, offset: int) -> np.ndarray:
    """Element i kept when (output i % 4 of counter offset + i // 4) >> 8, times 2^-24, is at least p rounded to
    float32 (a draw between float32(0.9) and 0.9 once failed this test when compared with the float64 p)."""
    counters = offset + np.arange((n + 3) // 4, dtype=np.uint64)
    zero = np.zeros_like(counters)
    words = philox4x32(counters & np.uint64(0xFFFFFFFF), counters >> np.uint64(32), zero, zero,
                       seed & 0xFFFFFFFF, seed >> 32)  # fmt: skip
    bits = np.stack(words, axis=1).reshape(-1)[:n]  # element 4j + k: output k of counter j
    return (bits >> 8).astype(np.float64) * 2.0**-24 >= np.float32(p)  # p reaches the kernel as a float32


@pytest.mark.parametrize("where", PATHS)
def test_dropout_mask_values_and_rate(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    seed = int(rng.integers(0, 2**63))
    for dtype in DTYPES:
        for shape, p in (((1,), 0.5), ((17,), 0.3), ((3, 1000), 0.1), ((100_003,), 0.5), ((64, 1563), 0.9)):
            x = arr(rng, shape, dtype, where)
            offset = int(rng.integers(0, 2**40))
            out = xopsaot.dropout(x, p, seed=seed, offset=offset)
            ran(where)
            keep = keep_mask(math.prod(shape), p, seed, offset).reshape(shape)
            got = host(out)
            assert np.array_equal(got == 0, ~keep | (f64(x) == 0)), f"{dtype} {shape}: mask differs"
            assert_close(got, np.where(keep, f64(x) / (1 - p), 0.0), dtype, f"dropout {dtype} {shape}", floor=1.0)
            n = keep.size
            if n >= 10_000:  # the keep rate within 6 standard deviations of the binomial's mean
                assert abs(keep.sum() - n * (1 - p)) <= 6 * math.sqrt(n * p * (1 - p)), f"{dtype} {shape} rate"
        # a misaligned view (the unhinted variant on the GPU) and a transposed one (read in C order)
        wide = arr(rng, (4097,), dtype, where)
        out = xopsaot.dropout(wide[1:], 0.25, seed=seed)
        ran(where)
        keep = keep_mask(4096, 0.25, seed, 0)
        assert_close(host(out), np.where(keep, f64(wide[1:]) / 0.75, 0.0), dtype, "misaligned", floor=1.0)
        square = arr(rng, (40, 24), dtype, where)
        out = xopsaot.dropout(square.T, 0.25, seed=seed, offset=7)
        keep = keep_mask(960, 0.25, seed, 7).reshape(24, 40)
        assert_close(host(out), np.where(keep, f64(square.T) / 0.75, 0.0), dtype, "transposed", floor=1.0)


@pytest.mark.parametrize("where", PATHS)
def test_dropout_reproducible_and_offsets_continue_the_stream(rng, where):
    x = arr(rng, (2, 4096), "float32", where)
    a = host(xopsaot.dropout(x, 0.5, seed=7))
    assert np.array_equal(a, host(xopsaot.dropout(x, 0.5, seed=7)))
    assert not np.array_equal(a, host(xopsaot.dropout(x, 0.5, seed=8)))
    assert not np.array_equal(a, host(xopsaot.dropout(x, 0.5, seed=7, offset=1)))
    # the second row drawn alone at offset 4096 / 4 is the second row of the joint call
    second = host(xopsaot.dropout(x[1], 0.5, seed=7, offset=1024))
    assert np.array_equal(second, a[1])
    # unseeded calls draw a fresh seed each time (on the GPU the first is recorded and the others replay it)
    assert len({host(xopsaot.dropout(x, 0.5)).tobytes() for _ in range(4)}) == 4


@pytest.mark.parametrize("where", PATHS)
def test_dropout_edges(rng, where):
    x = arr(rng, (5, 33), "float16", where)
    assert xopsaot.dropout(x, 0.5, training=False) is x
    assert xopsaot.dropout(x, 0.0, seed=1) is x
    assert not host(xopsaot.dropout(x, 1.0, seed=1)).any()
    assert host(xopsaot.dropout(arr(rng, (0, 4), "float32", where), 0.5, seed=1)).shape == (0, 4)


@pytest.mark.parametrize("where", PATHS)
def test_dropout_bad_input(rng, where):
    x = arr(rng, (4, 8), "float32", where)
    for p in (1.5, -0.1, float("nan"), "0.5", True):
        with pytest.raises(ValueError, match=r"dropout: p must be a float in \[0, 1\], got"):
            xopsaot.dropout(x, p)
    with pytest.raises(ValueError, match="dropout: seed must be >= 0, got -1"):
        xopsaot.dropout(x, 0.5, seed=-1)
    with pytest.raises(ValueError, match=r"dropout: seed must be below 2\*\*63"):
        xopsaot.dropout(x, 0.5, seed=2**63)
    with pytest.raises(ValueError, match="dropout: offset must be >= 0, got -4"):
        xopsaot.dropout(x, 0.5, seed=1, offset=-4)
    with pytest.raises(TypeError, match="dropout: training must be a bool"):
        xopsaot.dropout(x, 0.5, training="yes")
    ints = x.astype("int32") if where == "cpu" else x.to(torch_or_skip().int32)
    with pytest.raises(TypeError, match="dropout: input.dtype is int32; supported: float16, bfloat16, float32"):
        xopsaot.dropout(ints, 0.5, seed=1)


@pytest.mark.gpu
def test_every_dropout_variant_was_checked():
    missing = unexercised({"dropout_kernel"}, GPU_USED)
    assert not missing, f"dropout variants never exercised: {missing}"
