"""A/B timing of the installed wheel, bf16, one JSON line per op and shape with torch eager's figure in the same
process: TB/s (each full-size tensor read or written once; cross entropy: the logits read once) or TFLOP/s (linear).
Run once per installed build to compare them (PYTHONPATH=/tmp/old, then /tmp/new). Groups: gelu (gelu and
gelu_and_mul), others (gelu tanh and silu), cross_entropy (mean and per row), linear (bias, gelu, residual at
8192^3), group_norm (the shapes of benchmarks/norms.py, long unsplit groups, split ones, more unsplit), long_rows
(softmax, log_softmax, rms_norm, layer_norm, add+rms_norm on rows of 16k-131k), vocab_rows (softmax, log_softmax and
logsumexp on rows of 50k-128k), rotary (apply_rotary and rotary_qk), held_rows (the norms of benchmarks/norms.py on
rows held whole, bf16 and fp32, and norm_gate with the gate after the norm), scans (cumsum and logcumsumexp, first,
middle and last dims), strided (x.T + y, and x * y with x's heads permuted), group_norm_held (unsplit groups of
32768, x the same or rotated past L2), held_softmax (softmax and log_softmax around softmax_held_kernel's rows),
cluster_softmax (the same around softmax_cluster_kernel's), held_pairs (the norms with a residual or a gate on rows
past 32768 elements), decode_linear (linear and gate_linear on one and two rows against weights of 4096 to 128256
rows), fused_linear (linear with bias, gelu_tanh and residual, and plain, at 4096^3 and 8192^3 under sustained
load); all of them when none is named.

    python3 benchmarks/experiments/wheel_ab.py LABEL [GROUP ...]
"""

import json
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import Rotation, bench, bench_queued, bench_sustained, warm_up_gpu  # noqa: E402

import xopsaot  # noqa: E402


def line(label: str, op: str, shape, unit: str, ours: float, eager: float) -> None:
    print(json.dumps({"build": label, "op": op, "shape": list(shape), unit: round(ours, 3), "eager": round(eager, 3)}))


def randn(*shape) -> torch.Tensor:
    return torch.randn(shape, device="cuda", dtype=torch.bfloat16)


def gelu(label: str) -> None:
    for shape in ((4096, 4096), (16384, 8192)):
        x = randn(*shape)
        nbytes = 2 * x.numel() * x.element_size()
        ours, eager = bench_queued(lambda: xopsaot.gelu(x)), bench_queued(lambda: F.gelu(x))
        line(label, "gelu", shape, "tbps", nbytes / ours / 1e9, nbytes / eager / 1e9)
        gated, d = 1.5 * x.numel() * x.element_size(), shape[1] // 2
        ours = bench_queued(lambda: xopsaot.gelu_and_mul(x))
        eager = bench_queued(lambda: F.gelu(x[:, :d]) * x[:, d:])
        line(label, "gelu_and_mul", shape, "tbps", gated / ours / 1e9, gated / eager / 1e9)


def others(label: str) -> None:
    """Activations of the shared binary (every code but gelu's erf form)."""
    for shape in ((4096, 4096), (16384, 8192)):
        x = randn(*shape)
        nbytes = 2 * x.numel() * x.element_size()
        for name, ours, eager in (
            ("gelu tanh", lambda: xopsaot.gelu(x, approximate="tanh"), lambda: F.gelu(x, approximate="tanh")),
            ("silu", lambda: xopsaot.silu(x), lambda: F.silu(x)),
        ):
            line(label, name, shape, "tbps", nbytes / bench_queued(ours) / 1e9, nbytes / bench_queued(eager) / 1e9)


def cross_entropy(label: str) -> None:
    for rows, vocab in ((4096, 4096), (8192, 32000), (8192, 128256)):
        logits = randn(rows, vocab)
        target = torch.randint(0, vocab, (rows,), device="cuda")
        nbytes = logits.numel() * logits.element_size()
        for reduction in ("mean", "none"):
            ours = bench_queued(lambda r=reduction: xopsaot.cross_entropy(logits, target, reduction=r, validate=False))
            eager = bench_queued(lambda r=reduction: F.cross_entropy(logits, target, reduction=r))
            line(label, f"cross_entropy {reduction}", (rows, vocab), "tbps", nbytes / ours / 1e9, nbytes / eager / 1e9)


