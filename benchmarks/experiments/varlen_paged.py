"""flash_attn_varlen against paged caches (block_table), on the GPU: what one launch over a paged pool costs against
the library's other forms of the same work.

    python benchmarks/experiments/varlen_paged.py

1. Prefill of 12 sequences of 100-8192 tokens (benchmarks/attention.py's varlen batch, 16 heads, head dim 128, bf16,
   causal and not): packed k/v (the Hopper prefill kernel) against the same keys in pools of pages of 16 and 128,
   shuffled, as dispatched and on the general kernel; TFLOP/s on real tokens, bench_sustained. A pool whose heads
   are not side by side (a view of every other head-dim half) keeps a call on the general kernel (attn_fwd), which
   reads the pool in place, where a Hopper call of enough query rows per key head copies the pages to packed rows
   for attn_fwd_ws (csrc/ops/attention.c's gathers()).
2. Chunked prefill, GQA 32:8: 8 chunks of 64 to 1024 queries, each at the end of 4096 keys, causal, pages of 16: as
   dispatched against the general kernel, TFLOP/s.
3. A continuous batch (GQA 32:8, head dim 128, bf16, pages of 16 shuffled): 4 prefill chunks of 512 queries at 2k-8k
   keys and 60 decode rows at 1k-8k keys in one paged varlen call, against flash_attn_with_kvcache for the decode
   rows plus one call per chunk; us per step in CUDA graphs.
4. Decode alone, 64 x 8k (pages of 16 shuffled): the paged varlen call against flash_attn_with_kvcache; TB/s of the
   keys and values read, in CUDA graphs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from attention import graph_ms, paged_view  # noqa: E402
from run import environment, timed  # noqa: E402

import xopsaot  # noqa: E402

BF16 = torch.bfloat16


def cumulative(lengths) -> torch.Tensor:
    return torch.tensor([0] + list(lengths), dtype=torch.int32).cumsum(0).to(torch.int32).cuda()


def pool_of(sequences: list[torch.Tensor], page: int, capacity: int):
    """Sequences (n_b, hk, d) laid into a (batch, capacity, hk, d) cache, then moved to a shuffled pool of pages."""
    cache = torch.zeros(len(sequences), capacity, *sequences[0].shape[1:], device="cuda", dtype=BF16)
    for b, s in enumerate(sequences):
        cache[b, : s.shape[0]] = s
    return cache, *paged_view(cache, page)


def general(pool: torch.Tensor) -> torch.Tensor:
    """pool's data in a pool of the same shape whose tokens' heads are not side by side (every other head-dim half of
    a wider one), which keeps a call on attn_fwd."""
    wide = torch.empty(*pool.shape[:-1], 2 * pool.shape[-1], device="cuda", dtype=pool.dtype)
    wide[..., : pool.shape[-1]] = pool
    return wide[..., : pool.shape[-1]]


def prefill() -> None:
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(100, 8193, (12,), generator=gen).tolist()
    heads, dim, longest = 16, 128, max(lengths)
    cu = cumulative(lengths)
    q, k, v = (torch.randn(sum(lengths), heads, dim, device="cuda", dtype=BF16) for _ in range(3))
    capacity = -(-longest // 128) * 128
    for causal in (False, True):
        flops = sum(4 * heads * n * n * dim for n in lengths) / (2 if causal else 1)
        row = {}
        timed(row, "packed", lambda: xopsaot.flash_attn_varlen(q, k, v, cu, cu, longest, longest, causal=causal,
                                                               validate=False))  # fmt: skip
        line = f"prefill causal={causal}: packed {flops / row['packed_ms'] / 1e9:.0f}"
        for page in (16, 128):
            pieces = [t.split(lengths) for t in (k, v)]
            _, kp, table = pool_of(list(pieces[0]), page, capacity)
            vp = paged_view(pool_of(list(pieces[1]), page, capacity)[0], page, table)[0]
            for name, (kk, vv) in (("", (kp, vp)), (" general", (general(kp), general(vp)))):
                timed(row, f"paged{page}{name}", lambda kk=kk, vv=vv: xopsaot.flash_attn_varlen(q, kk, vv, cu, cu,
                      longest, longest, causal=causal, block_table=table, validate=False))  # fmt: skip
                line += f", pages of {page}{name} {flops / row[f'paged{page}{name}_ms'] / 1e9:.0f}"
        print(line + " TFLOP/s (real tokens)", flush=True)


def chunked_prefill() -> None:
    heads, heads_k, dim, page, keys = 32, 8, 128, 16, 4096
    kc, vc = (torch.randn(8, keys, heads_k, dim, device="cuda", dtype=BF16) for _ in range(2))
    kp, table = paged_view(kc, page)
    vp, _ = paged_view(vc, page, table)
    ck = cumulative([keys] * 8)
    for chunk in (64, 128, 256, 512, 1024):
        q = torch.randn(8 * chunk, heads, dim, device="cuda", dtype=BF16)
        cq = cumulative([chunk] * 8)
        flops = 8 * 4 * heads * dim * chunk * (keys - chunk / 2)  # causal: each query sees keys - chunk + its own
        line = f"chunked prefill 8 x {chunk} queries at {keys} keys:"
        for name, (kk, vv) in (("as dispatched", (kp, vp)), ("general", (general(kp), general(vp)))):
            row = {}
            timed(row, "t", lambda kk=kk, vv=vv: xopsaot.flash_attn_varlen(q, kk, vv, cq, ck, chunk, keys,
                  causal=True, block_table=table, validate=False))  # fmt: skip
            line += f" {name} {flops / row['t_ms'] / 1e9:.0f}"
        print(line + " TFLOP/s", flush=True)


def continuous_batch() -> None:
    gen = torch.Generator().manual_seed(1)
    heads, heads_k, dim, page, capacity = 32, 8, 128, 16, 8192
    chunks = [512] * 4
    chunk_keys = torch.randint(2048, 8193, (4,), generator=gen).tolist()
    decode_keys = torch.randint(1024, 8193, (60,), generator=gen).tolist()
    lengths_q, lengths_k = chunks + [1] * 60, chunk_keys + decode_keys
    cq, ck = cumulative(lengths_q), cumulative(lengths_k)
    kc, vc = (torch.randn(64, capacity, heads_k, dim, device="cuda", dtype=BF16) for _ in range(2))
    kp, table = paged_view(kc, page)
    vp, _ = paged_view(vc, page, table)
    q = torch.randn(sum(lengths_q), heads, dim, device="cuda", dtype=BF16)

    def one_launch():
        return xopsaot.flash_attn_varlen(q, kp, vp, cq, ck, max(lengths_q), max(lengths_k), causal=True,
                                         block_table=table, validate=False)  # fmt: skip

    q_chunks = q[: 4 * 512].view(4, 512, heads, dim)
    q_decode = q[4 * 512 :].view(60, 1, heads, dim)
    chunk_seqlens = torch.tensor(chunk_keys, dtype=torch.int32).cuda()  # each chunk's queries are its last 512 keys
    decode_seqlens = torch.tensor(decode_keys, dtype=torch.int32).cuda()

    def separate():
        for b in range(4):
            xopsaot.flash_attn_with_kvcache(q_chunks[b : b + 1], kp, vp, cache_seqlens=chunk_seqlens[b : b + 1],
                                            block_table=table[b : b + 1], causal=True, validate=False)  # fmt: skip
        xopsaot.flash_attn_with_kvcache(q_decode, kp, vp, cache_seqlens=decode_seqlens, block_table=table[4:],
                                        validate=False)  # fmt: skip

    ours, apart = graph_ms(one_launch) * 1e3, graph_ms(separate) * 1e3
    print(f"continuous batch (4 chunks of 512 at {chunk_keys} keys, 60 decode rows at 1k-8k): one paged varlen call "
          f"{ours:.0f} us; flash_attn_with_kvcache per chunk + one decode call {apart:.0f} us", flush=True)  # fmt: skip


def decode_only() -> None:
    batch, context, heads, heads_k, dim, page = 64, 8192, 32, 8, 128, 16
    kc, vc = (torch.randn(batch, context, heads_k, dim, device="cuda", dtype=BF16) for _ in range(2))
    kp, table = paged_view(kc, page)
    vp, _ = paged_view(vc, page, table)
    q = torch.randn(batch, 1, heads, dim, device="cuda", dtype=BF16)
    seqlens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    cq, ck = cumulative([1] * batch), cumulative([context] * batch)
    nbytes = 2 * kc.numel() * kc.element_size()
    varlen = graph_ms(lambda: xopsaot.flash_attn_varlen(q.view(batch, heads, dim), kp, vp, cq, ck, 1, context,
                                                        block_table=table, validate=False))  # fmt: skip
    kvcache = graph_ms(lambda: xopsaot.flash_attn_with_kvcache(q, kp, vp, cache_seqlens=seqlens, block_table=table,
                                                               validate=False))  # fmt: skip
    print(
        f"decode {batch} x {context}, pages of {page}: paged varlen {nbytes / varlen / 1e9:.2f} TB/s, "
        f"flash_attn_with_kvcache {nbytes / kvcache / 1e9:.2f} TB/s",
        flush=True,
    )


if __name__ == "__main__":
    print(environment(), flush=True)
    prefill()
    chunked_prefill()
    continuous_batch()
    decode_only()
