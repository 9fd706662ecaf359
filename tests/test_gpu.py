"""GPU tests (marker gpu; skipped without a CUDA GPU): every op and every compiled variant against the float64
references on fresh random data with poisoned outputs, side streams, 8 threads, CUDA graphs, other array types,
and the C example."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from arrays import unexercised
from reference64 import add64, assert_close, attention64, matmul64, rms_norm64, rotary64, softmax64

import xopsaot
from xopsaot import _library, _plans

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

DTYPES = ["float16", "bfloat16", "float32"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def poisoned_outputs(poison):
    """Outputs start as NaN (conftest's poison): both the full path and the replay of recorded calls allocate
    through torch.empty / empty_like. Recorded calls are cleared around each test so each test records its own."""
    _plans.clear()
    yield
    _plans.clear()


def cuda(rng, shape, dtype, scale=1.0, offset=0):
    """A random CUDA tensor; offset > 0 returns a view starting `offset` elements into its buffer."""
    n = int(np.prod(shape))
    data = torch.from_numpy((rng.standard_normal(n + offset) * scale).astype(np.float32))
    return data.to(getattr(torch, dtype)).cuda()[offset:].view(shape)


USED: set[int] = set()


def used(result):
    torch.cuda.synchronize()
    USED.add(_library.last_variant())
    return result


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,offset", [(1, 0), (17, 0), (2048, 0), (2049, 1), (1_000_003, 0), (4096, 3)])
def test_add(rng, dtype, n, offset):
    a, b = cuda(rng, (n,), dtype, offset=offset), cuda(rng, (n,), dtype)
    assert_close(used(xopsaot.add(a, b)), add64(a, b), dtype, "add")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 17, 256, 1000, 1024, 4096, 4095, 5000, 8192, 8193, 100_000])
@pytest.mark.parametrize("residual", [False, True])
def test_rms_norm(rng, dtype, n, residual):
    x, w = cuda(rng, (3, n), dtype), cuda(rng, (n,), dtype)
    r = cuda(rng, (3, n), dtype) if residual else None
    out = used(xopsaot.rms_norm(x, w, 1e-5, residual=r))
    y_ref, h_ref = rms_norm64(x, w, 1e-5, r)
    if residual:
        assert_close(out[1], h_ref, dtype, "residual sum")
        out = out[0]
    assert_close(out, y_ref, dtype, "rms_norm")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,dim",
    [
        ((1,), 0),
        ((5, 17), -1),
        ((3, 256), 1),
        ((2, 4096), 1),
        ((7, 8192), 1),
        ((2, 8193), 1),
        ((2, 100_000), 1),
        ((33, 2, 5), 0),
        ((4, 1023), 1),
        ((4, 1024), 1),
        ((3, 3000), 1),
        ((2, 5000), 1),
    ],
)
def test_softmax(rng, dtype, shape, dim):
    x = cuda(rng, shape, dtype, scale=4.0)
    assert_close(used(xopsaot.softmax(x, dim)), softmax64(x, dim), dtype, "softmax")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape_a,shape_b,transpose_b",
    [
        ((1, 1), (1, 1), False),
        ((17, 33), (33, 65), False),
        ((128, 256), (256, 128), False),
        ((129, 257), (257, 255), True),
        ((1000, 64), (64, 3), False),
        ((3, 100, 64), (3, 64, 48), False),
        ((4, 65, 16), (16, 33), True),
        ((64, 32), (5, 32, 64), False),
        ((1, 16, 17), (4, 17, 31), False),
        ((7,), (7, 5), False),
        ((300, 512), (512, 300), True),
        ((256, 128), (128, 64), True),
    ],
)
def test_matmul(rng, dtype, shape_a, shape_b, transpose_b):
    a = cuda(rng, shape_a, dtype)
    b = cuda(rng, shape_b[:-2] + shape_b[:-3:-1], dtype).transpose(-1, -2) if transpose_b else cuda(rng, shape_b, dtype)
    assert_close(used(xopsaot.matmul(a, b)), matmul64(a, b), dtype, "matmul")


ATTENTION = [
    # batch, seqlen_q, seqlen_k, heads, heads_k
    (1, 1, 1, 1, 1),
    (2, 17, 17, 4, 4),
    (1, 1, 513, 8, 1),
    (2, 128, 128, 4, 2),
    (1, 127, 129, 8, 8),
    (1, 129, 127, 4, 1),
    (1, 1000, 1000, 2, 2),
    (2, 300, 77, 8, 4),
    (1, 65, 2048, 16, 2),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", ATTENTION, ids=lambda s: "x".join(map(str, s)))
def test_flash_attn(rng, dtype, dim, causal, shape):
    batch, sq, sk, h, hk = shape
    q = cuda(rng, (batch, sq, h, dim), dtype)
    k, v = cuda(rng, (batch, sk, hk, dim), dtype), cuda(rng, (batch, sk, hk, dim), dtype)
    assert_close(used(xopsaot.flash_attn(q, k, v, causal=causal)), attention64(q, k, v, causal), dtype, "flash_attn")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_strided_views(rng, dtype, dim, causal):
    """q/k/v sliced from packed buffers: a qkv tensor (aligned strides) and a padded head dim (unaligned)."""
    qkv = cuda(rng, (2, 70, 3, 4, dim), dtype)
    q, k, v = qkv.unbind(2)
    assert_close(used(xopsaot.flash_attn(q, k, v, causal=causal)), attention64(q, k, v, causal), dtype, "qkv")
    padded = cuda(rng, (2, 70, 4, dim + 1), dtype)[..., :dim]
    assert_close(
        used(xopsaot.flash_attn(padded, k, v, causal=causal, softmax_scale=0.07)),
        attention64(padded, k, v, causal, 0.07),
        dtype,
        "padded",
    )


def test_every_compiled_variant_was_checked(request):
    """Runs after the op tests above (file order): together they selected every variant compiled for this GPU."""
    ran = {item.originalname for item in request.session.items if item.module is sys.modules[__name__]}
    if not {"test_add", "test_rms_norm", "test_softmax", "test_matmul", "test_flash_attn"} <= ran:
        pytest.skip("the op tests did not all run in this session")
    # tests/test_attention.py covers these and the alternates; test_norms.py and test_activations.py their kernels
    covered_elsewhere = {"attn_fwd", "attn_fwd_ws", "attn_fwd_ws_dense", "attn_decode_tma", "attn_combine"}
    covered_elsewhere |= {"kv_append", "kv_gather"}
    covered_elsewhere |= {"row_norm_kernel", "row_norm_held_kernel", "group_norm_kernel"}
    covered_elsewhere |= {"group_norm_stats_kernel", "group_norm_held_kernel", "group_norm_cluster_kernel"}
    covered_elsewhere |= {"activation_kernel", "gated_activation_kernel", "rotary_kernel", "lrpe_cosine_kernel"}
    covered_elsewhere |= {"elementwise_kernel", "elementwise_strided_kernel", "dropout_kernel", "scan_kernel"}
    covered_elsewhere |= {"scan_totals_kernel"}
    covered_elsewhere |= {
        "matmul_kernel",
        "gemv_kernel",
        "matmul_ws",
        "matmul_reduce_kernel",
        "cross_entropy_kernel",
        "loss_reduce_kernel",
        "sample_kernel",
        "sample_cluster_kernel",
        "sample_chunks_kernel",
        "sample_pick_kernel",
    }
    covered_elsewhere |= {"softmax_kernel", "softmax_held_kernel", "softmax_cluster_kernel"}
    kernels = {k["name"] for k in _library.manifest()["kernels"]} - covered_elsewhere
    missing = unexercised(kernels, USED)
    assert not missing, f"variants never exercised: {missing}"


# ---- streams, threads, graphs ----


def test_runs_on_the_current_stream(rng):
    stream = torch.cuda.Stream()
    a = cuda(rng, (4096, 4096), "bfloat16")
    with torch.cuda.stream(stream):
        x = a @ a  # queued work that the op must follow on the same stream
        for _ in range(5):
            x = x @ a * 0.01
        out = xopsaot.softmax(x)
    stream.synchronize()
    assert_close(out, softmax64(x), "bfloat16", "softmax on a side stream")


def test_dependent_launches_see_their_predecessors_writes(rng):
    """From sm_90 on every kernel may start while its predecessor finishes (programmatic dependent launch) and must
    wait before touching memory: a chain of 40 launches of two kernels, each reading the previous one's output
    and overwriting memory the one before it read, gives NumPy's float32 result bit for bit."""
    x = cuda(rng, (4096, 4096), "float32")
    y, z = torch.empty_like(x), torch.empty_like(x)
    host = x.cpu().numpy()
    for _ in range(20):
        xopsaot.add(x, 1.0, out=y)  # the flat kernel
        xopsaot.mul(y.T, 0.5, out=z.T)  # the strided kernel (transposed view of both)
        x, z = z, x  # the next add reads z and overwrites y, which this step's mul read
        host = (host + np.float32(1.0)) * np.float32(0.5)
    assert np.array_equal(x.cpu().numpy(), host)


def test_eight_threads(rng):
    errors = []
    cases = []
    for _ in range(8):
        q = cuda(rng, (2, 200, 4, 64), "bfloat16")
        x, w = cuda(rng, (64, 1000), "float16"), cuda(rng, (1000,), "float16")
        cases.append((q, x, w))
    expected = [(attention64(q, q, q, True), rms_norm64(x, w, 1e-6)[0]) for q, x, w in cases]

    def work(i):
        q, x, w = cases[i]
        stream = torch.cuda.Stream()
        try:
            with torch.cuda.stream(stream):
                for _ in range(20):
                    attn = xopsaot.flash_attn(q, q, q, causal=True)
                    norm = xopsaot.rms_norm(x, w)
            stream.synchronize()
            assert_close(attn, expected[i][0], "bfloat16", f"thread {i}")
            assert_close(norm, expected[i][1], "float16", f"thread {i}")
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_cuda_graph_capture_and_replay(rng):
    xopsaot.preload()
    q, k, v = (cuda(rng, (1, 256, 8, 128), "bfloat16") for _ in range(3))
    x, w = cuda(rng, (16, 4096), "bfloat16"), cuda(rng, (4096,), "bfloat16")
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        xopsaot.flash_attn(q, k, v, causal=True)  # warm-up on the capture stream
    stream.synchronize()
    with torch.cuda.graph(graph, stream=stream):
        attn = xopsaot.flash_attn(q, k, v, causal=True)
        y, h = xopsaot.rms_norm(x, w, residual=x)
    for _ in range(2):  # new inputs each replay
        q.copy_(cuda(rng, q.shape, "bfloat16"))
        x.copy_(cuda(rng, x.shape, "bfloat16"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(attn, attention64(q, k, v, True), "bfloat16", "graph attention")
        assert_close(y, rms_norm64(x, w, 1e-6, x)[0], "bfloat16", "graph rms_norm")


def test_capture_without_preload_raises_cleanly():
    script = """
import torch, xopsaot
x = torch.randn(8, 64, device="cuda")
graph = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(graph):
        xopsaot.softmax(x)
except xopsaot.XopsaotError as e:
    assert e.status == "CAPTURE" and "preload" in str(e), e
    print("raised")
y = xopsaot.softmax(x)  # the process and the GPU are still usable
torch.testing.assert_close(y, torch.softmax(x, -1))
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.split() == ["raised", "ok"], out.stderr


# ---- the fast path: replayed calls ----


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_replayed_calls(rng, dtype):
    """The second and later calls with one signature replay the first: same results for new data, fresh outputs."""
    seen, kept = set(), []
    for i in range(4):
        x, w, r = cuda(rng, (7, 1000), dtype), cuda(rng, (1000,), dtype), cuda(rng, (7, 1000), dtype)
        q = cuda(rng, (2, 33, 4, 64), dtype)
        y, h = xopsaot.rms_norm(x, w, 1e-5, residual=r)
        attn = xopsaot.flash_attn(q, q[:, :, :2], q[:, :, :2], causal=True)
        mm = xopsaot.matmul(x, w.view(1000, 1).expand(1000, 3))
        total = xopsaot.add(x, r)  # its output made by empty_like of x (a contiguous twin)
        assert_close(total, add64(x, r), dtype, f"call {i}")
        assert_close(y, rms_norm64(x, w, 1e-5, r)[0], dtype, f"call {i}")
        assert_close(h, rms_norm64(x, w, 1e-5, r)[1], dtype, f"call {i}")
        assert_close(attn, attention64(q, q[:, :, :2], q[:, :, :2], True), dtype, f"call {i}")
        assert_close(mm, matmul64(x, w.view(1000, 1).expand(1000, 3)), dtype, f"call {i}")
        seen.update(t.data_ptr() for t in (y, h, attn, mm, total))
        kept += [y, h, attn, mm, total]  # alive, so the allocator cannot hand their memory out again
    assert len(seen) == 4 * 5  # outputs are new tensors, not reused buffers of an earlier call
    assert len(_plans.plans) == 4


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_validated_calls_with_nothing_to_read_replay(rng, dtype):
    """validate=True reads index tensors on the host, so only calls that have one run the full path every time:
    apply_rotary with an int offset and the KV cache without cache_seqlens are recorded once and replayed, with
    right results for new data; with cu_seqlens / cache_seqlens nothing is recorded."""
    positions = np.arange(2, 2 + 33)[None, :].repeat(3, 0)
    for i in range(3):
        x, cos, sin = cuda(rng, (3, 33, 4, 64), dtype), cuda(rng, (40, 24), dtype), cuda(rng, (40, 24), dtype)
        q, k_cache, v_cache = (
            cuda(rng, shape, dtype) for shape in ((2, 1, 8, 128), (2, 300, 2, 128), (2, 300, 2, 128))
        )
        assert_close(xopsaot.apply_rotary(x, cos, sin, seqlen_offsets=2), rotary64(x, cos, sin, positions, False),
                     dtype, f"apply_rotary, call {i}")  # fmt: skip
        out = xopsaot.flash_attn_with_kvcache(q, k_cache, v_cache)  # GQA 8:2 over the whole cache
        assert_close(out, attention64(q, k_cache, v_cache), dtype, f"flash_attn_with_kvcache, call {i}")
    assert len(_plans.plans) == 2
    cu, lengths = torch.tensor([0, 17, 33], dtype=torch.int32).cuda(), torch.tensor([5, 300], dtype=torch.int32).cuda()
    xopsaot.apply_rotary(x.view(99, 4, 64)[:33], cos, sin, cu_seqlens=cu, max_seqlen=17)
    xopsaot.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths)
    assert len(_plans.plans) == 2


def test_replays_from_many_threads(rng):
    x, w = cuda(rng, (64, 512), "bfloat16"), cuda(rng, (512,), "bfloat16")
    expected = rms_norm64(x, w, 1e-6)[0]
    xopsaot.rms_norm(x, w)
    errors = []

    def work():
        try:
            for _ in range(200):
                out = xopsaot.rms_norm(x, w)
            torch.cuda.synchronize()
            assert_close(out, expected, "bfloat16")
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ---- the Python contract on the GPU ----


def test_results_keep_type_device_dtype_and_inputs(rng):
    x = cuda(rng, (4, 100), "bfloat16")
    before = x.clone()
    out = xopsaot.softmax(x)
    assert out.is_cuda and out.dtype == torch.bfloat16 and out.device == x.device
    assert torch.equal(x, before)


def test_gpu_tensor_never_silently_goes_to_the_cpu(rng, monkeypatch):
    x = cuda(rng, (4, 100), "float32")
    from xopsaot import _call

    xopsaot.softmax(x)  # recorded: the next call with this signature would replay it
    monkeypatch.setattr(_call, "gpu_unavailable", lambda device: "no binary for sm_00 (pretend)")
    _plans.clear()
    with pytest.raises(xopsaot.XopsaotError, match="cannot run on cuda:0"):
        xopsaot.softmax(x)
    out = xopsaot.softmax(x, backend="cpu")  # explicit: computed by NumPy, returned on the GPU
    assert out.is_cuda
    assert_close(out, softmax64(x), "float32")


def test_mixed_devices(rng):
    with pytest.raises(ValueError, match="input on cuda:0, other on cpu"):
        xopsaot.add(cuda(rng, (4,), "float32"), torch.zeros(4))


def test_attention_dtype_on_the_gpu(rng):
    with pytest.raises(TypeError, match="supported on the GPU: float16, bfloat16"):
        xopsaot.flash_attn(*(cuda(rng, (1, 8, 2, 64), "float32") for _ in range(3)))


def test_info_reports_the_memory_bandwidth():
    """info()'s memory_gbps is the peak from the memory's clock and bus width (double data rate): H100 SXM 3352 GB/s,
    H200 4814 (3201 MHz x 6016 bits). Checked against nvidia-smi's memory clock and torch's bus width where both
    are there."""
    for device in xopsaot.info()["devices"]:
        gbps = device["memory_gbps"]
        assert 1000 <= gbps <= 20000, device
        bits = getattr(torch.cuda.get_device_properties(device["index"]), "memory_bus_width", 0)
        query = ["nvidia-smi", "-i", str(device["index"]), "--query-gpu=clocks.max.memory", "--format=csv,noheader"]
        mhz = (
            subprocess.run(query, capture_output=True, text=True).stdout.split(" ")[0] if shutil.which(query[0]) else ""
        )
        if bits and mhz.isdigit():
            assert abs(gbps - int(mhz) * bits / 4000) <= 2, (gbps, mhz, bits)


def test_all_devices(rng):
    for device in range(torch.cuda.device_count()):
        a = cuda(rng, (1000,), "float16").to(f"cuda:{device}")
        assert_close(xopsaot.add(a, a), add64(a, a), "float16", f"cuda:{device}")


def test_cupy_arrays(rng):
    cupy = pytest.importorskip("cupy")
    a = cupy.asarray(rng.standard_normal((3, 1000)).astype(np.float32))
    out = xopsaot.softmax(a)
    assert isinstance(out, cupy.ndarray)
    assert_close(cupy.asnumpy(out), softmax64(cupy.asnumpy(a)), "float32", "cupy")


def test_jax_arrays(rng):
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    if not jax.devices("gpu"):
        pytest.skip("JAX has no GPU here")
    x = jax.device_put(rng.standard_normal((1, 64, 4, 64)).astype(np.float16), jax.devices("gpu")[0])
    out = xopsaot.flash_attn(x, x, x, causal=True)
    assert isinstance(out, jax.Array) and list(out.devices())[0].platform == "gpu"
    assert_close(np.asarray(out), attention64(np.asarray(x), np.asarray(x), np.asarray(x), True), "float16", "jax")


def test_c_example():
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    from test_c_example import build_example

    exe = build_example(cc)
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "max error" in out.stdout