def linear(label: str) -> None:
    n = 8192
    a, w, b, r = randn(n, n), randn(n, n), randn(n), randn(n, n)
    flop = 2 * n**3
    ours = bench(lambda: xopsaot.linear(a, w, b, activation="gelu", residual=r))
    eager = bench(lambda: F.gelu(F.linear(a, w, b)) + r)
    line(label, "linear gelu + bias + residual", (n, n, n), "tflops", flop / ours / 1e9, flop / eager / 1e9)


def decode_linear(label: str) -> None:
    """One row (and two, which keep the tensor-core tile) against a layer's weight, each call reading the next of
    several weights past the L2: linear plain and with a bias, gate_linear with a bias and a residual (float32 too,
    plain); TB/s of the weight's bytes against F.linear and torch's unfused gating. AB_ROWS=2,4,16 times other row
    counts (the float32 row only at the default)."""
    row_counts = [int(m) for m in os.environ.get("AB_ROWS", "1,2").split(",")]
    for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096), (128256, 4096)):
        w = Rotation(lambda n=n, k=k: randn(n, k) * k**-0.5).next
        bias = randn(n)
        nbytes = n * k * 2
        for m in row_counts:
            x1, x2, res = randn(m, k), randn(m, k), randn(m, n)
            for name, ours, eager in (
                ("linear", lambda: xopsaot.linear(x1, w()), lambda: F.linear(x1, w())),
                ("linear + bias", lambda: xopsaot.linear(x1, w(), bias), lambda: F.linear(x1, w(), bias)),
                (
                    "gate_linear + bias + residual",
                    lambda: xopsaot.gate_linear(x1, x2, w(), bias, res),
                    lambda: F.linear(F.silu(x1) * x2, w(), bias) + res,
                ),
            ):
                ours_tbps, eager_tbps = nbytes / bench_queued(ours) / 1e9, nbytes / bench_queued(eager) / 1e9
                line(label, name, (m, k, n), "tbps", ours_tbps, eager_tbps)
    if "AB_ROWS" in os.environ:
        return
    w32 = Rotation(lambda: torch.randn(4096, 4096, device="cuda") * 4096**-0.5).next
    x32 = torch.randn(1, 4096, device="cuda")
    ours, eager = bench_queued(lambda: xopsaot.linear(x32, w32())), bench_queued(lambda: F.linear(x32, w32()))
    line(label, "linear float32", (1, 4096, 4096), "tbps", 4096**2 * 4 / ours / 1e9, 4096**2 * 4 / eager / 1e9)


def fused_linear(label: str) -> None:
    """linear with a bias, gelu_tanh and a residual against torch eager's unfused sequence, and the plain linear, at
    4096^3 and 8192^3, timed under sustained load (bench_sustained: these products run an H100 at its power cap)."""
    for n in (4096, 8192):
        a, w, b, r = randn(n, n), randn(n, n) * n**-0.5, randn(n), randn(n, n)
        flop = 2 * n**3
        fused = bench_sustained(lambda: xopsaot.linear(a, w, b, "gelu_tanh", r))[0]
        eager = bench_sustained(lambda: F.gelu(F.linear(a, w, b), approximate="tanh") + r)[0]
        line(label, "linear + bias, gelu_tanh, + residual", (n, n, n), "tflops", flop / fused / 1e9, flop / eager / 1e9)
        plain, cublas = bench_sustained(lambda: xopsaot.linear(a, w))[0], bench_sustained(lambda: F.linear(a, w))[0]
        line(label, "linear", (n, n, n), "tflops", flop / plain / 1e9, flop / cublas / 1e9)


def group_norm(label: str) -> None:
    shapes = [((16, 256, 64, 64), 32), ((64, 512, 16, 16), 32), ((2, 512, 128, 128), 32)]
    shapes += [((32, 256, 64, 64), 32), ((16, 512, 64, 64), 32), ((12, 256, 64, 64), 32)]  # long groups, unsplit
    shapes += [((4, 512, 128, 128), 32), ((8, 320, 64, 64), 32), ((2, 128, 256, 256), 32)]  # split
    shapes += [((20, 256, 64, 64), 32), ((24, 256, 64, 64), 32)]  # unsplit, 640 and 768 groups
    for shape, groups in shapes:
        x, w, b = randn(*shape), randn(shape[1]), randn(shape[1])
        nbytes = 2 * x.numel() * x.element_size()
        ours = bench_queued(lambda: xopsaot.group_norm(x, groups, w, b))
        eager = bench_queued(lambda: F.group_norm(x, groups, w, b))
        line(label, "group_norm", shape, "tbps", nbytes / ours / 1e9, nbytes / eager / 1e9)


