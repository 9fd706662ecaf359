"""Adapters for the array types the ops accept.

Each framework describes its arrays as a View (shape, strides in elements, dtype name, device, pointer),
allocates results of its own type on the right device, names the stream to launch on, and converts to and
from NumPy for the CPU path. GPU arrays: torch CUDA tensors, CuPy (__cuda_array_interface__), JAX
(__dlpack__ / unsafe_buffer_pointer). Host arrays: NumPy, torch CPU tensors, JAX CPU arrays.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional

import numpy as np


class View(NamedTuple):
    obj: Any
    shape: tuple
    strides: tuple  # in elements
    dtype: str  # "float16", "bfloat16", "float32", ...
    device: Optional[int]  # CUDA ordinal; None for host memory
    ptr: int  # device address of element 0 (0 for host arrays)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def where(self) -> str:
        return "cpu" if self.device is None else f"cuda:{self.device}"


def contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def is_contiguous(shape, strides) -> bool:
    step = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def round_float32(array: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values rounded to `dtype` (to nearest even) and widened back, as a GPU result stored in that dtype
    reads; bfloat16 by bit arithmetic, so NumPy alone does it."""
    array = np.asarray(array, dtype=np.float32)
    if dtype == "float16":
        return array.astype(np.float16).astype(np.float32)
    if dtype != "bfloat16":
        return array
    bits = array.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return np.where(np.isnan(array), array, rounded.view(np.float32))


def numpy_dtype_name(dtype) -> str:
    return np.dtype(dtype).name  # ml_dtypes' bfloat16 reports "bfloat16"


_new = tuple.__new__  # builds a View without the namedtuple's Python-level __new__ (hot path)


class Framework:
    """How one array type is read, allocated and converted."""

    name = ""
    needs_finish = False  # finish() must run after an op's launches

    def view(self, x) -> View:
        raise NotImplementedError

    def empty(self, shape, dtype: str, device: int) -> View:
        """A new contiguous GPU array."""
        raise NotImplementedError

    def empty_like(self, view: View) -> View:
        """A new contiguous GPU array of view's shape and dtype."""
        return self.empty(view.shape, view.dtype, view.device)

    def ensure_contiguous(self, view: View) -> View:
        if is_contiguous(view.shape, view.strides):
            return view
        return self.view(self.contiguous(view.obj))

    def stream(self, device: int) -> int:
        return 0

    def contiguous(self, x):
        raise NotImplementedError

    def moveaxis(self, x, source: int, destination: int):
        raise NotImplementedError

    def to_host(self, x) -> np.ndarray:
        """The values as a NumPy array (bfloat16 widened to float32; fp8 e4m3 as its raw bytes, uint8)."""
        raise NotImplementedError

    def from_host(self, array: np.ndarray, dtype: str, device: Optional[int]):
        raise NotImplementedError

    def finish(self, device: int, stream: int) -> None:
        """Called after the launches of one op when needs_finish (frameworks that cannot order on our stream)."""

    def pad_last(self, x, extra: int):
        """x with `extra` zeros appended along its last dim (a new array)."""
        raise NotImplementedError

    def astype(self, x, dtype: str):
        """A new GPU array: x converted to dtype (a promotion before a kernel that takes one dtype)."""
        raise NotImplementedError

    def copy_into(self, target, source) -> None:
        """Write GPU array source into target (same shape), converting the dtype."""
        raise TypeError(f"{self.name} arrays cannot be written in place")

    def assign(self, x, array: np.ndarray) -> None:
        """Write host values into array x in place (ops that document an in-place update, on the CPU path); an
        fp8 array takes raw bytes."""
        raise TypeError(f"{self.name} arrays cannot be updated in place")

    def capturing(self, device: int) -> bool:
        """Whether the current stream of `device` is capturing a graph (no host copies allowed then)."""
        return False


class NumpyFramework(Framework):
    name = "numpy"

    def view(self, x: np.ndarray) -> View:
        itemsize = x.itemsize or 1
        return View(x, x.shape, tuple(s // itemsize for s in x.strides), numpy_dtype_name(x.dtype), None, 0)

    def contiguous(self, x):
        return np.ascontiguousarray(x)

    def to_host(self, x):
        if x.dtype.name == "float8_e4m3fn":  # ml_dtypes' fp8
            return x.view(np.uint8)
        return x.astype(np.float32) if x.dtype.name == "bfloat16" else x

    def pad_last(self, x, extra):
        return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, extra)])

    def assign(self, x, array):
        if x.dtype.name == "float8_e4m3fn":
            x.view(np.uint8)[...] = array
        else:
            x[...] = self.from_host(array, numpy_dtype_name(x.dtype), None)

    def from_host(self, array, dtype, device):
        if dtype == "bfloat16":
            import ml_dtypes

            return np.asarray(array).astype(ml_dtypes.bfloat16)  # asarray: a 0-d result stays an array
        return np.asarray(array, dtype=dtype)


