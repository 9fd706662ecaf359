"""rms_norm, layer_norm and norm_gate on Hopper for rows past row_norm_kernel's registers that fit a multiprocessor's
shared memory, written in Gluon (softmax_held_kernel's plan, _softmax_held.py): a program per row copies x whole into
shared memory with cp.async, takes the sums from there as each step lands, and writes the output from there. x is
read from memory once, where row_norm_kernel's looping rows read it twice (the second time from L2 when it is still
there).

A second input (the residual, or the gate) streams through a ring of RING steps beside x's copies, as many steps
ahead: x + residual (written to H) or x * act(gate) replaces x's step in shared memory as it lands, so only one row is
held and a row of two 16-bit inputs may reach 160 KB. The values normalized are then those of x's dtype, as H holds
them (row_norm_kernel normalizes the float32 sum; the two differ by the dtype's rounding). A gate that comes after
the norm is needed only by the output's pass: its first RING steps are copied after x's whole row, and the rest
stream through the ring as the output is written; or, where a config makes the ring as long as the row, both rows
are copied whole, step by step together.

With CLUSTER > 1 the programs of a thread-block cluster (aot.spec.Config.cluster) share a row: each holds a share of
whole vectors as above, and they merge their shares' moments through the output before normalizing
(_cluster_moments, as softmax_cluster_kernel merges its partials), so rows past one multiprocessor's shared memory are
still read once.

Semantics are otherwise row_norm_kernel's (norm.py): a layer norm centres on the row's mean; then (offset + w) and b,
and act(gate) when it comes after. The C side sends only rows whose length and strides are multiples of the 16-byte
vector."""

from triton import constexpr_function
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.language.extra.cuda import gdc_wait

from kernels_src._cluster import cluster_barrier
from kernels_src._held_rows import allocate_row, copy_step, copy_steps, step_columns, step_layout
from kernels_src._lse import LOG2E, exp2_ftz
from kernels_src._rows import norm_rows


@gluon.jit
def _gated(x, g, gate_silu):
    """The gate's activation times x: silu(g) = g * sigmoid(g), or sigmoid(g). The exponential is exp2_ftz and the
    division an approximate one: with one program per multiprocessor this arithmetic is not hidden behind another
    program's loads."""
    sig = gl.fdiv(1.0, 1.0 + exp2_ftz(-g * LOG2E), ieee_rounding=False)
    return x * gl.where(gate_silu != 0, g * sig, sig)


@constexpr_function
def _pending(step, steps, ring):
    """The copy groups that may stay in flight once step's has landed: the later ones of a row copied whole (ring
    0), or of the ring's, whose next group is committed only after the step."""
    step, steps, ring = (gl._unwrap_if_constexpr(a) for a in (step, steps, ring))
    return ring - 1 if ring and step + ring < steps else steps - 1 - step


@gluon.jit
def _accumulate(v, c, valid, first: gl.constexpr, layer, shift, sums, squares, counts):
    """Add a step's values v (float32, at columns c) to each thread's shifted sums: the shift, for a layer norm, is
    the thread's first element, taken on the first step."""
    VEC: gl.constexpr = v.type.shape[1]
    if first:
        shift = gl.where(layer != 0, gl.sum(gl.where((c % VEC == 0) & valid, v, 0.0), axis=1), 0.0)
    d = gl.where(valid, v - shift[:, None], 0.0)
    counts += gl.sum(valid.to(gl.float32), axis=1)
    return shift, sums + gl.sum(d, axis=1), squares + gl.sum(d * d, axis=1), counts


@gluon.jit
def _zero_sums(x_held):
    """Each thread's shift, sums, sums of squares and counts, zero."""
    layout: gl.constexpr = step_layout(x_held.dtype, gl.num_warps())
    zero = gl.zeros([x_held.type.shape[1]], gl.float32, gl.SliceLayout(1, layout))
    return zero, zero, zero, zero


@gluon.jit
def _sums_of_row(x_held, cols, n_cols, layer, LATER: gl.constexpr):
    """The sums of the row copied whole into x_held (copy_steps), each step as it lands; LATER copy groups were
    committed after the row's."""
    layout: gl.constexpr = step_layout(x_held.dtype, gl.num_warps())
    STEPS: gl.constexpr = x_held.type.shape[0]
    CHUNK: gl.constexpr = x_held.type.shape[1] * x_held.type.shape[2]
    shift, sums, squares, counts = _zero_sums(x_held)
    for i in gl.static_range(STEPS):
        async_copy.wait_group(_pending(i, STEPS, 0) + LATER)
        if i * CHUNK < n_cols:
            c = i * CHUNK + cols
            v = x_held.index(i).load(layout).to(gl.float32)
            shift, sums, squares, counts = _accumulate(v, c, c < n_cols, i == 0, layer, shift, sums, squares, counts)
    return shift, sums, squares, counts


