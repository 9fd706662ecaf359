"""Decode with every head of a sequence in one program: does it read a paged cache as fast as a contiguous one?

The shipped decode runs one program per (sequence, key head, slice), so with pages of 16 tokens each program reads
16 rows of 256 bytes out of every 32 KB page, and the eight programs sharing a page drift apart. Here one program
per (sequence, slice) reads whole pages: a cache's (token, key head) rows are one contiguous matrix of head-dim
columns, so a block of TOK tokens is TOK x HK rows read at once, and the scores of all query heads against it are
masked to the pairs whose heads match (q head h sees key rows of head h // group). The matrix units do HK times the
work a decode needs, which a memory-bound step can spare.

TB/s of KV read by the slice pass alone (partials, no combine) in CUDA graphs, against the installed wheel's whole
decode step on the same caches (contiguous, and pools of pages of 16 and 128 under shuffled tables); GQA 32:8, head
dim 128, bf16. Each packed config's largest error against SDPA (partials merged in torch) in brackets.

    python3 benchmarks/experiments/decode_packed_heads.py
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HEADS, HEADS_K, DIM = 32, 8, 128


@triton.jit
def _fold(acc, m_i, l_i, q, k, v, visible, qk_scale):
    """One block into the running softmax; every row sees at least one key of every block (its own head's)."""
    s = tl.where(visible, tl.dot(q, tl.trans(k)) * qk_scale, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_i


@triton.jit
def _bases(Table, b, t0, page_size, stride_kb, stride_kp, stride_vb, stride_vp, HK: tl.constexpr, D: tl.constexpr,
           PAGED: tl.constexpr):  # fmt: skip
    """Offsets of token t0's (token, key head) rows in the keys and the values: a page's, or sequence b's."""
    if PAGED:
        page = tl.load(Table + t0 // page_size).to(tl.int64)
        within = ((t0 % page_size) * HK * D).to(tl.int64)
        return page * stride_kp + within, page * stride_vp + within
    else:
        return b.to(tl.int64) * stride_kb + t0.to(tl.int64) * HK * D, b.to(tl.int64) * stride_vb + t0.to(
            tl.int64
        ) * HK * D


@triton.jit
def decode_packed(Q, K, V, Part, Lse, Lengths, Table, stride_kb, stride_kp, stride_vb, stride_vp, stride_tb,
                  page_size, max_pages, batch, num_splits, qk_scale, HEADS: tl.constexpr, HK: tl.constexpr,
                  D: tl.constexpr, TOK: tl.constexpr, PAGED: tl.constexpr, CHUNK: tl.constexpr):  # fmt: skip
    split = tl.program_id(0)
    b = tl.program_id(1)
    GROUP: tl.constexpr = HEADS // HK
    BN: tl.constexpr = TOK * HK
    rows = tl.arange(0, HEADS)
    dims = tl.arange(0, D)
    cols = tl.arange(0, BN)
    q = tl.load(Q + (b * HEADS + rows).to(tl.int64)[:, None] * D + dims[None, :])
    same = (rows // GROUP)[:, None] == (cols % HK)[None, :]  # every row matches HK-th of the columns of a block
    k_len = tl.load(Lengths + b)
    n_blocks = tl.cdiv(k_len, TOK)
    per = tl.cdiv(n_blocks, num_splits)
    lo = split * per
    hi = tl.minimum(lo + per, n_blocks)
    full_hi = tl.maximum(tl.minimum(hi, k_len // TOK), lo)
    offs = cols.to(tl.int64)[:, None] * D + dims[None, :]
    m_i = tl.full([HEADS], -float("inf"), tl.float32)
    l_i = tl.zeros([HEADS], tl.float32)
    acc = tl.zeros([HEADS, D], tl.float32)
    Table += b * stride_tb
    if PAGED and CHUNK > 0:
        slots = tl.arange(0, CHUNK)
        blocks_per_page = page_size // TOK
        chunk_blocks = CHUNK * blocks_per_page
        for c in range(lo, full_hi, chunk_blocks):
            first = c // blocks_per_page
            pages = tl.load(Table + first + slots, mask=first + slots < max_pages, other=0).to(tl.int64)
            for blk in range(c, tl.minimum(c + chunk_blocks, full_hi)):
                t0 = blk * TOK
                slot = t0 // page_size - first
                page = tl.sum(tl.where(slots == slot, pages, 0))
                within = ((t0 % page_size) * HK * D).to(tl.int64)
                k = tl.load(K + page * stride_kp + within + offs)
                v = tl.load(V + page * stride_vp + within + offs)
                acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, same, qk_scale)
    else:
        for blk in range(lo, full_hi):
            t0 = blk * TOK
            k_base, v_base = _bases(Table, b, t0, page_size, stride_kb, stride_kp, stride_vb, stride_vp, HK, D, PAGED)
            k = tl.load(K + k_base + offs)
            v = tl.load(V + v_base + offs)
            acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, same, qk_scale)
    if full_hi < hi:  # the sequence's last, partial block
        t0 = full_hi * TOK
        live = t0 + cols // HK < k_len
        k_base, v_base = _bases(Table, b, t0, page_size, stride_kb, stride_kp, stride_vb, stride_vp, HK, D, PAGED)
        k = tl.load(K + k_base + offs, mask=live[:, None], other=0.0)
        v = tl.load(V + v_base + offs, mask=live[:, None], other=0.0)
        acc, m_i, l_i = _fold(acc, m_i, l_i, q, k, v, same & live[None, :], qk_scale)
    seen = l_i > 0
    out = tl.where(seen[:, None], acc / tl.where(seen, l_i, 1.0)[:, None], 0.0)
    part_rows = (split * batch * HEADS + b * HEADS + rows).to(tl.int64)
    tl.store(Part + part_rows[:, None] * D + dims[None, :], out)
    tl.store(Lse + part_rows, tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), -float("inf")))


def packed_call(q, k, v, lengths, table, splits, part, lse, config):
    """The slice pass over a contiguous cache (table None) or a pool of pages."""
    tok, warps, stages, chunk = config
    batch = q.shape[0]
    paged = table is not None
    page = k.shape[1] if paged else 1
    tb = table if paged else lengths
    scale = DIM**-0.5 * 1.4426950408889634
    decode_packed[(splits, batch)](
        q, k, v, part, lse, lengths, tb, k.stride(0), k.stride(0), v.stride(0), v.stride(0),
        table.stride(0) if paged else 0, page, table.shape[1] if paged else 0, batch, splits, scale,
        HEADS=HEADS, HK=HEADS_K, D=DIM, TOK=tok, PAGED=paged, CHUNK=chunk if paged else 0,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip


def merged(part, lse, like):
    """The partials merged in torch (lse in base 2)."""
    import torch

    w = torch.softmax(lse * 0.6931471805599453, dim=0)
    return (w[..., None] * part).sum(0).view_as(like)


def main() -> None:
    import torch
    from attention import decode_step, graph_ms, kvcache_tbps, paged_view
    from run import warm_up_gpu

    warm_up_gpu(1.0)
    configs = [(tok, w, s, c) for tok in (8, 16) for w in (4, 8) for s in (2, 3) for c in (0, 64)]
    shapes = [(64, 8192, (2,)), (16, 4096, (8, 16)), (1, 32768, (128,))]
    for batch, context, split_counts in shapes:
        q, kc, vc, lengths, nbytes = decode_step(batch, context)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True
        ).transpose(1, 2)
        layouts = {"contiguous": (kc, vc, None)}
        for page in (16, 128):
            kp, table = paged_view(kc, page)
            layouts[f"paged{page}"] = (kp, paged_view(vc, page, table)[0], table)
        wheel = {name: kvcache_tbps(q, k, v, lengths, nbytes, table) for name, (k, v, table) in layouts.items()}
        print(f"b{batch}x{context} wheel: " + ", ".join(f"{n} {t:.2f}" for n, t in wheel.items()), flush=True)
        for splits in split_counts:
            part = torch.empty(splits, batch * HEADS, DIM, device="cuda")
            lse = torch.empty(splits, batch * HEADS, device="cuda")
            for config in configs:
                cells = []
                for name, (k, v, table) in layouts.items():
                    if config[3] and table is None:
                        continue
                    try:
                        part.fill_(float("nan"))
                        packed_call(q, k, v, lengths, table, splits, part, lse, config)
                        err = (merged(part, lse, q).float() - ref.float()).abs().max().item()
                        ms = graph_ms(lambda: packed_call(q, k, v, lengths, table, splits, part, lse, config))
                        cells.append(f"{name} {nbytes / ms / 1e9:.2f} ({err:.0e})")
                    except Exception as e:  # a config that does not fit (shared memory)
                        cells.append(f"{name} {type(e).__name__[:12]}")
                print(f"  s{splits} tok/warps/stages/chunk {'/'.join(map(str, config))}: " + ", ".join(cells),
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
