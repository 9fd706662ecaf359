"""The matmul family: c[z] = a[z] @ b[z] (mm, bmm, matmul), and for 2-D problems the fused form
out = act(alpha * (a @ b) + beta * input) + residual (addmm, linear; gate_linear after its gating pass).

a (M, K) has contiguous rows; b (K, N) is either N-contiguous or K-contiguous (a transposed weight); c (M, N) is
contiguous; a batch stride of 0 broadcasts. Tiles are visited in groups of GROUP_M rows for L2 reuse; the batch
index is folded into grid x (no 65535 limit). Decode batches take narrow tiles (16 x 32 up to 16 rows, 32 x 32 up
to 32, 64 x 32 up to 64; 16 x 64 and 32 x 64 up to 16 and 32 rows against a transposed weight of more than 32 rows
per SM), then 64 x 64 tiles up to 256 rows (weights of at most 8192 columns), larger problems a 128-row tile.
The K loop runs unmasked over whole blocks and peels the tail, so the pipelined main loop has no masks. fp16/bf16
accumulate in float32 on tensor cores; float32 is multiplied in full precision (no TF32).

The plain product (EPILOGUE False) is its own binary: the fused epilogue's loads of an input and a residual tile
raise the register count of the whole kernel (it spills at 128 x 256 on sm_90 even when done in two halves of the
tile's columns, as it is here). In the fused binary the input (addmm's input, linear's bias as a row of stride 0),
the residual and the activation are run-time options: one binary per dtype and layout serves them all.

gate_linear's act(x1) * x2 was tried in this kernel's prologue (the A tile gated as it is loaded): measured on an
H100 it ran at half the unfused sequence's speed at 4096^3 (the gating is repeated for every column tile, on the
warps that feed the tensor cores) and 1.3-1.6x slower than a separate gating pass at 1 and 16 rows, so gate_linear
gates in a pass of its own (csrc/ops/matmul.c).

On Hopper, 16-bit 2-D products past the decode batches' tiles take matmul_ws (_matmul_ws.py, Gluon): persistent,
warp-specialized, TMA in and out, the same epilogue with a bias row (ws_configs says where); split along K for 65
to 256 rows, matmul_reduce_kernel adding up the slices and running the epilogue. Under sustained load on
an H100, linear reads 656 / 671 TFLOP/s at 4096^3 / 8192^3 there (cuBLAS 684 / 666; this kernel 608 / 649), and
linear with a bias, gelu_tanh and a residual 566 / 627 (torch eager's unfused sequence 528 / 606; this kernel 541 /
593): benchmarks/results/h100-2026-11-26-lm-ops.md, stop 35 in h100-2026-11-26-experiments.md.

One row of a against a transposed weight (decode at batch 1: linear, gate_linear, the LM head's one-row chunks) takes
gemv_kernel instead: CUDA cores, each thread's products summed once after the K loop, and narrow programs (8 weight
rows). The 16-row tensor-core tile pads that row to 16 and left an H100 at 0.84-0.89x cuBLAS on 4096 to 14336-wide
weights, where this form reads 0.99-1.14x (benchmarks/experiments/gemv_forms.py). Two or more rows keep the tensor
cores: a CUDA-core form holding several rows' products lost to them from 2 rows on.
"""

import triton
import triton.language as tl

from aot.spec import ALIGNED_ONLY, Config, Kernel, Target, f32, i32, i64, is_hopper, ptr, tensor_desc
from kernels_src._attention_ws import WG_ROWS, ws_maxnreg
from kernels_src._matmul_ws import matmul_ws
from kernels_src._pdl import wait_for_predecessor
from kernels_src.activation import _activate


