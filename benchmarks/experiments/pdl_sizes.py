"""Programmatic dependent launch (PDL) across sizes, for a decision on shipping it: x * 0.5 on bf16 through Triton's
JIT, ten launches per burst (benchmarks/run.py's bench_queued), each launch reading the previous one's output (a
dependent chain, as a model's ops are: the wait is what keeps it correct) or all reading one input. Microseconds per
launch and TB/s counting x and out once; the chain's result is checked. Also the chain captured in a CUDA graph and
replayed (how servers run decode steps).

    python3 benchmarks/experiments/pdl_sizes.py
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, warm_up_gpu  # noqa: E402


@triton.jit
def scale_kernel(X, OUT, n, WAIT: tl.constexpr, TRIGGER: tl.constexpr, BLOCK: tl.constexpr):
    if WAIT:  # wait for the predecessor's writes
        tl.extra.cuda.gdc_wait()
    if TRIGGER:  # let the successor's blocks launch (else they launch as this grid completes)
        tl.extra.cuda.gdc_launch_dependents()
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(OUT + offs, x * 0.5, mask=offs < n)


def captured(fn):
    """fn captured in a CUDA graph: time its replay with bench_queued."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def main() -> None:
    warm_up_gpu()
    modes = {  # (WAIT, TRIGGER, launch_pdl)
        "plain": (False, False, False),
        "pdl": (True, True, True),
        "pdl, no trigger": (True, False, True),
        "wait only": (True, False, False),
        "trigger only": (False, True, False),
    }
    print("rows x 4096", "form", *[f"{m} us | TB/s" for m in modes], sep="\t")
    for rows in (1, 64, 1024, 2048, 4096, 8192):  # 8 KiB to 64 MiB per buffer
        a = torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
        b = torch.empty_like(a)
        total, nbytes = a.numel(), 2 * a.numel() * 2
        grid = (triton.cdiv(total, 1024),)
        for form in ("same input", "chain", "chain, graph of 10"):
            cells = []
            for wait, trigger, pdl in modes.values():

                def launch(x, out, w=wait, t=trigger, p=pdl):
                    scale_kernel[grid](x, out, total, WAIT=w, TRIGGER=t, BLOCK=1024, launch_pdl=p)

                if form == "same input":
                    ms = bench_queued(lambda: launch(a, b))
                else:

                    def chain():  # ten dependent launches, a -> b -> a ...
                        for i in range(10):
                            launch(a if i % 2 == 0 else b, b if i % 2 == 0 else a)

                    start = a.clone()
                    chain()
                    assert torch.equal(a, start * 2.0**-10), (rows, form, wait, trigger, pdl)
                    a.copy_(start)
                    ms = bench_queued(chain if form == "chain" else captured(chain), calls=1) / 10
                cells += [f"{ms * 1e3:.2f}", f"{nbytes / ms / 1e9:.2f}"]
            print(rows, form, *cells, sep="\t", flush=True)


if __name__ == "__main__":
    main()
