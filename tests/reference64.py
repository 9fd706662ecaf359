"""Independent float64 references, written plainly (no blocking, no online softmax), and the comparison rule."""

from __future__ import annotations

import numpy as np

# Relative tolerance by dtype of the result.
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}


def f64(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def assert_close(actual, expected: np.ndarray, dtype: str, what: str = "") -> None:
    """Max error and L2 error, both relative to the reference's scale, within the dtype's tolerance.
    NaN anywhere fails."""
    a, e = f64(actual), np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    assert np.isfinite(a).all(), f"{what}: non-finite values in the result"
    scale = max(np.abs(e).max(initial=0.0), 1e-30)
    tol = TOLERANCE[dtype]
    max_err = np.abs(a - e).max(initial=0.0) / scale
    l2_err = np.linalg.norm(a - e) / max(np.linalg.norm(e), 1e-30)
    assert max_err <= tol and l2_err <= tol, f"{what}: max error {max_err:.2e}, L2 error {l2_err:.2e} > {tol}"


def add64(a, b):
    return f64(a) + f64(b)


def rms_norm64(x, w, eps, residual=None):
    h = f64(x) + (0 if residual is None else f64(residual))
    y = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + eps) * f64(w)
    return y, h


def softmax64(x, dim=-1):
    x = f64(x)
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def matmul64(a, b):
    return np.matmul(f64(a), f64(b))


def attention64(q, k, v, causal=False, scale=None):
    """Per (batch, head): softmax(q k^T * scale) v over the full score matrix. GQA by head index // group;
    causal bottom-right aligned; rows with no visible key are 0 (flash-attn's convention)."""
    q, k, v = f64(q), f64(k), f64(v)
    batch, seqlen_q, heads, dim = q.shape
    seqlen_k, heads_k = k.shape[1], k.shape[2]
    scale = dim**-0.5 if scale is None else scale
    out = np.zeros_like(q)
    visible = np.ones((seqlen_q, seqlen_k), dtype=bool)
    if causal:
        visible = np.arange(seqlen_k)[None, :] <= np.arange(seqlen_q)[:, None] + (seqlen_k - seqlen_q)
    for b in range(batch):
        for h in range(heads):
            hk = h // (heads // heads_k)
            s = q[b, :, h] @ k[b, :, hk].T * scale
            s = np.where(visible, s, -np.inf)
            row_max = s.max(axis=1, keepdims=True)
            p = np.where(visible, np.exp(s - np.where(np.isfinite(row_max), row_max, 0)), 0.0)
            total = p.sum(axis=1, keepdims=True)
            out[b, :, h] = np.where(total > 0, (p / np.where(total > 0, total, 1)) @ v[b, :, hk], 0.0)
    return out
