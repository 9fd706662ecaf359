"""Attention in flash-attn's layout: q (batch, seqlen_q, heads, headdim), k/v (batch, seqlen_k, heads_k, headdim)."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._arrays import View
from .._call import resolve
from .._registry import register

LAYOUT = "(batch, seqlen, heads, headdim)"


def flash_attn_reference(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    causal: bool,
    softmax_scale: float,
    block_q: int = 512,
    block_k: int = 512,
) -> np.ndarray:
    """Attention in float32 with an online softmax over key blocks, so memory stays linear in sequence length.
    causal is bottom-right aligned (query i sees keys j <= i + seqlen_k - seqlen_q); a row that sees no key
    is 0."""
    batch, seqlen_q, heads, dim = q.shape
    seqlen_k, heads_k = k.shape[1], k.shape[2]
    group = heads // heads_k
    # (batch, heads_k, group, seqlen, dim): query heads that share a key head sit together, no repeat of k/v
    qf = q.astype(np.float32).reshape(batch, seqlen_q, heads_k, group, dim).transpose(0, 2, 3, 1, 4)
    kf = k.astype(np.float32).transpose(0, 2, 1, 3)[:, :, None]
    vf = v.astype(np.float32).transpose(0, 2, 1, 3)[:, :, None]
    out = np.zeros(qf.shape, dtype=np.float32)
    shift = seqlen_k - seqlen_q
    scale = np.float32(softmax_scale)
    for q0 in range(0, seqlen_q, block_q):
        qb = qf[:, :, :, q0 : q0 + block_q] * scale
        rows = np.arange(q0, q0 + qb.shape[3])
        m = np.full(qb.shape[:4], -np.inf, dtype=np.float32)
        total = np.zeros(qb.shape[:4], dtype=np.float32)
        acc = np.zeros(qb.shape, dtype=np.float32)
        stop = min(seqlen_k, rows[-1] + shift + 1) if causal else seqlen_k
        for k0 in range(0, max(stop, 0), block_k):
            s = qb @ np.swapaxes(kf[:, :, :, k0 : k0 + block_k], -1, -2)
            if causal:
                cols = np.arange(k0, k0 + s.shape[-1])
                s = np.where(cols[None, :] <= rows[:, None] + shift, s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1))
            safe = np.where(np.isneginf(m_new), 0.0, m_new)
            p = np.exp(s - safe[..., None])
            alpha = np.exp(np.where(np.isneginf(m), -np.inf, m - safe))
            total = total * alpha + p.sum(axis=-1)
            acc = acc * alpha[..., None] + p @ vf[:, :, :, k0 : k0 + block_k]
            m = m_new
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, :, :, q0 : q0 + block_q] = np.where(total[..., None] > 0, acc / total[..., None], 0.0)
    return out.transpose(0, 3, 1, 2, 4).reshape(batch, seqlen_q, heads, dim)


def check_shapes(op: str, vq: View, vk: View, vv: View) -> None:
    for name, view in (("q", vq), ("k", vk), ("v", vv)):
        check.ndim(op, name, view, (4,), LAYOUT)
    batch, _, heads, dim = vq.shape
    if vk.shape != vv.shape:
        raise ValueError(
            f"{op}: k and v must have the same shape, got {check.shape_text(vk.shape)} and {check.shape_text(vv.shape)}"
        )
    if vk.shape[0] != batch:
        raise ValueError(f"{op}: k has batch {vk.shape[0]} but q has batch {batch}")
    if vk.shape[3] != dim:
        raise ValueError(f"{op}: k has headdim {vk.shape[3]} but q has headdim {dim}")
    heads_k = vk.shape[2]
    if heads_k == 0 or heads % heads_k:
        raise ValueError(f"{op}: the heads of q ({heads}) must be a multiple of the heads of k and v ({heads_k})")


@register
def flash_attn(
    q: Any,
    k: Any,
    v: Any,
    causal: bool = False,
    softmax_scale: Optional[float] = None,
    *,
    backend: Optional[str] = None,
) -> Any:
    """softmax(q k^T * softmax_scale) v per head, flash-attn's forward API. GQA/MQA when k/v have fewer heads;
    causal is aligned bottom-right when seqlen_q != seqlen_k. GPU: float16, bfloat16; CPU also float32."""
    op = "flash_attn"
    call, (vq, vk, vv) = resolve(op, backend, ("q", "k", "v"), (q, k, v))
    check_shapes(op, vq, vk, vv)
    check.same_dtype(op, ("q", vq), ("k", vk), ("v", vv))
    causal = check.boolean(op, "causal", causal)
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(vq.shape[3]) if vq.shape[3] else 1.0
    scale = check.finite_float(op, "softmax_scale", softmax_scale)
    if not call.on_gpu:
        check.dtype(op, "q", vq, check.FLOATS)
        out = flash_attn_reference(call.host(vq), call.host(vk), call.host(vv), causal, scale)
        return call.result(out, vq.dtype)
    check.dtype(op, "q", vq, check.HALF_FLOATS, " on the GPU")
    vq, vk, vv = (x if x.strides[-1] == 1 or x.shape[-1] <= 1 else call.contiguous(x) for x in (vq, vk, vv))
    out = call.empty_like(vq)
    call.launch("xopsaot_flash_attn", (vq, vk, vv, out), scale, int(causal))
    return out.obj