@triton.jit
def matmul_kernel(
    A,
    B,
    C,
    Input,
    Residual,
    M,
    N,
    K,
    stride_az,
    stride_am,
    stride_bz,
    stride_b,
    stride_cz,
    stride_cm,
    stride_im,
    stride_in,
    stride_rm,
    alpha,
    beta,
    has_input,
    has_residual,
    act,
    B_K_CONTIGUOUS: tl.constexpr,
    EPILOGUE: tl.constexpr,
    IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PDL: tl.constexpr = False,
):
    wait_for_predecessor(PDL)
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tiles_m * tiles_n
    z = pid // tiles
    tile = pid % tiles
    group = GROUP_M * tiles_n
    first_m = (tile // group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (tile % group) % group_m
    pid_n = (tile % group) // group_m

    # Rows past the edge read a valid row (mod M) and are dropped at the store. Along a contiguous dim the
    # index must stay a plain range for loads to vectorize, so N-contiguous b masks columns instead.
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rk = tl.arange(0, BLOCK_K)
    A += z.to(tl.int64) * stride_az
    B += z.to(tl.int64) * stride_bz
    a_ptrs = A + rm[:, None].to(tl.int64) * stride_am + rk[None, :]
    if B_K_CONTIGUOUS:
        rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        b_ptrs = B + rk[:, None] + rn[None, :].to(tl.int64) * stride_b
        b_step = BLOCK_K
        n_ok = rn[None, :] >= 0  # always true: every column read is valid
    else:
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        b_ptrs = B + rk[:, None].to(tl.int64) * stride_b + rn[None, :]
        b_step = BLOCK_K * stride_b
        n_ok = rn[None, :] < N
    precision: tl.constexpr = "ieee" if IEEE else "tf32"
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):
        if B_K_CONTIGUOUS:
            b = tl.load(b_ptrs)
        else:
            b = tl.load(b_ptrs, mask=n_ok, other=0.0)
        acc = tl.dot(tl.load(a_ptrs), b, acc, input_precision=precision)
        a_ptrs += BLOCK_K
        b_ptrs += b_step
    tail = K % BLOCK_K
    if tail:
        a = tl.load(a_ptrs, mask=rk[None, :] < tail, other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < tail) & n_ok, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=precision)

    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if EPILOGUE:  # 2-D problems only (z == 0), in two halves of the tile's columns to bound the registers
        left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
        cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N // 2)
        # fmt: off
        _epilogue(left, C, Input, Residual, cm, cn, M, N, stride_cm, stride_im, stride_in, stride_rm, alpha, beta,
                  has_input, has_residual, act)
        _epilogue(right, C, Input, Residual, cm, cn + BLOCK_N // 2, M, N, stride_cm, stride_im, stride_in, stride_rm,
                  alpha, beta, has_input, has_residual, act)
        # fmt: on
    else:
        cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = C + z.to(tl.int64) * stride_cz + cm[:, None].to(tl.int64) * stride_cm + cn[None, :]
        tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def _epilogue(acc, C, Input, Residual, cm, cn, M, N, stride_cm, stride_im, stride_in, stride_rm, alpha, beta,
              has_input, has_residual, act):  # fmt: skip
    """act(alpha * acc + beta * input) + residual for the columns cn of the tile's rows cm, stored to C."""
    mask = (cm[:, None] < M) & (cn[None, :] < N)
    acc = acc * alpha
    if has_input:
        i_ptrs = Input + cm[:, None].to(tl.int64) * stride_im + cn[None, :].to(tl.int64) * stride_in
        acc += beta * tl.load(i_ptrs, mask=mask, other=0.0).to(tl.float32)
    acc = _activate(acc, act)
    if has_residual:
        acc += tl.load(Residual + cm[:, None].to(tl.int64) * stride_rm + cn[None, :], mask=mask, other=0.0).to(
            tl.float32
        )
    tl.store(C + cm[:, None].to(tl.int64) * stride_cm + cn[None, :], acc.to(C.dtype.element_ty), mask=mask)


