"""Batched matmul: c[z] = a[z] @ b[z] with a (M, K) rows contiguous, b (K, N) either N-contiguous or
K-contiguous (a transposed weight), c (M, N) contiguous; a batch stride of 0 broadcasts.

Tiles are visited in groups of GROUP_M rows for L2 reuse; the batch index is folded into grid x (no 65535
limit). The K loop runs unmasked over whole blocks and peels the tail, so the pipelined main loop has no masks.
fp16/bf16 accumulate in float32 on tensor cores; float32 is multiplied in full precision (no TF32).
"""

import triton
import triton.language as tl

from aot.spec import Config, Kernel, Target, i32, i64, ptr


@triton.jit
def matmul_kernel(
    A,
    B,
    C,
    M,
    N,
    K,
    stride_az,
    stride_am,
    stride_bz,
    stride_b,
    stride_cz,
    stride_cm,
    B_K_CONTIGUOUS: tl.constexpr,
    IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
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
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = C + z.to(tl.int64) * stride_cz + cm[:, None].to(tl.int64) * stride_cm + cn[None, :]
    tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def configs(target: Target, keys) -> list[Config]:
    if keys["T"] == "fp32":  # CUDA cores
        return [Config({"IEEE": True, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 3)]
    if target.arch in (90, 100):  # 227 KB of shared memory: deep K tiles
        block_n, warps, stages = (256, 8, 3) if target.arch == 90 else (128, 8, 4)
        tile = {"BLOCK_M": 128, "BLOCK_N": block_n, "BLOCK_K": 64}
        return [Config({"IEEE": False, **tile, "GROUP_M": 8}, num_warps=warps, num_stages=stages)]
    # sm_80 serves every 8.x GPU and sm_120 is consumer Blackwell: 64 KB of stages fits their 99 KB
    tile = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}
    return [Config({"IEEE": False, **tile, "GROUP_M": 8}, num_warps=4, num_stages=4)]


KERNELS = [
    Kernel(
        fn=matmul_kernel,
        op="matmul",
        args=[
            ptr("A", "T"),
            ptr("B", "T"),
            ptr("C", "T"),
            i32("M"),
            i32("N", aligned=True),
            i32("K"),
            i64("stride_az", aligned=True),
            i64("stride_am", aligned=True),
            i64("stride_bz", aligned=True),
            i64("stride_b", aligned=True),
            i64("stride_cz", aligned=True),
            i64("stride_cm", aligned=True),
        ],
        keys={"T": ["fp16", "bf16", "fp32"], "B_K_CONTIGUOUS": [False, True]},
        grid_args=[i64("batch")],
        grid=["cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) * batch", "1", "1"],
        configs=configs,
    ),
]
