"""Hopper prefill with warp specialization (FA3's plan), written in Gluon, Triton's lower-level front end: Triton
3.9 compiles it for sm_90 ahead of time, where `tl.range(warp_specialize=True)` specializes nothing on sm_90.

A program owns BLOCK_M query rows of one head: a consumer warpgroup per 64 rows (two, or three for head dim 64), plus
a one-warp partition that streams the program's key and value blocks through TMA into a ring of shared-memory stages
the consumers share, in _block_start's order. Barriers per stage: `ready` (the TMA's bytes landed) and `empty` (every
consumer's product that read the stage is done: one arrival each). Each consumer computes only the blocks its own 64
rows see, masks only those its rows do not see whole, and releases the stages of the others unread: under causality
the first rows skip the keys past their diagonal (head dim 64 at 4k tokens, causal: 8-15% faster,
h100-2026-11-24-experiments.md, stop 26). Within a consumer, block i+1's QK^T and block i's PV run on the tensor cores
while block i+1's softmax runs; the consumers drift apart, so one's softmax also fills the others' products. The
registers a product in flight reads or writes are never touched before its wait: ptxas would otherwise serialize every
wgmma of the kernel (its C7513/C7514 notes), which cost 20-30% in the first version (h100-2026-11-24-experiments.md).

Arguments, grid and semantics are those of the general kernel's dense and varlen prefill (attention.py): windows,
causality (bottom-right), varlen, lse; head_dim == BLOCK_D, no softcap or ALiBi, a positive scale, one key slice.
Two kernels share the program (`_attend`) and differ in their descriptors. attn_fwd_ws_dense takes the launcher's,
made on the host per batch element, so TMA reads zeros past each sequence. attn_fwd_ws (packed sequences) takes the
launcher's for queries and keys over all sequences (what a program reads of the next sequence it never stores or
masks) and makes its value descriptor, bounded at the sequence's end, in global scratch.
"""

from triton import constexpr_function
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.language.extra.cuda import gdc_wait

from kernels_src._attention_keys import key_blocks, visible_keys

WG_ROWS = gl.constexpr(64)  # query rows per consumer warpgroup: wgmma's M for one warpgroup
LOADER_REGISTERS = gl.constexpr(24)  # the loader warp's registers per thread (its warpgroup's setmaxnreg share)


@constexpr_function
def ws_maxnreg(block_m):
    """The register cap of a warp-specialized kernel of block_m // 64 consumer warpgroups and a loader, one program
    to a multiprocessor: the register file (65536) over its warps, a warpgroup (four warps) per consumer plus the
    loader's (setmaxnreg moves registers a warpgroup at a time), rounded down to a multiple of 8."""
    warps = 4 * (gl._unwrap_if_constexpr(block_m) // 64 + 1)
    return 65536 // (32 * warps) // 8 * 8


@constexpr_function
def consumer_registers(block_m):
    """Each consumer warpgroup's setmaxnreg share: the warpgroups' caps together, less the loader's, split evenly
    (a multiple of 8): 240 for two consumers, 160 for three."""
    consumers = gl._unwrap_if_constexpr(block_m) // 64
    return ((consumers + 1) * ws_maxnreg(block_m) - LOADER_REGISTERS.value) // consumers // 8 * 8


@constexpr_function
def _wgmma_layout(n):
    """A warpgroup's accumulator of 64 rows and n columns (one wgmma of shape 16 x n x 16 per warp's rows)."""
    return gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, gl._unwrap_if_constexpr(n), 16]
    )


@gluon.jit
def _tma_rows(desc, batch, row, col, bar, dest):
    """TMA the rows [row, row + rows of dest) of columns [col, col + width) into dest: through a 2-D descriptor over
    (tokens, heads x headdim), or a 3-D one over (batch, sequence, heads x headdim) that bounds each batch element."""
    if len(desc.block_type.shape) == 3:
        tma.async_load(desc, [batch, row, col], bar, dest.reshape([1, dest.type.shape[0], dest.type.shape[1]]))
    else:
        tma.async_load(desc, [row, col], bar, dest)


@gluon.jit
def _load_queries(desc_q, q_smem, q_bar, coords):
    q_row, head, k_row, head_k, batch = coords
    BLOCK_D: gl.constexpr = q_smem.type.shape[2]
    CONSUMERS: gl.constexpr = q_smem.type.shape[0]
    mbarrier.expect(q_bar, CONSUMERS * desc_q.block_type.nbytes)
    for w in gl.static_range(CONSUMERS):
        _tma_rows(desc_q, batch, q_row + w * WG_ROWS, head * BLOCK_D, q_bar, q_smem.index(w))


