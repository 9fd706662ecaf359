"""The attention family against the float64 reference, on the CPU path (NumPy) and on the GPU (torch CUDA, marker
gpu, outputs poisoned with NaN): every option, awkward sizes, GQA ratios, varlen with empty sequences, contiguous
and paged caches with permuted block tables, split-KV, and bad input."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pytest
from arrays import on_path as arr
from arrays import unexercised
from reference64 import assert_close, assert_lse_close, attention64, varlen_pieces

import xopsaot
from xopsaot import _library

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
GPU_USED: set[int] = set()


def ints(values, where):
    a = np.asarray(values, dtype=np.int32)
    if where == "cpu":
        return a
    import torch

    return torch.from_numpy(a).cuda()


def host(x):
    if hasattr(x, "detach"):
        import torch

        torch.cuda.synchronize()
        x = x.detach().cpu()
        return x.float().numpy() if x.dtype == torch.bfloat16 else x.numpy()
    return np.asarray(x, dtype=np.float64) if x.dtype.name == "bfloat16" else np.asarray(x)


def note_variant(where):
    if where == "gpu":
        host_sync()
        GPU_USED.add(_library.last_variant())


def host_sync():
    import torch

    torch.cuda.synchronize()


def dtypes_for(where):
    return ["float16", "bfloat16"] + (["float32"] if where == "cpu" else [])


# ---- flash_attn ----

DENSE = [  # batch, seqlen_q, seqlen_k, heads, heads_k
    (1, 1, 1, 1, 1),
    (2, 17, 17, 4, 1),
    (1, 1, 1000, 8, 1),  # decode, MQA
    (2, 129, 63, 8, 2),  # seqlen_q > seqlen_k: causal rows with no key
    (1, 127, 257, 4, 4),  # tile edges +-1
    (1, 300, 300, 8, 8),
]
OPTIONS = {
    "plain": {},
    "causal": {"causal": True},
    "window": {"window_size": (37, 5)},
    "causal_window": {"causal": True, "window_size": (70, -1)},
    "softcap": {"softcap": 3.0, "causal": True},
    "alibi": {"alibi": True, "causal": True},
    "alibi_softcap_window": {"alibi": True, "softcap": 5.0, "window_size": (20, 20)},
    "scale": {"softmax_scale": 0.3, "causal": True},
    "negative_scale": {"softmax_scale": -0.2},  # valid, and kept off the Hopper kernel that assumes a positive one
}


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("dim", [64, 128, 256])
def test_flash_attn_options(request, rng, where, option, dim):
    if where == "gpu":
        request.getfixturevalue("poison")
    opts = dict(OPTIONS[option])
    for dtype in dtypes_for(where):
        for batch, sq, sk, h, hk in DENSE if where == "gpu" else DENSE[:4]:
            q = arr(rng, (batch, sq, h, dim), dtype, where)
            k, v = arr(rng, (batch, sk, hk, dim), dtype, where), arr(rng, (batch, sk, hk, dim), dtype, where)
            alibi = None
            if opts.get("alibi"):
                slopes = rng.uniform(0.01, 0.5, (batch, h)).astype(np.float32)
                alibi = slopes if where == "cpu" else __import__("torch").from_numpy(slopes).cuda()
            kw = {key: value for key, value in opts.items() if key != "alibi"}
            out, lse = xopsaot.flash_attn(q, k, v, alibi_slopes=alibi, return_lse=True, **kw)
            note_variant(where)
            ref, ref_lse = attention64(
                host(q), host(k), host(v), opts.get("causal", False), opts.get("softmax_scale"),
                opts.get("window_size", (-1, -1)), opts.get("softcap", 0.0), None if alibi is None else host(alibi),
                with_lse=True,
            )  # fmt: skip
            what = f"{dtype} {(batch, sq, sk, h, hk)} {option}"
            assert_close(host(out), ref, dtype, what)
            assert_lse_close(host(lse), ref_lse, 2e-2 if dtype != "float32" else 1e-4, what)


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_flash_attn_layouts(rng, poison, dtype, dim):
    """The same attention from four layouts: contiguous, qkv-packed and sliced from longer sequences (heads side by
    side: Hopper's TMA kernel, whose descriptors stop at each batch element's sequence) and heads-major views (the
    general kernel), causal and not, GQA 4, a window, and lse."""
    import torch

    batch, seqlen, heads, heads_k = 2, 300, 8, 2
    qkv = torch.randn(batch, seqlen, heads + 2 * heads_k, dim, device="cuda", dtype=getattr(torch, dtype))
    packed = qkv.split([heads, heads_k, heads_k], dim=2)
    contiguous = [x.contiguous() for x in packed]
    heads_major = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in packed]
    sliced = [torch.cat([x, torch.full_like(x[:, :20], float("nan"))], dim=1)[:, :seqlen] for x in contiguous]
    layouts = (("contiguous", contiguous), ("packed", packed), ("sliced", sliced), ("heads-major", heads_major))
    for causal, window in ((False, (-1, -1)), (True, (-1, -1)), (False, (100, 3))):
        ref, ref_lse = attention64(*(host(x) for x in packed), causal, None, window, with_lse=True)
        for name, (q, k, v) in layouts:
            out, lse = xopsaot.flash_attn(q, k, v, causal=causal, window_size=window, return_lse=True)
            note_variant("gpu")
            what = f"{name} causal={causal} window={window}"
            assert_close(host(out), ref, dtype, what)
            assert_lse_close(host(lse), ref_lse, 2e-2, what)


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [64, 128])
def test_flash_attn_consumer_key_ranges(rng, poison, dim):
    """Hopper's prefill gives each warpgroup of 64 query rows only the key blocks its rows see: with narrow windows
    over 1000+ tokens the first and last warpgroups of a program start and stop on different blocks (one skips
    blocks at the start, another at the end, some more than the ring's stages), and with more queries than keys some
    rows see no key. Dense and packed, causal and not, against the float64 reference."""
    import torch

    windows = [(-1, -1), (-1, 0), (0, 0), (30, 0), (5, 40), (150, 20), (300, 300), (-1, 100)]
    for sq, sk in ((1000, 1000), (1500, 700), (700, 1500)):
        q = torch.randn(2, sq, 4, dim, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(2, sk, 2, dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        hq, hk, hv = host(q), host(k), host(v)
        cq, ck = (np.array([0, n, 2 * n], dtype=np.int32) for n in (sq, sk))
        for window in windows:
            ref, ref_lse = attention64(hq, hk, hv, False, None, window, with_lse=True)
            out, lse = xopsaot.flash_attn(q, k, v, window_size=window, return_lse=True)
            note_variant("gpu")
            what = f"{sq} x {sk} window={window}"
            assert_close(host(out), ref, "bfloat16", what)
            assert_lse_close(host(lse), ref_lse, 2e-2, what)
            packed = (x.reshape(-1, *x.shape[2:]) for x in (q, k, v))
            out = xopsaot.flash_attn_varlen(*packed, ints(cq, "gpu"), ints(ck, "gpu"), sq, sk, window_size=window)
            note_variant("gpu")
            assert_close(host(out).reshape(ref.shape), ref, "bfloat16", f"packed {what}")


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [64, 128])
def test_flash_attn_causal_chunks(rng, poison, dim):
    """Under a right window (causal among them) Hopper's dense prefill takes its programs longest first across
    chunks of heads whose keys and values fit 16 MB of L2: four key heads at these key lengths, so 3 x 4 heads of
    GQA 2 make chunks of 8 and 4 (batch, head) pairs. Each (row block, head, batch) must run once: against the
    float64 reference, causal and windowed."""
    import torch

    from xopsaot import _library

    batch, sq, heads, heads_k = 3, 1400, 4, 2  # 132 programs of 128 rows x key heads: no split-KV on an H100
    sk = 2**24 // (4 * 4 * dim)  # 16384 keys at head dim 64, 8192 at 128

    def randn(*shape):
        return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32)).to("cuda", torch.bfloat16)

    q, k, v = randn(batch, sq, heads, dim), randn(batch, sk, heads_k, dim), randn(batch, sk, heads_k, dim)
    hq, hk, hv = host(q), host(k), host(v)
    for causal, window in ((True, (-1, -1)), (False, (3000, 5))):
        ref, ref_lse = attention64(hq, hk, hv, causal, None, window, with_lse=True)
        out, lse = xopsaot.flash_attn(q, k, v, causal=causal, window_size=window, return_lse=True)
        note_variant("gpu")
        kernel = _library.manifest()["variants"][_library.last_variant()]["kernel"]
        what = f"causal={causal} window={window}"
        if torch.cuda.get_device_capability()[0] == 9:
            assert kernel == "attn_fwd_ws_dense", what
        assert_close(host(out), ref, "bfloat16", what)
        assert_lse_close(host(lse), ref_lse, 2e-2, what)


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("dim", [8, 40, 72, 96, 100, 192, 200])
def test_flash_attn_head_dims(request, rng, where, dim):
    """Every head dim up to 256: rounded up to a compiled tile and masked; dims not a multiple of 8 are padded."""
    if where == "gpu":
        request.getfixturevalue("poison")
    q = arr(rng, (2, 33, 4, dim), "bfloat16", where)
    k, v = arr(rng, (2, 65, 2, dim), "bfloat16", where), arr(rng, (2, 65, 2, dim), "bfloat16", where)
    out = xopsaot.flash_attn(q, k, v, causal=True)
    note_variant(where)
    assert out.shape == q.shape
    assert_close(host(out), attention64(host(q), host(k), host(v), True), "bfloat16", f"dim {dim}")


# ---- flash_attn_varlen ----


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("option", ["plain", "causal", "window", "alibi_softcap_window"])
def test_flash_attn_varlen(request, rng, where, option):
    if where == "gpu":
        request.getfixturevalue("poison")
    opts = dict(OPTIONS[option])
    lengths_q = [5, 0, 130, 1, 64]
    lengths_k = [5, 7, 130, 300, 0]
    cq, ck = np.concatenate([[0], np.cumsum(lengths_q)]), np.concatenate([[0], np.cumsum(lengths_k)])
    h, hk, dim = 8, 2, 128
    for dtype in dtypes_for(where)[:2]:
        q = arr(rng, (int(cq[-1]), h, dim), dtype, where)
        k, v = arr(rng, (int(ck[-1]), hk, dim), dtype, where), arr(rng, (int(ck[-1]), hk, dim), dtype, where)
        alibi = rng.uniform(0.01, 0.5, (h,)).astype(np.float32) if opts.get("alibi") else None
        alibi_arg = alibi if alibi is None or where == "cpu" else __import__("torch").from_numpy(alibi).cuda()
        kw = {key: value for key, value in opts.items() if key != "alibi"}
        out, lse = xopsaot.flash_attn_varlen(
            q, k, v, ints(cq, where), ints(ck, where), max(lengths_q), max(lengths_k), alibi_slopes=alibi_arg,
            return_lse=True, **kw,
        )  # fmt: skip
        note_variant(where)
        hq, hkk, hv, ho, hl = host(q), host(k), host(v), host(out), host(lse)
        for (b, qs), (_, ks) in zip(varlen_pieces(cq), varlen_pieces(ck)):
            ref, ref_lse = attention64(
                hq[None, qs], hkk[None, ks], hv[None, ks], opts.get("causal", False), None,
                opts.get("window_size", (-1, -1)), opts.get("softcap", 0.0), alibi, with_lse=True,
            )  # fmt: skip
            if qs.stop > qs.start:
                assert_close(ho[qs], ref[0], dtype, f"sequence {b}")
                assert_lse_close(hl[:, qs], ref_lse[0], 2e-2, f"sequence {b} lse")


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [64, 128])
def test_flash_attn_varlen_sequences_stay_apart(rng, dim):
    """A packed sequence of NaN between others (lengths off the tiles' edges): the Hopper kernel's query and key
    copies run past a sequence's end into the next one, so nothing of it may reach its neighbours' outputs."""
    import torch

    lengths = [100, 77, 130, 1]
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    q, k, v = (torch.randn(int(cu[-1]), 4, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for x in (q, k, v):
        x[cu[1] : cu[2]] = float("nan")
    for causal in (False, True):
        out = xopsaot.flash_attn_varlen(q, k, v, ints(cu, "gpu"), ints(cu, "gpu"), 130, 130, causal=causal)
        note_variant("gpu")
        hq, hk, hv, ho = host(q), host(k), host(v), host(out)
        for b, qs in varlen_pieces(cu):
            if b != 1:
                ref = attention64(hq[None, qs], hk[None, qs], hv[None, qs], causal)
                assert_close(ho[qs], ref[0], "bfloat16", f"sequence {b}, causal={causal}")


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_flash_attn_varlen_tile_edges(rng, poison, dtype, dim):
    """Packed prefill at Hopper's 128- and 192-row tile edges +-1, with empty and one-token sequences between them
    and one sequence with more keys than queries (causal aligns bottom-right); then 600 sequences of 0-5 tokens."""
    import torch

    cases = (
        [127, 128, 129, 0, 191, 192, 193, 1, 0, 300, 64, 65, 257, 383, 385],
        rng.integers(0, 6, 600).tolist(),
    )
    h, hk = 8, 2
    for lengths_q in cases:
        lengths_k = list(lengths_q)
        lengths_k[2] += 50
        cq, ck = (np.concatenate([[0], np.cumsum(n)]).astype(np.int32) for n in (lengths_q, lengths_k))
        q = torch.randn(int(cq[-1]), h, dim, device="cuda", dtype=getattr(torch, dtype))
        k, v = (torch.randn(int(ck[-1]), hk, dim, device="cuda", dtype=getattr(torch, dtype)) for _ in range(2))
        for causal in (False, True):
            out, lse = xopsaot.flash_attn_varlen(
                q, k, v, ints(cq, "gpu"), ints(ck, "gpu"), max(lengths_q), max(lengths_k), causal=causal,
                return_lse=True,
            )  # fmt: skip
            note_variant("gpu")
            hq, hkk, hv, ho, hl = host(q), host(k), host(v), host(out), host(lse)
            for (b, qs), (_, ks) in zip(varlen_pieces(cq), varlen_pieces(ck)):
                if qs.stop == qs.start:
                    continue
                ref, ref_lse = attention64(hq[None, qs], hkk[None, ks], hv[None, ks], causal, with_lse=True)
                what = f"{len(lengths_q)} sequences, causal={causal}, sequence {b}"
                assert_close(ho[qs], ref[0], dtype, what)
                assert_lse_close(hl[:, qs], ref_lse[0], 2e-2, what)


# ---- flash_attn_with_kvcache ----


def paged(caches, page_size: int, rng):
    """Contiguous caches (batch, capacity, hk, d) moved into pools of pages in shuffled order, with spare pages no
    table points at, and the block table."""
    batch, capacity = caches[0].shape[:2]
    per = capacity // page_size
    n_pages = batch * per + 3
    table = rng.permutation(n_pages)[: batch * per].reshape(batch, per).astype(np.int32)
    pools = []
    for cache in caches:
        pool = rng.standard_normal((n_pages, page_size) + cache.shape[2:]).astype(np.float32)
        for b in range(batch):
            for p in range(per):
                pool[table[b, p]] = cache[b, p * page_size : (p + 1) * page_size]
        pools.append(pool)
    return pools, table


def to_where(a, dtype, where):
    if where == "cpu":
        if dtype == "bfloat16":
            return a.astype(pytest.importorskip("ml_dtypes").bfloat16)
        return a.astype(dtype)
    import torch

    return torch.from_numpy(a).to(getattr(torch, dtype)).cuda()


def sequence_slots(b: int, length: int, new: int, table, page: int):
    """Cache indices of sequence b's first length + new tokens (rows of the contiguous cache, or (page, slot) through
    the block table), and those of the new tokens among them."""
    pos = np.arange(length + new)
    rows = (np.full(pos.size, b), pos) if table is None else (table[b, pos // page], pos % page)
    return rows, tuple(r[length:] for r in rows)


PAGED_BATCHES = {  # (query lengths, key lengths) of flash_attn_varlen's paged form
    # prefill chunks, decode steps, an empty query sequence and an empty key sequence: attn_fwd reads the pool
    "mixed": ([37, 1, 0, 200, 5, 1], [300, 1000, 17, 200, 0, 129]),
    # at least 128 queries a sequence on average: on Hopper the pages are copied to packed rows for attn_fwd_ws
    "prefill": ([300, 129, 0, 700, 64], [300, 1000, 17, 900, 64]),
}


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("kv", ["16-bit", "fp8"])
@pytest.mark.parametrize("page_size, dim, dtype", [(16, 128, "float16"), (128, 64, "bfloat16")])
@pytest.mark.parametrize("lengths", list(PAGED_BATCHES))
def test_flash_attn_varlen_paged(request, rng, where, kv, page_size, dim, dtype, lengths):
    """flash-attn's paged varlen form (block_table): packed queries against pools of pages through a shuffled table
    with spare pages; sequence b's keys are its first cu_seqlens_k lengths of its table row. Every slot no sequence
    uses (past each sequence's keys, and the spare pages) holds NaN. Causal (bottom-right) and not, with lse, against
    float64; the caches 16-bit or fp8 e4m3 with per-tensor scales."""
    if where == "gpu":
        request.getfixturevalue("poison")
    lengths_q, lengths_k = PAGED_BATCHES[lengths]
    cq, ck = (np.concatenate([[0], np.cumsum(n)]).astype(np.int32) for n in (lengths_q, lengths_k))
    batch, h, hk, capacity = len(lengths_q), 8, 2, 1024
    caches = [np.clip(rng.standard_normal((batch, capacity, hk, dim)), -4, 4) for _ in range(2)]
    for cache in caches:
        for b, n in enumerate(lengths_k):
            cache[b, n:] = np.nan
    pools, table = paged(caches, page_size, rng)
    for pool in pools:
        pool[np.setdiff1d(np.arange(pool.shape[0]), table)] = np.nan
    scales = (0.01, 0.02) if kv == "fp8" else (1.0, 1.0)
    if kv == "fp8":
        kc, vc = (fp8(pool, scale, where) for pool, scale in zip(pools, scales))
        held = [fp8_held(pool, scale, where) for pool, scale in zip(pools, scales)]
    else:
        kc, vc = (to_where(pool, dtype, where) for pool in pools)
        held = [host(x).astype(np.float64) for x in (kc, vc)]
    q = arr(rng, (int(cq[-1]), h, dim), dtype, where)
    for causal in (False, True):
        out, lse = xopsaot.flash_attn_varlen(
            q, kc, vc, ints(cq, where), ints(ck, where), max(lengths_q), max(lengths_k), causal=causal,
            return_lse=True, block_table=ints(table, where), k_scale=scales[0], v_scale=scales[1],
        )  # fmt: skip
        note_variant(where)
        if where == "gpu" and kv == "16-bit" and lengths == "prefill":
            import torch

            if torch.cuda.get_device_capability() == (9, 0):  # the pages copied to packed rows for attn_fwd_ws
                launched = _library.recent_variants(3)  # newest first
                kernels = [_library.manifest()["variants"][i]["kernel"] for i in launched]
                assert kernels == ["attn_fwd_ws", "kv_gather", "kv_gather"], kernels
                GPU_USED.update(launched)
        hq, ho, hl = host(q), host(out), host(lse)
        for (b, qs), n in zip(varlen_pieces(cq), lengths_k):
            if qs.stop == qs.start:
                continue
            pos = np.arange(n)
            keys, values = (x[table[b, pos // page_size], pos % page_size] for x in held)
            ref, ref_lse = attention64(hq[None, qs], keys[None], values[None], causal, with_lse=True)
            what = f"{kv} pages of {page_size}, causal={causal}, sequence {b}"
            assert_close(ho[qs], ref[0], dtype, what)
            assert_lse_close(hl[:, qs], ref_lse[0], 2e-2, what)


@pytest.mark.parametrize("where", PATHS)
def test_flash_attn_varlen_paged_bad_input(rng, where):
    q = arr(rng, (20, 4, 64), "float16", where)
    pool = arr(rng, (6, 16, 2, 64), "float16", where)  # 6 pages of 16
    cq, ck, table = ints([0, 10, 20], where), ints([0, 20, 23], where), ints([[0, 1], [2, 3]], where)
    xopsaot.flash_attn_varlen(q, pool, pool, cq, ck, 10, 20, block_table=table)
    with pytest.raises(ValueError, match="block_table.*int32"):
        xopsaot.flash_attn_varlen(q, pool, pool, cq, ck, 10, 20, block_table=host_int64([[0, 1], [2, 3]], where))
    with pytest.raises(ValueError, match=r"block_table\[1\] points at page 9"):
        xopsaot.flash_attn_varlen(q, pool, pool, cq, ints([0, 3, 23], where), 10, 20,
                                  block_table=ints([[0, 1], [2, 9]], where))  # fmt: skip
    with pytest.raises(ValueError, match="max_seqlen_k=40 exceeds the 2 pages of 16"):
        xopsaot.flash_attn_varlen(q, pool, pool, cq, ck, 10, 40, block_table=table)
    with pytest.raises(ValueError, match="block_table has 2 rows but cu_seqlens_q has batch 1"):
        xopsaot.flash_attn_varlen(q, pool, pool, ints([0, 20], where), ints([0, 20], where), 20, 20,
                                  block_table=table)  # fmt: skip
    with pytest.raises(ValueError, match="k must have 4 dims"):
        xopsaot.flash_attn_varlen(q, q, q, cq, ck, 10, 20, block_table=table)
    with pytest.raises(ValueError, match="k_scale and v_scale apply to an float8_e4m3fn cache"):
        xopsaot.flash_attn_varlen(q, pool, pool, cq, ck, 10, 20, block_table=table, k_scale=2.0)


KV_CASES = {  # seqlen_q, new tokens, options
    "decode": (1, 0, {}),
    "decode_append": (1, 1, {}),
    "chunk_append_causal": (40, 40, {"causal": True}),
    "split3": (1, 0, {"num_splits": 3}),
    "split70": (1, 0, {"num_splits": 70}),  # the combine's chunks of splits (16 to 64 per step), most slices empty
    "softcap_window": (1, 0, {"softcap": 4.0, "window_size": (50, 0)}),
    "chunk_softcap": (40, 0, {"softcap": 4.0, "causal": True}),
}


@pytest.mark.parametrize("where", PATHS)
# pages of 8 keep attn_fwd on sm_90; pages of 16 and 128 take attn_decode_tma where a step has few programs
@pytest.mark.parametrize("layout", ["contiguous", "paged8", "paged16", "paged128"])
@pytest.mark.parametrize("case", list(KV_CASES))
def test_flash_attn_with_kvcache(request, rng, where, layout, case):
    if where == "gpu":
        request.getfixturevalue("poison")
    seqlen_q, new, options = KV_CASES[case]
    batch, h, hk, capacity = 3, 8, 2, 512
    combos = (
        [("bfloat16", 128)] if where == "cpu" else [(t, d) for t in ("float16", "bfloat16") for d in (64, 128, 256)]
    )
    for dtype, dim in combos:
        # cache_seqlens differ per sequence; one sequence fills the cache to its last slot
        lengths = np.array([0, 100, capacity - new], dtype=np.int32) if new else np.array([1, 100, capacity], np.int32)
        caches = [rng.standard_normal((batch, capacity, hk, dim)).astype(np.float32) for _ in range(2)]
        table, page = None, 0
        if layout != "contiguous":
            page = int(layout[5:])
            caches, table = paged(caches, page, rng)
        kc, vc = (to_where(c, dtype, where) for c in caches)
        before = [host(kc).copy(), host(vc).copy()]
        q = to_where(rng.standard_normal((batch, seqlen_q, h, dim)).astype(np.float32), dtype, where)
        extra = {"cache_seqlens": ints(lengths, where)}
        if table is not None:
            extra["block_table"] = ints(table, where)
        if new:
            extra["k"], extra["v"] = (
                to_where(rng.standard_normal((batch, new, hk, dim)).astype(np.float32), dtype, where) for _ in range(2)
            )
        out, lse = xopsaot.flash_attn_with_kvcache(q, kc, vc, return_lse=True, **extra, **options)
        if where == "gpu":  # small batches split the keys; once more in one slice (appending again is idempotent)
            unsplit = xopsaot.flash_attn_with_kvcache(q, kc, vc, **extra, **{**options, "num_splits": 1})
            note_variant(where)
            assert_close(host(unsplit), host(out).astype(np.float64), dtype, f"{case} {layout}: 1 vs {options}")
        expect = [c.copy() for c in before]
        hq = host(q)
        for b in range(batch):
            rows, fresh = sequence_slots(b, int(lengths[b]), new, table, page)
            if new:
                expect[0][fresh], expect[1][fresh] = host(extra["k"])[b], host(extra["v"])[b]
            ref, ref_lse = attention64(
                hq[b : b + 1], expect[0][rows][None], expect[1][rows][None], options.get("causal", False), None,
                options.get("window_size", (-1, -1)), options.get("softcap", 0.0), with_lse=True,
            )  # fmt: skip
            what = f"{case} {layout} {dtype} dim {dim} sequence {b}"
            assert_close(host(out)[b], ref[0], dtype, what)
            assert_lse_close(host(lse)[b], ref_lse[0], 2e-2, what + " lse")
        # the caches changed exactly where the new tokens went
        np.testing.assert_array_equal(host(kc), expect[0])
        np.testing.assert_array_equal(host(vc), expect[1])


def rounded_caches(rng, shape, dtype) -> list:
    """Keys and values as float32 arrays holding values of `dtype` (the reference then sees what the GPU holds)."""
    import torch

    caches = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    return [torch.from_numpy(c).to(getattr(torch, dtype)).float().numpy() for c in caches]


def check_decode64(out, q, caches, lengths, dtype, what):
    """Each sequence b of a decode step's output against float64 attention over its first lengths[b] keys."""
    hq, ho = host(q), host(out)
    for b, n in enumerate(int(n) for n in lengths):
        ref = attention64(hq[b : b + 1], caches[0][b : b + 1, :n], caches[1][b : b + 1, :n])
        assert_close(ho[b], ref[0], dtype, f"{what}, sequence {b} of {n} keys")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("page", [None, 3, 8, 16, 48, 64, 128])
def test_decode_in_one_unsplit_wave(request, rng, dtype, page):
    """A decode step whose batch x key heads fill the GPU's multiprocessors but for a few: on sm_90 the table's
    ONE_WAVE configs run it unsplit where split-KV would halve it (the launch-path tests check the choice), at cache
    lengths that differ per sequence (1, 17, a tile edge, the whole cache), GQA 4; a contiguous cache, or pages of
    8 to 128 tokens in shuffled order, whose config reads the block table in chunks of 256 pages (pages of 48, which
    neither divide nor are a multiple of its 64-key blocks, take its general loop); pages of 3 take the usual decode
    config. (Caches of 2048 keys or more with pages of 16 to 128 take attn_decode_tma instead:
    test_decode_pages_in_pool_order.)"""
    import torch

    request.getfixturevalue("poison")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    h, hk, dim, capacity = 16, 4, 128, 1152
    batch = sms // hk
    lengths = rng.integers(1, capacity + 1, batch).astype(np.int32)
    lengths[:4] = [1, 17, 64, capacity]
    caches = rounded_caches(rng, (batch, capacity, hk, dim), dtype)
    stored, extra = caches, {}
    if page is not None:
        stored, table = paged(caches, page, rng)
        extra["block_table"] = ints(table, "gpu")
    kc, vc = (to_where(c, dtype, "gpu") for c in stored)
    q = to_where(rng.standard_normal((batch, 1, h, dim)).astype(np.float32), dtype, "gpu")
    out = xopsaot.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=ints(lengths, "gpu"), **extra)
    note_variant("gpu")
    if torch.cuda.get_device_capability() == (9, 0):
        label = _library.manifest()["variants"][_library.last_variant()]["label"]
        one_wave = page is None or page >= 8
        assert ("ONE_WAVE=True" in label) == one_wave, label
        assert ("TABLE_CHUNK=256" in label) == (one_wave and page is not None), label
    check_decode64(out, q, caches, lengths, dtype, f"one wave {dtype} page {page}")


def gpu_caches(stored, caches, kv: str, dtype: str, scales):
    """The stored caches (or pools) on the GPU, in dtype or as fp8 with scales, and what the reference then reads:
    the caches themselves, or an fp8 cache's values decoded, times their scales."""
    if kv == "fp8":
        kc, vc = (fp8(c, scale, "gpu") for c, scale in zip(stored, scales))
        return kc, vc, [fp8_held(c, scale, "gpu") for c, scale in zip(caches, scales)]
    kc, vc = (to_where(c, dtype, "gpu") for c in stored)
    return kc, vc, caches


def decode_tma_ran() -> None:
    """After a decode step: its kernels (attn_combine after it where split) count as run, and on sm_90 the step
    took attn_decode_tma."""
    import torch

    host_sync()
    launched = _library.recent_variants(2)  # newest first: the decode kernel, or attn_combine after it
    split = _library.manifest()["variants"][launched[0]]["kernel"] == "attn_combine"
    GPU_USED.update(launched[: 1 + split])
    if torch.cuda.get_device_capability() == (9, 0):
        label = _library.manifest()["variants"][launched[int(split)]]["label"]
        assert label.startswith("attn_decode_tma/"), label


DECODE_TMA_CASES = {  # group, seqlen_q, options
    "mha": (1, 1, {}),
    "gqa4": (4, 1, {}),
    "gqa8_window": (8, 1, {"window_size": (100, 0)}),
    "gqa4_chunk_causal": (4, 4, {"causal": True}),
    "gqa8_chunk_causal": (8, 4, {"causal": True}),
    "gqa4_split3": (4, 1, {"num_splits": 3}),
}


@pytest.mark.gpu
@pytest.mark.parametrize("kv", ["16-bit", "fp8"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("page", [None, 16, 48, 256])
def test_decode_tma_stale_slots(request, rng, kv, dtype, dim, page):
    """Decode and short causal chunks from a cache whose slots past each sequence hold NaN, as a server's unused
    slots may: on sm_90 attn_decode_tma (TMA copies of 16-key runs) serves these steps of few programs, and its last
    block's stale rows must reach neither the scores nor PV. A contiguous cache (page None) of 760 slots, whose
    last run of each sequence reaches into the next, or pages of 16, 48 and 256. Cache lengths 1, 17, a 64-key tile
    edge +-1 and the whole cache; GQA 1, 4 and 8 (up to 32 rows per key head); a window; automatic and 3 slices;
    lse against float64. The cache in the queries' dtype or fp8 e4m3 with per-tensor scales (NaN its code 0x7f)."""
    request.getfixturevalue("poison")
    batch, hk, capacity = 5, 2, 768 if page else 760
    lengths = np.array([1, 17, 63, 65, capacity], dtype=np.int32)
    caches = rounded_caches(rng, (batch, capacity, hk, dim), dtype)
    extra = {"cache_seqlens": ints(lengths, "gpu")}
    scales = (0.01, 0.02)  # an fp8 cache's: values within +-4 stay short of e4m3's 448
    if kv == "fp8":
        caches = [np.clip(c, -4, 4) for c in caches]
        extra.update(k_scale=scales[0], v_scale=scales[1])
    if page is None:
        stored = [c.copy() for c in caches]
        for cache, (b, n) in ((c, bn) for c in stored for bn in enumerate(lengths)):
            cache[b, n:] = np.nan
    else:
        stored, table = paged(caches, page, rng)
        for b, n in enumerate(lengths):
            for pos in range(n, capacity):
                for pool in stored:
                    pool[table[b, pos // page], pos % page] = np.nan
        extra["block_table"] = ints(table, "gpu")
    kc, vc, caches = gpu_caches(stored, caches, kv, dtype, scales)
    for case, (group, seqlen_q, options) in DECODE_TMA_CASES.items():
        q = to_where(rng.standard_normal((batch, seqlen_q, hk * group, dim)).astype(np.float32), dtype, "gpu")
        out, lse = xopsaot.flash_attn_with_kvcache(q, kc, vc, return_lse=True, **extra, **options)
        decode_tma_ran()
        for b, n in enumerate(int(n) for n in lengths):
            ref, ref_lse = attention64(
                host(q)[b : b + 1], caches[0][b : b + 1, :n], caches[1][b : b + 1, :n], options.get("causal", False),
                None, options.get("window_size", (-1, -1)), with_lse=True,
            )  # fmt: skip
            what = f"{case} {kv} {dtype} dim {dim} page {page}, sequence {b} of {n} keys"  # page None: contiguous
            assert_close(host(out)[b], ref[0], dtype, what)
            assert_lse_close(host(lse)[b], ref_lse[0], 2e-2, what + " lse")


POOL_ORDER_CASES = {  # seqlen_q, options
    "decode": (1, {}),
    "one slice": (1, {"num_splits": 1}),
    "four slices": (1, {"num_splits": 4}),
    "window": (1, {"window_size": (3000, 0), "num_splits": 1}),
    "chunk causal": (4, {"causal": True, "num_splits": 2}),
}


@pytest.mark.gpu
@pytest.mark.parametrize("kv", ["16-bit", "fp8"])
@pytest.mark.parametrize("page", [16, 32, 48, 64, 128])
def test_decode_pages_in_pool_order(request, rng, kv, page):
    """attn_decode_tma's loader takes the pages of the blocks every row sees whole in the order they lie in the pool,
    128 table entries at a time, after the first three such blocks, where a slice has at least 8 more (16-bit caches; an
    fp8 cache's keep table order): sequences of up to 6144 keys (several windows of entries and a partial last one at
    pages of 16, lengths off the block edges, one key), pages of 16 to 128 shuffled through a pool (those of 48, which
    do not divide a block, in table order), GQA 4 with 2 key heads (few programs: attn_decode_tma on sm_90), automatic
    slices (too short to sort), one slice (a whole sequence), four, a window whose whole blocks lie mid-sequence, causal
    chunks of 4 queries in two slices; bf16 queries, the cache 16-bit or fp8 with scales, against float64."""
    request.getfixturevalue("poison")
    dtype, batch, hk, group, dim, capacity = "bfloat16", 3, 2, 4, 128, 6144
    lengths = np.array([capacity, int(rng.integers(2000, capacity - 200)) | 1, 1], dtype=np.int32)
    caches = rounded_caches(rng, (batch, capacity, hk, dim), dtype)
    extra = {"cache_seqlens": ints(lengths, "gpu")}
    scales = (0.01, 0.02)
    if kv == "fp8":
        caches = [np.clip(c, -4, 4) for c in caches]
        extra.update(k_scale=scales[0], v_scale=scales[1])
    stored, table = paged(caches, page, rng)
    extra["block_table"] = ints(table, "gpu")
    kc, vc, caches = gpu_caches(stored, caches, kv, dtype, scales)
    for case, (seqlen_q, options) in POOL_ORDER_CASES.items():
        q = to_where(rng.standard_normal((batch, seqlen_q, hk * group, dim)).astype(np.float32), dtype, "gpu")
        out = xopsaot.flash_attn_with_kvcache(q, kc, vc, **extra, **options)
        decode_tma_ran()
        for b, n in enumerate(int(n) for n in lengths):
            ref = attention64(
                host(q)[b : b + 1], caches[0][b : b + 1, :n], caches[1][b : b + 1, :n], options.get("causal", False),
                None, options.get("window_size", (-1, -1)),
            )  # fmt: skip
            assert_close(host(out)[b], ref[0], dtype, f"{case} {kv} page {page}, sequence {b} of {n} keys")


@pytest.mark.gpu
@pytest.mark.parametrize("kv", ["16-bit", "fp8"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dim", [48, 64, 96, 128])
@pytest.mark.parametrize("page", [None, 16])
@pytest.mark.parametrize("hk", [2, 8])
def test_decode_of_many_programs(request, rng, kv, dtype, dim, page, hk):
    """A decode step of 40 or 160 programs (20 sequences x 2 or 8 key heads, GQA 4; 160 are more than a wave),
    more than attn_decode_tma takes from a 16-bit cache of 320 keys: attn_fwd's decode configs on sm_90; an fp8
    cache's (with scales) still on attn_decode_tma, which takes those at any count at head dim 128, and 64 if paged.
    Head dims 48 and 96 run on attn_fwd's tiles of 64 and 128 (lanes masked). Automatic slices and unsplit,
    contiguous and paged caches, against float64."""
    import torch

    request.getfixturevalue("poison")
    batch, h, capacity = 20, 4 * hk, 320
    lengths = rng.integers(1, capacity + 1, batch).astype(np.int32)
    caches = rounded_caches(rng, (batch, capacity, hk, dim), dtype)
    stored, extra = caches, {"cache_seqlens": ints(lengths, "gpu")}
    if page is not None:
        stored, table = paged(caches, page, rng)
        extra["block_table"] = ints(table, "gpu")
    if kv == "fp8":  # the reference reads what the cache holds: the values decoded, times their scales
        scales = (0.01, 0.02)
        kc, vc = (fp8(np.clip(c, -4, 4), scale, "gpu") for c, scale in zip(stored, scales))
        caches = [fp8_held(np.clip(c, -4, 4), scale, "gpu") for c, scale in zip(caches, scales)]
        extra.update(k_scale=scales[0], v_scale=scales[1])
    else:
        kc, vc = (to_where(c, dtype, "gpu") for c in stored)
    q = to_where(rng.standard_normal((batch, 1, h, dim)).astype(np.float32), dtype, "gpu")
    for splits in (0, 1):
        out = xopsaot.flash_attn_with_kvcache(q, kc, vc, num_splits=splits, **extra)
        host_sync()
        launched = _library.recent_variants(2)  # newest first: attn_combine where split, then the step's kernel
        step = launched[1] if _library.manifest()["variants"][launched[0]]["kernel"] == "attn_combine" else launched[0]
        GPU_USED.update(launched[: launched.index(step) + 1])
        if torch.cuda.get_device_capability() == (9, 0):
            kernel = _library.manifest()["variants"][step]["kernel"]
            tma = kv == "fp8" and (dim == 128 or (dim == 64 and page is not None))
            assert (kernel == "attn_decode_tma") == tma, kernel
        check_decode64(out, q, caches, lengths, dtype, f"{splits} slices, {kv} {dtype}, dim {dim}, page {page}")


@pytest.mark.gpu
@pytest.mark.parametrize("programs", ["one wave", "few"])
@pytest.mark.parametrize("page", [8, 16, 128])
def test_unchecked_block_table_reads_only_the_cache(rng, page, programs):
    """validate=False trusts the block table: entries outside the pool (negative, past its end) give a wrong answer,
    never a read outside the cache (run under compute-sanitizer memcheck) or a fault; the sequences whose tables are
    good are still right. On sm_90 a step of one wave runs on the one-wave config, which reads the table in chunks;
    one of few programs on pages of 16 or 128, on attn_decode_tma (TMA, which reads zeros outside the pool)."""
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    h, hk, dim, capacity = 16, 4, 128, 1024
    batch = sms // hk if programs == "one wave" else 4
    lengths = np.full(batch, capacity, dtype=np.int32)
    caches = rounded_caches(rng, (batch, capacity, hk, dim), "bfloat16")
    stored, table = paged(caches, page, rng)
    n_pages = stored[0].shape[0]
    table[0, :] = -1 - np.arange(table.shape[1])
    table[1, 1::2] = n_pages + np.arange(table.shape[1] // 2)
    kc, vc = (to_where(c, "bfloat16", "gpu") for c in stored)
    q = to_where(rng.standard_normal((batch, 1, h, dim)).astype(np.float32), "bfloat16", "gpu")
    out = xopsaot.flash_attn_with_kvcache(
        q, kc, vc, cache_seqlens=ints(lengths, "gpu"), block_table=ints(table, "gpu"), validate=False
    )
    torch.cuda.synchronize()
    assert torch.isfinite(out.float()).all()
    check_decode64(out[2:], q[2:], [c[2:] for c in caches], lengths[2:], "bfloat16", f"good tables, page {page}")


@pytest.mark.gpu
@pytest.mark.parametrize("capacity", [2040, 8704])
@pytest.mark.parametrize("batch", [10, 11])
def test_decode_in_one_wave_of_slices(request, rng, batch, capacity):
    """A decode step with fewer programs than multiprocessors, more than attn_decode_tma takes on every GPU: on sm_90
    the table's ONE_WAVE config runs it split in as many slices as make one wave (SMs // (batch x 4 key heads): 3 on
    132 SMs; the launch-path tests check the choice), automatic and with that num_splits given, against float64; cache
    lengths from one key to the whole cache (most slices of the short sequences are empty). Where memory is as fast
    as an H200's (info()'s memory_gbps at least attn_fwd's FAST_MEMORY_GBPS), the cache of 8704 keys goes to
    attn_decode_tma instead, in the same slices; the one of 2040 keys (under 2048) keeps attn_fwd there too."""
    import torch

    request.getfixturevalue("poison")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    h, hk, dim = 16, 4, 128
    wave = sms // (batch * hk)
    lengths = rng.integers(1, capacity + 1, batch).astype(np.int32)
    lengths[:3] = [capacity - 5, 1, 300]
    caches = rounded_caches(rng, (batch, capacity, hk, dim), "bfloat16")
    kc, vc = (to_where(c, "bfloat16", "gpu") for c in caches)
    q = to_where(rng.standard_normal((batch, 1, h, dim)).astype(np.float32), "bfloat16", "gpu")
    (fwd,) = [k for k in _library.manifest()["kernels"] if k["name"] == "attn_fwd"]
    fast_memory = (
        xopsaot.info()["devices"][torch.cuda.current_device()]["memory_gbps"] >= fwd["exports"]["FAST_MEMORY_GBPS"]
    )
    for splits in (0, wave):
        out = xopsaot.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=ints(lengths, "gpu"), num_splits=splits)
        host_sync()
        step, combine = _library.recent_variants(2)[::-1]  # the step's kernel, then attn_combine
        GPU_USED.update((step, combine))
        kernels = [_library.manifest()["variants"][i]["kernel"] for i in (step, combine)]
        if torch.cuda.get_device_capability() == (9, 0):
            expected = "attn_decode_tma" if fast_memory and capacity >= 2048 else "attn_fwd"
            assert kernels == [expected, "attn_combine"], kernels
        check_decode64(out, q, caches, lengths, "bfloat16", f"{splits} slices")


def fp8(values: np.ndarray, scale: float, where):
    """An fp8 e4m3 cache holding values / scale, quantized by ml_dtypes (CPU) or torch (GPU), not by xopsaot."""
    stored = values.astype(np.float32) * (np.float32(1) / np.float32(scale))
    if where == "cpu":
        return stored.astype(pytest.importorskip("ml_dtypes").float8_e4m3fn)
    import torch

    return torch.from_numpy(stored).to(torch.float8_e4m3fn).cuda()


def fp8_held(values: np.ndarray, scale: float, where) -> np.ndarray:
    """What attention reads from fp8(values, scale, where): the stored e4m3 values decoded, times the scale, in
    float64."""
    return fp8_values(fp8(values, scale, where)) * scale


def fp8_bytes(cache) -> np.ndarray:
    if hasattr(cache, "detach"):
        import torch

        torch.cuda.synchronize()
        return cache.detach().cpu().view(torch.uint8).numpy()
    return np.asarray(cache).view(np.uint8)


def fp8_values(cache) -> np.ndarray:
    if hasattr(cache, "detach"):
        return cache.detach().cpu().double().numpy()
    return np.asarray(cache).astype(np.float64)


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("layout", ["contiguous", "paged16"])
@pytest.mark.parametrize("case", list(KV_CASES))
def test_fp8_cache(request, rng, where, layout, case):
    """An e4m3 cache with per-tensor scales: attention reads x * scale, appends store round(k / scale); the
    reference decodes with torch / ml_dtypes in float64."""
    if where == "gpu":
        request.getfixturevalue("poison")
    seqlen_q, new, options = KV_CASES[case]
    batch, h, hk, capacity = 3, 8, 2, 256
    if where == "gpu" and options.get("softcap"):  # not compiled with an fp8 cache: a clear error
        q = arr(rng, (batch, seqlen_q, h, 64), "bfloat16", where)
        cache = fp8(np.zeros((batch, capacity, hk, 64)), 1.0, where)
        with pytest.raises(ValueError, match="softcap with an fp8 cache is not compiled"):
            xopsaot.flash_attn_with_kvcache(q, cache, cache, **options)
        return
    k_scale, v_scale = 0.01, 0.02  # values within +-4 use the e4m3 range's upper part, short of 448
    combos = [("float16", 64)] if where == "cpu" else [(t, d) for t in ("float16", "bfloat16") for d in (64, 128, 256)]
    for dtype, dim in combos:
        lengths = np.array([0, 70, capacity - new], dtype=np.int32) if new else np.array([1, 70, capacity], np.int32)
        caches = [np.clip(rng.standard_normal((batch, capacity, hk, dim)), -4, 4) for _ in range(2)]
        table, page = None, 0
        if layout != "contiguous":
            page = int(layout[5:])
            caches, table = paged(caches, page, rng)
        caches = [np.clip(c, -4, 4) for c in caches]  # the spare pages too
        kc, vc = fp8(caches[0], k_scale, where), fp8(caches[1], v_scale, where)
        q = to_where(rng.standard_normal((batch, seqlen_q, h, dim)).astype(np.float32), dtype, where)
        extra = {"cache_seqlens": ints(lengths, where), "k_scale": k_scale, "v_scale": v_scale}
        if table is not None:
            extra["block_table"] = ints(table, where)
        fresh_k = fresh_v = None
        if new:
            fresh_k, fresh_v = (np.clip(rng.standard_normal((batch, new, hk, dim)), -4, 4) for _ in range(2))
            extra["k"], extra["v"] = to_where(fresh_k, dtype, where), to_where(fresh_v, dtype, where)
            # what the appends must store: the 16-bit inputs quantized independently
            fresh_k, fresh_v = fp8(host(extra["k"]), k_scale, where), fp8(host(extra["v"]), v_scale, where)
        before = [fp8_bytes(kc).copy(), fp8_bytes(vc).copy()]
        out, lse = xopsaot.flash_attn_with_kvcache(q, kc, vc, return_lse=True, **extra, **options)
        note_variant(where)
        expect = [c.copy() for c in before]
        hq = host(q)
        for b in range(batch):
            rows, fresh = sequence_slots(b, int(lengths[b]), new, table, page)
            if new:
                expect[0][fresh], expect[1][fresh] = fp8_bytes(fresh_k)[b], fp8_bytes(fresh_v)[b]
            keys = fp8_values(fp8_like(expect[0], kc))[rows] * k_scale
            values = fp8_values(fp8_like(expect[1], vc))[rows] * v_scale
            ref, ref_lse = attention64(
                hq[b : b + 1], keys[None], values[None], options.get("causal", False), None,
                options.get("window_size", (-1, -1)), options.get("softcap", 0.0), with_lse=True,
            )  # fmt: skip
            what = f"fp8 {case} {layout} {dtype} dim {dim} sequence {b}"
            assert_close(host(out)[b], ref[0], dtype, what)
            assert_lse_close(host(lse)[b], ref_lse[0], 2e-2, what + " lse")
        np.testing.assert_array_equal(fp8_bytes(kc), expect[0])
        np.testing.assert_array_equal(fp8_bytes(vc), expect[1])


def fp8_like(raw: np.ndarray, like):
    """Bytes as an fp8 array of like's kind, for decoding by torch or ml_dtypes."""
    if hasattr(like, "detach"):
        import torch

        return torch.from_numpy(raw).view(torch.float8_e4m3fn)
    return raw.view(pytest.importorskip("ml_dtypes").float8_e4m3fn)


def test_fp8_codec_matches_ml_dtypes(rng):
    """The CPU path's e4m3 conversions against ml_dtypes: all 256 codes decode alike (NaN where it has NaN), and
    a million values across the range encode to the same bytes (round to nearest even)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from xopsaot._fp8 import e4m3_to_float32, float32_to_e4m3

    codes = np.arange(256, dtype=np.uint8)
    np.testing.assert_array_equal(e4m3_to_float32(codes), codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32))
    values = (rng.standard_normal(1_000_000) * np.exp2(rng.integers(-12, 9, 1_000_000))).astype(np.float32)
    values = values[np.abs(values) <= 448]  # ml_dtypes turns larger values into NaN; ours saturate (below)
    values = np.concatenate([values, np.array([0.0, -0.0, -1e-30, 1e-30], np.float32)])  # zeros keep their sign
    np.testing.assert_array_equal(float32_to_e4m3(values), values.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    np.testing.assert_array_equal(float32_to_e4m3(np.array([500.0, -1e4], np.float32)), [0x7E, 0xFE])


@pytest.mark.parametrize("where", PATHS)
def test_fp8_cache_bad_input(rng, where):
    q = arr(rng, (2, 1, 4, 64), "float16", where)
    cache = fp8(rng.standard_normal((2, 32, 2, 64)), 1.0, where)
    half = arr(rng, (2, 32, 2, 64), "float16", where)
    xopsaot.flash_attn_with_kvcache(q, cache, cache, k_scale=0.5, v_scale=2.0)
    with pytest.raises(ValueError, match="k_scale and v_scale apply to an float8_e4m3fn cache, not to float16"):
        xopsaot.flash_attn_with_kvcache(q, half, half, k_scale=0.5)
    with pytest.raises(ValueError, match="must be > 0"):
        xopsaot.flash_attn_with_kvcache(q, cache, cache, v_scale=0.0)
    with pytest.raises(TypeError, match="k_scale must be a finite float"):
        xopsaot.flash_attn_with_kvcache(q, cache, cache, k_scale=float("inf"))
    with pytest.raises(TypeError, match="v_cache.dtype is float16 but k_cache.dtype is float8_e4m3fn"):
        xopsaot.flash_attn_with_kvcache(q, cache, half)
    with pytest.raises(TypeError, match="k.dtype is float8_e4m3fn but q.dtype is float16"):
        xopsaot.flash_attn_with_kvcache(q, cache, cache, k=cache[:, :1], v=cache[:, :1], cache_seqlens=3)
    with pytest.raises(TypeError, match="k.dtype is float8_e4m3fn but q.dtype is float16"):
        xopsaot.flash_attn(q, cache[:, :1], cache[:, :1])


@pytest.mark.parametrize("where", PATHS)
def test_kvcache_bad_input(request, rng, where):
    batch, hk, dim = 2, 2, 64
    q = arr(rng, (batch, 1, 4, dim), "float16", where)
    cache = arr(rng, (6, 16, hk, dim), "float16", where)  # 6 pages of 16
    table = ints([[0, 1], [2, 3]], where)
    fine = ints([20, 3], where)
    xopsaot.flash_attn_with_kvcache(q, cache, cache, cache_seqlens=fine, block_table=table)
    with pytest.raises(ValueError, match="block_table.*int32"):
        xopsaot.flash_attn_with_kvcache(
            q, cache, cache, cache_seqlens=fine, block_table=host_int64([[0, 1], [2, 3]], where)
        )
    with pytest.raises(ValueError, match=r"block_table\[1\] points at page 9"):
        xopsaot.flash_attn_with_kvcache(
            q, cache, cache, cache_seqlens=ints([3, 20], where), block_table=ints([[0, 1], [2, 9]], where)
        )
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = 40"):
        xopsaot.flash_attn_with_kvcache(q, cache, cache, cache_seqlens=ints([40, 3], where), block_table=table)
    with pytest.raises(ValueError, match="cache_seqlens.*int32"):
        xopsaot.flash_attn_with_kvcache(q, cache, cache, cache_seqlens=host_int64([1, 1], where), block_table=table)
    big = arr(rng, (batch, 1, 4, 264), "float16", where)
    with pytest.raises(ValueError, match="headdim 264; supported: up to 256"):
        xopsaot.flash_attn_with_kvcache(big, big, big)
    with pytest.raises(ValueError, match="num_splits"):
        xopsaot.flash_attn_with_kvcache(q, cache, cache, cache_seqlens=fine, block_table=table, num_splits=500)


def host_int64(values, where):
    a = np.asarray(values, dtype=np.int64)
    return a if where == "cpu" else __import__("torch").from_numpy(a).cuda()


@pytest.mark.parametrize("where", PATHS)
def test_varlen_and_dense_bad_input(rng, where):
    q = arr(rng, (10, 4, 64), "float16", where)
    with pytest.raises(ValueError, match="cu_seqlens_q.*int32"):
        xopsaot.flash_attn_varlen(q, q, q, host_int64([0, 10], where), ints([0, 10], where), 10, 10)
    with pytest.raises(ValueError, match="cu_seqlens_k ends at 12"):
        xopsaot.flash_attn_varlen(q, q, q, ints([0, 10], where), ints([0, 12], where), 10, 12)
    with pytest.raises(ValueError, match="exceeds max_seqlen_q=4"):
        xopsaot.flash_attn_varlen(q, q, q, ints([0, 10], where), ints([0, 10], where), 4, 10)
    dense = arr(rng, (1, 8, 2, 264), "float16", where)
    with pytest.raises(ValueError, match="headdim 264; supported: up to 256"):
        xopsaot.flash_attn(dense, dense, dense)
    d = arr(rng, (1, 8, 2, 64), "float16", where)
    with pytest.raises(ValueError, match="window_size"):
        xopsaot.flash_attn(d, d, d, window_size=(-2, 0))
    with pytest.raises(ValueError, match="softcap"):
        xopsaot.flash_attn(d, d, d, softcap=-1.0)
    with pytest.raises(ValueError, match="alibi_slopes must have shape"):
        xopsaot.flash_attn(
            d,
            d,
            d,
            alibi_slopes=np.zeros(3, np.float32) if where == "cpu" else __import__("torch").zeros(3, device="cuda"),
        )


@pytest.mark.gpu
def test_matches_torch_sdpa(rng, poison):
    import torch
    import torch.nn.functional as F

    q = torch.randn(2, 300, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 300, 2, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    for causal in (False, True):
        out = xopsaot.flash_attn(q, k, v, causal=causal)
        ref = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, enable_gqa=True
        ).transpose(1, 2)
        assert (out.float() - ref.float()).abs().max().item() < 2e-2


ALTERNATES_RUN = """
import json, sys
import numpy as np, torch
sys.path.insert(0, sys.argv[1])
from reference64 import attention64
import xopsaot
from xopsaot import _library

rng = np.random.default_rng(int(sys.argv[2]))
used, errors = [], []
def check(out, ref, what):
    out = out.detach().cpu().double().numpy()
    errors.append([what, float(np.abs(out - ref).max() / np.abs(ref).max()), bool(np.isfinite(out).all())])
    used.append(_library.last_variant())
for dtype in (torch.float16, torch.bfloat16):
    for dim in (64, 128):
        def t(*shape):
            return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype).cuda()
        # prefill, heads side by side, enough query blocks to fill the GPU without split-KV: the TMA kernels
        q, k, v = t(4, 1100, 8, dim), t(4, 1100, 8, dim), t(4, 1100, 8, dim)
        check(xopsaot.flash_attn(q, k, v, causal=True), attention64(q.cpu(), k.cpu(), v.cpu(), True), f"tma {dim}")
        cu = torch.tensor([0, 1100, 2200, 3300, 4400], dtype=torch.int32, device="cuda")
        out = xopsaot.flash_attn_varlen(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu, cu, 1100, 1100,
                                        causal=True)
        check(out.view(4, 1100, 8, dim), attention64(q.cpu(), k.cpu(), v.cpu(), True), f"varlen tma {dim}")
        # decode, GQA 4, one split: 18 x 2 key heads, more programs than attn_decode_tma takes
        q, kc = t(18, 1, 8, dim), t(18, 200, 2, dim)
        lengths = torch.tensor([37, 200] * 9, dtype=torch.int32, device="cuda")
        out = xopsaot.flash_attn_with_kvcache(q, kc, kc, cache_seqlens=lengths, num_splits=1)
        ref = np.concatenate([attention64(q[b:b + 1].cpu(), kc[b:b + 1, :n].cpu(), kc[b:b + 1, :n].cpu())
                              for b, n in enumerate([37, 200] * 9)])
        check(out, ref, f"decode {dim}")
        q, kc, lengths = q[:2], kc[:2], lengths[:2]
        pool, table = kc.reshape(2 * 25, 8, 2, dim), torch.arange(50, dtype=torch.int32, device="cuda").flip(0)
        out = xopsaot.flash_attn_with_kvcache(q, pool, pool, cache_seqlens=lengths, block_table=table.view(2, 25),
                                              num_splits=1)
        pages = pool.cpu()[table.view(2, 25).long().cpu()].reshape(2, 200, 2, dim)
        ref = np.concatenate([attention64(q[b:b + 1].cpu(), pages[b:b + 1, :n], pages[b:b + 1, :n])
                              for b, n in enumerate((37, 200))])
        check(out, ref, f"paged decode {dim}")
        # pages of 16: few programs, Hopper's TMA decode (attn_decode_tma), automatic slices
        pool, table = t(2 * 13, 16, 2, dim), torch.randperm(26, dtype=torch.int32, device="cuda").view(2, 13)
        out = xopsaot.flash_attn_with_kvcache(q, pool, pool, cache_seqlens=lengths, block_table=table)
        pages = pool.cpu()[table.long().cpu()].reshape(2, 208, 2, dim)
        ref = np.concatenate([attention64(q[b:b + 1].cpu(), pages[b:b + 1, :n], pages[b:b + 1, :n])
                              for b, n in enumerate((37, 200))])
        check(out, ref, f"paged decode, pages of 16, {dim}")
        # the same pool in fp8 e4m3 (attn_decode_tma's fp8 bucket); the reference reads the decoded values
        pool8 = pool.to(torch.float8_e4m3fn)
        out = xopsaot.flash_attn_with_kvcache(q, pool8, pool8, cache_seqlens=lengths, block_table=table)
        pages = pool8.cpu().double()[table.long().cpu()].reshape(2, 208, 2, dim)
        ref = np.concatenate([attention64(q[b:b + 1].cpu(), pages[b:b + 1, :n], pages[b:b + 1, :n])
                              for b, n in enumerate((37, 200))])
        check(out, ref, f"fp8 paged decode, pages of 16, {dim}")
        # causal chunks of 8 queries (32 rows per key head): attn_decode_tma's 64-row tiles, 16-bit and fp8 pools
        q8 = t(2, 8, 8, dim)
        for cache in (pool, pool8):
            out = xopsaot.flash_attn_with_kvcache(q8, cache, cache, cache_seqlens=lengths, block_table=table,
                                                  causal=True)
            pages = cache.cpu().double()[table.long().cpu()].reshape(2, 208, 2, dim)
            ref = np.concatenate([attention64(q8[b:b + 1].cpu(), pages[b:b + 1, :n], pages[b:b + 1, :n], True)
                                  for b, n in enumerate((37, 200))])
            check(out, ref, f"paged causal chunks {cache.dtype} {dim}")
        # one wave: batch x 4 key heads fill the GPU's multiprocessors (sm_90's paged ONE_WAVE bucket at dim 128)
        batch = torch.cuda.get_device_properties(0).multi_processor_count // 4
        q, pool = t(batch, 1, 16, dim), t(batch * 8, 64, 4, dim)
        table = torch.randperm(batch * 8, device="cuda").to(torch.int32).view(batch, 8)
        lengths = torch.from_numpy(rng.integers(1, 513, batch).astype(np.int32)).cuda()
        out = xopsaot.flash_attn_with_kvcache(q, pool, pool, cache_seqlens=lengths, block_table=table)
        pages = pool.cpu()[table.long().cpu()].reshape(batch, 512, 4, dim)
        ref = np.concatenate([attention64(q[b:b + 1].cpu(), pages[b:b + 1, :n], pages[b:b + 1, :n])
                              for b, n in enumerate(lengths.tolist())])
        check(out, ref, f"paged decode in one wave {dim}")
print(json.dumps({"used": used, "errors": errors}))
"""


@pytest.mark.gpu
def test_autotune_alternates_compute_the_same(rng, tmp_path):
    """Every alternate compiled for this GPU, forced through an autotune cache file that names it as the choice of
    its bucket (XOPSAOT_AUTOTUNE=1 in a subprocess), against the float64 reference. A cache holds one choice per
    bucket (its last line wins), so a bucket's k-th alternates run in the k-th subprocess."""
    import os
    import subprocess
    import sys

    manifest = _library.manifest()
    device = xopsaot.info()["devices"][0]
    archs = [a for a in manifest["archs"] if a.rstrip("a") == device["arch"]]
    alternates = [v for v in manifest["variants"] if v["alternate_of"] is not None and v["arch"] in archs]
    if not alternates:
        pytest.skip("no alternates compiled for this GPU")
    by_index = {v["index"]: v for v in manifest["variants"]}
    rounds: dict = {}  # round k: the k-th alternate of each bucket's primary
    seen = collections.Counter()  # alternates of each primary met so far
    for v in alternates:
        rounds.setdefault(seen[v["alternate_of"]], []).append(v)
        seen[v["alternate_of"]] += 1
    used = set()
    for k, chosen in sorted(rounds.items()):
        cache = tmp_path / f"autotune{k}.tsv"
        cache.write_text("".join(
            f"{device['name']}\t{by_index[v['alternate_of']]['label']}\t{v['when']}\t{v['label']}\n" for v in chosen
        ))  # fmt: skip
        env = {**os.environ, "XOPSAOT_AUTOTUNE": "1", "XOPSAOT_AUTOTUNE_CACHE": str(cache)}
        seed = str(rng.integers(1 << 31))
        tests_dir = str(Path(__file__).parent)
        result = subprocess.run([sys.executable, "-c", ALTERNATES_RUN, tests_dir, seed], env=env, capture_output=True,
                                text=True, timeout=300)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(result.stdout.strip().splitlines()[-1])
        for what, error, finite in report["errors"]:
            assert finite and error < 2e-2, f"round {k}, {what}: relative error {error:.2e}"
        used |= set(report["used"])
    assert {v["index"] for v in alternates} <= used, "an alternate was never launched"


@pytest.mark.gpu
def test_every_attention_variant_was_checked():
    """After the tests above (file order): each attn_fwd, attn_fwd_ws, attn_fwd_ws_dense, attn_decode_tma,
    attn_combine and kv_gather variant compiled for this GPU ran (kv_append is checked through the cache contents,
    which each append test compares exactly)."""
    kernels = {"attn_fwd", "attn_fwd_ws", "attn_fwd_ws_dense", "attn_decode_tma", "attn_combine", "kv_gather"}
    missing = unexercised(kernels, GPU_USED)
    assert not missing, f"attention variants never exercised: {missing}"
