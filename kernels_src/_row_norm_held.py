"""rms_norm, layer_norm and norm_gate on Hopper for rows past row_norm_kernel's registers that fit a multiprocessor's
shared memory, written in Gluon (softmax_held_kernel's plan, _softmax_held.py): a program per row copies x, and the
residual or the gate when there is one, whole into shared memory with cp.async, takes the sums from there as each
step lands, and writes the output from there. x is read from memory once, where row_norm_kernel's looping rows read
it twice (the second time from L2 when it is still there).

Semantics are row_norm_kernel's (norm.py): the values normalized are x, x + residual (written to H as each step
lands) or x * act(gate) when the gate comes first; a layer norm centres on the row's mean; then (offset + w) and b,
and act(gate) when it comes after. The C side sends only rows whose length and strides are multiples of the 16-byte
vector."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.language.extra.cuda import gdc_wait

from kernels_src._held_rows import allocate_row, copy_steps, step_columns, step_layout
from kernels_src._lse import LOG2E, exp2_ftz
from kernels_src._rows import norm_rows


@gluon.jit
def _gated(x, g, gate_silu):
    """The gate's activation times x: silu(g) = g * sigmoid(g), or sigmoid(g). The exponential is exp2_ftz: with one
    program per multiprocessor its arithmetic is not hidden behind another program's loads."""
    sig = 1.0 / (1.0 + exp2_ftz(-g * LOG2E))
    return x * gl.where(gate_silu != 0, g * sig, sig)


@gluon.jit
def _normalized(x_held, o_held, i, layout, gate_silu, gate_pre, HAS_RESIDUAL: gl.constexpr, HAS_GATE: gl.constexpr):
    """Step i's values to normalize, in float32: x, x + residual, or x * act(gate) with the gate first."""
    v = x_held.index(i).load(layout).to(gl.float32)
    if HAS_RESIDUAL:
        v += o_held.index(i).load(layout).to(gl.float32)
    if HAS_GATE:
        if gate_pre != 0:
            v = _gated(v, o_held.index(i).load(layout).to(gl.float32), gate_silu)
    return v


@gluon.jit
def row_norm_held_kernel(
    X, W, B, R, G, Y, H, stride_x, stride_r, stride_g, stride_y, stride_h, n_cols, eps, w_offset, layer, has_weight,
    has_bias, gate_silu, gate_pre, HAS_RESIDUAL: gl.constexpr, HAS_GATE: gl.constexpr, HELD: gl.constexpr,
    PER_SM: gl.constexpr, PDL: gl.constexpr = False,
):  # fmt: skip
    """PER_SM: the programs of HELD elements per input a multiprocessor's shared memory holds, which the static
    assertion below checks (the config's occupancy, named in its label)."""
    dtype: gl.constexpr = X.dtype.element_ty
    TWO: gl.constexpr = HAS_RESIDUAL or HAS_GATE
    INPUTS: gl.constexpr = 2 if TWO else 1
    gl.static_assert(PER_SM * INPUTS * HELD * dtype.primitive_bitwidth // 8 <= 224 * 1024, "shared memory")
    layout: gl.constexpr = step_layout(dtype, gl.num_warps())
    per_thread: gl.constexpr = gl.SliceLayout(1, layout)
    x_held = allocate_row(dtype, HELD, layout)
    if TWO:
        o_held = allocate_row(dtype, HELD, layout)
    else:
        o_held = x_held
    STEPS: gl.constexpr = x_held.type.shape[0]
    VECTORS: gl.constexpr = x_held.type.shape[1]
    VEC: gl.constexpr = x_held.type.shape[2]
    CHUNK: gl.constexpr = VEC * VECTORS
    cols = step_columns(layout)
    X, R, G, Y, H = norm_rows(X, R, G, Y, H, stride_x, stride_r, stride_g, stride_y, stride_h, HAS_RESIDUAL, HAS_GATE)
    if PDL:
        gdc_wait()
    if HAS_RESIDUAL:
        copy_steps(x_held, X, cols, n_cols, o_held, R)
    elif HAS_GATE:
        copy_steps(x_held, X, cols, n_cols, o_held, G)
    else:
        copy_steps(x_held, X, cols, n_cols)

    # Each thread sums its own elements' differences from a shift and their squares as each step lands: for a layer
    # norm the shift is its first element (so the sums stay small for rows far from zero mean), and the threads'
    # means and spreads then merge by Chan's formula; a second pass over shared memory for the variance would leave
    # the multiprocessor's memory idle meanwhile, with one program on it.
    shift = gl.zeros([VECTORS], gl.float32, per_thread)
    sums = gl.zeros([VECTORS], gl.float32, per_thread)
    squares = gl.zeros([VECTORS], gl.float32, per_thread)
    counts = gl.zeros([VECTORS], gl.float32, per_thread)
    for i in gl.static_range(STEPS):
        async_copy.wait_group(STEPS - 1 - i)
        if i * CHUNK < n_cols:
            c = i * CHUNK + cols
            valid = c < n_cols
            v = _normalized(x_held, o_held, i, layout, gate_silu, gate_pre, HAS_RESIDUAL, HAS_GATE)
            if HAS_RESIDUAL:
                gl.store(H + c, v.to(dtype), mask=valid)
            if i == 0:
                shift = gl.where(layer != 0, gl.sum(gl.where((c % VEC == 0) & valid, v, 0.0), axis=1), 0.0)
            d = gl.where(valid, v - shift[:, None], 0.0)
            sums += gl.sum(d, axis=1)
            squares += gl.sum(d * d, axis=1)
            counts += gl.sum(valid.to(gl.float32), axis=1)
    seen = gl.maximum(counts, 1.0)
    means = shift + sums / seen
    mean = gl.sum(means * counts, axis=0) / n_cols
    spread = means - mean
    spread_sum = gl.sum(squares - sums * sums / seen + counts * spread * spread, axis=0)
    mean = gl.where(layer != 0, mean, 0.0)
    variance = gl.where(layer != 0, spread_sum, gl.sum(squares, axis=0)) / n_cols
    rstd = gl.rsqrt(gl.maximum(variance, 0.0) + eps)
    # the weight's and bias's loads are masked rather than under branches, so that the compiler issues them ahead
    for i in gl.static_range(STEPS):
        if i * CHUNK < n_cols:
            c = i * CHUNK + cols
            mask = c < n_cols
            w = gl.load(W + c, mask=mask & (has_weight != 0), other=0.0).to(gl.float32)
            b = gl.load(B + c, mask=mask & (has_bias != 0), other=0.0).to(gl.float32)
            y = (_normalized(x_held, o_held, i, layout, gate_silu, gate_pre, HAS_RESIDUAL, HAS_GATE) - mean) * rstd
            y = y * gl.where(has_weight != 0, w_offset + w, 1.0) + b
            if HAS_GATE:
                if gate_pre == 0:
                    y = _gated(y, o_held.index(i).load(layout).to(gl.float32), gate_silu)
            gl.store(Y + c, y.to(dtype), mask=mask)
