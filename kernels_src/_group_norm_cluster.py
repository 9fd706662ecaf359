"""group_norm on Hopper for groups past 64 KB, split over a thread-block cluster (aot.spec.Config.cluster), written in
Gluon, as softmax_cluster_kernel splits long rows (_softmax_cluster.py): each of a group's CLUSTER programs copies its
share of the group into shared memory with cp.async and sums it and its squares around the group's first element as
each step lands (group_norm_held_kernel's copy_group and group_sums), and writes the two sums over its share's first
output elements;
after a cluster barrier each adds the cluster's sums, and after a second (no program overwrites its sums before the
others have read them) writes its share of the output from shared memory. x is read from memory once, where the
split path (group_norm_stats_kernel, then group_norm_kernel) reads it twice.

Semantics are group_norm_kernel's (norm.py): x and y contiguous (N, C, *spatial), program_id(0) // CLUSTER the
(sample, group) row of n_elems = channels_per_group * spatial elements; its configs (norm.py) take groups of 48 KB to
HELD elements a program, whose spatial size is a multiple of the 16-byte vector (a vector's elements share a channel;
shares are whole vectors, none empty)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language.extra.cuda import gdc_wait

from kernels_src._cluster import cluster_barrier
from kernels_src._group_norm_held import allocate_group, copy_group, group_sums, write_group


@gluon.jit
def group_norm_cluster_kernel(
    X, W, B, Y, n_elems, spatial, channels_per_group, groups, eps, has_weight, has_bias,
    HELD: gl.constexpr, CHUNK: gl.constexpr, CLUSTER: gl.constexpr, PDL: gl.constexpr = False,
):  # fmt: skip
    held = allocate_group(X.dtype.element_ty, HELD, CHUNK)
    VEC: gl.constexpr = held.type.shape[2]  # elements per 16-byte copy
    program = gl.program_id(0)
    row = program // CLUSTER
    share = gl.cdiv(n_elems, CLUSTER * VEC) * VEC
    start = (program % CLUSTER) * share
    n = gl.minimum(gl.maximum(n_elems - start, 0), share)  # this program's elements
    base = row.to(gl.int64) * n_elems
    if PDL:
        gdc_wait()
    copy_group(held, X + base + start, n)
    # sums around the group's first element, the same shift in every program
    shift = gl.load(X + base).to(gl.float32)
    total, squares = group_sums(held, n, shift)
    partial = (Y + base + start).to(gl.pointer_type(gl.float32), bitcast=True)
    gl.store(partial, total)
    gl.store(partial + 1, squares)
    after = cluster_barrier()

    ranks = gl.arange(0, CLUSTER, layout=gl.BlockedLayout([1], [32], [gl.num_warps()], [0]))
    partials = (Y + base + after + ranks * share).to(gl.pointer_type(gl.float32), bitcast=True)
    sums = gl.load(partials, cache_modifier=".cg")
    sums_of_squares = gl.load(partials + 1, cache_modifier=".cg")
    mean_shifted = gl.sum(sums, 0) / n_elems
    var = gl.maximum(gl.sum(sums_of_squares, 0) / n_elems - mean_shifted * mean_shifted, 0.0)
    mean = shift + mean_shifted
    rstd = gl.rsqrt(var + eps)
    Y += cluster_barrier() * VEC  # every program has the sums before any overwrites its own

    first_channel = (row % groups) * channels_per_group
    write_group(held, Y + base + start, W, B, n, start, first_channel, spatial, mean, rstd, has_weight, has_bias)