@gluon.jit
def _sums_of_pairs(x_held, ring, X, Second, H, cols, n_cols, layer, gate_silu, HAS_RESIDUAL: gl.constexpr):
    """The sums of x + residual (written to H too) or x * act(gate), x's steps and the second input's copied side by
    side, RING steps ahead; each step's values replace x's in x_held, in x's dtype."""
    layout: gl.constexpr = step_layout(x_held.dtype, gl.num_warps())
    STEPS: gl.constexpr = x_held.type.shape[0]
    CHUNK: gl.constexpr = x_held.type.shape[1] * x_held.type.shape[2]
    RING: gl.constexpr = ring.type.shape[0]
    for j in gl.static_range(RING):
        copy_step(x_held, j, j, X, cols, n_cols)
        copy_step(ring, j, j, Second, cols, n_cols)
        async_copy.commit_group()
    shift, sums, squares, counts = _zero_sums(x_held)
    for i in gl.static_range(STEPS):
        async_copy.wait_group(_pending(i, STEPS, RING))
        if i * CHUNK < n_cols:
            c = i * CHUNK + cols
            valid = c < n_cols
            v = x_held.index(i).load(layout).to(gl.float32)
            s = ring.index(i % RING).load(layout).to(gl.float32)
            if HAS_RESIDUAL:
                v += s
                gl.store(H + c, v.to(x_held.dtype), mask=valid)
            else:
                v = _gated(v, s, gate_silu)
            v = v.to(x_held.dtype)
            x_held.index(i).store(v)
            shift, sums, squares, counts = _accumulate(
                v.to(gl.float32), c, valid, i == 0, layer, shift, sums, squares, counts
            )
        if i + RING < STEPS:
            copy_step(x_held, i + RING, i + RING, X, cols, n_cols)
            copy_step(ring, i % RING, i + RING, Second, cols, n_cols)
            async_copy.commit_group()
    return shift, sums, squares, counts


@gluon.jit
def _cluster_moments(Y, mean, moment, n_row, share, CLUSTER: gl.constexpr):
    """The row's mean and second moment (about its mean for a layer norm, whose share means are given; about 0 for
    rms, whose are 0) from each program's: its share's mean and moment, written as two floats over its output's first
    elements (Y, at its share; shares are whole 16-byte vectors), read by all after a cluster barrier, merged by
    Chan's formula. The caller waits at a second barrier before writing its output over them."""
    partial = Y.to(gl.pointer_type(gl.float32), bitcast=True)
    gl.store(partial, mean)
    gl.store(partial + 1, moment)
    after = cluster_barrier()
    ranks = gl.arange(0, CLUSTER, layout=gl.BlockedLayout([1], [32], [gl.num_warps()], [0]))
    first = Y - (gl.program_id(0) % CLUSTER) * share  # the row's output
    partials = (first + after + ranks * share).to(gl.pointer_type(gl.float32), bitcast=True)
    means = gl.load(partials, cache_modifier=".cg")
    moments = gl.load(partials + 1, cache_modifier=".cg")
    counts = gl.minimum(n_row - ranks * share, share).to(gl.float32)
    row_mean = gl.sum(means * counts, axis=0) / n_row
    spread = means - row_mean
    return row_mean, gl.sum(moments + counts * spread * spread, axis=0)