def long_rows(label: str) -> None:
    """Rows past 8192 elements: the looping configs, or on Hopper the rows held in shared memory (softmax family,
    norms)."""
    for shape in (
        (4096, 32000),
        (1024, 131072),
        (4096, 16384),
        (2048, 65536),
        (4096, 50304),
        (1024, 100000),
        (528, 40000),
    ):
        x, r = randn(*shape), randn(*shape)
        w, b = randn(shape[1]), randn(shape[1])
        nbytes = 2 * x.numel() * x.element_size()
        for name, ours, eager, tensors in (
            ("softmax", lambda: xopsaot.softmax(x, -1), lambda: torch.softmax(x, -1), 2),
            ("log_softmax", lambda: xopsaot.log_softmax(x, -1), lambda: torch.log_softmax(x, -1), 2),
            ("rms_norm", lambda: xopsaot.rms_norm(x, w), lambda: F.rms_norm(x, shape[1:], w), 2),
            ("layer_norm", lambda: xopsaot.layer_norm(x, w, b), lambda: F.layer_norm(x, shape[1:], w, b), 2),
            ("add+rms_norm", lambda: xopsaot.rms_norm(x, w, residual=r), lambda: F.rms_norm(x + r, shape[1:], w), 4),
            ("norm_gate", lambda: xopsaot.norm_gate(x, r, w), lambda: F.rms_norm(x * F.silu(r), shape[1:], w), 3),
        ):
            moved = nbytes * tensors / 2
            line(label, name, shape, "tbps", moved / bench_queued(ours) / 1e9, moved / bench_queued(eager) / 1e9)


def vocab_rows(label: str) -> None:
    """softmax and log_softmax on rows of 32k-128k columns (vocabulary-sized logits)."""
    for shape in ((4096, 50304), (2048, 65536), (2048, 81920), (1024, 100000), (1024, 128256), (4096, 128256)):
        x = randn(*shape)
        nbytes = 2 * x.numel() * x.element_size()
        for name, ours, eager in (
            ("softmax", lambda: xopsaot.softmax(x, -1), lambda: torch.softmax(x, -1)),
            ("log_softmax", lambda: xopsaot.log_softmax(x, -1), lambda: torch.log_softmax(x, -1)),
        ):
            line(label, name, shape, "tbps", nbytes / bench_queued(ours) / 1e9, nbytes / bench_queued(eager) / 1e9)
        ours, eager = bench_queued(lambda: xopsaot.logsumexp(x, -1)), bench_queued(lambda: torch.logsumexp(x, -1))
        line(label, "logsumexp", shape, "tbps", nbytes / 2 / ours / 1e9, nbytes / 2 / eager / 1e9)  # x read once


def softmax_lines(label: str, cases) -> None:
    """softmax and log_softmax on each (shape, dtype), against torch eager's."""
    for shape, dtype in cases:
        x = torch.randn(shape, device="cuda", dtype=dtype)
        nbytes = 2 * x.numel() * x.element_size()
        for name, ours, eager in (
            ("softmax", lambda: xopsaot.softmax(x, -1), lambda: torch.softmax(x, -1)),
            ("log_softmax", lambda: xopsaot.log_softmax(x, -1), lambda: torch.log_softmax(x, -1)),
        ):
            op = name if dtype == torch.bfloat16 else f"{name} fp32"
            line(label, op, shape, "tbps", nbytes / bench_queued(ours) / 1e9, nbytes / bench_queued(eager) / 1e9)


