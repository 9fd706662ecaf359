"""Long rows of the softmax family (the looping config: BLOCK_N 4096, 8 warps) with and without evict-first hints on
the writing pass's reads and writes, through Triton's JIT as the wheel launches it (rows and strides hinted as
multiples of 16). The unhinted kernel is the shipped source with those hints taken out, built here by text; the two
alternate in one process, TB/s counting x read and y written once, checked against torch in float64.

    python3 benchmarks/experiments/loop_eviction.py
"""

import importlib.util
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

import kernels_src.softmax as shipped  # noqa: E402

HINT = ', eviction_policy="evict_first"'
SOURCE = Path(shipped.__file__).read_text()
assert SOURCE.count(HINT) == 2, "the shipped source changed: update this script"


def load_unhinted():
    """The shipped module without the hints, from a file (Triton's JIT reads a kernel's source from its file)."""
    path = Path(tempfile.mkdtemp()) / "softmax_unhinted.py"
    path.write_text(SOURCE.replace(HINT, ""))
    spec = importlib.util.spec_from_file_location("softmax_unhinted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    warm_up_gpu()
    unhinted = load_unhinted()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    print("shape", "op", "torch", "unhinted", "hinted", "unhinted", "hinted", sep="\t")
    for n_rows, n_cols in ((4096, 32000), (1024, 131072), (8192, 16384), (4096, 12288)):
        x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.bfloat16) * 3
        out = torch.empty_like(x)
        nbytes = 2 * x.numel() * 2
        for mode, name in ((0, "softmax"), (1, "log_softmax")):
            torch_op = torch.softmax if mode == 0 else torch.log_softmax
            want = torch_op(x.double(), -1)
            cells = [nbytes / bench_queued(lambda op=torch_op: op(x, -1)) / 1e9]
            fns = []
            for module in (unhinted, shipped):
                fn = lambda k=module.softmax_kernel, m=mode: k[(n_rows,)](  # noqa: E731
                    x, out, n_cols, n_cols, n_cols, m, BLOCK_N=4096, LOOP=True, LSE=False, num_warps=8
                )
                out.fill_(float("nan"))
                fn()
                err = ((out.double() - want).abs() / (want.abs() + 1e-3)).max().item()
                assert err < 1e-2, (n_rows, n_cols, name, err)  # bf16 output: 4e-3 relative
                fns.append(fn)
            for _ in range(2):
                cells += [nbytes / bench_queued(fn) / 1e9 for fn in fns]
            print(f"{n_rows}x{n_cols}", name, *[f"{c:.2f}" for c in cells], sep="\t", flush=True)


if __name__ == "__main__":
    main()
