"""The main job: run every op of xops-aot on real kernels and check each result against float64 NumPy.

On a machine with a supported GPU and torch with CUDA, the inputs are CUDA tensors and the ahead-of-time
compiled kernels run (no Triton, no compiler); otherwise they are NumPy arrays and the NumPy reference path
runs. `python examples/demo.py` exits non-zero if any result is off.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import xopsaot


def gpu_arrays():
    """A maker of CUDA tensors when the kernels can run here, else None."""
    if xopsaot.info()["backend"] != "cuda":
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return lambda a: torch.from_numpy(a).cuda()


def to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def attention64(q, k, v, causal):
    b, sq, h, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    out = np.zeros((b, sq, h, d))
    visible = np.arange(sk)[None] <= np.arange(sq)[:, None] + (sk - sq) if causal else np.ones((sq, sk), bool)
    for i in range(b):
        for j in range(h):
            s = np.where(visible, q[i, :, j] @ k[i, :, j // (h // hk)].T / np.sqrt(d), -np.inf)
            p = np.exp(s - s.max(1, keepdims=True))
            out[i, :, j] = p / p.sum(1, keepdims=True) @ v[i, :, j // (h // hk)]
    return out


def main() -> int:
    info = xopsaot.info()
    print(f"xops-aot {info['version']}: backend {info['backend']}" + (f" ({info['reason']})" if info["reason"] else ""))
    print(f"compiled for {', '.join(info['archs'])}: {len(info['variants'])} variants; ops: {', '.join(xopsaot.ops())}")
    for d in info["devices"]:
        print(f"  device {d['index']}: {d['name']} ({d['arch']}) {'served' if d['supported'] else d['reason']}")

    rng = np.random.default_rng()
    make = gpu_arrays()
    where = "GPU kernels" if make else "NumPy reference path"
    dtype = np.float16

    def arr(*shape, scale=1.0):
        a = (rng.standard_normal(shape) * scale).astype(dtype)
        return (make(a) if make else a), a.astype(np.float64)

    (q, q64), (k, k64), (v, v64) = arr(2, 1000, 8, 128), arr(2, 1000, 2, 128), arr(2, 1000, 2, 128)
    (x, x64), (r, r64), (w, w64) = arr(64, 4096), arr(64, 4096), arr(4096)
    (a, a64), (b, b64) = arr(512, 384), arr(384, 256)
    (wl, wl64), (bias, bias64), (res, res64) = arr(256, 384, scale=0.05), arr(256), arr(512, 256)
    labels = rng.integers(0, 4096, 64)
    target = make(labels) if make else labels
    h64 = x64 + r64
    u64 = a64 @ wl64.T + bias64
    lse64 = np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1)) + x64.max(-1)
    angles = rng.uniform(-np.pi, np.pi, (1000, 64))
    (cos, c64), (sin, s64) = [((make(t.astype(dtype)) if make else t.astype(dtype)), t.astype(dtype).astype(np.float64))
                              for t in (np.cos(angles), np.sin(angles))]  # fmt: skip
    c64, s64 = c64[None, :, None, :], s64[None, :, None, :]
    cases = [
        ("add", lambda: xopsaot.add(x, r), x64 + r64),
        (
            "rms_norm (fused residual)",
            lambda: xopsaot.rms_norm(x, w, residual=r)[0],
            h64 / np.sqrt((h64**2).mean(-1, keepdims=True) + 1e-6) * w64,
        ),
        (
            "layer_norm",
            lambda: xopsaot.layer_norm(x, w, r[0]),
            (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * w64 + r64[0],
        ),
        (
            "softmax",
            lambda: xopsaot.softmax(x),
            np.exp(x64 - x64.max(-1, keepdims=True)) / np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1, keepdims=True),
        ),
        ("matmul", lambda: xopsaot.matmul(a, b), a64 @ b64),
        (
            "linear (bias, gelu_tanh, residual)",
            lambda: xopsaot.linear(a, wl, bias, "gelu_tanh", res),
            0.5 * u64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (u64 + 0.044715 * u64**3))) + res64,
        ),
        ("cross_entropy", lambda: xopsaot.cross_entropy(x, target), np.mean(lse64 - x64[np.arange(64), labels])),
        (
            "apply_rotary",
            lambda: xopsaot.apply_rotary(q, cos, sin),
            np.concatenate([q64[..., :64] * c64 - q64[..., 64:] * s64, q64[..., :64] * s64 + q64[..., 64:] * c64], -1),
        ),
        (
            "flash_attn (causal, GQA 4)",
            lambda: xopsaot.dispatch("flash_attn", q, k, v, causal=True),
            attention64(q64, k64, v64, True),
        ),
    ]
    print(f"\nrunning on the {where}, float16 inputs:")
    failed = 0
    for name, run, expected in cases:
        out = run()  # first call: loads the kernel's module on the GPU path
        start = time.perf_counter()
        out = run()
        if make:
            import torch

            torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 1e3
        error = np.abs(to_numpy(out) - expected).max() / np.abs(expected).max()
        ok = error < 1e-2
        failed += not ok
        print(f"  {name:36s} max error {error:.1e} ({'ok' if ok else 'WRONG'}), {ms:8.3f} ms")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
