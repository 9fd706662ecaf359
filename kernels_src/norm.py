"""Normalization over rows: rms_norm, layer_norm and the gated norm_gate share one kernel; group_norm has its own.

row_norm_kernel: one program per row of the last dim. The norm's kind (rms or layer), the weight's offset (the
(1 + w) form), an optional weight and bias, and the gate's activation and position are run-time scalars, so they
cost no variants (one exception: layer norms with a weight and a bias on rows of 16385-32768 have a config with
those fixed, LAYER_AFFINE); the residual add (h = x + r, written out) and the gate (a second input) are compiled in.
Rows up to 32768 columns stay in registers (one read of x); longer rows loop over the row twice (the sums, then the
write), re-reading it from L2. On Hopper, with at least four rows per multiprocessor, longer rows that fit shared memory
take row_norm_held_kernel (_row_norm_held.py, Gluon) instead, which copies each row whole there and reads it once;
rows past one multiprocessor's shared memory (to 448 KB) are shared by a thread-block cluster of its programs.

group_norm_kernel: one program per (sample, group), whose channels x spatial elements are contiguous, or, when
few long groups would leave the GPU idle, several per group (program_id(1)) after group_norm_stats_kernel has summed
each chunk; the weight and bias are per channel. Long unsplit groups take longer steps (LONG_GROUP_CONFIGS).
On Hopper, unsplit groups of 8193 elements to 64 KB, a full wave of them at least, take group_norm_held_kernel
(_group_norm_held.py, Gluon), which copies each group whole into shared memory and so reads x once; groups of 96 KB
to 512 KB, two waves of programs at least, take group_norm_cluster_kernel (_group_norm_cluster.py), a thread-block
cluster of 2-8 programs per group.
"""

from dataclasses import replace

import triton
import triton.language as tl

from aot.spec import ALIGNED_ONLY, Config, Kernel, Target, f32, i32, i64, is_hopper, ptr
from kernels_src._group_norm_cluster import group_norm_cluster_kernel
from kernels_src._group_norm_held import group_norm_held_kernel
from kernels_src._pdl import wait_for_predecessor
from kernels_src._row_norm_held import row_norm_held_kernel
from kernels_src._rows import ELEMENT_BYTES, LONG_LOOP_CONFIGS, LOOP_BLOCK, ROW_BLOCKS, norm_rows, row_configs


@triton.jit
def _gated(x, g, gate_silu):
    """The gate's activation times x: silu(g) = g * sigmoid(g), or sigmoid(g)."""
    sig = tl.sigmoid(g)
    return x * tl.where(gate_silu != 0, g * sig, sig)


