"""Sampling for servers: one token per row of logits, by Gumbel-max over the tokens top_k and top_p keep, without
sorting the vocabulary. One program per row streams the row (it stays in L2 between passes); on Hopper, few rows
of 16385 to 131072 tokens are held instead in the registers of a thread-block cluster of 8 programs a row, which sum
each pass's counts or masses across the cluster (sample_cluster_kernel):
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

from aot.spec import ALIGNED_ONLY, Config, Kernel, f32, i32, i64, is_hopper, ptr
from kernels_src._cluster import cluster_sync
from kernels_src._pdl import wait_for_predecessor
from kernels_src._philox import philox4x32

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _key(x):
    """An int32 that orders like the float32 x (-0 just below +0; NaN aside): the thresholds are bisected as keys."""
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


@triton.jit
def _value(key):
    """The float32 whose key (_key) is `key`. The filters compare logits with a threshold's value as floats: one
    compare a token, and NaN is at or above no threshold, so no filter counts it and no draw keeps it (as -inf)."""
    bits = tl.where(key < 0, key ^ 0x7FFFFFFF, key)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _count_at_or_above(X, n, threshold, BLOCK: tl.constexpr):
    """The number of tokens at or above the key threshold."""
    at_least = _value(threshold)
    cols = tl.arange(0, BLOCK)
    count = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(0, n, BLOCK):
        c = start + cols
        x = tl.load(X + c, mask=c < n, other=-float("inf")).to(tl.float32)
        count += ((c < n) & (x >= at_least)).to(tl.int32)
    return tl.sum(count, axis=0)


@triton.jit
def _mass_at_or_above(X, n, threshold, floor, row_max, inv_t, BLOCK: tl.constexpr):
    """Sum of exp((x - max) / temperature) over the tokens whose key is at least threshold and floor."""
    at_least = _value(tl.maximum(threshold, floor))
    cols = tl.arange(0, BLOCK)
    mass = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        c = start + cols
        x = tl.load(X + c, mask=c < n, other=-float("inf")).to(tl.float32)
        e = tl.exp2((x - row_max) * (inv_t * LOG2E))
        mass += tl.where((c < n) & (x >= at_least), e, 0.0)
    return tl.sum(mass, axis=0)


@triton.jit
def _row_settings(
    row, Temperatures, TopKs, TopPs, temperature, top_k, top_p, per_row_temperature, per_row_top_k, per_row_top_p
):  # fmt: skip
    """The row's temperature, top_k and top_p (from the per-row arrays where the call passed them), whether it is
    greedy, and 1 / temperature (1 when greedy)."""
    if per_row_temperature:
        temperature = tl.load(Temperatures + row)
    if per_row_top_k:
        top_k = tl.load(TopKs + row)
    if per_row_top_p:
        top_p = tl.load(TopPs + row)
    greedy = temperature == 0.0
    return temperature, top_k, top_p, greedy, tl.where(greedy, 1.0, 1.0 / temperature)


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
    temperature, top_k, top_p, greedy, inv_t = _row_settings(
        row, Temperatures, TopKs, TopPs, temperature, top_k, top_p, per_row_temperature, per_row_top_k, per_row_top_p
    )
    cols = tl.arange(0, BLOCK)

    floor = _key(tl.full([], -float("inf"), dtype=tl.float32))  # every token but NaN (at or above no value)
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
    at_least = _value(floor)
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
        score = tl.where((c < hi) & (x >= at_least), x * inv_t + gumbel, -float("inf"))
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


@triton.jit
def _publish(W, rank, parity, a, b, CLUSTER: tl.constexpr, PAIR: tl.constexpr = True):
    """Write this program's float32 pair (a, b) (a alone unless PAIR) to the slots of W (row-private) that this
    exchange's parity names, and wait for every program of the cluster to have written its own. Returns the parity's
    slots (a's CLUSTER, then b's), offset by the barrier's 0 so that their loads follow it. Exchanges alternate
    parities: a program rewrites a parity's slots only after the next exchange's barrier, which no program reaches
    before reading these."""
    slot = W + parity * (2 * CLUSTER)
    tl.store(slot + rank, a)
    if PAIR:
        tl.store(slot + CLUSTER + rank, b)
    return slot + cluster_sync()


@triton.jit
def _cluster_sum(W, rank, parity, value, CLUSTER: tl.constexpr):
    """The sum of the programs' float32 `value`s, in rank order, the same in every program."""
    slot = _publish(W, rank, parity, value, 0.0, CLUSTER, PAIR=False)
    return tl.sum(tl.load(slot + tl.arange(0, CLUSTER), cache_modifier=".cg"), axis=0)


