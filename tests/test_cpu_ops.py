"""The NumPy path of every op against the float64 references, at awkward sizes, for each dtype and host type."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import HOST_CASES, dtype_of, make
from reference64 import add64, assert_close, attention64, f64, matmul64, rms_norm64, softmax64

import xopsaot
from xopsaot._ops.attention import attend_reference

CASES = pytest.mark.parametrize("kind,dtype", HOST_CASES)


def same_kind(result, like):
    assert type(result) is type(like) and dtype_of(result) == dtype_of(like)


@CASES
@pytest.mark.parametrize("shape", [(1,), (17,), (3, 1000), (2, 3, 4097), (100_003,)])
def test_add(rng, kind, dtype, shape):
    a, b = make(rng, shape, dtype, kind), make(rng, shape, dtype, kind)
    out = xopsaot.add(a, b)
    same_kind(out, a)
    assert_close(out, add64(a, b), dtype, "add")


@CASES
@pytest.mark.parametrize("n", [1, 17, 256, 257, 4096, 8193])
@pytest.mark.parametrize("with_residual", [False, True])
def test_rms_norm(rng, kind, dtype, n, with_residual):
    x, w = make(rng, (5, n), dtype, kind), make(rng, (n,), dtype, kind)
    r = make(rng, (5, n), dtype, kind) if with_residual else None
    result = xopsaot.rms_norm(x, w, eps=1e-5, residual=r)
    y_ref, h_ref = rms_norm64(x, w, 1e-5, r)
    if with_residual:
        y, h = result
        same_kind(h, x)
        assert_close(h, h_ref, dtype, "rms_norm residual")
    else:
        y = result
    same_kind(y, x)
    assert_close(y, y_ref, dtype, "rms_norm")


@CASES
@pytest.mark.parametrize("shape,dim", [((1,), 0), ((3, 17), -1), ((4, 100_001), 1), ((6, 5, 7), 1), ((2, 9), 0)])
def test_softmax(rng, kind, dtype, shape, dim):
    x = make(rng, shape, dtype, kind, scale=3.0)
    out = xopsaot.softmax(x, dim=dim)
    same_kind(out, x)
    assert_close(out, softmax64(x, dim), dtype, "softmax")


@CASES
@pytest.mark.parametrize(
    "shape_a,shape_b",
    [
        ((1, 1), (1, 1)),
        ((17, 33), (33, 65)),
        ((128, 64), (64, 1)),
        ((3, 17, 9), (3, 9, 5)),
        ((3, 4, 8), (8, 6)),
        ((4, 8), (2, 8, 3)),
        ((1, 5, 7), (4, 7, 2)),
        ((7,), (7, 3)),
        ((2, 5, 7), (7,)),
        ((9,), (9,)),
    ],
)
def test_matmul(rng, kind, dtype, shape_a, shape_b):
    a, b = make(rng, shape_a, dtype, kind), make(rng, shape_b, dtype, kind)
    out = xopsaot.matmul(a, b)
    same_kind(out, a)
    # a short product (a dot of 9 terms) may cancel to near 0: judge its error by the size of its terms
    terms = np.max(np.abs(f64(a)) @ np.abs(f64(b)))
    assert_close(out, matmul64(a, b), dtype, "matmul", floor=terms)


ATTENTION_SHAPES = [
    # batch, seqlen_q, seqlen_k, heads, heads_k, headdim
    (1, 1, 1, 1, 1, 64),
    (2, 17, 17, 4, 4, 64),
    (1, 17, 300, 8, 2, 128),  # GQA 4, decode-like
    (2, 129, 127, 8, 1, 64),  # MQA, seqlen_q > seqlen_k
    (1, 1000, 1000, 2, 2, 32),
]


@CASES
@pytest.mark.parametrize("shape", ATTENTION_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn(rng, kind, dtype, shape, causal):
    batch, sq, sk, h, hk, d = shape
    q = make(rng, (batch, sq, h, d), dtype, kind)
    k = make(rng, (batch, sk, hk, d), dtype, kind)
    v = make(rng, (batch, sk, hk, d), dtype, kind)
    out = xopsaot.flash_attn(q, k, v, causal=causal)
    same_kind(out, q)
    assert_close(out, attention64(q, k, v, causal), dtype, "flash_attn")


def test_flash_attn_scale_and_empty_rows(rng):
    q, k, v = (make(rng, (1, s, 2, 16), "float32") for s in (9, 4, 4))
    out = xopsaot.flash_attn(q, k, v, causal=True, softmax_scale=0.3)
    assert_close(out, attention64(q, k, v, True, 0.3), "float32")
    # seqlen_q 9 > seqlen_k 4, bottom-right causal: the first 5 queries see no key and are 0
    assert np.all(out[:, :5] == 0) and np.all(np.abs(out[:, 5:]).sum(-1) > 0)


@pytest.mark.parametrize("block", [1, 7, 64])
def test_attention_reference_blocking(rng, block):
    """The blocked online softmax of the NumPy path equals the full-matrix reference for any block size."""
    q = make(rng, (1, 50, 4, 8), "float32")
    k, v = make(rng, (1, 61, 2, 8), "float32"), make(rng, (1, 61, 2, 8), "float32")
    for causal in (False, True):
        window = (-1, 0 if causal else -1)
        out, _ = attend_reference(q[0], k[0], v[0], 0.35, window, block_q=block, block_k=block)
        assert_close(out[None], attention64(q, k, v, causal, 0.35), "float32", f"block {block}")


def test_attention_reference_memory_is_linear():
    """A 32k context on the CPU path allocates blocks, not a 32k x 32k score matrix (4 GB in float32)."""
    import tracemalloc

    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 32768, 1, 16)).astype(np.float32)
    k = rng.standard_normal((1, 32768, 1, 16)).astype(np.float32)
    tracemalloc.start()
    xopsaot.flash_attn(q[:, :1024], k, k, softmax_scale=0.25)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"
