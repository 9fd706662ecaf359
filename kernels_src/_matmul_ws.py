"""Hopper matmul with warp specialization, in Gluon (Triton 3.9 specializes no warps of a Triton kernel on sm_90):
c = act(alpha * (a @ b) + beta * input) + residual for a (M, K) with contiguous rows and b either a weight's (N, K)
rows (K-contiguous, as linear's) or (K, N) rows. The launcher makes the TMA descriptors (a, b, the output, the
residual) on the host.

A persistent program per multiprocessor walks the work items: output tiles (128 rows by BLOCK_N columns, GROUP_M
row tiles at a time for L2 reuse), each tile's K steps in k_splits slices. A one-warp partition streams each item's
A and B steps through TMA into a ring of shared-memory stages; two consumer warpgroups, 64 rows each, multiply a
stage as soon as it lands, release the one before, and run the epilogue from their accumulators: through shared
memory and a TMA store, the residual TMA'd there during the products. The loader does not wait for the epilogue: it
fills the ring with the next item's first steps meanwhile. TMA reads zeros past M, N and K and drops stores past M
and N, so nothing is masked and K needs no multiple of BLOCK_K. Split along K, each slice's float32 sums go to a
workspace instead, which matmul.py's matmul_reduce_kernel adds up and finishes with the epilogue.

Compared with matmul_kernel's pointer loads at 255 registers (which the fused epilogue's loads push into spills),
each consumer has 240 registers for its 64 x BLOCK_N accumulator and the epilogue, and issues no address arithmetic.
"""

from triton import constexpr_function
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.language.extra.cuda import gdc_wait

from kernels_src._attention_ws import LOADER_REGISTERS, WG_ROWS, _wgmma_layout, consumer_registers
from kernels_src.activation import _activate

GROUP_M = gl.constexpr(8)  # row tiles visited together: their B columns stay in L2 between them


@gluon.jit
def _tile(tile, tiles_m, tiles_n):
    """The (row, column) tile of the tile-th output tile, GROUP_M row tiles at a time."""
    group = GROUP_M * tiles_n
    first_m = (tile // group) * GROUP_M
    group_m = gl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % group) % group_m, (tile % group) // group_m


