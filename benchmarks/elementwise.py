"""Elementwise ops, dropout and scans on a CUDA GPU against torch eager, torch.compile of the same function and the
measured copy bandwidth, in the same run: each broadcast form the elementwise kernels distinguish (same shape, a bias
row, a column, a scalar), a bool result, division, unary math, a transposed input (the strided kernel), dropout,
cumsum along the last dim and dim 0, logcumsumexp; host time per call on one decode token. Writes
<out>/<device>-<date>-elementwise.{json,md}.

    python benchmarks/elementwise.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import (  # noqa: E402
    bench_queued,
    copy_bandwidth,
    environment,
    host_times_us,
    peer_preamble,
    peer_row,
    peer_table,
    results_stem,
    warm_up_gpu,
    write_results,
)

import xopsaot  # noqa: E402


def add_scaled(x, y):
    return torch.add(x, y, alpha=0.5)


def times_half(x):
    return torch.mul(x, 0.5)


def greater(x):
    return torch.gt(x, 0.0)


def clamp(x):
    return torch.clamp(x, -1.0, 1.0)


def dropout(x):
    return torch.nn.functional.dropout(x, 0.1)


def cumsum_rows(x):
    return torch.cumsum(x, -1)


def cumsum_columns(x):
    return torch.cumsum(x, 0)


def logcumsumexp_rows(x):
    return torch.logcumsumexp(x, -1)


def cases(m: int, n: int) -> dict:
    """name -> (ours, torch function, args, bytes moved once)."""
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    bias, column = torch.randn(n, device="cuda", dtype=torch.bfloat16), torch.randn(m, 1, device="cuda").bfloat16()
    xt = torch.randn(n, m, device="cuda", dtype=torch.bfloat16).T
    ints = torch.randint(-1000, 1000, (2, m, n), device="cuda", dtype=torch.int32)
    size = x.numel() * 2
    return {
        "add (alpha)": (lambda a, b: xopsaot.add(a, b, alpha=0.5), add_scaled, (x, y), 3 * size),
        "mul, bias row": (xopsaot.mul, torch.mul, (x, bias), 2 * size),
        "mul, column": (xopsaot.mul, torch.mul, (x, column), 2 * size),
        "mul, scalar": (lambda a: xopsaot.mul(a, 0.5), times_half, (x,), 2 * size),
        "gt scalar (bool out)": (lambda a: xopsaot.gt(a, 0.0), greater, (x,), 1.5 * size),
        "clamp": (lambda a: xopsaot.clamp(a, -1.0, 1.0), clamp, (x,), 2 * size),
        "div": (xopsaot.div, torch.div, (x, y.abs() + 0.5), 3 * size),
        "exp": (xopsaot.exp, torch.exp, (x,), 2 * size),
        "add, transposed x": (xopsaot.add, torch.add, (xt, y), 3 * size),
        "add int32": (xopsaot.add, torch.add, (ints[0], ints[1]), 3 * 2 * size),
        "dropout p=0.1": (lambda a: xopsaot.dropout(a, 0.1, seed=1), dropout, (x,), 2 * size),
        "cumsum, last dim": (lambda a: xopsaot.cumsum(a, -1), cumsum_rows, (x,), 2 * size),
        "cumsum, dim 0": (lambda a: xopsaot.cumsum(a, 0), cumsum_columns, (x,), 2 * size),
        "logcumsumexp, last dim": (lambda a: xopsaot.logcumsumexp(a, -1), logcumsumexp_rows, (x,), 2 * size),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    warm_up_gpu()
    results = {"environment": environment(), "copy_tbps": copy_bandwidth(), "rows": []}
    for m, n in ((4096, 4096), (16384, 8192)):
        for name, (ours, fn, tensors, nbytes) in cases(m, n).items():
            results["rows"].append(peer_row(name, [m, n], nbytes, ours, fn, results["copy_tbps"], tensors))
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    results["host_us_one_token"] = host_times_us(
        {
            "xopsaot add": lambda: xopsaot.add(x, y),
            "torch add": lambda: torch.add(x, y),
            "xopsaot mul scalar": lambda: xopsaot.mul(x, 0.5),
            "torch mul scalar": lambda: torch.mul(x, 0.5),
        }
    )
    results["device_us_one_token"] = {
        "xopsaot add": bench_queued(lambda: xopsaot.add(x, y)) * 1e3,
        "torch add": bench_queued(lambda: torch.add(x, y)) * 1e3,
    }
    results["pdl"] = os.environ.get("XOPSAOT_PDL") != "0"
    text = markdown(results)
    write_results(args.out, results_stem(results["environment"], "elementwise"), results, text)
    print(text)


def markdown(results: dict) -> str:
    lines = [
        *peer_preamble("Elementwise ops, dropout and scans", results, "elementwise.py"),
        "Device time per call (bursts of ten calls queued behind a sleeping kernel), bf16 unless named. TB/s counts",
        "each full-size operand read once and the output written once (a bias row, a column or a scalar adds",
        "nothing; a bool output counts one byte per element). The transposed row takes the strided kernel.",
        "",
    ]
    lines += peer_table(results["rows"])
    lines += ["", "Host time per call on one decode token (1 x 4096 bf16), median microseconds:", ""]
    lines += [f"- {name}: {us:.1f} us" for name, us in results["host_us_one_token"].items()]
    launch = "with" if results["pdl"] else "without (XOPSAOT_PDL=0)"
    lines += ["", "Device time per call on one decode token, ten calls back to back; xopsaot's kernels launched",
              f"{launch} programmatic dependent launch:", ""]  # fmt: skip
    lines += [f"- {name}: {us:.2f} us" for name, us in results["device_us_one_token"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
