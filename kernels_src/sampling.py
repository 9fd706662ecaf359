"""Sampling for servers: one token per row of logits, by Gumbel-max over the tokens top_k and top_p keep, without
sorting the vocabulary. One program per row streams the row (it stays in L2 between passes):
  1. the row's max and min (only where top_k or top_p filters the row);
  2. top_k: the k-th largest logit, by bisection over the logits' order-preserving integer keys (exact; each step
     counts the keys at or above the midpoint);
  3. top_p: the largest logit t such that the tokens at or above t (among those top_k keeps) hold at least top_p of
     the probability softmax(x / temperature), by the same bisection on the summed probability;
  4. argmax of x / temperature + g over the kept tokens, g = -log(-log(u)) Gumbel noise from Philox4x32-10
     (first index on ties); temperature 0 takes the argmax of x (greedy) and ignores top_k and top_p.
Rows no filter touches (greedy, or neither top_k nor top_p) take step 4 alone; at most one such row per two
multiprocessors is split instead: sample_chunks_kernel's program per 4096 tokens of a row writes their best score and
token, and sample_pick_kernel takes each row's first best, as the one program's walk over the row would.
Token i of row r (first_row + the program's row) draws output i % 4 of counter (offset + i // 4 (low, high word),
r, 0) under key (seed low, high), u = (top 23 bits + 0.5) / 2^23, so python/xopsaot/_philox.py reproduces every
draw on the CPU path. Every such u is exact in float32 and below 1: with 24 bits, (2^24 - 1 + 0.5) / 2^24 rounded to
1.0, whose noise is +inf, and a token drawing it won whatever its probability (a uniform pick in 0.76% of the rows of
an unfiltered 128256-token vocabulary)."""

import triton
import triton.language as tl

from aot.spec import Config, Kernel, f32, i32, i64, ptr
from kernels_src._pdl import wait_for_predecessor
from kernels_src._philox import philox4x32

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _key(x):
    """An int32 that orders like the float32 x (-0 just below +0)."""
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


