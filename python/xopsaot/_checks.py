"""Argument checks shared by the ops. Errors name the op, the argument, the value and what is supported."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ._arrays import View

FLOATS = ("float16", "bfloat16", "float32")
HALF_FLOATS = ("float16", "bfloat16")


def shape_text(shape) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def dtype(op: str, name: str, view: View, allowed, where: str = "") -> None:
    if view.dtype not in allowed:
        raise TypeError(f"{op}: {name}.dtype is {view.dtype}; supported{where}: {', '.join(allowed)}")


def same_dtype(op: str, first: tuple[str, View], *others: tuple[str, Optional[View]]) -> None:
    name, view = first
    for other_name, other in others:
        if other is not None and other.dtype != view.dtype:
            raise TypeError(
                f"{op}: {other_name}.dtype is {other.dtype} but {name}.dtype is {view.dtype}; they must match"
            )


def same_shape(op: str, first: tuple[str, View], *others: tuple[str, Optional[View]]) -> None:
    name, view = first
    for other_name, other in others:
        if other is not None and other.shape != view.shape:
            raise ValueError(
                f"{op}: {other_name} has shape {shape_text(other.shape)} but {name} has shape "
                f"{shape_text(view.shape)}; they must match"
            )


def ndim(op: str, name: str, view: View, allowed, meaning: str = "") -> None:
    if view.ndim not in allowed:
        want = " or ".join(str(n) for n in allowed)
        extra = f" {meaning}" if meaning else ""
        raise ValueError(f"{op}: {name} must have {want} dims{extra}, got shape {shape_text(view.shape)}")


def finite_float(op: str, name: str, value, minimum: Optional[float] = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{op}: {name} must be a finite float, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {value!r}")
    return float(value)


def is_integer(value) -> bool:
    """A Python or NumPy integer, bool excluded."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def integer(op: str, name: str, value, minimum: Optional[int] = None) -> int:
    if not is_integer(value):
        raise TypeError(f"{op}: {name} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {value}")
    return int(value)


def boolean(op: str, name: str, value) -> bool:
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise TypeError(f"{op}: {name} must be a bool, got {value!r}")
    return bool(value)


def index_tensor(
    op: str, name: str, view: Optional[View], shape: Optional[tuple] = None, dims: int = 1, dtypes=("int32",)
) -> None:
    """An index tensor (cu_seqlens, block tables, offsets, positions): its dtype is a ValueError, as flash-attn
    users expect."""
    if view is None:
        return
    if view.dtype not in dtypes:
        raise ValueError(f"{op}: {name}.dtype is {view.dtype}; it must be {' or '.join(dtypes)}")
    ndim(op, name, view, (dims,))
    if shape is not None and view.shape != shape:
        raise ValueError(f"{op}: {name} must have shape {shape_text(shape)}, got {shape_text(view.shape)}")


def cu_seqlens(op: str, name: str, cu: np.ndarray, total: int, max_seqlen: int, max_name: str) -> None:
    """Host values of int32 cumulative lengths: from 0, never decreasing, within the packed tensor and the max."""
    lengths = np.diff(cu.astype(np.int64))
    if cu[0] != 0 or (lengths < 0).any():
        raise ValueError(f"{op}: {name} must start at 0 and never decrease, got {cu.tolist()[:8]}...")
    if cu[-1] > total:
        raise ValueError(f"{op}: {name} ends at {int(cu[-1])} but the packed tensor has {total} tokens")
    if lengths.size and lengths.max() > max_seqlen:
        raise ValueError(f"{op}: a sequence of {int(lengths.max())} tokens exceeds {max_name}={max_seqlen}")
