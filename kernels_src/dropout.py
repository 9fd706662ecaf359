"""dropout: out = x * keep / (1 - p), keep drawn with Philox4x32-10 (kernels_src/_philox.py): element i of the
contiguous x takes output i % 4 of counter offset + i // 4 under the 64-bit seed, and is kept when its uniform value
is at least p. Each Philox call serves four elements."""

import triton
import triton.language as tl

from aot.spec import Config, Kernel, f32, i64, ptr
from kernels_src._pdl import wait_for_predecessor
from kernels_src._philox import philox4x32, uniform


@triton.jit
def _dropout_block(X, Y, offs, keep, scale, mask, MASKED: tl.constexpr):
    if MASKED:
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    else:
        x = tl.load(X + offs).to(tl.float32)
    y = tl.where(keep, x * scale, 0.0).to(Y.dtype.element_ty)
    if MASKED:
        tl.store(Y + offs, y, mask=mask)
    else:
        tl.store(Y + offs, y)


@triton.jit
def dropout_kernel(X, Y, n, p, scale, seed, offset, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    wait_for_predecessor(PDL)
    start = tl.program_id(0).to(tl.int64) * BLOCK
    counter = offset + start // 4 + tl.arange(0, BLOCK // 4)
    zero = tl.zeros((BLOCK // 4,), dtype=tl.uint32)
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
    k1 = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    r0, r1, r2, r3 = philox4x32(counter.to(tl.uint32), (counter >> 32).to(tl.uint32), zero, zero, k0, k1)
    # join(a, b) stacks along a new last dim, so this [j, m, n] holds output 2m + n: element 4j + k takes output k
    bits = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), (BLOCK,))
    keep = uniform(bits) >= p
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:
        _dropout_block(X, Y, offs, keep, scale, None, False)
    else:
        _dropout_block(X, Y, offs, keep, scale, offs < n, True)


KERNELS = [
    Kernel(
        fn=dropout_kernel,
        op="dropout",
        args=[ptr("X", "T"), ptr("Y", "T"), i64("n"), f32("p"), f32("scale"), i64("seed"), i64("offset")],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid=["cdiv(n, BLOCK)", "1", "1"],
        configs=[Config({"BLOCK": 1024}, num_warps=4)],
    ),
]