class TorchFramework(Framework):
    name = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.names = {
            torch.float16: "float16",
            torch.bfloat16: "bfloat16",
            torch.float32: "float32",
            torch.float64: "float64",
            torch.int32: "int32",
            torch.int64: "int64",
            torch.bool: "bool",
        }
        if hasattr(torch, "float8_e4m3fn"):
            self.names[torch.float8_e4m3fn] = "float8_e4m3fn"
        self.dtypes = {v: k for k, v in self.names.items()}
        self.devices: dict[int, Any] = {}
        self.contiguous_format = torch.contiguous_format
        self.raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        from . import _plans

        _plans.use_tensor_type(torch.Tensor)

    def view(self, t) -> View:
        dtype = self.names.get(t.dtype) or str(t.dtype).replace("torch.", "")
        if t.is_cuda:
            return _new(View, (t, t.shape, t.stride(), dtype, t.get_device(), t.data_ptr()))
        if t.device.type != "cpu":
            raise TypeError(f"torch tensors on {t.device.type} are not supported (cpu and cuda are)")
        return _new(View, (t, t.shape, t.stride(), dtype, None, 0))

    def cuda_device(self, index: int):
        device = self.devices.get(index)
        if device is None:
            device = self.devices[index] = self.torch.device("cuda", index)
        return device

    def empty(self, shape, dtype, device):
        t = self.torch.empty(shape, dtype=self.dtypes[dtype], device=self.cuda_device(device))
        return _new(View, (t, t.shape, t.stride(), dtype, device, t.data_ptr()))

    def empty_like(self, view):
        t = self.torch.empty_like(view.obj, memory_format=self.contiguous_format)
        return _new(View, (t, view.shape, t.stride(), view.dtype, view.device, t.data_ptr()))

    def ensure_contiguous(self, view):
        return view if view.obj.is_contiguous() else self.view(view.obj.contiguous())

    def stream(self, device):
        if self.raw_stream is not None:
            return self.raw_stream(device)
        return self.torch.cuda.current_stream(device).cuda_stream

    def contiguous(self, t):
        return t.contiguous()

    def moveaxis(self, t, source, destination):
        return t.movedim(source, destination)

    def to_host(self, t):
        t = t.detach().cpu()
        if t.dtype == self.torch.bfloat16:
            t = t.float()
        elif self.names.get(t.dtype) == "float8_e4m3fn":
            t = t.view(self.torch.uint8)
        return t.numpy()

    def from_host(self, array, dtype, device):
        t = self.torch.from_numpy(np.array(array, order="C")).to(self.dtypes[dtype])  # np.array keeps 0-d
        return t if device is None else t.to(self.cuda_device(device))

    def pad_last(self, t, extra):
        return self.torch.nn.functional.pad(t, (0, extra))

    def astype(self, t, dtype):
        return t.to(self.dtypes[dtype])

    def copy_into(self, target, source):
        target.copy_(source)

    def assign(self, t, array):
        if self.names.get(t.dtype) == "float8_e4m3fn":
            t = t.view(self.torch.uint8)
        with self.torch.no_grad():
            t.copy_(self.torch.from_numpy(np.array(array, order="C")))

    def capturing(self, device):
        return self.torch.cuda.is_current_stream_capturing()


class CupyFramework(Framework):
    name = "cupy"

    def __init__(self) -> None:
        import cupy

        self.cupy = cupy

    def view(self, x) -> View:
        cai = x.__cuda_array_interface__
        itemsize = np.dtype(cai["typestr"]).itemsize
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        strides = contiguous_strides(shape) if strides is None else tuple(s // itemsize for s in strides)
        return View(x, shape, strides, numpy_dtype_name(cai["typestr"]), x.device.id, cai["data"][0])

    def empty(self, shape, dtype, device):
        with self.cupy.cuda.Device(device):
            return self.view(self.cupy.empty(shape, dtype=dtype))

    def stream(self, device):
        with self.cupy.cuda.Device(device):
            return self.cupy.cuda.get_current_stream().ptr

    def contiguous(self, x):
        with self.cupy.cuda.Device(x.device.id):
            return self.cupy.ascontiguousarray(x)

    def moveaxis(self, x, source, destination):
        return self.cupy.moveaxis(x, source, destination)

    def pad_last(self, x, extra):
        with self.cupy.cuda.Device(x.device.id):
            return self.cupy.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, extra)])

    def assign(self, x, array):
        with self.cupy.cuda.Device(x.device.id):
            x[...] = self.cupy.asarray(array).astype(x.dtype)

    def astype(self, x, dtype):
        with self.cupy.cuda.Device(x.device.id):
            return x.astype(dtype)

    def copy_into(self, target, source):
        with self.cupy.cuda.Device(target.device.id):
            target[...] = source

    def to_host(self, x):
        return self.cupy.asnumpy(x)

    def from_host(self, array, dtype, device):
        with self.cupy.cuda.Device(device):
            return self.cupy.asarray(np.asarray(array, dtype=dtype))


