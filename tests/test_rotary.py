"""Rotary embeddings (apply_rotary, rotary_qk, lrpe_cosine) against float64 references, on the CPU path (NumPy) and
on the GPU (marker gpu, outputs poisoned with NaN): every dtype, both layouts, partial rotary, rotary dims on both
sides of each block size, head counts past a head block, offsets per sequence, varlen with empty sequences and
padding, strided views, in-place updates that touch only what they document, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import host64 as host
from arrays import on_path as arr
from arrays import unexercised
from reference64 import assert_close, lrpe_cosine64, rotary64

import xopsaot
from xopsaot import _library

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
DTYPES = ["float16", "bfloat16", "float32"]
GPU_USED: set[int] = set()
# (batch, seqlen, heads, head_dim, rotary_dim): rotary dims around the 32 / 64 / 128 blocks, partial and full,
# a rotary dim that loops (384), heads past a block of 16, 32 or 64
SHAPES = [
    (1, 1, 1, 2, 2),
    (2, 17, 3, 64, 64),
    (1, 40, 33, 64, 62),
    (3, 5, 2, 80, 32),
    (1, 7, 2, 100, 100),
    (2, 9, 40, 128, 128),
    (1, 100, 4, 128, 64),
    (1, 6, 3, 160, 130),
    (1, 3, 2, 512, 384),
    (1, 3, 70, 64, 64),
    (1, 2, 17, 256, 256),
]


def ran(where):
    if where == "gpu":
        GPU_USED.add(_library.last_variant())


def index_array(values, dtype, where):
    values = np.asarray(values, dtype=dtype)
    if where == "cpu":
        return values
    torch = pytest.importorskip("torch")
    return torch.from_numpy(values).cuda()


def table(rng, rows, half, dtype, where):
    """cos and sin of random angles, as a rotary table is."""
    angles = rng.uniform(-np.pi, np.pi, (rows, half))
    return index_array(np.cos(angles), "float32", where), index_array(np.sin(angles), "float32", where)


def cast(x, dtype, where):
    if where == "cpu":
        return x.astype(pytest.importorskip("ml_dtypes").bfloat16) if dtype == "bfloat16" else x.astype(dtype)
    torch = pytest.importorskip("torch")
    return x.to(getattr(torch, dtype))


def copy(x):
    return x.copy() if isinstance(x, np.ndarray) else x.clone()


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("interleaved", [False, True])
def test_apply_rotary(request, rng, where, interleaved):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in DTYPES:
        for b, s, h, d, rd in SHAPES:
            cos, sin = (cast(t, dtype, where) for t in table(rng, s + 7, rd // 2, dtype, where))
            x = arr(rng, (b, s, h, d), dtype, where)
            before = host(x)
            for offsets in (0, 7, rng.integers(0, 8, b)):
                per_batch = not isinstance(offsets, int)
                given = index_array(offsets, "int32", where) if per_batch else offsets
                out = xopsaot.apply_rotary(x, cos, sin, interleaved=interleaved, seqlen_offsets=given)
                ran(where)
                positions = np.arange(s)[None, :] + (offsets[:, None] if per_batch else offsets)
                ref = rotary64(x, cos, sin, positions, interleaved)
                assert out.shape == x.shape and out.dtype == x.dtype
                assert_close(host(out), ref, dtype, f"{dtype} {(b, s, h, d, rd)} interleaved={interleaved} {offsets}")
            assert np.array_equal(host(x), before), "x changed out of place"
            y = copy(x)
            returned = xopsaot.apply_rotary(y, cos, sin, interleaved=interleaved, inplace=True, seqlen_offsets=3)
            ran(where)
            assert returned is y
            got = host(y)
            assert_close(got, rotary64(x, cos, sin, np.arange(s)[None, :] + 3, interleaved), dtype, "in place")
            assert np.array_equal(got[..., rd:], before[..., rd:]), "in place touched columns past rotary_dim"


@pytest.mark.parametrize("where", PATHS)
def test_apply_rotary_views(request, rng, where):
    """q of a packed (batch, seqlen, 3, heads, head_dim) qkv, and cos / sin columns of a wider table."""
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in DTYPES:
        qkv = arr(rng, (2, 19, 3, 5, 64), dtype, where)
        q = qkv[:, :, 0]
        wide_cos, wide_sin = (cast(t, dtype, where) for t in table(rng, 30, 40, dtype, where))
        cos, sin = wide_cos[:, 3:27], wide_sin[:, 3:27]
        for interleaved in (False, True):
            out = xopsaot.apply_rotary(q, cos, sin, interleaved=interleaved, seqlen_offsets=2)
            ref = rotary64(q, cos, sin, np.arange(19)[None, :] + 2, interleaved)
            assert_close(host(out), ref, dtype, f"{dtype} view interleaved={interleaved}")
        before = host(qkv)
        xopsaot.apply_rotary(q, cos, sin, inplace=True)
        after = host(qkv)
        ref = rotary64(before[:, :, 0], cos, sin, np.arange(19)[None, :], False)
        assert_close(after[:, :, 0], ref, dtype, "in place")
        assert np.array_equal(after[:, :, 1:], before[:, :, 1:]), "in place touched k or v"


@pytest.mark.parametrize("where", PATHS)
def test_apply_rotary_varlen(request, rng, where):
    """Packed sequences with empty ones, offsets per sequence, and padding tokens after the last sequence (copied out
    of place, untouched in place)."""
    if where == "gpu":
        request.getfixturevalue("poison")
    lengths = [5, 0, 17, 1, 0, 33]
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    total = int(cu[-1]) + 4
    for dtype in DTYPES:
        for interleaved in (False, True):
            x = arr(rng, (total, 6, 96), dtype, where)
            cos, sin = (cast(t, dtype, where) for t in table(rng, 50, 40, dtype, where))
            offsets = rng.integers(0, 10, len(lengths))
            positions = np.full(total, -1)
            for b, n in enumerate(lengths):
                positions[cu[b] : cu[b + 1]] = np.arange(n) + offsets[b]
            ref = rotary64(x, cos, sin, positions, interleaved)
            given = {"seqlen_offsets": index_array(offsets, "int32", where)}
            out = xopsaot.apply_rotary(
                x, cos, sin, interleaved, cu_seqlens=index_array(cu, "int32", where), max_seqlen=33, **given
            )
            ran(where)
            assert_close(host(out), ref, dtype, f"varlen {dtype} interleaved={interleaved}")
            before = host(x)
            xopsaot.apply_rotary(
                x, cos, sin, interleaved, True, cu_seqlens=index_array(cu, "int32", where), max_seqlen=40, **given
            )
            ran(where)
            got = host(x)
            assert_close(got, ref, dtype, "varlen in place")
            assert np.array_equal(got[cu[-1] :], before[cu[-1] :]), "in place touched the padding tokens"


@pytest.mark.parametrize("where", PATHS)
def test_rotary_qk(request, rng, where):
    """q and k as views of a packed (tokens, (heads + 2 heads_k) * head_size) qkv, rotated in place; v and the
    columns past rot_dim stay as they were."""
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in DTYPES:
        for tokens, heads, heads_k, size, rot in [(1, 1, 1, 64, 64), (37, 32, 8, 128, 128), (5, 3, 1, 256, 64),
                                                  (70, 12, 4, 80, 80)]:  # fmt: skip
            for is_neox in (True, False):
                width = (heads + 2 * heads_k) * size
                qkv = arr(rng, (tokens, width), dtype, where)
                q = qkv[:, : heads * size].reshape(tokens, heads, size)
                k = qkv[:, heads * size : (heads + heads_k) * size].reshape(tokens, heads_k, size)
                max_position = 300
                angles = rng.uniform(-np.pi, np.pi, (max_position, rot // 2))
                cache = cast(index_array(np.concatenate([np.cos(angles), np.sin(angles)], 1), "float32", where),
                             dtype, where)  # fmt: skip
                pos = rng.integers(0, max_position, tokens)
                positions = index_array(pos, "int64", where)
                before = host(qkv)
                q0 = before[:, : heads * size].reshape(q.shape)
                k0 = before[:, heads * size : (heads + heads_k) * size].reshape(k.shape)
                out_q, out_k = xopsaot.rotary_qk(positions, q, k, cache, is_neox)
                ran(where)
                assert out_q is q and out_k is k
                after = host(qkv)
                cos, sin = host(cache)[:, : rot // 2], host(cache)[:, rot // 2 :]
                what = f"{dtype} {(tokens, heads, heads_k, size, rot)} neox={is_neox}"
                got_q = after[:, : heads * size].reshape(q.shape)
                got_k = after[:, heads * size : (heads + heads_k) * size].reshape(k.shape)
                assert_close(got_q, rotary64(q0, cos, sin, pos, not is_neox), dtype, "q " + what)
                assert_close(got_k, rotary64(k0, cos, sin, pos, not is_neox), dtype, "k " + what)
                assert np.array_equal(after[:, (heads + heads_k) * size :], before[:, (heads + heads_k) * size :])
                assert np.array_equal(got_q[..., rot:], q0[..., rot:]), "columns past rot_dim changed"
        # positions shaped (batch, seqlen) and no k
        q = arr(rng, (2, 9, 4, 64), dtype, where)
        pos = rng.integers(0, 20, (2, 9))
        cache = cast(index_array(rng.standard_normal((20, 64)), "float32", where), dtype, where)
        q0 = host(q)
        assert xopsaot.rotary_qk(index_array(pos, "int64", where), q, None, cache)[1] is None
        ran(where)
        c = host(cache)
        assert_close(host(q), rotary64(q0, c[:, :32], c[:, 32:], pos, False), dtype, "batched positions")


@pytest.mark.parametrize("where", PATHS)
def test_lrpe_cosine(request, rng, where):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in DTYPES:
        for b, s, h, d in [(1, 1, 1, 1), (2, 17, 3, 64), (1, 33, 5, 128), (1, 3, 2, 50), (2, 4, 2, 200), (1, 2, 20, 9)]:
            x = arr(rng, (b, s, h, d), dtype, where)
            for theta_shape in [(h, d), (h, 1), (1, d), (d,)]:
                theta = index_array(rng.uniform(0, 2, theta_shape), "float32", where)
                for offset in (0, 100_000):
                    out = xopsaot.lrpe_cosine(x, theta, offset)
                    ran(where)
                    assert out.shape == (b, s, h, 2 * d) and out.dtype == x.dtype
                    ref = lrpe_cosine64(x, host(theta), offset)
                    assert_close(host(out), ref, dtype, f"{dtype} {(b, s, h, d)} theta {theta_shape} offset {offset}")
        x = arr(rng, (2, 6, 3, 2, 32), dtype, where)[:, :, :, 1]  # strided heads and tokens
        theta = index_array(rng.uniform(0, 1, (3, 32)), "float32", where)
        out = xopsaot.lrpe_cosine(x, theta, 5)
        ran(where)
        assert_close(host(out), lrpe_cosine64(x, host(theta), 5), dtype, "view")


@pytest.mark.parametrize("where", PATHS)
def test_rotary_bad_input(rng, where):
    x = arr(rng, (2, 8, 3, 64), "float32", where)
    cos, sin = table(rng, 16, 32, "float32", where)
    with pytest.raises(ValueError, match=r"apply_rotary: x must have 4 dims \(batch, seqlen, heads, headdim\)"):
        xopsaot.apply_rotary(x[0], cos, sin)
    with pytest.raises(ValueError, match="cos has 40 columns, so rotary_dim is 80, more than x's headdim 64"):
        xopsaot.apply_rotary(x, *table(rng, 16, 40, "float32", where))
    with pytest.raises(TypeError, match="apply_rotary: cos.dtype is float16 but x.dtype is float32"):
        xopsaot.apply_rotary(x, cast(cos, "float16", where), sin)
    with pytest.raises(ValueError, match=r"seqlen_offsets=9 need rows 9 to 16 of cos and sin, which have 16"):
        xopsaot.apply_rotary(x, cos, sin, seqlen_offsets=9)
    with pytest.raises(ValueError, match=r"sequence 1 of 8 tokens at seqlen_offsets\[1\]=10 runs past the 16 rows"):
        xopsaot.apply_rotary(x, cos, sin, seqlen_offsets=index_array([0, 10], "int32", where))
    with pytest.raises(ValueError, match="seqlen_offsets.dtype is int64; it must be int32"):
        xopsaot.apply_rotary(x, cos, sin, seqlen_offsets=index_array([0, 1], "int64", where))
    with pytest.raises(ValueError, match=r"seqlen_offsets must have shape \(2,\), got \(3,\)"):
        xopsaot.apply_rotary(x, cos, sin, seqlen_offsets=index_array([0, 1, 2], "int32", where))
    packed = x.reshape(16, 3, 64)
    with pytest.raises(TypeError, match="max_seqlen is required with cu_seqlens"):
        xopsaot.apply_rotary(packed, cos, sin, cu_seqlens=index_array([0, 8, 16], "int32", where))
    with pytest.raises(ValueError, match="a sequence of 9 tokens exceeds max_seqlen=8"):
        xopsaot.apply_rotary(packed, cos, sin, cu_seqlens=index_array([0, 9, 16], "int32", where), max_seqlen=8)
    with pytest.raises(ValueError, match="cu_seqlens ends at 17 but the packed tensor has 16 tokens"):
        xopsaot.apply_rotary(packed, cos, sin, cu_seqlens=index_array([0, 8, 17], "int32", where), max_seqlen=9)
    with pytest.raises(ValueError, match="max_seqlen goes with cu_seqlens"):
        xopsaot.apply_rotary(x, cos, sin, max_seqlen=8)
    with pytest.raises(TypeError, match="apply_rotary: inplace must be a bool"):
        xopsaot.apply_rotary(x, cos, sin, inplace="yes")

    q, k = x.reshape(16, 3, 64), x[:, :, :1].reshape(16, 1, 64)
    cache = index_array(rng.standard_normal((20, 64)), "float32", where)
    positions = index_array(np.arange(16), "int64", where)
    with pytest.raises(ValueError, match=r"rotary_qk: positions holds 20, outside the cache's 20 rows"):
        xopsaot.rotary_qk(index_array(np.arange(5, 21), "int64", where), q, copy(k), cache)
    with pytest.raises(ValueError, match="rotary_qk: positions.dtype is int32; it must be int64"):
        xopsaot.rotary_qk(index_array(np.arange(16), "int32", where), q, copy(k), cache)
    with pytest.raises(ValueError, match=r"positions must have shape \(16,\), got \(15,\)"):
        xopsaot.rotary_qk(positions[:15], q, copy(k), cache)
    with pytest.raises(ValueError, match="k must be .* with q's tokens and head_size"):
        xopsaot.rotary_qk(positions, q, copy(k)[:, :, :32], cache)
    with pytest.raises(ValueError, match="cos_sin_cache has 66 columns; rot_dim must be even and at most head_size"):
        xopsaot.rotary_qk(positions, q, copy(k), index_array(rng.standard_normal((20, 66)), "float32", where))

    with pytest.raises(ValueError, match=r"lrpe_cosine: theta has shape \(2, 64\); it must broadcast to"):
        xopsaot.lrpe_cosine(x, index_array(np.ones((2, 64)), "float32", where))
    with pytest.raises(TypeError, match="lrpe_cosine: theta.dtype is float64; supported: float32"):
        xopsaot.lrpe_cosine(x, index_array(np.ones(64), "float64", where))
    with pytest.raises(TypeError, match="lrpe_cosine: offset must be an int, got 1.5"):
        xopsaot.lrpe_cosine(x, index_array(np.ones(64), "float32", where), 1.5)


@pytest.mark.gpu
def test_positions_outside_the_table_leave_tokens_unrotated(rng):
    """Unchecked (validate=False) positions past the table: the kernel reads nothing outside it."""
    torch = pytest.importorskip("torch")
    x = arr(rng, (2, 8, 3, 64), "float32", "gpu")
    cos, sin = table(rng, 12, 32, "float32", "gpu")
    offsets = index_array([0, 9], "int32", "gpu")
    out = xopsaot.apply_rotary(x, cos, sin, seqlen_offsets=offsets, validate=False)
    positions = np.arange(8)[None, :] + np.array([0, 9])[:, None]
    assert_close(host(out), rotary64(x, cos, sin, positions, False), "float32", "past the table")
    q = arr(rng, (4, 2, 64), "float32", "gpu")
    q0 = host(q)
    pos = torch.tensor([0, 11, 12, -5], device="cuda")
    xopsaot.rotary_qk(pos, q, None, torch.cat([cos, sin], 1), validate=False)
    assert_close(host(q), rotary64(q0, cos, sin, pos.cpu().numpy(), False), "float32", "qk past the table")


@pytest.mark.gpu
def test_every_rotary_variant_was_checked():
    """After the tests above (file order): each rotary and lrpe variant compiled for this GPU ran."""
    missing = unexercised({"rotary_kernel", "lrpe_cosine_kernel"}, GPU_USED)
    assert not missing, f"rotary variants never exercised: {missing}"
