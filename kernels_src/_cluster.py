"""Thread-block clusters (aot.spec.Config.cluster): the programs of one cluster run together, so they may wait for
one another, which the programs of a plain grid may not."""

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

# arrive releases, wait acquires, at cluster scope; then a 0 to hand back (see cluster_barrier)
BARRIER_PTX = tl.constexpr(
    "barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n\tmov.u32 $0, 0;"
)


@gluon.jit
def cluster_barrier():
    """Wait until every program of this cluster has arrived here: the writes each made before (global memory
    included) are then visible to all (arrive releases, wait acquires, at cluster scope). Returns 0, for the
    addresses read next, so that those loads depend on the wait; scale it by the vector width before adding it to a
    pointer whose 16-byte alignment the compiler must keep (an unknown offset costs the stores their vectors: 4x
    slower, h100-2026-11-27-experiments.md, stop 40). (Gluon's cluster.barrier needs a kernel compiled for several
    CTAs, num_ctas > 1, which lays tensors out across them; these programs each lay out their own.)"""
    return gl.inline_asm_elementwise(BARRIER_PTX, "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@triton.jit
def cluster_sync():
    """cluster_barrier for Triton kernels (launched in clusters the same way)."""
    return tl.inline_asm_elementwise(BARRIER_PTX, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
