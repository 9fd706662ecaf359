"""The attention family (forward), flash-attn's layouts: dense (batch, seqlen, heads, headdim), packed varlen
(total_tokens, heads, headdim) with cumulative lengths, and KV caches, contiguous (batch, seqlen_cache, heads_k,
headdim) or paged (num_pages, page_size, heads_k, headdim) behind a block table.

One kernel serves them all. A program owns BLOCK_M rows of one key head, where a row is a (query, query head)
pair: the `group` query heads that share a key head sit in consecutive rows (GQA packing), so a decode step
with one query and eight heads per key head fills eight rows and reads its keys once. Keys stream in blocks
with an online softmax in base 2. Causality and sliding windows are one rule: query i sees keys j with
diag - window_left <= j <= diag + window_right, diag = i + seqlen_k - seqlen_q (bottom-right alignment; causal
is window_right = 0; "unlimited" arrives as a large number). Key blocks every row sees in full run without
masks; only the edge blocks pay for them. Rows that see no key write 0 and lse = +inf (flash-attn's convention).

Split-KV (flash-decoding): with num_splits > 1 each program covers one slice of its key blocks and writes an
fp32 partial and its log-sum-exp; `attn_combine` merges the slices. New keys and values of a decode step are
written into the cache by `kv_append` before attention runs.

Head dims up to 256: tiles are 64, 128 or 256 wide (BLOCK_D) and the lanes past `head_dim` are masked; the
hint that head_dim and the strides are multiples of 8 keeps the loads 16 bytes wide.

On Hopper two Gluon kernels take over where they are faster (csrc/ops/attention.c chooses): prefill whose heads
sit side by side (_attention_ws.py) and decode steps from a cache (_attention_decode.py): of few programs from a
16-bit or fp8 cache, of any count from an fp8 one, and up to a wave from a paged 16-bit one whose pages divide 128
keys.

A cache may hold fp8 e4m3 (KV = "e4m3", raw bytes): keys and values are decoded to 16-bit floats on load, by the
target's conversion instructions where it has them (sm_89 and later), else by bit arithmetic (sm_80), and the
per-tensor scales are folded into the score scale (k_scale) and the output (v_scale); kv_append quantizes new
entries with round-to-nearest-even, saturating at +-448.
"""

import json
from dataclasses import replace
from pathlib import Path

import triton
import triton.language as tl
from triton.language.extra import libdevice

from aot.spec import ALIGNED_ONLY, Config, Kernel, Target, f32, i32, i64, is_hopper, ptr, tensor_desc
from kernels_src._attention_decode import CHUNK, PAGE_RUN, attn_decode_tma
from kernels_src._attention_keys import key_blocks, visible_keys
from kernels_src._attention_ws import WG_ROWS, attn_fwd_ws, attn_fwd_ws_dense, ws_maxnreg
from kernels_src._pdl import wait_for_predecessor


@triton.jit
def _tanh(x):
    # exp2 form: the same on every backend, and exact to rounding at both ends (exp2 -> inf gives 1)
    return 1.0 - 2.0 / (1.0 + tl.math.exp2(x * 2.8853900817779268))


@triton.jit
def _from_e4m3(bits):
    """fp8 e4m3 bytes -> fp16, scaled by 2^-8: placing the 4 exponent and 3 mantissa bits in fp16's fields
    reinterprets the exponent bias 7 as 15, exact for normals and subnormals alike (callers fold 2^8 into their
    scales). The NaN code 0x7f reads as 480."""
    b = bits.to(tl.uint16)
    half = ((b & 0x80) << 8) | ((b & 0x7F) << 7)
    return half.to(tl.float16, bitcast=True)


@triton.jit
def _decode_cache(bits, dtype: tl.constexpr, NATIVE_FP8: tl.constexpr):
    """A block of fp8 cache bytes in the queries' dtype: by the targets' conversion instructions (cvt from e4m3x2,
    sm_89 and later) at their true values, else by _from_e4m3's bit arithmetic at 2^-8 of them. An fp8 decode
    step is bound by this arithmetic, not by memory (attn_fwd's NATIVE_FP8)."""
    if NATIVE_FP8:
        return bits.to(tl.float8e4nv, bitcast=True).to(dtype)
    else:
        return _from_e4m3(bits).to(dtype)


@triton.jit
def _to_e4m3(x):
    """fp32 -> fp8 e4m3 bytes, round to nearest even, saturating at +-448 (NaN is not preserved)."""
    a = tl.minimum(tl.abs(x), 448.0)
    # normals: keep 3 mantissa bits of the fp32 pattern (ties to even), then rebias the exponent from 127 to 7
    u = a.to(tl.uint32, bitcast=True)
    normal = ((u + 0x7FFFF + ((u >> 20) & 1)) >> 20) - (120 << 3)
    # subnormals (below 2^-6): multiples of 2^-9, rounded by the 1.5 * 2^23 trick; 8 is the smallest normal
    sub = ((a * 512.0 + 12582912.0) - 12582912.0).to(tl.uint32)
    magnitude = tl.where(a < 0.015625, sub, normal)
    return (magnitude | ((x.to(tl.uint32, bitcast=True) >> 24) & 0x80)).to(tl.uint8)  # the sign bit, -0 too


