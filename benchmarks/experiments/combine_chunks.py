"""The split-KV combine with CHUNK splits read per step as a 2-D tile (CHUNK 1: the shipped attn_combine's loop of
one split per step), through Triton's JIT: microseconds per call in CUDA graphs (launch gap included), head dim
128, for the split shapes of the decode benchmark (rows = batch x heads).

    python3 benchmarks/experiments/combine_chunks.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import graph_ms  # noqa: E402
from run import warm_up_gpu  # noqa: E402


@triton.jit
def combine(Opart, LsePart, Out, rows, num_splits, BLOCK_D: tl.constexpr, MAX_SPLITS: tl.constexpr,
            CHUNK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    splits = tl.arange(0, MAX_SPLITS)
    lse_s = tl.load(LsePart + splits * rows + row, mask=splits < num_splits, other=-float("inf"))
    m = tl.max(lse_s, axis=0)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    total = tl.sum(tl.exp(lse_s - m_safe), axis=0)
    lse = tl.where(total > 0, m_safe + tl.log(tl.where(total > 0, total, 1.0)), float("inf"))
    dims = tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for first in range(0, num_splits, CHUNK):
        chunk = first + tl.arange(0, CHUNK)
        ok = chunk < num_splits
        weight = tl.exp(tl.load(LsePart + chunk * rows + row, mask=ok, other=-float("inf")) - lse)
        part = tl.load(Opart + (chunk[:, None] * rows + row) * BLOCK_D + dims[None, :], mask=ok[:, None], other=0.0)
        acc += tl.sum(weight[:, None] * part, axis=0)
    tl.store(Out + row * BLOCK_D + dims, acc.to(Out.dtype.element_ty))


def main() -> None:
    warm_up_gpu(1.0)
    dim = 128
    shapes = [(512, 2), (512, 3), (32, 33), (32, 16), (128, 8), (2048, 2)]
    print("chunk/stages", *[f"r{r}s{s}" for r, s in shapes], sep="\t")
    for chunk in (1, 2, 4, 8, 16, 32):
        for stages in (1, 3):
            row = []
            for rows, splits in shapes:
                part = torch.randn(splits, rows, dim, device="cuda")
                lse = torch.randn(splits, rows, device="cuda")
                out = torch.empty(rows, dim, device="cuda", dtype=torch.bfloat16)
                options = {"BLOCK_D": dim, "MAX_SPLITS": 128, "CHUNK": chunk, "num_warps": 4, "num_stages": stages}
                ms = graph_ms(lambda: combine[(rows,)](part, lse, out, rows, splits, **options))
                row.append(f"{ms * 1e3:.2f}")
            print(f"{chunk}/{stages}", *row, sep="\t", flush=True)


if __name__ == "__main__":
    main()
