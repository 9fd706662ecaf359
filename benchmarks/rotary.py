"""Rotary embeddings on a CUDA GPU against torch eager (the unfused sequence), torch.compile of the same function and
the measured copy bandwidth, in the same run; host time per decode-token call against torch eager. Writes
<out>/<device>-<date>-rotary.{json,md}.

    python benchmarks/rotary.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import (  # noqa: E402
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


def rotate_eager(x, cos, sin):
    """flash-attn's reference (non-interleaved): x * cos + rotate_half(x) * sin, cos and sin repeated to the head."""
    cos = torch.cat([cos, cos], -1)[None, :, None, :]
    sin = torch.cat([sin, sin], -1)[None, :, None, :]
    x1, x2 = x.chunk(2, -1)
    return x * cos + torch.cat([-x2, x1], -1) * sin


def rotary_qk_eager(positions, q, k, cache):
    """vLLM's native path: gather the table rows, rotate the halves, write the results back into q and k."""
    cos, sin = cache.index_select(0, positions).chunk(2, -1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    for x in (q, k):
        x1, x2 = x.chunk(2, -1)
        x.copy_(torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1))
    return q, k


def lrpe_eager(x, theta, offset: int = 0):
    """Xopes' reference: [x cos(t theta), x sin(t theta)] with the angles in float32."""
    t = offset + torch.arange(x.shape[1], device=x.device, dtype=torch.float32)
    angle = t[:, None, None] * theta.float()
    return torch.cat([x * angle.cos(), x * angle.sin()], -1).to(x.dtype)


def cases(tokens: int, heads: int, heads_k: int, head_dim: int) -> dict:
    """name -> (ours, torch function, bytes moved once each)."""
    dt = torch.bfloat16
    x = torch.randn(1, tokens, heads, head_dim, device="cuda", dtype=dt)
    angles = torch.rand(tokens, head_dim // 2, device="cuda")
    cos, sin = angles.cos().to(dt), angles.sin().to(dt)
    q = torch.randn(tokens, heads, head_dim, device="cuda", dtype=dt)
    k = torch.randn(tokens, heads_k, head_dim, device="cuda", dtype=dt)
    positions = torch.randperm(tokens, device="cuda")
    cache = torch.cat([cos, sin], -1)
    theta = torch.rand(heads, head_dim, device="cuda")
    nbytes = x.numel() * x.element_size()
    qk_bytes = 2 * (q.numel() + k.numel()) * q.element_size()
    return {
        "apply_rotary": (lambda: xopsaot.apply_rotary(x, cos, sin), lambda: rotate_eager(x, cos, sin), 2 * nbytes),
        "apply_rotary in place": (
            lambda: xopsaot.apply_rotary(x, cos, sin, inplace=True),
            lambda: x.copy_(rotate_eager(x, cos, sin)),
            2 * nbytes,
        ),
        "rotary_qk": (
            lambda: xopsaot.rotary_qk(positions, q, k, cache, validate=False),
            lambda: rotary_qk_eager(positions, q, k, cache),
            qk_bytes,
        ),
        "lrpe_cosine": (lambda: xopsaot.lrpe_cosine(x, theta), lambda: lrpe_eager(x, theta), 3 * nbytes),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    warm_up_gpu()
    results = {"environment": environment(), "copy_tbps": copy_bandwidth(), "rows": []}
    for tokens, heads, heads_k, head_dim in ((4096, 32, 8, 128), (16384, 32, 8, 128), (4096, 64, 8, 64)):
        shape = f"{tokens} tokens x {heads} (k {heads_k}) x {head_dim}"
        for name, (ours, fn, nbytes) in cases(tokens, heads, heads_k, head_dim).items():
            results["rows"].append(peer_row(name, shape, nbytes, ours, fn, results["copy_tbps"]))
    decode = cases(1, 32, 8, 128)
    results["host_us_one_token"] = host_times_us(
        {"xopsaot rotary_qk": decode["rotary_qk"][0], "torch eager rotary_qk": decode["rotary_qk"][1]}
    )
    text = markdown(results)
    write_results(args.out, results_stem(results["environment"], "rotary"), results, text)
    print(text)


def markdown(results: dict) -> str:
    lines = [
        *peer_preamble("Rotary embeddings", results, "rotary.py"),
        "Device time per call (bursts of ten calls queued behind a sleeping kernel), bf16, rotary_dim = head_dim.",
        "TB/s counts each tensor read or written once: x and the output (apply_rotary), q and k read and written",
        "(rotary_qk), x and the doubled output (lrpe_cosine). Eager runs the unfused torch sequence: flash-attn's",
        "rotate_half reference, vLLM's native rotary (gather, rotate, write back), Xopes' torch reference.",
        "",
    ]
    lines += peer_table(results["rows"])
    lines += ["", "Host time per call for one decode token (q 32 x 128, k 8 x 128), median microseconds:", ""]
    lines += [f"- {name}: {us:.1f} us" for name, us in results["host_us_one_token"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
