"""Programmatic dependent launch (aot.spec.PDL_PARAM): every kernel's first statement."""

import triton
import triton.language as tl


@triton.jit
def wait_for_predecessor(PDL: tl.constexpr):
    """With PDL (set by the generator on CUDA sm_90 and later, whose variants the runtime launches with the
    programmatic-serialization attribute), this kernel's blocks may start while the previous kernel in the stream
    finishes: they wait here until its writes are visible (and its reads done) before touching memory. Launched
    without the attribute, the wait returns at once (benchmarks/experiments/pdl_sizes.py)."""
    if PDL:
        tl.extra.cuda.gdc_wait()