@gluon.jit
def _block_start(blocks, i, BLOCK_N: gl.constexpr):
    """The first key of the i-th block the program streams: the blocks past the full ones (the diagonal's, under
    causality) from the last, then the full ones from the first, then those before them (a window's left edge) from
    the last. Each consumer's blocks are then one run of the stream: under causality the first rows, whose diagonal
    comes earlier, skip the stream's first blocks; under a window the last rows skip its last. Selects, not
    branches: the loader warp's branches here cost head dim 64 about 5% (h100-2026-11-24-experiments.md, stop 26)."""
    u_lo, u_hi, n_trail, n_full, _ = blocks
    j = i - n_trail
    start = gl.where(j < n_full, u_lo + j * BLOCK_N, u_lo - (j - n_full + 1) * BLOCK_N)
    return gl.where(j < 0, u_hi - (j + 1) * BLOCK_N, start)


@gluon.jit
def _wait_empty(empty, i, STAGES: gl.constexpr):
    """Wait until every consumer is done with the block before the i-th in its stage (a fresh barrier counts as
    having completed the phase before 0, so the first lap does not wait)."""
    mbarrier.wait(empty.index(i % STAGES), ((i // STAGES) & 1) ^ 1)


@gluon.jit
def _load_block(desc, smem, ready, empty, coords, blocks, i):
    """TMA the program's i-th key or value block (of desc) into its stage of smem's ring."""
    STAGES: gl.constexpr = smem.type.shape[0]
    BLOCK_N: gl.constexpr = smem.type.shape[1]
    BLOCK_D: gl.constexpr = smem.type.shape[2]
    q_row, head, k_row, head_k, batch = coords
    stage = i % STAGES
    _wait_empty(empty, i, STAGES)
    mbarrier.expect(ready.index(stage), desc.block_type.nbytes)
    _tma_rows(desc, batch, k_row + _block_start(blocks, i, BLOCK_N), head_k * BLOCK_D, ready.index(stage),
              smem.index(stage))  # fmt: skip


@gluon.jit
def _load_kv(desc_k, desc_v, k_smem, v_smem, bars, coords, blocks, first):
    """The key and value blocks from the first-th on, each key block before its value block."""
    q_bar, k_ready, k_empty, v_ready, v_empty = bars
    for i in range(first, blocks[4]):
        _load_block(desc_k, k_smem, k_ready, k_empty, coords, blocks, i)
        _load_block(desc_v, v_smem, v_ready, v_empty, coords, blocks, i)


@gluon.jit
def _load_partition(desc_q, desc_k, values, q_smem, k_smem, v_smem, bars, coords, blocks):
    """values: (the value descriptor,), or (V, stride, rows, width) to make it from, bounded at the sequence's last
    key; then it is made once the queries' and the first key block's copies are under way, so that its round trip
    to memory overlaps theirs."""
    # (constexprs passed through warp_specialize arrive as run-time values: the tile sizes come from the buffers)
    q_bar, k_ready, k_empty, v_ready, v_empty = bars
    _load_queries(desc_q, q_smem, q_bar, coords)
    if len(values) == 1:
        _load_kv(desc_k, values[0], k_smem, v_smem, bars, coords, blocks, 0)
    elif blocks[4] > 0:
        V, stride_vs, rows, width = values
        _load_block(desc_k, k_smem, k_ready, k_empty, coords, blocks, 0)
        BLOCK_N: gl.constexpr = v_smem.type.shape[1]
        BLOCK_D: gl.constexpr = v_smem.type.shape[2]
        desc_v = tma.make_tensor_descriptor(V, [rows, width], [stride_vs, 1], [BLOCK_N, BLOCK_D], v_smem.type.layout)
        _load_block(desc_v, v_smem, v_ready, v_empty, coords, blocks, 0)
        _load_kv(desc_k, desc_v, k_smem, v_smem, bars, coords, blocks, 1)


@gluon.jit
def _softmax_step(s, m_i, l_i, i, masked, blocks, mask_args, qk_scale):
    """Fold the scores s of the program's i-th key block into the running max m_i and sum l_i; return P (float32,
    in the scores' registers) and alpha, the factor the output accumulated so far must be scaled by. masked: some
    of the consumer's rows do not see every key of the block."""
    k_len, diag, window_left, window_right = mask_args
    BLOCK_N: gl.constexpr = s.type.shape[1]
    if masked:
        cols = _block_start(blocks, i, BLOCK_N) + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s.type.layout))
        s = gl.where(visible_keys(cols[None, :], diag[:, None], k_len, window_left, window_right), s, -float("inf"))
        m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
        m_safe = gl.where(m_new == -float("inf"), 0.0, m_new)  # rows that have seen no key yet
    else:
        m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
        m_safe = m_new
    p = gl.exp2(s * qk_scale - m_safe[:, None])
    alpha = gl.exp2(m_i - m_safe)
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, alpha, m_new, l_i


@gluon.jit
def _pass_blocks(k_empty, v_empty, first, last, STAGES: gl.constexpr):
    """Release the stages of blocks [first, last), which this consumer's rows do not see, in order: each arrival
    waits for the previous lap of its stage to complete, so that it never counts toward that lap."""
    for i in range(first, last):
        _wait_empty(k_empty, i, STAGES)
        mbarrier.arrive(k_empty.index(i % STAGES))
        _wait_empty(v_empty, i, STAGES)
        mbarrier.arrive(v_empty.index(i % STAGES))


@gluon.jit
def _consumer(q_smem, k_smem, v_smem, bars, Out, Lse, out_args, blocks, WG: gl.constexpr):
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    BLOCK_D: gl.constexpr = k_smem.type.shape[2]
    q_bar, k_ready, k_empty, v_ready, v_empty = bars
    o_base, l_base, stride_os, stride_ls, first_row, q_len, k_len, window_left, window_right, write_lse, qk_scale = (
        out_args
    )
    s_layout: gl.constexpr = _wgmma_layout(BLOCK_N)
    o_layout: gl.constexpr = _wgmma_layout(BLOCK_D)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    # this warpgroup's keys: the run [first, last) of the program's stream (_block_start) its rows see, of which it
    # masks the blocks before masked_end (past the keys every row sees, u_hi) and from masked_start on (before u_lo)
    row0 = first_row + WG * WG_ROWS
    rows = row0 + gl.arange(0, WG_ROWS, layout=row_s)
    shift = k_len - q_len
    lo_diag = row0 + shift
    hi_diag = gl.minimum(row0 + WG_ROWS - 1, q_len - 1) + shift
    w_begin, w_end, u_lo, u_hi = key_blocks(lo_diag, hi_diag, k_len, window_left, window_right, BLOCK_N)
    p_lo, p_hi, n_trail, n_full, n_total = blocks
    first = n_trail - gl.minimum(gl.maximum(gl.cdiv(w_end - p_hi, BLOCK_N), 0), n_trail)
    # a warpgroup with rows sees every full block, so its run ends (p_lo - w_begin) / BLOCK_N blocks into the stream's
    # left-edge part; without full blocks (p_lo = p_hi) that count is minus its trail blocks not seen (all exact)
    last = n_trail + n_full + (p_lo - w_begin) // BLOCK_N
    last = gl.where(row0 < q_len, gl.minimum(gl.maximum(last, first), n_total), first)  # rows past the end: none
    masked_end = first + gl.maximum(gl.cdiv(w_end - u_hi, BLOCK_N), 0)
    masked_start = last - gl.maximum((u_lo - w_begin) // BLOCK_N, 0)

    mask_args = (k_len, rows + shift, window_left, window_right)
    zero_s = gl.zeros([WG_ROWS, BLOCK_N], gl.float32, layout=s_layout)
    m_i = gl.full([WG_ROWS], -float("inf"), gl.float32, layout=row_s)
    l_i = gl.zeros([WG_ROWS], gl.float32, layout=row_s)
    alpha = gl.full([WG_ROWS], 1.0, gl.float32, layout=row_s)
    acc = gl.zeros([WG_ROWS, BLOCK_D], gl.float32, layout=o_layout)
    p_op = gl.zeros([WG_ROWS, BLOCK_N], k_smem.dtype, layout=p_layout)

    _pass_blocks(k_empty, v_empty, 0, first, STAGES)
    mbarrier.wait(q_bar, 0)
    if BLOCK_D == 128:
        # the queries in registers, QK^T's A operand from there: that product then reads only the keys from shared
        # memory (2-3.5% faster at head dim 128, stop 27); three consumers of head dim 64 (160 registers each)
        # spill with them
        q = q_smem.index(WG).load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    else:
        q = q_smem.index(WG)
    if last > first:
        mbarrier.wait(k_ready.index(first % STAGES), (first // STAGES) & 1)
        s = warpgroup_mma(q, k_smem.index(first % STAGES).permute((1, 0)), zero_s, use_acc=False)
        mbarrier.arrive(k_empty.index(first % STAGES))
        masked = (first < masked_end) | (first >= masked_start)
        p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, first, masked, blocks, mask_args, qk_scale)
        p_op = gl.convert_layout(p.to(k_smem.dtype), p_layout)
    # FA3's order within a warpgroup: block i+1's QK^T and block i's PV are issued together, and block i+1's
    # softmax runs while they do; the output is rescaled for block i+1 once that PV is done. No register a product
    # in flight reads or writes is touched (else ptxas serializes every wgmma of the kernel): P becomes the PV
    # operand only after the PV before it. (Rescaling between the two issues, as before, was 1-4% slower.)
    for i in range(first, last - 1):
        nxt = i + 1
        mbarrier.wait(k_ready.index(nxt % STAGES), (nxt // STAGES) & 1)
        s = warpgroup_mma(q, k_smem.index(nxt % STAGES).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(i % STAGES), (i // STAGES) & 1)
        acc = warpgroup_mma(p_op, v_smem.index(i % STAGES), acc, is_async=True)
        s = warpgroup_mma_wait(1, deps=(s,))
        mbarrier.arrive(k_empty.index(nxt % STAGES))
        masked = (nxt < masked_end) | (nxt >= masked_start)
        p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, nxt, masked, blocks, mask_args, qk_scale)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(v_empty.index(i % STAGES))
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
        p_op = gl.convert_layout(p.to(k_smem.dtype), p_layout)
    if last > first:
        final = last - 1
        mbarrier.wait(v_ready.index(final % STAGES), (final // STAGES) & 1)
        acc = warpgroup_mma(p_op, v_smem.index(final % STAGES), acc)
        mbarrier.arrive(v_empty.index(final % STAGES))

    seen = l_i > 0
    l_o = gl.convert_layout(gl.where(seen, l_i, 1.0), row_o)
    out = acc / l_o[:, None]
    out = gl.where(gl.convert_layout(seen, row_o)[:, None], out, 0.0)
    rows_o = first_row + WG * WG_ROWS + gl.arange(0, WG_ROWS, layout=row_o)
    dims = gl.arange(0, BLOCK_D, layout=gl.SliceLayout(0, o_layout))
    offsets = o_base + rows_o.to(gl.int64)[:, None] * stride_os + dims[None, :]
    gl.store(Out + offsets, out.to(Out.dtype.element_ty), mask=(rows_o < q_len)[:, None])
    if write_lse != 0:
        lse = (m_i + gl.log2(gl.where(seen, l_i, 1.0))) * 0.6931471805599453
        lse = gl.where(seen, lse, float("inf"))
        gl.store(Lse + l_base + rows.to(gl.int64) * stride_ls, lse, mask=rows < q_len)
    _pass_blocks(k_empty, v_empty, last, n_total, STAGES)


@gluon.jit
def _consumer_2(q_smem, k_smem, v_smem, bars, Out, Lse, out_args, blocks):
    _consumer(q_smem, k_smem, v_smem, bars, Out, Lse, out_args, blocks, 2)


@gluon.jit
def _consumer_1(q_smem, k_smem, v_smem, bars, Out, Lse, out_args, blocks):
    _consumer(q_smem, k_smem, v_smem, bars, Out, Lse, out_args, blocks, 1)


@gluon.jit
def _consumer_0(q_smem, k_smem, v_smem, bars, Out, Lse, out_args, blocks):
    _consumer(q_smem, k_smem, v_smem, bars, Out, Lse, out_args, blocks, 0)


@gluon.jit
def _attend(desc_q, desc_k, values, Out, Lse, rows, lens, out_args, BLOCK_M: gl.constexpr, STAGES: gl.constexpr):
    """One program's BLOCK_M query rows of one head. rows = (q_row, k_row, batch, head, head_k, start_m): where the
    descriptors see the sequence's first query and key rows (the 3-D ones take the batch coordinate too) and the
    program's first row within it; lens = (q_len, k_len); out_args = (o_base, l_base, stride_os, stride_ls,
    window_left, window_right, write_lse, qk_scale): the output's and lse's offsets of the sequence's first row.
    values: what the loader takes for the values (_load_partition)."""
    q_row, k_row, batch, head, head_k, start_m = rows
    q_len, k_len = lens
    o_base, l_base, stride_os, stride_ls, window_left, window_right, write_lse, qk_scale = out_args
    BLOCK_N: gl.constexpr = desc_k.block_type.shape[-2]
    BLOCK_D: gl.constexpr = desc_k.block_type.shape[-1]
    CONSUMERS: gl.constexpr = BLOCK_M // WG_ROWS
    gl.static_assert((CONSUMERS == 2 or CONSUMERS == 3) and BLOCK_M % WG_ROWS == 0, "2 or 3 consumers of 64 rows")
    first_diag = start_m + k_len - q_len
    last_diag = gl.minimum(start_m + BLOCK_M - 1, q_len - 1) + k_len - q_len
    begin, end, u_lo, u_hi = key_blocks(first_diag, last_diag, k_len, window_left, window_right, BLOCK_N)
    n_trail = gl.cdiv(gl.maximum(end - u_hi, 0), BLOCK_N)
    n_full = (u_hi - u_lo) // BLOCK_N
    blocks = (u_lo, u_hi, n_trail, n_full, n_trail + n_full + (u_lo - begin) // BLOCK_N)  # in _block_start's order

    dtype: gl.constexpr = Out.dtype.element_ty
    tile: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS, WG_ROWS, BLOCK_D], tile)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, BLOCK_D], tile)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, BLOCK_D], tile)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=CONSUMERS)
        mbarrier.init(v_empty.index(i), count=CONSUMERS)
    bars = (q_bar, k_ready, k_empty, v_ready, v_empty)

    consumer_args = (
        q_smem,
        k_smem,
        v_smem,
        bars,
        Out,
        Lse,
        (o_base, l_base, stride_os, stride_ls, start_m, q_len, k_len, window_left, window_right, write_lse, qk_scale),
        blocks,
    )
    load_args = (desc_q, desc_k, values, q_smem, k_smem, v_smem, bars, (q_row + start_m, head, k_row, head_k, batch),
                 blocks)  # fmt: skip
    # registers per thread: the kernel's maxnreg (ws_maxnreg) times the warpgroups, shared out
    REGISTERS: gl.constexpr = consumer_registers(BLOCK_M)
    if CONSUMERS == 2:
        gl.warp_specialize(
            [(_consumer_0, consumer_args), (_consumer_1, consumer_args), (_load_partition, load_args)],
            [4, 1],
            [REGISTERS, LOADER_REGISTERS],
        )
    else:
        gl.warp_specialize(
            [
                (_consumer_0, consumer_args),
                (_consumer_1, consumer_args),
                (_consumer_2, consumer_args),
                (_load_partition, load_args),
            ],
            [4, 4, 1],
            [REGISTERS, REGISTERS, LOADER_REGISTERS],
        )


@gluon.jit
def _program(heads, heads_k, BLOCK_M: gl.constexpr):
    """A program's first query row within its sequence (the last row blocks, which see the most keys, first), its
    head, batch element and key head."""
    start_m = (gl.num_programs(0) - 1 - gl.program_id(0)) * BLOCK_M
    head = gl.program_id(1)
    return start_m, head, gl.program_id(2), head // (heads // heads_k)


L2_SHARE = gl.constexpr(16 * 2**20)  # bytes of keys and values that the heads of one causal chunk may hold in L2


@gluon.jit
def _dense_program(heads, heads_k, seqlen_k, window_right, BLOCK_M: gl.constexpr, BLOCK_D: gl.constexpr):
    """_program for dense batches. The hardware starts programs in grid order, each on the first free
    multiprocessor. Without a right window every program of a head costs the same, and one head's row blocks run
    together (_program's order). Under causality (window_right < seqlen_k) a program's keys grow with its row block:
    the programs are taken longest first across a chunk of heads whose keys and values fit L2_SHARE, so that the
    last programs to start are short ones of every head and no multiprocessor is left with a long one at the end."""
    blocks_m = gl.num_programs(0)
    linear = gl.program_id(0) + blocks_m * (gl.program_id(1) + heads * gl.program_id(2))
    group = heads // heads_k
    chunk = 1
    if window_right < seqlen_k:
        chunk = group * gl.maximum(L2_SHARE // (4 * BLOCK_D) // seqlen_k, 1)  # query heads: key heads x group
    pairs = heads * gl.num_programs(2)  # (batch, head) pairs
    chunk = gl.minimum(chunk, pairs)
    first = linear // (chunk * blocks_m) * chunk  # the chunk's first pair
    size = gl.minimum(chunk, pairs - first)
    within = linear - first * blocks_m
    pair = first + within % size
    head = pair % heads
    return (blocks_m - 1 - within // size) * BLOCK_M, head, pair // heads, head // group


@gluon.jit
def attn_fwd_ws(
    desc_q,
    desc_k,
    V,
    Out,
    Lse,
    CuSeqlensQ,
    CuSeqlensK,
    stride_vs,
    stride_ob,
    stride_os,
    stride_oh,
    stride_lb,
    stride_lh,
    stride_ls,
    seqlen_q,
    seqlen_k,
    heads,
    heads_k,
    varlen_q,
    varlen_k,
    window_left,
    window_right,
    write_lse,
    qk_scale,
    BLOCK_D: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    PDL: gl.constexpr = False,
):
    """Packed (varlen) sequences. The launcher's 2-D query and key descriptors span every sequence: rows a program
    reads past its sequence's end are query rows it never stores and keys its mask hides (NaN included: masked
    scores are replaced, not scaled). Values are not masked (P = 0 times a NaN value is NaN), so the loader makes
    the value descriptor, bounded at the sequence's last key, in Triton's global scratch."""
    gl.static_assert(desc_k.block_type.shape[0] == BLOCK_N and desc_k.block_type.shape[1] == BLOCK_D, "key boxes")
    if PDL:  # as kernels_src/_pdl.py's wait_for_predecessor, in Gluon
        gdc_wait()
    start_m, head, batch, head_k = _program(heads, heads_k, BLOCK_M)
    if varlen_q != 0:
        q_start = gl.load(CuSeqlensQ + batch)
        q_len = gl.load(CuSeqlensQ + batch + 1) - q_start
        q_row = q_start
    else:
        q_start = 0
        q_len = seqlen_q
        q_row = batch * seqlen_q
    if varlen_k != 0:
        k_start = gl.load(CuSeqlensK + batch)
        k_len = gl.load(CuSeqlensK + batch + 1) - k_start
        k_row = k_start
    else:
        k_len = seqlen_k
        k_row = batch * seqlen_k
    if start_m < q_len:
        # dense outputs index rows within their batch element (q_start 0), packed ones from the sequence's start
        o_base = batch.to(gl.int64) * stride_ob + q_start.to(gl.int64) * stride_os + head.to(gl.int64) * stride_oh
        l_base = batch.to(gl.int64) * stride_lb + head.to(gl.int64) * stride_lh + q_start.to(gl.int64) * stride_ls
        out_args = (o_base, l_base, stride_os, stride_ls, window_left, window_right, write_lse, qk_scale)
        values = (V, stride_vs, k_row + k_len, heads_k * BLOCK_D)
        _attend(desc_q, desc_k, values, Out, Lse, (q_row, k_row, batch, head, head_k, start_m), (q_len, k_len),
                out_args, BLOCK_M, STAGES)  # fmt: skip


@gluon.jit
def attn_fwd_ws_dense(
    desc_q,
    desc_k,
    desc_v,
    Out,
    Lse,
    stride_ob,
    stride_os,
    stride_oh,
    stride_lb,
    stride_lh,
    stride_ls,
    seqlen_q,
    seqlen_k,
    heads,
    heads_k,
    window_left,
    window_right,
    write_lse,
    qk_scale,
    BLOCK_D: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    PDL: gl.constexpr = False,
):
    """Dense batches: the launcher's descriptors (kernel parameters, made on the host with cuTensorMapEncodeTiled)
    over (batch, sequence, heads x headdim), whose boxes of one batch element stop TMA at each sequence's end.
    Making three descriptors in global scratch cost each program of attn_fwd_ws about 2 us before its first load
    (benchmarks/experiments/prefill_phases.py)."""
    gl.static_assert(desc_k.block_type.shape[1] == BLOCK_N and desc_k.block_type.shape[2] == BLOCK_D, "key boxes")
    if PDL:
        gdc_wait()
    start_m, head, batch, head_k = _dense_program(heads, heads_k, seqlen_k, window_right, BLOCK_M, BLOCK_D)
    o_base = batch.to(gl.int64) * stride_ob + head.to(gl.int64) * stride_oh
    l_base = batch.to(gl.int64) * stride_lb + head.to(gl.int64) * stride_lh
    out_args = (o_base, l_base, stride_os, stride_ls, window_left, window_right, write_lse, qk_scale)
    _attend(desc_q, desc_k, (desc_v,), Out, Lse, (0, 0, batch, head, head_k, start_m), (seqlen_q, seqlen_k),
            out_args, BLOCK_M, STAGES)  # fmt: skip
