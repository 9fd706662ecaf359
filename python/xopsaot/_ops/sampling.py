"""Sampling for servers: one token per row of logits by Gumbel-max over the tokens that top_k and top_p keep, with
no sort of the vocabulary (kernels_src/sampling.py), and linear_sample, which computes the LM head's logits chunk
by chunk first. A seed and offset give the same tokens on every run and on both paths: the NumPy reference draws
the kernels' Philox numbers (xopsaot._philox)."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .. import _philox
from .._arrays import View, round_float32
from .._call import Call, resolve
from .._library import SampleOptions
from .._registry import register
from .matmul import _check_lm_head, _k_contiguous, _rows


def _gumbel(first: int, rows: int, n: int, seed: int, offset: int) -> np.ndarray:
    """The float32 Gumbel noise (rows, n) the kernel draws for rows first.. (row r is Philox stream r): u = (top 23
    bits + 0.5) / 2^23, exact in float32 and below 1, so the noise is finite."""
    bits = _philox.draws(n, seed, offset, stream=np.arange(first, first + rows))
    u = ((bits >> np.uint32(9)).astype(np.float32) + np.float32(0.5)) * np.float32(2.0**-23)
    return -np.log(-np.log(u))


def _top_p_threshold(values: np.ndarray, weights: np.ndarray, top_p: float) -> float:
    """The largest value whose tokens at or above it hold top_p of the weights (ties kept together)."""
    order = np.argsort(-values, kind="stable")
    v, cumulative = values[order], np.cumsum(weights[order])
    run_end = np.r_[v[1:] != v[:-1], True]  # the last token of each run of equal values
    enough = run_end & (cumulative >= np.float64(top_p) * cumulative[-1])
    return float(v[np.argmax(enough)])


def sample_reference(
    logits: np.ndarray, temperature: np.ndarray, top_k: np.ndarray, top_p: np.ndarray, seed: int, offset: int
) -> np.ndarray:
    """logits (rows, vocab) and per-row parameters -> int64 token per row (rows in chunks of about 4M logits)."""
    rows, n = logits.shape
    step = max(1, (1 << 22) // n)
    chunks = [
        _sample_rows(
            logits[a : a + step], temperature[a : a + step], top_k[a : a + step], top_p[a : a + step], seed, offset, a
        )
        for a in range(0, rows, step)
    ]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.int64)


def _sample_rows(logits, temperature, top_k, top_p, seed: int, offset: int, first: int) -> np.ndarray:
    x = logits.astype(np.float32)
    x[np.isnan(x)] = -np.inf  # as the kernels read NaN: never drawn, counted by no filter
    rows, n = x.shape
    kept = np.ones((rows, n), bool)
    for r in range(rows):  # the filters, row by row where asked for
        row, k = x[r], int(top_k[r])
        if 0 < k < n:
            kept[r] = row >= np.partition(row, n - k)[n - k]
        if top_p[r] < 1 and temperature[r] > 0:
            inv_t = np.float64(np.float32(1.0) / np.float32(temperature[r]))
            with np.errstate(invalid="ignore"):  # a row of -inf: NaN weights, and every token kept
                weights = np.exp((row[kept[r]].astype(np.float64) - row.max()) * inv_t)
            kept[r] &= row >= _top_p_threshold(row[kept[r]], weights, float(top_p[r]))
    greedy = temperature == 0
    with np.errstate(divide="ignore"):
        inv_t = np.where(greedy, np.float32(1), np.float32(1) / temperature.astype(np.float32))[:, None]
    score = x * inv_t + np.where(greedy[:, None], np.float32(0), _gumbel(first, rows, n, seed, offset))
    return np.argmax(np.where(kept | greedy[:, None], score, -np.inf), axis=1).astype(np.int64)


def _parameter(op: str, name: str, value: Any, view: Optional[View], rows_shape: tuple, kind: str) -> Any:
    """A scalar parameter checked, or None when `view` (a per-row array) is given instead."""
    if view is not None:
        if view.shape != rows_shape:
            raise ValueError(
                f"{op}: {name} as an array must have one value per row, shape {check.shape_text(rows_shape)}, got "
                f"{check.shape_text(view.shape)}"
            )
        allowed = check.FLOATS if kind == "float" else ("int32", "int64")
        check.dtype(op, name, view, allowed)
        return None
    if kind == "int":
        return 0 if value is None else check.integer(op, name, value, minimum=0)
    value = (1.0 if name == "top_p" else value) if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise TypeError(f"{op}: {name} must be a float or an array of one per row, got {value!r}")
    if name == "top_p" and not 0.0 < value <= 1.0:
        raise ValueError(f"{op}: top_p is {value}; it must be in (0, 1]")
    if name == "temperature" and not 0.0 <= value < math.inf:
        raise ValueError(f"{op}: temperature is {value}; it must be finite and >= 0")
    return float(value)


def _check_rows(op: str, temperature: np.ndarray, top_k: np.ndarray, top_p: np.ndarray) -> None:
    if not (np.isfinite(temperature) & (temperature >= 0)).all():
        raise ValueError(f"{op}: temperature holds {temperature[~(temperature >= 0)][:1]}; each must be >= 0")
    if (top_k < 0).any():
        raise ValueError(f"{op}: top_k holds {int(top_k[top_k < 0][0])}; each must be >= 0 (0: no limit)")
    if not ((top_p > 0) & (top_p <= 1)).all():
        raise ValueError(f"{op}: top_p holds values outside (0, 1]")


def _sample(
    op: str,
    call: Call,
    rows_shape: tuple,
    params: tuple,
    views: tuple,
    seed: Optional[int],
    offset: Any,
    validate: Any,
    logits_on_host,
    launch,
) -> Any:
    """The shared part of sample and linear_sample: parameters, seed, checks, then either path."""
    temperature, top_k, top_p = (
        _parameter(op, name, value, view, rows_shape, kind)
        for name, value, view, kind in zip(("temperature", "top_k", "top_p"), params, views, ("float", "int", "float"))
    )
    offset = check.integer(op, "offset", offset, minimum=0)
    # greedy rows draw nothing: a call all greedy takes seed 0 rather than a fresh one, which changes none of its tokens
    seed = _philox.call_seed(op, 0 if seed is None and temperature == 0.0 else seed, call)
    rows = math.prod(rows_shape)

    def per_row(value, view, dtype):
        return np.full(rows, value, dtype) if view is None else call.host(view).reshape(-1).astype(dtype)

    # per-row arrays on the GPU are copied to the host to be checked (call.host marks such calls unreplayable);
    # scalars are checked above
    checks_gpu = call.on_gpu and check.boolean(op, "validate", validate)
    per_row_arrays = any(v is not None for v in views) and (not call.on_gpu or (checks_gpu and call.can_read_back()))
    if per_row_arrays or not call.on_gpu:
        host_rows = (
            per_row(temperature, views[0], np.float32),
            per_row(top_k, views[1], np.int64),
            per_row(top_p, views[2], np.float32),
        )
        if per_row_arrays:
            _check_rows(op, *host_rows)
    if not call.on_gpu:
        tokens = sample_reference(logits_on_host(), *host_rows, seed, offset)
        return call.result(tokens.reshape(rows_shape), "int64")
    fw = call.framework
    converted = [
        None if v is None else call.contiguous(v if v.dtype == dtype else fw.view(fw.astype(v.obj, dtype)))
        for v, dtype in zip(views, ("float32", "int32", "float32"))
    ]
    out = call.empty(rows_shape, "int64")
    options = SampleOptions(
        0.0 if temperature is None else temperature,
        0 if top_k is None else top_k,
        1.0 if top_p is None else top_p,
        seed,
        offset,
    )
    launch(converted, out, options)
    return out.obj


def _is_array(value: Any) -> bool:
    return value is not None and not isinstance(value, (bool, int, float, np.integer, np.floating))


@register
def sample(
    logits: Any,
    temperature: Any = 1.0,
    top_k: Any = None,
    top_p: Any = None,
    *,
    seed: Optional[int] = None,
    offset: int = 0,
    validate: bool = True,
    backend: Optional[str] = None,
) -> Any:
    """One token per row of logits (..., vocab) -> int64 (...). temperature 0 takes the argmax (greedy); otherwise
    top_k keeps the tokens at or above the k-th largest logit (None or 0: all), top_p then keeps the fewest highest
    tokens holding top_p of softmax(logits / temperature) over those (None or 1: all; ties kept), and the token is
    argmax(logits / temperature + Gumbel noise) among them. A NaN logit reads as -inf (never drawn, counted by no
    filter); a row of nothing above -inf gives 0. temperature, top_k and top_p are numbers or arrays of one
    value per row. seed (a 63-bit int; None draws one per call, but for a call all greedy, which draws nothing) and
    offset fix the draws (row r, token i: Philox counter offset + i // 4, stream r). validate=True copies per-row
    arrays to the host to check them (skipped during CUDA graph capture); calls of scalars are replayed by the fast
    path, with a fresh seed per replay where seed is None."""
    op = "sample"
    arrays = [v if _is_array(v) else None for v in (temperature, top_k, top_p)]
    call, (vx, *views) = resolve(op, backend, ("logits", "temperature", "top_k", "top_p"), (logits, *arrays))
    check.dtype(op, "logits", vx, check.FLOATS)
    if vx.ndim < 1 or vx.shape[-1] == 0:
        raise ValueError(f"{op}: logits must have a vocabulary dim of at least 1, got {check.shape_text(vx.shape)}")
    rows_shape = vx.shape[:-1]

    def launch(per_row, out, options):
        call.launch("xopsaot_sample", (call.rows(vx), *per_row, out), options)

    return _sample(
        op,
        call,
        rows_shape,
        (temperature, top_k, top_p),
        tuple(views),
        seed,
        offset,
        validate,
        lambda: call.host(vx).reshape(-1, vx.shape[-1]),
        launch,
    )


@register
def linear_sample(
    x: Any,
    weight: Any,
    bias: Any = None,
    temperature: Any = 1.0,
    top_k: Any = None,
    top_p: Any = None,
    *,
    seed: Optional[int] = None,
    offset: int = 0,
    validate: bool = True,
    backend: Optional[str] = None,
) -> Any:
    """sample(x @ weight.T + bias, ...) for the LM head: x (..., hidden), weight (vocab, hidden), bias (vocab,). The
    logits are computed chunk by chunk of rows (the most that fit in 256 MiB) into a workspace and rounded to x's
    dtype, as x @ weight.T stores them; the draws are sample's on those logits."""
    op = "linear_sample"
    arrays = [v if _is_array(v) else None for v in (temperature, top_k, top_p)]
    call, (vx, vw, vb, *views) = resolve(
        op, backend, ("x", "weight", "bias", "temperature", "top_k", "top_p"), (x, weight, bias, *arrays)
    )
    hidden, vocab = _check_lm_head(op, call, vx, vw, vb)

    def logits_on_host():
        host = call.host
        logits = host(vx).reshape(-1, hidden).astype(np.float32) @ host(vw).astype(np.float32).T
        logits = logits if vb is None else logits + host(vb).astype(np.float32)
        return round_float32(logits, vx.dtype)  # as the GPU's chunk stores them

    def launch(per_row, out, options):
        call.launch("xopsaot_linear_sample", (_rows(call, vx), _k_contiguous(call, vw), vb, *per_row, out), options)

    return _sample(
        op,
        call,
        vx.shape[:-1],
        (temperature, top_k, top_p),
        tuple(views),
        seed,
        offset,
        validate,
        logits_on_host,
        launch,
    )
