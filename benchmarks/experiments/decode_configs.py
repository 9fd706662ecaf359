"""attn_fwd's decode configs per shape on the GPU at hand (not averaged, unlike benchmarks/tune_attention.py): TB/s
of KV read by the split-KV partial pass alone (no combine), through Triton's JIT of kernels_src, in CUDA graphs;
GQA 32:8, head dim 128, bf16.

    python3 benchmarks/experiments/decode_configs.py splits   # contiguous, the table's split counts and others
    python3 benchmarks/experiments/decode_configs.py deep     # larger key blocks, deeper pipelines, few splits
    python3 benchmarks/experiments/decode_configs.py paged    # pages of 16 and 128, shuffled tables
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import graph_ms  # noqa: E402
from run import warm_up_gpu  # noqa: E402
from tune_attention import launch  # noqa: E402

DIM, HEADS, HEADS_K = 128, 32, 8
SETS = {  # configs (BLOCK_M, BLOCK_N, warps, stages) and shapes (batch, context, split counts, page sizes)
    "splits": (
        [(16, bn, w, s) for bn in (32, 64, 128) for w in (2, 4, 8) for s in (2, 3, 4, 5)],
        [(64, 8192, (1,), (0,)), (16, 4096, (2, 3, 4), (0,)), (1, 32768, (16, 24, 32), (0,))],
    ),
    "deep": (
        [(16, 32, 2, 3)] + [(16, bn, w, s) for bn in (64, 128, 256) for w in (4, 8) for s in (2, 3, 4)],
        [(16, 4096, (1, 2), (0,)), (64, 8192, (1,), (0,)), (8, 16384, (1, 2), (0,))],
    ),
    "paged": (
        [(16, 128, 4, 2)] + [(16, bn, w, s) for bn in (32, 64, 128) for w in (2, 4, 8) for s in (2, 3, 4)],
        [(64, 8192, (1,), (16, 128)), (16, 4096, (2,), (16, 128)), (1, 32768, (33,), (16, 128))],
    ),
}


def cases(shapes):
    for batch, context, split_counts, pages in shapes:
        q = torch.randn(batch, 1, HEADS, DIM, device="cuda", dtype=torch.bfloat16)
        nbytes = 2 * batch * context * HEADS_K * DIM * 2
        for page in pages:
            if page:
                per = context // page
                table = torch.randperm(batch * per, device="cuda").to(torch.int32).view(batch, per)
                lengths = torch.full((batch,), context, dtype=torch.int32, device="cuda")
                shape, paged = (batch * per, page, HEADS_K, DIM), (table, lengths)
            else:
                shape, paged = (batch, context, HEADS_K, DIM), None
            k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            for splits in split_counts:
                part = torch.empty(splits, batch * HEADS, DIM, device="cuda")
                lse = torch.empty(splits, batch * HEADS, device="cuda")
                name = f"{f'p{page} ' if page else ''}b{batch}x{context}/s{splits}"
                yield name, (q, k, v, torch.empty_like(q), splits, part, lse, paged), nbytes


def main() -> None:
    configs, shapes = SETS[sys.argv[1] if len(sys.argv) > 1 else "splits"]
    warm_up_gpu(1.0)
    table = list(cases(shapes))
    print("config", *[name for name, _, _ in table], sep="\t")
    for config in dict.fromkeys(configs):
        row = []
        for _, (q, k, v, out, splits, part, lse, paged), nbytes in table:
            try:
                ms = graph_ms(lambda: launch(q, k, v, out, 4, splits, DIM, False, config, part, lse, paged))
                row.append(f"{nbytes / ms / 1e9:.2f}")
            except Exception as e:  # a config that does not fit (shared memory)
                row.append(type(e).__name__[:8])
        print("/".join(map(str, config)), *row, sep="\t", flush=True)


if __name__ == "__main__":
    main()
