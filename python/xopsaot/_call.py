"""One op call: which path runs it (GPU kernels or the NumPy reference), on which device and stream.

The path follows the arrays: GPU arrays run the compiled kernels, host arrays the NumPy reference.
XOPSAOT_BACKEND=cpu|cuda or backend="cpu"|"cuda" force a path. A GPU array never silently goes to the
CPU: if its GPU cannot run the kernels the call raises; only an explicit backend="cpu" (or
XOPSAOT_BACKEND=cpu) copies it to the host and back.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any, Optional

import numpy as np

from . import _library, _philox, _plans
from ._arrays import Framework, View, framework_of, rows_view_ok

BACKENDS = ("auto", "cpu", "cuda")
# Read once, when xopsaot is imported (a per-call environment lookup costs more than a launch's bookkeeping).
ENV_BACKEND = os.environ.get("XOPSAOT_BACKEND") or "auto"


def requested_backend(backend: Optional[str]) -> str:
    choice = ENV_BACKEND if backend is None else backend
    if choice not in BACKENDS:
        source = "XOPSAOT_BACKEND" if backend is None else "backend"
        raise ValueError(f"{source}={choice!r} is not one of {', '.join(BACKENDS)}")
    return choice


@cache
def gpu_unavailable(device: int) -> Optional[str]:
    """Why the kernels cannot run on `device`, or None when they can (the answer does not change)."""
    try:
        _library.library()
    except (_library.LibraryMissing, OSError) as e:
        return str(e)
    count, reason = _library.device_count()
    if reason:
        return reason
    if device >= count:
        return f"device {device} does not exist ({count} devices)"
    return _library.device_arch(device)[1]


class Call:
    """The arrays of one op call, resolved to one framework and one device (None: host memory)."""

    __slots__ = ("op", "framework", "device", "on_gpu")

    def __init__(self, op: str, framework: Framework, device: Optional[int], on_gpu: bool):
        self.op, self.framework, self.device, self.on_gpu = op, framework, device, on_gpu

    def contiguous(self, view: View) -> View:
        return self.framework.ensure_contiguous(view)

    def rows(self, view: View) -> View:
        """The view itself when a row kernel can read it as (rows, n) with one row stride, else a contiguous copy."""
        return view if rows_view_ok(view.shape, view.strides) else self.contiguous(view)

    def empty(self, shape, dtype: str) -> View:
        out = self.framework.empty(tuple(shape), dtype, self.device)
        recorder = _plans.recorder()
        if recorder is not None:
            recorder.output(out.obj)
        return out

    def empty_like(self, view: View) -> View:
        out = self.framework.empty_like(view)
        recorder = _plans.recorder()
        if recorder is not None:
            recorder.output(out.obj)
        return out

    def launch(self, name: str, views, *scalars) -> None:
        fw = self.framework
        recorder = _plans.recorder()
        if recorder is not None:
            recorder.launch(fw, self.device, name, views, scalars)
        _library.call(name, views, *scalars, fw.stream(self.device))
        if fw.needs_finish:
            fw.finish(self.device, fw.stream(self.device))

    def not_replayable(self) -> None:
        """This call does work the fast path cannot repeat (reads device data on the host)."""
        recorder = _plans.recorder()
        if recorder is not None:
            recorder.valid = False

    def fresh_seed(self) -> int:
        """A new random seed for this call; a replay of the call draws its own."""
        seed = _philox.fresh_seed()
        recorder = _plans.recorder()
        if recorder is not None:
            recorder.seeds.append(seed)
        return seed

    def can_read_back(self) -> bool:
        """Whether device-resident indices may be copied to the host for checking (never during graph capture)."""
        return not (self.on_gpu and self.framework.capturing(self.device))

    def host(self, view: View) -> np.ndarray:
        """The values of `view` as a NumPy array (bfloat16 widened to float32). Reading device memory marks the call
        unreplayable: a check of device values must run on every call, so the fast path must not skip it."""
        if view.device is not None:
            self.not_replayable()
        return self.framework.to_host(view.obj)

    def result(self, array: np.ndarray, dtype: str) -> Any:
        """A NumPy result as the caller's type, device and dtype."""
        return self.framework.from_host(array, dtype, self.device)


def resolve(op: str, backend: Optional[str], names: tuple, arrays: tuple) -> tuple[Call, list]:
    """Describe the arrays (None entries pass through as None) and choose the path."""
    choice = requested_backend(backend)
    views: list[Optional[View]] = []
    framework = first = first_name = None
    for name, x in zip(names, arrays):
        if x is None:
            views.append(None)
            continue
        fw = framework_of(x, op, name)
        view = fw.view(x)
        if first is None:
            framework, first, first_name = fw, view, name
        elif fw is not framework:
            raise TypeError(
                f"{op}: {first_name} is a {framework.name} array but {name} is a {fw.name} array; "
                "pass arrays of one kind"
            )
        elif view.device != first.device:
            raise ValueError(
                f"{op}: arrays are on different devices: {first_name} on {first.where}, {name} on {view.where}"
            )
        views.append(view)
    device = first.device
    if device is None:
        if choice == "cuda":
            raise ValueError(f"{op}: backend='cuda' needs GPU arrays, but {first_name} is in host memory")
        return Call(op, framework, None, False), views
    if choice == "cpu":
        return Call(op, framework, device, False), views
    reason = gpu_unavailable(device)
    if reason:
        raise _library.XopsaotError(_library.NO_BINARY, f"{op}: cannot run on cuda:{device}: {reason}")
    return Call(op, framework, device, True), views
