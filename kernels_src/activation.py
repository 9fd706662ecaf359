"""Activations: relu, gelu (erf and tanh forms), silu, sigmoid and tanh over flat contiguous tensors, and the gated
forms act(x[..., :d]) * x[..., d:] (silu_and_mul, gelu_and_mul) over rows. The activation is a run-time code (the
XOPSAOT_ACT_* values of the C header), uniform over a launch, so one binary per dtype serves all of them; gelu with
erf has a binary of its own (ERF) for the flat kernel: beside the other codes' branches its long erf ran at 0.87x
torch eager on the H100, alone at torch's speed (benchmarks/experiments/row_reductions.py)."""

import triton
import triton.language as tl

from aot.spec import Config, Kernel, i32, i64, ptr
from kernels_src._pdl import wait_for_predecessor
from kernels_src.attention import _tanh


@triton.jit
def _gelu_erf(x):
    """x * Phi(x) in float32 from Phi(-u) = 2^log2_p(u), log2_p a minimax polynomial of degree 10 on [0, 5.65] (error
    2.3e-7; benchmarks/experiments/gelu_fit.py): one exp2 and ten FMAs, 21 instructions per element in SASS where
    libdevice's erf, which selects between two coefficient sets per element, took 36 and left bf16 gelu short of
    torch eager on the H100 (2.34 -> 2.73 TB/s at 4096 x 4096, 2.69 -> 3.00 at 16384 x 8192). Within 1.3e-7 of
    max(|gelu|, 1), like the textbook 0.5 x (1 + erf(x / sqrt 2)), and within 2.5e-6 relative down to x = -5.5,
    where the textbook form cancels; Phi is 0 below -5.65 (2e-8 there)."""
    u = tl.minimum(tl.abs(x), 5.65)
    log2_p = -1.5942219988573925e-08 * u + 5.138867891218979e-07
    log2_p = log2_p * u - 7.088453003234463e-06
    log2_p = log2_p * u + 5.2623054216383025e-05
    log2_p = log2_p * u - 0.00019250035984441638
    log2_p = log2_p * u - 0.0001938555942615494
    log2_p = log2_p * u + 0.007204268593341112
    log2_p = log2_p * u - 0.05263354629278183
    log2_p = log2_p * u - 0.4591493308544159
    log2_p = log2_p * u - 1.1511143445968628
    log2_p = log2_p * u - 0.9999997615814209
    p = tl.where(tl.abs(x) > 5.65, 0.0, tl.exp2(log2_p))  # Phi(-|x|)
    return x * tl.where(x < 0, p, 1.0 - p)


@triton.jit
def _activate(x, act, WITH_ERF: tl.constexpr = True):
    """act(x) in float32 for a run-time activation code; a negative code is the identity (gate_linear's act=None).
    WITH_ERF=False compiles no code for gelu's erf form (code 1 then returns x): for the flat kernel's shared
    binary, whose launcher sends that code to the ERF variant."""
    if act < 0:
        y = x
    elif act == 0:
        y = tl.maximum(x, 0.0)
    elif act == 1:
        if WITH_ERF:
            y = _gelu_erf(x)
        else:
            y = x
    elif act == 2:
        # 0.5 * (1 + tanh(u)) = sigmoid(2u): no cancellation where tanh(u) nears -1
        y = x * tl.sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x))
    elif act == 3:
        y = x * tl.sigmoid(x)
    elif act == 4:
        y = tl.sigmoid(x)
    else:
        y = _tanh(x)
    return y


@triton.jit
def activation_kernel(X, Y, n, act, BLOCK: tl.constexpr, ERF: tl.constexpr, PDL: tl.constexpr = False):
    """ERF: gelu with erf whatever act says (the C launcher takes this variant for that code only); the other
    variant leaves that form out: its code in the shared binary cost gelu tanh 1.3% at 16384 x 8192 (H100)."""
    wait_for_predecessor(PDL)
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offsets = start + tl.arange(0, BLOCK)
    if ERF:
        act = 1
    if start + BLOCK <= n:  # every block but the last: unmasked, so accesses vectorize whatever n is
        x = tl.load(X + offsets).to(tl.float32)
        tl.store(Y + offsets, _activate(x, act, ERF).to(Y.dtype.element_ty))
    else:
        mask = offsets < n
        x = tl.load(X + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + offsets, _activate(x, act, ERF).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def gated_activation_kernel(X, Gate, Y, stride_x, stride_y, d, act, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    """Row tl.program_id(0), columns of block tl.program_id(1): y = act(x[:d]) * gate[:d], gate's rows strided like
    x's: the second half of x's rows (silu_and_mul: Gate = X + d), or gate_linear's x2."""
    wait_for_predecessor(PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    a = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(Gate + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_y + cols, (_activate(a, act) * b).to(Y.dtype.element_ty), mask=mask)


KERNELS = [
    Kernel(
        fn=activation_kernel,
        op="activation",
        args=[ptr("X", "T"), ptr("Y", "T"), i64("n"), i32("act")],
        keys={"T": ["fp16", "bf16", "fp32"], "ERF": [False, True]},
        grid=["cdiv(n, BLOCK)", "1", "1"],
        configs=[Config({"BLOCK": 2048}, num_warps=4)],
    ),
    Kernel(
        fn=gated_activation_kernel,
        op="gated_activation",
        args=[
            ptr("X", "T"),
            ptr("Gate", "T"),
            ptr("Y", "T"),
            i64("stride_x", aligned=True),
            i64("stride_y", aligned=True),
            i64("d", aligned=True),
            i32("act"),
        ],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("n_rows")],
        grid=["n_rows", "cdiv(d, BLOCK)", "1"],
        configs=[
            Config({"BLOCK": 1024}, num_warps=4, when="d <= 1024"),
            Config({"BLOCK": 2048}, num_warps=8),
        ],
    ),
]