@triton.jit
def _attend_block(
    acc,
    m_i,
    l_i,
    q,
    K,
    V,
    BlockTable,
    start_n,
    k_len,
    stride_kp,
    stride_ks,
    stride_vp,
    stride_vs,
    page_size,
    page_shift,
    n_pages,
    max_pages,
    dim_ok,
    diag,
    window_left,
    window_right,
    slope_row,
    has_alibi,
    qk_scale,
    softcap_log2e,
    MASKED: tl.constexpr,
    PAGED: tl.constexpr,
    MODS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    NATIVE_FP8: tl.constexpr,
):
    cols = start_n + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_D)
    if PAGED:
        # each key row finds its page; rows past the table or pages outside the cache load nothing
        if page_shift >= 0:  # a power-of-two page: a shift, not an integer division per key row
            slot = cols >> page_shift
        else:
            slot = cols // page_size
        page = tl.load(BlockTable + slot, mask=(slot < max_pages) & (cols < k_len), other=-1)
        within = (cols - slot * page_size).to(tl.int64)
        k_rows = page.to(tl.int64) * stride_kp + within * stride_ks
        v_rows = page.to(tl.int64) * stride_vp + within * stride_vs
        # a page outside the cache (a key past the table, or a bad table entry) loads nothing
        load_mask = ((page >= 0) & (page < n_pages))[:, None] & dim_ok[None, :]
    else:
        k_rows = cols.to(tl.int64) * stride_ks
        v_rows = cols.to(tl.int64) * stride_vs
        if MASKED:
            load_mask = (cols[:, None] < k_len) & dim_ok[None, :]
        else:
            load_mask = dim_ok[None, :]
    k = tl.load(K + k_rows[:, None] + dims[None, :], mask=load_mask, other=0)
    if K.dtype.element_ty == tl.uint8:
        k = _decode_cache(k, q.dtype, NATIVE_FP8)
    s = _scores(q, k, cols, k_len, diag, window_left, window_right, slope_row, has_alibi, qk_scale, softcap_log2e,
                MASKED, MODS)  # fmt: skip
    v = tl.load(V + v_rows[:, None] + dims[None, :], mask=load_mask, other=0)
    if V.dtype.element_ty == tl.uint8:
        v = _decode_cache(v, q.dtype, NATIVE_FP8)
    return _online_softmax(acc, m_i, l_i, s, v)


@triton.jit
def _paged_full_blocks(acc, m_i, l_i, q, K, V, BlockTable, lo, hi, stride_kp, stride_ks, stride_vp, stride_vs,
                       page_size, n_pages, max_pages, dim_ok, qk_scale, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                       TABLE_CHUNK: tl.constexpr):  # fmt: skip
    """The key blocks [lo, hi), every one seen whole by every row, of a paged 16-bit cache without softcap or ALiBi,
    with the block table read TABLE_CHUNK pages at a time ahead of the blocks that use them, each block's pages
    then taken from registers (tl.gather). Triton pipelines a load whose address comes from another load of the
    loop (a page id) only one block ahead, after the block's arithmetic; this loop's key and value loads depend on
    the chunk's loads only, and are pipelined as a contiguous cache's are. The pipeline drains at each chunk's end,
    so chunks should span many blocks (the table's paged one-wave bucket: 256 pages of at least 8 tokens). The
    caller makes sure a block's pages fit in a chunk, (TABLE_CHUNK - 1) * page_size >= BLOCK_N, and that pages and
    blocks nest: page_size divides BLOCK_N or BLOCK_N divides page_size (every power of two from 8 tokens up)."""
    slots = tl.arange(0, TABLE_CHUNK)
    dims = tl.arange(0, BLOCK_D)
    # a block starts on a page boundary (pages dividing BLOCK_N) or inside one page (pages a multiple of it), so a
    # row's page and its offset in the page are the block's plus per-row terms computed once, out of the loop
    rows = tl.arange(0, BLOCK_N)
    row_page = rows // page_size
    k_within = (rows % page_size).to(tl.int64) * stride_ks
    v_within = (rows % page_size).to(tl.int64) * stride_vs
    chunk_keys = (TABLE_CHUNK - 1) * page_size // BLOCK_N * BLOCK_N  # whole blocks whose pages the chunk holds
    for chunk in range(lo, hi, chunk_keys):
        first = chunk // page_size
        pages = tl.load(BlockTable + first + slots, mask=first + slots < max_pages, other=0)
        # an entry outside the cache (only unvalidated input has one) reads a page of the cache instead, so the
        # rows need no mask of their own: a wrong answer for a wrong table, never a read past the cache
        pages = tl.minimum(tl.maximum(pages, 0), n_pages - 1)
        for start_n in range(chunk, tl.minimum(chunk + chunk_keys, hi), BLOCK_N):
            block_page = start_n // page_size
            offset = (start_n - block_page * page_size).to(tl.int64)  # the block's first row in its page
            page = tl.gather(pages, block_page - first + row_page, 0).to(tl.int64)
            k_rows = page * stride_kp + (offset * stride_ks + k_within)
            v_rows = page * stride_vp + (offset * stride_vs + v_within)
            k = tl.load(K + k_rows[:, None] + dims[None, :], mask=dim_ok[None, :], other=0)
            v = tl.load(V + v_rows[:, None] + dims[None, :], mask=dim_ok[None, :], other=0)
            acc, m_i, l_i = _online_softmax(acc, m_i, l_i, tl.dot(q, tl.trans(k)) * qk_scale, v)
    return acc, m_i, l_i


