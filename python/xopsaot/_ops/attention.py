"""The attention family in flash-attn's layouts and argument names (forward only):
flash_attn (dense), flash_attn_varlen (packed sequences), flash_attn_with_kvcache (decode / chunked prefill
against a contiguous or paged cache). The NumPy references process keys in blocks with an online softmax, so
memory stays linear in sequence length."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._arrays import View
from .._call import Call, resolve
from .._fp8 import e4m3_to_float32, float32_to_e4m3
from .._library import AttentionOptions
from .._registry import register

LAYOUT = "(batch, seqlen, heads, headdim)"
FP8_CACHE = "float8_e4m3fn"
MAX_HEAD_DIM = 256
MAX_SPLITS = 128  # attn_combine's (kernels_src/attention.py's COMBINE_MAX_SPLITS)


# ---- NumPy reference ----


def attend_reference(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scale: float,
    window: tuple[int, int],
    softcap: float = 0.0,
    slopes: Optional[np.ndarray] = None,
    block_q: int = 256,
    block_k: int = 512,
) -> tuple[np.ndarray, np.ndarray]:
    """One sequence: q (seqlen_q, heads, d), k and v (seqlen_k, heads_k, d) -> out (seqlen_q, heads, d) and lse
    (heads, seqlen_q), in float32. Query i sees key j when diag - left <= j <= diag + right (diag = i + seqlen_k -
    seqlen_q; a negative side is unlimited). A row that sees no key is 0 with lse +inf."""
    seqlen_q, heads, dim = q.shape
    seqlen_k, heads_k = k.shape[0], k.shape[1]
    group = heads // heads_k
    left, right = window
    shift = seqlen_k - seqlen_q
    # (heads_k, group, seqlen, d): query heads that share a key head sit together, no repeat of k/v
    qf = q.astype(np.float32).reshape(seqlen_q, heads_k, group, dim).transpose(1, 2, 0, 3)
    kf = k.astype(np.float32).transpose(1, 0, 2)[:, None]
    vf = v.astype(np.float32).transpose(1, 0, 2)[:, None]
    slope = None if slopes is None else slopes.astype(np.float32).reshape(heads_k, group, 1, 1)
    out = np.zeros(qf.shape, dtype=np.float32)
    lse = np.full((heads_k, group, seqlen_q), np.inf, dtype=np.float32)
    for q0 in range(0, seqlen_q, block_q):
        qb = qf[:, :, q0 : q0 + block_q]
        diag = np.arange(q0, q0 + qb.shape[2]) + shift
        k_lo = 0 if left < 0 else max(0, int(diag[0]) - left)
        k_hi = seqlen_k if right < 0 else min(seqlen_k, int(diag[-1]) + right + 1)
        m = np.full(qb.shape[:3], -np.inf, dtype=np.float32)
        total = np.zeros(qb.shape[:3], dtype=np.float32)
        acc = np.zeros(qb.shape, dtype=np.float32)
        for k0 in range(k_lo, max(k_hi, k_lo), block_k):
            k1 = min(k0 + block_k, k_hi)
            s = (qb @ np.swapaxes(kf[:, :, k0:k1], -1, -2)) * np.float32(scale)
            if softcap > 0:
                s = np.float32(softcap) * np.tanh(s / np.float32(softcap))
            distance = diag[:, None] - np.arange(k0, k1)[None, :]  # i + shift - j
            if slope is not None:
                s = s - slope * np.abs(distance).astype(np.float32)
            visible = np.ones(distance.shape, dtype=bool)
            if left >= 0:
                visible &= distance <= left
            if right >= 0:
                visible &= distance >= -right
            s = np.where(visible, s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1))
            safe = np.where(np.isneginf(m_new), 0.0, m_new)
            p = np.exp(s - safe[..., None])
            alpha = np.exp(np.where(np.isneginf(m), -np.inf, m - safe))
            total = total * alpha + p.sum(axis=-1)
            acc = acc * alpha[..., None] + p @ vf[:, :, k0:k1]
            m = m_new
        seen = total > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, :, q0 : q0 + block_q] = np.where(seen[..., None], acc / total[..., None], 0.0)
            lse[:, :, q0 : q0 + block_q] = np.where(seen, m + np.log(total), np.inf)
    return out.transpose(2, 0, 1, 3).reshape(seqlen_q, heads, dim), lse.reshape(heads, seqlen_q)


def _slopes_for(slopes: Optional[np.ndarray], b: int) -> Optional[np.ndarray]:
    if slopes is None:
        return None
    return slopes[b] if slopes.ndim == 2 else slopes


# ---- argument checks shared by the three ops ----


def _window(op: str, window_size: Any, causal: bool) -> tuple[int, int]:
    """flash-attn's window_size as (left, right) with -1 unlimited; causal sets right to 0."""
    if (
        not isinstance(window_size, (tuple, list))
        or len(window_size) != 2
        or any(isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < -1 for w in window_size)
    ):
        raise ValueError(
            f"{op}: window_size must be (left, right) with ints >= -1 (-1: unlimited), got {window_size!r}"
        )
    left, right = int(window_size[0]), int(window_size[1])
    return left, 0 if causal else right


