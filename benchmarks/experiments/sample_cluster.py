"""Device microseconds per filtered sample() call of the installed xopsaot (attention.py's graph_ms: 20 calls in a
CUDA graph), bf16 logits of 128256 tokens, by batch: run once per wheel in one device call to compare builds (stop
46: sample_kernel's one program per row against sample_cluster_kernel's cluster of 8 programs a row, whose rule a
trial wheel loosened to take every batch here).

    python benchmarks/experiments/sample_cluster.py LABEL    (from the repository root)
"""

import json
import sys

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from attention import graph_ms  # noqa: E402

import xopsaot  # noqa: E402

SETTINGS = ((0.7, 50, None), (0.7, None, 0.9), (0.7, 50, 0.9), (0.7, 1000, 0.95))
label = sys.argv[1] if len(sys.argv) > 1 else "build"
torch.manual_seed(0)
for batch in (1, 4, 8, 16, 32, 48, 66, 96, 132, 198, 264):
    logits = torch.randn(batch, 128256, device="cuda", dtype=torch.bfloat16) * 3
    row = {"build": label, "batch": batch}
    for temperature, top_k, top_p in SETTINGS:
        us = 1e3 * graph_ms(lambda: xopsaot.sample(logits, temperature, top_k, top_p, seed=1), 20)  # noqa: B023
        row[f"k={top_k} p={top_p}"] = round(us, 1)
    print(json.dumps(row), flush=True)
