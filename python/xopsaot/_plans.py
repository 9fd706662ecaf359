"""The fast path for repeated GPU calls: validated calls of torch CUDA tensors, replayed by signature.

The first call of an op with a given signature (for each torch tensor: shape, strides, dtype, device; every other
argument by value) runs the full path: adapters, checks, allocation, descriptor packing. While it runs, the Call
records what it did: which outputs it allocated, which C functions it called with which descriptors and
scalars, and what it returned. Later calls with the same signature replay the record: allocate the outputs,
write the data pointers into a copy of the recorded descriptors, and call the C functions, skipping the Python
work whose outcome the signature already decides (the C library still selects the variant per call, from the
pointers' alignment too). A call that copied an input, moved an axis, ran on the CPU path or read device values on
the host (a check of an index tensor) is not recorded. A call that drew a fresh seed (seed=None) is, and each replay
draws its own, written where the recorded call's seed went.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Optional

from . import _call, _library, _philox

SCALARS = (bool, int, float, str, type(None))
MAX_PLANS = 4096

plans: dict = {}
_recording = threading.local()
tensor_type: Optional[type] = None  # torch.Tensor, once the torch adapter exists


def use_tensor_type(torch_tensor: type) -> None:
    global tensor_type
    tensor_type = torch_tensor


def clear() -> None:
    plans.clear()


def signature(op: str, args: tuple, kwargs: dict):
    """(key, tensors) for a call whose arrays are all torch CUDA tensors, else (None, None). The key is flat:
    per tensor its shape, strides, dtype and device; per other argument (type, value); per keyword its name."""
    key = [op, _call.ENV_BACKEND]
    tensors = []
    # the same test for positional and keyword values, written out twice: this runs on every op call
    for x in args:
        t = type(x)
        if t is tensor_type and x.is_cuda:
            key += (x.shape, x.stride(), x.dtype, x.get_device())
            tensors.append(x)
        elif t in SCALARS:
            key.append((t, x))
        else:
            return None, None
    if kwargs:
        for name, x in kwargs.items():
            t = type(x)
            key.append(name)
            if t is tensor_type and x.is_cuda:
                key += (x.shape, x.stride(), x.dtype, x.get_device())
                tensors.append(x)
            elif t in SCALARS:
                key.append((t, x))
            else:
                return None, None
    return (tuple(key), tensors) if tensors else (None, None)


def run(op: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
    """Call op `fn`; a GPU call of torch tensors with no recorded plan yet is recorded. (The op wrappers of
    _registry look up recorded plans themselves, before calling this.)"""
    if tensor_type is not None:
        key, tensors = signature(op, args, kwargs)
        if key is not None:
            recorder = _recording.recorder = Recorder(tensors)
            try:
                result = fn(*args, **kwargs)
            finally:
                _recording.recorder = None
            plan = recorder.plan(result)
            if plan is not None:
                if len(plans) >= MAX_PLANS:
                    plans.clear()
                plans[key] = plan
            return result
    return fn(*args, **kwargs)


def recorder() -> Optional[Recorder]:
    return getattr(_recording, "recorder", None)


class Recorder:
    """Collects what one GPU call did, in terms of its argument tensors (by position) and its outputs."""

    def __init__(self, tensors: list):
        # objects are known by id(): the recorder holds every one it names, so no id is reused while it records
        self.sources = {id(t): ("arg", i) for i, t in enumerate(tensors)}
        self.held: list = list(tensors)
        self.arguments = len(tensors)
        self.outputs: list = []  # ("like", arg index) or ("new", shape, dtype, device)
        self.launches: list = []  # (C function name, descriptor bytes, descriptor slots, data pointers, scalars)
        self.seeds: list[int] = []  # fresh seeds the call drew (Call.fresh_seed)
        self.valid = True
        self.framework = None
        self.device = None

    def output(self, out) -> None:
        """A new contiguous output of the call: replay makes it with empty_like of an argument of its shape, dtype
        and device where one is contiguous, else with empty from the recorded shape."""
        twin = self.contiguous_twin(out)
        if twin is not None:
            self.outputs.append(("like", twin))
        else:
            self.outputs.append(("new", tuple(out.shape), out.dtype, out.device))
        self.sources[id(out)] = ("out", len(self.outputs) - 1)
        self.held.append(out)

    def contiguous_twin(self, out) -> Optional[int]:
        """An argument tensor that is contiguous with out's shape, dtype and device: empty_like of it costs the
        host about 1 us less than empty with a shape (so a broadcast that needs none, as in add(x, y), and every
        output made like an input allocate this way)."""
        for i, t in enumerate(self.held[: self.arguments]):
            if t.dtype == out.dtype and t.shape == out.shape and t.device == out.device and t.is_contiguous():
                return i
        return None

    def launch(self, framework, device, name: str, views, scalars) -> None:
        if framework.name != "torch":
            self.valid = False
            return
        self.framework, self.device = framework, device
        pointers = []
        for index, view in enumerate(views):
            if view is None:
                continue
            source = self.sources.get(id(view.obj))
            if source is None:  # a copy made for this call: replaying would need the copy again
                self.valid = False
                return
            pointers.append((index, source, view.ptr - view.obj.data_ptr()))
        addresses = _library.pack(views)
        first = next((a for a in addresses if a is not None), None)
        size = sum(a is not None for a in addresses) * _library.TENSOR.size
        descriptors = ctypes.string_at(first, size) if first is not None else b""
        slots = []
        k = 0
        for a in addresses:
            slots.append(None if a is None else k)
            k += a is not None
        self.launches.append((name, descriptors, slots, pointers, scalars))

    def plan(self, result) -> Optional[Plan]:
        """The replayable record, if the call launched, made no copies and returned only its outputs, its
        argument tensors (ops that update them in place) and None."""
        if not self.valid or not self.launches:
            return None
        returned = result if isinstance(result, tuple) else (result,)
        if any(r is not None and id(r) not in self.sources for r in returned):
            return None
        seeded = [self.seed_slots(scalars) for *_, scalars in self.launches]
        found = {seed for slots in seeded for _, _, seed in slots}
        if found != set(self.seeds):  # a fresh seed that went anywhere but a launch's scalars cannot be redrawn
            return None
        return Plan(self, result, seeded)

    def seed_slots(self, scalars) -> list:
        """(scalar index, field or None, seed) for each scalar that is one of the call's fresh seeds: an int
        argument, or the `seed` field of an options struct."""
        slots = []
        for i, value in enumerate(scalars):
            if type(value) is int and value in self.seeds:
                slots.append((i, None, value))
            elif isinstance(value, ctypes.Structure) and getattr(value, "seed", None) in self.seeds:
                slots.append((i, "seed", value.seed))
        return slots

    def source(self, returned) -> tuple:
        """Where a returned value comes from: ("arg", i), ("out", i) or ("none", 0)."""
        return ("none", 0) if returned is None else self.sources[id(returned)]


class Plan:
    """A recorded GPU call, replayed for new tensors of the same signature."""

    def __init__(self, rec: Recorder, result, seeded: list):
        """seeded: per launch, Recorder.seed_slots of its scalars."""
        torch = rec.framework.torch
        self.empty_like = torch.empty_like
        self.empty = torch.empty
        self.outputs = rec.outputs
        raw_stream = rec.framework.raw_stream  # torch's getter of a device's current stream, called directly
        self.stream = raw_stream if raw_stream is not None else rec.framework.stream
        self.device = rec.device
        self.launches = []
        arguments = rec.arguments  # replay numbers the argument tensors first, then the outputs
        self.seeds = len(rec.seeds)
        for (name, descriptors, slots, pointers, scalars), seed_slots in zip(rec.launches, seeded):
            words = [
                (slots[index] * _library.TENSOR.size // 8, i if kind == "arg" else arguments + i, offset)
                for index, (kind, i), offset in pointers
            ]
            which = [(i, field, rec.seeds.index(seed)) for i, field, seed in seed_slots]
            self.launches.append((getattr(_library.library(), name), descriptors, slots, words, scalars, which))
        self.many = isinstance(result, tuple)
        self.result = [rec.source(r) for r in (result if self.many else (result,))]
        self.local = threading.local()

    def buffers(self) -> list:
        """This thread's copies of the descriptors: (buffer, uint64 view, address per descriptor slot)."""
        buffers = []
        for _, descriptors, slots, *_ in self.launches:
            raw = ctypes.create_string_buffer(descriptors, max(len(descriptors), 8))
            base = ctypes.addressof(raw)
            words = (ctypes.c_uint64 * (len(raw) // 8)).from_buffer(raw)
            addresses = [None if s is None else base + s * _library.TENSOR.size for s in slots]
            buffers.append((raw, words, addresses))
        self.local.buffers = buffers
        return buffers

    def replay(self, tensors: list):
        outs = []
        for spec in self.outputs:
            if spec[0] == "like":
                outs.append(self.empty_like(tensors[spec[1]]))
            else:
                outs.append(self.empty(spec[1], dtype=spec[2], device=spec[3]))
        stream = self.stream(self.device)
        buffers = getattr(self.local, "buffers", None) or self.buffers()
        objects = tensors + outs
        seeds = [_philox.fresh_seed() for _ in range(self.seeds)] if self.seeds else None
        for (fn, _, _, words, scalars, seeded), (_, buffer, addresses) in zip(self.launches, buffers):
            for word, index, offset in words:
                buffer[word] = objects[index].data_ptr() + offset
            if seeded:
                scalars = with_seeds(scalars, seeded, seeds)
            status = fn(*addresses, *scalars, stream)
            if status:
                _library.raise_for(status)
        picked = [outs[i] if kind == "out" else tensors[i] if kind == "arg" else None for kind, i in self.result]
        return tuple(picked) if self.many else picked[0]


def with_seeds(scalars: tuple, seeded: list, seeds: list) -> list:
    """The recorded scalars with this replay's seeds in place of the recorded call's (structs copied: the recorded
    ones are shared by every thread's replays)."""
    scalars = list(scalars)
    for i, field, which in seeded:
        if field is None:
            scalars[i] = seeds[which]
        else:
            struct = type(scalars[i]).from_buffer_copy(scalars[i])
            setattr(struct, field, seeds[which])
            scalars[i] = struct
    return scalars
