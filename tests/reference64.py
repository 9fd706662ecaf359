"""Independent float64 references, written plainly (no blocking, no online softmax), and the comparison rule."""

from __future__ import annotations

import math

import numpy as np

# Relative tolerance by dtype of the result.
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}


def f64(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def assert_close(
    actual, expected: np.ndarray, dtype: str, what: str = "", floor: float = 1e-30, tol: float | None = None
) -> None:
    """Max error and L2 error, both relative to the reference's scale (at least `floor`: 1 makes errors absolute
    for results under 1, as for an activation's tail), within the dtype's tolerance (or `tol`, for an
    ill-conditioned problem whose inherent float32 error is larger). NaN anywhere fails."""
    a, e = f64(actual), np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    assert np.isfinite(a).all(), f"{what}: non-finite values in the result"
    scale = max(np.abs(e).max(initial=0.0), floor)
    tol = TOLERANCE[dtype] if tol is None else tol
    max_err = np.abs(a - e).max(initial=0.0) / scale
    l2_err = np.linalg.norm(a - e) / max(np.linalg.norm(e), floor * np.sqrt(e.size), 1e-30)
    assert max_err <= tol and l2_err <= tol, f"{what}: max error {max_err:.2e}, L2 error {l2_err:.2e} > {tol}"


def add64(a, b):
    return f64(a) + f64(b)


def rms_norm64(x, w, eps, residual=None):
    h = f64(x) + (0 if residual is None else f64(residual))
    y = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + eps) * f64(w)
    return y, h


def norm64(x, w=None, b=None, eps=1e-6, kind="rms", offset=0.0, residual=None, gate=None, act="silu", pos="pre"):
    """rms or layer norm over the last dim in float64; returns (y, x + residual)."""
    h = f64(x) + (0 if residual is None else f64(residual))
    if gate is not None:
        g = f64(gate)
        gated = g / (1 + np.exp(-g)) if act == "silu" else 1 / (1 + np.exp(-g))
    v = h * gated if gate is not None and pos == "pre" else h
    if kind == "layer":
        v = v - v.mean(axis=-1, keepdims=True)
    y = v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + eps)
    y = y * (offset + f64(w)) if w is not None else y
    y = y + f64(b) if b is not None else y
    y = y * gated if gate is not None and pos == "post" else y
    return y, h


def group_norm64(x, groups, w=None, b=None, eps=1e-5):
    x = f64(x)
    n, c = x.shape[:2]
    out = np.empty_like(x)
    per = c // groups
    for i in range(n):
        for g in range(groups):
            part = x[i, g * per : (g + 1) * per]
            out[i, g * per : (g + 1) * per] = (part - part.mean()) / np.sqrt(part.var() + eps)
    shape = (1, c) + (1,) * (x.ndim - 2)
    out = out * f64(w).reshape(shape) if w is not None else out
    return out + f64(b).reshape(shape) if b is not None else out


def group_norm_tolerance(x, groups, dtype: str, eps: float) -> float:
    """The dtype's tolerance, widened where float32 arithmetic alone cannot meet it. Normalizing amplifies the
    rounding of a group's mean by max|x| / sqrt(var + eps): a group of 2 nearly equal values (var << eps) turns a
    float32 mean's 6e-8 into 1e-5 or more, in torch as in any float32 kernel. 16 ulps of that, at least."""
    x = f64(x)
    parts = x.reshape(x.shape[0], groups, -1)
    cond = (np.abs(parts).max(axis=-1) / np.sqrt(parts.var(axis=-1) + eps)).max()
    return max(TOLERANCE[dtype], 16 * 2.0**-24 * cond)


def activation64(x, name):
    x = f64(x)
    if name == "relu":
        return np.maximum(x, 0)
    if name == "gelu":
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    if name == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if name == "silu":
        return x / (1 + np.exp(-x))
    if name == "sigmoid":
        return 1 / (1 + np.exp(-x))
    return np.tanh(x)


def softmax64(x, dim=-1):
    x = f64(x)
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def matmul64(a, b):
    return np.matmul(f64(a), f64(b))