@triton.jit
def matmul_reduce_kernel(Partial, C, Input, Residual, M, N, k_splits, stride_cm, stride_im, stride_in, stride_rm, alpha,
                         beta, has_input, has_residual, act, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         PDL: tl.constexpr = False):  # fmt: skip
    """Split-K's second launch: c = epilogue(sum over the k_splits slices of Partial (k_splits, M, N), float32)."""
    wait_for_predecessor(PDL)
    cm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (cm[:, None] < M) & (cn[None, :] < N)
    offsets = cm[:, None].to(tl.int64) * N + cn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for split in range(0, k_splits):
        acc += tl.load(Partial + split * M.to(tl.int64) * N + offsets, mask=mask, other=0.0)
    _epilogue(acc, C, Input, Residual, cm, cn, M, N, stride_cm, stride_im, stride_in, stride_rm, alpha, beta,
              has_input, has_residual, act)  # fmt: skip


@triton.jit
def gemv_kernel(A, B, C, Input, Residual, N, K, stride_b, stride_in, alpha, beta, has_input, has_residual, act,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr = False):  # fmt: skip
    """c[0, n] = act(alpha * (a[0, :] . b[n, :]) + beta * input[n]) + residual[0, n] for one contiguous row a and b
    (N, K) with contiguous rows, on CUDA cores in float32 (full precision for float32 too). Each thread keeps its
    products of the (BLOCK_N, BLOCK_K) tile apart until the K loop ends, so the loop carries no reduction."""
    wait_for_predecessor(PDL)
    pid = tl.program_id(0)
    rn = (pid * BLOCK_N + tl.arange(0, BLOCK_N)) % N  # rows past the edge read a valid row, dropped at the store
    rk = tl.arange(0, BLOCK_K)
    b_ptrs = B + rn[:, None].to(tl.int64) * stride_b + rk[None, :]
    a_ptrs = A + rk
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):
        acc += tl.load(b_ptrs).to(tl.float32) * tl.load(a_ptrs).to(tl.float32)[None, :]
        b_ptrs += BLOCK_K
        a_ptrs += BLOCK_K
    tail = K % BLOCK_K
    if tail:
        b = tl.load(b_ptrs, mask=rk[None, :] < tail, other=0.0).to(tl.float32)
        acc += b * tl.load(a_ptrs, mask=rk < tail, other=0.0).to(tl.float32)[None, :]
    row = tl.reshape(tl.sum(acc, axis=1), (1, BLOCK_N))
    cn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    _epilogue(row, C, Input, Residual, tl.arange(0, 1), cn, 1, N, 0, 0, stride_in, 0, alpha, beta, has_input,
              has_residual, act)  # fmt: skip


def gemv_configs(target: Target, keys) -> list[Config]:
    """8 weight rows a program, 16 KB of them a step in 16-bit types (8 KB in float32's half as deep steps);
    measured on an H100 only (gemv_forms.py: 8 x 512 ahead of 16 x 512, 16 x 256 and 32 x 256 by 0-20%)."""
    return [Config({"BLOCK_N": 8, "BLOCK_K": 256 if keys["T"] == "fp32" else 512}, num_warps=4, num_stages=3)]


