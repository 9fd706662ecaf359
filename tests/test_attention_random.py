"""Random calls of the attention family against the float64 reference: each case draws its shapes and options from a
generator seeded by the case's number (so a failing case reproduces from its id), and its data from the session's
seed. The structured tests in test_attention.py pin each option; these mix them, so that the launcher's choices
(attn_fwd, the Hopper prefill kernels, attn_decode_tma, split counts, the combine) meet combinations no list names:
head dims between compiled sizes, GQA ratios against chunks of queries, pages of any size, windows with softcap,
appended tokens at a full cache's end, strided queries, fp8 caches. XOPSAOT_RANDOM_CALLS=N runs N times as many
cases (a longer sweep on a GPU)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from reference64 import assert_close, assert_lse_close, attention64, varlen_pieces
from test_attention import PATHS, fp8, fp8_bytes, fp8_values, host, ints, note_variant, paged, sequence_slots, to_where

import xopsaot

SWEEP = int(os.environ.get("XOPSAOT_RANDOM_CALLS", "1"))
DIMS = [64, 128, 64, 128, 64, 128, 40, 80, 96, 192, 256]


def draw_window(r: np.random.Generator) -> tuple[int, int]:
    if r.random() < 0.6:
        return (-1, -1)
    return (int(r.integers(0, 300)), int(r.choice([-1, 0, int(r.integers(1, 40))])))


def draw_softcap(r: np.random.Generator) -> float:
    return float(r.uniform(2, 10)) if r.random() < 0.2 else 0.0


def strided_queries(a: np.ndarray, dtype: str, where: str, r: np.random.Generator):
    """The queries, on half the calls as a view of a tensor with more heads (its rows a longer stride apart)."""
    if r.random() < 0.5:
        return to_where(a, dtype, where)
    wider = np.concatenate([a, np.zeros(a.shape[:-2] + (3, a.shape[-1]), a.dtype)], axis=-2)
    return to_where(wider, dtype, where)[..., : a.shape[-2], :]


def kvcache_call(case: int) -> dict:
    r = np.random.default_rng(7000 + case)
    hk, group = int(r.choice([1, 2, 8])), int(r.choice([1, 2, 4, 8]))
    seqlen_q = 1 if r.random() < 0.6 else int(r.integers(2, 20))
    new = seqlen_q if r.random() < 0.4 else 0
    page = [None, None, 3, 8, 16, 32, 48, 64, 128, 256][int(r.integers(0, 10))]
    capacity = int(page * r.integers(1, 1200 // page + 2)) if page else int(r.integers(1, 1200))
    capacity = max(capacity, new + 1)
    if page:
        capacity = -(-capacity // page) * page
    batch = int(r.integers(1, 6))
    lengths = r.integers(0, capacity - new + 1, size=batch)
    lengths[int(r.integers(0, batch))] = capacity - new  # one sequence reaches the cache's last slot
    splits = [0, 0, 0, 1, int(r.integers(2, 9))][int(r.integers(0, 5))]
    call = dict(
        dtype=str(r.choice(["float16", "bfloat16"])), dim=int(r.choice(DIMS)), hk=hk, h=hk * group, batch=batch,
        seqlen_q=seqlen_q, new=new, page=page, capacity=capacity, lengths=lengths.astype(np.int32),
        causal=bool(r.random() < 0.5), window=draw_window(r), softcap=draw_softcap(r), num_splits=splits,
        lse=bool(r.random() < 0.5), fp8=bool(r.random() < 0.25),
    )  # fmt: skip
    if call["fp8"]:  # an e4m3 cache with per-tensor scales; no softcap (not compiled with one), nothing appended
        call.update(softcap=0.0, new=0)
    return call


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("case", range(40 * SWEEP))
def test_kvcache_random_call(request, rng, where, case):
    if where == "gpu":
        request.getfixturevalue("poison")
    c = kvcache_call(case)
    dtype, dim, batch, new = c["dtype"], c["dim"], c["batch"], c["new"]
    caches = [rng.standard_normal((batch, c["capacity"], c["hk"], dim)).astype(np.float32) for _ in range(2)]
    table = None
    if c["page"]:
        caches, table = paged(caches, c["page"], rng)
    extra = {"cache_seqlens": ints(c["lengths"], where)}
    if c["fp8"]:  # values within +-4 stay short of e4m3's 448 at these scales
        scales = (0.01, 0.02)
        kc, vc = (fp8(np.clip(x, -4, 4), scale, where) for x, scale in zip(caches, scales))
        before = [fp8_values(kc) * scales[0], fp8_values(vc) * scales[1]]  # what the reference reads
        raw = [fp8_bytes(kc).copy(), fp8_bytes(vc).copy()]
        extra.update(k_scale=scales[0], v_scale=scales[1])
    else:
        kc, vc = (to_where(x, dtype, where) for x in caches)
        before = [host(kc).copy(), host(vc).copy()]
    q = strided_queries(rng.standard_normal((batch, c["seqlen_q"], c["h"], dim)).astype(np.float32), dtype, where, rng)
    if table is not None:
        extra["block_table"] = ints(table, where)
    if new:
        extra["k"], extra["v"] = (
            to_where(rng.standard_normal((batch, new, c["hk"], dim)).astype(np.float32), dtype, where) for _ in range(2)
        )
    options = dict(causal=c["causal"], window_size=c["window"], softcap=c["softcap"], num_splits=c["num_splits"])
    result = xopsaot.flash_attn_with_kvcache(q, kc, vc, return_lse=c["lse"], **extra, **options)
    out, lse = result if c["lse"] else (result, None)
    note_variant(where)
    what = f"case {case} { ({k: v for k, v in c.items() if k != 'lengths'}) } lengths {c['lengths'].tolist()}"
    expect = [x.copy() for x in before]
    hq, ho = host(q), host(out)
    for b in range(batch):
        rows, fresh = sequence_slots(b, int(c["lengths"][b]), new, table, c["page"] or 0)
        if new:
            expect[0][fresh], expect[1][fresh] = host(extra["k"])[b], host(extra["v"])[b]
        ref, ref_lse = attention64(
            hq[b : b + 1], expect[0][rows][None], expect[1][rows][None], c["causal"], None, c["window"], c["softcap"],
            with_lse=True,
        )  # fmt: skip
        assert_close(ho[b], ref[0], dtype, f"{what}, sequence {b}")
        if lse is not None:
            assert_lse_close(host(lse)[b], ref_lse[0], 2e-2, f"{what}, sequence {b} lse")
    if c["fp8"]:
        np.testing.assert_array_equal(fp8_bytes(kc), raw[0], err_msg=f"{what}: the key cache")
        np.testing.assert_array_equal(fp8_bytes(vc), raw[1], err_msg=f"{what}: the value cache")
    else:
        np.testing.assert_array_equal(host(kc), expect[0], err_msg=f"{what}: the key cache")
        np.testing.assert_array_equal(host(vc), expect[1], err_msg=f"{what}: the value cache")


def attention_call(case: int) -> dict:
    r = np.random.default_rng(9000 + case)
    hk, group = int(r.choice([1, 2, 4])), int(r.choice([1, 2, 4, 8]))
    seqlen_k = int(r.choice([1, 17, 63, 64, 65, 127, 128, 129, 191, 192, 193, int(r.integers(1, 1100))]))
    seqlen_q = seqlen_k if r.random() < 0.6 else int(r.integers(1, 1100))
    return dict(
        dtype=str(r.choice(["float16", "bfloat16"])), dim=int(r.choice(DIMS)), hk=hk, h=hk * group,
        batch=int(r.integers(1, 4)), seqlen_q=seqlen_q, seqlen_k=seqlen_k, causal=bool(r.random() < 0.5),
        window=draw_window(r), softcap=draw_softcap(r),
        alibi=bool(r.random() < 0.2), lse=bool(r.random() < 0.5), varlen=bool(r.random() < 0.4),
    )  # fmt: skip


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("case", range(32 * SWEEP))
def test_flash_attn_random_call(request, rng, where, case):
    if where == "gpu":
        request.getfixturevalue("poison")
    c = attention_call(case)
    dtype, dim, batch = c["dtype"], c["dim"], c["batch"]
    if c["varlen"]:  # sequences of random lengths up to the drawn ones (one of them that long), some empty
        lengths_q = rng.integers(0, c["seqlen_q"] + 1, size=batch)
        lengths_k = rng.integers(0, c["seqlen_k"] + 1, size=batch)
        lengths_q[rng.integers(0, batch)], lengths_k[rng.integers(0, batch)] = c["seqlen_q"], c["seqlen_k"]
    else:
        lengths_q, lengths_k = np.full(batch, c["seqlen_q"]), np.full(batch, c["seqlen_k"])
    qs = [rng.standard_normal((int(n), c["h"], dim)).astype(np.float32) for n in lengths_q]
    ks = [rng.standard_normal((int(n), c["hk"], dim)).astype(np.float32) for n in lengths_k]
    vs = [rng.standard_normal((int(n), c["hk"], dim)).astype(np.float32) for n in lengths_k]
    slopes = rng.uniform(0.01, 0.3, size=c["h"]).astype(np.float32) if c["alibi"] else None
    options = dict(causal=c["causal"], window_size=c["window"], softcap=c["softcap"], return_lse=c["lse"])
    if slopes is not None:
        options["alibi_slopes"] = to_where(slopes, "float32", where)
    if c["varlen"]:
        cu_q, cu_k = (np.concatenate([[0], np.cumsum(n)]).astype(np.int32) for n in (lengths_q, lengths_k))
        q, k, v = (to_where(np.concatenate(x), dtype, where) for x in (qs, ks, vs))
        result = xopsaot.flash_attn_varlen(
            q, k, v, ints(cu_q, where), ints(cu_k, where), int(lengths_q.max()), int(lengths_k.max()), **options
        )
    else:
        q = strided_queries(np.stack(qs), dtype, where, rng)
        k, v = (to_where(np.stack(x), dtype, where) for x in (ks, vs))
        result = xopsaot.flash_attn(q, k, v, **options)
    out, lse = result if c["lse"] else (result, None)
    note_variant(where)
    what = f"case {case} {c} lengths q {lengths_q.tolist()} k {lengths_k.tolist()}"
    hq, hk, hv, ho = host(q), host(k), host(v), host(out)  # the inputs as the kernels saw them (rounded)
    hl = host(lse) if lse is not None else None
    cu_q, cu_k = (np.concatenate([[0], np.cumsum(n)]).astype(np.int32) for n in (lengths_q, lengths_k))
    for b, ((_, rows_q), (_, rows_k)) in enumerate(zip(varlen_pieces(cu_q), varlen_pieces(cu_k))):
        if lengths_q[b] == 0:
            continue
        if c["varlen"]:
            seq_q, seq_k, seq_v = hq[rows_q][None], hk[rows_k][None], hv[rows_k][None]
        else:
            seq_q, seq_k, seq_v = hq[b : b + 1], hk[b : b + 1], hv[b : b + 1]
        ref, ref_lse = attention64(
            seq_q, seq_k, seq_v, c["causal"], None, c["window"], c["softcap"],
            None if slopes is None else slopes.astype(np.float64), with_lse=True,
        )  # fmt: skip
        got = ho[rows_q] if c["varlen"] else ho[b]
        assert_close(got, ref[0], dtype, f"{what}, sequence {b}")
        if hl is not None:
            got_lse = hl[:, rows_q] if c["varlen"] else hl[b]
            assert_lse_close(got_lse, ref_lse[0], 2e-2, f"{what}, sequence {b} lse")
