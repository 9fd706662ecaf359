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

from kernels_src._held_rows import allocate_row, step_layout


@gluon.jit
def allocate_group(dtype: gl.constexpr, HELD: gl.constexpr, CHUNK: gl.constexpr):
    """Shared memory for HELD elements of a group in steps of CHUNK (more than one vector per thread):
    (steps, vectors, elements per 16-byte vector)."""
    return allocate_row(dtype, HELD, step_layout(dtype, gl.num_warps()), CHUNK)


@gluon.jit
def step_offsets(held):
    """A step's offsets in held (allocate_group) as step_layout spreads it over the threads: each vector's first
    element (1-D), and every element's (2-D: vectors, elements)."""
    VEC: gl.constexpr = held.type.shape[2]
    layout: gl.constexpr = step_layout(held.dtype, gl.num_warps())
    vectors = gl.arange(0, held.type.shape[1], layout=gl.SliceLayout(1, layout)) * VEC
    return vectors, vectors[:, None] + gl.arange(0, VEC, layout=gl.SliceLayout(0, layout))[None, :]


@gluon.jit
def copy_group(held, X, n):
    """Start the copies of the n elements at X into held (steps, vectors, elements), one copy group per step, so
    the sums can start on the first step while the later ones land."""
    STEPS: gl.constexpr = held.type.shape[0]
    CHUNK: gl.constexpr = held.type.shape[1] * held.type.shape[2]
    _, offsets = step_offsets(held)
    for i in gl.static_range(STEPS):
        cols = i * CHUNK + offsets
        if i * CHUNK < n:
            async_copy.async_load(held.index(i), X + cols, mask=cols < n)
        async_copy.commit_group()


@gluon.jit
def group_sums(held, n, shift):
    """The sums of x - shift and of their squares over the n elements copied into held (copy_group), each step as it
    lands: each thread reads back the elements it copied (the same layout), so its own wait_group orders them."""
    STEPS: gl.constexpr = held.type.shape[0]
    CHUNK: gl.constexpr = held.type.shape[1] * held.type.shape[2]
    _, offsets = step_offsets(held)
    layout: gl.constexpr = step_layout(held.dtype, gl.num_warps())
    total = gl.zeros([held.type.shape[1], held.type.shape[2]], gl.float32, layout)
    squares = gl.zeros([held.type.shape[1], held.type.shape[2]], gl.float32, layout)
    for i in gl.static_range(STEPS):
        async_copy.wait_group(STEPS - 1 - i)
        if i * CHUNK < n:
            cols = i * CHUNK + offsets
            d = gl.where(cols < n, held.index(i).load(layout).to(gl.float32) - shift, 0.0)
            total += d
            squares += d * d
    return gl.sum(gl.sum(total, 1), 0), gl.sum(gl.sum(squares, 1), 0)


@gluon.jit
def write_group(held, Y, W, B, n, first, first_channel, spatial, mean, rstd, has_weight, has_bias):
    """Write the n elements held (the group's from its element `first`, whose channels count from first_channel) to
    Y, normalized by mean and rstd, then scaled and shifted per channel."""
    STEPS: gl.constexpr = held.type.shape[0]
    CHUNK: gl.constexpr = held.type.shape[1] * held.type.shape[2]
    vectors, offsets = step_offsets(held)
    layout: gl.constexpr = step_layout(held.dtype, gl.num_warps())
    for i in gl.static_range(STEPS):
        if i * CHUNK < n:
            starts = i * CHUNK + vectors
            cols = i * CHUNK + offsets
            y = (held.index(i).load(layout).to(gl.float32) - mean) * rstd
            channel = first_channel + (first + starts) // spatial  # one division per vector
            if has_weight != 0:
                y = y * gl.load(W + channel, mask=starts < n, other=0.0).to(gl.float32)[:, None]
            if has_bias != 0:
                y = y + gl.load(B + channel, mask=starts < n, other=0.0).to(gl.float32)[:, None]
            gl.store(Y + cols, y.to(held.dtype), mask=cols < n)


@gluon.jit
def group_norm_held_kernel(
    X, W, B, Y, n_elems, spatial, channels_per_group, groups, eps, has_weight, has_bias,
    HELD: gl.constexpr, CHUNK: gl.constexpr, PDL: gl.constexpr = False,
):  # fmt: skip
    held = allocate_group(X.dtype.element_ty, HELD, CHUNK)
    row = gl.program_id(0)
    base = row.to(gl.int64) * n_elems
    if PDL:
        gdc_wait()
    copy_group(held, X + base, n_elems)
    # shift: the group's first element, as group_norm_kernel's looping sums take it, so that the variance is no
    # difference of large sums
    shift = gl.load(X + base).to(gl.float32)
    total, squares = group_sums(held, n_elems, shift)
    mean_shifted = total / n_elems
    var = gl.maximum(squares / n_elems - mean_shifted * mean_shifted, 0.0)
    mean = shift + mean_shifted
    rstd = gl.rsqrt(var + eps)
    first_channel = (row % groups) * channels_per_group
    write_group(held, Y + base, W, B, n_elems, 0, first_channel, spatial, mean, rstd, has_weight, has_bias)
