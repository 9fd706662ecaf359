"""The Python API contract: info, ops, dispatch, backend choice, result types, and the errors bad input raises."""

from __future__ import annotations

import re

import numpy as np
import pytest
from arrays import make, torch_or_skip
from conftest import cuda_available
from reference64 import assert_close, matmul64, softmax64

import xopsaot
from xopsaot import _call

OPS = [  # every op the issues name so far
    "abs", "add", "addmm", "apply_rotary", "bitwise_and", "bitwise_not", "bitwise_or", "bmm", "clamp", "cos",
    "cross_entropy", "cumsum", "div", "dropout", "eq", "exp", "flash_attn", "flash_attn_varlen",
    "flash_attn_with_kvcache", "gate_linear", "ge", "gelu", "gelu_and_mul", "group_norm", "gt", "isinf", "isnan",
    "layer_norm", "le", "linear", "linear_cross_entropy", "linear_sample", "log_softmax", "logcumsumexp",
    "logsumexp", "lrpe_cosine", "lt", "matmul", "maximum", "minimum", "mm", "mul", "ne", "neg", "norm_gate", "pow",
    "relu", "rms_norm", "rotary_qk", "rsqrt", "sample", "sigmoid", "silu", "silu_and_mul", "sin", "softmax", "sub",
    "tanh",
]  # fmt: skip


def test_ops_and_dispatch(rng):
    assert xopsaot.ops() == sorted(xopsaot.ops())
    assert set(OPS) <= set(xopsaot.ops())
    a, b = make(rng, (3, 4), "float32"), make(rng, (3, 4), "float32")
    np.testing.assert_array_equal(xopsaot.dispatch("add", a, b), xopsaot.add(a, b))
    q = make(rng, (1, 5, 2, 16), "float32")
    np.testing.assert_array_equal(
        xopsaot.dispatch("flash_attn", q, q, q, causal=True), xopsaot.flash_attn(q, q, q, causal=True)
    )
    for name in OPS:
        assert callable(getattr(xopsaot, name))


@pytest.mark.parametrize("name", ["nope", "", None, 3])
def test_dispatch_unknown_op(name):
    with pytest.raises(ValueError, match="known ops: " + re.escape(", ".join(xopsaot.ops())) + "$"):
        xopsaot.dispatch(name)


def test_info_reports_cpu_with_reason(monkeypatch):
    info = xopsaot.info()
    for key in ("version", "backend", "reason", "archs", "devices", "variants", "library", "ops"):
        assert key in info
    assert info["version"] == xopsaot.__version__
    assert info["archs"] and all(a.startswith("sm_") for a in info["archs"])
    assert len(info["variants"]) > 0 and info["library"].endswith("libxopsaot.so")
    if not cuda_available():
        assert info["backend"] == "cpu" and info["reason"]
    monkeypatch.setattr(_call, "ENV_BACKEND", "cpu")
    assert xopsaot.info()["backend"] == "cpu" and xopsaot.info()["reason"] == "XOPSAOT_BACKEND=cpu"


@pytest.mark.skipif(cuda_available(), reason="checks the behaviour without a GPU")
def test_preload_without_gpu_raises():
    with pytest.raises(xopsaot.XopsaotError, match="CUDA driver|no devices|cuInit"):
        xopsaot.preload()
    with pytest.raises(ValueError, match="device must be"):
        xopsaot.preload("tpu:0")


def test_backend_choice(rng, monkeypatch):
    a = make(rng, (4,), "float32")
    np.testing.assert_array_equal(xopsaot.add(a, a, backend="cpu"), 2 * a)
    with pytest.raises(ValueError, match="backend='gpu' is not one of auto, cpu, cuda"):
        xopsaot.add(a, a, backend="gpu")
    with pytest.raises(ValueError, match="needs GPU arrays"):
        xopsaot.add(a, a, backend="cuda")
    monkeypatch.setattr(_call, "ENV_BACKEND", "cuda")
    with pytest.raises(ValueError, match="needs GPU arrays"):
        xopsaot.add(a, a)
    monkeypatch.setattr(_call, "ENV_BACKEND", "fast")
    with pytest.raises(ValueError, match="XOPSAOT_BACKEND='fast'"):
        xopsaot.add(a, a)


