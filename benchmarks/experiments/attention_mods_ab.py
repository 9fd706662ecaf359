"""One side of an A/B of attention builds: the attention benchmark's decode table (CUDA graphs), then prefill on the
general kernel (head dim 256; head dim 128 soft-capped, with ALiBi), bf16, batch 2 x 8192, for the xopsaot that
imports first. Each wheel goes to its own directory and the runs alternate:

    pip install --no-deps --no-index --target /tmp/old <old wheel>; pip install ... --target /tmp/new <new wheel>
    for w in old new old new; do PYTHONPATH=/tmp/$w python3 benchmarks/experiments/attention_mods_ab.py; done
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention import BF16, decode  # noqa: E402
from run import bench, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402

PREFILL = ((256, 8, {}), (128, 16, {"softcap": 30.0}), (128, 16, {"alibi": True}))


def main() -> None:
    print(xopsaot.__file__)
    warm_up_gpu(1.0)
    decode(False)
    seqlen, batch = 8192, 2
    for dim, heads, options in PREFILL:
        q, k, v = (torch.randn(batch, seqlen, heads, dim, device="cuda", dtype=BF16) for _ in range(3))
        kwargs = {"softcap": options.get("softcap", 0.0)}
        if options.get("alibi"):
            kwargs["alibi_slopes"] = torch.rand(heads, device="cuda") * 0.1
        for causal in (False, True):
            ms = bench(lambda: xopsaot.flash_attn(q, k, v, causal=causal, **kwargs), reps=20)
            flops = 4 * batch * heads * seqlen * seqlen * dim / (2 if causal else 1)
            print(f"prefill d{dim} n{seqlen} causal={causal} {options}: {flops / ms / 1e9:.0f} TFLOP/s")


if __name__ == "__main__":
    main()
