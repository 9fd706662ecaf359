"""Tune attn_fwd's compiled configs on the GPU at hand and write its entry of kernels_src/attention_tuning.json.

    python benchmarks/tune_attention.py --out attention_tuning.json   (needs Triton on the GPU machine)

For each tile width (BLOCK_D), contiguous or paged keys, and each row bucket (decode: at most 16 rows per key
head; prefill: more), candidate configs run through Triton's JIT on representative shapes, timed with CUDA events
(decode inside a CUDA graph, so launch gaps do not hide kernel time). The fastest config of each bucket goes into
the table; the build compiles exactly the table's configs and the C dispatch picks by bucket (rows = seqlen_q *
group).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from attention import graph_ms  # noqa: E402
from run import bench  # noqa: E402

from kernels_src.attention import attn_fwd  # noqa: E402

DECODE_ROWS = 16
DECODE = [(16, bn, w, s) for bn in (32, 64, 128) for w in (2, 4) for s in (2, 3, 4)]
PREFILL = [(128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (128, 64, 8, 4), (128, 32, 8, 4), (64, 64, 4, 3),
           (64, 128, 4, 3), (128, 64, 4, 3), (128, 128, 4, 2), (64, 32, 4, 3)]  # fmt: skip


def launch(q, k, v, out, group, splits, dim, causal, config, part=None, lse=None, pages=None, kernel=attn_fwd,
           **constexprs):  # fmt: skip
    """attn_fwd (or another source's `kernel`) as csrc/ops/attention.c packs it: dense k/v, or pages = (block_table,
    lengths) with k/v the page pools (num_pages, page_size, heads_k, dim); `constexprs` adds a config's tags (e.g.
    TABLE_CHUNK=256)."""
    bm, bn, warps, stages = config
    batch, seqlen_q, heads, _ = q.shape
    heads_k, seqlen_k = k.shape[2], k.shape[1]
    dummy = torch.zeros(8, dtype=torch.int32, device=q.device)
    lse = lse if lse is not None else torch.zeros(8, device=q.device)
    part = part if part is not None else lse
    rows = batch * seqlen_q * heads
    s, t = q.stride(), k.stride()
    table, lengths = pages if pages else (dummy, dummy)
    page_size, n_pages, max_pages = (k.shape[1], k.shape[0], table.shape[1]) if pages else (0, 0, 0)
    if pages:
        seqlen_k = page_size * max_pages
    grid = (-(-seqlen_q * group // bm), heads_k * splits, batch)
    kernel[grid](
        q, k, v, out, lse, part, dummy, dummy, lengths, table, lse,
        s[0], s[1], s[2], t[0], t[1], t[2], t[0], t[1], t[2], s[0], s[1], s[2],
        0, 0, 0, rows, rows * dim, table.stride(0) if pages else 0, 0,
        seqlen_q, seqlen_k, dim, heads, group, splits, 0, 0, int(bool(pages)), 0, page_size, n_pages, max_pages,
        1 << 30, 0 if causal else 1 << 30, 0, 0,
        dim**-0.5 * 1.4426950408889634, 0.0, 1.0,
        BLOCK_D=dim, PAGED=bool(pages), MODS=False, BLOCK_M=bm, BLOCK_N=bn, NATIVE_FP8=False, num_warps=warps,
        num_stages=stages, **constexprs,
    )  # fmt: skip


def best(candidates, measure) -> tuple[list, dict]:
    scores = {}
    for config in candidates:
        try:
            scores[config] = measure(config)
        except Exception as e:  # a config that does not fit this GPU (shared memory) is skipped
            print(f"  {config}: {type(e).__name__}")
    ranked = sorted(scores, key=scores.get, reverse=True)
    return list(ranked[0]), {"/".join(map(str, c)): round(scores[c], 3) for c in ranked}


def tune_decode(dim: int, paged: bool) -> tuple[list, dict]:
    """GQA 32:8 decode, batch 64 x 8k keys and the split-KV partial pass of batch 16 x 4k and batch 1 x 32k; TB/s
    of KV read. Paged: the same caches in shuffled pages of 16 and of 128 tokens."""
    heads, heads_k = 32, 8
    shapes = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for batch, context in ((64, 8192), (16, 4096), (1, 32768)):
        q = torch.randn(batch, 1, heads, dim, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(batch, context, heads_k, dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        programs = batch * heads_k
        splits = 1 if programs >= sms else min(-(-2 * sms // programs), -(-context // 256), 128)
        part = torch.empty(splits, batch * heads, dim, device="cuda")
        lse = torch.empty(splits, batch * heads, device="cuda")
        out = torch.empty_like(q)
        for page in (16, 128) if paged else (0,):
            pages = None
            if page:
                per = context // page
                table = torch.randperm(batch * per, device="cuda").to(torch.int32).view(batch, per)
                k = torch.randn(batch * per, page, heads_k, dim, device="cuda", dtype=torch.bfloat16)
                v = torch.randn_like(k)
                pages = (table, torch.full((batch,), context, dtype=torch.int32, device="cuda"))
            shapes.append((q, k, v, out, splits, part, lse, pages))

    def measure(config):
        total = 0.0
        for q, k, v, out, splits, part, lse, pages in shapes:
            call = lambda: launch(q, k, v, out, 4, splits, dim, False, config, part, lse, pages)  # noqa: E731
            total += 2 * k.numel() * 2 / graph_ms(call) / 1e9
        return total / len(shapes)

    return best(DECODE, measure)


def tune_prefill(dim: int) -> tuple[list, dict]:
    """8k tokens x 2, causal and not; mean TFLOP/s."""
    heads = 2048 // dim
    q, k, v = (torch.randn(2, 8192, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)

    def measure(config):
        rates = []
        for causal in (False, True):
            ms = bench(lambda: launch(q, k, v, out, 1, 1, dim, causal, config), reps=20)
            rates.append(4 * 2 * heads * 8192 * 8192 * dim / (2 if causal else 1) / ms / 1e9)
        return sum(rates) / 2

    return best(PREFILL, measure)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    major, minor = torch.cuda.get_device_capability()
    arch = str(10 * major + minor)
    entry = {"device": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(), "tiles": {}}
    scores = {}
    for dim in (64, 128, 256):
        prefill, prefill_scores = tune_prefill(dim)
        for paged in (False, True):
            decode, decode_scores = tune_decode(dim, paged)
            name = f"{dim}/paged" if paged else str(dim)
            entry["tiles"][name] = [
                {"max_rows": DECODE_ROWS, "config": decode},
                {"max_rows": None, "config": prefill},
            ]
            scores[name] = {"decode_tbps": decode_scores, "prefill_tflops": prefill_scores}
            print(f"BLOCK_D {name}: decode {decode}, prefill {prefill}")
    args.out.write_text(json.dumps({"arch": arch, "entry": entry, "scores": scores}, indent=1))


if __name__ == "__main__":
    main()
