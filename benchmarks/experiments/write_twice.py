"""What lrpe_cosine's access pattern (read x once, write twice its size) reaches without any math: torch.cat of x
with itself, beside a plain copy of x, a fill of the doubled output (writes only) and lrpe_cosine itself, timed as
benchmarks/rotary.py times it (bench_queued, the same x every call). TB/s count x read once and the output written
once, as rotary.py's lrpe row does.

    python3 benchmarks/experiments/write_twice.py
"""

import sys

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402

warm_up_gpu()
print(f"copy bandwidth (1 GB) {copy_bandwidth():.2f} TB/s")
for tokens, heads, dim in ((4096, 32, 128), (16384, 32, 128), (4096, 64, 64)):
    x = torch.randn(1, tokens, heads, dim, device="cuda", dtype=torch.bfloat16)
    theta = torch.rand(heads, dim, device="cuda")
    same, doubled = torch.empty_like(x), torch.empty(*x.shape[:-1], 2 * dim, device="cuda", dtype=x.dtype)
    nbytes = x.numel() * x.element_size()
    cases = {
        "copy x (1 read : 1 write)": (lambda: same.copy_(x), 2 * nbytes),
        "fill the doubled output (writes only)": (lambda: doubled.fill_(1.0), 2 * nbytes),
        "torch.cat((x, x), -1) into it (1 : 2)": (lambda: torch.cat((x, x), -1, out=doubled), 3 * nbytes),
        "lrpe_cosine (1 : 2)": (lambda: xopsaot.lrpe_cosine(x, theta), 3 * nbytes),
    }
    for name, (fn, moved) in cases.items():
        print(f"{tokens} x {heads} x {dim}: {name}: {moved / bench_queued(fn) / 1e9:.2f} TB/s", flush=True)
