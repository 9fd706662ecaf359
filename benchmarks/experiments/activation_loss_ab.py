"""gelu (erf), gelu_and_mul, linear with a gelu epilogue and cross_entropy (mean and per row) through the installed
wheel, bf16, one JSON line per op and shape with torch eager's figure in the same process: TB/s (x read and the
output written once; cross entropy: the logits read once) or TFLOP/s (linear). Run once per installed build to
compare them (PYTHONPATH=/tmp/old, then /tmp/new).

    python3 benchmarks/experiments/activation_loss_ab.py LABEL
"""

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench, bench_queued, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


def line(label: str, op: str, shape, unit: str, ours: float, eager: float) -> None:
    print(json.dumps({"build": label, "op": op, "shape": list(shape), unit: round(ours, 3), "eager": round(eager, 3)}))


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "build"
    warm_up_gpu()
    for shape in ((4096, 4096), (16384, 8192)):
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        nbytes = 2 * x.numel() * x.element_size()
        tbps = lambda ms, b=nbytes: b / ms / 1e9  # noqa: E731
        line(label, "gelu", shape, "tbps", tbps(bench_queued(lambda: xopsaot.gelu(x))),
             tbps(bench_queued(lambda: F.gelu(x))))  # fmt: skip
        gated = 1.5 * x.numel() * x.element_size()
        line(label, "gelu_and_mul", shape, "tbps", gated / bench_queued(lambda: xopsaot.gelu_and_mul(x)) / 1e9,
             gated / bench_queued(lambda: F.gelu(x[:, : shape[1] // 2]) * x[:, shape[1] // 2 :]) / 1e9)  # fmt: skip
    for rows, vocab in ((4096, 4096), (8192, 32000)):
        logits = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16)
        target = torch.randint(0, vocab, (rows,), device="cuda")
        nbytes = logits.numel() * logits.element_size()
        for reduction in ("mean", "none"):
            ours = bench_queued(lambda r=reduction: xopsaot.cross_entropy(logits, target, reduction=r, validate=False))
            eager = bench_queued(lambda r=reduction: F.cross_entropy(logits, target, reduction=r))
            line(label, f"cross_entropy {reduction}", (rows, vocab), "tbps", nbytes / ours / 1e9, nbytes / eager / 1e9)
    n = 8192
    a, w, b, r = (torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in ((n, n), (n, n), (n,), (n, n)))
    flop = 2 * n**3
    ours = bench(lambda: xopsaot.linear(a, w, b, activation="gelu", residual=r))
    eager = bench(lambda: F.gelu(F.linear(a, w, b)) + r)
    line(label, "linear gelu + bias + residual", (n, n, n), "tflops", flop / ours / 1e9, flop / eager / 1e9)


if __name__ == "__main__":
    main()
