"""Would programmatic dependent launch (PDL, sm_90+) lift a memory-bound op at 4096 x 4096 past the 87-88% of copy
that every single-input op reaches there (torch eager and torch.compile included)? x * 0.5 on bf16 through Triton's
JIT, in bursts of ten back-to-back launches (benchmarks/run.py's bench_queued), TB/s counting x and out once:
plain launches, and launches with the PDL attribute whose kernel waits for its predecessor before its first access
(griddepcontrol.wait) and lets its successor launch either at its start or after its loads
(griddepcontrol.launch_dependents). Against torch.mul and a torch copy of the same size.

    python3 benchmarks/experiments/pdl_elementwise.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402


@triton.jit
def scale_kernel(X, OUT, n, GDC: tl.constexpr, TRIGGER: tl.constexpr, BLOCK: tl.constexpr):
    """GDC: wait for the predecessor first; TRIGGER 1: let the successor launch at once, 2: after the loads."""
    if GDC:
        tl.extra.cuda.gdc_wait()
    if TRIGGER == 1:
        tl.extra.cuda.gdc_launch_dependents()
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    if TRIGGER == 2:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(OUT + offs, x * 0.5, mask=offs < n)


def main() -> None:
    warm_up_gpu()
    print(f"copy {copy_bandwidth():.2f} TB/s")
    modes = {  # (GDC, TRIGGER, launch_pdl)
        "plain": (False, 0, False),
        "pdl, trigger at start": (True, 1, True),
        "pdl, trigger after loads": (True, 2, True),
        "gdc code, no pdl": (True, 1, False),
    }
    print("shape", "torch.mul", "torch copy", *modes, sep="\t")
    for m, n in ((4096, 4096), (16384, 8192), (1024, 4096)):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        total, nbytes = x.numel(), 2 * x.numel() * 2
        cells = [nbytes / bench_queued(lambda: torch.mul(x, 0.5)), nbytes / bench_queued(lambda: out.copy_(x))]
        for gdc, trigger, pdl in modes.values():

            def run(g=gdc, t=trigger, p=pdl):
                scale_kernel[(triton.cdiv(total, 1024),)](x, out, total, GDC=g, TRIGGER=t, BLOCK=1024, launch_pdl=p)

            out.fill_(float("nan"))
            run()
            assert torch.equal(out, x * 0.5)
            cells.append(nbytes / bench_queued(run))
        print(f"{m} x {n}", *[f"{c / 1e9:.2f}" for c in cells], sep="\t", flush=True)


if __name__ == "__main__":
    main()
