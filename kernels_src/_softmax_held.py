"""softmax and log_softmax on Hopper for rows that fit a multiprocessor's shared memory, written in Gluon (the
technique of _group_norm_held.py; the copies are _held_rows.py's): a program copies its row whole into shared memory
with cp.async, which holds no registers while the bytes are in flight, takes the row's max and sum from there as each
step lands, and writes the output from there. x is read from memory once, where softmax_kernel's looping rows read it
twice (the second time from L2 when it is still there).

A program per row: a persistent grid whose programs each walked rows, loading the next row into the steps already
written out, ran 8-12% slower (its programs stay in lockstep, h100-2026-11-26-experiments.md, stop 31).

Semantics are softmax_kernel's (softmax.py) for mode 0 (softmax) and 1 (log_softmax): rows of n_cols elements at
X + row * stride_x, outputs at Y + row * stride_y; a row of -inf gives NaN, as torch does. The C side sends only
rows that fit HELD elements and whose length and strides are multiples of the 16-byte vector."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.language.extra.cuda import gdc_wait

from kernels_src._held_rows import allocate_row, copy_steps, step_columns, step_layout
from kernels_src._lse import LOG2E, exp2_ftz


@gluon.jit
def _output(x, mode, safe, log_total, shift, scale):
    """softmax (mode 0) or log_softmax of float32 x, from the row's max (safe, 0 for a row of -inf), its log-sum
    log_total, shift = safe * LOG2E and scale = 1 / the sum."""
    if mode == 0:
        y = exp2_ftz(x * LOG2E - shift) * scale
    else:
        y = x - safe - log_total
    return y


@gluon.jit
def held_stats(held, cols, n, layout: gl.constexpr):
    """Each thread's running max and sum of exp(x - max) over its vectors of the first n elements held (steps,
    vectors, elements), taken as each step lands (its copy group). Each thread keeps a max and a sum of its own,
    reduced with the others' once by the caller: a max across the program per step, as online_lse_step takes
    (_lse.py), would stop every warp at two more barriers a step."""
    STEPS: gl.constexpr = held.type.shape[0]
    VECTORS: gl.constexpr = held.type.shape[1]
    CHUNK: gl.constexpr = VECTORS * held.type.shape[2]
    per_thread: gl.constexpr = gl.SliceLayout(1, layout)
    m = gl.full([VECTORS], -float("inf"), gl.float32, per_thread)
    s = gl.zeros([VECTORS], gl.float32, per_thread)
    for i in gl.static_range(STEPS):
        async_copy.wait_group(STEPS - 1 - i)
        if i * CHUNK < n:
            x = gl.where(i * CHUNK + cols < n, held.index(i).load(layout).to(gl.float32), -float("inf"))
            m_new = gl.maximum(m, gl.max(x, axis=1))
            scaled = gl.where(m_new == -float("inf"), 0.0, m_new) * LOG2E
            s = s * exp2_ftz(m * LOG2E - scaled) + gl.sum(exp2_ftz(x * LOG2E - scaled[:, None]), axis=1)
            m = m_new
    return m, s


@gluon.jit
def write_held(held, Y, cols, n, row, layout: gl.constexpr):
    """Write the outputs of the first n elements held to Y; row = (mode, safe, log_total, shift, scale), _output's."""
    STEPS: gl.constexpr = held.type.shape[0]
    CHUNK: gl.constexpr = held.type.shape[1] * held.type.shape[2]
    mode, safe, log_total, shift, scale = row
    for i in gl.static_range(STEPS):
        if i * CHUNK < n:
            c = i * CHUNK + cols
            y = _output(held.index(i).load(layout).to(gl.float32), mode, safe, log_total, shift, scale)
            gl.store(Y + c, y.to(Y.dtype.element_ty), mask=c < n)


@gluon.jit
def softmax_held_kernel(
    X, Y, stride_x, stride_y, n_cols, mode, HELD: gl.constexpr, PER_SM: gl.constexpr, TAIL: gl.constexpr = 0,
    PDL: gl.constexpr = False,
):  # fmt: skip
    """PER_SM: the programs of HELD elements a multiprocessor's shared memory holds, which the static assertion below
    checks (the config's occupancy, named in its label). TAIL: elements past those held in registers, a whole number
    of vectors per thread."""
    dtype: gl.constexpr = X.dtype.element_ty
    gl.static_assert(PER_SM * HELD * dtype.primitive_bitwidth // 8 <= 224 * 1024, "a multiprocessor's shared memory")
    layout: gl.constexpr = step_layout(dtype, gl.num_warps())
    per_thread: gl.constexpr = gl.SliceLayout(1, layout)
    held = allocate_row(dtype, HELD, layout)
    VEC: gl.constexpr = held.type.shape[2]
    cols = step_columns(layout)
    row = gl.program_id(0).to(gl.int64)
    X += row * stride_x
    Y += row * stride_y
    if PDL:
        gdc_wait()
    copy_steps(held, X, cols, n_cols)
    if TAIL > 0:  # loaded while the copies land
        within = gl.arange(0, VEC, layout=gl.SliceLayout(0, layout))[None, :]
        t_cols = HELD + gl.arange(0, TAIL // VEC, layout=per_thread)[:, None] * VEC + within
        x_tail = gl.load(X + t_cols, mask=t_cols < n_cols, other=-float("inf"))

    m, s = held_stats(held, cols, n_cols, layout)
    row_max = gl.max(m, axis=0)
    if TAIL > 0:
        row_max = gl.maximum(row_max, gl.max(gl.max(x_tail, axis=1), axis=0).to(gl.float32))
    safe = gl.where(row_max == -float("inf"), 0.0, row_max)
    total = gl.sum(s * exp2_ftz((m - safe) * LOG2E), axis=0)
    if TAIL > 0:
        total += gl.sum(gl.sum(exp2_ftz(x_tail.to(gl.float32) * LOG2E - safe * LOG2E), axis=1), axis=0)
    log_total = gl.log(total)
    scale = 1.0 / total  # a row of -inf: 1 / 0, and its outputs 0 * inf = NaN, as torch's
    write_held(held, Y, cols, n_cols, (mode, safe, log_total, safe * LOG2E, scale), layout)
    if TAIL > 0:
        y = _output(x_tail.to(gl.float32), mode, safe, log_total, safe * LOG2E, scale)
        gl.store(Y + t_cols, y.to(dtype), mask=t_cols < n_cols)
