"""The norms (rms_norm, layer_norm, norm_gate, group_norm) against float64 references, on the CPU path (NumPy and
torch CPU) and on the GPU (marker gpu, outputs poisoned with NaN): every dtype, row lengths at each compiled block's
edges and past the looping kernel's threshold (100k+), Hopper's rows held in shared memory (each capacity and one
vector past it), row-strided and non-contiguous views, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import host64 as host
from arrays import on_path as arr
from arrays import unexercised
from reference64 import assert_close, group_norm64, group_norm_tolerance, norm64

import xopsaot
from xopsaot import _library

PATHS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
DTYPES = ["float16", "bfloat16", "float32"]
GPU_USED: set[int] = set()
# Row lengths: each compiled block (256, 1024, 4096, 8192, 16384, 32768, the loops' steps of 8192 and 16384 and the
# looping fallback) with rows aligned to 16 elements and not.
LENGTHS_GPU = [1, 17, 256, 1000, 1024, 3000, 4096, 4097, 8192, 12288, 20000, 40000, 100_003, 131072]
LENGTHS_CPU = [1, 17, 4097, 100_003]


def ran(where):
    if where == "gpu":  # every kernel the last call launched (a split group_norm's two)
        GPU_USED.update(_library.recent_variants())


ROW_CASES = {  # op, keyword arguments (weight / bias / residual: True = a random array of the right shape)
    "rms": ("rms_norm", {"weight": True}),
    "rms_offset": ("rms_norm", {"weight": True, "offset": 1.0}),
    "rms_no_weight": ("rms_norm", {}),
    "rms_residual": ("rms_norm", {"weight": True, "residual": True}),
    "layer": ("layer_norm", {"weight": True, "bias": True}),
    "layer_no_affine": ("layer_norm", {}),
    "layer_bias_only": ("layer_norm", {"bias": True}),
    "layer_residual": ("layer_norm", {"weight": True, "bias": True, "residual": True}),
}


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("case", list(ROW_CASES))
def test_row_norms(request, rng, where, case):
    if where == "gpu":
        request.getfixturevalue("poison")
    op, spec = ROW_CASES[case]
    for dtype in DTYPES:
        for n in LENGTHS_GPU if where == "gpu" else LENGTHS_CPU:
            shape = (2, 3, n) if n < 5000 else (3, n)
            x = arr(rng, shape, dtype, where)
            kw = {k: arr(rng, (n,), dtype, where) for k in ("weight", "bias") if spec.get(k)}
            if spec.get("residual"):
                kw["residual"] = arr(rng, shape, dtype, where)
            if "offset" in spec:
                kw["offset"] = spec["offset"]
            eps = 1e-5
            result = getattr(xopsaot, op)(x, eps=eps, **kw)
            ran(where)
            y_ref, h_ref = norm64(
                x, kw.get("weight"), kw.get("bias"), eps, "layer" if op == "layer_norm" else "rms",
                kw.get("offset", 0.0), kw.get("residual"),
            )  # fmt: skip
            what = f"{case} {dtype} n={n}"
            if spec.get("residual"):
                y, h = result
                assert_close(host(h), h_ref, dtype, what + " residual out")
            else:
                y = result
            assert type(y) is type(x) and y.shape == x.shape and y.dtype == x.dtype, what
            assert_close(host(y), y_ref, dtype, what)


@pytest.mark.parametrize("where", PATHS)
def test_row_norm_views_and_offset_mean(request, rng, where):
    """Rows read with a stride (a slice of wider rows) and a non-contiguous last dim (copied first); a layer norm of
    rows far from zero mean, where E[x^2] - mean^2 would cancel (the looping kernel subtracts the mean first)."""
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in DTYPES:
        wide = arr(rng, (4, 2 * 3000), dtype, where)
        w = arr(rng, (3000,), dtype, where)
        for name, x in (("row-strided", wide[:, :3000]), ("strided last dim", wide[:, ::2])):
            r = arr(rng, (4, 3000), dtype, where)
            y, h = xopsaot.rms_norm(x, w, 1e-6, residual=r)
            ref_y, ref_h = norm64(x, w, None, 1e-6, residual=r)
            assert_close(host(y), ref_y, dtype, f"{name} {dtype}")
            assert_close(host(h), ref_h, dtype, f"{name} {dtype} residual out")
            assert_close(host(xopsaot.layer_norm(x, w)), norm64(x, w, None, 1e-5, "layer")[0], dtype, name)
    # float32 holds x + 1000 to ~6e-5, which bounds any float32 method; E[x^2] - mean^2 would be off by ~1e-1
    x = arr(rng, (2, 100_003), "float32", where) + 1000.0
    error = np.abs(host(xopsaot.layer_norm(x)) - norm64(x, None, None, 1e-5, "layer")[0]).max()
    assert error < 1e-3, f"layer_norm of rows with mean 1000: max error {error:.2e}"


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("norm", ["rms", "layer"])
@pytest.mark.parametrize("gate_act", ["silu", "sigmoid"])
@pytest.mark.parametrize("gate_pos", ["pre", "post"])
def test_norm_gate(request, rng, where, norm, gate_act, gate_pos):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in DTYPES:
        for n in LENGTHS_GPU if where == "gpu" else [17, 4097, 100_003]:
            shape = (3, n)
            x, gate = arr(rng, shape, dtype, where), arr(rng, shape, dtype, where, scale=2.0)
            w, b = arr(rng, (n,), dtype, where), arr(rng, (n,), dtype, where)
            bias = b if norm == "layer" else None
            y = xopsaot.norm_gate(x, gate, w, bias, norm=norm, gate_act=gate_act, gate_pos=gate_pos, eps=1e-5)
            ran(where)
            ref = norm64(x, w, bias, 1e-5, norm, gate=gate, act=gate_act, pos=gate_pos)[0]
            assert_close(host(y), ref, dtype, f"{norm} {gate_act} {gate_pos} {dtype} n={n}")


GROUP_CASES = [  # shape, groups
    ((1, 4, 1), 2),
    ((2, 6, 17), 3),
    ((2, 32, 8, 8), 8),
    ((3, 64, 5, 5), 32),
    ((1, 16, 32, 32), 16),  # 1024 elements per group, aligned
    ((2, 8, 10_000), 2),  # 40000 per group: the looping kernel, 4 groups split in 10 chunks of 4096
    ((2, 4, 3, 3000), 4),  # 9000 per group, not aligned: looping, split in chunks of 4096, 4096 and 808
    ((300, 2, 9000), 1),  # 300 groups of 18000: 2 or more per multiprocessor, so not split
    ((300, 2, 9008), 1),  # the same with a spatial size that is a multiple of 16 (the kernel's branch for those)
    ((300, 1, 9001), 1),  # the same, not aligned
    ((64, 2, 20_000), 1),  # on an H100, 64 groups of 40000 split in chunks of 8192: two steps each, walked backward
    ((1, 2, 2048), 1),  # 4096 per group
    ((1, 3, 2730), 3),  # 2730: the 4096 block, not aligned
    ((1, 4, 2048), 1),  # 8192
    ((1, 1, 5000), 1),  # 5000: the 8192 block, not aligned
    ((2, 2, 100), 2),  # 100: the 256 block
    ((2, 2, 128), 1),  # 256 aligned
    ((2, 2, 300), 2),  # 300: the 1024 block, not aligned
    ((2, 6, 1000), 3),  # 2000: the 4096 block, not aligned
]


@pytest.mark.parametrize("where", PATHS)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(request, rng, where, affine):
    if where == "gpu":
        request.getfixturevalue("poison")
    for dtype in DTYPES:
        for shape, groups in GROUP_CASES:
            x = arr(rng, shape, dtype, where)
            w = arr(rng, (shape[1],), dtype, where) if affine else None
            b = arr(rng, (shape[1],), dtype, where) if affine else None
            y = xopsaot.group_norm(x, groups, w, b, eps=1e-5)
            ran(where)
            expected = group_norm64(x, groups, w, b, 1e-5)
            tol = group_norm_tolerance(x, groups, dtype, 1e-5)
            assert_close(host(y), expected, dtype, f"{shape} / {groups} {dtype}", tol=tol)
    # a non-contiguous input (channels-last memory seen as NCHW) is copied first
    x = arr(rng, (2, 5, 6, 8), "float32", where)
    x = x.transpose(0, 3, 2, 1) if where == "cpu" else x.permute(0, 3, 2, 1)
    assert_close(host(xopsaot.group_norm(x, 4)), group_norm64(x, 4), "float32", "non-contiguous")


@pytest.mark.parametrize("where", PATHS)
def test_group_norm_far_from_zero(request, rng, where):
    """A mean 100 times the spread: the variance must not come from a difference of large sums (the looping kernel
    sums x - x[0]; without the shift the float32 sums lose the variance's last three digits)."""
    if where == "gpu":
        request.getfixturevalue("poison")
    for shape, groups in (((2, 8, 10_000), 2), ((2, 32, 8, 8), 8)):
        x = arr(rng, shape, "float32", where) + 100.0
        y = xopsaot.group_norm(x, groups)
        ran(where)
        assert_close(host(y), group_norm64(x, groups, None, None, 1e-5), "float32", f"{shape} / {groups}")


@pytest.mark.gpu
def test_group_norm_long_groups(poison, rng):
    """Long groups, 3 or more per multiprocessor on GPUs of up to 233 of them (an H100 has 132, a B200 148),
    unsplit: the configs with longer steps (8192 elements from groups of 32768, 16384 from 65536), with a spatial
    size a multiple of 16 or not, and a group length that misses the alignment hint (the looping fallback). On
    Hopper groups of up to 64 KB take the held kernel: 32768 elements of 16 bits, 12000 of any dtype (channels of
    4000, a last step of 3808) and 16384 without weight and bias; groups of 80000 (160 KB of 16 bits, 320 KB of
    float32) are past every cluster config's window and keep the steps of 16384."""
    cases = (((700, 4, 20000), 1), ((396, 4, 16384), 2), ((700, 4, 8200), 1), ((400, 1, 32771), 1),
             ((600, 6, 4000), 2), ((600, 4, 4096), 1))  # fmt: skip
    for dtype in DTYPES:
        for i, (shape, groups) in enumerate(cases):
            x = arr(rng, shape, dtype, "gpu")
            w, b = (arr(rng, (shape[1],), dtype, "gpu") for _ in range(2)) if i < 5 else (None, None)
            y = xopsaot.group_norm(x, groups, w, b, eps=1e-5)
            ran("gpu")
            expected = group_norm64(x, groups, w, b, 1e-5)
            tol = group_norm_tolerance(x, groups, dtype, 1e-5)
            assert_close(host(y), expected, dtype, f"{shape} / {groups} {dtype}", tol=tol)


@pytest.mark.gpu
def test_group_norm_clusters(poison, rng):
    """On Hopper, groups of 48-64 KB a program for clusters of 2, 4 or 8 (96-128 KB, 192-256 KB, 384-512 KB) take a
    cluster per group where the clusters make 6 programs per multiprocessor or more: each config's capacity and its
    smallest group, channels that straddle the programs' shares (3 channels over 2 or 8 shares), the benchmark's
    16 channels of 128 x 128, and a mean far from zero (each program sums around the group's first element); a few
    samples checked against float64, every output written (poisoned with NaN before)."""
    torch = pytest.importorskip("torch")
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    groups = 4
    for dtype in DTYPES:
        size = np.dtype(np.float32).itemsize if dtype == "float32" else 2
        # (programs per cluster, channels per group, spatial size in bytes)
        cases = ((2, 2, 65536), (2, 3, 32768 + 16), (4, 4, 65536), (4, 1, 196608 + 16), (8, 16, 32768),
                 (8, 3, 131072 + 16))  # fmt: skip
        for i, (cluster, per_group, spatial_bytes) in enumerate(cases):
            samples = -(-6 * sm_count // (cluster * groups)) + 1
            shape = (samples, groups * per_group, spatial_bytes // size)
            x = arr(rng, shape, dtype, "gpu") + (20.0 if i == 1 else 0.0)
            w, b = (arr(rng, (shape[1],), dtype, "gpu") for _ in range(2)) if i % 2 == 0 else (None, None)
            y = xopsaot.group_norm(x, groups, w, b, eps=1e-5)
            ran("gpu")
            assert not torch.isnan(y).any().item(), (shape, dtype)
            picked = [0, samples // 2, samples - 1]
            expected = group_norm64(x[picked], groups, w, b, 1e-5)
            tol = group_norm_tolerance(x[picked], groups, dtype, 1e-5)
            assert_close(host(y[picked]), expected, dtype, f"{shape} / {groups} {dtype}", tol=tol)


# Hopper's row_norm_held_kernel: rows past 32768 elements, four or more per multiprocessor, up to 112 KB two programs
# to a multiprocessor and 224 KB one; with a residual or a gate, less the second input's ring of four steps (16-bit:
# 40960 and 81920 elements, float32 40960 at one program), except a gate after the norm at one program, held whole
# beside x (16-bit: 57344); past those, clusters of 4 (x alone: shares of 64 KB, 16-bit 131072 and float32 65536, then
# 112 KB, 229376 and 114688; with a second input 163840 and 81920), and clusters of 2 for a gate before the norm
# (16-bit 81920, float32 40960); each capacity, one vector
# past it (the looping kernel then), and a mean far from zero ("mean", added to x) where shares merge their moments.
# op, dtype, length, arguments.
HELD_NORM_CASES = [
    ("rms_norm", "bfloat16", 32784, {"weight": True, "offset": 1.0}),
    ("layer_norm", "float16", 57344, {"weight": True, "bias": True}),
    ("layer_norm", "bfloat16", 57360, {}),
    ("rms_norm", "float16", 114688, {}),
    ("rms_norm", "bfloat16", 114704, {"weight": True}),
    ("layer_norm", "float32", 32784, {"weight": True, "bias": True}),
    ("rms_norm", "float32", 57344, {"weight": True}),
    ("rms_norm", "float32", 57360, {}),
    ("layer_norm", "bfloat16", 32784, {"weight": True, "bias": True, "residual": True}),
    ("rms_norm", "float16", 40960, {"weight": True, "residual": True}),
    ("rms_norm", "bfloat16", 40976, {"residual": True}),
    ("layer_norm", "float16", 81920, {"weight": True, "bias": True, "residual": True}),
    ("rms_norm", "bfloat16", 81936, {"weight": True, "residual": True}),
    ("rms_norm", "float32", 40960, {"weight": True, "residual": True}),
    ("layer_norm", "float32", 40964, {"residual": True}),
    ("norm_gate", "float16", 40000, {"norm": "rms", "gate_act": "silu", "gate_pos": "pre"}),
    ("norm_gate", "bfloat16", 40960, {"norm": "layer", "gate_act": "sigmoid", "gate_pos": "post"}),
    ("norm_gate", "bfloat16", 65536, {"norm": "rms", "gate_act": "silu", "gate_pos": "pre"}),
    ("norm_gate", "float16", 81920, {"norm": "layer", "gate_act": "sigmoid", "gate_pos": "pre"}),
    ("norm_gate", "bfloat16", 81936, {"norm": "layer", "gate_act": "silu", "gate_pos": "pre"}),
    ("norm_gate", "float16", 50000, {"norm": "rms", "gate_act": "silu", "gate_pos": "post"}),
    ("norm_gate", "bfloat16", 57344, {"norm": "rms", "gate_act": "sigmoid", "gate_pos": "post"}),
    ("norm_gate", "bfloat16", 57352, {"norm": "layer", "gate_act": "silu", "gate_pos": "post"}),
    ("norm_gate", "float32", 40960, {"norm": "rms", "gate_act": "silu", "gate_pos": "post"}),
    ("norm_gate", "float32", 36000, {"norm": "layer", "gate_act": "silu", "gate_pos": "pre"}),
    ("rms_norm", "bfloat16", 229376, {"weight": True}),
    ("rms_norm", "float16", 200000, {"mean": 30.0}),
    ("rms_norm", "float16", 131072, {"weight": True}),
    ("layer_norm", "float16", 65536, {"weight": True, "bias": True, "mean": 30.0}),
    ("rms_norm", "bfloat16", 65552, {}),
    ("layer_norm", "float16", 229384, {"weight": True, "bias": True}),
    ("layer_norm", "bfloat16", 163840, {"weight": True, "bias": True, "residual": True}),
    ("layer_norm", "float16", 120000, {"residual": True}),
    ("rms_norm", "float16", 163848, {"residual": True}),
    ("norm_gate", "bfloat16", 163840, {"norm": "layer", "gate_act": "silu", "gate_pos": "post"}),
    ("norm_gate", "float16", 100000, {"norm": "rms", "gate_act": "silu", "gate_pos": "pre"}),
    ("norm_gate", "bfloat16", 53248, {"norm": "layer", "gate_act": "silu", "gate_pos": "pre"}),
    ("norm_gate", "float16", 40968, {"norm": "rms", "gate_act": "sigmoid", "gate_pos": "pre"}),
    ("layer_norm", "float32", 114688, {"weight": True, "bias": True, "mean": 30.0}),
    ("rms_norm", "float32", 114696, {}),
    ("rms_norm", "float32", 81920, {"residual": True}),
    ("norm_gate", "float32", 81920, {"norm": "layer", "gate_act": "sigmoid", "gate_pos": "post"}),
    ("norm_gate", "float32", 50000, {"norm": "rms", "gate_act": "silu", "gate_pos": "pre"}),
]


@pytest.mark.gpu
@pytest.mark.parametrize("op, dtype, n, spec", HELD_NORM_CASES)
def test_held_row_norms(rng, poison, op, dtype, n, spec):
    """Rows past the registers' 32768 elements over four rows per multiprocessor (Hopper's row_norm_held_kernel where
    the row fits, the looping kernel elsewhere), rows a stride apart: every output written (poisoned with NaN
    before), 24 rows against float64, residual_out too."""
    torch = pytest.importorskip("torch")
    n_rows = 4 * torch.cuda.get_device_properties(0).multi_processor_count
    x = arr(rng, (n_rows, n + 64), dtype, "gpu")[:, :n]  # rows 64 elements apart, still aligned
    x.add_(spec.get("mean", 0.0))  # a mean far from zero: shares of a row merge their moments
    rows = sorted({0, n_rows - 1, *rng.choice(range(1, n_rows - 1), 22, replace=False).tolist()})
    w, b = arr(rng, (n,), dtype, "gpu"), arr(rng, (n,), dtype, "gpu")
    if op == "norm_gate":
        gate = arr(rng, (n_rows, n), dtype, "gpu", scale=2.0)
        bias = b if spec["norm"] == "layer" else None
        y = xopsaot.norm_gate(x, gate, w, bias, eps=1e-5, **spec)
        ref = norm64(x[rows], w, bias, 1e-5, spec["norm"], gate=gate[rows], act=spec["gate_act"], pos=spec["gate_pos"])
        outputs = [(y, ref[0])]
    else:
        kw = {"weight": w} if spec.get("weight") else {}
        kw |= {"bias": b} if spec.get("bias") else {}
        kw |= {"residual": arr(rng, (n_rows, n), dtype, "gpu")} if spec.get("residual") else {}
        kw |= {"offset": spec["offset"]} if "offset" in spec else {}
        result = getattr(xopsaot, op)(x, eps=1e-5, **kw)
        kind = "layer" if op == "layer_norm" else "rms"
        residual = kw["residual"][rows] if "residual" in kw else None
        ref = norm64(x[rows], kw.get("weight"), kw.get("bias"), 1e-5, kind, kw.get("offset", 0.0), residual)
        outputs = list(zip(result, ref)) if "residual" in kw else [(result, ref[0])]
    ran("gpu")
    for out, expected in outputs:
        assert not torch.isnan(out).any().item(), (op, dtype, n)
        assert_close(host(out[rows]), expected, dtype, f"{op} {dtype} {n_rows} x {n} {spec}")


@pytest.mark.gpu
def test_norms_leave_inputs_alone(rng):
    """No norm writes its inputs (residual_out is a new tensor)."""
    n = 4097
    x, r, g = (arr(rng, (3, n), "bfloat16", "gpu") for _ in range(3))
    w = arr(rng, (n,), "bfloat16", "gpu")
    before = [t.clone() for t in (x, r, g, w)]
    xopsaot.rms_norm(x, w, residual=r)
    xopsaot.layer_norm(x, w, w, residual=r)
    xopsaot.norm_gate(x, g, w)
    xopsaot.group_norm(x.view(3, 17, 241), 17, w[:17], w[:17])
    import torch

    assert all(torch.equal(t, b) for t, b in zip((x, r, g, w), before))


@pytest.mark.parametrize("where", PATHS)
def test_norm_bad_input(rng, where):
    x, w = arr(rng, (4, 8), "float32", where), arr(rng, (8,), "float32", where)
    with pytest.raises(ValueError, match=r"rms_norm: weight must have shape \(8,\).*got \(7,\)"):
        xopsaot.rms_norm(x, w[:7])
    with pytest.raises(ValueError, match=r"layer_norm: bias must have shape \(8,\)"):
        xopsaot.layer_norm(x, w, w[:4])
    with pytest.raises(TypeError, match="layer_norm: weight.dtype is float16 but x.dtype is float32"):
        xopsaot.layer_norm(x, arr(rng, (8,), "float16", where))
    with pytest.raises(ValueError, match="rms_norm: residual has shape"):
        xopsaot.rms_norm(x, w, residual=x[:2])
    with pytest.raises(ValueError, match="rms_norm: eps must be >= 0"):
        xopsaot.rms_norm(x, w, eps=-1.0)
    with pytest.raises(TypeError, match="rms_norm: offset must be a finite float"):
        xopsaot.rms_norm(x, w, offset=float("inf"))
    with pytest.raises(ValueError, match="norm_gate: norm is 'batch'; supported: 'rms', 'layer'"):
        xopsaot.norm_gate(x, x, w, norm="batch")
    with pytest.raises(ValueError, match="norm_gate: gate_act is 'relu'; supported: 'silu', 'sigmoid'"):
        xopsaot.norm_gate(x, x, w, gate_act="relu")
    with pytest.raises(ValueError, match="norm_gate: gate_pos is 'mid'"):
        xopsaot.norm_gate(x, x, w, gate_pos="mid")
    with pytest.raises(ValueError, match="norm_gate: gate has shape"):
        xopsaot.norm_gate(x, x[:, :4], w)
    with pytest.raises(TypeError, match="norm_gate: gate is required"):
        xopsaot.norm_gate(x, None, w)
    with pytest.raises(ValueError, match="group_norm: num_groups is 3; it must be >= 1 and divide the 8 channels"):
        xopsaot.group_norm(x, 3)
    with pytest.raises(ValueError, match="group_norm: num_groups is 0"):
        xopsaot.group_norm(x, 0)
    with pytest.raises(TypeError, match="group_norm: num_groups must be an int"):
        xopsaot.group_norm(x, 2.0)
    with pytest.raises(ValueError, match=r"group_norm: x must be \(N, C, \*\)"):
        xopsaot.group_norm(w, 1)
    with pytest.raises(ValueError, match=r"group_norm: weight must have shape \(8,\).*got \(4,\)"):
        xopsaot.group_norm(x, 2, w[:4])
    ints = np.arange(8, dtype=np.int32).reshape(2, 4)
    if where == "gpu":
        import torch

        ints = torch.from_numpy(ints).cuda()
    with pytest.raises(TypeError, match="layer_norm: x.dtype is int32; supported: float16, bfloat16, float32"):
        xopsaot.layer_norm(ints)


@pytest.mark.gpu
def test_every_norm_variant_was_checked():
    """After the tests above (file order): each row norm and group_norm kernel variant compiled for this GPU ran."""
    missing = unexercised(
        {
            "row_norm_kernel",
            "row_norm_held_kernel",
            "group_norm_kernel",
            "group_norm_stats_kernel",
            "group_norm_held_kernel",
            "group_norm_cluster_kernel",
        },
        GPU_USED,
    )
    assert not missing, f"norm variants never exercised: {missing}"