def configs(target: Target, keys) -> list[Config]:
    if keys["T"] == "fp32":  # CUDA cores
        return [Config({"IEEE": True, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 3)]
    big_smem = target.arch in (90, 100)  # 227 KB of shared memory: deep K tiles
    deep = 4 if big_smem else 3  # stages of the narrow tiles: 3 within the 99 KB parts (sm_80 serves every 8.x GPU)
    # Decode batches stream the weight once. The 128-row tile gives a 4096-column weight 16 programs (0.16-0.25
    # TB/s on an H100); narrow tiles spread it over 128: 16 x 32 tiles of 256-deep K steps up to 16 rows, 64 x 32
    # of 128 up to 64 (2.0-2.3 and 1.9-2.0 TB/s there by a JIT sweep, cuBLAS 2.0-2.2). Up to 256 rows on a weight
    # of at most 8192 columns the 128-row tile still leaves most SMs idle (16-64 programs for 4096 columns:
    # 0.36-0.46x cuBLAS); 64 x 64 tiles give it 4x as many. Aligned arguments only (fallback=False): a rare
    # unaligned call takes the 128-row tile's unhinted variant. Transposed weights of more than 32 rows per SM read
    # at 2.1-2.3 TB/s in the wheel at 6144 and 14336 rows on an H100 (1.5 and 3.4 programs of the 16 x 32 tile per
    # SM); 16 x 64 tiles of 128-deep steps read 2.3-2.7 there (cuBLAS 2.2-2.8), equal at 128256 rows, and lose 10% on
    # 4096 rows; 32 x 64 ones lift 17 rows from 2.0-2.3 to 2.2-2.9 on 6144 to 128256 rows
    # (benchmarks/results/h100-2026-11-26-experiments.md, stop 34). Measured on transposed weights only; a b of
    # contiguous rows keeps the narrow tiles. 17 to 32 rows on other weights take 32 x 32 tiles of 256-deep steps (128
    # on the 99 KB parts): the 64-row tile reads its rows twice as often from L2 and left 4096 x 4096 at 2.0 TB/s and
    # 4096 x 14336 at 2.0-2.4, where these read 2.2 and 2.6 (cuBLAS 2.1-2.2 and 2.5-2.7).
    wide = [(m, 64, 128, 1, deep, f"M <= {m} && N > 32 * NUM_SMS") for m in (16, 32)] if keys["B_K_CONTIGUOUS"] else []
    narrow = [  # BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, when
        *wide,
        (16, 32, 256, 1, deep, "M <= 16"),
        (32, 32, 256 if big_smem else 128, 1, deep, "M <= 32"),
        (64, 32, 128, 1, deep, "M <= 64"),
        (64, 64, 64, 8, 4, "M <= 256 && N <= 8192"),
    ]
    decode = [
        Config(
            {"IEEE": False, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group},
            num_warps=4,
            num_stages=num_stages,
            when=when,
            fallback=False,
        )
        for bm, bn, bk, group, num_stages, when in narrow
    ]
    if big_smem:
        block_n, warps, stages = (256, 8, 3) if target.arch == 90 else (128, 8, 4)
        tile = {"BLOCK_M": 128, "BLOCK_N": block_n, "BLOCK_K": 64}
        return [*decode, Config({"IEEE": False, **tile, "GROUP_M": 8}, num_warps=warps, num_stages=stages)]
    # sm_80 serves every 8.x GPU and sm_120 is consumer Blackwell: 64 KB of stages fits their 99 KB
    tile = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}
    return [*decode, Config({"IEEE": False, **tile, "GROUP_M": 8}, num_warps=4, num_stages=4)]


def ws_configs(target: Target, keys) -> list[Config]:
    """matmul_ws: 128 x 256 tiles of 64-deep steps in three stages (144 KB) beside the two consumers' output tiles
    (64 KB); where those would fill less than 90% of the multiprocessors, 128 x 128 tiles in five stages (160 + 32
    KB). It serves what matmul_kernel's 128-row tile would (more than 256 rows, or more than 8192 columns, past the
    decode batches' narrow tiles), and 65 to 256 rows against at most 8192 columns in K slices (k_splits, which the
    launcher sets where the tiles alone would not fill the GPU: csrc/ops/matmul.c's ws_splits); it takes a bias row
    only (stride_im 0): other inputs stay with matmul_kernel.
    H100, bf16 (benchmarks/results/h100-2026-11-26-experiments.md, stop 35): 512 x 14336 -> 4096 went from 446 to
    718 TFLOP/s on the narrower tile, 1024 x 14336 -> 4096 (128 of the wide tiles) read 798 on the wide one, 743 on
    the narrow one."""
    serves = "M > 64 && (M > 256 || N > 8192 || k_splits > 1) && stride_im == 0"
    narrow = f"{serves} && 10 * cdiv(M, 128) * cdiv(N, 256) < 9 * NUM_SMS"
    configs = []
    for block_n, stages, when in ((128, 5, narrow), (256, 3, serves)):
        box = (block_n, 64) if keys["B_K_CONTIGUOUS"] else (64, block_n)
        constexprs = {"BLOCK_N": block_n, "BLOCK_K": 64, "STAGES": stages, "B_ROWS": box[0], "B_COLS": box[1]}
        configs.append(Config(constexprs, num_warps=4, num_stages=1, maxnreg=ws_maxnreg(128), when=when))
    return configs