def _scale(op: str, softmax_scale: Any, head_dim: int) -> float:
    if softmax_scale is None:
        return 1.0 / math.sqrt(head_dim) if head_dim else 1.0
    return check.finite_float(op, "softmax_scale", softmax_scale)


def _softcap(op: str, softcap: Any) -> float:
    return check.finite_float(op, "softcap", softcap, minimum=0.0)


def _head_dim(op: str, name: str, dim: int) -> None:
    if dim > MAX_HEAD_DIM:
        raise ValueError(f"{op}: {name} has headdim {dim}; supported: up to {MAX_HEAD_DIM}")


def _alibi(op: str, call: Call, alibi: Optional[View], batch: int, heads: int) -> Optional[View]:
    if alibi is None:
        return None
    if alibi.shape not in ((heads,), (batch, heads)):
        raise ValueError(
            f"{op}: alibi_slopes must have shape ({heads},) or ({batch}, {heads}), got {check.shape_text(alibi.shape)}"
        )
    check.dtype(op, "alibi_slopes", alibi, ("float32",))
    return call.contiguous(alibi) if call.on_gpu else alibi


def _kernels_take(view: View) -> bool:
    """The layout the attention kernels read: last dim contiguous, strides multiples of 8, 16-byte aligned data."""
    return view.strides[-1] == 1 and all(s % 8 == 0 for s in view.strides[:-1]) and view.ptr % 16 == 0


def _ready_for_kernels(call: Call, view: View, pad: int) -> View:
    """`view` as the kernels take it (a contiguous copy if not), the head dim zero-padded by `pad` lanes when it
    is not a multiple of 8."""
    if pad:
        return call.framework.view(call.framework.pad_last(call.contiguous(view).obj, pad))
    return view if _kernels_take(view) else call.contiguous(view)


def _launch_options(
    scale: float, window: tuple[int, int], softcap: float, num_splits: int = 0, kv_scales=(1.0, 1.0)
) -> AttentionOptions:
    return AttentionOptions(scale, 0, window[0], window[1], softcap, num_splits, *kv_scales)


def _cache_scales(op: str, cache_dtype: str, k_scale: Any, v_scale: Any) -> tuple[float, float]:
    """The per-tensor scales of an fp8 cache; a 16-bit cache takes none."""
    scales = tuple(check.finite_float(op, name, value) for name, value in (("k_scale", k_scale), ("v_scale", v_scale)))
    if min(scales) <= 0:
        raise ValueError(f"{op}: k_scale and v_scale must be > 0, got {scales[0]} and {scales[1]}")
    if cache_dtype != FP8_CACHE and scales != (1.0, 1.0):
        raise ValueError(f"{op}: k_scale and v_scale apply to an {FP8_CACHE} cache, not to {cache_dtype}")
    return scales


# ---- ops ----


def _finish(out: View, lse: Optional[View], head_dim: int, return_lse: bool):
    """The GPU path's result: out without its padding lanes, and lse when asked for."""
    result = out.obj
    if out.shape[-1] != head_dim:
        result = result[..., :head_dim]
    return (result, lse.obj) if return_lse else result


def _host_result(call: Call, out: np.ndarray, lse: np.ndarray, dtype: str, return_lse: bool):
    """The CPU path's result as the caller's type: out in the inputs' dtype, and lse (float32) when asked for."""
    result = call.result(out, dtype)
    return (result, call.result(lse, "float32")) if return_lse else result


