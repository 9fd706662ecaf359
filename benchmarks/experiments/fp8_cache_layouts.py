"""flash_attn_with_kvcache with a float8_e4m3fn cache, contiguous and paged (pages of 16, one permuted table),
against the same cache in bf16 (contiguous and paged): decode (GQA 32:8, head dim 128) at the attention
benchmark's three shapes and one chunked-prefill step (512 queries against 8k cached keys). Milliseconds per call
inside CUDA graphs, one JSON line per shape. Run once per installed build to compare them (e.g.
PYTHONPATH=/tmp/old, then /tmp/new).

    python benchmarks/experiments/fp8_cache_layouts.py LABEL
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import graph_ms, paged_view  # noqa: E402
from run import warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "build"
    warm_up_gpu()
    heads, heads_k, dim = 32, 8, 128
    for batch, context, seqlen_q in ((64, 8192, 1), (16, 4096, 1), (1, 32768, 1), (4, 8192, 512)):
        torch.manual_seed(0)
        q = torch.randn(batch, seqlen_q, heads, dim, device="cuda", dtype=torch.bfloat16)
        kc, vc = (torch.randn(batch, context, heads_k, dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        k8, v8 = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
        kbp, table = paged_view(kc, 16)
        vbp, _ = paged_view(vc, 16, table)
        # the same pages in fp8, copied as bytes
        kp, vp = (paged_view(c.view(torch.uint8), 16, table)[0].view(torch.float8_e4m3fn) for c in (k8, v8))
        lengths = torch.full((batch,), context, dtype=torch.int32, device="cuda")
        causal = seqlen_q > 1
        calls = {
            "bf16": lambda: xopsaot.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lengths, causal=causal,
                                                            validate=False),
            "fp8": lambda: xopsaot.flash_attn_with_kvcache(q, k8, v8, cache_seqlens=lengths, causal=causal,
                                                           validate=False),
            "bf16_paged16": lambda: xopsaot.flash_attn_with_kvcache(q, kbp, vbp, cache_seqlens=lengths,
                                                                    block_table=table, causal=causal, validate=False),
            "fp8_paged16": lambda: xopsaot.flash_attn_with_kvcache(q, kp, vp, cache_seqlens=lengths, block_table=table,
                                                                   causal=causal, validate=False),
        }  # fmt: skip
        ref = calls["fp8"]().float()
        row = {"label": label, "batch": batch, "context": context, "seqlen_q": seqlen_q}
        row["fp8_vs_paged_max_diff"] = float((calls["fp8_paged16"]().float() - ref).abs().max())
        for name, fn in calls.items():
            row[f"{name}_graph_ms"] = round(graph_ms(fn), 5)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
