"""ctypes binding to libxopsaot: loading, status -> exception mapping, and tensor descriptors."""

from __future__ import annotations

import ctypes
import json
import struct
import threading
from functools import cache
from pathlib import Path
from typing import Any, Optional

PACKAGE_DIR = Path(__file__).resolve().parent
LIBRARY_PATH = PACKAGE_DIR / "libxopsaot.so"
MANIFEST_PATH = PACKAGE_DIR / "manifest.json"
HEADER_PATH = PACKAGE_DIR / "include" / "xopsaot.h"

# xopsaot_status (include/xopsaot.h)
SUCCESS, INVALID_ARGUMENT, UNSUPPORTED, NO_DRIVER, NO_BINARY, DRIVER, CAPTURE, OUT_OF_MEMORY = range(8)
STATUS_NAMES = [
    "SUCCESS",
    "INVALID_ARGUMENT",
    "UNSUPPORTED",
    "NO_DRIVER",
    "NO_BINARY",
    "DRIVER",
    "CAPTURE",
    "OUT_OF_MEMORY",
]

# xopsaot_dtype codes of the dtypes the ops take
DTYPE_CODES = {
    "float16": 1,
    "bfloat16": 2,
    "float32": 3,
    "float64": 4,
    "int32": 7,
    "int64": 8,
    "bool": 10,
    "float8_e4m3fn": 11,
}

MAX_NDIM = 8
MAX_DESCRIPTORS = 16  # tensors one C call takes, at most (flash_attn_with_kvcache: 9)
# xopsaot_tensor: data, shape[8], strides[8], ndim, dtype, device, reserved
TENSOR = struct.Struct(f"<Q{MAX_NDIM}q{MAX_NDIM}q4i")
# The same layout for n dims: unused shape/stride slots are written as zero pad bytes, so packing takes
# 3 + 2n values instead of 3 + 16 (the reserved field is never written and stays zero).
TENSOR_BY_NDIM = [struct.Struct(f"<Q{n}q{8 * (MAX_NDIM - n)}x{n}q{8 * (MAX_NDIM - n)}x3i") for n in range(MAX_NDIM + 1)]


class XopsaotError(RuntimeError):
    """A failure reported by the C library: no driver, no binary for this GPU, a driver error, a module load
    during graph capture. `status` holds the library's status name."""

    def __init__(self, status: int, message: str):
        self.status = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)
        super().__init__(message)


class LibraryMissing(RuntimeError):
    pass


class AttentionOptions(ctypes.Structure):
    """xopsaot_attention_options: passed by pointer; the instance travels with a call (and its replays)."""

    _fields_ = [
        ("softmax_scale", ctypes.c_float),
        ("causal", ctypes.c_int),
        ("window_left", ctypes.c_int),
        ("window_right", ctypes.c_int),
        ("softcap", ctypes.c_float),
        ("num_splits", ctypes.c_int),
        ("k_scale", ctypes.c_float),
        ("v_scale", ctypes.c_float),
    ]


_OPTIONS = ctypes.POINTER(AttentionOptions)


class NormOptions(ctypes.Structure):
    """xopsaot_norm_options, passed by pointer like AttentionOptions."""

    _fields_ = [
        ("norm", ctypes.c_int),
        ("eps", ctypes.c_float),
        ("weight_offset", ctypes.c_float),
        ("gate_act", ctypes.c_int),
        ("gate_pre", ctypes.c_int),
    ]


class ElementwiseOptions(ctypes.Structure):
    """xopsaot_elementwise_options, passed by pointer like AttentionOptions."""

    _fields_ = [
        ("op", ctypes.c_int),
        ("scalar_operand", ctypes.c_int),
        ("scalar", ctypes.c_double),
        ("scalar_int", ctypes.c_int64),
        ("alpha", ctypes.c_double),
        ("alpha_int", ctypes.c_int64),
        ("min", ctypes.c_double),
        ("max", ctypes.c_double),
        ("min_int", ctypes.c_int64),
        ("max_int", ctypes.c_int64),
    ]


class GemmOptions(ctypes.Structure):
    """xopsaot_gemm_options."""

    _fields_ = [
        ("alpha", ctypes.c_float),
        ("beta", ctypes.c_float),
        ("act", ctypes.c_int),
        ("gate_act", ctypes.c_int),
    ]


class CrossEntropyOptions(ctypes.Structure):
    """xopsaot_cross_entropy_options."""

    _fields_ = [
        ("ignore_index", ctypes.c_int64),
        ("label_smoothing", ctypes.c_float),
        ("reduction", ctypes.c_int),
    ]


