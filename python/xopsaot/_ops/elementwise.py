"""Elementwise ops: add."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._call import resolve
from .._registry import register


def add_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) + b.astype(np.float32)


@register
def add(a: Any, b: Any, *, backend: Optional[str] = None) -> Any:
    """a + b for arrays of one shape and dtype (float16, bfloat16, float32)."""
    call, (va, vb) = resolve("add", backend, ("a", "b"), (a, b))
    check.dtype("add", "a", va, check.FLOATS)
    check.same_dtype("add", ("a", va), ("b", vb))
    check.same_shape("add", ("a", va), ("b", vb))
    if not call.on_gpu:
        return call.result(add_reference(call.host(va), call.host(vb)), va.dtype)
    va, vb = call.contiguous(va), call.contiguous(vb)
    out = call.empty_like(va)
    call.launch("xopsaot_add", (va, vb, out))
    return out.obj
