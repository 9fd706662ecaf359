"""The op registry behind xopsaot.ops() and xopsaot.dispatch()."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
_OPS: dict[str, Callable[..., Any]] = {}


def register(fn: F) -> F:
    """Make fn an op, callable as xopsaot.<name>(...) and xopsaot.dispatch("<name>", ...)."""
    _OPS[fn.__name__] = fn
    return fn


def ops() -> list[str]:
    """The names of all ops, sorted."""
    return sorted(_OPS)


def dispatch(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call op `name`: dispatch("flash_attn", q, k, v, causal=True) is xopsaot.flash_attn(q, k, v, causal=True)."""
    fn = _OPS.get(name) if isinstance(name, str) else None
    if fn is None:
        raise ValueError(f"unknown op {name!r}; known ops: {', '.join(ops())}")
    return fn(*args, **kwargs)
