"""The norms on a CUDA GPU against torch eager (the unfused sequence for fused ops), torch.compile of the same
function and the measured copy bandwidth, in the same run; host time per call at one decode token.
Writes <out>/<device>-<date>-norms.{json,md}.

    python benchmarks/norms.py --out benchmarks/results [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import bench_queued as bench
from run import copy_bandwidth, environment, host_times_us, peer_preamble, results_stem, warm_up_gpu, write_results  # noqa: E402  # noqa: E402

import xopsaot  # noqa: E402

BF16 = torch.bfloat16


def add_rms(x, r, w):
    h = x + r
    return F.rms_norm(h, (x.shape[-1],), w, 1e-6), h


def add_layer(x, r, w, b):
    h = x + r
    return F.layer_norm(h, (x.shape[-1],), w, b, 1e-5), h


def gated_rms(x, g, w):
    return F.rms_norm(x * F.silu(g), (x.shape[-1],), w, 1e-6)


def cases(x, r, g, w, b):
    """name -> (ours, torch function, its arguments, passes over x's bytes, fused)."""
    n = x.shape[-1]
    return {
        "rms_norm": (lambda: xopsaot.rms_norm(x, w), lambda x, w: F.rms_norm(x, (n,), w, 1e-6), (x, w), 2, False),
        "add+rms_norm": (lambda: xopsaot.rms_norm(x, w, residual=r), add_rms, (x, r, w), 4, True),
        "layer_norm": (
            lambda: xopsaot.layer_norm(x, w, b),
            lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5),
            (x, w, b),
            2,
            False,
        ),
        "add+layer_norm": (lambda: xopsaot.layer_norm(x, w, b, residual=r), add_layer, (x, r, w, b), 4, True),
        "norm_gate (rms, silu, pre)": (lambda: xopsaot.norm_gate(x, g, w), gated_rms, (x, g, w), 3, True),
    }


def row_results(shape, copy_tbps: float, compiled: dict) -> list[dict]:
    m, n = shape
    x, r, g = (torch.randn(m, n, device="cuda", dtype=BF16) for _ in range(3))
    w, b = torch.randn(n, device="cuda", dtype=BF16), torch.randn(n, device="cuda", dtype=BF16)
    # a copy of x's size: launch and ramp-up weigh on small transfers as on the ops (a 1 GB copy hides them)
    copy = torch.empty_like(x)
    same_size_copy = 2 * x.numel() * x.element_size() / bench(lambda: copy.copy_(x)) / 1e9
    rows = []
    for name, (ours, fn, args, passes, fused) in cases(x, r, g, w, b).items():
        nbytes = passes * x.numel() * x.element_size()
        row = {"op": name, "shape": [m, n], "dtype": "bfloat16", "bytes": nbytes, "fused": fused}
        row["xopsaot_ms"] = bench(ours)
        row["torch_eager_ms"] = bench(lambda: fn(*args))
        try:  # compiled for this shape alone (dynamic=False): torch.compile's best case
            compiled_fn = compiled.setdefault((name, shape), torch.compile(fn, dynamic=False))
            row["torch_compile_ms"] = bench(lambda: compiled_fn(*args))
        except Exception as e:  # torch.compile needs Triton and a C compiler on the machine
            row["torch_compile_error"] = str(e)[-300:]
        for key in [k for k in row if k.endswith("_ms")]:
            row[key.replace("_ms", "_tbps")] = nbytes / row[key] / 1e9
        row["xopsaot_fraction_of_copy"] = row["xopsaot_tbps"] / copy_tbps
        row["xopsaot_fraction_of_copy_same_size"] = row["xopsaot_tbps"] / same_size_copy
        rows.append(row)
        print(f"{name} {shape}: {row['xopsaot_tbps']:.2f} TB/s, eager {row['torch_eager_tbps']:.2f}, "
              f"compile {row.get('torch_compile_tbps', 0):.2f}", flush=True)  # fmt: skip
    return rows


