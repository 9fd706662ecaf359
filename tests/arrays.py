"""Random arrays of a given kind (numpy, torch CPU, torch CUDA) and dtype, for the op tests."""

from __future__ import annotations

import numpy as np
import pytest

# (kind, dtype) pairs the CPU path is tested with; NumPy's bfloat16 comes from ml_dtypes (a test extra).
HOST_CASES = [
    ("numpy", "float16"),
    ("numpy", "bfloat16"),
    ("numpy", "float32"),
    ("torch", "float16"),
    ("torch", "bfloat16"),
    ("torch", "float32"),
]


def torch_or_skip():
    return pytest.importorskip("torch")


def make(rng: np.random.Generator, shape, dtype: str, kind: str = "numpy", scale: float = 1.0, device=None):
    data = (rng.standard_normal(shape) * scale).astype(np.float32)
    if kind == "numpy":
        if dtype == "bfloat16":
            return data.astype(pytest.importorskip("ml_dtypes").bfloat16)
        return data.astype(dtype)
    torch = torch_or_skip()
    t = torch.from_numpy(data).to(getattr(torch, dtype))
    return t if device is None else t.to(device)


def dtype_of(x) -> str:
    return str(x.dtype).replace("torch.", "")