@triton.jit
def _scores(q, k, cols, k_len, diag, window_left, window_right, slope_row, has_alibi, qk_scale, softcap_log2e,
            MASKED: tl.constexpr, MODS: tl.constexpr):  # fmt: skip
    """Scores of q against one key block in base-2 units, masked outside the window. With MODS, soft-capped when
    softcap_log2e > 0 and with ALiBi when has_alibi: run-time switches in one compiled variant, not one variant per
    combination (a build-time trim). The switches are not free (8% of soft-capped prefill, 3% of ALiBi's, and
    10-16% of fp8 decode, measured on an H100 with them in every variant), so plain calls take MODS=False."""
    s = tl.dot(q, tl.trans(k))
    if MODS:
        if softcap_log2e > 0:
            s = _tanh(s * qk_scale) * softcap_log2e
        else:
            s = s * qk_scale
        if has_alibi != 0:
            # -slope * |i + shift - j| in the base-2 units of s (slope_row carries log2(e))
            s -= slope_row[:, None] * tl.abs(diag[:, None] - cols[None, :]).to(tl.float32)
    else:
        s = s * qk_scale
    if MASKED:
        s = tl.where(visible_keys(cols[None, :], diag[:, None], k_len, window_left, window_right), s, -float("inf"))
    return s


@triton.jit
def _online_softmax(acc, m_i, l_i, s, v):
    """Fold one block of scores s and values v into the running max m_i, sum l_i and output acc."""
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # rows that have seen no key yet
    p = tl.math.exp2(s - m_safe[:, None])
    alpha = tl.math.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_i