@gluon.jit
def row_norm_held_kernel(
    X, W, B, R, G, Y, H, stride_x, stride_r, stride_g, stride_y, stride_h, n_cols, eps, w_offset, layer, has_weight,
    has_bias, gate_silu, gate_pre, HAS_RESIDUAL: gl.constexpr, HAS_GATE: gl.constexpr, HELD: gl.constexpr,
    RING: gl.constexpr, PER_SM: gl.constexpr, CLUSTER: gl.constexpr = 1, PDL: gl.constexpr = False,
):  # fmt: skip
    """HELD: x's elements held; RING: the second input's steps in flight (0 without one); PER_SM: the programs a
    multiprocessor's shared memory holds, which the static assertion below checks (the config's occupancy, named in
    its label); CLUSTER: the programs of a thread-block cluster that share a row (see _cluster_moments)."""
    dtype: gl.constexpr = X.dtype.element_ty
    gl.static_assert((RING > 0) == (HAS_RESIDUAL or HAS_GATE), "a ring for the second input, and only then")
    layout: gl.constexpr = step_layout(dtype, gl.num_warps())
    x_held = allocate_row(dtype, HELD, layout)
    STEPS: gl.constexpr = x_held.type.shape[0]
    CHUNK: gl.constexpr = x_held.type.shape[1] * x_held.type.shape[2]
    gl.static_assert(PER_SM * (HELD + RING * CHUNK) * dtype.primitive_bitwidth // 8 <= 224 * 1024, "shared memory")
    gl.static_assert(RING <= STEPS, "a ring no longer than the row")
    cols = step_columns(layout)
    X, R, G, Y, H = norm_rows(
        X, R, G, Y, H, stride_x, stride_r, stride_g, stride_y, stride_h, HAS_RESIDUAL, HAS_GATE, CLUSTER
    )  # fmt: skip
    n_row = n_cols
    if CLUSTER > 1:  # this program's share of the row: whole vectors, the last share shorter
        share = gl.cdiv(n_row, CLUSTER * layout.size_per_thread[1]) * layout.size_per_thread[1]
        start = (gl.program_id(0) % CLUSTER) * share
        n_cols = gl.minimum(n_row - start, share)
        X += start
        Y += start
        W += start
        B += start
        if HAS_RESIDUAL:
            R += start
            H += start
        if HAS_GATE:
            G += start
    if RING > 0:
        ring = allocate_row(dtype, RING * CHUNK, layout)
    if PDL:
        gdc_wait()

    # Each thread sums its own elements' differences from a shift and their squares as each step lands (a second
    # pass over shared memory for the variance would leave the multiprocessor's memory idle meanwhile, with one program
    # on it); the threads' means and spreads then merge by Chan's formula.
    if HAS_RESIDUAL:
        shift, sums, squares, counts = _sums_of_pairs(x_held, ring, X, R, H, cols, n_cols, layer, gate_silu, True)
    elif HAS_GATE:
        if gate_pre != 0:
            shift, sums, squares, counts = _sums_of_pairs(x_held, ring, X, G, H, cols, n_cols, layer, gate_silu, False)
        else:
            if RING == STEPS:  # the gate held whole: its steps copied with x's
                copy_steps(x_held, X, cols, n_cols, ring, G)
                shift, sums, squares, counts = _sums_of_row(x_held, cols, n_cols, layer, 0)
            else:
                # x copied whole, then the gate's first steps for the output's pass, which land as the row's last
                # steps do (another program's loads cannot fill that gap, with one program to a multiprocessor)
                copy_steps(x_held, X, cols, n_cols)
                for j in gl.static_range(RING):
                    copy_step(ring, j, j, G, cols, n_cols)
                    async_copy.commit_group()
                shift, sums, squares, counts = _sums_of_row(x_held, cols, n_cols, layer, RING)
    else:
        copy_steps(x_held, X, cols, n_cols)
        shift, sums, squares, counts = _sums_of_row(x_held, cols, n_cols, layer, 0)
    seen = gl.maximum(counts, 1.0)
    means = shift + sums / seen
    mean = gl.sum(means * counts, axis=0) / n_cols
    spread = means - mean
    spread_sum = gl.sum(squares - sums * sums / seen + counts * spread * spread, axis=0)
    mean = gl.where(layer != 0, mean, 0.0)
    variance = gl.where(layer != 0, spread_sum, gl.sum(squares, axis=0))
    if CLUSTER > 1:
        mean, variance = _cluster_moments(Y, mean, variance, n_row, share, CLUSTER)
        Y += cluster_barrier() * layout.size_per_thread[1]  # all have the moments before any overwrites its own
    rstd = gl.rsqrt(gl.maximum(variance / n_row, 0.0) + eps)

    # the weight's and bias's loads are masked rather than under branches, so that the compiler issues them ahead; a
    # gate after the norm streams through the ring, RING steps ahead
    for i in gl.static_range(STEPS):
        if HAS_GATE and RING < STEPS:  # a gate held whole has landed (waiting anyway: 2.83 -> 2.53 TB/s, 4096 x 50304)
            async_copy.wait_group(_pending(i, STEPS, RING))
        if i * CHUNK < n_cols:
            c = i * CHUNK + cols
            mask = c < n_cols
            w = gl.load(W + c, mask=mask & (has_weight != 0), other=0.0).to(gl.float32)
            b = gl.load(B + c, mask=mask & (has_bias != 0), other=0.0).to(gl.float32)
            y = (x_held.index(i).load(layout).to(gl.float32) - mean) * rstd
            y = y * gl.where(has_weight != 0, w_offset + w, 1.0) + b
            if HAS_GATE:
                if gate_pre == 0:
                    y = _gated(y, ring.index(i % RING).load(layout).to(gl.float32), gate_silu)
            gl.store(Y + c, y.to(dtype), mask=mask)
        if HAS_GATE:
            if gate_pre == 0:
                if i + RING < STEPS:
                    copy_step(ring, i % RING, i + RING, G, cols, n_cols)
                    async_copy.commit_group()