def group_norm_results(copy_tbps: float, compiled: dict) -> list[dict]:
    rows = []
    # the last: 128 groups of 512 KB, in clusters of 8 on Hopper
    for shape, groups in (((16, 256, 64, 64), 32), ((64, 512, 16, 16), 32), ((2, 512, 128, 128), 32),
                          ((4, 512, 128, 128), 32)):  # fmt: skip
        x = torch.randn(*shape, device="cuda", dtype=BF16)
        w, b = torch.randn(shape[1], device="cuda", dtype=BF16), torch.randn(shape[1], device="cuda", dtype=BF16)
        nbytes = 2 * x.numel() * x.element_size()
        row = {"op": "group_norm", "shape": list(shape), "groups": groups, "dtype": "bfloat16", "bytes": nbytes}
        row["xopsaot_ms"] = bench(lambda: xopsaot.group_norm(x, groups, w, b))
        row["torch_eager_ms"] = bench(lambda: F.group_norm(x, groups, w, b))
        try:
            fn = compiled.setdefault(("group_norm", shape), torch.compile(F.group_norm, dynamic=False))
            row["torch_compile_ms"] = bench(lambda: fn(x, groups, w, b))
        except Exception as e:
            row["torch_compile_error"] = str(e)[-300:]
        for key in [k for k in row if k.endswith("_ms")]:
            row[key.replace("_ms", "_tbps")] = nbytes / row[key] / 1e9
        row["xopsaot_fraction_of_copy"] = row["xopsaot_tbps"] / copy_tbps
        rows.append(row)
        print(f"group_norm {shape}: {row['xopsaot_tbps']:.2f} TB/s, eager {row['torch_eager_tbps']:.2f}", flush=True)
    return rows


def host_results() -> dict:
    """One decode token (1 x 4096): the host's time per call, which bounds such launches."""
    x, r = torch.randn(1, 4096, device="cuda", dtype=BF16), torch.randn(1, 4096, device="cuda", dtype=BF16)
    w = torch.randn(4096, device="cuda", dtype=BF16)
    return host_times_us(
        {
            "xopsaot.rms_norm": lambda: xopsaot.rms_norm(x, w),
            "torch rms_norm": lambda: F.rms_norm(x, (4096,), w, 1e-6),
            "xopsaot.rms_norm with residual": lambda: xopsaot.rms_norm(x, w, residual=r),
            "torch add + rms_norm": lambda: add_rms(x, r, w),
            "xopsaot.layer_norm": lambda: xopsaot.layer_norm(x, w, w),
            "torch layer_norm": lambda: F.layer_norm(x, (4096,), w, w, 1e-5),
        },
        repeats=21,
    )


def markdown(results: dict) -> str:
    lines = [
        *peer_preamble("Norms", results, "norms.py"),
        "",
        "Device time per call: bursts of ten calls queued behind a sleeping kernel, CUDA events around each burst.",
        "TB/s counts each tensor of x's size read or written once (x, residual, gate, outputs); eager runs the",
        "unfused torch sequence for the fused ops; compile is `torch.compile` of that same function.",
        "",
        "of copy: against the 1 GB copy's bandwidth, and (in brackets) against a copy of x's own size, which",
        "bears the same launch and ramp-up costs.",
        "",
        "| op | shape | xopsaot TB/s | of copy | torch eager | torch.compile | vs eager | vs compile |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        compiled = "n/a | n/a"
        if "torch_compile_ms" in r:
            compiled = f"{r['torch_compile_tbps']:.2f} | {r['torch_compile_ms'] / r['xopsaot_ms']:.2f}x"
        tbps, eager = r["xopsaot_tbps"], r["torch_eager_tbps"]
        compiled_tbps, vs_compile = compiled.split(" | ")
        lines.append(
            f"| {r['op']} | {' x '.join(map(str, r['shape']))} | {tbps:.2f} | {r['xopsaot_fraction_of_copy']:.0%}"
            + (f" ({r['xopsaot_fraction_of_copy_same_size']:.0%})" if "xopsaot_fraction_of_copy_same_size" in r else "")
            + " | "
            f"{eager:.2f} | {compiled_tbps} | {r['torch_eager_ms'] / r['xopsaot_ms']:.2f}x | {vs_compile} |"
        )
    lines += ["", "Host time per call, one decode token (1 x 4096, bf16; the GPU kept busy so launches queue):", ""]
    lines += ["| call | us per call |", "|---|---|"]
    lines += [f"| {name} | {us:.1f} |" for name, us in results["host_us"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warm_up_gpu()
    results = {"environment": environment(), "copy_tbps": copy_bandwidth()}
    compiled: dict = {}
    # 4096 x 32000: a row past the shared blocks (8192), held whole by the row norms' own block of 32768; 4096 x 50304
    # and 2048 x 65536 past it (on Hopper held in shared memory, with the fused ops' second input streamed beside x);
    # 1024 x 131072 past one multiprocessor's shared memory (on Hopper shared by a cluster of 4 programs)
    shapes = [(4096, 4096)]
    if not args.quick:
        shapes += [(16384, 8192), (4096, 32000), (4096, 50304), (2048, 65536), (1024, 131072)]
    results["rows"] = [row for shape in shapes for row in row_results(shape, results["copy_tbps"], compiled)]
    results["rows"] += group_norm_results(results["copy_tbps"], compiled)
    results["host_us"] = host_results()
    write_results(args.out, results_stem(results["environment"], "norms"), results, markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
