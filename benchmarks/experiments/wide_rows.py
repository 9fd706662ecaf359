"""Rows of 16k-32k elements held whole in registers (one read of x) against the looping config (the row read twice
or three times), for the row norms and the softmax family, through Triton's JIT as the wheel launches them (the
run-time scalars not specialized); TB/s counting each full-size tensor read or written once, in one run with torch
eager, torch.compile and the copy bandwidth. Each variant's output is checked against float64.

    python3 benchmarks/experiments/wide_rows.py [loops [more]]

`loops`: the softmax family only, on rows of 16k-256k, with looping configs of other blocks and warps; `loops more`:
the same on 256-4096 rows of 64k-128k.
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.norm import row_norm_kernel  # noqa: E402
from kernels_src.softmax import softmax_kernel  # noqa: E402

NORM_SCALARS = ["eps", "w_offset", "layer", "has_weight", "has_bias", "gate_silu", "gate_pre"]
NORM = triton.jit(row_norm_kernel.fn, do_not_specialize=NORM_SCALARS)
SOFTMAX = triton.jit(softmax_kernel.fn, do_not_specialize=["mode"])
# (BLOCK_N, num_warps, LOOP): the shipped looping config first
VARIANTS = [(4096, 8, True), (16384, 16, False), (16384, 32, False), (32768, 16, False), (32768, 32, False)]
SHAPES = [(4096, 12288), (4096, 16384), (4096, 32000), (2048, 32768)]
LOOP_VARIANTS = [(4096, 8, True), (4096, 16, True), (8192, 8, True), (8192, 16, True), (16384, 16, True),
                 (16384, 32, True), (32768, 32, False)]  # fmt: skip
LOOP_SHAPES = [(4096, 16384), (4096, 32000), (1024, 131072), (512, 262144)]
MORE_LOOP_SHAPES = [(1024, 65536), (2048, 65536), (4096, 65536), (2048, 131072), (4096, 131072), (256, 131072)]


def norm_launch(x, w, b, r, y, h, layer: int, block: int, warps: int, loop: bool):
    rows, n = x.shape
    residual = r is not None
    NORM[(rows,)](x, w, b, r if residual else x, x, y, h if residual else y, n, n, n, n, n, n, 1e-5, 0.0, layer, 1,
                  int(layer), 0, 0, HAS_RESIDUAL=residual, HAS_GATE=False, BLOCK_N=block, LOOP=loop,
                  num_warps=warps)  # fmt: skip


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    loops = "loops" in sys.argv
    variants = LOOP_VARIANTS if loops else VARIANTS
    names = [f"{b}/{w}{' loop' if loop else ''}" for b, w, loop in variants]
    print("shape", "op", "eager", "compile", *names, sep="\t")
    shapes = (MORE_LOOP_SHAPES if "more" in sys.argv else LOOP_SHAPES) if loops else SHAPES
    for rows, n in shapes:
        x, r = (torch.randn(rows, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        w, b = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        y, h = torch.empty_like(x), torch.empty_like(x)
        size = x.numel() * x.element_size()

        def rms_fn(x, r, w, b):
            return F.rms_norm(x, (n,), w, 1e-5)

        def layer_fn(x, r, w, b):
            return F.layer_norm(x, (n,), w, b, 1e-5)

        def add_rms_fn(x, r, w, b):
            return F.rms_norm(x + r, (n,), w, 1e-5)

        # name: (layer, residual, torch function of (x, r, w, b), tensors moved)
        ops = {"rms_norm": (0, None, rms_fn, 2), "layer_norm": (1, None, layer_fn, 2)}
        ops["add+rms_norm"] = (0, r, add_rms_fn, 4)
        for name, (layer, residual, torch_fn, tensors) in {} if loops else ops.items():
            compiled = torch.compile(torch_fn, dynamic=False)
            timed = (lambda: torch_fn(x, r, w, b), lambda: compiled(x, r, w, b))
            cells = [tensors * size / bench_queued(fn) / 1e9 for fn in timed]
            want = torch_fn(*(t.double() for t in (x, r, w, b)))
            for block, warps, loop in variants:
                if not loop and n > block:
                    cells.append(float("nan"))
                    continue
                y.fill_(float("nan"))
                norm_launch(x, w, b, residual, y, h, layer, block, warps, loop)
                err = ((y.double() - want).abs() / (want.abs() + 1)).max().item()
                assert err < 2e-2, (rows, n, name, block, warps, loop, err)
                ms = bench_queued(lambda v=(block, warps, loop): norm_launch(x, w, b, residual, y, h, layer, *v))
                cells.append(tensors * size / ms / 1e9)
            print(f"{rows}x{n}", name, *[f"{c:.2f}" for c in cells], sep="\t", flush=True)
        for mode, name in ((0, "softmax"), (1, "log_softmax")):
            torch_fn = torch.softmax if mode == 0 else torch.log_softmax
            compiled = torch.compile(lambda x, f=torch_fn: f(x, -1), dynamic=False)
            cells = [2 * size / bench_queued(fn) / 1e9 for fn in (lambda: torch_fn(x, -1), lambda: compiled(x))]
            want = torch_fn(x.double(), -1)
            for block, warps, loop in variants:
                if not loop and n > block:
                    cells.append(float("nan"))
                    continue
                fn = lambda v=(block, warps, loop), m=mode: SOFTMAX[(rows,)](  # noqa: E731
                    x, y, n, n, n, m, BLOCK_N=v[0], LOOP=v[2], LSE=False, num_warps=v[1]
                )
                y.fill_(float("nan"))
                fn()
                err = ((y.double() - want).abs() / (want.abs() + 1e-3)).max().item()
                assert err < 1e-2, (rows, n, name, block, warps, loop, err)
                cells.append(2 * size / bench_queued(fn) / 1e9)
            print(f"{rows}x{n}", name, *[f"{c:.2f}" for c in cells], sep="\t", flush=True)


if __name__ == "__main__":
    main()