def held_softmax(label: str) -> None:
    """softmax and log_softmax where Hopper's softmax_held_kernel serves or borders: vocabulary rows (bf16), fewer
    rows than a wave, float32, rows of 16k-32k (held in registers) and one of 131072 (looping)."""
    cases = [((4096, 32000), torch.bfloat16), ((4096, 50304), torch.bfloat16), ((2048, 57344), torch.bfloat16)]
    cases += [((2048, 65536), torch.bfloat16), ((1024, 100000), torch.bfloat16), ((1024, 114688), torch.bfloat16)]
    cases += [((1024, 131072), torch.bfloat16), ((132, 100000), torch.bfloat16), ((64, 50304), torch.bfloat16)]
    cases += [((2048, 50000), torch.float32), ((4096, 20000), torch.bfloat16)]
    # rows by waves: 100000 columns hold one row per multiprocessor, 50304 two
    cases += [((rows, 100000), torch.bfloat16) for rows in (264, 396, 528)]
    cases += [((rows, 50304), torch.bfloat16) for rows in (264, 528, 1056)]
    # rows of 8193-16384 (looping in steps of 4096 before)
    cases += [((4096, n), torch.bfloat16) for n in (8208, 10000, 12288, 16384)]
    cases += [((rows, 16384), torch.bfloat16) for rows in (528, 1056)]
    cases += [((4096, n), torch.float32) for n in (16384, 30000)]
    # past 114688 16-bit columns (65536 float32), the last two vectors of each thread held in registers
    cases += [((1024, 128256), torch.bfloat16), ((4096, 128256), torch.bfloat16), ((2048, 120000), torch.bfloat16)]
    cases += [((2048, 65536), torch.float32)]
    # rows held in registers (softmax_kernel)
    cases += [((4096, 4096), torch.bfloat16), ((16384, 8192), torch.bfloat16), ((16384, 1000), torch.bfloat16)]
    softmax_lines(label, cases)


def cluster_softmax(label: str) -> None:
    """softmax and log_softmax on rows past softmax_held_kernel's shared memory (16-bit rows past 114688 elements,
    float32 past 57344), where softmax_cluster_kernel serves or borders: row counts either side of its thresholds
    (4 and 16 rows per multiprocessor where the held kernel's register tail reaches, one past it) and its reach."""
    cases = [((rows, 128256), torch.bfloat16) for rows in (132, 264, 528, 1024, 1584, 2111, 2112, 4096)]
    cases += [((1024, 120000), torch.bfloat16), ((132, 140000), torch.bfloat16), ((1024, 140000), torch.bfloat16)]
    cases += [((1024, 200000), torch.bfloat16), ((528, 262144), torch.bfloat16), ((131, 256000), torch.bfloat16)]
    cases += [((rows, 256000), torch.bfloat16) for rows in (132, 1024, 2048)]
    cases += [((rows, 65536), torch.float32) for rows in (264, 528, 1024, 2112)]
    cases += [((512, 100000), torch.float32), ((132, 131072), torch.float32), ((512, 131072), torch.float32)]
    softmax_lines(label, cases)


def rotary(label: str) -> None:
    """apply_rotary (out of place and in place) and rotary_qk, the shapes of benchmarks/rotary.py."""
    from rotary import cases

    for tokens, heads, heads_k, dim in ((4096, 32, 8, 128), (16384, 32, 8, 128), (4096, 64, 8, 64)):
        for name, (ours, eager, nbytes) in cases(tokens, heads, heads_k, dim).items():
            if name != "lrpe_cosine":
                line(label, name, (tokens, heads, heads_k, dim), "tbps", nbytes / bench_queued(ours) / 1e9,
                     nbytes / bench_queued(eager) / 1e9)  # fmt: skip


def norm_cases(label: str, dtype, shape, keep=lambda passes: True) -> None:
    """benchmarks/norms.py's row norms (those whose passes over x's bytes `keep` accepts) and norm_gate with the gate
    after the norm, on one dtype and shape."""
    from norms import cases

    x, r, g = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
    w, b = (torch.randn(shape[1], device="cuda", dtype=dtype) for _ in range(2))
    ops = {name: case for name, case in cases(x, r, g, w, b).items() if keep(case[3])}
    ops["norm_gate (rms, silu, post)"] = (
        lambda: xopsaot.norm_gate(x, g, w, gate_pos="post"),
        lambda x, g, w: F.rms_norm(x, shape[1:], w, 1e-6) * F.silu(g),
        (x, g, w),
        3,
        True,
    )
    for name, (ours, fn, args, passes, _) in ops.items():
        moved = passes * x.numel() * x.element_size()
        line(label, f"{name} {str(dtype)[6:]}", shape, "tbps", moved / bench_queued(ours) / 1e9,
             moved / bench_queued(lambda: fn(*args)) / 1e9)  # fmt: skip


def held_rows(label: str) -> None:
    """The row norms of benchmarks/norms.py on rows of 4096-32000 elements, which are held whole in registers."""
    for dtype in (torch.bfloat16, torch.float32):
        for shape in ((4096, 4096), (4096, 8192), (4096, 16384), (4096, 32000)):
            if dtype == torch.float32 and shape[1] < 16384:
                continue
            norm_cases(label, dtype, shape)