@register
def flash_attn(
    q: Any,
    k: Any,
    v: Any,
    causal: bool = False,
    softmax_scale: Optional[float] = None,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    return_lse: bool = False,
    *,
    backend: Optional[str] = None,
) -> Any:
    """softmax(q k^T * softmax_scale) v per head, flash-attn's forward API: q (batch, seqlen_q, heads, headdim),
    k/v (batch, seqlen_k, heads_k, headdim), GQA/MQA when heads_k divides heads. causal and window_size are
    aligned bottom-right; softcap > 0 caps scores with softcap * tanh(s / softcap); alibi_slopes (heads,) or
    (batch, heads) float32. return_lse also returns the log-sum-exp (batch, heads, seqlen_q) float32.
    GPU: float16, bfloat16, head dims up to 256; CPU also float32."""
    op = "flash_attn"
    call, (vq, vk, vv, va) = resolve(op, backend, ("q", "k", "v", "alibi_slopes"), (q, k, v, alibi_slopes))
    for name, view in (("q", vq), ("k", vk), ("v", vv)):
        check.ndim(op, name, view, (4,), LAYOUT)
    batch, seqlen_q, heads, dim = vq.shape
    _check_kv(op, vq.shape, vk, vv, batch_dim=True)
    check.same_dtype(op, ("q", vq), ("k", vk), ("v", vv))
    causal = check.boolean(op, "causal", causal)
    return_lse = check.boolean(op, "return_lse", return_lse)
    window = _window(op, window_size, causal)
    scale, cap = _scale(op, softmax_scale, dim), _softcap(op, softcap)
    va = _alibi(op, call, va, batch, heads)
    if not call.on_gpu:
        check.dtype(op, "q", vq, check.FLOATS)
        hq, hk, hv = call.host(vq), call.host(vk), call.host(vv)
        slopes = None if va is None else call.host(va)
        out = np.zeros((batch, seqlen_q, heads, dim), np.float32)
        lse = np.zeros((batch, heads, seqlen_q), np.float32)
        for b in range(batch):
            out[b], lse[b] = attend_reference(hq[b], hk[b], hv[b], scale, window, cap, _slopes_for(slopes, b))
        return _host_result(call, out, lse, vq.dtype, return_lse)
    check.dtype(op, "q", vq, check.HALF_FLOATS, " on the GPU")
    pad = -dim % 8
    vq, vk, vv = (_ready_for_kernels(call, x, pad) for x in (vq, vk, vv))
    out = call.empty_like(vq)
    lse = call.empty((batch, heads, seqlen_q), "float32") if return_lse else None
    call.launch("xopsaot_flash_attn", (vq, vk, vv, out, lse, va), _launch_options(scale, window, cap))
    return _finish(out, lse, dim, return_lse)


def _check_kv(op: str, q_shape: tuple, vk: View, vv: View, batch_dim: bool, names=("k", "v")) -> None:
    """Keys and values against q: same shape, q's batch (batch_dim) and head dim (at most 256), heads dividing
    q's. `names` are what the messages call them (the cache's for flash_attn_with_kvcache)."""
    k, v = names
    if vk.shape != vv.shape:
        raise ValueError(
            f"{op}: {k} and {v} must have the same shape, got {check.shape_text(vk.shape)} and "
            f"{check.shape_text(vv.shape)}"
        )
    if batch_dim and vk.shape[0] != q_shape[0]:
        raise ValueError(f"{op}: {k} has batch {vk.shape[0]} but q has batch {q_shape[0]}")
    if vk.shape[-1] != q_shape[-1]:
        raise ValueError(f"{op}: {k} has headdim {vk.shape[-1]} but q has headdim {q_shape[-1]}")
    _head_dim(op, "q", q_shape[-1])
    heads, heads_k = q_shape[-2], vk.shape[-2]
    if heads_k == 0 or heads % heads_k:
        raise ValueError(f"{op}: the heads of q ({heads}) must be a multiple of the heads of {k} and {v} ({heads_k})")