@triton.jit
def _count_at_or_above(X, n, threshold, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    count = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(0, n, BLOCK):
        c = start + cols
        x = tl.load(X + c, mask=c < n, other=-float("inf")).to(tl.float32)
        count += ((c < n) & (_key(x) >= threshold)).to(tl.int32)
    return tl.sum(count, axis=0)


@triton.jit
def _mass_at_or_above(X, n, threshold, floor, row_max, inv_t, BLOCK: tl.constexpr):
    """Sum of exp((x - max) / temperature) over the tokens whose key is at least threshold and floor."""
    cols = tl.arange(0, BLOCK)
    mass = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        c = start + cols
        x = tl.load(X + c, mask=c < n, other=-float("inf")).to(tl.float32)
        k = _key(x)
        e = tl.exp2((x - row_max) * (inv_t * LOG2E))
        mass += tl.where((c < n) & (k >= threshold) & (k >= floor), e, 0.0)
    return tl.sum(mass, axis=0)


@triton.jit
def sample_kernel(
    Logits,
    Out,
    Temperatures,
    TopKs,
    TopPs,
    stride_x,
    n,
    temperature,
    top_k,
    top_p,
    per_row_temperature,
    per_row_top_k,
    per_row_top_p,
    seed,
    offset,
    first_row,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr = False,
):
    wait_for_predecessor(PDL)
    row = tl.program_id(0)
    X = Logits + row.to(tl.int64) * stride_x
    if per_row_temperature:
        temperature = tl.load(Temperatures + row)
    if per_row_top_k:
        top_k = tl.load(TopKs + row)
    if per_row_top_p:
        top_p = tl.load(TopPs + row)
    cols = tl.arange(0, BLOCK)
    greedy = temperature == 0.0
    inv_t = tl.where(greedy, 1.0, 1.0 / temperature)

    floor = _key(tl.full([], -float("inf"), dtype=tl.float32))  # every token's (but a negative NaN's, as the min's)
    if (temperature != 0.0) & (((top_k > 0) & (top_k < n)) | (top_p < 1.0)):
        # 1. the max and min
        hi_x = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
        lo_x = tl.full([BLOCK], float("inf"), dtype=tl.float32)
        for start in range(0, n, BLOCK):
            c = start + cols
            x = tl.load(X + c, mask=c < n, other=-float("inf")).to(tl.float32)
            hi_x = tl.maximum(hi_x, x)
            lo_x = tl.minimum(lo_x, tl.where(c < n, x, float("inf")))
        row_max = tl.max(hi_x, axis=0)
        key_lo = _key(tl.min(lo_x, axis=0))
        key_hi = _key(row_max)

        # 2. top_k: the largest key v with at least top_k keys >= v
        floor = key_lo
        if (top_k > 0) & (top_k < n):
            lo = key_lo.to(tl.int64)
            hi = key_hi.to(tl.int64)
            while lo < hi:
                mid = lo + (hi - lo + 1) // 2
                if _count_at_or_above(X, n, mid.to(tl.int32), BLOCK) >= top_k:
                    lo = mid
                else:
                    hi = mid - 1
            floor = lo.to(tl.int32)

        # 3. top_p: the largest key v whose tokens at or above it (and the floor) hold top_p of the kept mass
        if top_p < 1.0:
            total = _mass_at_or_above(X, n, floor, floor, row_max, inv_t, BLOCK)
            goal = top_p * total
            lo = floor.to(tl.int64)
            hi = key_hi.to(tl.int64)
            while lo < hi:
                mid = lo + (hi - lo + 1) // 2
                if _mass_at_or_above(X, n, mid.to(tl.int32), floor, row_max, inv_t, BLOCK) >= goal:
                    lo = mid
                else:
                    hi = mid - 1
            floor = lo.to(tl.int32)

    # 4. Gumbel-max over the kept tokens (a plain argmax when greedy)
    best, best_index = _gumbel_best(X, 0, n, floor, inv_t, greedy, seed, offset, first_row + row, BLOCK)
    tl.store(Out + row, tl.where(best_index < 0, 0, best_index))


@triton.jit
def _gumbel_best(X, lo, hi, floor, inv_t, greedy, seed, offset, stream, BLOCK: tl.constexpr):
    """The best score x / temperature + g over the kept tokens (key at least floor) of [lo, hi) and its first token
    (-1 where no score beats -inf); lo is a multiple of BLOCK, and stream the row's Philox stream."""
    cols = tl.arange(0, BLOCK)
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
    k1 = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    row_word = tl.full([BLOCK // 4], 0, dtype=tl.uint32) + stream.to(tl.uint32)
    zero = tl.zeros([BLOCK // 4], dtype=tl.uint32)
    best = -float("inf")
    best_index = tl.full([], -1, dtype=tl.int64)
    for start in range(lo, hi, BLOCK):
        counter = offset + start // 4 + tl.arange(0, BLOCK // 4)
        r0, r1, r2, r3 = philox4x32(counter.to(tl.uint32), (counter >> 32).to(tl.uint32), row_word, zero, k0, k1)
        bits = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), (BLOCK,))  # element i takes output i % 4
        u = ((bits >> 9).to(tl.float32) + 0.5) * 1.1920928955078125e-07  # (k + 0.5) / 2^23, exact: below 1
        c = start + cols
        x = tl.load(X + c, mask=c < hi, other=-float("inf")).to(tl.float32)
        gumbel = tl.where(greedy, 0.0, -tl.log(-tl.log(u)))
        score = tl.where((c < hi) & (_key(x) >= floor), x * inv_t + gumbel, -float("inf"))
        block_best = tl.max(score, axis=0)
        block_index = tl.argmax(score, axis=0, tie_break_left=True)
        if block_best > best:
            best = block_best
            best_index = (start + block_index).to(tl.int64)
    return best, best_index


@triton.jit
def sample_chunks_kernel(
    Logits,
    Scores,
    Tokens,
    Temperatures,
    stride_x,
    n,
    chunks,
    temperature,
    per_row_temperature,
    seed,
    offset,
    first_row,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """Rows no filter touches, split: program (row, c) (program_id(0) = row * chunks + c, chunks = cdiv(n, BLOCK))
    takes tokens [c * BLOCK, (c + 1) * BLOCK) of its row and writes their best score and first token (-1: none) to
    Scores and Tokens at row * chunks + c."""
    wait_for_predecessor(PDL)
    program = tl.program_id(0)
    row = program // chunks
    lo = (program % chunks) * BLOCK
    if per_row_temperature:
        temperature = tl.load(Temperatures + row)
    greedy = temperature == 0.0
    inv_t = tl.where(greedy, 1.0, 1.0 / temperature)
    X = Logits + row.to(tl.int64) * stride_x
    every = _key(tl.full([], -float("inf"), dtype=tl.float32))  # sample_kernel's floor for such rows
    best, best_index = _gumbel_best(X, lo, tl.minimum(lo + BLOCK, n), every, inv_t, greedy, seed, offset,
                                    first_row + row, BLOCK)  # fmt: skip
    tl.store(Scores + program, best)
    tl.store(Tokens + program, best_index.to(tl.int32))


@triton.jit
def sample_pick_kernel(Scores, Tokens, Out, chunks, PDL: tl.constexpr = False):
    """Row program_id(0)'s token: the first of its chunks' best scores that beats the ones before (and -inf), in
    chunk order, as _gumbel_best compares its blocks; token 0 where none does."""
    wait_for_predecessor(PDL)
    row = tl.program_id(0)
    best = -float("inf")
    best_index = tl.full([], -1, dtype=tl.int32)
    for c in range(chunks):
        score = tl.load(Scores + row * chunks + c)
        if score > best:
            best = score
            best_index = tl.load(Tokens + row * chunks + c)
    tl.store(Out + row, tl.where(best_index < 0, 0, best_index).to(tl.int64))


CHUNK_BLOCK = 4096  # sample_chunks_kernel's tokens a program


KERNELS = [
    Kernel(
        fn=sample_kernel,
        op="sample",
        args=[
            ptr("Logits", "T"),
            ptr("Out", "i64", aligned=False),
            ptr("Temperatures", "fp32", aligned=False),
            ptr("TopKs", "i32", aligned=False),
            ptr("TopPs", "fp32", aligned=False),
            i64("stride_x", aligned=True),
            i32("n", aligned=True),
            f32("temperature"),
            i32("top_k"),
            f32("top_p"),
            i32("per_row_temperature"),
            i32("per_row_top_k"),
            i32("per_row_top_p"),
            i64("seed"),
            i64("offset"),
            i32("first_row"),
        ],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("n_rows")],
        grid=["n_rows", "1", "1"],
        # a program's passes are bound by the bytes its loads keep in flight, one row per SM at small batches: 16384
        # elements a step over 32 warps (2 stages) took an H100's one-row top_k + top_p from 554 to 435 us and 256
        # rows' from 1540 to 910 against 4096 over 8 warps (benchmarks/experiments/sample_blocks.py, stop 34)
        configs=[Config({"BLOCK": 16384}, num_warps=32, num_stages=2)],
    ),
    Kernel(
        fn=sample_chunks_kernel,
        op="sample",
        args=[
            ptr("Logits", "T"),
            ptr("Scores", "fp32", aligned=False),
            ptr("Tokens", "i32", aligned=False),
            ptr("Temperatures", "fp32", aligned=False),
            i64("stride_x", aligned=True),
            i32("n", aligned=True),
            i32("chunks"),
            f32("temperature"),
            i32("per_row_temperature"),
            i64("seed"),
            i64("offset"),
            i32("first_row"),
        ],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("n_rows")],
        grid=["n_rows * chunks", "1", "1"],
        configs=[Config({"BLOCK": CHUNK_BLOCK}, num_warps=8)],
        exports={"BLOCK": CHUNK_BLOCK},  # a chunk's tokens
    ),
    Kernel(
        fn=sample_pick_kernel,
        op="sample",
        args=[
            ptr("Scores", "S", aligned=False),
            ptr("Tokens", "i32", aligned=False),
            ptr("Out", "i64", aligned=False),
            i32("chunks"),
        ],
        keys={"S": ["fp32"]},  # (the keys name a dtype: Scores')
        grid_args=[i64("n_rows")],
        grid=["n_rows", "1", "1"],
        configs=[Config({}, num_warps=1)],
    ),
]