def held_pairs(label: str) -> None:
    """The row norms with a second input (residual, or a gate before or after the norm) on rows past 32768 elements:
    bf16 at 4 rows per multiprocessor and more, and float32."""
    for dtype, shape in (
        (torch.bfloat16, (4096, 50304)),
        (torch.bfloat16, (2048, 65536)),
        (torch.bfloat16, (528, 40000)),
        (torch.bfloat16, (4096, 40000)),
        (torch.bfloat16, (1024, 81920)),
        (torch.float32, (2048, 40000)),
    ):
        norm_cases(label, dtype, shape, keep=lambda passes: passes > 2)


def cluster_norms(label: str) -> None:
    """The row norms (and both norm_gate forms) around row_norm_held_kernel's clusters: rows of 40k-229k elements
    that one program per multiprocessor holds, or that loop, at 4-16 rows per multiprocessor; bf16 and float32."""
    for dtype, shape in (
        (torch.bfloat16, (4096, 50304)),
        (torch.bfloat16, (2048, 65536)),
        (torch.bfloat16, (528, 65536)),
        (torch.bfloat16, (1024, 81920)),
        (torch.bfloat16, (1024, 131072)),
        (torch.bfloat16, (528, 200000)),
        (torch.float32, (2048, 40000)),
        (torch.float32, (1024, 65536)),
    ):
        norm_cases(label, dtype, shape)


def cluster_plain(label: str) -> None:
    """rms_norm and layer_norm (and norm_gate after the norm) on rows held by clusters: of 2 programs for bf16 rows of
    57345-65536 elements, of 4 past the one-program plan (bf16 rows of 114689-131072 elements, float32 of
    57345-65536)."""
    for dtype, shape in (
        (torch.bfloat16, (2048, 65536)),
        (torch.bfloat16, (528, 65536)),
        (torch.bfloat16, (4096, 60000)),
        (torch.bfloat16, (1024, 131072)),
        (torch.bfloat16, (528, 131072)),
        (torch.bfloat16, (2048, 120000)),
        (torch.float32, (1024, 65536)),
        (torch.float32, (528, 60000)),
    ):
        norm_cases(label, dtype, shape, keep=lambda passes: passes == 2)


def gate_first(label: str) -> None:
    """norm_gate with the gate before the norm (rms, silu; and layer, sigmoid) on bf16 rows of 40k-66k elements, where
    a cluster of 2 programs shares each row."""
    for shape in ((4096, 50304), (4096, 45056), (4096, 40976), (528, 50304), (2048, 53248), (2048, 65536)):
        x, g, w = randn(*shape), randn(*shape), randn(shape[1])
        moved = 3 * x.numel() * x.element_size()
        for name, ours, eager in (
            ("rms silu", lambda: xopsaot.norm_gate(x, g, w), lambda: F.rms_norm(x * F.silu(g), shape[1:], w)),
            ("layer sigmoid", lambda: xopsaot.norm_gate(x, g, w, w, norm="layer", gate_act="sigmoid"),
             lambda: F.layer_norm(x * torch.sigmoid(g), shape[1:], w, w)),
        ):  # fmt: skip
            line(label, f"norm_gate {name}", shape, "tbps", moved / bench_queued(ours) / 1e9,
                 moved / bench_queued(eager) / 1e9)  # fmt: skip


def group_norm_waves(label: str) -> None:
    """group_norm on groups past 64 KB at 1.3-2.6 waves of group_norm_cluster_kernel's programs (3 per
    multiprocessor, a cluster of 2, 4 or 8 per group)."""
    for shape in ((3, 512, 128, 128), (13, 512, 64, 64), (24, 512, 64, 64), (8, 512, 128, 128), (32, 320, 64, 64),
                  (12, 320, 64, 64), (6, 512, 128, 128)):  # fmt: skip
        x, w, b = randn(*shape), randn(shape[1]), randn(shape[1])
        nbytes = 2 * x.numel() * x.element_size()
        ours = bench_queued(lambda: xopsaot.group_norm(x, 32, w, b))
        eager = bench_queued(lambda: F.group_norm(x, 32, w, b))
        line(label, "group_norm", shape, "tbps", nbytes / ours / 1e9, nbytes / eager / 1e9)