@register
def flash_attn_varlen(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: int,
    max_seqlen_k: int,
    causal: bool = False,
    softmax_scale: Optional[float] = None,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    return_lse: bool = False,
    block_table: Any = None,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    *,
    validate: bool = True,
    backend: Optional[str] = None,
) -> Any:
    """flash_attn on packed sequences: q (total_q, heads, headdim), k/v (total_k, heads_k, headdim), sequence b
    spans cu_seqlens_*[b]:cu_seqlens_*[b + 1] (int32, (batch + 1,)); zero-length sequences are allowed.
    return_lse gives (heads, total_q). With block_table (batch, max_pages) int32, k and v are paged caches
    (num_pages, page_size, heads_k, headdim), as flash_attn_with_kvcache's, flash-attn's paged varlen form: sequence
    b's keys are its first cu_seqlens_k[b + 1] - cu_seqlens_k[b] tokens through block_table[b] (so one launch serves
    a batch mixing prefill chunks and decode steps); the caches may then be float8_e4m3fn with per-tensor k_scale and
    v_scale. On Hopper, prefill of 16-bit pools (512 query rows per key head a sequence or more on average) copies
    the pages to packed rows of a workspace for the packed prefill kernel. validate=True copies cu_seqlens (and
    block_table) to the host to check them (skipped during CUDA graph capture); validate=False trusts them, and the
    kernels never touch memory outside the caches either way."""
    op = "flash_attn_varlen"
    names = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "alibi_slopes", "block_table")
    arrays = (q, k, v, cu_seqlens_q, cu_seqlens_k, alibi_slopes, block_table)
    call, (vq, vk, vv, vcq, vck, va, vbt) = resolve(op, backend, names, arrays)
    paged = vbt is not None
    check.ndim(op, "q", vq, (3,), "(total_tokens, heads, headdim)")
    for name, view in (("k", vk), ("v", vv)):
        if paged:
            check.ndim(op, name, view, (4,), "(num_pages, page_size, heads_k, headdim) with a block_table")
        else:
            check.ndim(op, name, view, (3,), "(total_tokens, heads, headdim)")
    _check_kv(op, vq.shape, vk, vv, batch_dim=False)
    check.same_dtype(op, ("k", vk), ("v", vv))
    if not paged or vk.dtype != FP8_CACHE:
        check.same_dtype(op, ("q", vq), ("k", vk))
    kv_scales = _cache_scales(op, vk.dtype, k_scale, v_scale)
    if vcq is None or vck is None:
        raise TypeError(f"{op}: cu_seqlens_q and cu_seqlens_k are required")
    check.index_tensor(op, "cu_seqlens_q", vcq)
    check.index_tensor(op, "cu_seqlens_k", vck, (vcq.shape[0],))
    if vcq.shape[0] < 1:
        raise ValueError(f"{op}: cu_seqlens_q must have batch + 1 >= 1 entries")
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < 2**28:
            raise ValueError(f"{op}: {name} must be an int in [0, 2^28), got {value!r}")
    batch = vcq.shape[0] - 1
    total_q, heads, dim = vq.shape
    page_size = vk.shape[1] if paged else 0
    check.index_tensor(op, "block_table", vbt, dims=2)
    if paged:
        if vbt.shape[0] != batch:
            raise ValueError(f"{op}: block_table has {vbt.shape[0]} rows but cu_seqlens_q has batch {batch}")
        if max_seqlen_k > page_size * vbt.shape[1]:
            raise ValueError(
                f"{op}: max_seqlen_k={max_seqlen_k} exceeds the {vbt.shape[1]} pages of {page_size} tokens that "
                "block_table holds a sequence"
            )
    causal = check.boolean(op, "causal", causal)
    return_lse = check.boolean(op, "return_lse", return_lse)
    window = _window(op, window_size, causal)
    scale, cap = _scale(op, softmax_scale, dim), _softcap(op, softcap)
    va = _alibi(op, call, va, batch, heads)
    table = None
    if not call.on_gpu or (check.boolean(op, "validate", validate) and call.can_read_back()):
        cq, ck = call.host(vcq), call.host(vck)
        check.cu_seqlens(op, "cu_seqlens_q", cq, total_q, int(max_seqlen_q), "max_seqlen_q")
        # paged keys are found through the table, not at cu_seqlens_k's offsets: only the lengths count
        check.cu_seqlens(op, "cu_seqlens_k", ck, np.inf if paged else vk.shape[0], int(max_seqlen_k), "max_seqlen_k")
        if paged:
            table = call.host(vbt)
            lengths = np.diff(ck.astype(np.int64))
            _check_cache_indices(op, lengths, 0, page_size * vbt.shape[1], table, page_size, vk.shape[0])
    if not call.on_gpu:
        check.dtype(op, "q", vq, check.FLOATS)
        hq, hk, hv = call.host(vq), call.host(vk), call.host(vv)
        slopes = None if va is None else call.host(va)
        out = np.zeros((total_q, heads, dim), np.float32)
        lse = np.full((heads, total_q), np.inf, np.float32)
        for b in range(batch):
            qs, ks = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
            if paged:
                rows = _cache_rows(b, int(ck[b + 1] - ck[b]), page_size, table)
                keys = _from_cache(_take(hk, b, rows, True), vk.dtype, kv_scales[0])
                values = _from_cache(_take(hv, b, rows, True), vk.dtype, kv_scales[1])
            else:
                keys, values = hk[ks], hv[ks]
            out[qs], lse[:, qs] = attend_reference(hq[qs], keys, values, scale, window, cap, _slopes_for(slopes, b))
        return _host_result(call, out, lse, vq.dtype, return_lse)
    check.dtype(op, "q", vq, check.HALF_FLOATS, " on the GPU")
    pad = -dim % 8
    if paged:
        _check_cache_layout(op, dim, (("k", vk), ("v", vv)), "a pool of pages is read where it lies, never copied")
        vq = _ready_for_kernels(call, vq, 0)
        vbt = _contiguous_rows(call, vbt)
    else:
        vq, vk, vv = (_ready_for_kernels(call, x, pad) for x in (vq, vk, vv))
    vcq, vck = call.contiguous(vcq), call.contiguous(vck)
    out = call.empty_like(vq)
    lse = call.empty((heads, total_q), "float32") if return_lse else None
    call.launch(
        "xopsaot_flash_attn_varlen",
        (vq, vk, vv, vcq, vck, vbt, out, lse, va),
        int(max_seqlen_q),
        int(max_seqlen_k),
        _launch_options(scale, window, cap, 0, kv_scales),
    )
    return _finish(out, lse, dim, return_lse)