class SampleOptions(ctypes.Structure):
    """xopsaot_sample_options."""

    _fields_ = [
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int),
        ("top_p", ctypes.c_float),
        ("seed", ctypes.c_int64),
        ("offset", ctypes.c_int64),
    ]


# Function name -> (argument types, including trailing scalars). Tensors are passed as descriptor addresses.
_T = ctypes.c_void_p
SIGNATURES = {
    "xopsaot_add": [_T, _T, _T, ctypes.c_void_p],
    "xopsaot_elementwise": [_T, _T, _T, ctypes.POINTER(ElementwiseOptions), ctypes.c_void_p],
    "xopsaot_dropout": [_T, _T, ctypes.c_float, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p],
    "xopsaot_scan": [_T, _T, _T, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p],
    "xopsaot_rms_norm": [_T, _T, _T, _T, _T, ctypes.c_float, ctypes.c_void_p],
    "xopsaot_norm": [_T] * 7 + [ctypes.POINTER(NormOptions), ctypes.c_void_p],
    "xopsaot_group_norm": [_T] * 4 + [ctypes.c_int64, ctypes.c_float, ctypes.c_void_p],
    "xopsaot_activation": [_T, _T, ctypes.c_int, ctypes.c_void_p],
    "xopsaot_gated_activation": [_T, _T, ctypes.c_int, ctypes.c_void_p],
    "xopsaot_softmax": [_T, _T, ctypes.c_void_p],
    "xopsaot_softmax_family": [_T, _T, ctypes.c_int, ctypes.c_void_p],
    "xopsaot_rotary": [_T] * 6 + [ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p],
    "xopsaot_rotary_qk": [_T] * 4 + [ctypes.c_int, ctypes.c_void_p],
    "xopsaot_lrpe_cosine": [_T] * 3 + [ctypes.c_int64, ctypes.c_void_p],
    "xopsaot_matmul": [_T, _T, _T, ctypes.c_void_p],
    "xopsaot_gemm": [_T] * 6 + [ctypes.POINTER(GemmOptions), ctypes.c_void_p],
    "xopsaot_cross_entropy": [_T] * 3 + [ctypes.POINTER(CrossEntropyOptions), ctypes.c_void_p],
    "xopsaot_sample": [_T] * 5 + [ctypes.POINTER(SampleOptions), ctypes.c_void_p],
    "xopsaot_linear_sample": [_T] * 7 + [ctypes.POINTER(SampleOptions), ctypes.c_void_p],
    "xopsaot_linear_cross_entropy": [_T] * 5 + [ctypes.POINTER(CrossEntropyOptions), ctypes.c_int64, ctypes.c_void_p],
    "xopsaot_flash_attn": [_T] * 6 + [_OPTIONS, ctypes.c_void_p],
    "xopsaot_flash_attn_varlen": [_T] * 9 + [ctypes.c_int, ctypes.c_int, _OPTIONS, ctypes.c_void_p],
    "xopsaot_flash_attn_with_kvcache": [_T] * 9 + [_OPTIONS, ctypes.c_void_p],
    "xopsaot_device_count": [ctypes.POINTER(ctypes.c_int)],
    "xopsaot_device_arch": [ctypes.c_int, ctypes.POINTER(ctypes.c_int)],
    "xopsaot_device_name": [ctypes.c_int, ctypes.c_char_p, ctypes.c_int],
    "xopsaot_device_memory_gbps": [ctypes.c_int, ctypes.POINTER(ctypes.c_int)],
    "xopsaot_preload": [ctypes.c_int],
    "xopsaot_stream_synchronize": [ctypes.c_int, ctypes.c_void_p],
    "xopsaot_variant_binary": [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint64)],
    "xopsaot_recent_variants": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
}


@cache
def library() -> ctypes.CDLL:
    """The loaded C library. It needs no GPU driver to load (the driver is dlopen'ed on first use)."""
    if not LIBRARY_PATH.exists():
        raise LibraryMissing(f"{LIBRARY_PATH} is missing: xopsaot was not built (pip install . builds it)")
    lib = ctypes.CDLL(str(LIBRARY_PATH))
    for name, argtypes in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    lib.xopsaot_last_error.restype = ctypes.c_char_p
    lib.xopsaot_last_error.argtypes = []
    lib.xopsaot_built_archs.restype = ctypes.c_char_p
    lib.xopsaot_built_archs.argtypes = []
    lib.xopsaot_autotune_cache.restype = ctypes.c_char_p
    lib.xopsaot_autotune_cache.argtypes = []
    return lib


