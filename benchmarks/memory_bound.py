"""Activations and the softmax family on a CUDA GPU against torch eager (the unfused sequence for the gated
activations), torch.compile of the same function and the measured copy bandwidth, in the same run, then the softmax
family on long rows (16384 columns to vocabulary sizes). Writes <out>/<device>-<date>-memory-bound.{json,md}. (The
norms have their own script, benchmarks/norms.py.)

    python benchmarks/memory_bound.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import (  # noqa: E402
    copy_bandwidth,
    environment,
    peer_preamble,
    peer_row,
    peer_table,
    results_stem,
    warm_up_gpu,
    write_results,
)

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
SOFTMAX_FAMILY = ("softmax", "log_softmax", "logsumexp")
# long rows: softmax_kernel's looping rows, and on Hopper softmax_held_kernel's (at least 4 rows per multiprocessor;
# 16-bit rows past 114688 columns from 16) and softmax_cluster_kernel's (rows past 114688 columns, to 262144)
LONG_ROWS = ((4096, 16384), (4096, 32000), (4096, 50304), (2048, 65536), (1024, 100000), (1024, 128256), (4096, 128256))
LONG_ROWS += ((1024, 256000),)


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
            results["rows"].append(peer_row(name, [m, n], nbytes, ours, fn, results["copy_tbps"], (x,)))
    results["long_rows"] = []
    for m, n in LONG_ROWS:
        torch._dynamo.reset()  # a compiled function per shape, clear of torch's recompile limit
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        for name in SOFTMAX_FAMILY:
            ours, fn, per_element = CASES[name]
            nbytes = per_element * x.numel() * x.element_size()
            results["long_rows"].append(peer_row(name, [m, n], nbytes, ours, fn, results["copy_tbps"], (x,)))
    env = results["environment"]
    lines = [
        *peer_preamble("Activations and the softmax family", results, "memory_bound.py"),
        "Device time per call (bursts of ten calls queued behind a sleeping kernel); TB/s counts x read once and the",
        "output written once; eager runs torch's unfused sequence for the gated ops (slice, activation, multiply).",
        "",
    ]
    lines += peer_table(results["rows"])
    lines += [
        "",
        "The softmax family on long rows (bf16). On Hopper, softmax and log_softmax over at least 4 rows per",
        "multiprocessor hold each row in shared memory and read it once: rows of 8193-114688 columns a program per",
        "row (to 131072 from 16 rows per multiprocessor), longer rows a cluster of 4 or 8 programs per row (to 131072",
        "from 4 rows per multiprocessor, 196608-262144 from one). Other long rows are read twice, the second time",
        "partly from L2.",
        "",
        *peer_table(results["long_rows"]),
    ]
    text = "\n".join(lines) + "\n"
    write_results(args.out, results_stem(env, "memory-bound"), results, text)
    print(text)


if __name__ == "__main__":
    main()
