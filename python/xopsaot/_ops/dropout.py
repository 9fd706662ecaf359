"""dropout with counter-based random numbers (Philox4x32-10): a seed and offset give the same mask on every run
and on both paths, since the NumPy reference draws the kernels' numbers (xopsaot._philox)."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .. import _philox
from .._call import resolve
from .._registry import register


def dropout_reference(x: np.ndarray, p: float, seed: int, offset: int) -> np.ndarray:
    """x * keep / (1 - p) in float32, keep = uniform >= p for element i of x in C order."""
    keep = _philox.uniform(x.size, seed, offset).reshape(x.shape) >= np.float32(p)
    scale = np.float32(1.0 / (1.0 - p)) if p < 1 else np.float32(0.0)
    return np.where(keep, x.astype(np.float32) * scale, np.float32(0.0))


@register
def dropout(
    input: Any,
    p: float = 0.5,
    training: bool = True,
    *,
    seed: Optional[int] = None,
    offset: int = 0,
    backend: Optional[str] = None,
) -> Any:
    """torch's dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p); input itself
    when not training or p == 0. seed (a 63-bit int; None draws one per call) and offset fix the mask: element i
    (C order) uses Philox counter offset + i // 4, so calls sharing a seed are independent when their offsets lie
    ceil(numel / 4) apart."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0 or math.isnan(p):
        raise ValueError(f"dropout: p must be a float in [0, 1], got {p!r}")
    training = check.boolean("dropout", "training", training)
    offset = check.integer("dropout", "offset", offset, minimum=0)
    call, (vx,) = resolve("dropout", backend, ("input",), (input,))
    check.dtype("dropout", "input", vx, check.FLOATS)
    seed = _philox.call_seed("dropout", seed, call)
    if not training or p == 0.0:
        return input
    if not call.on_gpu:
        return call.result(dropout_reference(call.host(vx), float(p), seed, offset), vx.dtype)
    vx = call.contiguous(vx)
    out = call.empty_like(vx)
    call.launch("xopsaot_dropout", (vx, out), float(p), seed, offset)
    return out.obj
