"""Which wrong computation a decode tile performs: one query head against a contiguous cache of 128 keys (two
64-key blocks), head dim 64, bf16, unsplit, the installed wheel's choice (force a tile with run.py's
forced_variant_env), against float64 forms of attention: the right one, and ones in which a block's QK^T takes the
previous block's P in place of the queries, or PV takes the queries, or every block's PV the first block's P. The
form the output matches to bf16 rounding names the fault (stop 36 in h100-2026-11-26-experiments.md).

    python3 benchmarks/experiments/decode_tma_diagnosis.py
"""

import numpy as np
import torch

import xopsaot
from xopsaot import _library

DIM, KEYS, BLOCK = 64, 128, 64
SCALE = DIM**-0.5 * 1.4426950408889634  # base-2 units, as the kernels take them


def bf16(a: np.ndarray) -> np.ndarray:
    return torch.from_numpy(np.asarray(a, np.float32)).to(torch.bfloat16).double().numpy()


def attention(q, k, v, query_of_block, weights_of_block):
    """Online softmax over the key blocks; query_of_block(b, previous P) and weights_of_block(b, P, first P) say
    what each block's QK^T and PV take."""
    m, total, acc, previous, first = -np.inf, 0.0, np.zeros(DIM), None, None
    for b in range(KEYS // BLOCK):
        kb, vb = k[b * BLOCK : (b + 1) * BLOCK], v[b * BLOCK : (b + 1) * BLOCK]
        s = kb @ query_of_block(b, previous) * SCALE
        m_new = max(m, s.max())
        p, alpha = np.exp2(s - m_new), (np.exp2(m - m_new) if m > -np.inf else 0.0)
        total = total * alpha + p.sum()
        p = bf16(p)
        first = p if first is None else first
        acc = acc * alpha + weights_of_block(b, p, first) @ vb
        m, previous = m_new, p
    return acc / total


def main() -> None:
    torch.manual_seed(1)
    q = torch.randn(1, 1, 1, DIM, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, KEYS, 1, DIM, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lengths = torch.tensor([KEYS], dtype=torch.int32, device="cuda")
    out = xopsaot.flash_attn_with_kvcache(q, k, v, cache_seqlens=lengths, num_splits=1)
    torch.cuda.synchronize()
    print(_library.manifest()["variants"][_library.last_variant()]["label"])
    o = out.double().cpu().numpy().reshape(DIM)
    qq, kk, vv = (t.double().cpu().numpy().reshape(-1, DIM) for t in (q, k, v))
    qq = qq[0]
    forms = {
        "right": attention(qq, kk, vv, lambda b, prev: qq, lambda b, p, first: p),
        "QK^T takes the previous P": attention(qq, kk, vv, lambda b, prev: qq if b == 0 else prev, lambda b, p, f: p),
        "PV takes the queries": attention(qq, kk, vv, lambda b, prev: qq, lambda b, p, f: p if b == 0 else qq),
        "PV takes the first P": attention(qq, kk, vv, lambda b, prev: qq, lambda b, p, first: first),
    }
    for name, ref in forms.items():
        print(f"{name:>28}: max |out - form| = {np.abs(o - ref).max():.3e}")


if __name__ == "__main__":
    main()