# the fused epilogue's run-time switches, last among each matmul kernel's arguments
EPILOGUE_ARGS = [f32("alpha"), f32("beta"), i32("has_input"), i32("has_residual"), i32("act")]

KERNELS = [
    Kernel(
        fn=matmul_kernel,
        op="matmul",
        args=[
            ptr("A", "T"),
            ptr("B", "T"),
            ptr("C", "T"),
            ptr("Input", "T", aligned=False),
            ptr("Residual", "T"),
            i32("M"),
            i32("N", aligned=True),
            i32("K"),
            i64("stride_az", aligned=True),
            i64("stride_am", aligned=True),
            i64("stride_bz", aligned=True),
            i64("stride_b", aligned=True),
            i64("stride_cz", aligned=True),
            i64("stride_cm", aligned=True),
            i64("stride_im"),
            i64("stride_in"),
            i64("stride_rm", aligned=True),
            *EPILOGUE_ARGS,
        ],
        keys={
            "T": ["fp16", "bf16", "fp32"],
            "B_K_CONTIGUOUS": [False, True],
            "EPILOGUE": [False, True],
        },
        grid_args=[i64("batch")],
        grid=["cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) * batch", "1", "1"],
        configs=configs,
    ),
    Kernel(
        fn=gemv_kernel,
        op="matmul",
        args=[
            ptr("A", "T"),
            ptr("B", "T"),
            ptr("C", "T", aligned=False),
            ptr("Input", "T", aligned=False),
            ptr("Residual", "T", aligned=False),
            i32("N"),
            i32("K"),
            i64("stride_b", aligned=True),
            i64("stride_in"),
            *EPILOGUE_ARGS,
        ],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid=["cdiv(N, BLOCK_N)", "1", "1"],
        configs=gemv_configs,
    ),
    Kernel(
        fn=matmul_ws,
        op="matmul",
        args=[
            tensor_desc("desc_a", "T", (WG_ROWS.value, "BLOCK_K")),
            tensor_desc("desc_b", "T", ("B_ROWS", "B_COLS")),
            tensor_desc("desc_c", "T", (WG_ROWS.value, "BLOCK_N")),
            tensor_desc("desc_r", "T", (WG_ROWS.value, "BLOCK_N")),
            ptr("Input", "T"),  # 16-byte aligned (or NULL): the bias row's loads are vectors
            ptr("Partial", "fp32"),
            i32("M"),
            i32("N"),
            i32("K"),
            i32("k_splits"),
            i64("stride_im"),
            i64("stride_in"),
            *EPILOGUE_ARGS,
        ],
        keys={"T": ["fp16", "bf16"], "B_K_CONTIGUOUS": [False, True]},
        grid=[f"min(cdiv(M, {2 * WG_ROWS.value}) * cdiv(N, BLOCK_N) * k_splits, NUM_SMS)", "1", "1"],  # work items
        configs=ws_configs,
        aligned=ALIGNED_ONLY,
        targets=is_hopper,
    ),
    Kernel(
        fn=matmul_reduce_kernel,
        op="matmul",
        args=[
            ptr("Partial", "fp32"),
            ptr("C", "T"),
            ptr("Input", "T", aligned=False),
            ptr("Residual", "T"),
            i32("M"),
            i32("N", aligned=True, divisor=8),
            i32("k_splits"),
            i64("stride_cm", aligned=True, divisor=8),
            i64("stride_im"),
            i64("stride_in"),
            i64("stride_rm", aligned=True, divisor=8),
            *EPILOGUE_ARGS,
        ],
        keys={"T": ["fp16", "bf16"]},
        grid=["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "1"],
        configs=[Config({"BLOCK_M": 16, "BLOCK_N": 256}, num_warps=4, num_stages=1)],
        aligned=ALIGNED_ONLY,
        targets=is_hopper,  # matmul_ws's partner
    ),
]
