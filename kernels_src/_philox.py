"""Philox4x32-10 (Salmon et al., Random123): a counter-based generator, so element i of a call draws from counter i
alone, with no state between threads or runs. python/xopsaot/_philox.py computes the same numbers with NumPy, so
the CPU path draws the same values as the GPU."""

import triton
import triton.language as tl

MUL_A, MUL_B = 0xD2511F53, 0xCD9E8D57  # round multipliers
KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85  # key schedule (Weyl sequence)


@triton.jit
def philox4x32(c0, c1, c2, c3, k0, k1):
    """Four uint32 outputs of counter (c0, c1, c2, c3) under key (k0, k1); every input uint32."""
    for _ in tl.static_range(10):
        hi_a = tl.math.umulhi(c0, 0xD2511F53)
        lo_a = c0 * 0xD2511F53
        hi_b = tl.math.umulhi(c2, 0xCD9E8D57)
        lo_b = c2 * 0xCD9E8D57
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3


@triton.jit
def uniform(bits):
    """uint32 -> float32 in [0, 1): the top 24 bits, exactly representable."""
    return (bits >> 8).to(tl.float32) * 5.9604644775390625e-08