class JaxFramework(Framework):
    """JAX arrays are immutable and computed on JAX's own streams: inputs are awaited, results are written into
    freshly allocated arrays on the legacy default stream, and the op waits for its kernels before returning."""

    name = "jax"
    needs_finish = True

    def __init__(self) -> None:
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp = jax, jnp

    def device_of(self, x):
        (device,) = x.devices()
        return device

    def view(self, x) -> View:
        device = self.device_of(x)
        dtype = numpy_dtype_name(x.dtype)
        if device.platform == "cpu":
            return View(x, tuple(x.shape), contiguous_strides(x.shape), dtype, None, 0)
        x.block_until_ready()
        return View(x, tuple(x.shape), contiguous_strides(x.shape), dtype, _ordinal(device), x.unsafe_buffer_pointer())

    def gpu_device(self, ordinal: int):
        for d in self.jax.devices("gpu"):
            if _ordinal(d) == ordinal:
                return d
        raise ValueError(f"JAX has no GPU with ordinal {ordinal}")

    def empty(self, shape, dtype, device):
        return self.view(self.jnp.zeros(shape, dtype=dtype, device=self.gpu_device(device)))

    def contiguous(self, x):
        return x

    def pad_last(self, x, extra):
        return self.jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, extra)])

    def astype(self, x, dtype):
        return x.astype(dtype)

    def moveaxis(self, x, source, destination):
        return self.jnp.moveaxis(x, source, destination)

    def to_host(self, x):
        array = np.asarray(x)
        return array.astype(np.float32) if array.dtype.name == "bfloat16" else array

    def from_host(self, array, dtype, device):
        out = self.jnp.asarray(array, dtype=dtype)
        return out if device is None else self.jax.device_put(out, self.gpu_device(device))

    def finish(self, device, stream):
        from . import _library

        _library.synchronize(device, stream)


def _ordinal(jax_device) -> int:
    ordinal = getattr(jax_device, "local_hardware_id", None)
    return jax_device.id if ordinal is None else ordinal


_by_type: dict[type, Framework] = {}
_instances: dict[str, Framework] = {}


def _instance(cls) -> Framework:
    fw = _instances.get(cls.name)
    if fw is None:
        fw = _instances[cls.name] = cls()
    return fw


def framework_of(x, op: str, name: str) -> Framework:
    """The adapter for x's type, or a TypeError naming the argument and what is supported."""
    t = type(x)
    fw = _by_type.get(t)
    if fw is not None:
        return fw
    root = t.__module__.split(".")[0]
    if isinstance(x, np.ndarray):
        fw = _instance(NumpyFramework)
    elif root == "torch" and "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor):
        fw = _instance(TorchFramework)
    elif root == "cupy":
        fw = _instance(CupyFramework)
    elif root in ("jax", "jaxlib") and hasattr(x, "devices"):
        fw = _instance(JaxFramework)
    elif hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__"):
        raise TypeError(
            f"{op}: {name} is a {t.__module__}.{t.__name__}; xopsaot reads such GPU arrays but cannot allocate "
            "results of that type: pass torch.Tensor, cupy.ndarray, jax.Array or numpy.ndarray"
        )
    else:
        raise TypeError(
            f"{op}: {name} must be an array (numpy.ndarray, torch.Tensor, cupy.ndarray or jax.Array), "
            f"got {t.__module__}.{t.__name__}"
        )
    _by_type[t] = fw
    return fw


def rows_view_ok(shape, strides) -> bool:
    """Can (..., n) be read as (rows, n) with one row stride and a contiguous last dim?"""
    if not shape:
        return False
    if shape[-1] != 1 and strides[-1] != 1:
        return False
    for i in range(len(shape) - 2):
        if shape[i] != 1 and strides[i] != strides[i + 1] * shape[i + 1]:
            return False
    return True
