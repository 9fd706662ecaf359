"""Elementwise ops over flat contiguous tensors: add."""

import triton
import triton.language as tl

from aot.spec import Config, Kernel, i64, ptr


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offsets = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:  # every block but the last: unmasked, so loads vectorize whatever n is
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))
    else:
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)


KERNELS = [
    Kernel(
        fn=add_kernel,
        op="add",
        args=[ptr("x_ptr", "T"), ptr("y_ptr", "T"), ptr("out_ptr", "T"), i64("n")],
        keys={"T": ["fp16", "bf16", "fp32"]},
        grid=["cdiv(n, BLOCK)", "1", "1"],
        configs=[Config({"BLOCK": 2048}, num_warps=4)],
    ),
]