@register
def flash_attn_with_kvcache(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    k: Any = None,
    v: Any = None,
    cache_seqlens: Any = None,
    block_table: Any = None,
    causal: bool = False,
    softmax_scale: Optional[float] = None,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    num_splits: int = 0,
    return_lse: bool = False,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    *,
    validate: bool = True,
    backend: Optional[str] = None,
) -> Any:
    """Attention of q (batch, seqlen_q, heads, headdim) against a KV cache: contiguous (batch, seqlen_cache,
    heads_k, headdim), or paged (num_pages, page_size, heads_k, headdim) with block_table (batch, max_pages)
    int32. cache_seqlens (int or (batch,) int32): tokens already cached (default: the whole cache). New k/v
    (batch, seqlen_new, heads_k, headdim) are written into the cache in place at cache_seqlens[b] before
    attending. num_splits=0 chooses split-KV when batch x heads_k cannot fill the GPU (in as many slices as make one
    wave of programs, unsplit where batch x heads_k nearly fill it, when the tuning table has a config for that; an
    fp8 cache of head dim up to 128 splits until there are four programs per multiprocessor).
    The cache may be float8_e4m3fn with per-tensor scales (a cached x means x * k_scale or x * v_scale; new k/v
    are stored as k / k_scale, rounded to nearest even and saturated at +-448); q, k, v stay 16-bit.
    validate=True copies cache_seqlens and block_table to the host to check them (skipped during graph capture);
    the kernels never touch memory outside the cache either way."""
    op = "flash_attn_with_kvcache"
    if check.is_integer(cache_seqlens):
        cache_seqlens = _seqlens_like(q, int(cache_seqlens), op)
    names = ("q", "k_cache", "v_cache", "k", "v", "cache_seqlens", "block_table")
    arrays = (q, k_cache, v_cache, k, v, cache_seqlens, block_table)
    call, (vq, vkc, vvc, vk, vv, vsl, vbt) = resolve(op, backend, names, arrays)
    for name, view in (("q", vq), ("k_cache", vkc), ("v_cache", vvc), ("k", vk), ("v", vv)):
        if view is not None:
            check.ndim(op, name, view, (4,), LAYOUT)
    batch, seqlen_q, heads, dim = vq.shape
    _check_kv(op, vq.shape, vkc, vvc, batch_dim=False, names=("k_cache", "v_cache"))
    check.same_dtype(op, ("q", vq), ("k", vk), ("v", vv))
    check.same_dtype(op, ("k_cache", vkc), ("v_cache", vvc))
    if vkc.dtype != FP8_CACHE:
        check.same_dtype(op, ("q", vq), ("k_cache", vkc))
    kv_scales = _cache_scales(op, vkc.dtype, k_scale, v_scale)
    heads_k = vkc.shape[2]
    paged = vbt is not None
    check.index_tensor(op, "block_table", vbt, dims=2)
    if paged and vbt.shape[0] != batch:
        raise ValueError(f"{op}: block_table has {vbt.shape[0]} rows but q has batch {batch}")
    if not paged and vkc.shape[0] != batch:
        raise ValueError(
            f"{op}: k_cache has batch {vkc.shape[0]} but q has batch {batch} (pass block_table for a paged cache)"
        )
    page_size = vkc.shape[1] if paged else 0
    capacity = page_size * vbt.shape[1] if paged else vkc.shape[1]
    check.index_tensor(op, "cache_seqlens", vsl, (batch,))
    if (vk is None) != (vv is None):
        raise ValueError(f"{op}: pass both k and v, or neither")
    seqlen_new = 0
    if vk is not None:
        if vk.shape != vv.shape or vk.shape[0] != batch or vk.shape[2:] != (heads_k, dim):
            raise ValueError(
                f"{op}: k and v must be (batch, seqlen_new, heads_k, headdim) = ({batch}, _, {heads_k}, {dim}), got "
                f"{check.shape_text(vk.shape)} and {check.shape_text(vv.shape)}"
            )
        if vsl is None:
            raise ValueError(f"{op}: new k and v need cache_seqlens (where in the cache to write them)")
        seqlen_new = vk.shape[1]
    causal = check.boolean(op, "causal", causal)
    return_lse = check.boolean(op, "return_lse", return_lse)
    window = _window(op, window_size, causal)
    scale, cap = _scale(op, softmax_scale, dim), _softcap(op, softcap)
    if (
        isinstance(num_splits, bool)
        or not isinstance(num_splits, (int, np.integer))
        or not 0 <= num_splits <= MAX_SPLITS
    ):
        raise ValueError(f"{op}: num_splits must be an int in [0, {MAX_SPLITS}] (0: automatic), got {num_splits!r}")
    lengths = table = None
    if not call.on_gpu or (check.boolean(op, "validate", validate) and call.can_read_back()):
        lengths = call.host(vsl).astype(np.int64) if vsl is not None else np.full(batch, capacity - seqlen_new)
        table = call.host(vbt) if paged else None
        _check_cache_indices(op, lengths, seqlen_new, capacity, table, page_size, vkc.shape[0])
    if not call.on_gpu:
        check.dtype(op, "q", vq, check.FLOATS)
        hkc, hvc = call.host(vkc).copy(), call.host(vvc).copy()
        hq = call.host(vq)
        out = np.zeros((batch, seqlen_q, heads, dim), np.float32)
        lse = np.zeros((batch, heads, seqlen_q), np.float32)
        new_k = None if vk is None else _to_cache(call.host(vk), vkc.dtype, kv_scales[0])
        new_v = None if vv is None else _to_cache(call.host(vv), vkc.dtype, kv_scales[1])
        for b in range(batch):
            rows = _cache_rows(b, int(lengths[b]) + seqlen_new, page_size, table)
            if new_k is not None:
                write = rows[int(lengths[b]) :]
                _put(hkc, b, write, new_k[b], paged)
                _put(hvc, b, write, new_v[b], paged)
            keys = _from_cache(_take(hkc, b, rows, paged), vkc.dtype, kv_scales[0])
            values = _from_cache(_take(hvc, b, rows, paged), vkc.dtype, kv_scales[1])
            out[b], lse[b] = attend_reference(hq[b], keys, values, scale, window, cap)
        if new_k is not None:
            call.framework.assign(vkc.obj, hkc)
            call.framework.assign(vvc.obj, hvc)
        return _host_result(call, out, lse, vq.dtype, return_lse)
    check.dtype(op, "q", vq, check.HALF_FLOATS, " on the GPU")
    _check_cache_layout(op, dim, (("k_cache", vkc), ("v_cache", vvc)), "it is updated in place, so it cannot be copied")
    vq = _ready_for_kernels(call, vq, 0)
    if vk is not None:
        vk, vv = _ready_for_kernels(call, vk, 0), _ready_for_kernels(call, vv, 0)
    vsl = None if vsl is None else call.contiguous(vsl)
    vbt = None if vbt is None else _contiguous_rows(call, vbt)
    out = call.empty_like(vq)
    lse = call.empty((batch, heads, seqlen_q), "float32") if return_lse else None
    call.launch(
        "xopsaot_flash_attn_with_kvcache",
        (vq, vkc, vvc, vk, vv, vsl, vbt, out, lse),
        _launch_options(scale, window, cap, int(num_splits), kv_scales),
    )
    return _finish(out, lse, dim, return_lse)


