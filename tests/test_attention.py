"""The attention family against the float64 reference, on the CPU path (NumPy) and on the GPU (torch CUDA, marker
gpu, outputs poisoned with NaN): every option, awkward sizes, GQA ratios, varlen with empty sequences, contiguous
and paged caches with permuted block tables, split-KV, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import make
from reference64 import assert_close, assert_lse_close, attention64, varlen_pieces

import xopsaot
from xopsaot import _library

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
GPU_USED: set[int] = set()


def arr(rng, shape, dtype, where, scale=1.0):
    if where == "cpu":
        return make(rng, shape, dtype, "numpy", scale)
    return make(rng, shape, dtype, "torch", scale, device="cuda")


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
                host(q), host(k), host(v), opts.get("causal", False), None, opts.get("window_size", (-1, -1)),
                opts.get("softcap", 0.0), None if alibi is None else host(alibi), with_lse=True,
            )  # fmt: skip
            what = f"{dtype} {(batch, sq, sk, h, hk)} {option}"
            assert_close(host(out), ref, dtype, what)
            assert_lse_close(host(lse), ref_lse, 2e-2 if dtype != "float32" else 1e-4, what)


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_flash_attn_layouts(rng, poison, dtype, dim):
    """The same attention from three layouts: contiguous and qkv-packed (heads side by side: Hopper's TMA kernel) and
    heads-major views (the general kernel), causal and not, GQA 4, a window, and lse."""
    import torch

    batch, seqlen, heads, heads_k = 2, 300, 8, 2
    qkv = torch.randn(batch, seqlen, heads + 2 * heads_k, dim, device="cuda", dtype=getattr(torch, dtype))
    packed = qkv.split([heads, heads_k, heads_k], dim=2)
    contiguous = [x.contiguous() for x in packed]
    heads_major = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in packed]
    for causal, window in ((False, (-1, -1)), (True, (-1, -1)), (False, (100, 3))):
        ref, ref_lse = attention64(*(host(x) for x in packed), causal, None, window, with_lse=True)
        for name, (q, k, v) in (("contiguous", contiguous), ("packed", packed), ("heads-major", heads_major)):
            out, lse = xopsaot.flash_attn(q, k, v, causal=causal, window_size=window, return_lse=True)
            note_variant("gpu")
            what = f"{name} causal={causal} window={window}"
            assert_close(host(out), ref, dtype, what)
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


KV_CASES = {  # seqlen_q, new tokens, options
    "decode": (1, 0, {}),
    "decode_append": (1, 1, {}),
    "chunk_append_causal": (40, 40, {"causal": True}),
    "split3": (1, 0, {"num_splits": 3}),
    "softcap_window": (1, 0, {"softcap": 4.0, "window_size": (50, 0)}),
    "chunk_softcap": (40, 0, {"softcap": 4.0, "causal": True}),
}


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("layout", ["contiguous", "paged16", "paged128"])
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
            start, n = int(lengths[b]), int(lengths[b]) + new
            pos = np.arange(n)
            rows = (np.full(n, b), pos) if table is None else (table[b, pos // page], pos % page)
            if new:
                fresh = tuple(r[start:] for r in rows)
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


@pytest.mark.gpu
def test_every_attention_variant_was_checked(request):
    """After the tests above (file order): each attn_fwd, attn_fwd_tma and attn_combine variant compiled for this
    GPU ran (kv_append is checked through the cache contents, which each append test compares exactly)."""
    import torch

    arch = torch.cuda.get_device_capability()
    served = {f"sm_{arch[0]}{arch[1]}a", f"sm_{arch[0]}{arch[1]}", f"sm_{arch[0]}0"}
    manifest = _library.manifest()
    archs = [a for a in manifest["archs"] if a in served]
    wanted = {
        v["index"]
        for v in manifest["variants"]
        if v["arch"] == archs[0] and v["kernel"] in ("attn_fwd", "attn_fwd_tma", "attn_combine")
    }
    missing = wanted - GPU_USED
    labels = [(v["kernel"], v["dtypes"], v["constexprs"]) for v in manifest["variants"] if v["index"] in missing]
    assert not missing, f"attention variants never exercised: {labels}"