def attention64(q, k, v, causal=False, scale=None, window=(-1, -1), softcap=0.0, alibi=None, with_lse=False):
    """Per (batch, head): softmax over the full score matrix, in float64. GQA by head index // group; causal and
    window (left, right; -1 unlimited) bottom-right aligned; softcap * tanh(s / softcap); alibi (heads,) or
    (batch, heads) adds -slope * |i + seqlen_k - seqlen_q - j|. Rows with no visible key are 0 with lse +inf
    (flash-attn's convention). with_lse: also the log-sum-exp (batch, heads, seqlen_q)."""
    q, k, v = f64(q), f64(k), f64(v)
    batch, seqlen_q, heads, dim = q.shape
    seqlen_k, heads_k = k.shape[1], k.shape[2]
    scale = dim**-0.5 if scale is None else scale
    out = np.zeros_like(q)
    lse = np.full((batch, heads, seqlen_q), np.inf)
    distance = np.arange(seqlen_q)[:, None] + (seqlen_k - seqlen_q) - np.arange(seqlen_k)[None, :]
    left, right = window[0], 0 if causal else window[1]
    visible = np.ones((seqlen_q, seqlen_k), dtype=bool)
    if left >= 0:
        visible &= distance <= left
    if right >= 0:
        visible &= distance >= -right
    slopes = None if alibi is None else np.broadcast_to(f64(alibi), (batch, heads))
    for b in range(batch):
        for h in range(heads):
            hk = h // (heads // heads_k)
            s = q[b, :, h] @ k[b, :, hk].T * scale
            if softcap > 0:
                s = softcap * np.tanh(s / softcap)
            if slopes is not None:
                s = s - slopes[b, h] * np.abs(distance)
            s = np.where(visible, s, -np.inf)
            row_max = s.max(axis=1, keepdims=True, initial=-np.inf)
            safe = np.where(np.isfinite(row_max), row_max, 0)
            p = np.where(visible, np.exp(s - safe), 0.0)
            total = p.sum(axis=1, keepdims=True)
            out[b, :, h] = np.where(total > 0, (p / np.where(total > 0, total, 1)) @ v[b, :, hk], 0.0)
            lse[b, h] = np.where(
                total[:, 0] > 0, safe[:, 0] + np.log(np.where(total[:, 0] > 0, total[:, 0], 1)), np.inf
            )
    return (out, lse) if with_lse else out


def assert_lse_close(actual, expected: np.ndarray, tol: float = 1e-4, what: str = "lse") -> None:
    """Log-sum-exps: +inf exactly where the reference has it (rows that see no key), else within tol (absolute,
    in log space, i.e. relative for the sum)."""
    a = np.asarray(actual, dtype=np.float64)
    empty = np.isinf(expected)
    assert np.array_equal(np.isinf(a) & (a > 0), empty), f"{what}: +inf rows differ"
    err = np.abs(a[~empty] - expected[~empty]).max(initial=0.0)
    assert err <= tol, f"{what}: max error {err:.2e} > {tol}"


def varlen_pieces(cu: np.ndarray):
    """(b, slice) per sequence of cumulative lengths cu."""
    return [(b, slice(int(cu[b]), int(cu[b + 1]))) for b in range(len(cu) - 1)]


def rotary64(x, cos, sin, positions, interleaved: bool) -> np.ndarray:
    """x (tokens..., heads, head_dim) in float64, its first 2 * cos.shape[1] columns taken as complex numbers
    (halves, or pairs when interleaved) times cos + i sin of the token's table row; rows outside the table leave
    their token as it is."""
    x, cos, sin = f64(x), f64(cos), f64(sin)
    n, half = cos.shape
    pos = np.asarray(positions, dtype=np.int64)
    inside = ((pos >= 0) & (pos < n))[..., None]
    rows = np.clip(pos, 0, max(n - 1, 0))
    turn = np.where(inside, cos[rows] + 1j * sin[rows], 1.0) if n else np.ones(pos.shape + (half,))
    re, im = (slice(0, 2 * half, 2), slice(1, 2 * half, 2)) if interleaved else (slice(0, half), slice(half, 2 * half))
    z = (x[..., re] + 1j * x[..., im]) * turn[..., None, :]
    out = x.copy()
    out[..., re], out[..., im] = z.real, z.imag
    return out


def lrpe_cosine64(x, theta, offset: int) -> np.ndarray:
    x = f64(x)
    t = offset + np.arange(x.shape[1], dtype=np.float64)
    angle = t[:, None, None] * np.broadcast_to(f64(theta).reshape((-1, f64(theta).shape[-1])), x.shape[2:])
    return np.concatenate([x * np.cos(angle), x * np.sin(angle)], axis=-1)
