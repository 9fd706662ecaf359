"""A row's log-sum-exp streamed block by block, shared by the softmax family's looping rows and cross entropy, and
the exponential the softmax family takes (softmax_kernel's and softmax_held_kernel's)."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def exp2_ftz(x):
    """2^x by one ex2.approx.ftz (CUDA): subnormal results (below 2^-126) flush to zero, where tl.exp2 and tl.exp
    spend four more instructions on them; in 16 bits they round to zero anyway. Gluon kernels call it too."""
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def online_lse_step(m, s, x):
    """One block x of a row streamed for its log-sum-exp: m, the running max (a scalar, -inf at first), and s, the
    per-lane sums of exp(x - m), rescaled as m grows; the row's lse is m + log(sum(s)). A max per block (one
    reduction per step) rather than per lane costs one exp per element rather than two: softmax at 2048 x 65536
    2.25 -> 2.52 TB/s, logsumexp 2.24 -> 2.74 (H100, bf16, wheel_ab.py vocab_rows, h100-2026-11-24-experiments.md)."""
    m_new = tl.maximum(m, tl.max(x, axis=0))
    scaled = tl.where(m_new == -float("inf"), 0.0, m_new) * LOG2E  # exp2 of scaled logits: one FMA and one MUFU op
    return m_new, s * exp2_ftz(m * LOG2E - scaled) + exp2_ftz(x * LOG2E - scaled)