@triton.jit
def _load_input(X, R, G, H, c, mask, gate_silu, gate_pre, HAS_RESIDUAL: tl.constexpr, HAS_GATE: tl.constexpr,
                WRITE_H: tl.constexpr, EVICTION: tl.constexpr, GATE_WITH_X: tl.constexpr = False):  # fmt: skip
    """One block of the values normalized: x, x + residual (stored to H on the first pass), or x * act(gate).
    EVICTION: the reads' L2 policy ("evict_first" on a looping row's last pass). GATE_WITH_X: the gate's load is
    masked rather than under the branch, so that it is issued with x's (see row_norm_kernel)."""
    x = tl.load(X + c, mask=mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    if HAS_RESIDUAL:
        x += tl.load(R + c, mask=mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
        if WRITE_H:
            tl.store(H + c, x.to(H.dtype.element_ty), mask=mask)
    if HAS_GATE:
        if GATE_WITH_X:
            g = tl.load(G + c, mask=mask & (gate_pre != 0), other=0.0, eviction_policy=EVICTION)
            if gate_pre != 0:
                x = _gated(x, g.to(tl.float32), gate_silu)
        elif gate_pre != 0:
            x = _gated(x, tl.load(G + c, mask=mask, other=0.0, eviction_policy=EVICTION).to(tl.float32), gate_silu)
    return x


@triton.jit
def _store_output(Y, W, B, G, c, mask, x_hat, has_weight, has_bias, w_offset, gate_silu, gate_pre,
                  HAS_GATE: tl.constexpr, EVICTION: tl.constexpr):  # fmt: skip
    """y = x_hat * (offset + w) + b, times act(gate) when the gate comes after the norm. EVICTION: the L2 policy
    of the gate's read and y's write (the weight and bias, shared by every row, keep the default)."""
    y = x_hat
    if has_weight != 0:
        y = y * (w_offset + tl.load(W + c, mask=mask, other=0.0).to(tl.float32))
    if has_bias != 0:
        y += tl.load(B + c, mask=mask, other=0.0).to(tl.float32)
    if HAS_GATE:
        if gate_pre == 0:
            y = _gated(y, tl.load(G + c, mask=mask, other=0.0, eviction_policy=EVICTION).to(tl.float32), gate_silu)
    tl.store(Y + c, y.to(Y.dtype.element_ty), mask=mask, eviction_policy=EVICTION)


@triton.jit
def _welford_row(X, R, G, H, cols, n_cols, gate_silu, gate_pre, HAS_RESIDUAL: tl.constexpr, HAS_GATE: tl.constexpr,
                 BLOCK_N: tl.constexpr):  # fmt: skip
    """A looping row's mean and sum of squares about it in one read (writing x + residual on the way): each lane
    keeps Welford's running mean and sum of squares; the lanes merge by Chan's formula in two plain sums. No
    cancellation for rows far from zero mean, and a layer norm reads its row twice in all, not three times (the
    mean, the squares about it, then the write). H100, bf16: layer_norm at 1024 x 131072 1.22 -> 1.72 TB/s
    (h100-2026-11-23-experiments.md; rows of 32768 or fewer are held whole since, NORM_ROW_BLOCKS)."""
    mean = tl.zeros([BLOCK_N], dtype=tl.float32)
    m2 = tl.zeros([BLOCK_N], dtype=tl.float32)
    count = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        c = start + cols
        mask = c < n_cols
        x = _load_input(X, R, G, H, c, mask, gate_silu, gate_pre, HAS_RESIDUAL, HAS_GATE, True, "")
        # every lane still in the row has seen start // BLOCK_N + 1 values; masked lanes change nothing (delta 0)
        weight = 1.0 / (start // BLOCK_N + 1).to(tl.float32)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta * weight
        m2 += delta * (x - mean)
        count += mask.to(tl.float32)
    row_mean = tl.sum(mean * count, axis=0) / n_cols
    spread = mean - row_mean
    return row_mean, tl.sum(m2 + count * spread * spread, axis=0)


@triton.jit
def row_norm_kernel(
    X,
    W,
    B,
    R,
    G,
    Y,
    H,
    stride_x,
    stride_r,
    stride_g,
    stride_y,
    stride_h,
    n_cols,
    eps,
    w_offset,
    layer,
    has_weight,
    has_bias,
    gate_silu,
    gate_pre,
    HAS_RESIDUAL: tl.constexpr,
    HAS_GATE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOP: tl.constexpr,
    LAYER_AFFINE: tl.constexpr,
    PDL: tl.constexpr = False,
):
    wait_for_predecessor(PDL)
    if LAYER_AFFINE:  # a config for layer norms with a weight and a bias: their switches fold away (row_norm_configs)
        layer = 1
        has_weight = 1
        has_bias = 1
    X, R, G, Y, H = norm_rows(X, R, G, Y, H, stride_x, stride_r, stride_g, stride_y, stride_h, HAS_RESIDUAL, HAS_GATE)
    cols = tl.arange(0, BLOCK_N)
    if not LOOP:
        mask = cols < n_cols
        # Under its branch, the gate's load of each part of the row waits for the previous part's activation. Blocks
        # of 32768 half-precision elements issue it with x's (GATE_WITH_X): they run one program per multiprocessor
        # anyway. H100, bf16, wheel A/B (wheel_ab.py held_rows, h100-2026-11-24-experiments.md): norm_gate with
        # the gate first at 4096 x 32000 2.43 -> 3.01 TB/s. Smaller blocks keep the branch: the registers the
        # gate's load held pushed them past 32 per thread, halving the programs per multiprocessor.
        gate_with_x: tl.constexpr = BLOCK_N == 32768 and X.dtype.element_ty.primitive_bitwidth == 16
        x = _load_input(X, R, G, H, cols, mask, gate_silu, gate_pre, HAS_RESIDUAL, HAS_GATE, True, "", gate_with_x)
        if layer != 0:
            x = tl.where(mask, x - tl.sum(x, axis=0) / n_cols, 0.0)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        _store_output(Y, W, B, G, cols, mask, x * rstd, has_weight, has_bias, w_offset, gate_silu, gate_pre,
                      HAS_GATE, "")  # fmt: skip
    else:
        if layer != 0:
            mean, squares = _welford_row(X, R, G, H, cols, n_cols, gate_silu, gate_pre, HAS_RESIDUAL, HAS_GATE,
                                         BLOCK_N)  # fmt: skip
        else:
            mean = tl.zeros([], dtype=tl.float32)
            lanes = tl.zeros([BLOCK_N], dtype=tl.float32)
            for start in range(0, n_cols, BLOCK_N):
                c = start + cols
                mask = c < n_cols
                x = _load_input(X, R, G, H, c, mask, gate_silu, gate_pre, HAS_RESIDUAL, HAS_GATE, True, "")
                lanes += x * x
            squares = tl.sum(lanes, axis=0)
        rstd = tl.rsqrt(squares / n_cols + eps)
        # the last pass: the row's last reads and its writes evict first, keeping the rest of the row in L2
        for start in range(0, n_cols, BLOCK_N):
            c = start + cols
            mask = c < n_cols
            x = _load_input(X, R, G, H, c, mask, gate_silu, gate_pre, HAS_RESIDUAL, HAS_GATE, False, "evict_first")
            _store_output(Y, W, B, G, c, mask, (x - mean) * rstd, has_weight, has_bias, w_offset, gate_silu,
                          gate_pre, HAS_GATE, "evict_first")  # fmt: skip


@triton.jit
def _store_group(Y, W, B, c, mask, x_hat, channel, has_weight, has_bias, EVICTION: tl.constexpr):
    """y = x_hat * w[channel] + b[channel]. The gathers are masked loads rather than loads under branches: the
    compiler then issues them with x's load, where under the branches each waited for x_hat (H100, bf16, wheel A/B,
    h100-2026-11-24-experiments.md: 12 x 256 x 64 x 64 2.29 -> 2.83 TB/s, 64 x 512 x 16 x 16 2.76 -> 2.97)."""
    w = tl.load(W + channel, mask=mask & (has_weight != 0), other=1.0).to(tl.float32)
    b = tl.load(B + channel, mask=mask & (has_bias != 0), other=0.0).to(tl.float32)
    tl.store(Y + c, (x_hat * w + b).to(Y.dtype.element_ty), mask=mask, eviction_policy=EVICTION)


@triton.jit
def _write_chunk(X, Y, W, B, start, end, shift, mean_shifted, rstd, first_channel, spatial, has_weight, has_bias,
                 backward, BLOCK_N: tl.constexpr, EVICTION: tl.constexpr):  # fmt: skip
    """The normalized elements [start, end) of a group. The callers pass a spatial size that is a multiple of 16 as
    (spatial // 16) * 16: the compiler then knows its divisibility, and with it that a channel holds runs of 16
    elements, which the gathers of the weight and bias and the division gain from: in the wheel 1.83 against 1.48
    TB/s on 64 x 64 maps, 2.52 against 2.01 on 16 x 16 (bf16, H100: benchmarks/results/h100-2026-11-22-norms.md;
    the JIT, which specializes such sizes, was at 1.83 and 2.64 already: benchmarks/experiments/group_norm_split.py).
    EVICTION: the L2 policy of its reads of x (their last) and its writes (GROUP_EVICT_FIRST).

    `backward` (a split group's chunk) takes the steps from the chunk's end to its start: the sums' launch read the
    end last, so more of what this pass reads first is still in L2. H100, bf16, wheel A/B (wheel_ab.py group_norm,
    h100-2026-11-24-experiments.md): 2 x 512 x 128 x 128 1.83 -> 1.98 TB/s, 4 x 512 x 128 x 128 1.64 -> 1.81,
    2 x 128 x 256 x 256 1.84-1.85 -> 1.98, 8 x 320 x 64 x 64 2.31-2.32 -> 2.34. An unsplit group's second pass, right
    after its first, lost 20% backward at 12 x 256 x 64 x 64 (2.78-2.95 -> 2.25-2.31), so it keeps going forward."""
    cols = tl.arange(0, BLOCK_N)
    if backward:
        steps = tl.cdiv(end - start, BLOCK_N)
        for i in range(0, steps):
            _write_step(X, Y, W, B, start + (steps - 1 - i) * BLOCK_N + cols, end, shift, mean_shifted, rstd,
                        first_channel, spatial, has_weight, has_bias, EVICTION)  # fmt: skip
    else:
        for off in range(start, end, BLOCK_N):
            _write_step(X, Y, W, B, off + cols, end, shift, mean_shifted, rstd, first_channel, spatial, has_weight,
                        has_bias, EVICTION)  # fmt: skip


@triton.jit
def _write_step(X, Y, W, B, c, end, shift, mean_shifted, rstd, first_channel, spatial, has_weight, has_bias,
                EVICTION: tl.constexpr):  # fmt: skip
    """The normalized elements c (those before end) of a group."""
    mask = c < end
    x = tl.load(X + c, mask=mask, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    x_hat = (x - shift - mean_shifted) * rstd  # x - shift is exact; the mean itself may round
    _store_group(Y, W, B, c, mask, x_hat, first_channel + c // spatial, has_weight, has_bias, EVICTION)


# The most programs a group is split over (exported to csrc/ops/norm.c).
GROUP_NORM_MAX_SPLITS = tl.constexpr(64)


@triton.jit
def _shifted_sums(X, start, end, shift, BLOCK_N: tl.constexpr):
    """Sums of x - shift and of its squares over elements [start, end) of a group."""
    cols = tl.arange(0, BLOCK_N)
    sums = tl.zeros([BLOCK_N], dtype=tl.float32)
    squares = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(start, end, BLOCK_N):
        c = off + cols
        mask = c < end
        d = tl.where(mask, tl.load(X + c, mask=mask, other=0.0).to(tl.float32) - shift, 0.0)
        sums += d
        squares += d * d
    return tl.sum(sums, axis=0), tl.sum(squares, axis=0)


@triton.jit
def group_norm_stats_kernel(X, Partials, n_elems, chunk, BLOCK_N: tl.constexpr, PDL: tl.constexpr = False):
    """The first of a split group's two launches: program (group, split) sums x - x[0] and its squares over its
    chunk into Partials[group, split, 0:2]. Every split shifts by the group's first element, so the partial sums
    simply add."""
    wait_for_predecessor(PDL)
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    X += row * n_elems
    start = split * chunk
    end = start + tl.minimum(chunk, n_elems.to(tl.int32) - start)
    sums, squares = _shifted_sums(X, start, end, tl.load(X).to(tl.float32), BLOCK_N)
    Partials += (row * tl.num_programs(1) + split) * 2
    tl.store(Partials, sums)
    tl.store(Partials + 1, squares)


@triton.jit
def _group_moments(X, Partials, row, n, splits, eps, BLOCK_N: tl.constexpr):
    """A looping group's shift (its first element), mean of x - shift and 1 / sqrt(var + eps): from its sums, or
    with `splits` > 1 from the chunks' sums in Partials[row] (added in a fixed order)."""
    shift = tl.load(X).to(tl.float32)
    if splits == 1:
        sums, squares = _shifted_sums(X, 0, n, shift, BLOCK_N)
    else:
        p = tl.arange(0, GROUP_NORM_MAX_SPLITS)
        mine = Partials + row * splits * 2 + p * 2
        sums = tl.sum(tl.load(mine, mask=p < splits, other=0.0), axis=0)
        squares = tl.sum(tl.load(mine + 1, mask=p < splits, other=0.0), axis=0)
    mean_shifted = sums / n
    rstd = tl.rsqrt(tl.maximum(squares / n - mean_shifted * mean_shifted, 0.0) + eps)
    return shift, mean_shifted, rstd


@triton.jit
def group_norm_kernel(
    X,
    W,
    B,
    Y,
    Partials,
    n_elems,
    chunk,
    spatial,
    channels_per_group,
    groups,
    eps,
    has_weight,
    has_bias,
    BLOCK_N: tl.constexpr,
    LOOP: tl.constexpr,
    EVICT_FIRST: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """x and y contiguous (N, C, *spatial): group `program_id(0)` is n_elems = channels_per_group * spatial
    consecutive elements, at most 2**31 - 4096, so an element's channel is a 32-bit division (a 64-bit one per element
    ran at a third of the bandwidth). A group longer than a block takes two passes: sums of x - x[0] and of its
    squares (the shift keeps the variance's subtraction exact enough when the mean is far from 0), then the
    normalized write. With few groups the C side splits each over program_id(1) in chunks: group_norm_stats_kernel
    has then written each chunk's sums to Partials, and each program adds them (in a fixed order) and writes its
    chunk."""
    wait_for_predecessor(PDL)
    row = tl.program_id(0).to(tl.int64)
    first_channel = (tl.program_id(0) % groups) * channels_per_group
    X += row * n_elems
    Y += row * n_elems
    cols = tl.arange(0, BLOCK_N)
    if not LOOP:
        mask = cols < n_elems
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.where(mask, x - tl.sum(x, axis=0) / n_elems, 0.0)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_elems + eps)
        if spatial % 16 == 0:
            spatial16 = (spatial // 16) * 16  # see _write_chunk
            _store_group(Y, W, B, cols, mask, x * rstd, first_channel + cols // spatial16, has_weight, has_bias, "")
        else:
            _store_group(Y, W, B, cols, mask, x * rstd, first_channel + cols // spatial, has_weight, has_bias, "")
    else:
        n = n_elems.to(tl.int32)
        split = tl.program_id(1)
        splits = tl.num_programs(1)
        shift, mean_shifted, rstd = _group_moments(X, Partials, row, n, splits, eps, BLOCK_N)
        start = split * chunk
        end = start + tl.minimum(chunk, n - start)  # no 32-bit overflow past n
        if spatial % 16 == 0:
            _write_chunk(X, Y, W, B, start, end, shift, mean_shifted, rstd, first_channel, (spatial // 16) * 16,
                         has_weight, has_bias, splits > 1, BLOCK_N, "evict_first" if EVICT_FIRST else "")  # fmt: skip
        else:
            _write_chunk(X, Y, W, B, start, end, shift, mean_shifted, rstd, first_channel, spatial, has_weight,
                         has_bias, splits > 1, BLOCK_N, "evict_first" if EVICT_FIRST else "")  # fmt: skip


# Long groups that run unsplit, 3 or more programs per multiprocessor: each step of the two passes reads 8192
# elements from groups of 32768, 16384 from groups of 65536 (16 warps), not 4096. H100, bf16, through the JIT as the
# wheel launches it (benchmarks/experiments/group_norm_blocks.py more): 32768 elements at 512-2048 groups
# 1.75-1.89 -> 2.15-2.46 TB/s, 65536 at 512-1024 groups 1.72-1.76 -> 2.06-2.12. With fewer groups per
# multiprocessor, or in split launches, steps of 4096 were as fast or faster.
LONG_GROUP_CONFIGS = [
    Config({"BLOCK_N": block, "LOOP": True}, num_warps=16, fallback=False,
           when=f"splits == 1 && programs_per_sm >= 3 && n_elems >= {4 * block}")
    for block in (16384, 8192)
]  # fmt: skip


# The writing pass of the looping configs of 4096 marks its reads of x and its writes evict-first, so that the lines
# of x the sums left in L2 stay there longer for it. H100, bf16, 4096 / 8 warps (group_norm_blocks.py few, on copies
# of this file with and without): 1.60-2.15 -> 1.67-2.20 TB/s, 2 x 512 x 128 x 128 (split) 1.68 -> 1.84; in the
# wheel 1.62 -> 1.78 there. The long groups' configs lost 3% with it at 32 x 256 x 64 x 64 (2.36 -> 2.30).
GROUP_EVICT_FIRST_BLOCK = 4096


def group_norm_configs() -> list[Config]:
    """The rows' configs (groups held whole, the long groups' steps, the looping fallback); EVICT_FIRST for the
    looping steps of GROUP_EVICT_FIRST_BLOCK."""
    configs = row_configs("n_elems", longer=LONG_GROUP_CONFIGS)
    return [
        replace(c, constexprs={**c.constexprs, "EVICT_FIRST": c.constexprs["LOOP"] and c.constexprs["BLOCK_N"] ==
                               GROUP_EVICT_FIRST_BLOCK})
        for c in configs
    ]  # fmt: skip


# Rows up to 32768 elements held whole by 32 warps rather than looped over (two reads of the row): H100, bf16,
# through the JIT as the wheel launches it (benchmarks/experiments/wide_rows.py), rms_norm / layer_norm /
# add+rms_norm at 4096 x 16384 2.75 / 2.24 / 2.42 -> 2.88 / 2.83 / 2.94 TB/s, at 4096 x 32000 2.34 / 2.05 / 2.04 ->
# 2.93 / 2.63 / 2.97 (torch.compile 2.77-2.91 on rms_norm and layer_norm there).
NORM_ROW_BLOCKS = ROW_BLOCKS + [(16384, 32), (32768, 32)]


# Rows past 32768 elements loop in steps that grow with the row, as the softmax family's (LONG_LOOP_CONFIGS): 8192
# (16 warps) below 73728 elements, 16384 (32 warps) from there. Every hinted row length then has a config before the
# looping fallback, which compiles only its unhinted variant (for rows that miss the hints; taking 16384 steps as
# the fallback instead made those rows 2-4x slower at 1000 and 4100 columns). H100, bf16, wheel A/B (wheel_ab.py
# long_rows, h100-2026-11-24-experiments.md), TB/s: rms_norm / layer_norm / add+rms_norm at 2048 x 65536 2.02 /
# 1.74 / 1.96 -> 2.35 / 1.94 / 2.09-2.14, at 1024 x 131072 1.94 / 1.71 / 1.92 -> 2.25 / 1.83 / 1.97.
#
# Layer norms with a weight and a bias on rows held in blocks of 32768 have a config of their own (LAYER_AFFINE),
# with the switches that layer_norm sets fixed at compile time. At 4096 x 32000 the run-time switches cost it 8%
# (H100, bf16, through the JIT: 2.62 against 2.84 TB/s, benchmarks/experiments/layer_norm_switches.py); in blocks of
# 16384 the folded form lost 23% (the registers it held halved the programs per multiprocessor), in 8192 it gained 2%.
# In the wheel (wheel_ab.py held_rows, h100-2026-11-24-experiments.md): 4096 x 32000 bf16 2.66 -> 2.80 TB/s, fp32
# 2.31 -> 2.55 (its variant spills 48 bytes and still gains).
LAYER_AFFINE_BLOCK = 32768


def row_norm_configs(target, keys):
    """The residual add and the gate are not combined (norm_gate takes no residual): that pair compiles nothing."""
    if keys["HAS_RESIDUAL"] and keys["HAS_GATE"]:
        return []
    configs = []
    for c in row_configs(blocks=NORM_ROW_BLOCKS, longer=LONG_LOOP_CONFIGS, loop_hinted=False):
        held = not c.constexprs["LOOP"] and c.constexprs["BLOCK_N"] == LAYER_AFFINE_BLOCK
        if held and not keys["HAS_RESIDUAL"] and not keys["HAS_GATE"]:
            configs.append(replace(c, constexprs={**c.constexprs, "LAYER_AFFINE": True},
                                   when=f"{c.when} && layer != 0 && has_weight != 0 && has_bias != 0"))  # fmt: skip
        configs.append(replace(c, constexprs={**c.constexprs, "LAYER_AFFINE": False}))
    return configs


# group_norm_cluster_kernel takes a group when each program's share is 48-64 KB and the clusters make two waves or more
# at three programs per multiprocessor. H100, bf16, against the split and looping kernels (wheel_ab.py group_norm and
# group_norm_waves, h100-2026-11-27-experiments.md, stop 41), TB/s: shares of 64 KB at 1024-2048 programs gained
# 7-37% (4 x 512 x 128 x 128 1.81 -> 2.22, 8 x 512 x 128 x 128 1.70 -> 2.33, 13 x 512 x 64 x 64 1.90 -> 2.15), at 768
# were even (3 x 512 x 128 x 128) and at 512 lost 5-15%; shares of 40 KB lost at every count (32 x 320 x 64 x 64:
# 2.31 -> 2.24), as softmax_cluster_kernel's shares under 48 KB do.
GROUP_CLUSTER_SHARE_MIN = 48 * 1024
GROUP_CLUSTER_PROGRAMS_PER_SM = 6


def group_cluster_configs(target: Target, keys) -> list[Config]:
    """group_norm_cluster_kernel: groups of 96-128 KB, 192-256 KB and 384-512 KB over clusters of 2, 4 and 8
    programs, each holding a share of up to 64 KB (three programs per multiprocessor), in steps of 4096 elements."""
    size = ELEMENT_BYTES[keys["T"]]
    held = 65536 // size
    return [
        Config(
            {"HELD": held, "CHUNK": 4096, "CLUSTER": c},
            num_warps=8,
            num_stages=1,
            cluster=c,
            when=f"n_elems <= {held * c} && n_elems >= {GROUP_CLUSTER_SHARE_MIN * c // size} && "
            f"n_rows * {c} >= {GROUP_CLUSTER_PROGRAMS_PER_SM} * NUM_SMS",
        )  # fmt: skip
        for c in (2, 4, 8)
    ]


# group_norm_held_kernel takes groups from a full wave of its programs (GROUP_HELD_PER_SM per multiprocessor; that
# many groups are never split, csrc/ops/norm.c). With less, its programs load, sum and store in lockstep, with no
# program in another phase to overlap: at 384 groups of 32768 it lost to the two-pass kernel on an H100 (2.17-2.28
# against 2.25-2.71 TB/s with x in L2, 2.42-2.46 against 2.38-2.39 without); at 512-1024 it gained 8-16%
# (h100-2026-11-24-experiments.md, stop 27).
GROUP_HELD_PER_SM = 3


def group_held_configs(target: Target, keys) -> list[Config]:
    """group_norm_held_kernel: groups of up to 64 KB in shared memory (three programs per multiprocessor), in
    steps of 4096 elements, from GROUP_HELD_PER_SM groups per multiprocessor."""
    held = 65536 // ELEMENT_BYTES[keys["T"]]
    return [
        Config(
            {"HELD": held, "CHUNK": 4096},
            num_warps=8,
            num_stages=1,
            when=f"n_elems <= {held} && n_rows >= {GROUP_HELD_PER_SM} * NUM_SMS",
        )
    ]


# What Hopper's group_norm_held_kernel and group_norm_cluster_kernel take: a program (or a cluster of them) per
# (sample, group) row of n_elems elements.
GROUP_HELD_LAUNCH = dict(
    op="group_norm",
    args=[
        ptr("X", "T"),
        ptr("W", "T"),
        ptr("B", "T"),
        ptr("Y", "T"),
        i64("n_elems", aligned=True),
        i32("spatial", aligned=True),
        i32("channels_per_group"),
        i32("groups"),
        f32("eps"),
        i32("has_weight"),
        i32("has_bias"),
    ],
    keys={"T": ["fp16", "bf16", "fp32"]},
    grid_args=[i64("n_rows")],
    grid=["n_rows", "1", "1"],
    aligned=ALIGNED_ONLY,
    targets=is_hopper,
)

# What row_norm_kernel and Hopper's row_norm_held_kernel take: a program per row of x (at X + row * stride_x, and
# the residual's, the gate's and the outputs' rows at theirs).
ROW_NORM_LAUNCH = dict(
    args=[
        ptr("X", "T"),
        ptr("W", "T"),
        ptr("B", "T"),
        ptr("R", "T"),
        ptr("G", "T"),
        ptr("Y", "T"),
        ptr("H", "T"),
        i64("stride_x", aligned=True),
        i64("stride_r", aligned=True),
        i64("stride_g", aligned=True),
        i64("stride_y", aligned=True),
        i64("stride_h", aligned=True),
        i32("n_cols", aligned=True),
        f32("eps"),
        f32("w_offset"),
        i32("layer"),
        i32("has_weight"),
        i32("has_bias"),
        i32("gate_silu"),
        i32("gate_pre"),
    ],
    grid_args=[i64("n_rows")],
    grid=["n_rows", "1", "1"],
)

REGISTER_ROW = NORM_ROW_BLOCKS[-1][0]  # rows up to this long stay in row_norm_kernel's registers
HELD_RING = 4  # the second input's steps in flight in row_norm_held_kernel
WHOLE_ROW = -1  # a plan's ring as long as the row: the second input held whole beside x
# row_norm_held_kernel takes rows from HELD_ROWS_PER_SM rows per multiprocessor: H100, bf16, 4096 x 50304 rms / layer
# norm 2.51 / 1.94 -> 2.86 / 2.79 TB/s, with residual 2.14 -> 2.96; at 528 x 40000 (four rows per multiprocessor)
# layer_norm, the residual and the gate forms gained 9-10%, rms_norm lost 7% (h100-2026-11-26-experiments.md, stop
# 31); 2048 x 65536 with residual 2.10 -> 2.87 (stop 32).
HELD_ROWS_PER_SM = 4


def row_held_configs(target: Target | None, keys) -> list[Config]:
    """row_norm_held_kernel: rows past REGISTER_ROW from HELD_ROWS_PER_SM rows per multiprocessor, of up to 112 KB two
    programs to a multiprocessor and 224 KB one, the first config whose predicate holds taken. A step is one 16-byte
    vector per thread. A second input (residual or gate) streams through a ring of HELD_RING steps, whose room comes
    off the row's; a gate after the norm, on one program per multiprocessor, is instead held whole beside x (a ring as
    long as the row), which read 2.83 TB/s on 4096 x 50304 where its ring read 2.40 (wheel_ab.py held_pairs,
    h100-2026-11-26-experiments.md). Keys with no row past REGISTER_ROW to hold compile nothing.

    Clusters, each program holding a share of the row: of 4 for rows past the one-program plans, to 448 KB (x alone)
    or 320 KB (with a second input), two programs per multiprocessor; x alone first in shares of 64 KB three per
    multiprocessor (to 256 KB); of 2 for a gate before the norm in place of one program. H100, wheel_ab.py
    cluster_norms and cluster_plain (h100-2026-11-27-experiments.md, stop 41), TB/s: bf16 1024 x 131072 (looping
    before) add+layer / gate first 1.77 / 1.88 -> 2.80 / 2.59 in shares of 112 KB, rms / layer 2.25 / 1.83 -> 2.41 /
    2.37 in shares of 112 KB and 2.64-2.65 in shares of 64 KB; float32 1024 x 65536 1.90-2.03 -> 2.53-2.84 (rms 2.79
    in shares of 64 KB); the gate first in clusters of 2, bf16 4096 x 50304 2.47 -> 2.55, 1024 x 81920 2.48 -> 2.59,
    float32 2048 x 40000 2.55 -> 2.73. Clusters of 2 in place of one program mostly lost 2-13% for the other forms
    (2048 x 65536 rms 2.76 -> 2.57), and against the looping kernel for a gate after the norm on rows up to the
    clusters of 2's length (1024 x 81920 2.63 -> 2.43), which the clusters of 4 take only past it."""
    size = ELEMENT_BYTES[keys["T"]]
    if keys["HAS_RESIDUAL"] and keys["HAS_GATE"]:
        return []
    ring = HELD_RING if keys["HAS_RESIDUAL"] or keys["HAS_GATE"] else 0

    def room(kb: int, warps: int, ring: int) -> tuple[int, int]:
        """x's elements held and the second input's ring steps in kb KB: a step is one 16-byte vector per thread."""
        step = warps * 32 * 16 // size
        if ring == WHOLE_ROW:  # x and the gate held whole, half the room each
            held = kb * 1024 // size // 2
            return held, held // step
        return kb * 1024 // size - ring * step, ring

    # kb, programs per SM, warps, ring steps, programs per cluster, predicate
    plans = [(112, 2, 16, ring, 1, "")]
    if keys["HAS_GATE"]:
        plans += [(112, 2, 16, ring, 2, "gate_pre != 0 && "), (224, 1, 32, WHOLE_ROW, 1, "gate_pre == 0 && ")]
    else:
        plans += [(224, 1, 32, ring, 1, "")]
    if not ring:  # x alone: shares of 64 KB three to a multiprocessor first
        plans += [(64, 3, 16, 0, 4, "")]
    pairs = 2 * room(112, 16, ring)[0]  # the clusters of 2's rows, which a gate after the norm leaves to the loop
    plans += [(112, 2, 16, ring, 4, f"(gate_pre != 0 || n_cols > {pairs}) && " if keys["HAS_GATE"] else "")]
    past_registers = f"n_cols > {REGISTER_ROW} && n_rows >= {HELD_ROWS_PER_SM} * NUM_SMS && "
    configs = []
    for kb, per_sm, warps, ring, cluster, predicate in plans:
        held, ring = room(kb, warps, ring)
        if held * cluster > REGISTER_ROW:
            constexprs = {"HELD": held, "RING": ring, "PER_SM": per_sm} | ({"CLUSTER": cluster} if cluster > 1 else {})
            configs.append(Config(constexprs, num_warps=warps, num_stages=1, cluster=cluster,
                                  when=f"{past_registers}{predicate}n_cols <= {held * cluster}"))  # fmt: skip
    return configs


KERNELS = [
    Kernel(
        fn=row_norm_kernel,
        op="norm",
        keys={"T": ["fp16", "bf16", "fp32"], "HAS_RESIDUAL": [False, True], "HAS_GATE": [False, True]},
        configs=row_norm_configs,
        exports={"REGISTER_ROW": REGISTER_ROW},  # C's shortcut past row_norm_held_kernel's selection on shorter rows
        **ROW_NORM_LAUNCH,
    ),
    Kernel(
        fn=group_norm_stats_kernel,
        op="group_norm",
        args=[ptr("X", "T"), ptr("Partials", "fp32"), i64("n_elems", aligned=True), i32("chunk", aligned=True)],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("n_rows"), i64("splits")],
        grid=["n_rows", "splits", "1"],
        configs=[Config({"BLOCK_N": LOOP_BLOCK}, num_warps=8)],
    ),
    Kernel(
        fn=group_norm_kernel,
        op="group_norm",
        args=[
            ptr("X", "T"),
            ptr("W", "T"),
            ptr("B", "T"),
            ptr("Y", "T"),
            ptr("Partials", "fp32"),
            i64("n_elems", aligned=True),
            i32("chunk", aligned=True),
            i32("spatial"),
            i32("channels_per_group"),
            i32("groups"),
            f32("eps"),
            i32("has_weight"),
            i32("has_bias"),
        ],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("n_rows"), i64("splits"), i64("programs_per_sm")],
        grid=["n_rows", "splits", "1"],
        configs=group_norm_configs(),
        # groups longer than WHOLE_BLOCK may be split, into chunks of a multiple of LOOP_BLOCK, MAX_SPLITS at most
        exports={"WHOLE_BLOCK": ROW_BLOCKS[-1][0], "LOOP_BLOCK": LOOP_BLOCK, "MAX_SPLITS": GROUP_NORM_MAX_SPLITS.value},
    ),
    Kernel(fn=group_norm_held_kernel, configs=group_held_configs, **GROUP_HELD_LAUNCH),
    Kernel(fn=group_norm_cluster_kernel, configs=group_cluster_configs, **GROUP_HELD_LAUNCH),
    Kernel(
        fn=row_norm_held_kernel,
        op="norm",
        keys={"T": ["fp16", "bf16", "fp32"], "HAS_RESIDUAL": [False, True], "HAS_GATE": [False, True]},
        configs=row_held_configs,
        aligned=ALIGNED_ONLY,
        targets=is_hopper,
        combos=lambda keys: row_held_configs(None, keys) != [],
        **ROW_NORM_LAUNCH,
    ),
]