def scans(label: str) -> None:
    """cumsum and logcumsumexp along the last and the first dim (and a middle one), and cumsum of a long 1-D
    tensor."""
    for shape in ((4096, 4096), (16384, 8192), (1 << 24,)):
        x = randn(*shape)
        nbytes = 2 * x.numel() * x.element_size()
        for dim in (-1, 0) if len(shape) > 1 else (0,):
            line(label, f"cumsum dim {dim}", shape, "tbps", nbytes / bench_queued(lambda: xopsaot.cumsum(x, dim)) / 1e9,
                 nbytes / bench_queued(lambda: torch.cumsum(x, dim)) / 1e9)  # fmt: skip
            if len(shape) > 1:
                ours = bench_queued(lambda: xopsaot.logcumsumexp(x, dim))
                eager = bench_queued(lambda: torch.logcumsumexp(x, dim))
                line(label, f"logcumsumexp dim {dim}", shape, "tbps", nbytes / ours / 1e9, nbytes / eager / 1e9)
    x = randn(32, 1024, 1024)
    nbytes = 2 * x.numel() * x.element_size()
    for name, ours, eager in (("cumsum", xopsaot.cumsum, torch.cumsum), ("logcumsumexp", xopsaot.logcumsumexp,
                                                                          torch.logcumsumexp)):  # fmt: skip
        mine, theirs = bench_queued(lambda: ours(x, 1)), bench_queued(lambda: eager(x, 1))  # noqa: B023
        line(label, f"{name} dim 1", x.shape, "tbps", nbytes / mine / 1e9, nbytes / theirs / 1e9)


def strided(label: str) -> None:
    for m, n in ((4096, 4096), (8192, 16384), (16384, 8192)):
        x, y = randn(n, m), randn(m, n)
        nbytes = 3 * x.numel() * x.element_size()
        ours = bench_queued(lambda: xopsaot.add(x.t(), y))
        eager = bench_queued(lambda: torch.add(x.t(), y))
        line(label, "add, transposed x", (m, n), "tbps", nbytes / ours / 1e9, nbytes / eager / 1e9)
    x, y = randn(4096, 32, 128), randn(32, 4096, 128)
    nbytes = 3 * x.numel() * x.element_size()
    ours = bench_queued(lambda: xopsaot.mul(x.permute(1, 0, 2), y))
    eager = bench_queued(lambda: torch.mul(x.permute(1, 0, 2), y))
    line(label, "mul, heads permuted", (32, 4096, 128), "tbps", nbytes / ours / 1e9, nbytes / eager / 1e9)


def group_norm_held(label: str) -> None:
    """Unsplit groups of 32768 (n x 256 x 64 x 64, 32 groups): 384 to 1024 of them, each timed on the same x every
    call (as benchmarks/norms.py times it; x fits L2 up to 25 MB) and on x rotated among copies past L2."""
    for n in (12, 16, 20, 32):
        shape = (n, 256, 64, 64)
        w, b = randn(shape[1]), randn(shape[1])
        xs = Rotation(lambda: randn(*shape))
        x = xs.next()
        nbytes = 2 * x.numel() * x.element_size()
        for mode, get in (("same x", lambda: x), ("rotated", xs.next)):
            ours = bench_queued(lambda: xopsaot.group_norm(get(), 32, w, b))
            eager = bench_queued(lambda: F.group_norm(get(), 32, w, b))
            line(label, f"group_norm, {mode}", shape, "tbps", nbytes / ours / 1e9, nbytes / eager / 1e9)


GROUPS = {"gelu": gelu, "others": others, "cross_entropy": cross_entropy, "linear": linear, "group_norm": group_norm}
GROUPS["long_rows"] = long_rows
GROUPS["vocab_rows"] = vocab_rows
GROUPS["rotary"] = rotary
GROUPS["scans"] = scans
GROUPS["held_rows"] = held_rows
GROUPS["strided"] = strided
GROUPS["group_norm_held"] = group_norm_held
GROUPS["held_softmax"] = held_softmax
GROUPS["cluster_softmax"] = cluster_softmax
GROUPS["held_pairs"] = held_pairs
GROUPS["cluster_norms"] = cluster_norms
GROUPS["group_norm_waves"] = group_norm_waves
GROUPS["cluster_plain"] = cluster_plain
GROUPS["gate_first"] = gate_first
GROUPS["decode_linear"] = decode_linear
GROUPS["fused_linear"] = fused_linear


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "build"
    warm_up_gpu()
    for name in sys.argv[2:] or list(GROUPS):
        GROUPS[name](label)


if __name__ == "__main__":
    main()