def _check_cache_layout(op: str, dim: int, caches, why: str) -> None:
    """Caches the GPU kernels read where they lie (`why`: they are neither copied nor padded)."""
    if dim % 8:
        raise ValueError(f"{op}: headdim {dim} is not a multiple of 8, which a cache needs on the GPU ({why})")
    for name, view in caches:
        if not _kernels_take(view):
            raise ValueError(f"{op}: {name} must have a contiguous last dim, strides that are multiples of 8 and "
                             f"16-byte aligned data ({why})")  # fmt: skip


def _to_cache(values: np.ndarray, cache_dtype: str, scale: float) -> np.ndarray:
    """New entries as the cache stores them: fp8 bytes of values * (1 / scale) in float32, as kv_append does."""
    if cache_dtype != FP8_CACHE:
        return values
    return float32_to_e4m3(values.astype(np.float32) * (np.float32(1) / np.float32(scale)))


def _from_cache(entries: np.ndarray, cache_dtype: str, scale: float) -> np.ndarray:
    return e4m3_to_float32(entries) * np.float32(scale) if cache_dtype == FP8_CACHE else entries


def _seqlens_like(q: Any, value: int, op: str) -> Any:
    """flash-attn accepts an int cache_seqlens: the same length for every batch element."""
    from .._arrays import framework_of

    fw = framework_of(q, op, "q")
    view = fw.view(q)
    return fw.from_host(np.full(view.shape[0], value, np.int32), "int32", view.device)


