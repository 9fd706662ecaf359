"""GPU calls on tensors of more than 2^31 elements (4 GiB of a 16-bit dtype): no op family's offsets may wrap in
32 bits. Each test fills a tensor just past 2^31 elements on the GPU, runs the op, and checks the windows around
element 2^31 and at the end against float64 references of those windows only (the inputs there copied to the
host). Outputs the op allocates start as NaN (the `poison` fixture). Each test needs up to 25 GiB of GPU memory
and skips where less is free."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from reference64 import assert_close, attention64, f64, group_norm64, lrpe_cosine64, norm64, rotary64, softmax64

import xopsaot

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

BIG = 2**31  # the first element index a 32-bit offset cannot reach
WINDOW = 4096  # elements checked on each side of BIG and at the end


@pytest.fixture(autouse=True)
def release():
    """Give the test's GPU memory back to the device before the next one."""
    yield
    gc.collect()
    torch.cuda.empty_cache()


def need(gib: int) -> None:
    free, _ = torch.cuda.mem_get_info()
    if free < gib * 2**30:
        pytest.skip(f"needs {gib} GiB of free GPU memory, {free / 2**30:.1f} GiB free")


def randn(rng, shape, dtype=torch.bfloat16, scale=1.0):
    g = torch.Generator(device="cuda").manual_seed(int(rng.integers(2**62)))
    return torch.randn(shape, device="cuda", dtype=dtype, generator=g) * scale