def test_backend_environment_variable_is_read_at_import():
    import subprocess
    import sys

    script = "import numpy as np, xopsaot; print(xopsaot.info()['reason']); xopsaot.add(np.ones(2), np.ones(2))"
    env = {**__import__("os").environ, "XOPSAOT_BACKEND": "cpu"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.stdout.splitlines()[0] == "XOPSAOT_BACKEND=cpu"
    env["XOPSAOT_BACKEND"] = "tpu"
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert "XOPSAOT_BACKEND='tpu' is not one of auto, cpu, cuda" in out.stderr


def test_inputs_are_not_modified(rng):
    x, w, r = make(rng, (3, 40), "float16"), make(rng, (40,), "float16"), make(rng, (3, 40), "float16")
    copies = [t.copy() for t in (x, w, r)]
    xopsaot.rms_norm(x, w, residual=r)
    xopsaot.softmax(x, dim=0)
    for before, after in zip(copies, (x, w, r)):
        np.testing.assert_array_equal(before, after)


def test_non_contiguous_inputs(rng):
    a = make(rng, (40, 30), "float32")
    b = make(rng, (50, 40), "float32")
    assert_close(xopsaot.matmul(a.T, b.T), matmul64(a.T, b.T), "float32")
    assert_close(xopsaot.softmax(a[::2, ::3]), softmax64(a[::2, ::3]), "float32")


def test_torch_cpu_results_keep_type_and_dtype(rng):
    torch = torch_or_skip()
    x = make(rng, (2, 5), "bfloat16", "torch")
    out = xopsaot.softmax(x)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and out.device.type == "cpu"
    scalar = xopsaot.matmul(make(rng, (6,), "float32", "torch"), make(rng, (6,), "float32", "torch"))
    assert scalar.shape == ()


# ---- bad input: the documented exception, naming the argument and what is supported ----


def q_k_v(rng, q_shape=(1, 8, 4, 64), k_shape=(1, 8, 4, 64), dtype="float16"):
    return make(rng, q_shape, dtype), make(rng, k_shape, dtype), make(rng, k_shape, dtype)


@pytest.mark.parametrize(
    "q_shape,k_shape,message",
    [
        ((8, 4, 64), (1, 8, 4, 64), r"q must have 4 dims \(batch, seqlen, heads, headdim\), got shape \(8, 4, 64\)"),
        ((1, 8, 4, 64), (8, 4, 64), "k must have 4 dims"),
        ((1, 8, 4, 64), (1, 8, 4, 32), "k has headdim 32 but q has headdim 64"),
        ((1, 8, 4, 64), (1, 8, 3, 64), r"heads of q \(4\) must be a multiple of the heads of k and v \(3\)"),
        ((2, 8, 4, 64), (1, 8, 4, 64), "k has batch 1 but q has batch 2"),
    ],
)
def test_flash_attn_bad_shapes(rng, q_shape, k_shape, message):
    q, k, v = q_k_v(rng, q_shape, k_shape)
    with pytest.raises(ValueError, match=message):
        xopsaot.flash_attn(q, k, v)


def test_flash_attn_bad_values(rng):
    q, k, v = q_k_v(rng)
    with pytest.raises(ValueError, match="k and v must have the same shape"):
        xopsaot.flash_attn(q, k, v[:, :4])
    with pytest.raises(TypeError, match="v.dtype is float32 but q.dtype is float16"):
        xopsaot.flash_attn(q, k, v.astype(np.float32))
    with pytest.raises(TypeError, match="q.dtype is int32; supported: float16, bfloat16, float32"):
        xopsaot.flash_attn(*(t.astype(np.int32) for t in (q, k, v)))
    with pytest.raises(TypeError, match="causal must be a bool"):
        xopsaot.flash_attn(q, k, v, causal="yes")
    with pytest.raises(TypeError, match="softmax_scale must be a finite float"):
        xopsaot.flash_attn(q, k, v, softmax_scale=float("nan"))
    with pytest.raises(TypeError, match="k must be an array"):
        xopsaot.flash_attn(q, [1, 2], v)


def test_mixed_array_kinds(rng):
    torch = torch_or_skip()
    a = make(rng, (3,), "float32")
    with pytest.raises(TypeError, match="input is a numpy array but other is a torch array"):
        xopsaot.add(a, torch.from_numpy(a))


def test_other_ops_bad_input(rng):
    a = make(rng, (3, 4), "float32")
    with pytest.raises(ValueError, match=r"add: shapes do not broadcast: input \(3, 4\) and other \(4, 3\)"):
        xopsaot.add(a, a.T)
    with pytest.raises(TypeError, match="add: input.dtype is float64; supported: bool, int32, int64"):
        xopsaot.add(a.astype(np.float64), a)
    with pytest.raises(ValueError, match=r"weight must have shape \(4,\)"):
        xopsaot.rms_norm(a, a)
    with pytest.raises(ValueError, match="eps must be >= 0.0"):
        xopsaot.rms_norm(a, a[0], eps=-1.0)
    with pytest.raises(ValueError, match=r"residual has shape \(4, 3\)"):
        xopsaot.rms_norm(a, a[0], residual=a.T)
    with pytest.raises(ValueError, match="dim 2 is out of range for 2 dims"):
        xopsaot.softmax(a, dim=2)
    with pytest.raises(TypeError, match="dim must be an int"):
        xopsaot.softmax(a, dim=1.0)
    with pytest.raises(ValueError, match=r"a's last dim \(4\) must equal b's second-to-last dim \(3\)"):
        xopsaot.matmul(a, a)
    with pytest.raises(ValueError, match="batch dims 2 and 3 do not broadcast"):
        xopsaot.matmul(make(rng, (2, 3, 4), "float32"), make(rng, (3, 4, 5), "float32"))
    with pytest.raises(ValueError, match="b must have 1 or 2 or 3 dims"):
        xopsaot.matmul(a, make(rng, (1, 1, 4, 5), "float32"))
