"""fp8 e4m3 (the OCP format of torch.float8_e4m3fn) in NumPy, as raw bytes: 1 sign, 4 exponent (bias 7) and 3
mantissa bits, no infinities, 0x7f/0xff NaN, largest finite 448. The CPU path's KV caches use it; the kernels do
the same conversions (kernels_src/attention.py: _from_e4m3, _to_e4m3)."""

from __future__ import annotations

import numpy as np

E4M3_MAX = 448.0


def e4m3_to_float32(bits: np.ndarray) -> np.ndarray:
    """Decode e4m3 bytes (uint8) to float32."""
    b = np.asarray(bits, dtype=np.uint8).astype(np.int32)
    exponent, mantissa = (b >> 3) & 0xF, (b & 0x7).astype(np.float32)
    magnitude = np.where(
        exponent == 0,
        mantissa * np.float32(2.0**-9),  # subnormals: m / 8 * 2^-6
        (1 + mantissa / 8) * np.exp2(exponent - 7).astype(np.float32),
    ).astype(np.float32)
    magnitude = np.where((b & 0x7F) == 0x7F, np.float32(np.nan), magnitude)
    return np.where(b & 0x80, -magnitude, magnitude).astype(np.float32)


def float32_to_e4m3(x: np.ndarray) -> np.ndarray:
    """Encode float32 to e4m3 bytes: round to nearest even, saturating at +-448 (NaN becomes 448)."""
    x = np.asarray(x, dtype=np.float32)
    a = np.minimum(np.nan_to_num(np.abs(x), nan=E4M3_MAX), np.float32(E4M3_MAX))
    u = a.view(np.uint32).astype(np.int64)
    normal = ((u + 0x7FFFF + ((u >> 20) & 1)) >> 20) - (120 << 3)
    subnormal = np.rint(a.astype(np.float64) * 512).astype(np.int64)  # multiples of 2^-9, ties to even
    magnitude = np.where(a < 2.0**-6, subnormal, normal)
    return (magnitude | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)  # -0 and values rounding to 0 keep it