@triton.jit
def sample_cluster_kernel(
    Logits,
    Out,
    W,
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
    CLUSTER: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """sample_kernel's steps for a row split over a thread-block cluster of CLUSTER programs (program_id(0) =
    row * CLUSTER + rank): each holds its share of the row (cdiv(n, CLUSTER) rounded up to 16 tokens, at most
    BLOCK) in registers, and each step of the bisections sums the programs' counts or masses through W (4 * CLUSTER
    float32 a row, see _publish), where sample_kernel's one program per row walks the whole row from L2 each step.
    The counts are exact, so top_k keeps the same tokens; top_p's masses are summed in another order (to float32
    rounding). Step 4 takes the shares' best scores in rank order, the first strictly greater winning, as
    sample_kernel's walk over its blocks does."""
    wait_for_predecessor(PDL)
    program = tl.program_id(0)
    row = program // CLUSTER
    rank = program % CLUSTER
    X = Logits + row.to(tl.int64) * stride_x
    W += row.to(tl.int64) * (4 * CLUSTER)
    temperature, top_k, top_p, greedy, inv_t = _row_settings(
        row, Temperatures, TopKs, TopPs, temperature, top_k, top_p, per_row_temperature, per_row_top_k, per_row_top_p
    )
    share = tl.cdiv(n, CLUSTER * 16) * 16
    lo_c = rank * share
    hi_c = tl.minimum(lo_c + share, n)

    floor = _key(tl.full([], -float("inf"), dtype=tl.float32))
    parity = rank * 0
    if (temperature != 0.0) & (((top_k > 0) & (top_k < n)) | (top_p < 1.0)):
        c = lo_c + tl.arange(0, BLOCK)
        inside = c < hi_c
        x = tl.load(X + c, mask=inside, other=-float("inf")).to(tl.float32)
        # 1. the max and min
        slot = _publish(W, rank, parity, tl.max(x, axis=0), tl.min(tl.where(inside, x, float("inf")), axis=0), CLUSTER)
        parity = 1 - parity
        ranks = tl.arange(0, CLUSTER)
        row_max = tl.max(tl.load(slot + ranks, cache_modifier=".cg"), axis=0)
        key_lo = _key(tl.min(tl.load(slot + CLUSTER + ranks, cache_modifier=".cg"), axis=0))
        key_hi = _key(row_max)

        # 2. top_k
        floor = key_lo
        if (top_k > 0) & (top_k < n):
            lo = key_lo.to(tl.int64)
            hi = key_hi.to(tl.int64)
            while lo < hi:
                mid = lo + (hi - lo + 1) // 2
                count = tl.sum((inside & (x >= _value(mid.to(tl.int32)))).to(tl.float32), axis=0)  # exact below 2^24
                if _cluster_sum(W, rank, parity, count, CLUSTER) >= top_k:
                    lo = mid
                else:
                    hi = mid - 1
                parity = 1 - parity
            floor = lo.to(tl.int32)

        # 3. top_p
        if top_p < 1.0:
            e = tl.where(inside & (x >= _value(floor)), tl.exp2((x - row_max) * (inv_t * LOG2E)), 0.0)
            goal = top_p * _cluster_sum(W, rank, parity, tl.sum(e, axis=0), CLUSTER)
            parity = 1 - parity
            lo = floor.to(tl.int64)
            hi = key_hi.to(tl.int64)
            while lo < hi:
                mid = lo + (hi - lo + 1) // 2
                mass = tl.sum(tl.where(x >= _value(mid.to(tl.int32)), e, 0.0), axis=0)
                if _cluster_sum(W, rank, parity, mass, CLUSTER) >= goal:
                    lo = mid
                else:
                    hi = mid - 1
                parity = 1 - parity
            floor = lo.to(tl.int32)

    # 4. each share's best, then the first strictly greater in rank order
    best, best_index = _gumbel_best(X, lo_c, hi_c, floor, inv_t, greedy, seed, offset, first_row + row, 2048)
    slot = _publish(W, rank, parity, best, best_index.to(tl.float32), CLUSTER)  # a token below 2^24: exact
    if rank == 0:
        best = -float("inf")
        best_index = tl.full([], -1, dtype=tl.int64)
        for r in tl.static_range(CLUSTER):
            score = tl.load(slot + r, cache_modifier=".cg")
            if score > best:
                best = score
                best_index = tl.load(slot + CLUSTER + r, cache_modifier=".cg").to(tl.int64)
        tl.store(Out + row, tl.where(best_index < 0, 0, best_index))


CHUNK_BLOCK = 4096  # sample_chunks_kernel's tokens a program


# sample_kernel's and sample_cluster_kernel's arguments after their outputs and workspace
ROW_PARAMETERS = [
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
]
CLUSTER = 8  # sample_cluster_kernel's programs a row (the portable cluster size)
CLUSTER_BLOCK = 16384  # and the most tokens each holds
# sample_cluster_kernel's rows at most, per CLUSTER multiprocessors. An H100 runs about 15 clusters of 8 at once (one
# program per multiprocessor, and a cluster within one GPC), so 128256 bf16 tokens a row took 59 us of device time
# (top_k 50) and 90 (top_k 50 and top_p 0.9) at batch 1-8, 115 and 179 at 16, 231 and 359 at 48, 289 and 451 at 66,
# against sample_kernel's 240-246 and 425-446 at any batch to 132 (benchmarks/experiments/sample_cluster.py, stop 46).
# Since stop 47 sample_kernel's filters compare floats (205 and 358 from 64 rows on): at 48 rows top_k 50 alone would
# now be about 10% faster there, top_p 0.9 alone 17% slower, both even; the rule stays.
CLUSTER_ROWS_PER_SM = 3

KERNELS = [
    Kernel(
        fn=sample_kernel,
        op="sample",
        args=[ptr("Logits", "T"), ptr("Out", "i64", aligned=False), *ROW_PARAMETERS],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("n_rows")],
        grid=["n_rows", "1", "1"],
        # a program's passes are bound by the bytes its loads keep in flight, one row per SM at small batches: 16384
        # elements a step over 32 warps (2 stages) took an H100's one-row top_k + top_p from 554 to 435 us and 256
        # rows' from 1540 to 910 against 4096 over 8 warps (benchmarks/experiments/sample_blocks.py, stop 34)
        configs=[Config({"BLOCK": 16384}, num_warps=32, num_stages=2)],
    ),
    Kernel(
        fn=sample_cluster_kernel,
        op="sample",
        args=[
            ptr("Logits", "T"),
            ptr("Out", "i64", aligned=False),
            ptr("W", "fp32", aligned=False),
            *ROW_PARAMETERS,
        ],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid_args=[i64("n_rows")],
        grid=["n_rows", "1", "1"],
        targets=is_hopper,
        aligned=ALIGNED_ONLY,  # rows that miss the hints (an odd vocabulary) take sample_kernel
        configs=[
            Config(
                {"BLOCK": CLUSTER_BLOCK, "CLUSTER": CLUSTER},
                num_warps=16,
                num_stages=1,
                cluster=CLUSTER,
                when=f"n > {CLUSTER_BLOCK} && n <= {CLUSTER * CLUSTER_BLOCK} && "
                f"n_rows * {CLUSTER} <= {CLUSTER_ROWS_PER_SM} * NUM_SMS",
            )
        ],
        exports={"CLUSTER": CLUSTER},  # the workspace's slots a row: 4 * CLUSTER float32
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
