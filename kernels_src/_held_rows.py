"""Rows held whole in shared memory (Hopper's softmax_held_kernel and row_norm_held_kernel, in Gluon): a program
copies its row with 16-byte cp.async, one vector per thread per step and one copy group per step, so that it can
work on each step as it lands; each thread then reads back from shared memory only the elements it copied (the same
layout), which its own wait_group orders. Triton still puts a barrier after each wait, since it cannot see that
(h100-2026-11-26-experiments.md: halving them changed nothing, stop 31; nor did removing the held norm's second one
a step, stop 32)."""

from triton import constexpr_function
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy


@constexpr_function
def step_layout(dtype, num_warps):
    """A step's tile: a row of one 16-byte vector per thread, (vectors, elements per vector)."""
    vec = 128 // gl._unwrap_if_constexpr(dtype).primitive_bitwidth
    return gl.BlockedLayout([1, vec], [32, 1], [gl._unwrap_if_constexpr(num_warps), 1], [1, 0])


@gluon.jit
def allocate_row(dtype: gl.constexpr, HELD: gl.constexpr, layout: gl.constexpr, STEP: gl.constexpr = 0):
    """Shared memory for HELD elements of a row in steps of STEP elements, by default layout's tile (one vector per
    thread): (steps, vectors, elements per vector)."""
    VEC: gl.constexpr = layout.size_per_thread[1]
    STEP_ELEMENTS: gl.constexpr = STEP if STEP else VEC * 32 * gl.num_warps()
    gl.static_assert(HELD % STEP_ELEMENTS == 0 and STEP_ELEMENTS % VEC == 0, "HELD is a whole number of steps")
    tile: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    return gl.allocate_shared_memory(dtype, [HELD // STEP_ELEMENTS, STEP_ELEMENTS // VEC, VEC], tile)


@gluon.jit
def step_columns(layout: gl.constexpr):
    """The columns of a step's tile, from the step's first."""
    VECTORS: gl.constexpr = 32 * gl.num_warps()
    VEC: gl.constexpr = layout.size_per_thread[1]
    within = gl.arange(0, VEC, layout=gl.SliceLayout(0, layout))[None, :]
    return gl.arange(0, VECTORS, layout=gl.SliceLayout(1, layout))[:, None] * VEC + within


@gluon.jit
def copy_step(held, slot: gl.constexpr, step: gl.constexpr, Row, cols, n_cols):
    """Start the copy of the row's step (at Row) into held's slot, unless the row ends before it; no copy group of
    its own."""
    CHUNK: gl.constexpr = held.type.shape[1] * held.type.shape[2]
    if step * CHUNK < n_cols:
        async_copy.async_load(held.index(slot), Row + step * CHUNK + cols, mask=step * CHUNK + cols < n_cols)


@gluon.jit
def copy_steps(held, X, cols, n_cols, other=None, Other=None):
    """Start the copies of the row at X into held (steps, vectors, elements), and of the row at Other into other
    when given: one copy group per step, empty past the row's end."""
    STEPS: gl.constexpr = held.type.shape[0]
    for i in gl.static_range(STEPS):
        copy_step(held, i, i, X, cols, n_cols)
        if Other is not None:
            copy_step(other, i, i, Other, cols, n_cols)
        async_copy.commit_group()
