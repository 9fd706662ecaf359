"""What sample() returns for rows with NaN logits on each of its paths (stop 47's probe): one row alone (the chunked
kernels unfiltered, sample_cluster_kernel filtered, on sm_90), the same row first among 132 (sample_kernel), and the
NumPy path. Prints, per case and setting, each path's token and whether it points at a NaN.

    python benchmarks/experiments/sample_nan.py    (from the repository root, torch with CUDA)
"""

import json

import numpy as np
import torch

import xopsaot

SETTINGS = {"plain": (0.7, None, None), "top_k 50": (0.7, 50, None), "top_p 0.9": (0.7, None, 0.9),
            "both": (0.7, 50, 0.9), "greedy": (0.0, None, None)}  # fmt: skip


def cases(n, generator):
    base = torch.randn(n, generator=generator) * 3
    one = base.clone()
    one[n // 3] = float("nan")
    top = base.clone()
    top[int(base.argmax())] = float("nan")  # the largest logit
    some = base.clone()
    some[torch.rand(n, generator=generator) < 0.01] = float("nan")
    most = torch.full((n,), float("nan"))
    most[n - 5 :] = base[n - 5 :]
    return {"one NaN": one, "NaN at the max": top, "1% NaN": some, "all NaN but 5": most,
            "all NaN": torch.full((n,), float("nan"))}  # fmt: skip


generator = torch.Generator().manual_seed(0)
for n in (32000, 128256):
    for name, row in cases(n, generator).items():
        for setting, (t, k, p) in SETTINGS.items():
            got = {}
            for dtype in (torch.bfloat16, torch.float32):
                x = row.to(dtype)
                alone = xopsaot.sample(x[None].cuda(), t, k, p, seed=7)
                among = xopsaot.sample(torch.cat([x[None], torch.randn(131, n).to(dtype)]).cuda(), t, k, p, seed=7)
                host = x.float().numpy() if dtype == torch.float32 else x.float().numpy().astype(np.float32)
                cpu = xopsaot.sample(host[None], t, k, p, seed=7)
                tokens = [int(alone[0]), int(among[0]), int(cpu[0])]
                got[str(dtype).split(".")[1]] = [(tok, bool(torch.isnan(x[tok].float()))) for tok in tokens]
            print(json.dumps({"n": n, "case": name, "setting": setting, "alone / among 132 / numpy": got}), flush=True)
