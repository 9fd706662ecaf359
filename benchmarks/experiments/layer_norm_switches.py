"""Does layer_norm on rows held whole (4096 x 32000: 88% of copy in the wheel against rms_norm's 99%) pay for the
row norm kernel's run-time switches? The shipped kernel through Triton's JIT, with its scalars unspecialized (as the
wheel launches it) against the same kernel with `layer` (then also has_weight and has_bias) specialized to their
value 1, which folds their branches away. TB/s counting x read and y written once, bf16, weight and bias; each
output checked against float64.

    python3 benchmarks/experiments/layer_norm_switches.py
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

SCALARS = ["eps", "w_offset", "layer", "has_weight", "has_bias", "gate_silu", "gate_pre"]
FORMS = {
    "as shipped": SCALARS,
    "layer fixed": [s for s in SCALARS if s != "layer"],
    "layer+affine fixed": [s for s in SCALARS if s not in ("layer", "has_weight", "has_bias")],
}
KERNELS = {name: triton.jit(row_norm_kernel.fn, do_not_specialize=kept) for name, kept in FORMS.items()}


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    for rows, n, block, warps in ((4096, 32000, 32768, 32), (4096, 16384, 16384, 32), (4096, 8192, 8192, 16)):
        x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        w, b = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        y = torch.empty_like(x)
        want = F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
        cells = []
        for name, kernel in KERNELS.items():

            def launch(kernel=kernel):
                kernel[(rows,)](x, w, b, x, x, y, y, n, n, n, n, n, n, 1e-5, 0.0, 1, 1, 1, 0, 0, HAS_RESIDUAL=False,
                                HAS_GATE=False, BLOCK_N=block, LOOP=False, num_warps=warps)  # fmt: skip

            y.fill_(float("nan"))
            launch()
            err = ((y.double() - want).abs() / (want.abs() + 1)).max().item()
            assert err < 2e-2, (rows, n, name, err)
            cells.append(f"{name} {2 * x.numel() * x.element_size() / bench_queued(launch) / 1e9:.2f}")
        print(f"{rows} x {n} ({block}/{warps}):", " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