@cache
def manifest() -> dict[str, Any]:
    return json.loads(MANIFEST_PATH.read_text())


def raise_for(status: int, lib: Optional[ctypes.CDLL] = None) -> None:
    """Turn a failing status into the documented exception, with the library's message."""
    if status == SUCCESS:
        return
    message = (lib or library()).xopsaot_last_error().decode(errors="replace")
    if status in (INVALID_ARGUMENT, UNSUPPORTED):
        raise ValueError(message)
    if status == OUT_OF_MEMORY:
        raise MemoryError(message)
    raise XopsaotError(status, message)


class _Descriptors(threading.local):
    """Per-thread scratch space for the tensor descriptors of one call."""

    def __init__(self) -> None:
        self.buffer = ctypes.create_string_buffer(TENSOR.size * MAX_DESCRIPTORS)
        self.address = ctypes.addressof(self.buffer)


_descriptors = _Descriptors()


def pack(views) -> list:
    """Write one xopsaot_tensor per view (None -> NULL) and return their addresses."""
    d = _descriptors
    buffer, base = d.buffer, d.address
    addresses = []
    offset = 0
    for v in views:
        if v is None:
            addresses.append(None)
            continue
        ndim = len(v.shape)
        if ndim > MAX_NDIM:
            raise ValueError(f"arrays of more than {MAX_NDIM} dims are not supported (got {ndim})")
        TENSOR_BY_NDIM[ndim].pack_into(
            buffer, offset, v.ptr, *v.shape, *v.strides, ndim, DTYPE_CODES[v.dtype], v.device
        )
        addresses.append(base + offset)
        offset += TENSOR.size
    return addresses


_functions: dict = {}


def call(name: str, views, *scalars) -> None:
    """Call op `name` of the C library with tensor descriptors for `views` then `scalars` (the stream last)."""
    fn = _functions.get(name)
    if fn is None:
        fn = _functions[name] = getattr(library(), name)
    status = fn(*pack(views), *scalars)
    if status:
        raise_for(status)


def device_count() -> tuple[int, Optional[str]]:
    """(number of GPUs, why none) as the driver reports it."""
    lib = library()
    count = ctypes.c_int(0)
    status = lib.xopsaot_device_count(ctypes.byref(count))
    if status != SUCCESS:
        return 0, lib.xopsaot_last_error().decode(errors="replace")
    return count.value, None


def device_arch(device: int) -> tuple[int, Optional[str]]:
    """(compute capability as 10 * major + minor, why no binary serves it or None)."""
    lib = library()
    arch = ctypes.c_int(0)
    status = lib.xopsaot_device_arch(device, ctypes.byref(arch))
    return arch.value, None if status == SUCCESS else lib.xopsaot_last_error().decode(errors="replace")


def device_name(device: int) -> str:
    lib = library()
    buffer = ctypes.create_string_buffer(256)
    raise_for(lib.xopsaot_device_name(device, buffer, len(buffer)), lib)
    return buffer.value.decode(errors="replace")


def device_memory_gbps(device: int) -> int:
    """Peak memory bandwidth in GB/s as the driver reports the memory (0: it does not)."""
    lib = library()
    gbps = ctypes.c_int(0)
    raise_for(lib.xopsaot_device_memory_gbps(device, ctypes.byref(gbps)), lib)
    return gbps.value


def variant_binary(index: int) -> bytes:
    lib = library()
    data, size = ctypes.c_void_p(), ctypes.c_uint64()
    raise_for(lib.xopsaot_variant_binary(index, ctypes.byref(data), ctypes.byref(size)), lib)
    return ctypes.string_at(data.value, size.value)


def recent_variants(count: int = 16) -> list[int]:
    """Indices of the variants this thread's last `count` (at most 16) launches selected, newest first."""
    indices = (ctypes.c_int * count)()
    return list(indices[: library().xopsaot_recent_variants(indices, count)])


def last_variant() -> int:
    """Index (in the manifest) of the variant this thread's last GPU op selected; -1 if none."""
    return library().xopsaot_last_variant()


def autotune_cache() -> Optional[str]:
    """The file XOPSAOT_AUTOTUNE=1 remembers its choices in; None when autotuning is off."""
    path = library().xopsaot_autotune_cache()
    return None if path is None else path.decode()


def preload(device: int) -> None:
    lib = library()
    raise_for(lib.xopsaot_preload(device), lib)


def synchronize(device: int, stream: int) -> None:
    lib = library()
    raise_for(lib.xopsaot_stream_synchronize(device, stream), lib)
