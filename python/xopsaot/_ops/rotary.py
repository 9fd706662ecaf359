"""Rotary position embeddings: flash-attn's apply_rotary, the servers' rotary_qk (q and k rotated in place from a
position id per token, with vLLM's cos_sin_cache layout) and Xopes' lrpe_cosine. The kernels compute in float32;
the NumPy path does too (lrpe_cosine's angles in float64). Results are in x's dtype."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _checks as check
from .._arrays import View
from .._call import Call, resolve
from .._registry import register

DENSE = "(batch, seqlen, heads, headdim)"


def rotate_reference(
    x: np.ndarray, positions: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool
) -> np.ndarray:
    """x (tokens..., heads, head_dim) in float32, each token rotated by table row positions[tokens...] over its
    first 2 * cos.shape[1] columns: halves (i, i + half), or pairs (2i, 2i + 1) when interleaved. A position
    outside the table leaves its token as it is."""
    out = x.astype(np.float32)  # a copy
    n, half = cos.shape
    if half == 0 or n == 0 or out.size == 0:
        return out
    inside = ((positions >= 0) & (positions < n))[..., None]
    rows = np.clip(positions, 0, n - 1)
    c = np.where(inside, cos.astype(np.float32)[rows], np.float32(1))[..., None, :]
    s = np.where(inside, sin.astype(np.float32)[rows], np.float32(0))[..., None, :]
    if interleaved:
        first, second = out[..., 0 : 2 * half : 2], out[..., 1 : 2 * half : 2]
    else:
        first, second = out[..., :half], out[..., half : 2 * half]
    a, b = first.copy(), second.copy()
    first[...] = a * c - b * s
    second[...] = a * s + b * c
    return out


def lrpe_cosine_reference(x: np.ndarray, theta: np.ndarray, offset: int) -> np.ndarray:
    """[x cos(t theta), x sin(t theta)] along the last dim, t = offset + s for token s; angles in float64."""
    t = (offset + np.arange(x.shape[1], dtype=np.float64))[:, None, None]
    angle = t * np.broadcast_to(theta.astype(np.float64), x.shape[2:])
    x64 = x.astype(np.float64)
    return np.concatenate([x64 * np.cos(angle), x64 * np.sin(angle)], axis=-1).astype(np.float32)


def _writable(call: Call, op: str, name: str, view: View) -> None:
    """An array an op updates in place: mutable, and contiguous in its last dim on the GPU (no copy can stand in)."""
    if call.framework.name == "jax":
        raise TypeError(f"{op}: {name} is updated in place, which jax arrays (immutable) cannot be")
    if call.on_gpu and view.shape[-1] > 1 and view.strides[-1] != 1:
        raise ValueError(f"{op}: {name} is updated in place on the GPU, so its last dim must be contiguous")


def _table(call: Call, cos: View, sin: View) -> tuple[View, View]:
    """cos and sin as the kernel reads them: contiguous last dims and one row stride."""
    if cos.strides != sin.strides or (cos.shape[-1] > 1 and cos.strides[-1] != 1):
        return call.contiguous(cos), call.contiguous(sin)
    return cos, sin


@register
def apply_rotary(
    x: Any,
    cos: Any,
    sin: Any,
    interleaved: bool = False,
    inplace: bool = False,
    seqlen_offsets: Any = 0,
    cu_seqlens: Any = None,
    max_seqlen: Optional[int] = None,
    *,
    validate: bool = True,
    backend: Optional[str] = None,
) -> Any:
    """flash-attn's apply_rotary_emb: x (batch, seqlen, heads, headdim), or (total_tokens, heads, headdim) with
    cu_seqlens ((batch + 1,) int32) and max_seqlen; cos and sin (seqlen_ro, rotary_dim / 2) of x's dtype. The first
    rotary_dim columns of each head are rotated (halves, or pairs (2i, 2i + 1) when interleaved); the rest are
    copied. Token s of sequence b takes table row s + seqlen_offsets (an int, or (batch,) int32 per sequence).
    inplace=True rotates x itself and returns it. With cu_seqlens, tokens after the last sequence are copied
    unrotated. validate=True copies tensor offsets and cu_seqlens to the host to check them (skipped during graph
    capture); positions outside the table leave their token unrotated either way."""
    op = "apply_rotary"
    offset_tensor = None if check.is_integer(seqlen_offsets) else seqlen_offsets
    names = ("x", "cos", "sin", "seqlen_offsets", "cu_seqlens")
    call, (vx, vcos, vsin, voff, vcu) = resolve(op, backend, names, (x, cos, sin, offset_tensor, cu_seqlens))
    varlen = vcu is not None
    check.ndim(op, "x", vx, (3,) if varlen else (4,), "(total_tokens, heads, headdim)" if varlen else DENSE)
    check.dtype(op, "x", vx, check.FLOATS)
    for name, view in (("cos", vcos), ("sin", vsin)):
        check.ndim(op, name, view, (2,), "(seqlen_ro, rotary_dim / 2)")
    check.same_dtype(op, ("x", vx), ("cos", vcos), ("sin", vsin))
    check.same_shape(op, ("cos", vcos), ("sin", vsin))
    interleaved = check.boolean(op, "interleaved", interleaved)
    inplace = check.boolean(op, "inplace", inplace)
    seqlen_ro, half = vcos.shape
    if 2 * half > vx.shape[-1]:
        raise ValueError(
            f"{op}: cos has {half} columns, so rotary_dim is {2 * half}, more than x's headdim {vx.shape[-1]}"
        )
    if varlen:
        check.index_tensor(op, "cu_seqlens", vcu)
        if vcu.shape[0] < 1:
            raise ValueError(f"{op}: cu_seqlens must have batch + 1 >= 1 entries")
        if max_seqlen is None:
            raise TypeError(f"{op}: max_seqlen is required with cu_seqlens")
        batch, seqlen = vcu.shape[0] - 1, check.integer(op, "max_seqlen", max_seqlen, 0)
    else:
        if max_seqlen is not None:
            raise ValueError(f"{op}: max_seqlen goes with cu_seqlens, which is not given")
        batch, seqlen = vx.shape[0], vx.shape[1]
    offset = 0
    if voff is None:
        offset = int(seqlen_offsets)
        if seqlen and (offset < 0 or offset + seqlen > seqlen_ro):
            raise ValueError(
                f"{op}: tokens 0 to {seqlen - 1} at seqlen_offsets={offset} need rows {offset} to "
                f"{offset + seqlen - 1} of cos and sin, which have {seqlen_ro}"
            )
    else:
        check.index_tensor(op, "seqlen_offsets", voff, (batch,))
    if not call.on_gpu or (check.boolean(op, "validate", validate) and call.can_read_back()):
        cu = call.host(vcu) if varlen else None
        if varlen:
            check.cu_seqlens(op, "cu_seqlens", cu, vx.shape[0], seqlen, "max_seqlen")
        offsets = np.full(batch, offset, np.int64) if voff is None else call.host(voff).astype(np.int64)
        if voff is not None:
            lengths = np.diff(cu.astype(np.int64)) if varlen else np.full(batch, seqlen)
            bad = np.flatnonzero((lengths > 0) & ((offsets < 0) | (offsets + lengths > seqlen_ro)))
            if bad.size:
                b = int(bad[0])
                raise ValueError(
                    f"{op}: sequence {b} of {int(lengths[b])} tokens at seqlen_offsets[{b}]={int(offsets[b])} runs "
                    f"past the {seqlen_ro} rows of cos and sin"
                )
    if inplace:
        _writable(call, op, "x", vx)
    if not call.on_gpu:
        positions = _host_positions(vx.shape, offsets, cu)
        y = rotate_reference(call.host(vx), positions, call.host(vcos), call.host(vsin), interleaved)
        if inplace:
            call.framework.assign(vx.obj, y)
            return x
        return call.result(y, vx.dtype)
    if vx.shape[-1] > 1 and vx.strides[-1] != 1:
        vx = call.contiguous(vx)
    vcos, vsin = _table(call, vcos, vsin)
    out = vx if inplace else call.empty(vx.shape, vx.dtype)
    voff = None if voff is None else call.contiguous(voff)
    vcu = None if vcu is None else call.contiguous(vcu)
    call.launch("xopsaot_rotary", (vx, vcos, vsin, voff, vcu, out), offset, seqlen, int(interleaved))
    return x if inplace else out.obj


def _host_positions(shape: tuple, offsets: np.ndarray, cu: Optional[np.ndarray]) -> np.ndarray:
    """The table row of every token: (batch, seqlen) dense, (total_tokens,) varlen (-1 outside every sequence)."""
    if cu is None:
        return np.arange(shape[1])[None, :] + offsets[:, None]
    positions = np.full(shape[0], -1, np.int64)
    for b in range(len(cu) - 1):
        start, end = int(cu[b]), int(cu[b + 1])
        positions[start:end] = np.arange(end - start) + offsets[b]
    return positions


@register
def rotary_qk(
    positions: Any,
    q: Any,
    k: Any,
    cos_sin_cache: Any,
    is_neox: bool = True,
    *,
    validate: bool = True,
    backend: Optional[str] = None,
) -> Any:
    """Rotate q (tokens..., heads, head_size) and k (tokens..., heads_k, head_size; or None) in place in one launch,
    as inference servers do: token t by row positions[t] (int64, shape tokens...) of cos_sin_cache
    (max_position, rot_dim), whose first rot_dim / 2 columns are cos and the rest sin (vLLM's layout), of q's dtype.
    is_neox: halves (GPT-NeoX) or interleaved pairs (GPT-J). Columns past rot_dim are left as they are. Returns
    (q, k). validate=True copies positions to the host to check them (skipped during graph capture); a position
    outside the cache leaves its token unrotated either way."""
    op = "rotary_qk"
    names = ("positions", "q", "k", "cos_sin_cache")
    call, (vpos, vq, vk, vcache) = resolve(op, backend, names, (positions, q, k, cos_sin_cache))
    if vq.ndim < 2:
        raise ValueError(f"{op}: q must be (tokens..., heads, head_size), got shape {check.shape_text(vq.shape)}")
    check.dtype(op, "q", vq, check.FLOATS)
    check.same_dtype(op, ("q", vq), ("k", vk), ("cos_sin_cache", vcache))
    tokens = vq.shape[:-2]
    if vk is not None and (vk.ndim != vq.ndim or vk.shape[:-2] != tokens or vk.shape[-1] != vq.shape[-1]):
        raise ValueError(
            f"{op}: k must be (tokens..., heads_k, head_size) with q's tokens and head_size; q has shape "
            f"{check.shape_text(vq.shape)}, k {check.shape_text(vk.shape)}"
        )
    check.index_tensor(op, "positions", vpos, tokens, len(tokens), ("int64",))
    check.ndim(op, "cos_sin_cache", vcache, (2,), "(max_position, rot_dim)")
    max_position, rot_dim = vcache.shape
    if rot_dim % 2 or rot_dim > vq.shape[-1]:
        raise ValueError(f"{op}: cos_sin_cache has {rot_dim} columns; rot_dim must be even and at most head_size "
                         f"({vq.shape[-1]})")  # fmt: skip
    is_neox = check.boolean(op, "is_neox", is_neox)
    if not call.on_gpu or (check.boolean(op, "validate", validate) and call.can_read_back()):
        pos = call.host(vpos)
        bad = np.flatnonzero((pos < 0) | (pos >= max_position))
        if bad.size:
            raise ValueError(f"{op}: positions holds {int(pos.flat[bad[0]])}, outside the cache's {max_position} rows")
    for name, view in (("q", vq), ("k", vk)):
        if view is not None:
            _writable(call, op, name, view)
    if not call.on_gpu:
        pos = call.host(vpos).astype(np.int64)
        table = call.host(vcache)
        cos, sin = table[:, : rot_dim // 2], table[:, rot_dim // 2 :]
        for view in (vq, vk):
            if view is not None:
                call.framework.assign(view.obj, rotate_reference(call.host(view), pos, cos, sin, not is_neox))
        return q, k
    vpos = call.contiguous(vpos)
    if vcache.shape[-1] > 1 and vcache.strides[-1] != 1:
        vcache = call.contiguous(vcache)
    call.launch("xopsaot_rotary_qk", (vpos, vq, vk, vcache), int(is_neox))
    return q, k


@register
def lrpe_cosine(x: Any, theta: Any, offset: int = 0, *, backend: Optional[str] = None) -> Any:
    """Xopes' lrpe_cosine: x (batch, seqlen, heads, headdim) -> (batch, seqlen, heads, 2 headdim) holding
    [x cos(t theta), x sin(t theta)], t = offset + s for token s. theta is float32, (heads, headdim), (heads, 1),
    (1, headdim) or (headdim,). Angles are formed and reduced to [-pi, pi] in float64, so large t loses no
    accuracy."""
    op = "lrpe_cosine"
    call, (vx, vtheta) = resolve(op, backend, ("x", "theta"), (x, theta))
    check.ndim(op, "x", vx, (4,), DENSE)
    check.dtype(op, "x", vx, check.FLOATS)
    check.dtype(op, "theta", vtheta, ("float32",))
    offset = check.integer(op, "offset", offset)
    heads, head_dim = vx.shape[2:]
    shape = vtheta.shape if vtheta.ndim == 2 else (1,) + tuple(vtheta.shape)
    if vtheta.ndim not in (1, 2) or shape[0] not in (1, heads) or shape[1] not in (1, head_dim):
        raise ValueError(
            f"{op}: theta has shape {check.shape_text(vtheta.shape)}; it must broadcast to (heads, headdim) = "
            f"({heads}, {head_dim}): (heads, headdim), (heads, 1), (1, headdim) or (headdim,)"
        )
    if not call.on_gpu:
        y = lrpe_cosine_reference(call.host(vx), call.host(vtheta).reshape(shape), offset)
        return call.result(y, vx.dtype)
    if vx.shape[-1] > 1 and vx.strides[-1] != 1:
        vx = call.contiguous(vx)
    if vtheta.shape[-1] > 1 and vtheta.strides[-1] != 1:
        vtheta = call.contiguous(vtheta)
    if vtheta.ndim == 1:
        vtheta = vtheta._replace(shape=shape, strides=(0,) + tuple(vtheta.strides))
    out = call.empty(vx.shape[:3] + (2 * head_dim,), vx.dtype)
    call.launch("xopsaot_lrpe_cosine", (vx, vtheta, out), offset)
    return out.obj