@gluon.jit
def _work(item, tiles_m, tiles_n, k_steps, k_splits):
    """The item-th work item's tile and its K steps [k_first, k_last): a tile's K steps in k_splits slices (the
    launcher makes none empty), the slices of one tile consecutive."""
    pid_m, pid_n = _tile(item // k_splits, tiles_m, tiles_n)
    per = gl.cdiv(k_steps, k_splits)
    k_first = (item % k_splits) * per
    return pid_m, pid_n, k_first, gl.minimum(k_first + per, k_steps)


@constexpr_function
def _k_major(b_stages, block_k):
    """Whether B's stages (shape b_stages) hold (BLOCK_N, BLOCK_K) boxes of w's rows (K-contiguous) rather than
    (BLOCK_K, BLOCK_N) boxes of b's (constexprs passed through warp_specialize arrive as run-time values: the tile
    sizes come from the buffers)."""
    return gl._unwrap_if_constexpr(b_stages[2]) == gl._unwrap_if_constexpr(block_k)


@constexpr_function
def _block_n(b_stages, block_k):
    """BLOCK_N, from B's stages (as _k_major)."""
    return gl._unwrap_if_constexpr(b_stages[1] if _k_major(b_stages, block_k) else b_stages[2])


@gluon.jit
def _loader(desc_a, desc_b, a_smem, b_smem, ready, empty, sizes):
    """Each work item's K steps into the ring: stage s holds A's two 64-row halves (a_smem[2s], a_smem[2s + 1]) and
    B's BLOCK_N columns (b_smem[s]). A stage is refilled once both consumers have released it."""
    M, N, K, k_splits = sizes
    STAGES: gl.constexpr = b_smem.type.shape[0]
    BLOCK_K: gl.constexpr = a_smem.type.shape[2]
    K_MAJOR: gl.constexpr = _k_major(b_smem.type.shape, BLOCK_K)
    BLOCK_N: gl.constexpr = _block_n(b_smem.type.shape, BLOCK_K)
    tiles_m = gl.cdiv(M, 2 * WG_ROWS)
    tiles_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    nbytes: gl.constexpr = 2 * desc_a.block_type.nbytes + desc_b.block_type.nbytes
    step = 0
    for item in range(gl.program_id(0), tiles_m * tiles_n * k_splits, gl.num_programs(0)):
        pid_m, pid_n, k_first, k_last = _work(item, tiles_m, tiles_n, k_steps, k_splits)
        for kk in range(k_first, k_last):
            s = step % STAGES
            # a fresh barrier counts as having completed the phase before 0: the first lap does not wait
            mbarrier.wait(empty.index(s), ((step // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            k = kk * BLOCK_K
            tma.async_load(desc_a, [pid_m * 2 * WG_ROWS, k], ready.index(s), a_smem.index(2 * s))
            tma.async_load(desc_a, [pid_m * 2 * WG_ROWS + WG_ROWS, k], ready.index(s), a_smem.index(2 * s + 1))
            if K_MAJOR:
                tma.async_load(desc_b, [pid_n * BLOCK_N, k], ready.index(s), b_smem.index(s))
            else:
                tma.async_load(desc_b, [k, pid_n * BLOCK_N], ready.index(s), b_smem.index(s))
            step += 1


@gluon.jit
def _b_operand(b_smem, s, K_MAJOR: gl.constexpr):
    """Stage s of B as the product's (BLOCK_K, BLOCK_N) operand."""
    if K_MAJOR:
        return b_smem.index(s).permute((1, 0))
    else:
        return b_smem.index(s)


@gluon.jit
def _consumer(a_smem, b_smem, c_smem, ready, empty, r_bar, desc_c, desc_r, Input, sizes, epilogue, WG: gl.constexpr):
    """Rows [64 WG, 64 WG + 64) of each of the program's tiles. One product stays in flight: step i's is issued
    before step i - 1's is waited for, and only then is step i - 1's stage released. The tile leaves through c_smem
    by a TMA store that the next tile's products overlap; the residual arrives there by TMA during the products."""
    M, N, K, k_splits = sizes
    Partial, stride_in, alpha, beta, has_input, has_residual, act = epilogue
    STAGES: gl.constexpr = b_smem.type.shape[0]
    BLOCK_K: gl.constexpr = a_smem.type.shape[2]
    K_MAJOR: gl.constexpr = _k_major(b_smem.type.shape, BLOCK_K)
    BLOCK_N: gl.constexpr = _block_n(b_smem.type.shape, BLOCK_K)
    acc_layout: gl.constexpr = _wgmma_layout(BLOCK_N)
    tiles_m = gl.cdiv(M, 2 * WG_ROWS)
    tiles_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)  # at least 1 a slice: the launcher sends no empty K here
    zero = gl.zeros([WG_ROWS, BLOCK_N], gl.float32, layout=acc_layout)
    step = 0
    r_phase = 0
    for item in range(gl.program_id(0), tiles_m * tiles_n * k_splits, gl.num_programs(0)):
        pid_m, pid_n, k_first, k_last = _work(item, tiles_m, tiles_n, k_steps, k_splits)
        row0 = pid_m * 2 * WG_ROWS + WG * WG_ROWS
        col0 = pid_n * BLOCK_N
        tma.store_wait(0)  # the last tile's store has read c_smem
        if has_residual:
            mbarrier.expect(r_bar, desc_r.block_type.nbytes)
            tma.async_load(desc_r, [row0, col0], r_bar, c_smem)

        s = step % STAGES
        mbarrier.wait(ready.index(s), (step // STAGES) & 1)
        acc = warpgroup_mma(a_smem.index(2 * s + WG), _b_operand(b_smem, s, K_MAJOR), zero, use_acc=False,
                            is_async=True)  # fmt: skip
        acc = warpgroup_mma_wait(1, deps=(acc,))  # returns at once (nothing else in flight); a tensor for the loop
        step += 1
        for _ in range(k_first + 1, k_last):
            s = step % STAGES
            mbarrier.wait(ready.index(s), (step // STAGES) & 1)
            acc = warpgroup_mma(a_smem.index(2 * s + WG), _b_operand(b_smem, s, K_MAJOR), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=(acc,))
            mbarrier.arrive(empty.index((step - 1) % STAGES))
            step += 1
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index((step - 1) % STAGES))

        if k_splits > 1:  # a slice's float32 sums, which matmul_reduce_kernel adds up and finishes
            rows = row0 + gl.arange(0, WG_ROWS, layout=gl.SliceLayout(1, acc_layout))
            cols = col0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, acc_layout))
            offsets = ((item % k_splits) * M + rows).to(gl.int64)[:, None] * N + cols[None, :]
            gl.store(Partial + offsets, acc, mask=(rows < M)[:, None] & (cols < N)[None, :])
        else:
            out = acc * alpha
            if has_input:  # a row broadcast over the tile's rows (the launcher sends other inputs to matmul_kernel)
                cols = col0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, acc_layout))
                row = gl.load(Input + cols.to(gl.int64) * stride_in, mask=cols < N, other=0.0).to(gl.float32)
                out += beta * row[None, :]
            out = _activate(out, act)
            if has_residual:
                mbarrier.wait(r_bar, r_phase)
                r_phase ^= 1
                out += c_smem.load(acc_layout).to(gl.float32)
            c_smem.store(out.to(c_smem.dtype))
            fence_async_shared()
            tma.async_store(desc_c, [row0, col0], c_smem)  # TMA drops what lies past M and N
    tma.store_wait(0)


@gluon.jit
def _consumer_1(a_smem, b_smem, c_smem, ready, empty, r_bar, desc_c, desc_r, Input, sizes, epilogue):
    _consumer(a_smem, b_smem, c_smem.index(1), ready, empty, r_bar.index(1), desc_c, desc_r, Input, sizes, epilogue, 1)


@gluon.jit
def _consumer_0(a_smem, b_smem, c_smem, ready, empty, r_bar, desc_c, desc_r, Input, sizes, epilogue):
    _consumer(a_smem, b_smem, c_smem.index(0), ready, empty, r_bar.index(0), desc_c, desc_r, Input, sizes, epilogue, 0)


@gluon.jit
def matmul_ws(
    desc_a,
    desc_b,
    desc_c,
    desc_r,
    Input,
    Partial,
    M,
    N,
    K,
    k_splits,
    stride_im,
    stride_in,
    alpha,
    beta,
    has_input,
    has_residual,
    act,
    B_K_CONTIGUOUS: gl.constexpr,
    BLOCK_N: gl.constexpr,
    BLOCK_K: gl.constexpr,
    STAGES: gl.constexpr,
    B_ROWS: gl.constexpr,
    B_COLS: gl.constexpr,
    PDL: gl.constexpr = False,
):
    """desc_a: a's (M, K) rows in boxes of (64, BLOCK_K); desc_b: w's (N, K) rows in boxes of (BLOCK_N, BLOCK_K), or
    (B_K_CONTIGUOUS False) b's (K, N) rows in boxes of (BLOCK_K, BLOCK_N); desc_c and desc_r: the output's and the
    residual's (M, N) rows in boxes of (64, BLOCK_N) (desc_r is any such descriptor without a residual). With
    k_splits > 1 each tile's K steps are cut in that many slices, whose float32 sums go to Partial (k_splits, M, N)
    instead, for matmul_reduce_kernel (the epilogue's switches are then off). The epilogue's input (a row: linear's
    bias, addmm's input of one row; stride_im is 0, for the config's predicate) and residual are run-time options, as
    in matmul_kernel's fused binary; act < 0 is none."""
    if PDL:  # as kernels_src/_pdl.py's wait_for_predecessor, in Gluon
        gdc_wait()
    dtype: gl.constexpr = desc_c.dtype
    gl.static_assert(BLOCK_N != BLOCK_K, "_k_major tells B's layouts apart by their boxes")
    gl.static_assert(B_ROWS == (BLOCK_N if B_K_CONTIGUOUS else BLOCK_K), "desc_b's box (B_ROWS, B_COLS)")
    a_smem = gl.allocate_shared_memory(dtype, [2 * STAGES, WG_ROWS, BLOCK_K], desc_a.layout)
    b_smem = gl.allocate_shared_memory(dtype, [STAGES, B_ROWS, B_COLS], desc_b.layout)
    c_smem = gl.allocate_shared_memory(dtype, [2, WG_ROWS, BLOCK_N], desc_c.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # both consumers release each stage
    r_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(r_bar.index(i), count=1)
    sizes = (M, N, K, k_splits)
    epilogue = (Partial, stride_in, alpha, beta, has_input, has_residual, act)
    consumer_args = (a_smem, b_smem, c_smem, ready, empty, r_bar, desc_c, desc_r, Input, sizes, epilogue)
    # registers per thread: the kernel's maxnreg (ws_maxnreg(128)) times its three warpgroups, shared out as
    # attn_fwd_ws's two consumers and loader share it
    REGISTERS: gl.constexpr = consumer_registers(128)
    gl.warp_specialize(
        [(_consumer_0, consumer_args), (_consumer_1, consumer_args),
         (_loader, (desc_a, desc_b, a_smem, b_smem, ready, empty, sizes))],
        [4, 1],
        [REGISTERS, LOADER_REGISTERS],
    )  # fmt: skip