def windows(n: int) -> list[slice]:
    """The flat index ranges checked of n elements: around BIG, and the last WINDOW or so (from a multiple of 4)."""
    return [slice(BIG - WINDOW, min(BIG + WINDOW, n)), slice((n - WINDOW) // 4 * 4, n)]


def row_windows(rows: int, cols: int) -> list[slice]:
    """The rows checked of a (rows, cols) tensor: those around element BIG, and the last two."""
    at = BIG // cols
    return [slice(max(at - 1, 0), min(at + 2, rows)), slice(rows - 2, rows)]


def used_kernel() -> str:
    from xopsaot import _library

    index = _library.last_variant()
    assert index >= 0, "no GPU variant ran"
    return _library.manifest()["variants"][index]["kernel"]


def test_add_and_silu_flat(rng, poison):
    need(13)
    n = BIG + 17
    a, b = randn(rng, (n,)), randn(rng, (n,))
    out = xopsaot.add(a, b, alpha=0.5)
    assert used_kernel() == "elementwise_kernel"
    for w in windows(n):
        assert_close(out[w], f64(a[w]) + 0.5 * f64(b[w]), "bfloat16", f"add {w}")
    del out
    y = xopsaot.silu(a)
    for w in windows(n):
        x = f64(a[w])
        assert_close(y[w], x / (1 + np.exp(-x)), "bfloat16", f"silu {w}", floor=1.0)


def test_add_broadcast_row(rng, poison):
    need(13)
    rows, cols = BIG // 4096 + 1, 4096
    a, b = randn(rng, (rows, cols)), randn(rng, (cols,))
    out = xopsaot.mul(a, b)
    for w in row_windows(rows, cols):
        assert_close(out[w], f64(a[w]) * f64(b), "bfloat16", f"mul rows {w}")


def test_silu_and_mul(rng, poison):
    need(13)
    rows, d = BIG // 2048 + 1, 2048
    x = randn(rng, (rows, 2 * d))
    out = xopsaot.silu_and_mul(x)
    for w in row_windows(rows, d):
        h = f64(x[w])
        assert_close(out[w], h[:, :d] / (1 + np.exp(-h[:, :d])) * h[:, d:], "bfloat16", f"rows {w}", floor=1.0)


@pytest.mark.parametrize("cols", [4096, 131072])
def test_norms(rng, poison, cols):
    """rms_norm with a residual (held rows on Hopper) and layer_norm (a cluster per row at 131072 columns)."""
    need(18)
    rows = BIG // cols + 1
    x, r = randn(rng, (rows, cols)), randn(rng, (rows, cols))
    w, b = randn(rng, (cols,)), randn(rng, (cols,))
    y, h = xopsaot.rms_norm(x, w, eps=1e-6, residual=r)
    for s in row_windows(rows, cols):
        want_y, want_h = norm64(x[s], w, eps=1e-6, residual=r[s])
        assert_close(h[s], want_h, "bfloat16", f"residual_out rows {s}")
        assert_close(y[s], want_y, "bfloat16", f"rms_norm rows {s}")
    del y, h, r
    y = xopsaot.layer_norm(x, w, b, eps=1e-5)
    for s in row_windows(rows, cols):
        assert_close(y[s], norm64(x[s], w, b, eps=1e-5, kind="layer")[0], "bfloat16", f"layer_norm rows {s}")


@pytest.mark.parametrize("cols", [4096, 16384, 131072])
def test_softmax_family(rng, poison, cols):
    """Rows in registers, held in shared memory, and held by a cluster (Hopper)."""
    need(9)
    rows = BIG // cols + 1
    x = randn(rng, (rows, cols), scale=3.0)
    y = xopsaot.softmax(x)
    for s in row_windows(rows, cols):
        assert_close(y[s], softmax64(x[s]), "bfloat16", f"softmax rows {s}")
    del y
    y = xopsaot.log_softmax(x)
    for s in row_windows(rows, cols):
        assert_close(y[s], np.log(softmax64(x[s])), "bfloat16", f"log_softmax rows {s}")


def test_cross_entropy_and_greedy_sample(rng, poison):
    need(5)
    rows, cols = BIG // 131072 + 1, 131072
    logits = randn(rng, (rows, cols), scale=2.0)
    target = torch.from_numpy(rng.integers(0, cols, rows)).cuda()
    loss = xopsaot.cross_entropy(logits, target, reduction="none")
    checked = torch.cat([torch.arange(rows)[s] for s in row_windows(rows, cols)]).cuda()
    x = f64(logits[checked])
    top = x.max(axis=1)
    picked = x[np.arange(len(checked)), target[checked].cpu().numpy()]
    assert_close(loss[checked], top + np.log(np.exp(x - top[:, None]).sum(axis=1)) - picked, "bfloat16", "losses")
    tokens = xopsaot.sample(logits, temperature=0.0)
    assert np.array_equal(tokens[checked].cpu().numpy(), x.argmax(axis=1)), "greedy tokens"


def test_dropout(rng, poison):
    need(9)
    n = BIG + 17
    x = randn(rng, (n,))
    seed, p = int(rng.integers(2**63)), 0.3
    y = xopsaot.dropout(x, p, seed=seed, offset=5)
    for w in windows(n):
        # element i draws from counter offset + i // 4: the window (starting at a multiple of 4) is its own call
        want = xopsaot.dropout(x[w].float().cpu().numpy(), p, seed=seed, offset=5 + w.start // 4)
        got = f64(y[w])
        assert np.array_equal(got == 0, want == 0), f"mask {w}"
        assert_close(got, want, "bfloat16", f"dropout {w}")


def test_cumsum_long_dim(rng, poison):
    need(25)
    n = BIG + 1000
    g = torch.Generator(device="cuda").manual_seed(int(rng.integers(2**62)))
    x = torch.randint(0, 3, (n,), device="cuda", dtype=torch.int32, generator=g)
    y = xopsaot.cumsum(x, 0)
    assert y.dtype == torch.int64
    for w in windows(n):
        before = int(x[: w.start].sum(dtype=torch.int64))  # torch's reduction: exact in int64
        want = before + np.cumsum(x[w].cpu().numpy().astype(np.int64))
        assert np.array_equal(y[w].cpu().numpy(), want), f"cumsum {w}"


def test_apply_rotary(rng, poison):
    need(9)
    seqlen, heads, d = BIG // (16 * 128) + 1, 16, 128
    x = randn(rng, (1, seqlen, heads, d))
    angles = torch.rand(seqlen, d // 2, device="cuda", dtype=torch.float64) * 6.3
    cos, sin = angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)
    y = xopsaot.apply_rotary(x, cos, sin)
    for s in row_windows(seqlen, heads * d):  # token t takes table row t: the window's own rows
        tokens = np.arange(s.stop - s.start)
        assert_close(y[0, s], rotary64(x[0, s], cos[s], sin[s], tokens, interleaved=False), "bfloat16", f"tokens {s}")


def test_rotary_qk_in_place(rng):
    need(6)
    tokens, d = BIG // (32 * 128) + 1, 128
    q, k = randn(rng, (tokens, 32, d)), randn(rng, (tokens, 8, d))
    cache = randn(rng, (8192, d))  # cos half, then sin half
    positions = torch.from_numpy(rng.integers(0, 8192, tokens)).cuda()
    checked = row_windows(tokens, 32 * d)
    before_q = [q[s].clone() for s in checked]
    before_k = [k[s].clone() for s in checked]
    xopsaot.rotary_qk(positions, q, k, cache)
    cos, sin = cache[:, : d // 2], cache[:, d // 2 :]
    for s, q0, k0 in zip(checked, before_q, before_k):
        pos = positions[s].cpu().numpy()
        assert_close(q[s], rotary64(q0, cos, sin, pos, interleaved=False), "bfloat16", f"q tokens {s}")
        assert_close(k[s], rotary64(k0, cos, sin, pos, interleaved=False), "bfloat16", f"k tokens {s}")


def test_lrpe_cosine(rng, poison):
    need(13)
    seqlen, heads, d = BIG // (8 * 256) + 1, 8, 128
    x = randn(rng, (1, seqlen, heads, d))
    theta = torch.from_numpy(rng.uniform(0, 1e-2, (heads, d)).astype(np.float32)).cuda()
    y = xopsaot.lrpe_cosine(x, theta, offset=3)
    for s in row_windows(seqlen, heads * 2 * d):
        start = np.arange(seqlen)[s][0]
        want = lrpe_cosine64(x[:, s], theta, offset=3 + int(start))
        assert_close(y[:, s], want, "bfloat16", f"tokens {s}")


def test_group_norm(rng, poison):
    need(10)
    n, c, spatial, groups = 9, 32, 2**23, 32
    x = randn(rng, (n, c, spatial))
    w, b = randn(rng, (c,)), randn(rng, (c,))
    y = xopsaot.group_norm(x, groups, w, b, eps=1e-5)
    # the last sample's last two groups (one channel each): past element BIG
    want = group_norm64(x[n - 1 :, c - 2 :], 2, w[c - 2 :], b[c - 2 :], eps=1e-5)
    assert_close(y[n - 1 :, c - 2 :], want, "bfloat16", "group_norm")


@pytest.mark.parametrize("batch", [1, 2])
def test_matmul_output(rng, poison, batch):
    """2-D (Hopper's warp-specialized kernel) and batched (the Triton kernel) products of more than 2^31 outputs."""
    need(13)
    m, n, k = BIG // (batch * 32768) + 1, 32768, 64
    a, b = randn(rng, (batch, m, k)), randn(rng, (batch, k, n))
    c = xopsaot.matmul(a[0], b[0]) if batch == 1 else xopsaot.bmm(a, b)
    c = c.reshape(batch * m, n)
    for s in row_windows(batch * m, n):  # rows of the batch's stacked products
        for row in range(s.start, s.stop):
            z, i = divmod(row, m)
            assert_close(c[row], f64(a[z, i]) @ f64(b[z]), "bfloat16", f"row {i} of product {z}")


@pytest.mark.parametrize("d", [96, 128])
def test_flash_attn_long_queries(rng, poison, d):
    """A query tensor past 2^31 elements against a short key sequence (non-causal, so every row sees every key)."""
    need(10)
    heads = 16
    seqlen = BIG // (heads * d) + 1
    q, k, v = randn(rng, (1, seqlen, heads, d)), randn(rng, (1, 256, heads, d)), randn(rng, (1, 256, heads, d))
    out, lse = xopsaot.flash_attn(q, k, v, return_lse=True)
    for s in row_windows(seqlen, heads * d):
        want, want_lse = attention64(q[:, s], k, v, with_lse=True)
        assert_close(out[:, s], want, "bfloat16", f"queries {s}")
        assert np.abs(f64(lse[:, :, s]) - want_lse).max() < 1e-3


@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_past_2_31(rng, poison, paged):
    """Decode against caches of more than 2^31 elements, appending new keys at their far end."""
    need(19)
    heads, heads_k, d, batch = 32, 8, 128, 4
    if paged:
        page = 16
        pages = BIG // (page * heads_k * d) + 300  # the last 300 pages lie past element BIG
        k_cache, v_cache = randn(rng, (pages, page, heads_k, d)), randn(rng, (pages, page, heads_k, d))
        per_seq = 64
        table = torch.from_numpy(
            (pages - 1 - rng.permutation(batch * per_seq)).reshape(batch, per_seq).astype(np.int32)
        ).cuda()  # the cache's last 256 pages, shuffled
        capacity = per_seq * page
    else:
        capacity = BIG // (batch * heads_k * d) + 1
        k_cache, v_cache = randn(rng, (batch, capacity, heads_k, d)), randn(rng, (batch, capacity, heads_k, d))
        table = None
    lens = np.array([17, 513, capacity - 300, capacity - 1], dtype=np.int32)  # the last sequence reads past BIG
    q = randn(rng, (batch, 1, heads, d))
    k_new, v_new = randn(rng, (batch, 1, heads_k, d)), randn(rng, (batch, 1, heads_k, d))
    out = xopsaot.flash_attn_with_kvcache(
        q, k_cache, v_cache, k_new, v_new, cache_seqlens=torch.from_numpy(lens).cuda(), block_table=table
    )
    for i in range(batch):
        n = int(lens[i]) + 1
        if paged:
            slots = table[i].long().repeat_interleave(page) * page + torch.arange(page, device="cuda").repeat(per_seq)
            keys = k_cache.reshape(-1, heads_k, d)[slots[:n]]
            values = v_cache.reshape(-1, heads_k, d)[slots[:n]]
        else:
            keys, values = k_cache[i, :n], v_cache[i, :n]
        assert torch.equal(keys[n - 1], k_new[i, 0]) and torch.equal(values[n - 1], v_new[i, 0]), f"append {i}"
        want = attention64(q[i : i + 1], keys[None], values[None])
        assert_close(out[i : i + 1], want, "bfloat16", f"sequence {i}")
