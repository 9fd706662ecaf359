"""Decode from a KV cache on Hopper, written in Gluon: the key and value blocks arrive by TMA, a copy per run of
PAGE_RUN keys, so a block costs a few scalar coordinates where attn_fwd's pointer loads compute a 64-bit address
per row (and per page). The cache is rows of (pages x page_size, heads_k x head_dim): a paged cache's pages are
multiples of PAGE_RUN (a run never crosses one) behind the block table; a contiguous cache (batch, capacity, ...) is
one page per sequence, page b holding sequence b, with no table (`paged` 0).

A program owns up to 64 query rows of one key head (rows = (query, query head) pairs, attn_fwd's GQA packing; one
wgmma's M) and one slice of its keys: a loader warp reads the block table a block ahead and streams the slice's key
and value blocks into a ring of STAGES stages (a 16-bit cache's whole blocks by the pages' order in the pool, where
the slice is long enough: _loader); one consumer warpgroup takes QK^T (the queries in shared memory), the
online softmax and PV per block. Configs of ROWS=16 (steps of at most 16 rows: decode's GQA rows) take the products
transposed (_consumer_t), keys on wgmma's M and rows on its N, so that the softmax covers those rows only. Each
stage holds a block as head-dim chunks of CHUNK columns (the 128-byte swizzle's width at 16 bits), so a run of PAGE_RUN
rows is one contiguous slice of a chunk.

An fp8 e4m3 cache (raw bytes) arrives the same way, half the bytes a copy; the consumer decodes each stage into fp16
tiles in shared memory (rows past the sequence zeroed there) before its products read them, all in fp16 (bf16 queries
divided by a power of two into fp16's range), with k_scale folded into qk_scale by the launcher and v_scale applied to
the output.

Semantics are attn_fwd's for a plain cache (no softcap or ALiBi, head_dim == BLOCK_D): windows and causality
(bottom-right), cache_seqlens (SequsedK) plus the keys just appended (seqlen_k_new), split-KV partials in attn_fwd's
layout for attn_combine. Rows past the sequence in its last block are stale cache slots (NaN included), or the next
sequence's rows where a contiguous cache's capacity is not a multiple of PAGE_RUN: their scores are masked and their
values zeroed in shared memory before PV. Slots past the table (or a contiguous cache's capacity) read as page -1,
and coordinates outside the cache read zeros (TMA bounds every copy), so nothing is read outside it."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma
from triton.language.extra.cuda import gdc_wait

from kernels_src._attention_keys import key_blocks, visible_keys
from kernels_src._attention_ws import WG_ROWS, _wgmma_layout

PAGE_RUN = gl.constexpr(16)  # keys per TMA copy: the smallest page this kernel takes
CHUNK = gl.constexpr(64)  # head-dim columns per copy and per shared tile
SORT_WINDOW = gl.constexpr(128)  # table entries the loader orders at a time (_loader)
SORT_DONE = gl.constexpr(2**62)  # a window slot that holds no entry, or one already taken
SORT_MIN_BLOCKS = gl.constexpr(8)  # the fewest blocks a slice's loader sorts the pages of
LOADER_REGISTERS = gl.constexpr(56)  # the loader warp's: a window of keys


@gluon.jit
def _block_rows(BlockTable, start, pages_args, RUNS: gl.constexpr, layout: gl.constexpr):
    """The cache rows (page * page_size + offset in the page) where the block's runs of PAGE_RUN keys begin, for
    the block whose first key is start; -PAGE_RUN (zeros) past the table."""
    page_size, max_pages, paged, batch = pages_args
    keys = start + gl.arange(0, RUNS, layout=layout) * PAGE_RUN
    slots = keys // page_size
    if paged != 0:
        pages = gl.load(BlockTable + slots, mask=slots < max_pages, other=-1)
    else:  # a contiguous cache: sequence b is page b
        pages = gl.where(slots < max_pages, batch, -1)
    return gl.where(pages >= 0, pages * page_size + (keys - slots * page_size), -PAGE_RUN)


@gluon.jit
def _load_block(desc, smem, ready, empty, rows, col, i):
    """TMA the i-th block's runs (at cache rows `rows`, columns from col) into its stage of the ring smem."""
    STAGES: gl.constexpr = smem[0].type.shape[0]
    BLOCK_N: gl.constexpr = smem[0].type.shape[1]
    CHUNKS: gl.constexpr = len(smem)
    RUNS: gl.constexpr = BLOCK_N // PAGE_RUN
    stage = i % STAGES
    # a fresh barrier counts as having completed the phase before 0: the first lap does not wait
    mbarrier.wait(empty.index(stage), ((i // STAGES) & 1) ^ 1)
    mbarrier.expect(ready.index(stage), RUNS * CHUNKS * desc.block_type.nbytes)
    runs = gl.arange(0, RUNS, layout=rows.type.layout)
    for r in gl.static_range(RUNS):
        row = gl.sum(gl.where(runs == r, rows, 0), axis=0)
        for c in gl.static_range(CHUNKS):
            dest = smem[c].index(stage).slice(r * PAGE_RUN, PAGE_RUN)
            tma.async_load(desc, [row, col + c * CHUNK], ready.index(stage), dest)


@gluon.jit
def _loader(desc_k, desc_v, k_smem, v_smem, bars, BlockTable, walk):
    """The slice's blocks, the block table read one block ahead of the copies that use it. The pages of the blocks
    every row sees whole (`full`: the consumers mask none of them, so their keys may come in any order) are taken in
    the order they lie in the pool, a window of SORT_WINDOW table entries at a time, save the first STAGES of those
    blocks: they go in table order, and the first window is ordered once their copies are under way. Each sorted
    block's pages are taken from the window after the block before it is issued, in the time the loader waits for
    the ring anyway. Pools whose pages a sequence holds in random order read 3-6% faster so, as fast as pages in order
    (H100, bf16, pages of 16: 16 x 4k 2.80 -> 2.89-2.91 TB/s, 1 x 32k 2.53 -> 2.66-2.69; h100-2026-11-26-experiments.md,
    stop 39)."""
    k_ready, k_empty, v_ready, v_empty = bars
    s_lo, n_blocks, col, pages_args, full = walk
    page_size, max_pages, paged, batch = pages_args
    BLOCK_N: gl.constexpr = k_smem[0].type.shape[1]
    STAGES: gl.constexpr = k_smem[0].type.shape[0]
    RUNS: gl.constexpr = BLOCK_N // PAGE_RUN
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    window: gl.constexpr = gl.BlockedLayout([SORT_WINDOW // 32], [32], [1], [0])
    # the sorted blocks [first, last), where pages divide blocks (a block is then whole pages), for 16-bit caches
    # (an fp8 cache's consumer bounds its step: the loader's extra work there cost 4-7% at pages of 16) and at least
    # SORT_MIN_BLOCKS of them (shorter slices lost 6-10%: the loader's first window delays their last copies)
    first = gl.minimum(full[0] + STAGES, full[1])
    last = full[1]
    if (paged == 0) | (BLOCK_N % page_size != 0) | (last - first < SORT_MIN_BLOCKS):
        last = first
    if k_smem[0].dtype.primitive_bitwidth == 8:
        last = first
    per_window = SORT_WINDOW * page_size // BLOCK_N  # blocks whose pages a window holds
    keys = gl.full([SORT_WINDOW], SORT_DONE, gl.int64, layout=window)
    rows = _block_rows(BlockTable, s_lo, pages_args, RUNS, layout)
    for i in range(n_blocks):
        j = i + 1
        sorted_next = (j >= first) & (j < last)
        following = rows
        if not sorted_next:
            following = _block_rows(BlockTable, s_lo + j * BLOCK_N, pages_args, RUNS, layout)
        _load_block(desc_k, k_smem, k_ready, k_empty, rows, col, i)
        _load_block(desc_v, v_smem, v_ready, v_empty, rows, col, i)
        if sorted_next:
            if (j - first) % per_window == 0:
                slot0 = (s_lo + j * BLOCK_N) // page_size
                n_slots = gl.minimum(per_window, last - j) * (BLOCK_N // page_size)
                keys = _sort_window(BlockTable, slot0, n_slots, max_pages, window)
            following, keys = _sorted_rows(keys, page_size, RUNS, layout)
        rows = following


@gluon.jit
def _sort_window(BlockTable, slot0, n_slots, max_pages, layout: gl.constexpr):
    """The window's table entries [slot0, slot0 + n_slots) as keys page * SORT_WINDOW + slot, which order them by page
    and tell equal pages apart; SORT_DONE past n_slots. Entries past the table are page -1 (zeros, as _block_rows)."""
    slots = gl.arange(0, SORT_WINDOW, layout=layout)
    pages = gl.load(BlockTable + slot0 + slots, mask=(slots < n_slots) & (slot0 + slots < max_pages), other=-1)
    return gl.where(slots < n_slots, pages.to(gl.int64) * SORT_WINDOW + slots, SORT_DONE)


@gluon.jit
def _sorted_rows(keys, page_size, RUNS: gl.constexpr, layout: gl.constexpr):
    """A block's runs from the window's smallest keys, a page per page_size // PAGE_RUN runs (each taken key leaves
    the window): the cache rows where the runs begin, as _block_rows gives them."""
    runs = gl.arange(0, RUNS, layout=layout)
    rows = gl.full([RUNS], 0, gl.int32, layout=layout)
    per_page = page_size // PAGE_RUN
    page, keys = _take_smallest(keys)
    for r in gl.static_range(RUNS):
        if r > 0:
            if r % per_page == 0:
                page, keys = _take_smallest(keys)
        row = gl.where(page >= 0, page * page_size + (r % per_page) * PAGE_RUN, -PAGE_RUN)
        rows = gl.where(runs == r, row, rows)
    return rows, keys


@gluon.jit
def _take_smallest(keys):
    """The page of the window's smallest key (-1 for an entry past the table or a negative one), and the window
    without that key."""
    smallest = gl.min(keys, axis=0)
    page = gl.where((smallest >= 0) & (smallest < SORT_DONE), smallest // SORT_WINDOW, -1).to(gl.int32)
    return page, gl.where(keys == smallest, SORT_DONE, keys)


@gluon.jit
def _zero_stale_rows(v_smem, stage, start, k_len):
    """Zero the value rows of a block at or past k_len (stale slots of the sequence's last page, or zeros already):
    P is 0 there, but 0 times a NaN is NaN."""
    BLOCK_N: gl.constexpr = v_smem[0].type.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rows = start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    for c in gl.static_range(len(v_smem)):
        tile = v_smem[c].index(stage)
        v = tile.load(layout)
        tile.store(gl.where((rows < k_len)[:, None], v, gl.zeros_like(v)))
    fence_async_shared()


@gluon.jit
def _widen(ring, stage, wide, start, k_len, ZERO_PAST: gl.constexpr):
    """An fp8 block's chunks decoded into the fp16 tiles `wide` the products read (cvt from e4m3x2, exact); with
    ZERO_PAST (values) rows at or past k_len become zeros, as _zero_stale_rows does."""
    BLOCK_N: gl.constexpr = ring[0].type.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, 16], [8, 4], [4, 1], [1, 0])  # 16 bytes a thread per row
    rows = start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    for c in gl.static_range(len(ring)):
        x = ring[c].index(stage).load(layout).to(gl.float8e4nv, bitcast=True).to(wide[c].dtype)
        if ZERO_PAST:
            x = gl.where((rows < k_len)[:, None], x, gl.zeros_like(x))
        wide[c].store(x)
    fence_async_shared()


@gluon.jit
def _tile(ring, wide, c: gl.constexpr, stage):
    """Chunk c of the block the products read: the ring's stage, or its decoded copy in `wide` (an fp8 cache)."""
    if ring[c].dtype == wide[c].dtype:
        return ring[c].index(stage)
    else:
        return wide[c]


@gluon.jit
def _take_keys(k_smem, k_wide, k_ready, k_empty, stage, phase, start, k_len):
    """Wait for a stage's keys. An fp8 cache's are decoded into k_wide and the stage freed at once; a 16-bit stage
    is freed by _release after the product has read it."""
    mbarrier.wait(k_ready.index(stage), phase)
    if k_smem[0].dtype != k_wide[0].dtype:
        _widen(k_smem, stage, k_wide, start, k_len, False)
        mbarrier.arrive(k_empty.index(stage))


@gluon.jit
def _take_values(v_smem, v_wide, v_ready, v_empty, stage, phase, start, k_len):
    """Wait for a stage's values, with the rows past the sequence zeroed in the block that reaches past it: an fp8
    cache's decoded into v_wide (the stage freed at once), a 16-bit stage's in place."""
    BLOCK_N: gl.constexpr = v_smem[0].type.shape[1]
    mbarrier.wait(v_ready.index(stage), phase)
    if v_smem[0].dtype != v_wide[0].dtype:
        if start + BLOCK_N > k_len:
            _widen(v_smem, stage, v_wide, start, k_len, True)
        else:
            _widen(v_smem, stage, v_wide, start, k_len, False)
        mbarrier.arrive(v_empty.index(stage))
    elif start + BLOCK_N > k_len:
        _zero_stale_rows(v_smem, stage, start, k_len)


@gluon.jit
def _release(ring, wide, empty, stage):
    """Free a 16-bit stage once the products have read it (an fp8 stage was freed when decoded)."""
    if ring[0].dtype == wide[0].dtype:
        mbarrier.arrive(empty.index(stage))


@gluon.jit
def _load_queries(Q, q_base, stride_qs, stride_qh, n_rows, group, q_smem):
    """The program's query rows into q_smem (a tile of CHUNK columns per head-dim chunk), row r = (query r // group,
    head r % group) from q_base; zeros past n_rows. QK^T reads them from there: held in registers as wgmma's A
    operand beside P, they came out overwritten by the previous block's P at head dim 64 with 64-key blocks (ptxas
    gave both operands the same registers; h100-2026-11-26-experiments.md, stop 36). Where q_smem is fp16 and the
    queries bf16 (an fp8 cache's products), they are stored divided by a power of two that brings them within fp16's
    range; returns that divisor (1 otherwise), which the caller folds into the score scale."""
    load: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    r = gl.arange(0, q_smem.type.shape[1], layout=gl.SliceLayout(1, load))
    offsets = q_base + (r // group).to(gl.int64) * stride_qs + (r % group).to(gl.int64) * stride_qh
    CHUNKS: gl.constexpr = q_smem.type.shape[0]
    d = gl.arange(0, CHUNK, layout=gl.SliceLayout(0, load))
    q0 = gl.load(Q + offsets[:, None] + d[None, :], mask=(r < n_rows)[:, None], other=0.0)
    q1 = q0
    if CHUNKS == 2:
        q1 = gl.load(Q + offsets[:, None] + (CHUNK + d)[None, :], mask=(r < n_rows)[:, None], other=0.0)
    unit = 1.0
    if q_smem.dtype != q0.dtype:
        big = gl.maximum(gl.max(gl.max(gl.abs(q0.to(gl.float32)), axis=1), axis=0),
                         gl.max(gl.max(gl.abs(q1.to(gl.float32)), axis=1), axis=0))  # fmt: skip
        unit = gl.exp2(gl.maximum(gl.ceil(gl.log2(big)) - 14.0, 0.0))  # at most 2^14 after the division
        q0 = q0.to(gl.float32) / unit
        q1 = q1.to(gl.float32) / unit
    q_smem.index(0).store(q0.to(q_smem.dtype))
    if CHUNKS == 2:
        q_smem.index(1).store(q1.to(q_smem.dtype))
    fence_async_shared()
    return unit


@gluon.jit
def _store_chunk(
    out, c, rows, row_ok, Out, Opart, out_args, group, BLOCK_D: gl.constexpr, ROWS_DOWN: gl.constexpr = True
):
    """Store columns [c * CHUNK, ...) of the normalized output: partials (float32) when split, else Out. out holds
    the rows down its first axis, or (ROWS_DOWN false: the transposed products) along its second."""
    o_base, part_base, stride_os, stride_oh, part_row, l_base, stride_lh, stride_ls, split_out, write_lse = out_args
    d = c * CHUNK + gl.arange(0, CHUNK, layout=gl.SliceLayout(0 if ROWS_DOWN else 1, out.type.layout))
    q_pos = (rows // group).to(gl.int64)
    head = (rows % group).to(gl.int64)
    if split_out:
        _put(Opart, part_base + (q_pos * part_row + head) * BLOCK_D, d, out, row_ok, ROWS_DOWN)
    else:
        _put(Out, o_base + q_pos * stride_os + head * stride_oh, d, out, row_ok, ROWS_DOWN)


@gluon.jit
def _put(dest, offsets, d, out, row_ok, ROWS_DOWN: gl.constexpr):
    """out into dest at offsets (a row's) + d (a column's), rows down out's first axis or (not ROWS_DOWN) its second."""
    if ROWS_DOWN:
        gl.store(dest + offsets[:, None] + d[None, :], out.to(dest.dtype.element_ty), mask=row_ok[:, None])
    else:
        gl.store(dest + offsets[None, :] + d[:, None], out.to(dest.dtype.element_ty), mask=row_ok[None, :])


@gluon.jit
def _store_lse(m_i, l_i, rows, row_ok, Lse, out_args, group):
    """Each row's log-sum-exp: into the partials when split (-inf for a slice that saw no key, which weighs nothing
    in attn_combine), else into Lse if asked (+inf for a row that sees no key, flash-attn's convention)."""
    o_base, part_base, stride_os, stride_oh, part_row, l_base, stride_lh, stride_ls, split_out, write_lse = out_args
    seen = l_i > 0
    lse = (m_i + gl.log2(gl.where(seen, l_i, 1.0))) * 0.6931471805599453
    q_pos = (rows // group).to(gl.int64)
    head = (rows % group).to(gl.int64)
    if split_out:
        gl.store(Lse + l_base + q_pos * part_row + head, gl.where(seen, lse, -float("inf")), mask=row_ok)
    elif write_lse != 0:
        gl.store(Lse + l_base + q_pos * stride_ls + head * stride_lh, gl.where(seen, lse, float("inf")), mask=row_ok)


@gluon.jit
def _consumer(q_smem, k_smem, v_smem, wide, bars, Q, Out, Lse, Opart, q_args, key_args, out_args):
    k_ready, k_empty, v_ready, v_empty = bars
    k_wide, v_wide = wide  # the rings themselves for a 16-bit cache
    q_base, stride_qs, stride_qh, n_rows, group, q_len = q_args
    s_lo, n_blocks, u_lo, u_hi, k_len, window_left, window_right, qk_scale, v_scale = key_args
    STAGES: gl.constexpr = k_smem[0].type.shape[0]
    BLOCK_N: gl.constexpr = k_smem[0].type.shape[1]
    CHUNKS: gl.constexpr = len(k_smem)
    BLOCK_D: gl.constexpr = CHUNKS * CHUNK
    dtype: gl.constexpr = q_smem.dtype  # the products': the queries', or fp16 for an fp8 cache
    s_layout: gl.constexpr = _wgmma_layout(BLOCK_N)
    o_layout: gl.constexpr = _wgmma_layout(CHUNK)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    qk_scale = qk_scale * _load_queries(Q, q_base, stride_qs, stride_qh, n_rows, group, q_smem)
    rows = gl.arange(0, WG_ROWS, layout=row_s)
    diag = rows // group + (k_len - q_len)
    zero_s = gl.zeros([WG_ROWS, BLOCK_N], gl.float32, layout=s_layout)
    m_i = gl.full([WG_ROWS], -float("inf"), gl.float32, layout=row_s)
    l_i = gl.zeros([WG_ROWS], gl.float32, layout=row_s)
    acc0 = gl.zeros([WG_ROWS, CHUNK], gl.float32, layout=o_layout)
    acc1 = gl.zeros([WG_ROWS, CHUNK], gl.float32, layout=o_layout)
    for i in range(n_blocks):
        stage = i % STAGES
        phase = (i // STAGES) & 1
        start = s_lo + i * BLOCK_N
        _take_keys(k_smem, k_wide, k_ready, k_empty, stage, phase, start, k_len)
        s = warpgroup_mma(q_smem.index(0), _tile(k_smem, k_wide, 0, stage).permute((1, 0)), zero_s, use_acc=False)
        if CHUNKS == 2:
            s = warpgroup_mma(q_smem.index(1), _tile(k_smem, k_wide, 1, stage).permute((1, 0)), s)
        _release(k_smem, k_wide, k_empty, stage)
        s = s * qk_scale
        masked = (start < u_lo) | (start + BLOCK_N > u_hi)
        if masked:
            cols = start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
            s = gl.where(visible_keys(cols[None, :], diag[:, None], k_len, window_left, window_right), s, -float("inf"))
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        m_safe = gl.where(m_new == -float("inf"), 0.0, m_new)  # rows that have seen no key yet
        p = gl.exp2(s - m_safe[:, None])
        alpha = gl.exp2(m_i - m_safe)
        l_i = l_i * alpha + gl.sum(p, axis=1)
        m_i = m_new
        alpha_o = gl.convert_layout(alpha, row_o)[:, None]
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        _take_values(v_smem, v_wide, v_ready, v_empty, stage, phase, start, k_len)
        acc0 = warpgroup_mma(p_op, _tile(v_smem, v_wide, 0, stage), acc0 * alpha_o)
        if CHUNKS == 2:
            acc1 = warpgroup_mma(p_op, _tile(v_smem, v_wide, 1, stage), acc1 * alpha_o)
        _release(v_smem, v_wide, v_empty, stage)

    seen = l_i > 0
    scale = gl.convert_layout(v_scale / gl.where(seen, l_i, 1.0), row_o)[:, None]
    rows_o = gl.arange(0, WG_ROWS, layout=row_o)
    row_ok = rows_o < n_rows
    _store_chunk(acc0 * scale, 0, rows_o, row_ok, Out, Opart, out_args, group, BLOCK_D)
    if CHUNKS == 2:
        _store_chunk(acc1 * scale, 1, rows_o, row_ok, Out, Opart, out_args, group, BLOCK_D)
    _store_lse(m_i, l_i, rows, rows < n_rows, Lse, out_args, group)


@gluon.jit
def _consumer_t(q_smem, k_smem, v_smem, wide, p_smem, bars, Q, Out, Lse, Opart, q_args, key_args, out_args):
    """_consumer's block with the products transposed, for steps of at most ROWS rows per key head (decode's GQA
    rows): S^T = K Q^T puts the keys on wgmma's M and the rows on its N, the online softmax runs down each column,
    and O^T = V^T P^T (P^T through p_smem). A block then costs BLOCK_N x ROWS exponentials, where the 64-row tile
    takes BLOCK_N x 64 whatever the rows in use: at a decode step's 4-8 rows per key head that tile's softmax
    bounded the step (h100-2026-11-26-experiments.md, stop 37)."""
    k_ready, k_empty, v_ready, v_empty = bars
    k_wide, v_wide = wide
    q_base, stride_qs, stride_qh, n_rows, group, q_len = q_args
    s_lo, n_blocks, u_lo, u_hi, k_len, window_left, window_right, qk_scale, v_scale = key_args
    STAGES: gl.constexpr = k_smem[0].type.shape[0]
    BLOCK_N: gl.constexpr = k_smem[0].type.shape[1]
    CHUNKS: gl.constexpr = len(k_smem)
    BLOCK_D: gl.constexpr = CHUNKS * CHUNK
    ROWS: gl.constexpr = q_smem.type.shape[1]
    dtype: gl.constexpr = q_smem.dtype
    t_layout: gl.constexpr = _wgmma_layout(ROWS)  # S^T (keys x rows) and O^T (head dim x rows)
    col: gl.constexpr = gl.SliceLayout(0, t_layout)  # a value per query row
    key: gl.constexpr = gl.SliceLayout(1, t_layout)

    qk_scale = qk_scale * _load_queries(Q, q_base, stride_qs, stride_qh, n_rows, group, q_smem)
    rows = gl.arange(0, ROWS, layout=col)
    diag = rows // group + (k_len - q_len)
    zero_s = gl.zeros([BLOCK_N, ROWS], gl.float32, layout=t_layout)
    m_i = gl.full([ROWS], -float("inf"), gl.float32, layout=col)
    l_i = gl.zeros([ROWS], gl.float32, layout=col)
    acc0 = gl.zeros([CHUNK, ROWS], gl.float32, layout=t_layout)
    acc1 = gl.zeros([CHUNK, ROWS], gl.float32, layout=t_layout)
    for i in range(n_blocks):
        stage = i % STAGES
        phase = (i // STAGES) & 1
        start = s_lo + i * BLOCK_N
        _take_keys(k_smem, k_wide, k_ready, k_empty, stage, phase, start, k_len)
        s = warpgroup_mma(_tile(k_smem, k_wide, 0, stage), q_smem.index(0).permute((1, 0)), zero_s, use_acc=False)
        if CHUNKS == 2:
            s = warpgroup_mma(_tile(k_smem, k_wide, 1, stage), q_smem.index(1).permute((1, 0)), s)
        _release(k_smem, k_wide, k_empty, stage)
        s = s * qk_scale
        masked = (start < u_lo) | (start + BLOCK_N > u_hi)
        if masked:  # the keys run down the tile's rows
            keys = start + gl.arange(0, BLOCK_N, layout=key)
            seen = visible_keys(keys[:, None], diag[None, :], k_len, window_left, window_right)
            s = gl.where(seen, s, -float("inf"))
        m_new = gl.maximum(m_i, gl.max(s, axis=0))
        m_safe = gl.where(m_new == -float("inf"), 0.0, m_new)  # rows that have seen no key yet
        p = gl.exp2(s - m_safe[None, :])
        alpha = gl.exp2(m_i - m_safe)
        l_i = l_i * alpha + gl.sum(p, axis=0)
        m_i = m_new
        p_smem.store(p.to(dtype))
        fence_async_shared()
        _take_values(v_smem, v_wide, v_ready, v_empty, stage, phase, start, k_len)
        acc0 = warpgroup_mma(_tile(v_smem, v_wide, 0, stage).permute((1, 0)), p_smem, acc0 * alpha[None, :])
        if CHUNKS == 2:
            acc1 = warpgroup_mma(_tile(v_smem, v_wide, 1, stage).permute((1, 0)), p_smem, acc1 * alpha[None, :])
        _release(v_smem, v_wide, v_empty, stage)

    seen_any = l_i > 0
    scale = (v_scale / gl.where(seen_any, l_i, 1.0))[None, :]
    row_ok = rows < n_rows
    _store_chunk(acc0 * scale, 0, rows, row_ok, Out, Opart, out_args, group, BLOCK_D, False)
    if CHUNKS == 2:
        _store_chunk(acc1 * scale, 1, rows, row_ok, Out, Opart, out_args, group, BLOCK_D, False)
    _store_lse(m_i, l_i, rows, row_ok, Lse, out_args, group)


@gluon.jit
def attn_decode_tma(
    desc_k,
    desc_v,
    Q,
    Out,
    Lse,
    Opart,
    SequsedK,
    BlockTable,
    stride_qb,
    stride_qs,
    stride_qh,
    stride_ob,
    stride_os,
    stride_oh,
    stride_lb,
    stride_lh,
    stride_ls,
    stride_lsplit,
    stride_psplit,
    stride_btb,
    seqlen_q,
    seqlen_k,
    heads,
    group,
    num_splits,
    has_seqused_k,
    seqlen_k_new,
    page_size,
    max_pages,
    paged,
    window_left,
    window_right,
    write_lse,
    qk_scale,
    v_scale,
    BLOCK_D: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    ROWS: gl.constexpr = 64,
    PDL: gl.constexpr = False,
):
    """A program per (key head, slice) and batch element; seqlen_q * group <= 64 (the launcher's condition).
    desc_k / desc_v: the cache as (pages x page_size, heads_k x head_dim) rows, boxes of PAGE_RUN x CHUNK (16-bit
    elements, or an fp8 cache's bytes); a contiguous cache (paged 0) passes its capacity as page_size and max_pages 1.
    qk_scale carries log2(e) and an fp8 cache's k_scale; v_scale scales the output (1 for a 16-bit cache)."""
    gl.static_assert(BLOCK_D % CHUNK == 0 and BLOCK_D // CHUNK <= 2, "head dims of 64 or 128")
    gl.static_assert(BLOCK_N % PAGE_RUN == 0, "blocks of whole runs")
    if PDL:  # as kernels_src/_pdl.py's wait_for_predecessor, in Gluon
        gdc_wait()
    head_k = gl.program_id(0) // num_splits
    split = gl.program_id(0) % num_splits
    batch = gl.program_id(1)
    k_len = seqlen_k
    if has_seqused_k != 0:
        k_len = gl.load(SequsedK + batch)
    k_len += seqlen_k_new
    q_len = seqlen_q
    begin, end, u_lo, u_hi = key_blocks(k_len - q_len, k_len - 1, k_len, window_left, window_right, BLOCK_N)
    per_split = gl.cdiv(gl.cdiv(gl.maximum(end - begin, 0), BLOCK_N), num_splits)
    s_lo = begin + split * per_split * BLOCK_N
    s_hi = gl.minimum(s_lo + per_split * BLOCK_N, end)
    n_blocks = gl.cdiv(gl.maximum(s_hi - s_lo, 0), BLOCK_N)

    CHUNKS: gl.constexpr = BLOCK_D // CHUNK
    dtype: gl.constexpr = Out.dtype.element_ty
    tile: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    # the products' dtype: the queries', or fp16 for an fp8 cache (e4m3 decodes to fp16 in one instruction a pair,
    # where bf16 takes a further conversion per element: 3x the step's time on an H100)
    mma: gl.constexpr = gl.float16 if desc_k.dtype != dtype else dtype
    q_smem = gl.allocate_shared_memory(mma, [CHUNKS, ROWS, CHUNK], tile)
    # a ring per head-dim chunk, for keys and for values, in the descriptors' element type and layout
    ring: gl.constexpr = desc_k.layout
    k_smem = (gl.allocate_shared_memory(desc_k.dtype, [STAGES, BLOCK_N, CHUNK], ring),)
    v_smem = (gl.allocate_shared_memory(desc_v.dtype, [STAGES, BLOCK_N, CHUNK], ring),)
    if CHUNKS == 2:
        k_smem = (k_smem[0], gl.allocate_shared_memory(desc_k.dtype, [STAGES, BLOCK_N, CHUNK], ring))
        v_smem = (v_smem[0], gl.allocate_shared_memory(desc_v.dtype, [STAGES, BLOCK_N, CHUNK], ring))
    wide = (k_smem, v_smem)
    if desc_k.dtype != dtype:  # an fp8 cache: a block's keys and values decoded to fp16 for the products
        k_wide = (gl.allocate_shared_memory(mma, [BLOCK_N, CHUNK], tile),)
        v_wide = (gl.allocate_shared_memory(mma, [BLOCK_N, CHUNK], tile),)
        if CHUNKS == 2:
            k_wide = (k_wide[0], gl.allocate_shared_memory(mma, [BLOCK_N, CHUNK], tile))
            v_wide = (v_wide[0], gl.allocate_shared_memory(mma, [BLOCK_N, CHUNK], tile))
        wide = (k_wide, v_wide)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=1)
        mbarrier.init(v_empty.index(i), count=1)
    bars = (k_ready, k_empty, v_ready, v_empty)

    head0 = (head_k * group).to(gl.int64)  # the program's first query head
    q_base = batch.to(gl.int64) * stride_qb + head0 * stride_qh
    q_args = (q_base, stride_qs, stride_qh, q_len * group, group, q_len)
    key_args = (s_lo, n_blocks, u_lo, u_hi, k_len, window_left, window_right, qk_scale, v_scale)
    split_out = num_splits > 1
    # partials: (split, token, head, BLOCK_D) float32 and (split, token, head), token = batch * seqlen_q + query
    part_row = heads.to(gl.int64)
    first_token = batch.to(gl.int64) * seqlen_q
    part_base = split.to(gl.int64) * stride_psplit + (first_token * heads + head0) * BLOCK_D
    if split_out:
        l_base = split.to(gl.int64) * stride_lsplit + first_token * heads + head0
    else:
        l_base = batch.to(gl.int64) * stride_lb + head0 * stride_lh
    o_base = batch.to(gl.int64) * stride_ob + head0 * stride_oh
    out_args = (o_base, part_base, stride_os, stride_oh, part_row, l_base, stride_lh, stride_ls, split_out, write_lse)
    # the slice's blocks every row sees whole, which the consumers do not mask: their pages may come in any order
    full_lo = (gl.minimum(gl.maximum(u_lo, s_lo), s_lo + n_blocks * BLOCK_N) - s_lo) // BLOCK_N
    full_hi = gl.maximum((gl.minimum(u_hi, s_lo + n_blocks * BLOCK_N) - s_lo) // BLOCK_N, full_lo)
    walk = (s_lo, n_blocks, head_k * BLOCK_D, (page_size, max_pages, paged, batch), (full_lo, full_hi))
    loading = (desc_k, desc_v, k_smem, v_smem, bars, BlockTable + batch.to(gl.int64) * stride_btb, walk)
    if ROWS < WG_ROWS:  # the transposed products: P^T goes through shared memory to PV
        p_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, ROWS], mma)
        p_smem = gl.allocate_shared_memory(mma, [BLOCK_N, ROWS], p_layout)
        args = (q_smem, k_smem, v_smem, wide, p_smem, bars, Q, Out, Lse, Opart, q_args, key_args, out_args)
        gl.warp_specialize([(_consumer_t, args), (_loader, loading)], [1], [LOADER_REGISTERS])
    else:
        args = (q_smem, k_smem, v_smem, wide, bars, Q, Out, Lse, Opart, q_args, key_args, out_args)
        gl.warp_specialize([(_consumer, args), (_loader, loading)], [1], [LOADER_REGISTERS])
