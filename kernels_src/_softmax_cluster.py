"""softmax and log_softmax on Hopper for long rows split over a thread-block cluster (aot.spec.Config.cluster), written
in Gluon: each of a row's CLUSTER programs copies its share of the row into shared memory with cp.async
(_held_rows.py's copies, as softmax_held_kernel), takes the share's max and sum as each step lands, and publishes
them; once every program of the cluster has (a cluster barrier, which the hardware can honour because a cluster's
programs run together), each combines the row's max and sum and writes its share of the output from shared memory.
x is read from memory once, in pieces small enough for three programs to share a multiprocessor, so that one
program's copies overlap another's arithmetic and writes, where softmax_held_kernel holds a long row in one program
per multiprocessor with nothing to overlap.

The partials travel through the output row itself: a program writes its share's max and sum (two float32) over its
share's first output elements, which it alone writes later; a second cluster barrier keeps it from writing them
before the others have read the partials. The output may then alias x: a program's share of x is in shared memory
before it writes anything.

Semantics are softmax_kernel's (softmax.py) for mode 0 (softmax) and 1 (log_softmax): rows of n_cols elements at
X + row * stride_x, outputs at Y + row * stride_y; a row of -inf gives NaN, as torch does. The C side sends rows
whose length and strides are multiples of the 16-byte vector and long enough that every program's share holds the
two partials (16-bit rows of at least 4 elements a program: rows past 8192 elements always do)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language.extra.cuda import gdc_wait

from kernels_src._cluster import cluster_barrier
from kernels_src._held_rows import allocate_row, copy_steps, step_columns, step_layout
from kernels_src._lse import LOG2E, exp2_ftz
from kernels_src._softmax_held import held_stats, write_held


@gluon.jit
def softmax_cluster_kernel(
    X, Y, stride_x, stride_y, n_cols, mode, HELD: gl.constexpr, PER_SM: gl.constexpr, CLUSTER: gl.constexpr,
    PDL: gl.constexpr = False,
):  # fmt: skip
    """A cluster of CLUSTER programs per row (program_id(0) counts programs); each holds at most HELD elements, a
    share of cdiv(n_cols, CLUSTER) rounded up to whole vectors. PER_SM: the programs a multiprocessor's shared memory
    holds, which the static assertion below checks."""
    dtype: gl.constexpr = X.dtype.element_ty
    gl.static_assert(PER_SM * HELD * dtype.primitive_bitwidth // 8 <= 224 * 1024, "a multiprocessor's shared memory")
    layout: gl.constexpr = step_layout(dtype, gl.num_warps())
    held = allocate_row(dtype, HELD, layout)
    VEC: gl.constexpr = held.type.shape[2]
    cols = step_columns(layout)
    program = gl.program_id(0)
    row = (program // CLUSTER).to(gl.int64)
    share = gl.cdiv(n_cols, CLUSTER * VEC) * VEC
    start = (program % CLUSTER) * share
    n = gl.minimum(gl.maximum(n_cols - start, 0), share)  # this program's elements
    X += row * stride_x + start
    Y += row * stride_y
    if PDL:
        gdc_wait()
    copy_steps(held, X, cols, n)

    m, s = held_stats(held, cols, n, layout)
    share_max = gl.max(m, axis=0)
    share_sum = gl.sum(s * exp2_ftz((m - gl.where(share_max == -float("inf"), 0.0, share_max)) * LOG2E), axis=0)
    partial = (Y + start).to(gl.pointer_type(gl.float32), bitcast=True)
    gl.store(partial, share_max)
    gl.store(partial + 1, share_sum)
    after = cluster_barrier()

    ranks = gl.arange(0, CLUSTER, layout=gl.BlockedLayout([1], [32], [gl.num_warps()], [0]))
    partials = (Y + after + ranks * share).to(gl.pointer_type(gl.float32), bitcast=True)
    maxes = gl.load(partials, cache_modifier=".cg")
    sums = gl.load(partials + 1, cache_modifier=".cg")
    row_max = gl.max(maxes, axis=0)
    safe = gl.where(row_max == -float("inf"), 0.0, row_max)
    total = gl.sum(sums * exp2_ftz((maxes - safe) * LOG2E), axis=0)
    Y += cluster_barrier() * VEC  # every program has the partials before any overwrites its own

    log_total = gl.log(total)
    scale = 1.0 / total  # a row of -inf: 1 / 0, and its outputs 0 * inf = NaN, as torch's
    shift = safe * LOG2E
    Y += start
    write_held(held, Y, cols, n, (mode, safe, log_total, shift, scale), layout)
