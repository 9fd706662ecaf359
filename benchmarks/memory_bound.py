"""Activations and the softmax family on a CUDA GPU against torch eager (the unfused sequence for the gated
activations), torch.compile of the same function and the measured copy bandwidth, in the same run. Writes
<out>/<device>-<date>-memory-bound.{json,md}. (The norms have their own script, benchmarks/norms.py.)

    python benchmarks/memory_bound.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import bench_queued as bench  # noqa: E402
from run import copy_bandwidth, environment, results_stem, warm_up_gpu, write_results  # noqa: E402

import xopsaot  # noqa: E402


def silu_and_mul(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def gelu_and_mul(x):
    d = x.shape[-1] // 2
    return F.gelu(x[..., :d]) * x[..., d:]


CASES = {  # name -> (ours, torch function, passes over x's bytes: x read once plus the output written once)
    "relu": (xopsaot.relu, F.relu, 2.0),
    "gelu": (xopsaot.gelu, F.gelu, 2.0),
    "gelu tanh": (lambda x: xopsaot.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh"), 2.0),
    "silu": (xopsaot.silu, F.silu, 2.0),
    "sigmoid": (xopsaot.sigmoid, torch.sigmoid, 2.0),
    "tanh": (xopsaot.tanh, torch.tanh, 2.0),
    "silu_and_mul": (xopsaot.silu_and_mul, silu_and_mul, 1.5),
    "gelu_and_mul": (xopsaot.gelu_and_mul, gelu_and_mul, 1.5),
    "softmax": (xopsaot.softmax, lambda x: torch.softmax(x, -1), 2.0),
    "log_softmax": (xopsaot.log_softmax, lambda x: torch.log_softmax(x, -1), 2.0),
    "logsumexp": (lambda x: xopsaot.logsumexp(x, -1), lambda x: torch.logsumexp(x, -1), 1.0),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    warm_up_gpu()
    results = {"environment": environment(), "copy_tbps": copy_bandwidth(), "rows": []}
    for m, n in ((4096, 4096), (16384, 8192)):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        for name, (ours, fn, per_element) in CASES.items():
            nbytes = per_element * x.numel() * x.element_size()
            row = {"op": name, "shape": [m, n], "dtype": "bfloat16", "bytes": nbytes}
            row["xopsaot_ms"] = bench(lambda: ours(x))
            row["torch_eager_ms"] = bench(lambda: fn(x))
            try:
                compiled = torch.compile(fn, dynamic=False)
                row["torch_compile_ms"] = bench(lambda: compiled(x))
            except Exception as e:  # torch.compile needs Triton and a C compiler on the machine
                row["torch_compile_error"] = str(e)[-300:]
            for key in [k for k in row if k.endswith("_ms")]:
                row[key.replace("_ms", "_tbps")] = nbytes / row[key] / 1e9
            row["xopsaot_fraction_of_copy"] = row["xopsaot_tbps"] / results["copy_tbps"]
            results["rows"].append(row)
            print(f"{name} {m}x{n}: {row['xopsaot_tbps']:.2f} TB/s, eager {row['torch_eager_tbps']:.2f}", flush=True)
    env = results["environment"]
    lines = [
        f"# Activations and the softmax family, {env['device']}, {env['date']}",
        "",
        f"torch {env['torch']}, driver {env['driver']}, xopsaot {env['xopsaot']} (built with Triton "
        f"{env['xopsaot_built_with_triton']}), torch.compile with Triton {env['triton_on_device']}. "
        f"Copy bandwidth {results['copy_tbps']:.2f} TB/s.",
        "",
        "Command: `python benchmarks/memory_bound.py --out benchmarks/results`; raw numbers in the JSON beside it.",
        "Device time per call (bursts of ten calls queued behind a sleeping kernel); TB/s counts x read once and the",
        "output written once; eager runs torch's unfused sequence for the gated ops (slice, activation, multiply).",
        "",
        "| op | shape | xopsaot TB/s | of copy | torch eager | torch.compile | vs eager | vs compile |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        comp = f"{r['torch_compile_tbps']:.2f}" if "torch_compile_ms" in r else "n/a"
        vs_comp = f"{r['torch_compile_ms'] / r['xopsaot_ms']:.2f}x" if "torch_compile_ms" in r else "n/a"
        lines.append(
            f"| {r['op']} | {r['shape'][0]} x {r['shape'][1]} | {r['xopsaot_tbps']:.2f} | "
            f"{r['xopsaot_fraction_of_copy']:.0%} | {r['torch_eager_tbps']:.2f} | {comp} | "
            f"{r['torch_eager_ms'] / r['xopsaot_ms']:.2f}x | {vs_comp} |"
        )
    text = "\n".join(lines) + "\n"
    write_results(args.out, results_stem(env, "memory-bound"), results, text)
    print(text)


if __name__ == "__main__":
    main()
