"""matmul_ws (kernels_src/_matmul_ws.py) against a float64 product, then timed against the other installed wheel.

    python3 benchmarks/experiments/matmul_ws_probe.py check          # errors of the installed wheel, every option
    python3 benchmarks/experiments/matmul_ws_probe.py time LABEL     # TFLOP/s by shape, cuBLAS beside, JSON lines

check prints, per shape and option, the largest error over max(|reference|, 1) (bf16 and fp16; the reference in
float64 from the same inputs) and the kernel of the last launch (_library.last_variant()).
time runs linear (x @ W.T) and linear with a bias, gelu_tanh and a residual on decode-to-prefill row counts
against 4096-14336-wide weights, CUDA events (median of 30 after warm-up); on squares of 4096 and 8192 those,
the epilogue's parts alone, addmm and mm (b of contiguous rows) under sustained load.
"""

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench, bench_sustained  # noqa: E402

import xopsaot  # noqa: E402
from xopsaot import _library  # noqa: E402

KERNEL_OF = {v["index"]: v["kernel"] for v in _library.manifest()["variants"]}


def reference(a, w, bias=None, act=None, residual=None, alpha=1.0, beta=1.0):
    out = alpha * (a.double() @ w.double().T)
    if bias is not None:
        out = out + beta * bias.double()
    if act == "gelu_tanh":
        out = F.gelu(out, approximate="tanh")
    elif act == "silu":
        out = F.silu(out)
    if residual is not None:
        out = out + residual.double()
    return out


def check() -> None:
    torch.manual_seed(0)
    shapes = [(65, 64, 8), (128, 256, 64), (129, 257, 72), (1000, 1000, 1000), (300, 520, 4104), (4096, 4096, 4096),
              (2048, 14336, 4096), (8192, 256, 8), (77, 33000, 136), (128, 4096, 4096), (200, 1000, 520),
              (65, 64, 4096), (256, 4096, 14336)]  # fmt: skip
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            w = (torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5).to(dtype)
            bias, res = torch.randn(n, device="cuda", dtype=dtype), torch.randn(m, n, device="cuda", dtype=dtype)
            inp = torch.randn(m, n, device="cuda", dtype=dtype)
            wt = w.T.contiguous()
            cases = {
                "plain": (lambda: xopsaot.linear(a, w), reference(a, w)),
                "bias gelu_tanh residual": (
                    lambda: xopsaot.linear(a, w, bias, "gelu_tanh", res),
                    reference(a, w, bias, "gelu_tanh", res),
                ),
                "addmm a=0.5 b=2": (
                    lambda: xopsaot.addmm(inp, a, w.T, beta=2.0, alpha=0.5),
                    reference(a, w, inp, None, None, 0.5, 2.0),
                ),
                "mm w.T": (lambda: xopsaot.mm(a, w.T), reference(a, w)),
                "mm b rows": (lambda: xopsaot.mm(a, wt), reference(a, w)),
                "linear residual only": (lambda: xopsaot.linear(a, w, residual=res), reference(a, w, residual=res)),
            }
            for name, (fn, ref) in cases.items():
                out = fn()
                kernel = KERNEL_OF.get(_library.last_variant())
                err = ((out.double() - ref).abs() / ref.abs().clamp(min=1)).max().item()
                print(
                    json.dumps({"dtype": str(dtype), "shape": [m, n, k], "case": name, "err": err, "kernel": kernel}),
                    flush=True,
                )


def time_shapes(label: str) -> None:
    def randn(*shape):
        return torch.randn(shape, device="cuda", dtype=torch.bfloat16)

    for m in (128, 256, 512, 1024, 2048, 4096, 8192):
        for k, n in ((4096, 4096), (4096, 14336), (14336, 4096)):
            a, w, b, r = randn(m, k), randn(n, k) * k**-0.5, randn(n), randn(m, n)
            flop = 2 * m * n * k
            ours, cublas = bench(lambda: xopsaot.linear(a, w), 10, 30), bench(lambda: F.linear(a, w), 10, 30)
            fused = bench(lambda: xopsaot.linear(a, w, b, "gelu_tanh", r), 10, 30)
            eager = bench(lambda: F.gelu(F.linear(a, w, b), approximate="tanh") + r, 10, 30)
            row = {"build": label, "shape": [m, k, n], "linear": flop / ours / 1e9, "cublas": flop / cublas / 1e9,
                   "fused": flop / fused / 1e9, "eager": flop / eager / 1e9}  # fmt: skip
            print(json.dumps({key: round(v, 1) if isinstance(v, float) else v for key, v in row.items()}), flush=True)
    for n in (4096, 8192):
        a, w, b, r = randn(n, n), randn(n, n) * n**-0.5, randn(n), randn(n, n)
        wt = w.T.contiguous()
        flop = 2 * n**3
        row = {"build": label, "shape": [n, n, n], "sustained": True}
        for name, fn in (
            ("linear", lambda: xopsaot.linear(a, w)),
            ("cublas", lambda: F.linear(a, w)),
            ("fused", lambda: xopsaot.linear(a, w, b, "gelu_tanh", r)),
            ("eager", lambda: F.gelu(F.linear(a, w, b), approximate="tanh") + r),
            ("bias", lambda: xopsaot.linear(a, w, b)),
            ("gelu_tanh", lambda: xopsaot.linear(a, w, activation="gelu_tanh")),
            ("residual", lambda: xopsaot.linear(a, w, residual=r)),
            ("addmm", lambda: xopsaot.addmm(b, a, w.T)),
            ("torch addmm", lambda: torch.addmm(b, a, w.T)),
            ("mm", lambda: xopsaot.mm(a, wt)),
            ("torch mm", lambda: torch.mm(a, wt)),
        ):
            ms, state = bench_sustained(fn)
            row[name] = round(flop / ms / 1e9, 1)
            row[name + " MHz"] = state.get("sm_mhz")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check()
    else:
        time_shapes(sys.argv[2])
