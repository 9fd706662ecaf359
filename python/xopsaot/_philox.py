"""Philox4x32-10 in NumPy: the same numbers as kernels_src/_philox.py, so both paths draw the same values."""

from __future__ import annotations

import secrets
from typing import Any, Optional

import numpy as np

from . import _checks as check

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


def draws(n: int, seed: int, offset: int = 0, stream=0) -> np.ndarray:
    """The uint32 draws of elements 0..n-1: element i takes output i % 4 of the counter offset + i // 4 (64 bits: low
    word c0, high word c1; c2 = stream, c3 = 0) under the 64-bit seed (low word k0). `stream` may be an array of
    streams: the result then has its shape plus (n,)."""
    index = np.arange(n, dtype=np.uint64)
    counter = np.uint64(offset) + (index >> np.uint64(2))
    words = np.asarray(stream, dtype=np.uint64)[..., None] & LOW
    counter, words = np.broadcast_arrays(counter, words)
    zero = np.zeros(counter.shape, dtype=np.uint64)
    outputs = philox4x32(counter & LOW, counter >> SHIFT, words, zero, seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    which = np.broadcast_to((index & np.uint64(3)).astype(np.intp), counter.shape)
    return np.choose(which, outputs)


def uniform(n: int, seed: int, offset: int = 0) -> np.ndarray:
    """n float32 values in [0, 1), as dropout draws them (stream 0): the top 24 bits of each draw."""
    return (draws(n, seed, offset) >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)


SEED_BITS = 63


def fresh_seed() -> int:
    return secrets.randbits(SEED_BITS)


def call_seed(op: str, seed: Optional[int], call: Any) -> int:
    """The seed of one call: `seed` checked, or a fresh one when None (which the fast path draws anew at each
    replay)."""
    if seed is None:
        return call.fresh_seed()
    seed = check.integer(op, "seed", seed, minimum=0)
    if seed >= 2**SEED_BITS:
        raise ValueError(f"{op}: seed must be below 2**{SEED_BITS}, got {seed}")
    return seed
