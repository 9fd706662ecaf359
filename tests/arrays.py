"""Random arrays of a given kind (numpy, torch CPU, torch CUDA) and dtype, for the op tests."""

from __future__ import annotations

import re

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
    data = np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)  # 0-d stays an array
    if kind == "numpy":  # asarray: astype of a 0-d array gives a NumPy scalar
        if dtype == "bfloat16":
            return np.asarray(data.astype(pytest.importorskip("ml_dtypes").bfloat16))
        return np.asarray(data.astype(dtype))
    torch = torch_or_skip()
    t = torch.from_numpy(data).to(getattr(torch, dtype))
    return t if device is None else t.to(device)


def dtype_of(x) -> str:
    return str(x.dtype).replace("torch.", "")


def on_path(rng: np.random.Generator, shape, dtype: str, where: str, scale: float = 1.0):
    """A random array for the tests of both paths: NumPy for "cpu", a torch CUDA tensor for "gpu"."""
    if where == "cpu":
        return make(rng, shape, dtype, "numpy", scale)
    return make(rng, shape, dtype, "torch", scale, device="cuda")


def host64(x) -> np.ndarray:
    """A result as float64 NumPy, after the GPU's work on it has finished."""
    if hasattr(x, "detach"):
        torch = torch_or_skip()
        torch.cuda.synchronize()
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def unexercised(kernels, used: set) -> list:
    """Labels of the variants of `kernels` compiled for this GPU's arch (alternates aside: the autotune test runs
    those; so are variants whose predicate asks for faster memory than this GPU's) whose index is not in `used`, the
    indices the tests saw through _library.last_variant()."""
    torch = torch_or_skip()
    import xopsaot
    from xopsaot import _library

    major, minor = torch.cuda.get_device_capability()
    served = {f"sm_{major}{minor}a", f"sm_{major}{minor}", f"sm_{major}0"}
    manifest = _library.manifest()
    arch = [a for a in manifest["archs"] if a in served][0]
    memory_gbps = xopsaot.info()["devices"][torch.cuda.current_device()]["memory_gbps"]

    def reachable(v) -> bool:
        needed = re.search(r"memory_gbps >= (\d+)", v.get("when") or "")
        return not needed or memory_gbps >= int(needed.group(1))

    return [
        (v["kernel"], v["dtypes"], v["keys"], v["constexprs"], v["aligned_args"])
        for v in manifest["variants"]
        if v["arch"] == arch
        and v["kernel"] in kernels
        and v["alternate_of"] is None
        and v["index"] not in used
        and reachable(v)
    ]
