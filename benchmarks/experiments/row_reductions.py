"""Issue 4's slow memory-bound rows, through Triton's JIT: the shipped kernels (imported from kernels_src) against
candidate rewrites, TB/s from bench_queued in one run with torch eager and the copy bandwidth.

- group_norm: the shipped kernel (one flat block per (sample, group), a 64-bit division per element for the
  channel, three passes when the group is longer than 8192) against a 2-D (channel x spatial) tile in two passes
  (shifted sums, then the normalized write).
- logsumexp and per-row cross entropy (reads only): one row per program against several rows per program and a
  persistent grid pipelining the next rows' loads (tl.range num_stages).
- gelu (erf): the shipped run-time activation switch against a kernel holding only gelu.
- `--revised`: the kernels as revised after the first run (kernels_src as it stands): group_norm's two passes,
  logsumexp's variant and warps, cross entropy's warps, softmax / log_softmax with half the warps.

Triton's JIT passes integers below 2**31 as 32-bit, so its group_norm divides in 32 bits where the AOT build (64-bit
spatial argument) divided in 64: the first run's "shipped" group_norm column is the JIT's, not the wheel's.

    python3 benchmarks/experiments/row_reductions.py [--revised]

Its group_norm sections call group_norm_kernel with the signature it had then (2026-11-22: no Partials, chunk or
EVICT_FIRST arguments); against today's kernels_src they stop there. `group_norm_split.py` and
`group_norm_blocks.py` time today's kernel.
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

from kernels_src.activation import activation_kernel  # noqa: E402
from kernels_src.loss import cross_entropy_kernel  # noqa: E402
from kernels_src.norm import group_norm_kernel  # noqa: E402
from kernels_src.softmax import softmax_kernel  # noqa: E402

SMS = torch.cuda.get_device_properties(0).multi_processor_count


@triton.jit
def group_norm_2d(X, W, B, Y, spatial, cpg, groups, eps, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    n_elems = cpg * spatial
    X += row * n_elems
    Y += row * n_elems
    first_channel = (tl.program_id(0) % groups) * cpg
    ch = tl.arange(0, BLOCK_C)
    sp = tl.arange(0, BLOCK_S)
    shift = tl.load(X).to(tl.float32)
    s1 = tl.zeros([BLOCK_C, BLOCK_S], dtype=tl.float32)
    s2 = tl.zeros([BLOCK_C, BLOCK_S], dtype=tl.float32)
    for c0 in range(0, cpg, BLOCK_C):
        c = c0 + ch
        for s0 in range(0, spatial, BLOCK_S):
            s = s0 + sp
            mask = (c < cpg)[:, None] & (s < spatial)[None, :]
            x = tl.load(X + c[:, None] * spatial + s[None, :], mask=mask, other=0.0).to(tl.float32)
            d = tl.where(mask, x - shift, 0.0)
            s1 += d
            s2 += d * d
    mean_d = tl.sum(tl.sum(s1, axis=1), axis=0) / n_elems
    var = tl.maximum(tl.sum(tl.sum(s2, axis=1), axis=0) / n_elems - mean_d * mean_d, 0.0)
    rstd = tl.rsqrt(var + eps)
    mean = shift + mean_d
    for c0 in range(0, cpg, BLOCK_C):
        c = c0 + ch
        w = tl.load(W + first_channel + c, mask=c < cpg, other=0.0).to(tl.float32)
        b = tl.load(B + first_channel + c, mask=c < cpg, other=0.0).to(tl.float32)
        scale = w * rstd
        offset = b - mean * scale
        for s0 in range(0, spatial, BLOCK_S):
            s = s0 + sp
            mask = (c < cpg)[:, None] & (s < spatial)[None, :]
            offs = c[:, None] * spatial + s[None, :]
            x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(Y + offs, (x * scale[:, None] + offset[:, None]).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def lse_rows(X, Y, stride_x, n_rows, n_cols, BLOCK_N: tl.constexpr, ROWS: tl.constexpr, STAGES: tl.constexpr):
    """Row blocks pid, pid + programs, ...: with a grid of cdiv(n_rows, ROWS) the loop runs once."""
    cols = tl.arange(0, BLOCK_N)
    for rb in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0), num_stages=STAGES):
        rows = rb * ROWS + tl.arange(0, ROWS)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        x = tl.load(X + rows[:, None].to(tl.int64) * stride_x + cols[None, :], mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        m = tl.max(x, axis=1)
        safe = tl.where(m == -float("inf"), 0.0, m)
        s = tl.sum(tl.exp2((x - safe[:, None]) * 1.4426950408889634), axis=1)
        tl.store(Y + rows, (safe + tl.log(s)).to(Y.dtype.element_ty), mask=rows < n_rows)


@triton.jit
def gelu_only(X, Y, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offsets = start + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(X + offsets, mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(Y + offsets, y.to(Y.dtype.element_ty), mask=mask)


def tbps(nbytes: float, fn) -> float:
    return nbytes / bench_queued(fn) / 1e9


def group_norm_section() -> None:
    print("\n## group_norm, bf16, TB/s counting x read and y written once")
    shapes = [((16, 256, 64, 64), 32), ((64, 512, 16, 16), 32), ((1, 512, 128, 128), 32), ((32, 2048, 7, 7), 32),
              ((2, 320, 64, 64), 32), ((8, 128, 32, 32), 32)]  # fmt: skip
    tiles = [(1, 4096, 8), (2, 2048, 8), (4, 1024, 8), (16, 256, 8), (64, 64, 8), (1, 2048, 4), (16, 256, 4),
             (1, 8192, 16), (8, 1024, 16)]  # fmt: skip
    print("shape", "eager", "shipped", *[f"{c}x{s}/{w}" for c, s, w in tiles], sep="\t")
    for shape, groups in shapes:
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 2 + 3
        w = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16)
        b = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16)
        nbytes = 2 * x.numel() * 2
        rows = shape[0] * groups
        cpg, spatial = shape[1] // groups, x[0, 0].numel()
        n_elems = cpg * spatial
        y = torch.empty_like(x)
        row = [tbps(nbytes, lambda: F.group_norm(x, groups, w, b))]
        block = next((bn for bn, _ in ((256, 2), (1024, 4), (4096, 8), (8192, 16)) if n_elems <= bn), 4096)
        warps = {256: 2, 1024: 4, 4096: 8, 8192: 16}[block]
        loop = n_elems > 8192
        row.append(
            tbps(
                nbytes,
                lambda: group_norm_kernel[(rows,)](
                    x, w, b, y, n_elems, spatial, cpg, groups, 1e-5, 1, 1, BLOCK_N=block, LOOP=loop, num_warps=warps
                ),
            )
        )
        want = F.group_norm(x.double(), groups, w.double(), b.double())
        for c, s, nw in tiles:
            y.fill_(float("nan"))
            group_norm_2d[(rows,)](x, w, b, y, spatial, cpg, groups, 1e-5, BLOCK_C=c, BLOCK_S=s, num_warps=nw)
            err = (y.double() - want).abs().max().item()
            assert err < 0.1, (shape, c, s, err)
            row.append(
                tbps(
                    nbytes,
                    lambda: group_norm_2d[(rows,)](
                        x, w, b, y, spatial, cpg, groups, 1e-5, BLOCK_C=c, BLOCK_S=s, num_warps=nw
                    ),
                )
            )
        print(f"{shape} g{groups}", *[f"{v:.2f}" for v in row], sep="\t", flush=True)


def lse_section() -> None:
    print("\n## logsumexp and cross entropy (none) rows, bf16, TB/s counting x read once")
    shapes = [(4096, 4096), (16384, 8192), (8192, 4096), (4096, 2048)]
    # (ROWS, STAGES, warps, programs per SM; 0: a program per row block)
    variants = [(1, 1, 8, 0), (1, 1, 4, 0), (2, 1, 8, 0), (4, 1, 8, 0), (1, 2, 8, 4), (1, 3, 8, 4), (2, 2, 8, 4),
                (1, 2, 4, 8), (1, 3, 4, 8), (2, 3, 8, 2)]  # fmt: skip
    names = [f"r{r}s{s}w{w}p{p}" for r, s, w, p in variants]
    print("shape", "sum eager", "lse eager", "shipped lse", "shipped ce", *names, sep="\t")
    for n_rows, n_cols in shapes:
        x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.bfloat16) * 3
        target = torch.randint(0, n_cols, (n_rows,), device="cuda")
        out = torch.empty(n_rows, device="cuda", dtype=torch.bfloat16)
        loss = torch.empty(n_rows, device="cuda", dtype=torch.bfloat16)
        nbytes = x.numel() * 2
        block, warps = next((b, w) for b, w in ((256, 2), (1024, 4), (4096, 8), (8192, 16)) if n_cols <= b)
        row = [tbps(nbytes, lambda: x.sum(-1)), tbps(nbytes, lambda: torch.logsumexp(x, -1))]
        row.append(tbps(nbytes, lambda: softmax_kernel[(n_rows,)](x, out, n_cols, 1, n_cols, 2, BLOCK_N=block,
                                                                 LOOP=False, num_warps=warps)))  # fmt: skip
        row.append(tbps(nbytes, lambda: cross_entropy_kernel[(n_rows,)](x, target, loss, n_cols, n_cols, -100, 0.0,
                                                                       BLOCK_N=4096, num_warps=8)))  # fmt: skip
        want = torch.logsumexp(x.double(), -1)
        for r, s, nw, per_sm in variants:
            grid = (triton.cdiv(n_rows, r),) if per_sm == 0 else (min(triton.cdiv(n_rows, r), SMS * per_sm),)
            out.fill_(float("nan"))
            lse_rows[grid](x, out, n_cols, n_rows, n_cols, BLOCK_N=block, ROWS=r, STAGES=s, num_warps=nw)
            assert (out.double() - want).abs().max().item() < 0.1
            row.append(tbps(nbytes, lambda: lse_rows[grid](x, out, n_cols, n_rows, n_cols, BLOCK_N=block, ROWS=r,
                                                            STAGES=s, num_warps=nw)))  # fmt: skip
        print(f"{n_rows}x{n_cols}", *[f"{v:.2f}" for v in row], sep="\t", flush=True)


def gelu_section() -> None:
    print("\n## gelu (erf), bf16, TB/s counting x read and y written once")
    print("shape", "eager", "shipped", "gelu only 2048/4", "gelu only 1024/4", "gelu only 4096/8", sep="\t")
    for shape in ((4096, 4096), (16384, 8192)):
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        n = x.numel()
        nbytes = 2 * n * 2
        row = [
            tbps(nbytes, lambda: F.gelu(x)),
            tbps(nbytes, lambda: activation_kernel[(triton.cdiv(n, 2048),)](x, y, n, 1, BLOCK=2048, num_warps=4)),
        ]
        for block, nw in ((2048, 4), (1024, 4), (4096, 8)):
            row.append(tbps(nbytes, lambda: gelu_only[(triton.cdiv(n, block),)](x, y, n, BLOCK=block, num_warps=nw)))
        print(f"{shape[0]}x{shape[1]}", *[f"{v:.2f}" for v in row], sep="\t", flush=True)


def revised_section() -> None:
    print("\n## revised kernels (kernels_src), bf16")
    print("group_norm (TB/s, x read and y written): shape, eager, flat blocks of 4096 / 8 warps (the build's choice)")
    for shape, groups in (((16, 256, 64, 64), 32), ((1, 512, 128, 128), 32), ((2, 320, 64, 64), 32)):
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 2 + 30
        w, b = (torch.randn(shape[1], device="cuda", dtype=torch.bfloat16) for _ in range(2))
        rows, cpg, spatial = shape[0] * groups, shape[1] // groups, x[0, 0].numel()
        y = torch.full_like(x, float("nan"))
        args = (x, w, b, y, cpg * spatial, spatial, cpg, groups, 1e-5, 1, 1)
        group_norm_kernel[(rows,)](*args, BLOCK_N=4096, LOOP=True, num_warps=8)
        err = (y.double() - F.group_norm(x.double(), groups, w.double(), b.double())).abs().max().item()
        assert err < 0.05, err
        nbytes = 2 * x.numel() * 2
        row = [
            tbps(nbytes, lambda: F.group_norm(x, groups, w, b)),
            tbps(nbytes, lambda: group_norm_kernel[(rows,)](*args, BLOCK_N=4096, LOOP=True, num_warps=8)),
        ]
        print(shape, *[f"{v:.2f}" for v in row], sep="\t", flush=True)
    print("rows (TB/s): shape, op, then BLOCK_N/warps variants")
    for n_rows, n_cols in ((4096, 4096), (16384, 8192), (4096, 2048), (4096, 32000)):
        x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.bfloat16) * 3
        y = torch.empty_like(x)
        lse = torch.empty(n_rows, device="cuda", dtype=torch.bfloat16)
        target = torch.randint(0, n_cols, (n_rows,), device="cuda")
        loss = torch.empty(n_rows, device="cuda", dtype=torch.bfloat16)
        block = next((b for b in (256, 1024, 4096, 8192) if n_cols <= b), 4096)
        loop = n_cols > 8192
        for name, mode, lse_key, out, passes in (("softmax", 0, False, y, 2), ("log_softmax", 1, False, y, 2),
                                                 ("logsumexp", 2, True, lse, 1)):  # fmt: skip
            row = []
            for warps in (16, 8, 4, 2):
                if warps > block // 256 * 2 or (loop and warps > 8):
                    row.append("-")
                    continue
                stride_y = n_cols if mode < 2 else 1
                options = {"BLOCK_N": block, "LOOP": loop, "LSE": lse_key, "num_warps": warps}
                fn = lambda: softmax_kernel[(n_rows,)](x, out, n_cols, stride_y, n_cols, mode, **options)  # noqa: E731
                row.append(f"w{warps} {tbps(passes * x.numel() * 2, fn):.2f}")
            print(f"{n_rows}x{n_cols}", name, *row, sep="\t", flush=True)
        row = []
        for ce_block, warps in ((4096, 8), (4096, 4), (2048, 4), (8192, 8)):
            fn = lambda: cross_entropy_kernel[(n_rows,)](x, target, loss, n_cols, n_cols, -100, 0.0,  # noqa: E731
                                                         BLOCK_N=ce_block, num_warps=warps)  # fmt: skip
            row.append(f"{ce_block}/w{warps} {tbps(x.numel() * 2, fn):.2f}")
        print(f"{n_rows}x{n_cols}", "cross_entropy", *row, sep="\t", flush=True)


def main() -> None:
    warm_up_gpu(1.0)
    print(f"copy {copy_bandwidth():.2f} TB/s, {SMS} SMs, triton {triton.__version__}")
    if "--revised" in sys.argv:
        revised_section()
        return
    group_norm_section()
    lse_section()
    gelu_section()


if __name__ == "__main__":
    main()
