"""Quick correctness probe of the prefill kernel: the largest error against SDPA (float32 math) on a few shapes,
dense and GQA, causal with seqlen_q > seqlen_k, 17 and 129 rows, both half dtypes (run it first on a new kernel;
the GPU tests are the real check).

    python3 benchmarks/experiments/prefill_probe.py
"""

import time

import torch
import torch.nn.functional as F

import xopsaot

SHAPES = [  # batch, seqlen_q, seqlen_k, heads, heads_k, head dim, causal
    (1, 128, 128, 1, 1, 128, False),
    (2, 300, 77, 8, 2, 128, True),
    (2, 1000, 1000, 4, 4, 64, True),
    (1, 4096, 4096, 2, 2, 128, False),
    (1, 17, 4000, 2, 1, 64, True),
    (3, 129, 257, 2, 2, 128, False),
]


def reference(q, k, v, causal):
    qt, kt, vt = (x.transpose(1, 2).float() for x in (q, k, v))
    if kt.shape[1] != qt.shape[1]:
        group = qt.shape[1] // kt.shape[1]
        kt, vt = kt.repeat_interleave(group, 1), vt.repeat_interleave(group, 1)
    sq, sk = qt.shape[2], kt.shape[2]
    mask = None
    if causal:  # bottom-right
        rows = torch.arange(sq, device=q.device)[:, None]
        mask = torch.arange(sk, device=q.device)[None, :] <= rows + sk - sq
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask).transpose(1, 2)
    if causal and sq > sk:
        out[:, : sq - sk] = 0  # rows that see no key (SDPA gives NaN there)
    return out


torch.manual_seed(0)
for b, sq, sk, h, hk, d, causal in SHAPES:
    for dtype in (torch.bfloat16, torch.float16):
        q = torch.randn(b, sq, h, d, device="cuda", dtype=dtype)
        k, v = (torch.randn(b, sk, hk, d, device="cuda", dtype=dtype) for _ in range(2))
        start = time.time()
        out = xopsaot.flash_attn(q, k, v, causal=causal)
        torch.cuda.synchronize()
        err = (out.float() - reference(q, k, v, causal)).abs().max().item()
        print(f"b{b} sq{sq} sk{sk} h{h}/{hk} d{d} c{int(causal)} {dtype}: err {err:.2e} ({time.time() - start:.2f}s)")
