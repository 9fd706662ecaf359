"""Philox4x32-10 in NumPy: the same numbers as kernels_src/_philox.py, so both paths draw the same values."""

from __future__ import annotations

import numpy as np

MUL_A, MUL_B = 0xD2511F53, 0xCD9E8D57  # round multipliers
KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85  # key schedule (Weyl sequence)
LOW = np.uint64(0xFFFFFFFF)
SHIFT = np.uint64(32)


def philox4x32(c0, c1, c2, c3, k0: int, k1: int) -> tuple[np.ndarray, ...]:
    """The four uint32 outputs of counters (c0, c1, c2, c3) (uint32 arrays) under the key (k0, k1)."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in (c0, c1, c2, c3))
    for _ in range(10):
        a, b = c0 * np.uint64(MUL_A), c2 * np.uint64(MUL_B)  # exact: 32 x 32 bits fit in 64
        c0, c1, c2, c3 = (b >> SHIFT) ^ c1 ^ np.uint64(k0), b & LOW, (a >> SHIFT) ^ c3 ^ np.uint64(k1), a & LOW
        k0, k1 = (k0 + KEY_A) & 0xFFFFFFFF, (k1 + KEY_B) & 0xFFFFFFFF
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def uniform(n: int, seed: int, offset: int = 0) -> np.ndarray:
    """n float32 values in [0, 1), as the kernels draw them: element i takes output i % 4 of the counter
    offset + i // 4 (64 bits: low word c0, high word c1; c2 = c3 = 0) under the 64-bit seed (low word k0), and keeps
    its top 24 bits."""
    index = np.arange(n, dtype=np.uint64)
    counter = np.uint64(offset) + (index >> np.uint64(2))
    zero = np.zeros(counter.shape, dtype=np.uint64)
    outputs = philox4x32(counter & LOW, counter >> SHIFT, zero, zero, seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    bits = np.choose((index & np.uint64(3)).astype(np.intp), outputs)
    return (bits >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
