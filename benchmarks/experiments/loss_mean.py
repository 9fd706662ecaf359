"""cross_entropy(reduction="mean") against "none": where do the reduced form's extra microseconds go, and does one
launch that reduces in its last program recover them? Triton's JIT on the GPU, launched with programmatic dependent
launch as the wheel launches on sm_90; TB/s of the logits, calls queued behind a sleeping kernel.

- rows + reduce: the shipped pair (float32 losses per row, then one program sums them), optionally with each
  kernel letting its successor launch at its start (griddepcontrol.launch_dependents), so the one-program reduce
  (and the next call's row kernel) is resident and waiting when its predecessor ends.
- one launch: programs take rows in a grid stride, add their losses, write a partial sum and count, and take a
  ticket from a counter; the program holding the last ticket sums the partials in program order (deterministic)
  and sets the counter back to 0 for the next call. Its counter must be zero before the first call.
- the wheel's xopsaot.cross_entropy (mean and none), which adds its workspace's stream-ordered allocation.

    python3 benchmarks/experiments/loss_mean.py
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from run import bench_queued, copy_bandwidth, warm_up_gpu  # noqa: E402

from kernels_src.loss import cross_entropy_kernel, loss_reduce_kernel, row_loss  # noqa: E402

SMS = torch.cuda.get_device_properties(0).multi_processor_count
IGNORE = -100


@triton.jit
def rows_trigger(Logits, Target, Loss, stride_x, n_cols, ignore_index, smoothing, BLOCK_N: tl.constexpr):
    tl.extra.cuda.gdc_launch_dependents()
    cross_entropy_kernel(Logits, Target, Loss, stride_x, n_cols, ignore_index, smoothing, BLOCK_N, True)


@triton.jit
def reduce_trigger(Loss, Target, Out, n_rows, ignore_index, mean, BLOCK: tl.constexpr):
    tl.extra.cuda.gdc_launch_dependents()
    loss_reduce_kernel(Loss, Target, Out, n_rows, ignore_index, mean, BLOCK, True)


@triton.jit
def one_launch(
    Logits, Target, Partials, Counter, Out, stride_x, n_rows, n_cols, ignore_index, smoothing, mean,
    BLOCK_N: tl.constexpr, BLOCK_P: tl.constexpr, TRIGGER: tl.constexpr,
):  # fmt: skip
    tl.extra.cuda.gdc_wait()
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    acc = tl.full([], 0.0, tl.float32)
    count = tl.full([], 0.0, tl.float32)
    for row in range(pid, n_rows, programs):
        r = row.to(tl.int64)
        target = tl.load(Target + r).to(tl.int64)
        acc += row_loss(Logits + r * stride_x, target, ignore_index, n_cols, smoothing, BLOCK_N)
        count += tl.where(target != ignore_index, 1.0, 0.0)
    tl.store(Partials + pid, acc)
    tl.store(Partials + programs + pid, count)
    tl.debug_barrier()
    ticket = tl.atomic_add(Counter, 1, sem="acq_rel", scope="gpu")
    if ticket == programs - 1:
        offs = tl.arange(0, BLOCK_P)
        total = tl.zeros([BLOCK_P], dtype=tl.float32)
        counted = tl.zeros([BLOCK_P], dtype=tl.float32)
        for start in range(0, programs, BLOCK_P):
            o = start + offs
            total += tl.load(Partials + o, mask=o < programs, other=0.0, cache_modifier=".cg")
            counted += tl.load(Partials + programs + o, mask=o < programs, other=0.0, cache_modifier=".cg")
        result = tl.sum(total, axis=0)
        if mean:
            result = tl.math.div_rn(result, tl.sum(counted, axis=0))
        tl.store(Out, result.to(Out.dtype.element_ty))
        tl.store(Counter, 0)


def main() -> None:
    warm_up_gpu()
    copy = copy_bandwidth()
    print(f"copy {copy:.2f} TB/s, {SMS} SMs", flush=True)
    try:
        import xopsaot
    except ImportError:
        xopsaot = None
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    for rows, n in ((4096, 4096), (8192, 4096), (8192, 32000), (2048, 128256)):
        x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        t = torch.randint(0, n, (rows,), device="cuda", dtype=torch.int64)
        t[::7] = IGNORE
        want = F.cross_entropy(x.double(), t, ignore_index=IGNORE).item()
        losses = torch.empty(rows, device="cuda", dtype=torch.float32)
        per_row = torch.empty(rows, device="cuda", dtype=torch.bfloat16)
        out32 = torch.empty((), device="cuda", dtype=torch.float32)
        stride = x.stride(0)
        cells = {}

        def pair(row_kernel, reduce_kernel):
            def run():
                if row_kernel is cross_entropy_kernel:
                    row_kernel[(rows,)](x, t, losses, stride, n, IGNORE, 0.0, BLOCK_N=2048, PDL=True,
                                        num_warps=4, launch_pdl=True)  # fmt: skip
                else:
                    row_kernel[(rows,)](x, t, losses, stride, n, IGNORE, 0.0, BLOCK_N=2048, num_warps=4,
                                        launch_pdl=True)  # fmt: skip
                if reduce_kernel is loss_reduce_kernel:
                    reduce_kernel[(1,)](losses, t, out32, rows, IGNORE, 1, BLOCK=4096, PDL=True, num_warps=8,
                                        launch_pdl=True)  # fmt: skip
                else:
                    reduce_kernel[(1,)](losses, t, out32, rows, IGNORE, 1, BLOCK=4096, num_warps=8, launch_pdl=True)

            return run

        def none_run():
            cross_entropy_kernel[(rows,)](x, t, per_row, stride, n, IGNORE, 0.0, BLOCK_N=2048, PDL=True, num_warps=4,
                                          launch_pdl=True)  # fmt: skip

        def fused(programs, trigger):
            partials = torch.empty(2 * programs, device="cuda", dtype=torch.float32)

            def run():
                one_launch[(programs,)](x, t, partials, counter, out32, stride, rows, n, IGNORE, 0.0, 1, BLOCK_N=2048,
                                        BLOCK_P=1024, TRIGGER=trigger, num_warps=4, launch_pdl=True)  # fmt: skip

            return run

        def check(name, run, result):
            result.fill_(float("nan"))
            run()
            got = result.double().item()
            err = abs(got - want) / abs(want)
            if err > 1e-5:
                print(f"  {name}: {got} against {want} (relative {err:.1e})", flush=True)
            return run

        runs = {"none (per row)": none_run}
        runs["rows + reduce"] = check("pair", pair(cross_entropy_kernel, loss_reduce_kernel), out32)
        runs["+ trigger in rows"] = check("rows trigger", pair(rows_trigger, loss_reduce_kernel), out32)
        runs["+ trigger in both"] = check("both trigger", pair(rows_trigger, reduce_trigger), out32)
        for k in (4, 8, 16):
            p = min(rows, k * SMS)
            runs[f"one launch {p}"] = check(f"one {p}", fused(p, False), out32)
        runs[f"one launch {rows}"] = check(f"one {rows}", fused(rows, False), out32)
        runs[f"one launch {rows} trig"] = check(f"one {rows} trig", fused(rows, True), out32)
        if xopsaot is not None:
            runs["wheel mean"] = lambda: xopsaot.cross_entropy(x, t, ignore_index=IGNORE, validate=False)
            runs["wheel none"] = lambda: xopsaot.cross_entropy(
                x, t, ignore_index=IGNORE, reduction="none", validate=False
            )
            got = xopsaot.cross_entropy(x, t, ignore_index=IGNORE, validate=False).double().item()
            if abs(got - want) > 1e-2 * abs(want):
                print(f"  wheel: {got} against {want}", flush=True)
        runs["torch eager"] = lambda: F.cross_entropy(x, t, ignore_index=IGNORE)
        for _ in range(2):
            for name, run in runs.items():
                cells.setdefault(name, []).append(x.numel() * 2 / bench_queued(run) / 1e9)
        line = " | ".join(f"{name} {' '.join(f'{v:.2f}' for v in vs)}" for name, vs in cells.items())
        print(f"{rows} x {n}: {line}", flush=True)


if __name__ == "__main__":
    main()
