"""The op registry behind xopsaot.ops() and xopsaot.dispatch()."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from . import _plans

F = TypeVar("F", bound=Callable[..., Any])
_OPS: dict[str, Callable[..., Any]] = {}


def register(fn: F) -> F:
    """Make fn an op, callable as xopsaot.<name>(...) and xopsaot.dispatch("<name>", ...). Calls go through
    the fast path of _plans, which replays validated GPU calls of the same signature."""
    name = fn.__name__
    plans, signature = _plans.plans, _plans.signature

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        if _plans.tensor_type is not None:  # torch is in use: a recorded call may fit
            key, tensors = signature(name, args, kwargs)
            plan = plans.get(key) if key is not None else None
            if plan is not None:
                return plan.replay(tensors)
        return _plans.run(name, fn, args, kwargs)

    _OPS[name] = op
    return op  # type: ignore[return-value]


def ops() -> list[str]:
    """The names of all ops, sorted."""
    return sorted(_OPS)


def dispatch(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call op `name`: dispatch("flash_attn", q, k, v, causal=True) is xopsaot.flash_attn(q, k, v, causal=True)."""
    fn = _OPS.get(name) if isinstance(name, str) else None
    if fn is None:
        raise ValueError(f"unknown op {name!r}; known ops: {', '.join(ops())}")
    return fn(*args, **kwargs)
