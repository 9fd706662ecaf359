"""xopsaot.info() and xopsaot.preload()."""

from __future__ import annotations

from typing import Any, Optional

from . import _call, _library
from ._registry import ops


def info() -> dict[str, Any]:
    """What this installation can do: version, backend ("cuda" or "cpu") and why, the compiled archs, the
    devices and whether binaries serve them, every compiled variant (from the manifest), the library path, and
    where XOPSAOT_AUTOTUNE=1 keeps its choices ("autotune_cache", None when off)."""
    from . import __version__

    result: dict[str, Any] = {
        "version": __version__,
        "backend": "cpu",
        "reason": None,
        "archs": [],
        "devices": [],
        "variants": [],
        "ops": ops(),
        "library": None,
        "triton_version": None,
        "autotune_cache": None,
    }
    try:
        _library.library()
        manifest = _library.manifest()
    except (_library.LibraryMissing, OSError) as e:
        result["reason"] = str(e)
        return result
    result.update(
        library=str(_library.LIBRARY_PATH),
        archs=manifest["archs"],
        variants=manifest["variants"],
        triton_version=manifest["triton_version"],
        autotune_cache=_library.autotune_cache(),
    )
    count, driver_problem = _library.device_count()
    for index in range(count):
        arch, problem = _library.device_arch(index)
        result["devices"].append(
            {
                "index": index,
                "name": _library.device_name(index),
                "arch": f"sm_{arch}",
                "memory_gbps": _library.device_memory_gbps(index),
                "supported": problem is None,
                "reason": problem,
            }
        )
    supported = [d for d in result["devices"] if d["supported"]]
    if _call.ENV_BACKEND == "cpu":
        result["reason"] = "XOPSAOT_BACKEND=cpu"
    elif driver_problem:
        result["reason"] = driver_problem
    elif not supported:
        result["reason"] = "; ".join(d["reason"] for d in result["devices"])
    else:
        result["backend"] = "cuda"
    return result


def preload(device: Any = None) -> None:
    """Load every kernel binary for `device` (an index, "cuda:N", or a torch.device; None: every GPU with
    binaries) now, so no module load happens later, e.g. inside CUDA graph capture."""
    if device is None:
        count, problem = _library.device_count()
        if problem:
            raise _library.XopsaotError(_library.NO_DRIVER, problem)
        devices = [i for i in range(count) if _call.gpu_unavailable(i) is None]
    else:
        devices = [device_index(device)]
    for index in devices:
        _library.preload(index)


def device_index(device: Any) -> int:
    index: Optional[int]
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    elif isinstance(device, str) and device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
    elif getattr(device, "type", None) == "cuda":
        index = device.index or 0
    else:
        raise ValueError(f"device must be a CUDA device index, 'cuda:N' or a torch.device, got {device!r}")
    return index
