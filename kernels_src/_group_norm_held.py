"""group_norm on Hopper for groups of up to 64 KB, written in Gluon: a program copies its whole group into shared
memory with cp.async, which holds no registers while the bytes are in flight, so the three programs a
multiprocessor runs keep up to 192 KB of loads going. The mean, the variance around it and the normalized output
are then taken from shared memory: x is read from memory once, where group_norm_kernel's two passes read it twice
(the second time from L2 when it is still there).

Semantics are group_norm_kernel's (norm.py): x and y contiguous (N, C, *spatial), program_id(0) the (sample, group)
row of n_elems = channels_per_group * spatial elements; the C side sends only groups that fit HELD elements, whose
spatial size is a multiple of the 16-byte vector (a vector's elements share a channel)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.language.extra.cuda import gdc_wait


@gluon.jit
def group_norm_held_kernel(
    X, W, B, Y, n_elems, spatial, channels_per_group, groups, eps, has_weight, has_bias,
    HELD: gl.constexpr, CHUNK: gl.constexpr, PDL: gl.constexpr = False,
):  # fmt: skip
    dtype: gl.constexpr = X.dtype.element_ty
    VEC: gl.constexpr = 128 // dtype.primitive_bitwidth  # elements per 16-byte copy
    ROWS: gl.constexpr = CHUNK // VEC
    STEPS: gl.constexpr = HELD // CHUNK
    layout: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [gl.num_warps(), 1], [1, 0])
    held = gl.allocate_shared_memory(dtype, [STEPS, ROWS, VEC], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    row = gl.program_id(0)
    base = row.to(gl.int64) * n_elems
    vectors = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout)) * VEC
    within = gl.arange(0, VEC, layout=gl.SliceLayout(0, layout))
    if PDL:
        gdc_wait()
    # one copy group per step, so the sums can start on the first step while the later ones land
    for i in gl.static_range(STEPS):
        cols = i * CHUNK + vectors[:, None] + within[None, :]
        if i * CHUNK < n_elems:
            async_copy.async_load(held.index(i), X + base + cols, mask=cols < n_elems)
        async_copy.commit_group()

    # each thread reads back the elements it copied (the same layout), so its own wait_group orders them; sums of
    # x - shift and of their squares as each step lands (shift: the group's first element, as group_norm_kernel's
    # looping sums take it, so that the variance is no difference of large sums)
    shift = gl.load(X + base).to(gl.float32)
    total = gl.zeros([ROWS, VEC], gl.float32, layout)
    squares = gl.zeros([ROWS, VEC], gl.float32, layout)
    for i in gl.static_range(STEPS):
        async_copy.wait_group(STEPS - 1 - i)
        if i * CHUNK < n_elems:
            cols = i * CHUNK + vectors[:, None] + within[None, :]
            d = gl.where(cols < n_elems, held.index(i).load(layout).to(gl.float32) - shift, 0.0)
            total += d
            squares += d * d
    mean_shifted = gl.sum(gl.sum(total, 1), 0) / n_elems
    var = gl.maximum(gl.sum(gl.sum(squares, 1), 0) / n_elems - mean_shifted * mean_shifted, 0.0)
    mean = shift + mean_shifted
    rstd = gl.rsqrt(var + eps)

    first_channel = (row % groups) * channels_per_group
    for i in gl.static_range(STEPS):
        if i * CHUNK < n_elems:
            starts = i * CHUNK + vectors
            cols = starts[:, None] + within[None, :]
            y = (held.index(i).load(layout).to(gl.float32) - mean) * rstd
            channel = first_channel + starts // spatial  # one division per vector
            if has_weight != 0:
                y = y * gl.load(W + channel, mask=starts < n_elems, other=0.0).to(gl.float32)[:, None]
            if has_bias != 0:
                y = y + gl.load(B + channel, mask=starts < n_elems, other=0.0).to(gl.float32)[:, None]
            gl.store(Y + base + cols, y.to(dtype), mask=cols < n_elems)