def _contiguous_rows(call: Call, view: View) -> View:
    return view if view.strides[-1] == 1 or view.shape[-1] <= 1 else call.contiguous(view)


def _check_cache_indices(op, lengths, seqlen_new, capacity, table, page_size, n_pages) -> None:
    if (lengths < 0).any():
        raise ValueError(f"{op}: cache_seqlens has negative entries: {lengths[lengths < 0][:4].tolist()}")
    need = lengths + seqlen_new
    if (need > capacity).any():
        b = int(np.argmax(need > capacity))
        raise ValueError(
            f"{op}: cache_seqlens[{b}] = {int(lengths[b])} plus {seqlen_new} new tokens exceeds the cache's {capacity} "
            "tokens per sequence"
        )
    if table is not None:
        for b, used in enumerate(need):
            pages = table[b, : -(-int(used) // page_size)]
            bad = (pages < 0) | (pages >= n_pages)
            if bad.any():
                raise ValueError(
                    f"{op}: block_table[{b}] points at page {int(pages[bad][0])}, outside the cache's {n_pages} pages"
                )


def _cache_rows(b: int, length: int, page_size: int, table: Optional[np.ndarray]) -> np.ndarray:
    """Positions of sequence b's first `length` tokens: cache rows (contiguous) or (page, slot) pairs (paged)."""
    pos = np.arange(length)
    if table is None:
        return pos
    return np.stack([table[b, pos // page_size], pos % page_size], axis=1)


def _take(cache: np.ndarray, b: int, rows: np.ndarray, paged: bool) -> np.ndarray:
    return cache[rows[:, 0], rows[:, 1]] if paged else cache[b, rows]


def _put(cache: np.ndarray, b: int, rows: np.ndarray, values: np.ndarray, paged: bool) -> None:
    if paged:
        cache[rows[:, 0], rows[:, 1]] = values
    else:
        cache[b, rows] = values