@triton.jit
def attn_fwd(
    Q,
    K,
    V,
    Out,
    Lse,
    Opart,
    CuSeqlensQ,
    CuSeqlensK,
    SequsedK,
    BlockTable,
    AlibiSlopes,
    stride_qb,
    stride_qs,
    stride_qh,
    stride_kb,
    stride_ks,
    stride_kh,
    stride_vb,
    stride_vs,
    stride_vh,
    stride_ob,
    stride_os,
    stride_oh,
    stride_lb,
    stride_lh,
    stride_ls,
    stride_lsplit,
    stride_psplit,
    stride_btb,
    stride_ab,
    seqlen_q,
    seqlen_k,
    head_dim,
    heads,
    group,
    num_splits,
    varlen_q,
    varlen_k,
    has_seqused_k,
    seqlen_k_new,
    page_size,
    n_pages,
    max_pages,
    window_left,
    window_right,
    write_lse,
    has_alibi,
    qk_scale,
    softcap_log2e,
    v_scale,
    BLOCK_D: tl.constexpr,
    PAGED: tl.constexpr,
    MODS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NATIVE_FP8: tl.constexpr,
    ONE_WAVE: tl.constexpr = False,  # a tag the C dispatch reads (csrc/ops/attention.c), not used here
    TABLE_CHUNK: tl.constexpr = 0,  # paged plain configs: read the block table in chunks (_paged_full_blocks)
    PDL: tl.constexpr = False,
):
    wait_for_predecessor(PDL)
    if PDL and not PAGED and num_splits > 1:
        # the successor is this step's attn_combine: its programs may take their places now and wait for ours, which
        # saves its launch (contiguous decode at 1 x 8k and 2 x 4k +2-3% on an H100); paged steps lost 3-4% so
        # (benchmarks/results/h100-2026-11-26-experiments.md, stop 30)
        tl.extra.cuda.gdc_launch_dependents()
    if NATIVE_FP8:  # the cache decodes to its true values: take out the 2^8 the scales carry for _from_e4m3
        qk_scale = qk_scale * 0.00390625
        v_scale = v_scale * 0.00390625
    # heaviest query blocks first: under causality the last blocks see the most keys
    start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    head_k = tl.program_id(1) // num_splits
    split = tl.program_id(1) % num_splits
    batch = tl.program_id(2)

    # this batch element's sequences: packed (cumulative lengths) or dense (batch strides)
    q_start = tl.load(CuSeqlensQ + batch, mask=varlen_q != 0, other=0)
    q_len = tl.load(CuSeqlensQ + batch + 1, mask=varlen_q != 0, other=0) - q_start
    q_len = tl.where(varlen_q != 0, q_len, seqlen_q)
    k_start = tl.load(CuSeqlensK + batch, mask=varlen_k != 0, other=0)
    k_len = tl.load(CuSeqlensK + batch + 1, mask=varlen_k != 0, other=0) - k_start
    k_len = tl.where(varlen_k != 0, k_len, seqlen_k)
    k_len = tl.where(has_seqused_k != 0, tl.load(SequsedK + batch, mask=has_seqused_k != 0, other=0), k_len)
    k_len += seqlen_k_new
    n_rows = q_len * group
    if start_m >= n_rows:
        return

    rows = start_m + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    q_pos = rows // group
    head = head_k * group + rows % group
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < head_dim
    q_rows = batch.to(tl.int64) * stride_qb + (q_start + q_pos).to(tl.int64) * stride_qs
    q_rows += head.to(tl.int64) * stride_qh
    q = tl.load(Q + q_rows[:, None] + dims[None, :], mask=row_ok[:, None] & dim_ok[None, :], other=0.0)

    page_shift = -1
    if PAGED and BLOCK_M > 16:
        # log2 of a power-of-two page size (the common case), else -1. Chunked prefill gains (bf16 9%, fp8 4% on an
        # H100); decode tiles keep the division, which a shift made 3.5% slower for fp8 at batch 64
        page_shift = tl.where((page_size & (page_size - 1)) == 0, 31 - libdevice.clz(page_size), -1)
    if PAGED:
        K += head_k.to(tl.int64) * stride_kh
        V += head_k.to(tl.int64) * stride_vh
        BlockTable += batch.to(tl.int64) * stride_btb
    else:
        K += batch.to(tl.int64) * stride_kb + k_start.to(tl.int64) * stride_ks + head_k.to(tl.int64) * stride_kh
        V += batch.to(tl.int64) * stride_vb + k_start.to(tl.int64) * stride_vs + head_k.to(tl.int64) * stride_vh

    shift = k_len - q_len
    diag = q_pos + shift
    slope_row = tl.zeros([BLOCK_M], dtype=tl.float32)
    if MODS:
        slope_row = tl.load(AlibiSlopes + batch * stride_ab + head, mask=row_ok & (has_alibi != 0), other=0.0)
        slope_row *= 1.4426950408889634
    # keys some row of the block sees: [begin, end); the whole blocks every row sees: [u_lo, u_hi)
    first_diag = start_m // group + shift
    last_diag = tl.minimum((start_m + BLOCK_M - 1) // group, q_len - 1) + shift
    begin, end, u_lo, u_hi = key_blocks(first_diag, last_diag, k_len, window_left, window_right, BLOCK_N)
    # this program's slice of the key blocks
    per_split = tl.cdiv(tl.cdiv(tl.maximum(end - begin, 0), BLOCK_N), num_splits)
    s_lo = begin + split * per_split * BLOCK_N
    s_hi = tl.minimum(s_lo + per_split * BLOCK_N, end)

    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    # the edges (the window's left side; the diagonal and the sequence end) in one masked loop, so the kernel
    # holds two copies of the block code, not three; then the blocks every row sees in full, unmasked
    lead = tl.maximum(begin, s_lo)
    n_lead = tl.cdiv(tl.maximum(tl.minimum(u_lo, s_hi) - lead, 0), BLOCK_N)
    trail = tl.maximum(u_hi, s_lo)
    n_trail = tl.cdiv(tl.maximum(s_hi - trail, 0), BLOCK_N)
    for i in range(0, n_lead + n_trail):
        start_n = tl.where(i < n_lead, lead + i * BLOCK_N, trail + (i - n_lead) * BLOCK_N)
        acc, m_i, l_i = _attend_block(
            acc, m_i, l_i, q, K, V, BlockTable, start_n, k_len, stride_kb, stride_ks, stride_vb, stride_vs,
            page_size, page_shift, n_pages, max_pages, dim_ok, diag, window_left, window_right, slope_row, has_alibi,
            qk_scale, softcap_log2e, True, PAGED, MODS, BLOCK_N, BLOCK_D, NATIVE_FP8,
        )  # fmt: skip
    full_lo, full_hi = tl.maximum(u_lo, s_lo), tl.minimum(u_hi, s_hi)
    nested = (BLOCK_N % page_size == 0) | (page_size % BLOCK_N == 0)
    if PAGED and TABLE_CHUNK > 0 and (TABLE_CHUNK - 1) * page_size >= BLOCK_N and nested:
        tl.static_assert(not MODS and K.dtype.element_ty != tl.uint8, "table chunks: plain 16-bit caches only")
        acc, m_i, l_i = _paged_full_blocks(
            acc, m_i, l_i, q, K, V, BlockTable, full_lo, full_hi, stride_kb, stride_ks, stride_vb, stride_vs,
            page_size, n_pages, max_pages, dim_ok, qk_scale, BLOCK_N, BLOCK_D, TABLE_CHUNK,
        )  # fmt: skip
    else:
        for start_n in range(full_lo, full_hi, BLOCK_N):
            acc, m_i, l_i = _attend_block(
                acc, m_i, l_i, q, K, V, BlockTable, start_n, k_len, stride_kb, stride_ks, stride_vb, stride_vs,
                page_size, page_shift, n_pages, max_pages, dim_ok, diag, window_left, window_right, slope_row,
                has_alibi, qk_scale, softcap_log2e, False, PAGED, MODS, BLOCK_N, BLOCK_D, NATIVE_FP8,
            )  # fmt: skip

    seen = l_i > 0
    out = tl.where(seen[:, None], acc * (v_scale / tl.where(seen, l_i, 1.0))[:, None], 0.0)
    lse = (m_i + tl.math.log2(tl.where(seen, l_i, 1.0))) * 0.6931471805599453
    q_abs = batch.to(tl.int64) * seqlen_q + q_pos  # dense: b * seqlen_q + i; packed: the token index
    q_abs = tl.where(varlen_q != 0, (q_start + q_pos).to(tl.int64), q_abs)
    if num_splits > 1:
        # partials: (split, token, head, BLOCK_D) fp32 and (split, token, head); an empty slice has lse -inf
        part_rows = split.to(tl.int64) * stride_psplit + (q_abs * heads + head) * BLOCK_D
        tl.store(Opart + part_rows[:, None] + dims[None, :], out, mask=row_ok[:, None])
        lse_rows = split.to(tl.int64) * stride_lsplit + q_abs * heads + head
        tl.store(Lse + lse_rows, tl.where(seen, lse, -float("inf")), mask=row_ok)
    else:
        o_rows = batch.to(tl.int64) * stride_ob + (q_start + q_pos).to(tl.int64) * stride_os
        o_rows += head.to(tl.int64) * stride_oh
        tl.store(Out + o_rows[:, None] + dims[None, :], out.to(Out.dtype.element_ty), mask=row_ok[:, None] & dim_ok)
        if write_lse != 0:
            lse_rows = batch.to(tl.int64) * stride_lb + head.to(tl.int64) * stride_lh
            lse_rows += (q_start + q_pos).to(tl.int64) * stride_ls
            tl.store(Lse + lse_rows, tl.where(seen, lse, float("inf")), mask=row_ok)


@triton.jit
def attn_combine(
    Opart,
    LsePart,
    Out,
    Lse,
    stride_psplit,
    stride_lsplit,
    stride_ob,
    stride_os,
    stride_oh,
    stride_lb,
    stride_lh,
    stride_ls,
    seqlen_q,
    heads,
    head_dim,
    num_splits,
    write_lse,
    BLOCK_D: tl.constexpr,
    MAX_SPLITS: tl.constexpr,
    SPLIT_CHUNK: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """Merge the split partials of one (token, head) row: out = sum_s exp(lse_s - lse) out_s. seqlen_q is the
    sequence length of dense inputs and 2^30 for packed ones (then every token is in "batch" 0). The partials come
    SPLIT_CHUNK slices at a time as one tile, the first chunk's loads issued with the lse's: one round trip to memory
    where a step has at most SPLIT_CHUNK slices (a loop over slices, unrolled by four, took one per four)."""
    wait_for_predecessor(PDL)
    row = tl.program_id(0).to(tl.int64)
    q_abs = row // heads
    head = row % heads
    batch = q_abs // seqlen_q
    q_pos = q_abs % seqlen_q
    dims = tl.arange(0, BLOCK_D)
    chunk = tl.arange(0, SPLIT_CHUNK)
    live = chunk < num_splits
    lse_c = tl.load(LsePart + chunk * stride_lsplit + row, mask=live, other=-float("inf"))
    part = tl.load(
        Opart + chunk[:, None] * stride_psplit + row * BLOCK_D + dims[None, :], mask=live[:, None], other=0.0
    )
    splits = tl.arange(0, MAX_SPLITS)
    lse_s = tl.load(LsePart + splits * stride_lsplit + row, mask=splits < num_splits, other=-float("inf"))
    m = tl.max(lse_s, axis=0)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    total = tl.sum(tl.exp(lse_s - m_safe), axis=0)
    lse = tl.where(total > 0, m_safe + tl.log(tl.where(total > 0, total, 1.0)), float("inf"))
    acc = tl.sum(tl.exp(lse_c - lse)[:, None] * part, axis=0)  # weights 0 for empty slices and rows
    for first in range(SPLIT_CHUNK, num_splits, SPLIT_CHUNK):
        live = first + chunk < num_splits
        lse_c = tl.load(LsePart + (first + chunk) * stride_lsplit + row, mask=live, other=-float("inf"))
        rows = (first + chunk)[:, None] * stride_psplit + row * BLOCK_D + dims[None, :]
        acc += tl.sum(tl.exp(lse_c - lse)[:, None] * tl.load(Opart + rows, mask=live[:, None], other=0.0), axis=0)
    o_row = batch * stride_ob + q_pos * stride_os + head * stride_oh
    tl.store(Out + o_row + dims, acc.to(Out.dtype.element_ty), mask=dims < head_dim)
    if write_lse != 0:
        tl.store(Lse + batch * stride_lb + head * stride_lh + q_pos * stride_ls, lse)


@triton.jit
def kv_append(
    KNew,
    VNew,
    KCache,
    VCache,
    CacheSeqlens,
    BlockTable,
    stride_nb,
    stride_ns,
    stride_nh,
    stride_vnb,
    stride_vns,
    stride_vnh,
    stride_kb,
    stride_ks,
    stride_kh,
    stride_vb,
    stride_vs,
    stride_vh,
    stride_btb,
    head_dim,
    paged,
    page_size,
    n_pages,
    max_pages,
    capacity,
    k_inv_scale,
    v_inv_scale,
    BLOCK_D: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """Write token t of k/v (batch, seqlen_new, heads_k, headdim) into the cache at cache_seqlens[b] + t,
    quantized as x * inv_scale when the cache is fp8. Positions past the cache's capacity or pages outside it are
    not written (the op layer rejects them)."""
    wait_for_predecessor(PDL)
    t = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    batch = tl.program_id(2).to(tl.int64)
    pos = tl.load(CacheSeqlens + batch) + t
    dims = tl.arange(0, BLOCK_D)
    if paged != 0:
        slot = pos // page_size
        page = tl.load(BlockTable + batch * stride_btb + slot, mask=(slot < max_pages) & (pos >= 0), other=-1)
        ok = (page >= 0) & (page < n_pages) & (pos >= 0)
        within = (pos - slot * page_size).to(tl.int64)
        k_row = page.to(tl.int64) * stride_kb + within * stride_ks
        v_row = page.to(tl.int64) * stride_vb + within * stride_vs
    else:
        ok = (pos >= 0) & (pos < capacity)
        k_row = batch * stride_kb + pos.to(tl.int64) * stride_ks
        v_row = batch * stride_vb + pos.to(tl.int64) * stride_vs
    mask = (dims < head_dim) & ok
    k = tl.load(KNew + batch * stride_nb + t * stride_ns + head * stride_nh + dims, mask=mask)
    v = tl.load(VNew + batch * stride_vnb + t * stride_vns + head * stride_vnh + dims, mask=mask)
    if KCache.dtype.element_ty == tl.uint8:
        k = _to_e4m3(k.to(tl.float32) * k_inv_scale)
        v = _to_e4m3(v.to(tl.float32) * v_inv_scale)
    tl.store(KCache + k_row + head * stride_kh + dims, k, mask=mask)
    tl.store(VCache + v_row + head * stride_vh + dims, v, mask=mask)


@triton.jit
def kv_gather(
    Cache,
    Packed,
    CuSeqlensK,
    BlockTable,
    stride_p,
    stride_s,
    stride_btb,
    row_width,
    page_size,
    n_pages,
    max_pages,
    BLOCK_T: tl.constexpr,
    BLOCK_W: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """Copy sequence b's first cu_seqlens_k[b + 1] - cu_seqlens_k[b] tokens of a paged cache (pages at stride_p,
    slots at stride_s, each token's heads x headdim contiguous: row_width elements) to rows cu_seqlens_k[b] on of
    Packed, so that packed prefill kernels read them (Hopper's, which load keys by TMA from packed rows). A program
    takes BLOCK_T tokens (program_id(0)) of sequence program_id(1). Table entries outside the cache copy zeros."""
    wait_for_predecessor(PDL)
    batch = tl.program_id(1)
    start = tl.load(CuSeqlensK + batch)
    pos = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    inside = pos < tl.load(CuSeqlensK + batch + 1) - start
    slot = pos // page_size
    page = tl.load(BlockTable + batch.to(tl.int64) * stride_btb + slot, mask=inside & (slot < max_pages), other=-1)
    ok = inside & (page >= 0) & (page < n_pages)
    source = page.to(tl.int64) * stride_p + (pos - slot * page_size).to(tl.int64) * stride_s
    target = (start + pos).to(tl.int64) * row_width
    for w in range(0, row_width, BLOCK_W):
        cols = w + tl.arange(0, BLOCK_W)
        x = tl.load(Cache + source[:, None] + cols[None, :], mask=ok[:, None] & (cols < row_width)[None, :], other=0.0)
        tl.store(Packed + target[:, None] + cols[None, :], x, mask=inside[:, None] & (cols < row_width)[None, :])


# --- the compiled grid ---

# Configs per target come from the committed tuning table (benchmarks/tune_attention.py writes its entries).
TUNING = json.loads((Path(__file__).with_name("attention_tuning.json")).read_text())["targets"]


# Memory at least this fast (peak GB/s, as the C op reads it from the driver and passes it as memory_gbps) wants more
# bytes in flight than the H100 (3352 GB/s) the decode rules were first measured on: the H200 (4814) takes rules of its
# own in csrc/ops/attention.c and a table bucket may hold only there ("fast_memory"). GPUs between the two, unmeasured,
# keep the H100's.
FAST_MEMORY_GBPS = 4500


def cache_dtypes_match(keys) -> bool:
    """Keys and values are q's dtype, or an fp8 cache: flash_attn_with_kvcache only, which has no ALiBi, and
    without softcap (not compiled, to keep the build's time and size in bounds)."""
    return keys["KV"] == keys["T"] or (keys["KV"] == "e4m3" and not keys.get("MODS"))


def bucket_configs(bucket, when: str, with_alternates: bool, extra: dict | None = None) -> list[Config]:
    """A table bucket's config, then (for XOPSAOT_AUTOTUNE) its alternates; entries are [BLOCK_M, BLOCK_N,
    num_warps, num_stages], optionally followed by a dict of further constexprs. `extra` constexprs join every one."""
    entries = [bucket["config"]] + (bucket.get("alternates", []) if with_alternates else [])
    configs = []
    for i, (bm, bn, warps, stages, *own) in enumerate(entries):
        constexprs = {"BLOCK_M": bm, "BLOCK_N": bn, **(own[0] if own else {}), **(extra or {})}
        configs.append(Config(constexprs, warps, stages, when=when, alternate=i > 0))
    return configs


def native_fp8(target: Target, keys) -> bool:
    """An fp8 cache on a target with e4m3 conversion instructions (CUDA sm_89 and later)."""
    return keys["KV"] == "e4m3" and target.backend == "cuda" and int(target.arch) >= 89


def attention_configs(target: Target, keys) -> list[Config]:
    """The table's configs for this target and tile width, in bucket order: each bucket but the last gets a
    predicate on rows = seqlen_q * group, and its own `when` if it has one (a C condition over the kernel's
    arguments and NUM_SMS), so the C dispatch takes the first bucket that holds for the call. Alternates, and
    buckets marked `plain`, are compiled for the plain variants only (16-bit keys, MODS off): what was measured.
    A bucket's `fp8` flag, where given, restricts it to the fp8 caches' variants (true) or to the others (false);
    `fast_memory` to GPUs whose memory reaches FAST_MEMORY_GBPS."""
    if not cache_dtypes_match(keys):
        return []
    configs = []
    tiles = TUNING[str(target.arch)]["tiles"]
    name = f"{keys['BLOCK_D']}/paged" if keys["PAGED"] and f"{keys['BLOCK_D']}/paged" in tiles else str(keys["BLOCK_D"])
    plain = keys["KV"] == keys["T"] and not keys["MODS"]
    for bucket in tiles[name]:
        if (bucket.get("plain") and not plain) or bucket.get("fp8", keys["KV"] == "e4m3") != (keys["KV"] == "e4m3"):
            continue
        conditions = [] if bucket["max_rows"] is None else [f"seqlen_q * group <= {int(bucket['max_rows'])}"]
        conditions += [f"({bucket['when']})"] if bucket.get("when") else []
        conditions += [f"memory_gbps >= {FAST_MEMORY_GBPS}"] if bucket.get("fast_memory") else []
        extra = {"NATIVE_FP8": native_fp8(target, keys)}
        configs += bucket_configs(bucket, " && ".join(conditions), plain, extra)
    return configs


def ws_configs(target: Target, keys) -> list[Config]:
    """attn_fwd_ws's tiles from the tuning table, read as every bucket is ([BLOCK_M, BLOCK_N, warps, stages]):
    its warps are one consumer's, its stages the ring's (the STAGES constexpr; Gluon pipelines nothing itself)."""
    bucket = TUNING[str(target.arch)]["ws_tiles"][str(keys["BLOCK_D"])]
    return [
        replace(
            c,
            constexprs={**c.constexprs, "STAGES": c.num_stages},
            num_stages=1,
            maxnreg=ws_maxnreg(c.constexprs["BLOCK_M"]),
        )
        for c in bucket_configs(bucket, "", True)
    ]


def decode_tma_configs(target: Target, keys) -> list[Config]:
    """attn_decode_tma's tiles from the tuning table's decode_tma_tiles (16-bit caches) or decode_tma_fp8_tiles
    ([BLOCK_N, STAGES] per head dim), the first the dispatched one and the others alternates (XOPSAOT_AUTOTUNE):
    first the `narrow` ones (ROWS=16, the transposed products) for steps of at most 16 rows per key head, then the
    64-row tile's for the rest."""
    if not cache_dtypes_match(keys):
        return []
    table = "decode_tma_fp8_tiles" if keys["KV"] == "e4m3" else "decode_tma_tiles"
    bucket = TUNING[str(target.arch)][table][str(keys["BLOCK_D"])]
    configs = []
    for rows, when, tiles in ((16, "seqlen_q * group <= 16", bucket.get("narrow")), (64, "", bucket)):
        for i, (bn, stages) in enumerate([tiles["config"], *tiles.get("alternates", [])] if tiles else []):
            constexprs = {"BLOCK_N": bn, "STAGES": stages, "ROWS": rows}
            configs.append(Config(constexprs, num_warps=4, num_stages=1, when=when, alternate=i > 0))
    return configs


COMBINE_MAX_SPLITS = 128  # the most slices of a split decode step (python/xopsaot/_ops/attention.py's MAX_SPLITS)


def aligned_stride(name: str) -> object:
    return i64(name, aligned=True, divisor=8)


# What the two Hopper prefill kernels (attn_fwd_ws for packed batches, attn_fwd_ws_dense) share: their selection keys,
# grid (a program per BLOCK_M query rows of one head), tiles and target.
HOPPER_PREFILL = dict(
    keys={"T": ["fp16", "bf16"], "BLOCK_D": [64, 128]},
    grid_args=[i32("batch")],
    grid=["cdiv(seqlen_q, BLOCK_M)", "heads", "batch"],
    configs=ws_configs,
    aligned=ALIGNED_ONLY,
    targets=is_hopper,
)


KERNELS = [
    Kernel(
        fn=attn_fwd,
        op="flash_attn",
        args=[
            ptr("Q", "T"),
            ptr("K", "KV"),
            ptr("V", "KV"),
            ptr("Out", "T"),
            ptr("Lse", "fp32", aligned=False),
            ptr("Opart", "fp32"),
            ptr("CuSeqlensQ", "i32", aligned=False),
            ptr("CuSeqlensK", "i32", aligned=False),
            ptr("SequsedK", "i32", aligned=False),
            ptr("BlockTable", "i32", aligned=False),
            ptr("AlibiSlopes", "fp32", aligned=False),
            *(aligned_stride(f"stride_{t}{a}") for t in "qkvo" for a in "bsh"),
            i64("stride_lb"),
            i64("stride_lh"),
            i64("stride_ls"),
            i64("stride_lsplit"),
            i64("stride_psplit"),
            i64("stride_btb"),
            i32("stride_ab"),
            i32("seqlen_q"),
            i32("seqlen_k"),
            i32("head_dim", aligned=True, divisor=8),
            i32("heads"),
            i32("group"),
            i32("num_splits"),
            i32("varlen_q"),
            i32("varlen_k"),
            i32("has_seqused_k"),
            i32("seqlen_k_new"),
            i32("page_size"),
            i32("n_pages"),
            i32("max_pages"),
            i32("window_left"),
            i32("window_right"),
            i32("write_lse"),
            i32("has_alibi"),
            f32("qk_scale"),
            f32("softcap_log2e"),
            f32("v_scale"),
        ],
        keys={
            "T": ["fp16", "bf16"],
            "KV": ["fp16", "bf16", "e4m3"],
            "BLOCK_D": [64, 128, 256],
            "PAGED": [False, True],
            "MODS": [False, True],
        },
        grid_args=[i32("batch"), i32("heads_k"), i32("memory_gbps")],
        grid=["cdiv(seqlen_q * group, BLOCK_M)", "heads_k * num_splits", "batch"],
        configs=attention_configs,
        aligned=ALIGNED_ONLY,
        exports={"FAST_MEMORY_GBPS": FAST_MEMORY_GBPS},
    ),
    Kernel(
        fn=attn_fwd_ws,
        op="flash_attn",
        args=[
            tensor_desc("desc_q", "T", (WG_ROWS.value, "BLOCK_D")),
            tensor_desc("desc_k", "T", ("BLOCK_N", "BLOCK_D")),
            ptr("V", "T"),
            ptr("Out", "T"),
            ptr("Lse", "fp32", aligned=False),
            ptr("CuSeqlensQ", "i32", aligned=False),
            ptr("CuSeqlensK", "i32", aligned=False),
            aligned_stride("stride_vs"),
            *(aligned_stride(f"stride_o{a}") for a in "bsh"),
            i64("stride_lb"),
            i64("stride_lh"),
            i64("stride_ls"),
            i32("seqlen_q"),
            i32("seqlen_k"),
            i32("heads"),
            i32("heads_k"),
            i32("varlen_q"),
            i32("varlen_k"),
            i32("window_left"),
            i32("window_right"),
            i32("write_lse"),
            f32("qk_scale"),
        ],
        **HOPPER_PREFILL,
    ),
    Kernel(
        fn=attn_fwd_ws_dense,
        op="flash_attn",
        args=[
            tensor_desc("desc_q", "T", (1, WG_ROWS.value, "BLOCK_D")),
            tensor_desc("desc_k", "T", (1, "BLOCK_N", "BLOCK_D")),
            tensor_desc("desc_v", "T", (1, "BLOCK_N", "BLOCK_D")),
            ptr("Out", "T"),
            ptr("Lse", "fp32", aligned=False),
            *(aligned_stride(f"stride_o{a}") for a in "bsh"),
            i64("stride_lb"),
            i64("stride_lh"),
            i64("stride_ls"),
            i32("seqlen_q"),
            i32("seqlen_k"),
            i32("heads"),
            i32("heads_k"),
            i32("window_left"),
            i32("window_right"),
            i32("write_lse"),
            f32("qk_scale"),
        ],
        **HOPPER_PREFILL,
    ),
    Kernel(
        fn=attn_decode_tma,
        op="flash_attn_with_kvcache",
        args=[
            tensor_desc("desc_k", "KV", (PAGE_RUN.value, CHUNK.value)),
            tensor_desc("desc_v", "KV", (PAGE_RUN.value, CHUNK.value)),
            ptr("Q", "T"),
            ptr("Out", "T"),
            ptr("Lse", "fp32", aligned=False),
            ptr("Opart", "fp32"),
            ptr("SequsedK", "i32", aligned=False),
            ptr("BlockTable", "i32", aligned=False),
            *(aligned_stride(f"stride_{t}{a}") for t in "qo" for a in "bsh"),
            i64("stride_lb"),
            i64("stride_lh"),
            i64("stride_ls"),
            i64("stride_lsplit"),
            i64("stride_psplit"),
            i64("stride_btb"),
            i32("seqlen_q"),
            i32("seqlen_k"),
            i32("heads"),
            i32("group"),
            i32("num_splits"),
            i32("has_seqused_k"),
            i32("seqlen_k_new"),
            i32("page_size"),
            i32("max_pages"),
            i32("paged"),
            i32("window_left"),
            i32("window_right"),
            i32("write_lse"),
            f32("qk_scale"),
            f32("v_scale"),
        ],
        keys={"T": ["fp16", "bf16"], "KV": ["fp16", "bf16", "e4m3"], "BLOCK_D": [64, 128]},
        grid_args=[i32("heads_k"), i32("batch")],
        grid=["heads_k * num_splits", "batch", "1"],
        configs=decode_tma_configs,
        aligned=ALIGNED_ONLY,
        targets=is_hopper,
    ),
    Kernel(
        fn=attn_combine,
        op="flash_attn",
        args=[
            ptr("Opart", "fp32"),
            ptr("LsePart", "fp32", aligned=False),
            ptr("Out", "T"),
            ptr("Lse", "fp32", aligned=False),
            i64("stride_psplit", aligned=True),  # token rows x BLOCK_D
            i64("stride_lsplit"),
            aligned_stride("stride_ob"),
            aligned_stride("stride_os"),
            aligned_stride("stride_oh"),
            i64("stride_lb"),
            i64("stride_lh"),
            i64("stride_ls"),
            i32("seqlen_q"),
            i32("heads"),
            i32("head_dim", aligned=True, divisor=8),
            i32("num_splits"),
            i32("write_lse"),
        ],
        keys={"T": ["fp16", "bf16"], "BLOCK_D": [64, 128, 256]},
        grid_args=[i64("rows")],
        grid=["rows", "1", "1"],
        configs=[Config({"MAX_SPLITS": COMBINE_MAX_SPLITS, "SPLIT_CHUNK": 32}, num_warps=4, num_stages=1)],
        aligned=ALIGNED_ONLY,
        exports={"MAX_SPLITS": COMBINE_MAX_SPLITS},
    ),
    Kernel(
        fn=kv_append,
        op="flash_attn_with_kvcache",
        args=[
            ptr("KNew", "T"),
            ptr("VNew", "T"),
            ptr("KCache", "KV"),
            ptr("VCache", "KV"),
            ptr("CacheSeqlens", "i32", aligned=False),
            ptr("BlockTable", "i32", aligned=False),
            *(aligned_stride(f"stride_{t}{a}") for t in ("n", "vn", "k", "v") for a in "bsh"),
            i64("stride_btb"),
            i32("head_dim", aligned=True, divisor=8),
            i32("paged"),
            i32("page_size"),
            i32("n_pages"),
            i32("max_pages"),
            i64("capacity"),
            f32("k_inv_scale"),
            f32("v_inv_scale"),
        ],
        keys={"T": ["fp16", "bf16"], "KV": ["fp16", "bf16", "e4m3"], "BLOCK_D": [64, 128, 256]},
        grid_args=[i32("seqlen_new"), i32("heads_k"), i32("batch")],
        grid=["seqlen_new", "heads_k", "batch"],
        configs=lambda target, keys: [Config({}, num_warps=1, num_stages=1)] if cache_dtypes_match(keys) else [],
        aligned=ALIGNED_ONLY,
    ),
    Kernel(
        fn=kv_gather,
        op="flash_attn_varlen",
        args=[
            ptr("Cache", "T"),
            ptr("Packed", "T"),
            ptr("CuSeqlensK", "i32", aligned=False),
            ptr("BlockTable", "i32", aligned=False),
            aligned_stride("stride_p"),
            aligned_stride("stride_s"),
            i64("stride_btb"),
            i32("row_width", aligned=True, divisor=8),
            i32("page_size"),
            i32("n_pages"),
            i32("max_pages"),
        ],
        keys={"T": ["fp16", "bf16"]},
        grid_args=[i32("max_seqlen_k"), i32("batch")],
        grid=["cdiv(max_seqlen_k, BLOCK_T)", "batch", "1"],
        configs=lambda target, keys: [Config({"BLOCK_T": 32, "BLOCK_W": 256}, num_warps=4, num_stages=1)],
        aligned=ALIGNED_ONLY,
        targets=is_hopper,  # it feeds attn_fwd_ws, Hopper's packed prefill
    ),
]
