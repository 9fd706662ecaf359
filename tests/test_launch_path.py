"""The C launch path without a GPU: variant choice, grids, argument packing, error paths, the per-context module
cache, threads and graph capture, against a fake CUDA driver (fake_cuda/fake_cuda.c) built by the tests.

Each scenario runs in a subprocess (the driver is loaded once per process) with XOPSAOT_CUDA_DRIVER pointing at
the fake; it calls the C ops through xopsaot._library with made-up device pointers and reports what the fake
driver saw as JSON."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import xopsaot
from xopsaot import _library

FAKE_SOURCE = Path(__file__).parent / "fake_cuda" / "fake_cuda.c"
ARCHS = _library.manifest()["archs"] if _library.MANIFEST_PATH.exists() else []


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler to build the fake driver")
    path = tmp_path_factory.mktemp("fake_cuda") / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-o", str(path), str(FAKE_SOURCE), "-lpthread"], check=True)
    return path


PRELUDE = """
import ctypes, json, os, struct, threading
import xopsaot
from xopsaot import _library
from xopsaot._arrays import View, contiguous_strides

fake = ctypes.CDLL(os.environ["XOPSAOT_CUDA_DRIVER"]) if os.path.exists(os.environ["XOPSAOT_CUDA_DRIVER"]) else None

class Launch(ctypes.Structure):
    _fields_ = [("image", ctypes.c_void_p), ("ctx_id", ctypes.c_ulonglong), ("name", ctypes.c_char * 128),
                ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("cluster", ctypes.c_uint), ("pdl", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("nparams", ctypes.c_int), ("params", ctypes.c_ulonglong * 64)]

class TensorMap(ctypes.Structure):
    _fields_ = [("address", ctypes.c_ulonglong), ("dims", ctypes.c_ulonglong * 5), ("strides", ctypes.c_ulonglong * 5),
                ("box", ctypes.c_uint * 5), ("dtype", ctypes.c_int), ("rank", ctypes.c_int), ("swizzle", ctypes.c_int),
                ("oob_fill", ctypes.c_int)]

if fake is not None:
    fake.fake_cuda_launch.restype = ctypes.POINTER(Launch)
    fake.fake_cuda_tensor_map.restype = ctypes.POINTER(TensorMap)
    fake.fake_cuda_make_current.restype = ctypes.c_ulonglong
    fake.fake_cuda_set_capturing.argtypes = [ctypes.c_void_p, ctypes.c_int]
    fake.fake_cuda_set_cost.argtypes = [ctypes.c_void_p, ctypes.c_double]
MANIFEST = _library.manifest()
BY_ADDRESS = {}
for v in MANIFEST["variants"]:
    data = ctypes.c_void_p()
    size = ctypes.c_uint64()
    _library.library().xopsaot_variant_binary(v["index"], ctypes.byref(data), ctypes.byref(size))
    BY_ADDRESS[data.value] = v

def options(scale, causal=0, splits=1):
    return _library.AttentionOptions(scale, causal, -1, -1, 0.0, splits)

def tensor(shape, dtype="float16", ptr=0x7f0000000000, device=0, strides=None):
    shape = tuple(shape)
    return View(None, shape, tuple(strides) if strides else contiguous_strides(shape), dtype, device, ptr)

def launches():
    out = []
    for i in range(fake.fake_cuda_launch_count()):
        l = fake.fake_cuda_launch(i).contents
        v = BY_ADDRESS[l.image]
        out.append({"kernel": l.name.decode(), "grid": list(l.grid), "block": list(l.block), "smem": l.smem,
                    "stream": l.stream or 0, "ctx": l.ctx_id, "params": list(l.params[:l.nparams]),
                    "pdl": l.pdl, "cluster": l.cluster, "variant": v})
    return out

def tensor_maps():
    maps = [fake.fake_cuda_tensor_map(i).contents for i in range(fake.fake_cuda_tensor_map_count())]
    return [{"address": m.address, "dims": list(m.dims[:m.rank]), "strides": list(m.strides[:m.rank - 1]),
             "box": list(m.box[:m.rank]), "dtype": m.dtype, "swizzle": m.swizzle, "oob_fill": m.oob_fill} for m in maps]

def error_of(fn, *args):
    try:
        fn(*args)
    except Exception as e:
        return [type(e).__name__, str(e), getattr(e, "status", None)]
    return None

def emit(**values):
    print(json.dumps(values))
"""


def scenario(fake_driver: Path, body: str, devices: str = "90", **env: str) -> dict:
    environment = {**os.environ, "XOPSAOT_CUDA_DRIVER": str(fake_driver), "FAKE_CUDA_DEVICES": devices, **env}
    environment.pop("XOPSAOT_BACKEND", None)
    result = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


needs_sm90 = pytest.mark.skipif("sm_90a" not in ARCHS, reason="this build has no sm_90 binaries")


def decode(params: list[int], kernel: str) -> list:
    """The launch's parameter values by the kernel's argument types (the fake copies 8 bytes of each)."""
    (entry,) = [k for k in _library.manifest()["kernels"] if k["name"] == kernel]
    values = []
    for raw, arg in zip(params, entry["args"] + [{"type": "*scratch"}] * 2):
        if arg["type"] == "i32":
            values.append(struct.unpack("<i", struct.pack("<I", raw & 0xFFFFFFFF))[0])
        elif arg["type"] == "fp32":
            values.append(struct.unpack("<f", struct.pack("<I", raw & 0xFFFFFFFF))[0])
        else:
            values.append(raw)
    return values


A, B, C, D, E = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000, 0x7F0000300000, 0x7F0000400000


@needs_sm90
def test_add_packs_arguments_and_picks_variants(fake_driver):
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(16)
        for dtype in ("float16", "bfloat16", "float32"):
            _library.call("xopsaot_add", (tensor((1000,), dtype, {A}), tensor((1000,), dtype, {B}),
                                          tensor((1000,), dtype, {C})), 0x1234)
        _library.call("xopsaot_add", (tensor((2**40,), ptr={A}), tensor((2**40,), ptr={A} + 2**41),
                                      tensor((2**40,), ptr={A} + 2**42)), 0)
        emit(launches=launches(), depth=fake.fake_cuda_depth(),
             too_big=error_of(_library.call, "xopsaot_add", (tensor((2**45,)),) * 3, 0),
             empty=error_of(_library.call, "xopsaot_add", (tensor((0,)),) * 3, 0),
             count=fake.fake_cuda_launch_count())
    """,
    )
    fp16, bf16, fp32, huge = r["launches"]
    assert fp16["kernel"] == "elementwise_kernel" and fp16["grid"] == [1, 1, 1] and fp16["block"] == [128, 1, 1]
    assert fp16["stream"] == 0x1234
    # X, Y, OUT, n, inner, op, mode_x, mode_y, fa (alpha), fb, ia (alpha), ib, fs, is_ + the two scratch pointers
    assert decode(fp16["params"], "elementwise_kernel")[:14] == [A, B, C, 1000, 16, 0, 0, 0, 1.0, 0.0, 1, 0, 0.0, 0]
    assert fp16["variant"]["arch"] == "sm_90a" and fp16["variant"]["dtypes"] == {"T": "float16", "O": "float16"}
    assert bf16["variant"]["dtypes"] == {"T": "bfloat16", "O": "bfloat16"}
    assert fp32["variant"]["dtypes"] == {"T": "float32", "O": "float32"}
    assert huge["grid"] == [2**40 // 1024, 1, 1] and huge["params"][3] == 2**40  # 64-bit sizes and grid
    assert r["too_big"][0] == "ValueError" and "outside the launch limits" in r["too_big"][1]
    assert r["empty"] is None and r["count"] == 4  # an empty tensor launches nothing
    assert r["depth"] == 0  # the primary context pushed for the launch was popped


ELEMENTWISE_PRELUDE = """
        def ew(op, x, y, out, **kw):
            o = _library.ElementwiseOptions(op=op, **kw)
            _library.call("xopsaot_elementwise", (x, y, out), ctypes.byref(o), 0)
        def ew_error(op, x, y, out, **kw):
            r = error_of(lambda: ew(op, x, y, out, **kw))
            return r and r[1]
"""


@needs_sm90
def test_elementwise_flat_kernel_modes(fake_driver):
    """The flat kernel: contiguous operands, a bias row, a column vector, one element, a scalar by value, bool out,
    unary ops (y unused), sub as add with -alpha and int32 clamp bounds saturated."""
    r = scenario(
        fake_driver,
        ELEMENTWISE_PRELUDE
        + f"""
        fake.fake_cuda_expect_params(16)
        x = tensor((64, 4096), "float16", {A})
        out = tensor((64, 4096), "float16", {C})
        ew(1, x, tensor((4096,), "float16", {B}), out)                   # bias: y[i % 4096]
        ew(1, x, tensor((64, 1), "float16", {B}), out)                   # column: y[i // 4096]
        ew(1, x, tensor((1, 1), "float16", {B}), out)                    # one element
        ew(14, x, None, tensor((64, 4096), "bool", {C}), scalar_operand=2, scalar=0.5)  # x > 0.5
        ew(5, None, x, out, scalar_operand=1, scalar=2.0)                # 2 ** x
        ew(16, tensor((10,), "int32", {A}), None, tensor((10,), "int32", {C}))
        ew(26, tensor((10,), "int64", {A}), tensor((10,), "int64", {B}), tensor((10,), "int64", {C}), alpha_int=3)
        ew(25, tensor((10,), "int32", {A}), None, tensor((10,), "int32", {C}), min_int=-2**40, max_int=7)
        ew(2, x, x, out)                                                 # x / x: division's own binary
        ew(18, x, None, out)                                             # exp: its own binary
        ew(19, x, None, out)                                             # rsqrt: the unary math binary
        ew(3, tensor((10,), "int32", {A}), tensor((10,), "int32", {B}), tensor((10,), "int32", {C}))  # int trunc
        emit(launches=launches())
    """,
    )
    launched = [decode(x["params"], x["kernel"])[:14] for x in r["launches"]]
    bias, column, one, gt, pow_, neg, sub, clamp = launched[:8]
    assert {x["kernel"] for x in r["launches"]} == {"elementwise_kernel"}
    n = 64 * 4096
    assert bias == [A, B, C, n, 4096, 1, 0, 2, 0.0, 0.0, 0, 0, 0.0, 0]
    assert column[4:8] == [4096, 1, 0, 3] and one[4:8] == [16, 1, 0, 1]
    assert gt[1] == C and gt[5:8] == [14, 0, 4] and gt[12] == 0.5  # the scalar's slot points at out (aligned)
    assert r["launches"][3]["variant"]["dtypes"] == {"T": "float16", "O": "bool"}
    assert pow_[5:8] == [5, 4, 0] and pow_[0] == C and pow_[12] == 2.0
    # binary math runs the OPS=2 variant, unary math OPS=3, the rest the light one; division and exp (floating
    # point) have their own binaries, whose op code is a constant
    variants = [(x["variant"]["keys"]["OPS"], x["variant"]["keys"]["FIXED_OP"]) for x in r["launches"]]
    assert variants == [(1, 0)] * 4 + [(2, 0)] + [(1, 0)] * 3 + [(2, 2), (3, 18), (3, 0), (2, 0)]
    assert [x[5] for x in launched[8:]] == [2, 18, 19, 3]
    assert neg[5:8] == [16, 0, 4]
    assert sub[5] == 0 and sub[10] == 2**64 - 3  # add with alpha -3 (raw int64)
    assert clamp[5] == 25 and clamp[10] == 2**64 - 2**31 and clamp[11] == 7


@needs_sm90
def test_elementwise_strided_kernel_and_host_loop(fake_driver):
    """Unaligned pointers and general strides take the strided kernel: the wide tile for long rows, the tall aligned
    one for floating-point rows in runs of 128 whose pointers and strides are aligned (the light ops' own variant
    of it, OPS 1, for add; every op's for div), the narrow one for short rows; more than 4 merged dims loop over the
    leading ones on the host."""
    r = scenario(
        fake_driver,
        ELEMENTWISE_PRELUDE
        + f"""
        fake.fake_cuda_expect_params(30)
        ew(0, tensor((1000,), "float16", {A} + 2), tensor((1000,), "float16", {B}), tensor((1000,), "float16", {C}),
           alpha=1.0)
        ew(0, tensor((64, 32), "float32", {A}, strides=(1, 64)), tensor((64, 32), "float32", {B}),
           tensor((64, 32), "float32", {C}), alpha=1.0)
        ew(0, tensor((64, 128), "float32", {A}, strides=(1, 64)), tensor((64, 128), "float32", {B}),
           tensor((64, 128), "float32", {C}), alpha=1.0)
        def tall(dtype, x_ptr, x_stride):  # x.T + y over (128, 64)
            ew(0, tensor((128, 64), dtype, x_ptr, strides=(1, x_stride)), tensor((128, 64), dtype, {B}),
               tensor((128, 64), dtype, {C}), alpha=1.0)
        tall("float32", {A}, 128)
        ew(2, tensor((128, 64), "float32", {A}, strides=(1, 128)), tensor((128, 64), "float32", {B}),
           tensor((128, 64), "float32", {C}))  # x.T / y: not a light op
        tall("float32", {A} + 4, 128)  # x's pointer not 16-byte aligned
        tall("float32", {A}, 136)      # x's stride not a multiple of 16
        tall("int32", {A}, 128)        # the tall tile is for floating point only
        first = fake.fake_cuda_launch_count()
        shape = (2, 3, 2, 3, 2, 5)
        ew(0, tensor(shape, "float32", {A}, strides=(1, 2, 6, 12, 36, 72)), tensor(shape, "float32", {B}),
           tensor(shape, "float32", {C}), alpha=1.0)
        emit(launches=launches()[:first], looped=launches()[first:])
    """,
    )
    unaligned, transposed, wide, tall, tall_div, *not_tall = r["launches"]
    args = decode(unaligned["params"], "elementwise_strided_kernel")
    # X, Y, OUT, n_rows, d1, d2, d3, sx0..3, sy0..3, so0..3
    assert args[:19] == [A + 2, B, C, 1, 1, 1, 1000, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]
    narrow = {"BLOCK_R": 16, "BLOCK_C": 128, "TILED": True, "ALIGNED": False, "OPS": 0}
    assert unaligned["variant"]["constexprs"] == narrow
    args = decode(transposed["params"], "elementwise_strided_kernel")
    assert args[3:19] == [64, 1, 64, 32, 0, 0, 1, 64, 0, 0, 32, 1, 0, 0, 32, 1]
    assert transposed["variant"]["constexprs"] == {"BLOCK_R": 256, "BLOCK_C": 8, "TILED": False, "ALIGNED": False,
                                                   "OPS": 0}  # fmt: skip
    assert wide["variant"]["constexprs"] == narrow  # runs of 64 rows: not the tall tile's 128
    tile = {"BLOCK_R": 128, "BLOCK_C": 32, "TILED": True, "ALIGNED": True}
    assert tall["variant"]["constexprs"] == {**tile, "OPS": 1}
    assert tall_div["variant"]["constexprs"] == {**tile, "OPS": 0} and tall_div["grid"] == [2, 1, 1]
    assert tall["grid"] == [2, 1, 1]
    assert decode(tall["params"], "elementwise_strided_kernel")[3:19] == [128, 1, 128, 64, 0, 0, 1, 128, 0, 0, 64, 1,
                                                                          0, 0, 64, 1]  # fmt: skip
    assert [x["variant"]["constexprs"] for x in not_tall] == [narrow] * 3
    looped = r["looped"]
    assert len(looped) == 2 * 3 * 2  # three leading dims on the host, the last three in each launch
    firsts = [decode(x["params"], "elementwise_strided_kernel") for x in looped]
    assert firsts[1][0] == A + 4 * 6 and firsts[1][2] == C + 4 * 30  # the next index of the leading dims
    assert firsts[0][3:7] == [6, 3, 2, 5]


@needs_sm90
def test_elementwise_c_checks(fake_driver):
    r = scenario(
        fake_driver,
        ELEMENTWISE_PRELUDE
        + f"""
        f16 = lambda shape, ptr={A}, **kw: tensor(shape, "float16", ptr, **kw)
        i32 = lambda shape, ptr={A}: tensor(shape, "int32", ptr)
        emit(
            broadcast=ew_error(0, f16((4, 3)), f16((4,), {B}), f16((4, 3), {C})),
            self_overlap=ew_error(0, f16((4, 3)), f16((4, 3), {B}), f16((4, 3), {C}, strides=(0, 1))),
            partial=ew_error(0, f16((4, 3), {C} + 2), f16((4, 3), {B}), f16((4, 3), {C})),
            in_place=ew_error(0, f16((4, 3), {C}), f16((4, 3), {B}), f16((4, 3), {C}), alpha=1.0),
            int_div=ew_error(2, i32((4,)), i32((4,), {B}), i32((4,), {C})),
            float_not=ew_error(24, f16((4,)), None, f16((4,), {C})),
            compare_out=ew_error(10, f16((4,)), f16((4,), {B}), f16((4,), {C})),
            mixed=ew_error(0, f16((4,)), tensor((4,), "float32", {B}), f16((4,), {C})),
            unary_y=ew_error(16, f16((4,)), f16((4,), {B}), f16((4,), {C})),
            bad_op=ew_error(99, f16((4,)), f16((4,), {B}), f16((4,), {C})),
            scalar_unary=ew_error(16, f16((4,)), None, f16((4,), {C}), scalar_operand=2),
            missing=ew_error(0, f16((4,)), None, f16((4,), {C})),
            launches=fake.fake_cuda_launch_count(),
        )
    """,
    )
    assert "y's dim 0 has size 4, which does not broadcast to out's 3" in r["broadcast"]
    assert "out has overlapping elements" in r["self_overlap"]
    assert "x and out share memory but are not the same elements" in r["partial"]
    assert r["in_place"] is None and r["launches"] == 1
    assert r["int_div"] == "div: dtype int32 is not supported; supported: float16, bfloat16, float32"
    assert r["float_not"] == "bitwise_not: dtype float16 is not supported; supported: int32, int64, bool"
    assert r["compare_out"] == "eq: out has dtype float16, expected bool"
    assert r["mixed"] == "add: y has dtype float32, expected float16"
    assert r["unary_y"] == "neg: a unary op takes no y"
    assert r["bad_op"] == "elementwise: op is 99; supported: 0 to 26"
    assert "scalar_operand is 2; supported: 0 (a unary op)" in r["scalar_unary"]
    assert r["missing"] == "add: y is NULL"


@needs_sm90
def test_config_predicates_and_keys(fake_driver):
    r = scenario(
        fake_driver,
        """
        for n in (96, 4096, 9000, 100):
            x = tensor((3, n))
            _library.call("xopsaot_rms_norm", (x, tensor((n,)), None, x, None), 1e-6, 0)
        x = tensor((3, 64))
        _library.call("xopsaot_rms_norm", (x, tensor((64,)), x, x, x), 1e-6, 0)
        a, b = tensor((2, 64, 32), "bfloat16"), tensor((32, 48), "bfloat16")
        _library.call("xopsaot_matmul", (a, b, tensor((2, 64, 48), "bfloat16")), 0)
        bt = tensor((32, 48), "bfloat16", strides=(1, 32))  # a transposed weight
        _library.call("xopsaot_matmul", (a, bt, tensor((2, 64, 48), "bfloat16")), 0)
        _library.call("xopsaot_matmul", (tensor((16, 32), "bfloat16"), bt, tensor((16, 48), "bfloat16")), 0)
        _library.call("xopsaot_matmul", (tensor((17, 32), "bfloat16"), bt, tensor((17, 48), "bfloat16")), 0)
        _library.call("xopsaot_matmul", (tensor((65, 32), "bfloat16"), bt, tensor((65, 48), "bfloat16")), 0)
        bt30 = tensor((30, 48), "bfloat16", strides=(1, 30))  # rows of 60 bytes, which TMA cannot take
        _library.call("xopsaot_matmul", (tensor((257, 30), "bfloat16"), bt30, tensor((257, 48), "bfloat16")), 0)
        for n in (12288, 20000, 40000, 73728):
            x = tensor((3, n))
            _library.call("xopsaot_rms_norm", (x, tensor((n,)), None, x, None), 1e-6, 0)
        for n, bias in ((20000, True), (20000, False), (12288, True)):  # layer norms: with a bias, then without
            x, w = tensor((3, n)), tensor((n,))
            options = _library.NormOptions(1, 1e-5, 0.0, 0, 1)
            _library.call("xopsaot_norm", (x, w, w if bias else None, None, None, x, None), ctypes.byref(options), 0)
        emit(launches=launches())
    """,
    )
    small, mid, loop, unaligned, residual, mm, mm_t, decode, decode_32, rows_256, large, *wide = r["launches"]
    *wide, layer_affine, layer_no_bias, layer_16k = wide
    # layer norms with a weight and a bias held in blocks of 32768 take the config with those switches compiled in
    assert layer_affine["variant"]["constexprs"] == {
        "HAS_RESIDUAL": False,
        "HAS_GATE": False,
        "BLOCK_N": 32768,
        "LOOP": False,
        "LAYER_AFFINE": True,
    }
    assert [v["variant"]["constexprs"]["LAYER_AFFINE"] for v in (layer_no_bias, layer_16k, *wide)] == [False] * 6
    assert layer_no_bias["variant"]["constexprs"]["BLOCK_N"] == 32768 and layer_16k["block"] == [1024, 1, 1]
    # rows up to 32768 elements held whole by 32 warps (blocks of 16384 and 32768); longer ones loop in steps of 8192
    # (16 warps), from 73728 of 16384 (32 warps)
    assert [(v["variant"]["constexprs"]["BLOCK_N"], v["variant"]["constexprs"]["LOOP"]) for v in wide] == [
        (16384, False),
        (32768, False),
        (8192, True),
        (16384, True),
    ]
    assert [v["block"][0] for v in wide] == [1024, 1024, 512, 1024]
    assert [v["variant"]["constexprs"]["BLOCK_N"] for v in (small, mid)] == [256, 4096]
    # a row length the hints miss takes the looping config's fallback, the only unhinted row variant
    assert unaligned["variant"]["constexprs"]["LOOP"] is True and unaligned["variant"]["aligned_args"] == []
    assert loop["variant"]["constexprs"]["LOOP"] is True and small["grid"] == [3, 1, 1]
    assert residual["variant"]["keys"] == {"HAS_RESIDUAL": True, "HAS_GATE": False}
    plain = {"EPILOGUE": False}
    assert mm["variant"]["keys"] == {"B_K_CONTIGUOUS": False, **plain}
    assert mm_t["variant"]["keys"] == {"B_K_CONTIGUOUS": True, **plain}
    tiles = -(-64 // mm["variant"]["constexprs"]["BLOCK_M"]) * -(-48 // mm["variant"]["constexprs"]["BLOCK_N"])
    assert mm["grid"] == [tiles * 2, 1, 1]
    # decode batches take narrow tiles, one program per 32 columns: 16 rows up to 16, 32 up to 32 (64 up to 64)
    assert decode["variant"]["when"] == "M <= 16" and decode["variant"]["constexprs"]["BLOCK_M"] == 16
    assert decode["grid"] == [-(-48 // decode["variant"]["constexprs"]["BLOCK_N"]), 1, 1] == [2, 1, 1]
    assert decode_32["variant"]["when"] == "M <= 32" and decode_32["variant"]["constexprs"]["BLOCK_M"] == 32
    # then 64 x 64 tiles up to 256 rows (at most 8192 columns), the 128-row tile past them where matmul_ws does not
    # apply (test_hopper_products_take_matmul_ws)
    assert rows_256["variant"]["when"] == "M <= 256 && N <= 8192"
    assert rows_256["variant"]["constexprs"]["BLOCK_M"] == 64 == rows_256["variant"]["constexprs"]["BLOCK_N"]
    assert large["kernel"] == "matmul_kernel" and large["variant"]["when"] == ""
    assert large["variant"]["constexprs"]["BLOCK_M"] == 128


@needs_sm90
def test_flash_attn_arguments_and_shared_memory(fake_driver):
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(52)
        q = tensor((2, 300, 8, 128), ptr={A})
        k = tensor((2, 77, 2, 128), ptr={B}, strides=(2 * 77 * 128, 128, 77 * 128, 1))  # heads-major: no TMA path
        out = tensor((2, 300, 8, 128), ptr={C})
        _library.call("xopsaot_flash_attn", (q, k, k, out, None, None), options(0.125, causal=1), 0)
        slopes = tensor((8,), "float32", ptr={D})
        capped = options(0.125, causal=1)
        capped.softcap = 2.0
        _library.call("xopsaot_flash_attn", (q, k, k, out, None, slopes), capped, 0)
        emit(launch=launches()[0], mods=launches()[1], count=len(launches()))
    """,
    )
    launch = r["launch"]
    variant = launch["variant"]
    assert r["count"] == 2  # 2 x 2 key heads x 10 query blocks fill the GPU: no split-KV
    assert variant["keys"] == {"BLOCK_D": 128, "PAGED": False, "MODS": False}
    assert launch["grid"] == [-(-300 * 4 // variant["constexprs"]["BLOCK_M"]), 2, 2]  # GQA rows packed per key head
    assert launch["smem"] == variant["shared"] > 48 * 1024  # needed the per-device opt-in
    p = decode(launch["params"], "attn_fwd")
    assert p[:4] == [A, B, B, C] and p[4:11] == [0] * 7  # no lse, partials, cu_seqlens, seqused, table, alibi
    # strides (batch, sequence, head) of q, k, v, out
    assert p[11:14] == [300 * 8 * 128, 8 * 128, 128] and p[14:17] == [2 * 77 * 128, 128, 77 * 128]
    assert p[17:20] == p[14:17] and p[20:23] == p[11:14]
    # seqlen_q, seqlen_k, head_dim, heads, group, num_splits, then no varlen/seqused/new keys/pages
    assert p[30:36] == [300, 77, 128, 8, 4, 1] and p[36:43] == [0] * 7
    assert p[43:47] == [1 << 30, 0, 0, 0]  # window: unlimited left, causal right; no lse, no ALiBi
    assert abs(p[47] - 0.125 * 1.4426950408889634) < 1e-6 and p[48] == 0  # softmax_scale * log2(e); no softcap
    assert p[49] == 1.0  # v_scale: 16-bit keys and values
    assert p[50:52] == [0, 0]  # hidden scratch arguments
    # softcap and ALiBi: run-time arguments of the MODS variant of the same config
    mods = r["mods"]["variant"]
    assert mods["keys"] == {**variant["keys"], "MODS": True}
    assert mods["constexprs"] == {**variant["constexprs"], "MODS": True}
    m = decode(r["mods"]["params"], "attn_fwd")
    assert m[10] == D and m[46] == 1  # the slopes, has_alibi
    assert abs(m[47] - 0.125 / 2.0) < 1e-7 and abs(m[48] - 2.0 * 1.4426950408889634) < 1e-6  # scale / cap, cap log2e


GEMM_PRELUDE = """
        def gemm(a, b, out, gate=None, input=None, residual=None, alpha=1.0, beta=1.0, act=-1, gate_act=-1):
            o = _library.GemmOptions(alpha, beta, act, gate_act)
            _library.call("xopsaot_gemm", (a, b, gate, input, residual, out), ctypes.byref(o), 0)
        def gemm_error(*args, **kw):
            r = error_of(lambda: gemm(*args, **kw))
            return r and r[1]
"""


@needs_sm90
def test_hopper_products_take_matmul_ws(fake_driver):
    """On sm_90, 2-D products past the decode batches' tiles (more than 256 rows, or 65 or more against more than 8192
    columns) go to matmul_ws: the launcher encodes 2-D descriptors of a's, b's, the output's and the residual's rows
    (the output's again without a residual), and the grid is one program per multiprocessor at most. An input that
    is not a row, rows TMA cannot take (their bytes not a multiple of 16, a base off 16 bytes), a bias off 16 bytes
    and batches keep matmul_kernel, as do 65 to 256 rows against at most 8192 columns with too few K steps to split;
    with enough, their K steps are split (ws_splits) and matmul_reduce_kernel finishes the product."""
    r = scenario(
        fake_driver,
        GEMM_PRELUDE
        + f"""
        fake.fake_cuda_expect_params(35)
        a = tensor((300, 64), "bfloat16", {A})
        wt = tensor((64, 1000), "bfloat16", {B}, strides=(1, 64))  # a (1000, 64) weight, transposed
        out, bias, res = tensor((300, 1000), "bfloat16", {C}), tensor((1000,), "bfloat16", {D}), tensor((300, 1000),
                         "bfloat16", {E})
        gemm(a, wt, out, input=bias, residual=res, alpha=0.5, beta=2.0, act=2)
        gemm(a, tensor((64, 1000), "bfloat16", {B}), out)  # b of contiguous rows
        _library.call("xopsaot_matmul", (tensor((65, 64), "bfloat16", {A}), tensor((64, 8200), "bfloat16", {B}),
                      tensor((65, 8200), "bfloat16", {C})), 0)
        _library.call("xopsaot_matmul", (tensor((4400, 64), "bfloat16", {A}), wt, tensor((4400, 1000), "bfloat16",
                      {C})), 0)
        maps = tensor_maps()
        gemm(a, wt, out, input=tensor((300, 1000), "bfloat16", {D}))  # an input of rows
        gemm(tensor((300, 60), "bfloat16", {A}), tensor((60, 1000), "bfloat16", {B}, strides=(1, 60)), out)
        gemm(a, wt, tensor((300, 1000), "bfloat16", {C} + 2))
        gemm(a, wt, out, input=tensor((1000,), "bfloat16", {D} + 2))
        _library.call("xopsaot_matmul", (tensor((2, 300, 64), "bfloat16", {A}), wt, tensor((2, 300, 1000), "bfloat16",
                      {C})), 0)
        _library.call("xopsaot_matmul", (tensor((256, 64), "bfloat16", {A}), wt, tensor((256, 1000), "bfloat16",
                      {C})), 0)
        first = fake.fake_cuda_launch_count()
        gemm(tensor((128, 14336), "bfloat16", {A}), tensor((14336, 1000), "bfloat16", {B}, strides=(1, 14336)),
             tensor((128, 1000), "bfloat16", {C}), input=bias, residual=tensor((128, 1000), "bfloat16", {E}),
             alpha=0.5, beta=2.0, act=3)
        emit(launches=launches()[:first], maps=maps, split=launches()[first:], allocs=fake.fake_cuda_alloc_count(),
             frees=fake.fake_cuda_free_count())
    """,
    )
    fused, rows_b, wide, tall, *rest = r["launches"]
    assert [x["kernel"] for x in (fused, rows_b, wide, tall)] == ["matmul_ws"] * 4
    assert [x["kernel"] for x in rest] == ["matmul_kernel"] * 6
    assert fused["variant"]["keys"] == {"B_K_CONTIGUOUS": True} and rows_b["variant"]["keys"] == {
        "B_K_CONTIGUOUS": False
    }
    block_n = fused["variant"]["constexprs"]["BLOCK_N"]
    # two consumer warpgroups of 64 rows and the loader's warp group; a program per 128 x BLOCK_N tile, at most one
    # per multiprocessor (the fake has 132)
    assert fused["block"] == [32 * 4 * 3, 1, 1]
    assert fused["grid"] == [3 * -(-1000 // block_n), 1, 1] and tall["grid"] == [132, 1, 1]
    assert wide["grid"] == [-(-8200 // block_n), 1, 1]
    bf16, swizzle_128b = 9, 3  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_SWIZZLE_128B
    a_map = {"address": A, "dims": [64, 300], "strides": [128], "box": [64, 64], "dtype": bf16,
             "swizzle": swizzle_128b, "oob_fill": 0}  # fmt: skip
    w_map = {**a_map, "address": B, "dims": [64, 1000], "box": [64, block_n]}
    b_map = {**a_map, "address": B, "dims": [1000, 64], "strides": [2000], "box": [64, 64]}  # b's rows, in copies
    out_map = {**a_map, "address": C, "dims": [1000, 300], "strides": [2000], "box": [64, 64]}
    res_map = {**out_map, "address": E}
    assert r["maps"][:4] == [a_map, w_map, out_map, res_map]
    assert r["maps"][4:8] == [a_map, b_map, out_map, out_map]  # no residual: the output's map in its place

    def descriptors(launch):
        return [x & 0xFFFFFFFF if i % 5 in (1, 2) else x for i, x in enumerate(launch["params"][:20])]

    p = descriptors(fused)
    # each descriptor: the map (its first word the address), dims (int32), strides (int64)
    assert p[0:5] == [A, 300, 64, 64, 1] and p[5:10] == [B, 1000, 64, 64, 1]
    assert p[10:15] == [C, 300, 1000, 1000, 1] and p[15:20] == [E, 300, 1000, 1000, 1]
    q = fused["params"][20:]
    i32 = [struct.unpack("<i", struct.pack("<I", x & 0xFFFFFFFF))[0] for x in q]
    f32 = [struct.unpack("<f", struct.pack("<I", x & 0xFFFFFFFF))[0] for x in q]
    assert q[:2] == [D, 0] and i32[2:6] == [300, 1000, 64, 1]  # the bias, no partials; M, N, K; one K slice
    assert q[6:8] == [0, 1] and f32[8:10] == [0.5, 2.0]  # a row: stride_im 0; alpha, beta
    assert i32[10:13] == [1, 1, 2] and q[13:] == [0, 0]  # input, residual, act (gelu tanh); hidden scratch
    assert descriptors(rows_b)[5:10] == [B, 64, 1000, 1000, 1]
    # 128 rows against 1000 columns: 8 tiles of 128 x 128, so K's 224 steps go in 4 slices of 56 (16 would make a
    # wave, but a slice keeps 48 steps or more); their float32 sums go to a workspace that matmul_reduce_kernel adds
    # up, applying the epilogue
    split, reduce = r["split"]
    assert split["kernel"] == "matmul_ws" and reduce["kernel"] == "matmul_reduce_kernel"
    assert split["variant"]["constexprs"]["BLOCK_N"] == 128 and split["grid"] == [32, 1, 1]
    s = split["params"][20:]
    s32 = [struct.unpack("<i", struct.pack("<I", x & 0xFFFFFFFF))[0] for x in s]
    sf = [struct.unpack("<f", struct.pack("<I", x & 0xFFFFFFFF))[0] for x in s]
    workspace = s[1]
    assert s[0] == D and workspace != 0 and s32[2:6] == [128, 1000, 14336, 4]  # bias (unused), partials; M N K splits
    assert sf[8] == 1.0 and s32[10:13] == [0, 0, -1]  # alpha 1, no input, residual or activation: the reduction's
    assert descriptors(split)[15:20] == [C, 128, 1000, 1000, 1]  # no residual: the output's map in its place
    q = decode(reduce["params"], "matmul_reduce_kernel")
    assert q[:4] == [workspace, C, D, E] and q[4:7] == [128, 1000, 4] and q[7:11] == [1000, 0, 1, 1000]
    assert q[11:16] == [0.5, 2.0, 1, 1, 3]  # alpha, beta, input, residual, act (silu)
    assert reduce["grid"] == [-(-128 // reduce["variant"]["constexprs"]["BLOCK_M"]),
                              -(-1000 // reduce["variant"]["constexprs"]["BLOCK_N"]), 1]  # fmt: skip
    assert r["allocs"] == r["frees"] == 1


@needs_sm90
def test_one_row_against_a_weight_takes_the_gemv_kernel(fake_driver):
    """One row of a against a transposed weight goes to gemv_kernel, plain (matmul) and fused (gemm: input, residual,
    alpha, beta, act; after the gating pass), 8 weight rows a program; a row against an N-contiguous b, two rows and
    a batch of one-row products keep matmul_kernel, whose few-row tile widens on weights of more than 32 rows per
    SM."""
    r = scenario(
        fake_driver,
        GEMM_PRELUDE
        + f"""
        fake.fake_cuda_expect_params(24)
        a = tensor((1, 64), "bfloat16", {A})
        wt = tensor((64, 50), "bfloat16", {B}, strides=(1, 64))  # a (50, 64) weight, transposed
        out = tensor((1, 50), "bfloat16", {C})
        _library.call("xopsaot_matmul", (a, wt, out), 0)
        bias, res = tensor((50,), "bfloat16", {C} + 2**20), tensor((1, 50), "bfloat16", {C} + 2**21)
        gemm(a, wt, out, input=bias, residual=res, alpha=0.5, beta=2.0, act=3)
        gemm(a, wt, out, gate=tensor((1, 64), "bfloat16", {A} + 2**22), gate_act=4)
        _library.call("xopsaot_matmul", (a, tensor((64, 50), "bfloat16", {B}), out), 0)
        _library.call("xopsaot_matmul", (tensor((2, 64), "bfloat16", {A}), wt, tensor((2, 50), "bfloat16", {C})), 0)
        _library.call("xopsaot_matmul", (tensor((3, 1, 64), "bfloat16", {A}), wt, tensor((3, 1, 50), "bfloat16", {C})),
                      0)
        wt_odd = tensor((63, 50), "bfloat16", {B}, strides=(1, 63))  # rows of 63: the unhinted variant
        _library.call("xopsaot_matmul", (tensor((1, 63), "bfloat16", {A}), wt_odd, out), 0)
        for m, n in ((2, 4224), (2, 4240), (32, 4240), (33, 4240), (32, 4224)):  # 32 rows per SM of the fake's 132
            wide, out = tensor((64, n), "bfloat16", {B}, strides=(1, 64)), tensor((m, n), "bfloat16", {C})
            _library.call("xopsaot_matmul", (tensor((m, 64), "bfloat16", {A}), wide, out), 0)
        emit(launches=launches())
    """,
    )
    plain, fused, gate_pass, gated, n_contiguous, two_rows, batched, unaligned, *tiles = r["launches"]
    gemv = [plain, fused, gated, unaligned]
    assert [x["kernel"] for x in gemv] == ["gemv_kernel"] * 4 and [x["grid"] for x in gemv] == [[7, 1, 1]] * 4
    # A, B, C, Input, Residual, N, K, stride_b, stride_in, alpha, beta, has_input, has_residual, act
    assert decode(plain["params"], "gemv_kernel")[:14] == [A, B, C, 0, 0, 50, 64, 64, 0, 1.0, 0.0, 0, 0, -1]
    p = decode(fused["params"], "gemv_kernel")
    assert p[:14] == [A, B, C, C + 2**20, C + 2**21, 50, 64, 64, 1, 0.5, 2.0, 1, 1, 3]
    assert gate_pass["kernel"] == "gated_activation_kernel"
    assert decode(gated["params"], "gemv_kernel")[0] == decode(gate_pass["params"], "gated_activation_kernel")[2]
    assert plain["variant"]["aligned_args"] and unaligned["variant"]["aligned_args"] == []
    assert decode(unaligned["params"], "gemv_kernel")[5:8] == [50, 63, 63]
    for x in (n_contiguous, two_rows, batched):
        assert x["kernel"] == "matmul_kernel"
    assert n_contiguous["variant"]["keys"]["B_K_CONTIGUOUS"] is False
    # up to 16 and 32 rows against a weight of more than 32 rows per SM take 16 x 64 and 32 x 64 tiles of 128-deep
    # steps; 33 rows keep the 64 x 32 tile; 32 rows on a weight of up to 32 rows per SM take 32 x 32 x 256
    tile = [[x["variant"]["constexprs"][c] for c in ("BLOCK_M", "BLOCK_N", "BLOCK_K")] for x in tiles]
    assert tile == [[16, 32, 256], [16, 64, 128], [32, 64, 128], [64, 32, 128], [32, 32, 256]]
    assert [x["grid"][0] for x in tiles] == [4224 // 32, 4240 // 64 + 1, 4240 // 64 + 1, 4240 // 32 + 1, 4224 // 32]


@needs_sm90
def test_gemm_epilogue_and_gate_arguments(fake_driver):
    """linear's bias row and residual, addmm's column input and beta 0, the gating pass, the unhinted fallback for
    an N the hints miss, and the C layer's refusals."""
    r = scenario(
        fake_driver,
        GEMM_PRELUDE
        + f"""
        fake.fake_cuda_expect_params(24)
        a = tensor((100, 64), "bfloat16", {A})
        wt = tensor((64, 48), "bfloat16", {B}, strides=(1, 64))  # a (48, 64) weight, transposed
        out = tensor((100, 48), "bfloat16", {C})
        bias, res = tensor((48,), "bfloat16", {C} + 2**20), tensor((100, 48), "bfloat16", {C} + 2**21)
        gemm(a, wt, out, input=bias, residual=res, act=3)
        gemm(a, tensor((64, 48), "bfloat16", {B}), out, input=tensor((100, 1), "bfloat16", {C} + 2**20), beta=0.5)
        gemm(a, tensor((64, 48), "bfloat16", {B}), out, input=bias, beta=0.0)
        gemm(a, tensor((64, 48), "bfloat16", {B}), out, gate=tensor((100, 64), "bfloat16", {A} + 2**22), gate_act=4)
        gemm(a, tensor((64, 47), "bfloat16", {B}, strides=(1, 64)), tensor((100, 47), "bfloat16", {C}))
        recent = _library.recent_variants(3)
        emit(launches=launches(),
             bad_act=gemm_error(a, wt, out, act=7),
             bad_input=gemm_error(a, wt, out, input=tensor((3,), "bfloat16")),
             bad_gate=gemm_error(a, wt, out, gate=tensor((100, 64), "bfloat16", strides=(128, 1))),
             residual=gemm_error(a, wt, out, residual=tensor((100, 47), "bfloat16")),
             dtype=gemm_error(a, wt, tensor((100, 48), "float16")), recent=recent,
             allocs=fake.fake_cuda_alloc_count(), frees=fake.fake_cuda_free_count())
    """,
    )
    linear, addmm, beta0, gate_pass, gated_product, unaligned = r["launches"]
    p = decode(linear["params"], "matmul_kernel")
    pointers = [A, B, C, C + 2**20, C + 2**21]  # A, B, C, Input, Residual
    sizes_strides = [100, 48, 64, 0, 64, 0, 64, 0, 48, 0, 1, 48]  # M, N, K; strides az am bz b cz cm im in rm
    assert p[:22] == pointers + sizes_strides + [1.0, 1.0, 1, 1, 3]  # alpha, beta, has_input, has_residual, act
    assert linear["variant"]["keys"] == {"B_K_CONTIGUOUS": True, "EPILOGUE": True}
    assert linear["grid"][0] == 2  # two 64 x 64 tiles: 100 rows take them (up to 256)
    p = decode(addmm["params"], "matmul_kernel")
    assert p[3] == C + 2**20 and p[14:16] == [1, 0] and p[18] == 0.5 and p[19:21] == [1, 0]
    assert addmm["variant"]["keys"]["B_K_CONTIGUOUS"] is False
    p = decode(beta0["params"], "matmul_kernel")
    assert p[3] == 0 and p[19] == 0  # beta 0: input ignored, as torch's addmm
    # the gate is a pass of its own into a workspace, which the product (either layout of b) then reads
    g = decode(gate_pass["params"], "gated_activation_kernel")
    assert gate_pass["kernel"] == "gated_activation_kernel" and g[:2] == [A, A + 2**22] and g[3:7] == [64, 64, 64, 4]
    p = decode(gated_product["params"], "matmul_kernel")
    assert p[0] == g[2] and p[9] == 64
    assert gated_product["variant"]["keys"] == {"B_K_CONTIGUOUS": False, "EPILOGUE": True}
    assert r["allocs"] == r["frees"] == 1
    assert unaligned["variant"]["aligned_args"] == [] and decode(unaligned["params"], "matmul_kernel")[6] == 47
    assert r["recent"] == [x["variant"]["index"] for x in (unaligned, gated_product, gate_pass)]  # newest first
    assert r["bad_act"] == "gemm: act is 7; supported: -1 (none) or 0 (relu) to 5 (tanh)"
    assert r["bad_input"] == "gemm: input does not broadcast to (100, 48)"
    assert r["bad_gate"] == "gemm: gate must have a's strides"
    assert r["residual"] == "gemm: out has shape (100, 48) but residual has shape (100, 47)"
    assert r["dtype"].startswith("gemm: out")


@needs_sm90
def test_cross_entropy_and_sampling_launches(fake_driver):
    """cross_entropy: one launch per row block (none), or per-row float32 losses in a workspace and a reduction;
    linear_cross_entropy and linear_sample: a gemm and a consumer per chunk of rows, one workspace."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(17)
        logits, target = tensor((10, 1000), "bfloat16", {A}), tensor((10,), "int64", {B})
        ce = lambda red, smoothing=0.0: ctypes.byref(_library.CrossEntropyOptions(-100, smoothing, red))
        _library.call("xopsaot_cross_entropy", (logits, target, tensor((10,), "bfloat16", {C})), ce(0), 0)
        _library.call("xopsaot_cross_entropy", (logits, target, tensor((), "bfloat16", {C})), ce(1, 0.1), 0)
        first = fake.fake_cuda_launch_count()
        x, w = tensor((10, 64), "bfloat16", {A}), tensor((1000, 64), "bfloat16", {B})
        _library.call("xopsaot_linear_cross_entropy", (x, w, None, tensor((10,), "int32", {C}),
                      tensor((), "bfloat16", {C} + 64)), ce(2), 4, 0)
        second = fake.fake_cuda_launch_count()
        so = _library.SampleOptions(0.7, 50, 0.9, 1234, 8)
        _library.call("xopsaot_sample", (tensor((4, 1000), "float32", {A}), tensor((4,), "float32", {B}), None,
                      None, tensor((4,), "int64", {C})), ctypes.byref(so), 0)
        third = fake.fake_cuda_launch_count()
        _library.call("xopsaot_linear_sample", (tensor((300, 16), "bfloat16", {A}),
                      tensor((2**20, 16), "bfloat16", {B}), None, None, None, None, tensor((300,), "int64", {C})),
                      ctypes.byref(so), 0)
        emit(ce=launches()[:first], lce=launches()[first:second], sample=launches()[second:third],
             ls=launches()[third:], allocs=fake.fake_cuda_alloc_count(), frees=fake.fake_cuda_free_count(),
             bad_target=error_of(_library.call, "xopsaot_cross_entropy",
                                 (logits, tensor((10,), "float32"), tensor((10,), "bfloat16")), ce(0), 0),
             bad_p=error_of(_library.call, "xopsaot_sample", (logits, None, None, None, tensor((10,), "int64")),
                            ctypes.byref(_library.SampleOptions(1.0, 0, 0.0, 1, 0)), 0))
    """,
    )
    none, rows, reduce = r["ce"]
    p = decode(none["params"], "cross_entropy_kernel")
    assert p[:7] == [A, B, C, 1000, 1000, 2**64 - 100, 0.0]  # i64 -100, raw and none["grid"] == [10, 1, 1]
    assert none["variant"]["dtypes"] == {"T": "bfloat16", "I": "int64", "L": "bfloat16"}
    workspace = decode(rows["params"], "cross_entropy_kernel")[2]
    assert rows["variant"]["dtypes"]["L"] == "float32"
    assert decode(rows["params"], "cross_entropy_kernel")[6] == pytest.approx(0.1)
    assert reduce["kernel"] == "loss_reduce_kernel"
    assert decode(reduce["params"], "loss_reduce_kernel")[:6] == [workspace, B, C, 10, 2**64 - 100, 1]  # mean
    kernels = [x["kernel"] for x in r["lce"]]
    assert kernels == ["matmul_kernel", "cross_entropy_kernel"] * 3 + ["loss_reduce_kernel"]  # rows 4, 4, 2
    gemms = [decode(x["params"], "matmul_kernel") for x in r["lce"][0:6:2]]
    assert [g[0] for g in gemms] == [A, A + 4 * 64 * 2, A + 8 * 64 * 2] and [g[5] for g in gemms] == [4, 4, 2]
    losses = [decode(x["params"], "cross_entropy_kernel") for x in r["lce"][1:6:2]]
    assert [c[1] for c in losses] == [C, C + 16, C + 32]  # int32 targets of each chunk
    assert [c[2] - losses[0][2] for c in losses] == [0, 16, 32]  # float32 losses after the logits
    assert [c[0] for c in losses] == [gemms[0][2]] * 3  # every chunk's logits in the same place
    (sample,) = r["sample"]
    p = decode(sample["params"], "sample_kernel")
    assert p[:4] == [A, C, B, 0] and p[7:15] == [pytest.approx(0.7), 50, pytest.approx(0.9), 1, 0, 0, 1234, 8]
    # 128 rows of 2^20 fit: two chunks of 128 rows take matmul_ws, the last 44 a decode tile
    assert [x["kernel"] for x in r["ls"]] == ["matmul_ws", "sample_kernel"] * 2 + ["matmul_kernel", "sample_kernel"]
    assert [decode(x["params"], "sample_kernel")[15] for x in r["ls"][1::2]] == [0, 128, 256]  # first rows
    assert r["allocs"] == r["frees"] == 3
    assert "target has dtype float32" in r["bad_target"][1] and "top_p is 0" in r["bad_p"][1]


@needs_sm90
def test_unfiltered_sampling_splits_rows(fake_driver):
    """sample's rows that no filter touches (greedy, or neither top_k nor top_p), at most one per two multiprocessors
    (the fake has 132), go to sample_chunks_kernel, a program per 4096 tokens, then sample_pick_kernel per row,
    through one workspace (scores, then int32 tokens). Filtered rows, per-row filter arrays, more rows, and rows of
    one program's tokens keep sample_kernel."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(15)
        def run(shape, dtype, temperatures=None, top_ks=None, options=(1.0, 0, 1.0, 77, 5)):
            fake.fake_cuda_reset()
            rows, allocs, frees = shape[0], fake.fake_cuda_alloc_count(), fake.fake_cuda_free_count()
            _library.call("xopsaot_sample", (tensor(shape, dtype, {A}), temperatures, top_ks, None,
                          tensor((rows,), "int64", {C})), ctypes.byref(_library.SampleOptions(*options)), 0)
            return dict(launches=launches(), allocs=fake.fake_cuda_alloc_count() - allocs,
                        frees=fake.fake_cuda_free_count() - frees)
        emit(plain=run((4, 100000), "float32"),
             greedy=run((4, 100000), "float16", options=(0.0, 50, 0.9, 77, 5)),
             per_row=run((1, 128256), "bfloat16", temperatures=tensor((1,), "float32", {B})),
             top_k=run((4, 100000), "float32", options=(1.0, 50, 1.0, 77, 5)),
             top_p=run((4, 100000), "float32", options=(1.0, 0, 0.5, 77, 5)),
             k_array=run((4, 100000), "float32", top_ks=tensor((4,), "int32", {B})),
             wide_k=run((4, 100000), "float32", options=(1.0, 100000, 1.0, 77, 5)),
             half=run((66, 100000), "float32"),
             many=run((67, 100000), "float32"),
             one_step=run((4, 4096), "float32"))
    """,
    )
    plain = r["plain"]["launches"]
    assert [x["kernel"] for x in plain] == ["sample_chunks_kernel", "sample_pick_kernel"]
    chunks, pick = decode(plain[0]["params"], "sample_chunks_kernel"), decode(plain[1]["params"], "sample_pick_kernel")
    # 25 programs of 4096 tokens a row
    assert plain[0]["grid"] == [4 * 25, 1, 1] and plain[1]["grid"] == [4, 1, 1]
    assert chunks[0] == A and chunks[2] == chunks[1] + 4 * 25 * 4 and chunks[3] == 0  # tokens after the scores
    assert chunks[4:12] == [100000, 100000, 25, 1.0, 0, 77, 5, 0]
    assert pick[:4] == [chunks[1], chunks[2], C, 25]
    assert r["plain"]["allocs"] == r["plain"]["frees"] == 1
    greedy = r["greedy"]["launches"]  # temperature 0 ignores top_k and top_p
    assert [x["kernel"] for x in greedy] == ["sample_chunks_kernel", "sample_pick_kernel"]
    assert decode(greedy[0]["params"], "sample_chunks_kernel")[7] == 0.0
    per_row = r["per_row"]["launches"]  # 128256 tokens: 32 steps, a chunk each for one row
    assert per_row[0]["grid"] == [32, 1, 1] and per_row[0]["variant"]["dtypes"] == {"T": "bfloat16"}
    assert decode(per_row[0]["params"], "sample_chunks_kernel")[3] == B
    assert decode(per_row[0]["params"], "sample_chunks_kernel")[6:9] == [32, 1.0, 1]
    for case in ("many", "one_step"):
        assert [x["kernel"] for x in r[case]["launches"]] == ["sample_kernel"], case
        assert r[case]["allocs"] == 0, case
    for case in ("top_k", "top_p", "k_array"):  # filtered: in clusters (test_filtered_sampling_rows_in_clusters)
        assert [x["kernel"] for x in r[case]["launches"]] == ["sample_cluster_kernel"], case
    for case in ("wide_k", "half"):  # top_k >= n keeps every token
        assert [x["kernel"] for x in r[case]["launches"]] == ["sample_chunks_kernel", "sample_pick_kernel"], case


@needs_sm90
def test_filtered_sampling_rows_in_clusters(fake_driver):
    """On Hopper, filtered rows of 16385 to 131072 tokens (a multiple of 16), at most three per eight multiprocessors
    (49 of the fake's 132), take sample_cluster_kernel: clusters of 8 programs a row, sample_kernel's arguments and a
    workspace of 4 x 8 float32 a row from the pool. Longer or shorter rows, odd vocabularies and more rows keep
    sample_kernel; unfiltered rows few enough take the chunks."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(18)
        def run(shape, dtype="bfloat16", options=(0.8, 50, 0.9, 77, 5), top_ks=None):
            fake.fake_cuda_reset()
            rows, allocs, frees = shape[0], fake.fake_cuda_alloc_count(), fake.fake_cuda_free_count()
            _library.call("xopsaot_sample", (tensor(shape, dtype, {A}), None, top_ks, None,
                          tensor((rows,), "int64", {C})), ctypes.byref(_library.SampleOptions(*options)), 0)
            return dict(launches=launches(), allocs=fake.fake_cuda_alloc_count() - allocs,
                        frees=fake.fake_cuda_free_count() - frees)
        emit(llama=run((4, 128256)), most=run((49, 100000), "float32", (1.0, 0, 0.5, 77, 5)),
             too_many=run((50, 100000), "float32", (1.0, 0, 0.5, 77, 5)), longest=run((2, 131072), "float16"),
             too_long=run((2, 131088)), one_step=run((2, 16384)), two_steps=run((2, 16400)), odd=run((2, 100003)),
             per_row_k=run((3, 32000), top_ks=tensor((3,), "int32", {B})),
             unfiltered=run((3, 32000), options=(1.0, 0, 1.0, 77, 5)))
    """,
    )
    clustered = ("llama", "most", "longest", "two_steps", "per_row_k")
    for case in clustered:
        (launch,) = r[case]["launches"]
        assert launch["kernel"] == "sample_cluster_kernel" and launch["cluster"] == 8, case
        assert r[case]["allocs"] == r[case]["frees"] == 1, case
    for case in ("too_many", "too_long", "one_step", "odd"):
        assert [x["kernel"] for x in r[case]["launches"]] == ["sample_kernel"], case
        assert r[case]["allocs"] == 0, case
    assert [x["kernel"] for x in r["unfiltered"]["launches"]] == ["sample_chunks_kernel", "sample_pick_kernel"]
    (llama,) = r["llama"]["launches"]
    (entry,) = [k for k in _library.manifest()["kernels"] if k["name"] == "sample_cluster_kernel"]
    args = dict(zip([a["name"] for a in entry["args"]], decode(llama["params"], "sample_cluster_kernel")))
    assert llama["grid"] == [4 * 8, 1, 1] and llama["variant"]["constexprs"] == {"BLOCK": 16384, "CLUSTER": 8}
    assert args["W"] not in (0, A, C) and (args["Logits"], args["Out"], args["Temperatures"]) == (A, C, 0)
    assert (args["stride_x"], args["n"], args["top_k"], args["seed"], args["offset"], args["first_row"]) == (
        128256, 128256, 50, 77, 5, 0)  # fmt: skip
    assert abs(args["temperature"] - 0.8) < 1e-6 and abs(args["top_p"] - 0.9) < 1e-6
    assert r["most"]["launches"][0]["grid"] == [49 * 8, 1, 1]
    per_row = dict(zip([a["name"] for a in entry["args"]], decode(r["per_row_k"]["launches"][0]["params"],
                                                                   "sample_cluster_kernel")))  # fmt: skip
    assert per_row["TopKs"] == B and per_row["per_row_top_k"] == 1


@needs_sm90
def test_hopper_prefill_takes_host_tensor_descriptors(fake_driver):
    """Dense prefill with heads side by side goes to attn_fwd_ws_dense: the launcher encodes a 3-D descriptor of
    each of q, k and v (batch, sequence, heads x headdim; cuTensorMapEncodeTiled takes dims innermost first and byte
    strides) and passes each as the kernel takes it: the 128-byte map, then its dims (int32) and strides (int64).
    No global scratch is allocated."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(40)
        q = tensor((2, 300, 8, 128), ptr={A})
        k = tensor((2, 77, 2, 128), ptr={B})
        out = tensor((2, 300, 8, 128), ptr={C})
        _library.call("xopsaot_flash_attn", (q, k, k, out, None, None), options(0.125, causal=1), 0)
        emit(launch=launches()[0], count=len(launches()), maps=tensor_maps(), allocs=fake.fake_cuda_alloc_count())
    """,
    )
    launch, variant = r["launch"], r["launch"]["variant"]
    assert r["count"] == 1 and variant["kernel"] == "attn_fwd_ws_dense" and variant["keys"] == {"BLOCK_D": 128}
    assert launch["grid"] == [-(-300 // variant["constexprs"]["BLOCK_M"]), 8, 2]  # one query head per program
    # warp-specialized: a warpgroup per 64 rows and the loader's, every partition's warps in the launch
    assert launch["block"] == [32 * 4 * (variant["constexprs"]["BLOCK_M"] // 64 + 1), 1, 1]
    assert variant["hidden_args"][0]["size_per_program"] == 0 and r["allocs"] == 0
    block_n = variant["constexprs"]["BLOCK_N"]
    # the box of one copy: a 128-byte swizzle takes rows of 64 fp16, so the kernel copies a 128-wide head in two
    fp16, swizzle_128b = 6, 3
    q_map = {"address": A, "dims": [8 * 128, 300, 2], "strides": [8 * 128 * 2, 300 * 8 * 128 * 2],
             "box": [64, 64, 1], "dtype": fp16, "swizzle": swizzle_128b, "oob_fill": 0}  # fmt: skip
    kv_map = {"address": B, "dims": [2 * 128, 77, 2], "strides": [2 * 128 * 2, 77 * 2 * 128 * 2],
              "box": [64, block_n, 1], "dtype": fp16, "swizzle": swizzle_128b, "oob_fill": 0}  # fmt: skip
    assert r["maps"] == [q_map, kv_map, kv_map]
    p = [x & 0xFFFFFFFF if i % 7 in (1, 2, 3) and i < 21 else x for i, x in enumerate(launch["params"])]
    # each descriptor: the map (its first word the address), dims (int32), strides (int64)
    assert p[0:7] == [A, 2, 300, 8 * 128, 300 * 8 * 128, 8 * 128, 1]
    assert p[7:14] == p[14:21] == [B, 2, 77, 2 * 128, 77 * 2 * 128, 2 * 128, 1]
    assert p[21:23] == [C, 0]  # out, no lse
    ints = [struct.unpack("<i", struct.pack("<I", x & 0xFFFFFFFF))[0] for x in p[29:35]]
    assert ints == [300, 77, 8, 2, 1 << 30, 0]  # sequence lengths, heads; causal: no left limit, right 0
    assert p[37:39] == [0, 0] and len(p) == 39  # no scratch


@needs_sm90
def test_prefill_without_keys_skips_the_tma_kernels(fake_driver):
    """Batches without keys (packed ones whose key sequences are all empty, dense ones of no key) have no rows TMA
    could describe: they take the general kernel, whose rows with no visible key come out as zeros."""
    r = scenario(
        fake_driver,
        f"""
        q = tensor((64, 8, 128), ptr={A})
        k = tensor((0, 2, 128), ptr={B})
        cu_q, cu_k = tensor((3,), "int32", ptr={D}), tensor((3,), "int32", ptr={D} + 64)
        packed = error_of(_library.call, "xopsaot_flash_attn_varlen", (q, k, k, cu_q, cu_k, None, q, None, None), 40, 0,
                          options(0.125), 0)
        q, k = tensor((2, 64, 8, 128), ptr={A}), tensor((2, 0, 2, 128), ptr={B})
        dense = error_of(_library.call, "xopsaot_flash_attn", (q, k, k, q, None, None), options(0.125), 0)
        emit(errors=[packed, dense], kernels=[x["kernel"] for x in launches()], maps=fake.fake_cuda_tensor_map_count())
    """,
    )
    assert r["errors"] == [None, None] and r["maps"] == 0
    assert r["kernels"] == ["attn_fwd", "attn_fwd"]


@needs_sm90
def test_a_failed_descriptor_encoding_is_reported(fake_driver):
    """A driver that fails to encode a descriptor is reported, naming the call; nothing is launched."""
    r = scenario(
        fake_driver,
        f"""
        q = tensor((1, 64, 2, 64), ptr={A})
        failed = error_of(_library.call, "xopsaot_flash_attn", (q, q, q, q, None, None), options(0.125), 0)
        emit(failed=failed, launches=len(launches()))
    """,
        FAKE_CUDA_FAIL="cuTensorMapEncodeTiled",
    )
    assert r["launches"] == 0 and r["failed"][0] == "XopsaotError" and r["failed"][2] == "DRIVER"
    assert "cuTensorMapEncodeTiled failed" in r["failed"][1]


@needs_sm90
def test_hopper_varlen_prefill_takes_query_and_key_descriptors(fake_driver):
    """Packed (varlen) prefill goes to attn_fwd_ws: 2-D descriptors over every sequence's queries and keys from the
    launcher, and the values' descriptor (bounded per sequence) made by each program in Triton's global scratch,
    allocated per launch (stream-ordered) and freed after it."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(40)
        q = tensor((600, 8, 128), ptr={A})
        k = tensor((154, 2, 128), ptr={B})
        out = tensor((600, 8, 128), ptr={C})
        cu_q, cu_k = tensor((3,), "int32", ptr={D}), tensor((3,), "int32", ptr={D} + 64)
        _library.call("xopsaot_flash_attn_varlen", (q, k, k, cu_q, cu_k, None, out, None, None), 300, 77,
                      options(0.125, causal=1), 0)
        emit(launch=launches()[0], count=len(launches()), maps=tensor_maps(), allocs=fake.fake_cuda_alloc_count(),
             frees=fake.fake_cuda_free_count())
    """,
    )
    launch, variant = r["launch"], r["launch"]["variant"]
    assert r["count"] == 1 and variant["kernel"] == "attn_fwd_ws" and variant["keys"] == {"BLOCK_D": 128}
    assert launch["grid"] == [-(-300 // variant["constexprs"]["BLOCK_M"]), 8, 2]  # the longest sequence's blocks
    block_n = variant["constexprs"]["BLOCK_N"]
    fp16, swizzle_128b = 6, 3
    assert r["maps"] == [
        {"address": A, "dims": [8 * 128, 600], "strides": [8 * 128 * 2], "box": [64, 64], "dtype": fp16,
         "swizzle": swizzle_128b, "oob_fill": 0},
        {"address": B, "dims": [2 * 128, 154], "strides": [2 * 128 * 2], "box": [64, block_n], "dtype": fp16,
         "swizzle": swizzle_128b, "oob_fill": 0},
    ]  # fmt: skip
    p = [x & 0xFFFFFFFF if i % 5 in (1, 2) and i < 10 else x for i, x in enumerate(launch["params"])]
    assert p[:10] == [A, 600, 8 * 128, 8 * 128, 1, B, 154, 2 * 128, 2 * 128, 1]  # the maps, dims, strides
    assert p[10:16] == [B, C, 0, D, D + 64, 2 * 128]  # values, out, no lse, cu_seqlens, the values' row stride
    ints = [struct.unpack("<i", struct.pack("<I", x & 0xFFFFFFFF))[0] for x in p[22:28]]
    assert ints == [300, 77, 8, 2, 1, 1]  # longest lengths, heads, packed q and k
    scratch = variant["hidden_args"][0]["size_per_program"]
    assert scratch == 128  # the values' descriptor
    programs = launch["grid"][0] * 8 * 2
    assert p[32] == 0xABC000000 + programs * scratch and p[33] == 0 and len(p) == 34  # global scratch, no profile
    assert r["allocs"] == 1 and r["frees"] == 1


def test_paged_varlen_runs_the_general_kernel_on_the_pool(fake_driver):
    """Packed queries against paged caches (flash_attn_varlen's block_table), fewer than 128 a sequence on average
    (decode steps among chunks), take attn_fwd's paged variants on every arch: the pool's page and slot strides, the
    table, both cumulative lengths, page_size, n_pages and max_pages; max_seqlen_k past what the table holds is an
    error before any launch."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(52)
        q = tensor((300, 8, 128), ptr={A})
        pool = tensor((40, 16, 2, 128), ptr={B})
        out = tensor((300, 8, 128), ptr={C})
        cu_q, cu_k = tensor((4,), "int32", ptr={D}), tensor((4,), "int32", ptr={D} + 64)
        table = tensor((3, 12), "int32", ptr={D} + 128)
        _library.call("xopsaot_flash_attn_varlen", (q, pool, pool, cu_q, cu_k, table, out, None, None), 250, 190,
                      options(0.125, causal=1), 0)
        too_long = error_of(_library.call, "xopsaot_flash_attn_varlen", (q, pool, pool, cu_q, cu_k, table, out, None,
                            None), 250, 193, options(0.125), 0)
        emit(launches=launches(), too_long=too_long)
    """,
    )
    (launch,) = r["launches"]
    variant = launch["variant"]
    assert variant["kernel"] == "attn_fwd" and variant["keys"] == {"BLOCK_D": 128, "PAGED": True, "MODS": False}
    (entry,) = [k for k in _library.manifest()["kernels"] if k["name"] == "attn_fwd"]
    a = dict(zip([x["name"] for x in entry["args"]], decode(launch["params"], "attn_fwd")))
    assert (a["Q"], a["K"], a["V"], a["Out"], a["BlockTable"]) == (A, B, B, C, D + 128)
    assert (a["CuSeqlensQ"], a["CuSeqlensK"], a["SequsedK"]) == (D, D + 64, 0)
    assert (a["stride_kb"], a["stride_ks"], a["stride_kh"]) == (16 * 2 * 128, 2 * 128, 128)  # page, slot, head
    assert (a["stride_qb"], a["stride_qs"], a["stride_qh"], a["stride_btb"]) == (0, 8 * 128, 128, 12)
    assert (a["page_size"], a["n_pages"], a["max_pages"], a["varlen_q"], a["varlen_k"]) == (16, 40, 12, 1, 1)
    assert (a["seqlen_q"], a["seqlen_k"], a["window_right"]) == (250, 190, 0)
    assert r["too_long"][0] == "ValueError"
    assert "max_seqlen_k is 193 but block_table holds 12 pages of 16" in r["too_long"][1]


@needs_sm90
def test_paged_varlen_prefill_copies_the_pages_for_the_hopper_kernel(fake_driver):
    """At 128 queries a sequence or more on average, Hopper copies each sequence's pages to packed rows of a
    stream-ordered workspace (kv_gather, for keys then values: rows sized by batch x max_seqlen_k, at cu_seqlens_k's
    offsets) and runs attn_fwd_ws on them; the workspace is freed after the launch. A copy past 1 GiB reads the pool in
    place instead."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(40)
        q = tensor((600, 8, 128), ptr={A})
        k_pool, v_pool = tensor((40, 16, 2, 128), ptr={B}), tensor((40, 16, 2, 128), ptr={B} + 2**24)
        out = tensor((600, 8, 128), ptr={C})
        cu_q, cu_k = tensor((4,), "int32", ptr={D}), tensor((4,), "int32", ptr={D} + 64)
        table = tensor((3, 12), "int32", ptr={D} + 128)
        _library.call("xopsaot_flash_attn_varlen", (q, k_pool, v_pool, cu_q, cu_k, table, out, None, None), 300, 190,
                      options(0.125, causal=1), 0)
        copied = dict(launches=launches(), maps=tensor_maps(), allocs=fake.fake_cuda_alloc_count(),
                      frees=fake.fake_cuda_free_count())
        # a table of 2^22 pages a sequence (one row, broadcast): 3 x 2^26 rows of keys would take 192 GiB to copy
        wide = tensor((3, 2**22), "int32", ptr={D} + 128, strides=(0, 1))
        _library.call("xopsaot_flash_attn_varlen", (q, k_pool, v_pool, cu_q, cu_k, wide, out, None, None), 300, 2**26,
                      options(0.125, causal=1), 0)
        emit(**copied, too_big=[x["variant"]["kernel"] for x in launches()[len(copied["launches"]):]])
    """,
    )
    names = [x["variant"]["kernel"] for x in r["launches"]]
    assert names == ["kv_gather", "kv_gather", "attn_fwd_ws"] and r["too_big"] == ["attn_fwd"]
    (entry,) = [k for k in _library.manifest()["kernels"] if k["name"] == "kv_gather"]
    k_copy, v_copy = (dict(zip([a["name"] for a in entry["args"]], decode(x["params"], "kv_gather"))) for x in
                      r["launches"][:2])  # fmt: skip
    rows_bytes = 3 * 190 * 2 * 128 * 2  # batch x max_seqlen_k rows of heads_k x headdim fp16
    assert (k_copy["Cache"], v_copy["Cache"], v_copy["Packed"] - k_copy["Packed"]) == (B, B + 2**24, rows_bytes)
    assert (k_copy["CuSeqlensK"], k_copy["BlockTable"], k_copy["stride_p"], k_copy["stride_s"]) == (
        D + 64, D + 128, 16 * 2 * 128, 2 * 128)  # fmt: skip
    assert (k_copy["row_width"], k_copy["page_size"], k_copy["n_pages"], k_copy["max_pages"]) == (256, 16, 40, 12)
    block_t = r["launches"][0]["variant"]["constexprs"]["BLOCK_T"]
    assert r["launches"][0]["grid"] == [-(-190 // block_t), 3, 1]
    keys_map = r["maps"][1]
    assert keys_map["address"] == k_copy["Packed"] and keys_map["dims"] == [256, 3 * 190]  # the packed keys' rows
    assert r["launches"][2]["params"][10] == v_copy["Packed"]  # attn_fwd_ws's V: the packed values
    assert r["allocs"] == 2 and r["frees"] == 2  # the workspace, and attn_fwd_ws's global scratch


@needs_sm90
@pytest.mark.parametrize("optin", [65536, 16384])
def test_variants_must_fit_the_shared_memory(fake_driver, optin):
    """A variant that needs more shared memory than the GPU allows is skipped for the next that fits, and preload
    loads exactly the variants that fit."""
    r = scenario(
        fake_driver,
        """
        preload = error_of(xopsaot.preload, 0)
        loads = fake.fake_cuda_load_count()
        q = tensor((1, 64, 1, 128))
        emit(error=error_of(_library.call, "xopsaot_flash_attn", (q, q, q, q, None, None), options(0.1), 0),
             launches=launches(),
             preload=preload, loads=loads)
    """,
        FAKE_CUDA_SMEM_OPTIN=str(optin),
    )
    variants = [v for v in _library.manifest()["variants"] if v["arch"] == "sm_90a" and v["alternate_of"] is None]
    assert r["preload"] is None and r["loads"] == sum(v["shared"] <= optin for v in variants)
    keys = {"BLOCK_D": 128, "PAGED": False, "MODS": False}
    sm90 = [  # the variants that could serve this call (64 rows: not the decode config)
        v
        for v in variants
        if v["kernel"] == "attn_fwd"
        and v["keys"] == keys
        and v["dtypes"] == {"T": "float16", "KV": "float16"}
        and v["constexprs"]["BLOCK_M"] > 16
    ]
    if any(v["shared"] <= optin for v in sm90):
        assert r["error"] is None and r["launches"][0]["variant"]["shared"] <= optin
        assert max(v["shared"] for v in sm90) > optin  # the preferred variant was skipped
    else:
        assert r["error"][0] == "ValueError"
        assert f"no compiled config of sm_90a accepts these arguments within this GPU's {optin} bytes" in r["error"][1]


@needs_sm90
def test_devices_get_the_binaries_of_their_arch(fake_driver):
    r = scenario(
        fake_driver,
        """
        errors = [error_of(_library.call, "xopsaot_add", (tensor((64,), device=d),) * 3, 0) for d in (0, 1, 2, 3)]
        emit(errors=errors, launches=launches(), info=xopsaot.info())
    """,
        devices="90,86,75,80",
    )
    errors, launches, info = r["errors"], r["launches"], r["info"]
    assert errors[0] is None and launches[0]["variant"]["arch"] == "sm_90a"
    # programmatic dependent launch from sm_90 on: the kernel may start as its predecessor finishes (it waits first)
    assert [x["pdl"] for x in launches] == [1] + [0] * (len(launches) - 1)
    assert errors[2][0] == "XopsaotError" and errors[2][2] == "NO_BINARY"
    assert "no binary for sm_75" in errors[2][1] and "this build has " + ", ".join(ARCHS) in errors[2][1]
    if "sm_80" in ARCHS:  # sm_80 binaries serve every 8.x GPU
        assert errors[1] is None and errors[3] is None
        assert [v["variant"]["arch"] for v in launches[1:]] == ["sm_80", "sm_80"]
    else:
        assert errors[1][2] == "NO_BINARY" and "no binary for sm_86" in errors[1][1]
    assert info["backend"] == "cuda" and [d["supported"] for d in info["devices"]] == [
        True,
        "sm_80" in ARCHS,
        False,
        "sm_80" in ARCHS,
    ]
    assert info["devices"][2]["arch"] == "sm_75" and "no binary" in info["devices"][2]["reason"]


@needs_sm90
def test_pdl_can_be_turned_off(fake_driver):
    body = """
        _library.call("xopsaot_add", (tensor((64,)),) * 3, 0)
        emit(launches=launches())
    """
    on, off = scenario(fake_driver, body), scenario(fake_driver, body, XOPSAOT_PDL="0")
    assert [x["pdl"] for x in on["launches"]] == [1] and [x["pdl"] for x in off["launches"]] == [0]


@needs_sm90
def test_driver_errors_are_reported(fake_driver, tmp_path):
    failing_load = scenario(
        fake_driver,
        """
        emit(error=error_of(_library.call, "xopsaot_add", (tensor((64,)),) * 3, 0))
    """,
        FAKE_CUDA_FAIL="cuModuleLoadData",
    )
    name, message, status = failing_load["error"]
    if ARCHS:
        assert name == "XopsaotError" and status == "DRIVER"
        assert "cuModuleLoadData(elementwise_kernel/" in message and "CUDA_ERROR_INVALID_IMAGE" in message
    no_device = scenario(
        fake_driver, "emit(info=xopsaot.info(), count=_library.device_count())", FAKE_CUDA_INIT_ERROR="100"
    )
    assert no_device["info"]["backend"] == "cpu"
    assert no_device["info"]["reason"] == "cuInit failed: CUDA_ERROR_NO_DEVICE (fake driver error)"
    missing = scenario(
        tmp_path / "libcuda.so.1",
        """
        q = tensor((1, 4, 1, 64))
        attn = (q,) * 4 + (None, None)
        emit(info=xopsaot.info(), error=error_of(_library.call, "xopsaot_flash_attn", attn, options(0.1), 0))
    """,
    )
    assert "the CUDA driver could not be loaded" in missing["info"]["reason"]
    assert missing["error"][2] == "NO_DRIVER"


@needs_sm90
def test_threads_share_one_module_per_context(fake_driver):
    r = scenario(
        fake_driver,
        """
        failures = []
        def work(worker):
            for i in range(40):
                dtype = ("float16", "bfloat16", "float32")[(worker + i) % 3]
                try:
                    _library.call("xopsaot_add", (tensor((512,), dtype, device=i % 2),) * 3, 0)
                except Exception as e:
                    failures.append(repr(e))
        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        emit(failures=failures, loads=fake.fake_cuda_load_count(), launches=launches())
    """,
        devices="90,90",
    )
    assert r["failures"] == []
    assert len(r["launches"]) == 320
    assert r["loads"] == 6  # 3 dtypes x 2 devices: each module loaded once per context, however many threads
    assert {launch["ctx"] for launch in r["launches"]} == {1, 2}  # the primary contexts of devices 0 and 1


@needs_sm90
def test_current_context_is_used_and_restored(fake_driver):
    r = scenario(
        fake_driver,
        """
        own = fake.fake_cuda_make_current(0, 1)  # a context the application created on device 0
        _library.call("xopsaot_add", (tensor((64,), device=0),) * 3, 0)
        _library.call("xopsaot_add", (tensor((64,), device=1),) * 3, 0)
        emit(own=own, launches=launches(), depth=fake.fake_cuda_depth(), loads=fake.fake_cuda_load_count())
    """,
        devices="90,90",
    )
    first, second = r["launches"]
    assert first["ctx"] == r["own"]  # the caller's context of the tensors' device
    assert second["ctx"] == 2  # device 1: its primary context, pushed and popped
    assert r["depth"] == 1 and r["loads"] == 2


@needs_sm90
def test_graph_capture_needs_preload(fake_driver):
    r = scenario(
        fake_driver,
        """
        stream = 0x5000
        fake.fake_cuda_set_capturing(stream, 1)
        before = error_of(_library.call, "xopsaot_add", (tensor((64,)),) * 3, stream)
        loads_during_capture = fake.fake_cuda_load_count()
        fake.fake_cuda_set_capturing(stream, 0)
        xopsaot.preload(0)
        loads = fake.fake_cuda_load_count()
        fake.fake_cuda_set_capturing(stream, 1)
        q = tensor((1, 33, 2, 64))
        after = [error_of(_library.call, "xopsaot_add", (tensor((64,)),) * 3, stream),
                 error_of(_library.call, "xopsaot_flash_attn", (q, q, q, q, None, None), options(0.1, 1), stream)]
        emit(before=before, loads_during_capture=loads_during_capture, loads=loads, after=after,
             loads_after=fake.fake_cuda_load_count(), violations=fake.fake_cuda_capture_violations())
    """,
    )
    assert r["before"][2] == "CAPTURE" and "xopsaot.preload()" in r["before"][1]
    assert r["loads_during_capture"] == 0 and r["violations"] == 0
    sm90 = sum(v["arch"] == "sm_90a" and v["alternate_of"] is None for v in _library.manifest()["variants"])
    assert r["loads"] == sm90  # every binary for the device but the autotuning alternates
    assert r["after"] == [None, None] and r["loads_after"] == r["loads"]


@needs_sm90
def test_split_kv_keeps_within_two_programs_per_multiprocessor(fake_driver):
    """Automatic split-KV on the fake's 132 SMs: batch x 8 key heads decode programs, split into as many slices as
    keep them within 264, each slice at least 256 keys; none when the batch fills the GPU. Head dim 64, whose
    table has no one-wave config (the next test)."""
    r = scenario(
        fake_driver,
        """
        fake.fake_cuda_expect_params(0)
        splits = {}
        for batch, context in ((16, 4096), (4, 8192), (1, 32768), (2, 4096), (1, 1000), (32, 2048)):
            q = tensor((batch, 1, 32, 64), ptr=0x7f0000000000)
            k = tensor((batch, context, 8, 64), ptr=0x7f0000100000)
            fake.fake_cuda_reset()
            _library.call("xopsaot_flash_attn", (q, k, k, q, None, None), options(0.1, splits=0), 0)
            first = launches()[0]
            splits[f"{batch}x{context}"] = first["grid"][1] // 8 if first["variant"]["kernel"] == "attn_fwd" else "tma"
        emit(**splits)
    """,
    )
    # 32 x 2048 fills the GPU unsplit, so the dense layout goes to the TMA kernel
    assert r == {"16x4096": 2, "4x8192": 8, "1x32768": 33, "2x4096": 16, "1x1000": 4, "32x2048": "tma"}


@needs_sm90
def test_one_unsplit_wave_where_the_table_has_a_config_for_it(fake_driver):
    """Where choose_splits would split a decode step, the sm_90 table's ONE_WAVE configs (16-bit caches, head dim 128,
    no softcap) run it in the slices that make one wave on the fake's 132 SMs, 90-100% of them: unsplit where batch x
    key heads alone fill them (16 x 8 = 128), else 132 // (batch x 8) slices (4 for batch 4, 16 for batch 1). Paged
    caches have a ONE_WAVE config (pages of at least 8 tokens; it reads the block table in chunks) for the unsplit case
    only. Without such a config (fp8 caches, pages of 4, softcap, head dim 64, paged in slices), or with num_splits
    given, choose_splits' count stands: within two programs per multiprocessor, four for an fp8 cache of head dim up to
    128 (paged ones on a config of their own). Steps of at most 33 programs go to attn_decode_tma instead (the next
    test), as do an fp8 cache's steps of any count at head dim 128 (64 if paged), and a 16-bit paged cache's of head
    dim 128 and at least 2048 keys up to a wave where its pages divide that kernel's 128-key blocks (16 to 128 keys),
    whose pages its loader reads in pool order. Returns per call: the kernel, slices, whether the variant is ONE_WAVE,
    launches (the kernel, then attn_combine if split), TABLE_CHUNK."""
    r = scenario(
        fake_driver,
        """
        fake.fake_cuda_expect_params(0)
        def step(batch, dtype="float16", kv=None, dim=128, softcap=0.0, splits=0, page=0, keys=4096):
            q = tensor((batch, 1, 32, dim), dtype)
            if page:
                cache = tensor((batch * keys // page, page, 8, dim), kv or dtype, 0x7f0000100000)
                table = tensor((batch, keys // page), "int32", 0x7f0000800000)
            else:
                cache, table = tensor((batch, 4096, 8, dim), kv or dtype, 0x7f0000100000), None
            lengths = tensor((batch,), "int32", 0x7f0000900000)
            fake.fake_cuda_reset()
            opts = _library.AttentionOptions(0.1, 0, -1, -1, softcap, splits)
            views = (q, cache, cache, None, None, lengths, table, q, None)
            _library.call("xopsaot_flash_attn_with_kvcache", views, opts, 0)
            first = launches()[0]
            constexprs = first["variant"]["constexprs"]
            slices = first["grid"][1 if first["kernel"] == "attn_fwd" else 0] // 8
            return [first["kernel"], slices, constexprs.get("ONE_WAVE", False), len(launches()),
                    constexprs.get("TABLE_CHUNK", 0)]
        emit(b16=step(16), b15=step(15), bf16=step(16, "bfloat16"), b14=step(14), b17=step(17),
             forced=step(16, splits=2), softcap=step(16, softcap=30.0), fp8=step(16, kv="float8_e4m3fn"),
             dim64=step(16, dim=64), page128=step(16, page=128), page8=step(16, "bfloat16", page=8),
             page4=step(16, page=4), paged14=step(14, page=16), b4=step(4), b3=step(3, "bfloat16"), b1=step(1),
             b5=step(5), b11=step(11),
             b4_page16=step(4, page=16), b4_softcap=step(4, softcap=30.0), b4_page4=step(4, page=4),
             b4_forced=step(4, splits=3), b4_fp8=step(4, kv="float8_e4m3fn"), b32_fp8=step(32, kv="float8_e4m3fn"),
             b64_fp8=step(64, kv="float8_e4m3fn"), paged_fp8=step(16, kv="float8_e4m3fn", page=16),
             fp8_dim256=step(16, kv="float8_e4m3fn", dim=256), fp8_dim96=step(16, kv="float8_e4m3fn", dim=96),
             paged_fp8_dim96=step(16, kv="float8_e4m3fn", dim=96, page=16),
             fp8_dim64=step(16, kv="float8_e4m3fn", dim=64),
             paged_fp8_dim64=step(16, kv="float8_e4m3fn", dim=64, page=16), page16=step(16, "bfloat16", page=16),
             page48=step(16, page=48), page256=step(16, page=256), b17_page16=step(17, page=16),
             page16_dim64=step(16, dim=64, page=16), page16_short=step(16, page=16, keys=1024))
    """,
    )
    fwd, tma = "attn_fwd", "attn_decode_tma"
    one_wave, split = [fwd, 1, True, 1, 0], [fwd, 2, False, 2, 0]
    assert r["b16"] == r["b15"] == r["bf16"] == one_wave  # 128 and 120 programs: at least 90% of 132
    assert r["b14"] == split  # 112 programs: under 90%
    assert r["b17"] == [fwd, 1, False, 1, 0]  # 136 programs: more than a wave, unsplit on the usual decode config
    assert r["forced"] == r["softcap"] == r["dim64"] == r["page4"] == r["fp8_dim256"] == r["page16_dim64"] == split
    # fp8 caches of head dim 128, and paged ones of 64: attn_decode_tma at any count of programs, one wave's slices
    assert r["fp8"] == r["paged_fp8"] == r["b32_fp8"] == r["b64_fp8"] == r["paged_fp8_dim64"] == [tma, 1, False, 1, 0]
    assert r["b4_fp8"] == [tma, 4, False, 2, 0]
    # other fp8 caches of head dim up to 128 on attn_fwd: within 4 x 132 programs
    assert r["fp8_dim96"] == r["paged_fp8_dim96"] == r["fp8_dim64"] == [fwd, 4, False, 2, 0]
    # 16-bit pages dividing 128 keys, up to a wave (128 or 112 programs): attn_decode_tma, unsplit; past a wave,
    # caches under 2048 keys, or pages of 8, 48 or 256: attn_fwd (its paged ONE_WAVE config where the programs fill
    # 90% of the SMs)
    assert r["page128"] == r["page16"] == r["paged14"] == [tma, 1, False, 1, 0]
    assert r["page8"] == r["page48"] == r["page256"] == r["page16_short"] == [fwd, 1, True, 1, 256]
    assert r["b17_page16"] == [fwd, 1, False, 1, 0]
    # fewer programs than a wave: as many slices as make one (40 x 3 of 132), merged after; 88 x 1 would fill
    # under 90%, so choose_splits' 3
    assert r["b5"] == [fwd, 3, True, 2, 0] and r["b11"] == [fwd, 3, False, 2, 0]
    # at most a quarter of the SMs: attn_decode_tma, in the slices that make one wave (32 x 4, 24 x 5, 8 x 16)
    assert r["b4"] == r["b4_page16"] == [tma, 4, False, 2, 0]
    assert r["b3"] == [tma, 5, False, 2, 0] and r["b1"] == [tma, 16, False, 2, 0]
    # choose_splits: within 2 x 132 programs
    assert r["b4_softcap"] == r["b4_page4"] == [fwd, 8, False, 2, 0]
    assert r["b4_forced"] == [tma, 3, False, 2, 0]  # num_splits given


@needs_sm90
def test_decode_of_few_programs_takes_tma(fake_driver):
    """A decode step from a 16-bit or fp8 cache whose programs (batch x key heads) fill at most a quarter of the fake's
    132 SMs goes to attn_decode_tma: grid (key heads x slices, batch, 1), as many slices as make one wave (of at least
    256 keys each), the caches as 2-D descriptors of (pages x page_size, heads_k x headdim) rows with boxes of 16 keys
    x 64 columns (an fp8 cache's bytes, 64-byte swizzle; a contiguous cache's sequences as its pages, no table), then
    attn_combine. More programs (but an fp8 cache's at head dim 128, or 64 paged, and a paged 16-bit cache's up to
    a wave), pages that are not whole 16-key runs or softcap keep attn_fwd; so do caches whose pages are not one block
    of rows (a page stride with a gap), and flash_attn's dense calls (a KV cache's op only)."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(0)
        def step(batch, page=16, dtype="bfloat16", kv=None, softcap=0.0, splits=0, gap=0):
            q = tensor((batch, 1, 32, 128), dtype, {A})
            pages, per = (batch * 2048 // page, 2048 // page) if page else (batch, 1)
            page = page or 2048
            strides = ((page * 8 * 128 + gap), 8 * 128, 128, 1)
            cache = tensor((pages, page, 8, 128), kv or dtype, {B}, strides=strides)
            table = tensor((batch, per), "int32", {C}) if per > 1 else None
            lengths = tensor((batch,), "int32", {D})
            fake.fake_cuda_reset()
            opts = _library.AttentionOptions(0.1, 0, -1, -1, softcap, splits)
            views = (q, cache, cache, None, None, lengths, table, q, None)
            _library.call("xopsaot_flash_attn_with_kvcache", views, opts, 0)
            return [[l["kernel"], l["grid"]] for l in launches()], tensor_maps()
        q, k = tensor((1, 1, 32, 128), "bfloat16", {A}), tensor((1, 2048, 8, 128), "bfloat16", {B})
        fake.fake_cuda_reset()
        _library.call("xopsaot_flash_attn", (q, k, k, q, None, None), options(0.1, splits=0), 0)
        dense = [l["kernel"] for l in launches()]
        emit(b1=step(1), b4=step(4), b5=step(5), page8=step(1, page=8), page48=step(1, page=48),
             fp8=step(1, kv="float8_e4m3fn"), fp8_b5=step(5, kv="float8_e4m3fn"), softcap=step(1, softcap=30.0),
             gap=step(1, gap=64),
             forced=step(1, splits=1), contiguous=step(2, page=0), contiguous_b5=step(5, page=0), dense=dense)
    """,
    )
    launches, maps = r["b1"]
    # 132 // 8 = 16 slices would make a wave; 2048 keys make at most 8 of 256
    assert launches == [["attn_decode_tma", [8 * 8, 1, 1]], ["attn_combine", [32, 1, 1]]]
    bf16, swizzle_128b = 9, 3
    cache_map = {"address": B, "dims": [8 * 128, 128 * 16], "strides": [8 * 128 * 2], "box": [64, 16],
                 "dtype": bf16, "swizzle": swizzle_128b, "oob_fill": 0}  # fmt: skip
    assert maps == [cache_map, cache_map]
    assert r["b4"][0] == [["attn_decode_tma", [8 * 4, 4, 1]], ["attn_combine", [4 * 32, 1, 1]]]  # 32 programs
    # 40 programs, over a quarter of 132: pages of 16 still on attn_decode_tma (up to a wave), 132 // 40 = 3 slices
    assert r["b5"][0] == [["attn_decode_tma", [8 * 3, 5, 1]], ["attn_combine", [5 * 32, 1, 1]]]
    assert r["page48"][0][0] == ["attn_decode_tma", [8 * 8, 1, 1]]
    launches, maps = r["fp8"]
    assert launches == [["attn_decode_tma", [8 * 8, 1, 1]], ["attn_combine", [32, 1, 1]]]
    uint8, swizzle_64b = 0, 2
    assert maps == [{**cache_map, "strides": [8 * 128], "dtype": uint8, "swizzle": swizzle_64b}] * 2
    # an fp8 cache's 40 programs too: 132 // 40 = 3 slices
    assert r["fp8_b5"][0] == [["attn_decode_tma", [8 * 3, 5, 1]], ["attn_combine", [5 * 32, 1, 1]]]
    for case in ("page8", "softcap", "gap", "contiguous_b5"):
        assert r[case][0][0][0] == "attn_fwd", case
    assert r["forced"][0] == [["attn_decode_tma", [8, 1, 1]]]  # num_splits=1: unsplit, no combine
    launches, maps = r["contiguous"]  # 16 programs: 132 // 16 = 8 slices
    assert launches == [["attn_decode_tma", [8 * 8, 2, 1]], ["attn_combine", [2 * 32, 1, 1]]]
    assert maps == [{**cache_map, "dims": [8 * 128, 2 * 2048]}] * 2
    assert r["dense"][0] == "attn_fwd"


@needs_sm90
def test_fast_memory_decode_rules(fake_driver):
    """With the memory of an H200 (3201 MHz x 6016 bits: 4814 GB/s peak, which info() reports), a decode step from a
    contiguous 16-bit cache of head dim 128 and at least 2048 keys whose slices make 90-100% of one wave goes to
    attn_decode_tma (unsplit at 16 x 8 programs, 132 // 64 = 2 slices at 8 x 8); 12 x 8 programs, which fill under
    90%, keep attn_fwd, as do head dim 64, shorter caches (the ONE_WAVE config) and softcap. Automatic slice counts
    for attn_fwd allow three programs per multiprocessor for 16-bit caches of head dim 128 there, paged ones too: 17 x
    8 programs in 2 slices, 12 x 8 in 4, and paged split steps take the table's fast_memory config (BLOCK_N 64 where
    the H100's rules keep 128); two elsewhere (head dim 64: 2 slices at 12 x 8; prefill's 3 x 2 x 22 programs of 128
    rows unsplit, on attn_fwd_ws_dense). An H100's memory (2619 MHz x 5120 bits: 3352 GB/s) or
    memory the driver does not report keep the rules measured on an H100: attn_fwd's ONE_WAVE config at 16 x 8
    programs, 17 x 8 unsplit, 12 x 8 in 2 slices. Per call: the first kernel, its grid, ONE_WAVE, launches."""
    body = """
        fake.fake_cuda_expect_params(0)
        def step(batch, dim=128, keys=4096, softcap=0.0, page=0):
            q = tensor((batch, 1, 32, dim), "bfloat16", 0x7f0000000000)
            cache = tensor((batch * keys // (page or keys), page or keys, 8, dim), "bfloat16", 0x7f0000100000)
            table = tensor((batch, keys // page), "int32", 0x7f0000800000) if page else None
            lengths = tensor((batch,), "int32", 0x7f0000900000)
            fake.fake_cuda_reset()
            opts = _library.AttentionOptions(0.1, 0, -1, -1, softcap, 0)
            _library.call("xopsaot_flash_attn_with_kvcache", (q, cache, cache, None, None, lengths, table, q, None),
                          opts, 0)
            first = launches()[0]
            constexprs = first["variant"]["constexprs"]
            return [first["kernel"], first["grid"], constexprs.get("ONE_WAVE", False), len(launches())] + (
                [constexprs["BLOCK_N"]] if page else [])
        def prefill():
            q = tensor((3, 1400, 4, 128), "bfloat16", 0x7f0000000000)
            k = tensor((3, 8192, 2, 128), "bfloat16", 0x7f0000100000)
            fake.fake_cuda_reset()
            _library.call("xopsaot_flash_attn", (q, k, k, q, None, None), options(0.1, splits=0), 0)
            return [l["kernel"] for l in launches()]
        emit(gbps=xopsaot.info()["devices"][0]["memory_gbps"], b16=step(16), b8=step(8), b12=step(12),
             b17=step(17), b12_dim64=step(12, dim=64), dim64=step(16, dim=64), short=step(16, keys=1024),
             softcap=step(16, softcap=30.0), b17_paged=step(17, page=16), b12_paged=step(12, page=8),
             prefill=prefill())
    """
    tma, fwd, one_wave = "attn_decode_tma", "attn_fwd", ["attn_fwd", [1, 8, 16], True, 1]
    h200 = scenario(fake_driver, body, FAKE_CUDA_MEMORY="3201000:6016")
    assert h200["gbps"] == 4814
    assert h200["b16"] == [tma, [8, 16, 1], False, 1]
    assert h200["b8"] == [tma, [8 * 2, 8, 1], False, 2]  # then attn_combine
    assert h200["short"] == one_wave
    assert h200["b17"] == [fwd, [1, 8 * 2, 17], False, 2] and h200["b12"] == [fwd, [1, 8 * 4, 12], False, 2]
    assert h200["b12_dim64"] == [fwd, [1, 8 * 2, 12], False, 2]
    assert h200["dim64"][0] == h200["softcap"][0] == fwd
    assert h200["b17_paged"] == [fwd, [1, 8 * 2, 17], False, 2, 64]
    assert h200["b12_paged"] == [fwd, [1, 8 * 4, 12], False, 2, 64]  # pages of 8: not attn_decode_tma's
    assert h200["prefill"] == ["attn_fwd_ws_dense"]
    for memory, gbps in (("2619000:5120", 3352), (None, 0)):
        other = scenario(fake_driver, body, **({"FAKE_CUDA_MEMORY": memory} if memory else {}))
        assert other["gbps"] == gbps
        assert other["b16"] == other["short"] == one_wave, memory
        assert other["b17"] == [fwd, [1, 8, 17], False, 1] and other["b12"] == [fwd, [1, 8 * 2, 12], False, 2]
        assert other["b8"][0] == fwd, memory
        assert other["b17_paged"] == [fwd, [1, 8, 17], False, 1, 128]
        assert other["b12_paged"] == [fwd, [1, 8 * 2, 12], False, 2, 128], memory


@needs_sm90
def test_decode_tma_tile_by_rows(fake_driver):
    """attn_decode_tma's tile by the rows per key head (seqlen_q x group): at most 16 take the transposed products
    (ROWS=16: keys on wgmma's M, rows on its N), more the 64-row tile; 16-bit and fp8 caches alike."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(0)
        def step(seqlen_q, kv="bfloat16"):
            q = tensor((1, seqlen_q, 32, 128), "bfloat16", {A})
            cache = tensor((128, 16, 8, 128), kv, {B})
            table = tensor((1, 128), "int32", {C})
            lengths = tensor((1,), "int32", {D})
            fake.fake_cuda_reset()
            opts = _library.AttentionOptions(0.1, 1, -1, -1, 0.0, 0)
            _library.call("xopsaot_flash_attn_with_kvcache", (q, cache, cache, None, None, lengths, table, q, None),
                          opts, 0)
            first = launches()[0]
            return [first["kernel"], first["variant"]["constexprs"]["ROWS"]]
        emit(decode=step(1), chunk4=step(4), chunk5=step(5), fp8=step(1, "float8_e4m3fn"),
             fp8_chunk5=step(5, "float8_e4m3fn"))
    """,
    )
    assert r["decode"] == r["chunk4"] == r["fp8"] == ["attn_decode_tma", 16]  # 4 and 16 rows
    assert r["chunk5"] == r["fp8_chunk5"] == ["attn_decode_tma", 64]  # 20 rows


# ---- XOPSAOT_AUTOTUNE ----

DECODE_CALL = """
fake.fake_cuda_expect_params(51)
ADDRESS = {v["index"]: a for a, v in BY_ADDRESS.items()}
def decode_bucket():
    for v in MANIFEST["variants"]:
        if (v["kernel"] == "attn_fwd" and v["arch"] == "sm_90a" and v["when"] == "seqlen_q * group <= 16"
                and v["alternate_of"] is None
                and v["dtypes"] == {"T": "float16", "KV": "float16"}
                and v["keys"] == {"BLOCK_D": 128, "PAGED": False, "MODS": False}):
            return v, [w for w in MANIFEST["variants"] if w["alternate_of"] == v["index"]]
primary, alternates = decode_bucket()
def decode_step(stream=0):
    q = tensor((4, 1, 8, 128), ptr=0x7f0000000000)
    k = tensor((4, 1024, 2, 128), ptr=0x7f0000100000, strides=(2 * 1024 * 128, 128, 1024 * 128, 1))  # no TMA
    fake.fake_cuda_reset()
    _library.call("xopsaot_flash_attn", (q, k, k, q, None, None), options(0.1, splits=1), stream)
    return [l["variant"]["index"] for l in launches()]
"""


@needs_sm90
@pytest.mark.parametrize("faster", ["alternate", "primary"])
def test_autotune_times_the_candidates_once_and_remembers_on_disk(fake_driver, tmp_path, faster):
    """With XOPSAOT_AUTOTUNE=1 the first call of a bucket times the table's config and its alternates (the fake
    clock charges each module its cost), launches the fastest, and appends the choice to the cache file; a new
    process reads the file and launches the choice without timing anything."""
    cache = tmp_path / "autotune.tsv"
    env = {"XOPSAOT_AUTOTUNE": "1", "XOPSAOT_AUTOTUNE_CACHE": str(cache)}
    body = DECODE_CALL + textwrap.dedent(f"""
    costs = {{"alternate": 0.25, "primary": 4.0}}["{faster}"]
    for w in alternates:
        fake.fake_cuda_set_cost(ADDRESS[w["index"]], costs)
    emit(primary=primary, alternates=[w["index"] for w in alternates], first=decode_step(), again=decode_step())
    """)
    r = scenario(fake_driver, body, **env)
    (alternate,) = r["alternates"]  # the table gives this bucket one alternate
    best = alternate if faster == "alternate" else r["primary"]["index"]
    # a warm-up and three windows of four launches per candidate, then the call itself
    assert r["first"] == [r["primary"]["index"]] * 13 + [alternate] * 13 + [best]
    assert r["again"] == [best]
    (line,) = cache.read_text().splitlines()
    labels = {v["index"]: v for v in _library.manifest()["variants"]}
    assert line.split("\t")[1:] == [r["primary"]["label"], r["primary"]["when"], labels[best]["label"]]
    report = "emit(first=decode_step(), cache=xopsaot.info()['autotune_cache'])"
    later = scenario(fake_driver, DECODE_CALL + report, **env)
    assert later == {"first": [best], "cache": str(cache)}
    untuned = scenario(fake_driver, DECODE_CALL + report, XOPSAOT_AUTOTUNE_CACHE=str(cache))
    assert untuned == {"first": [r["primary"]["index"]], "cache": None}  # without XOPSAOT_AUTOTUNE the table decides


@needs_sm90
def test_autotune_cache_defaults_to_the_xdg_cache_directory(fake_driver, tmp_path):
    """Without XOPSAOT_AUTOTUNE_CACHE the choices go to $XDG_CACHE_HOME/xopsaot/autotune.tsv, directories created."""
    base = tmp_path / "not" / "yet"
    env = {"XOPSAOT_AUTOTUNE": "1", "XOPSAOT_AUTOTUNE_CACHE": "", "XDG_CACHE_HOME": str(base)}
    r = scenario(fake_driver, DECODE_CALL + "emit(cache=xopsaot.info()['autotune_cache'], n=len(decode_step()))", **env)
    path = base / "xopsaot" / "autotune.tsv"
    assert r == {"cache": str(path), "n": 27} and len(path.read_text().splitlines()) == 1


@needs_sm90
def test_autotune_waits_while_a_graph_is_captured(fake_driver, tmp_path):
    """An untuned bucket met during capture launches the table's config (timing would synchronize the capture);
    the first call after capture tunes it. Preload loads the alternates too."""
    cache = tmp_path / "autotune.tsv"
    body = DECODE_CALL + textwrap.dedent("""
    xopsaot.preload(0)
    loads = fake.fake_cuda_load_count()
    fake.fake_cuda_set_capturing(0x5000, 1)
    captured = decode_step(0x5000)
    fake.fake_cuda_set_capturing(0x5000, 0)
    emit(loads=loads, captured=captured, after=len(decode_step(0x5000)), primary=primary["index"],
         violations=fake.fake_cuda_capture_violations())
    """)
    r = scenario(fake_driver, body, XOPSAOT_AUTOTUNE="1", XOPSAOT_AUTOTUNE_CACHE=str(cache))
    assert r["loads"] == sum(v["arch"] == "sm_90a" for v in _library.manifest()["variants"])
    assert r["captured"] == [r["primary"]] and r["violations"] == 0
    assert r["after"] == 27 and len(cache.read_text().splitlines()) == 1


@needs_sm90
def test_rotary_launches(fake_driver):
    """rotary_qk: q and k in one grid, SIN at the cache's second half, positions per token. apply_rotary varlen: a
    row of programs past the last sequence copies the padding tokens out of place, and nothing in place. The layout
    (halves or interleaved pairs) picks the variant."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(28)
        q = tensor((5, 32, 128), "bfloat16", {A}, strides=(6144, 128, 1))
        k = tensor((5, 8, 128), "bfloat16", {A} + 8192, strides=(6144, 128, 1))
        cache = tensor((100, 128), "bfloat16", {C})
        _library.call("xopsaot_rotary_qk", (tensor((5,), "int64", {B}), q, k, cache), 1, 0)
        x, cos, cu = tensor((40, 6, 96)), tensor((50, 40), ptr={B}), tensor((4,), "int32", {C})
        _library.call("xopsaot_rotary", (x, cos, cos, None, cu, tensor((40, 6, 96), ptr={A} + 2**20)), 3, 33, 0, 0)
        _library.call("xopsaot_rotary", (x, cos, cos, None, cu, x), 0, 33, 1, 0)
        other = tensor((40, 6, 96), strides=(1000, 96, 1))
        emit(launches=launches(), strides=error_of(_library.call, "xopsaot_rotary", (x, cos, cos, None, cu, other),
                                                   0, 33, 0, 0))
    """,
    )
    (entry,) = [k for k in _library.manifest()["kernels"] if k["name"] == "rotary_kernel"]
    qk, varlen, in_place = [dict(zip([a["name"] for a in entry["args"]], decode(x["params"], "rotary_kernel")))
                            for x in r["launches"]]  # fmt: skip
    assert r["launches"][0]["grid"] == [5, 1, 1]  # one program per token: its 32 q heads, then k's 8
    assert qk["X"] == qk["Y"] == A and qk["K"] == A + 8192 and qk["COS"] == C and qk["SIN"] == C + 64 * 2
    assert (qk["POSITIONS"], qk["pos_mode"], qk["half"], qk["tail_end"]) == (B, 2, 64, 128)
    interleaved = [x["variant"]["keys"]["INTERLEAVED"] for x in r["launches"]]
    assert interleaved == [False, False, True]  # is_neox=1, then interleaved=0 and 1
    assert (qk["stride_xs"], qk["stride_ks"], qk["stride_kh"], qk["n_pos"], qk["heads_k"]) == (6144, 6144, 128, 100, 8)
    assert r["launches"][1]["grid"] == [33, 4, 1]  # max_seqlen, 3 sequences + the padding row, 6 heads
    assert (varlen["varlen"], varlen["total"], varlen["tail_end"], varlen["offset"], varlen["stride_xb"]) == (
        1, 40, 96, 3, 0)  # fmt: skip
    assert varlen["Y"] == A + 2**20 and varlen["CU_SEQLENS"] == C and varlen["pos_mode"] == 0
    assert (in_place["total"], in_place["tail_end"], in_place["Y"]) == (0, 80, A)
    assert "out is x with other strides" in r["strides"][1]


@needs_sm90
def test_scan_launches(fake_driver):
    """Scans with few programs along their dim are split into chunks: (3000, 96) along dim 0 is one segment of one
    lane block (512 lanes), so a launch of chunk totals into a workspace, then the scan, each over (1, 1, parts) with
    chunks of at least 64 rows (a multiple of 16); a 1-D tensor's chunks are at least 4096 long; a scan with programs
    enough is one launch of one part, its chunk the whole (rounded up) line. logcumsumexp over lanes keeps 64-lane
    tiles and chunks of at least 256 (two lane blocks, 11 chunks of 288); an int32 cumsum takes cumsum's tiles."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(16)
        calls = []
        cases = [((3000, 96), 0, 0, "bfloat16", "bfloat16"), ((100003,), 0, 0, "bfloat16", "bfloat16"),
                 ((512, 1000), 1, 0, "bfloat16", "bfloat16"), ((3000, 96), 0, 1, "bfloat16", "bfloat16"),
                 ((3000, 96), 0, 0, "int32", "int64")]
        for shape, dim, op, dtype, out_dtype in cases:
            before = fake.fake_cuda_alloc_count()
            fake.fake_cuda_reset()
            _library.call("xopsaot_scan", (tensor(shape, dtype, {A}), tensor(shape, out_dtype, {B}), None), dim, op,
                          0, 0)
            calls.append(dict(launches=launches(), allocs=fake.fake_cuda_alloc_count() - before))
        emit(calls=calls)
    """,
    )
    tiles, row, many, log_lanes, int_lanes = r["calls"]
    totals, scan = tiles["launches"]
    assert (totals["kernel"], scan["kernel"]) == ("scan_totals_kernel", "scan_kernel") and tiles["allocs"] == 1
    # 1 program wants 8 * 132 parts; 3000 rows make at most 46 of 64: chunks of 80 (66 rounded up to 16), 38 of them
    assert totals["grid"] == scan["grid"] == [1, 1, 38]
    t, s = decode(totals["params"], "scan_totals_kernel"), decode(scan["params"], "scan_kernel")
    # W; n, inner and the lanes' pitch; chunk
    assert t[2] == s[3] != A and t[3:6] == s[4:7] == [3000, 96, 96] and t[10] == s[11] == 80
    (row_totals, row_scan) = row["launches"]
    row_args = decode(row_scan["params"], "scan_kernel")
    assert row_scan["grid"] == [1, 1, 24] and row_args[11] == 4176  # 100003 / 24
    assert row_args[5:7] == [1, 16]  # along the last dim the pitch is a hinted dummy, so n's hint still applies
    (one,) = many["launches"]
    assert one["kernel"] == "scan_kernel" and one["grid"] == [512, 1, 1] and many["allocs"] == 0
    chunked = [launch["variant"]["keys"]["CHUNKED"] for launch in (scan, row_scan, one)]
    assert chunked == [True, True, False]  # the carry-in code is compiled only where it is used
    assert decode(one["params"], "scan_kernel")[11] == 1008  # the line of 1000 rounded up to 16
    lanes = [launch["variant"]["constexprs"]["BLOCK_I"] for launch in (totals, scan)]
    log_totals, log_scan = log_lanes["launches"]
    assert lanes == [512, 512] and log_scan["grid"] == [1, 2, 11]
    assert [launch["variant"]["constexprs"]["BLOCK_I"] for launch in (log_totals, log_scan)] == [64, 64]
    assert decode(log_scan["params"], "scan_kernel")[11] == 288
    assert [launch["variant"]["constexprs"]["BLOCK_I"] for launch in int_lanes["launches"]] == [512, 512]


def row_choice(launch) -> tuple:
    """A row kernel's launch as (path, rows, threads, ...): a held kernel's HELD, PER_SM and TAIL (0 without one), a
    cluster kernel's HELD, CLUSTER and the cluster it was launched in (its rows: programs over CLUSTER), or the
    registers' or the loop's BLOCK_N."""
    constexprs = launch["variant"]["constexprs"]
    rows, threads = launch["grid"][0], launch["block"][0]
    if launch["cluster"] > 1:
        return (
            "cluster",
            rows // constexprs["CLUSTER"],
            threads,
            constexprs["HELD"],
            constexprs["CLUSTER"],
            launch["cluster"],
        )
    if launch["kernel"].endswith("_held_kernel"):
        return "held", rows, threads, constexprs["HELD"], constexprs["PER_SM"], constexprs.get("TAIL", 0)
    return "loop" if constexprs["LOOP"] else "registers", rows, threads, constexprs["BLOCK_N"]


@needs_sm90
def test_row_reduction_launches(fake_driver):
    """logsumexp takes the LSE variants with an output stride of 0, so the variants hinted for aligned rows apply
    (a stride of 1 sent every row to the unhinted looping one); group_norm's channel arithmetic is 32-bit, and few
    long groups are split over programs: a launch of chunk sums into a workspace, then the normalizing launch."""
    r = scenario(
        fake_driver,
        f"""
        fake.fake_cuda_expect_params(16)
        x = tensor((4, 4096), "bfloat16", {A})
        _library.call("xopsaot_softmax_family", (x, tensor((4,), "bfloat16", {B})), 2, 0)
        _library.call("xopsaot_softmax_family", (x, tensor((4, 4096), "bfloat16", {B})), 0, 0)
        w = tensor((64,), "bfloat16", {C})
        _library.call("xopsaot_group_norm", (tensor((2, 64, 16, 16), "bfloat16", {A}), w, None,
                                             tensor((2, 64, 16, 16), "bfloat16", {B})), 32, 1e-5, 0)
        before = fake.fake_cuda_alloc_count()
        _library.call("xopsaot_group_norm", (tensor((1, 64, 128, 128), "bfloat16", {A}), w, w,
                                             tensor((1, 64, 128, 128), "bfloat16", {B})), 32, 1e-5, 0)
        many = tensor((64, 64, 128, 128), "float32", {A})
        _library.call("xopsaot_group_norm", (many, None, None, tensor((64, 64, 128, 128), "float32", {B})), 32,
                      1e-5, 0)
        for shape, dtype in (((400, 4, 16384), "float32"), ((300, 2, 16384), "float32"),
                             ((1024, 5, 8192), "bfloat16")):
            _library.call("xopsaot_group_norm", (tensor(shape, dtype, {A}), None, None,
                                                 tensor(shape, dtype, {B})), 1, 1e-5, 0)
        for rows, n, dtype in ((2, 20000, "bfloat16"), (2, 40000, "bfloat16"), (2, 73712, "bfloat16"),
                               (2, 131072, "bfloat16"), (528, 8208, "bfloat16"), (528, 40000, "float16"),
                               (527, 40000, "bfloat16"), (600, 57360, "bfloat16"), (1056, 131072, "bfloat16"),
                               (1055, 131072, "bfloat16"), (528, 8208, "float32"), (528, 65536, "float32"),
                               (528, 40008, "bfloat16"), (2112, 131072, "bfloat16"), (2111, 131072, "bfloat16"),
                               (527, 131072, "bfloat16"), (132, 196592, "bfloat16"), (132, 196608, "bfloat16"),
                               (131, 262144, "bfloat16"), (132, 262160, "float16"), (2112, 65536, "float32"),
                               (132, 131072, "float32")):
            _library.call("xopsaot_softmax_family", (tensor((rows, n), dtype, {A}),
                                                     tensor((rows, n), dtype, {B})), 1, 0)
        _library.call("xopsaot_softmax_family", (tensor((528, 40000), "bfloat16", {A}),
                                                 tensor((528,), "bfloat16", {B})), 2, 0)
        # groups of 32768 elements held whole in 64 KB of bf16, not of fp32; 384 groups fill less than a wave
        for shape, dtype in (((16, 256, 64, 64), "bfloat16"), ((16, 256, 64, 64), "float32"),
                             ((12, 256, 64, 64), "bfloat16"), ((600, 4, 4096), "float32")):
            _library.call("xopsaot_group_norm", (tensor(shape, dtype, {A}), None, None, tensor(shape, dtype, {B})),
                          32 if shape[1] == 256 else 1, 1e-5, 0)
        emit(launches=launches(), allocs=fake.fake_cuda_alloc_count() - before,
             frees=fake.fake_cuda_free_count())
    """,
    )
    lse, soft, group, stats, split, whole, long_groups, few_long_groups, small_shares, *long_rows, long_lse = r[
        "launches"
    ][:-4]
    held_bf16, not_held_fp32, under_a_wave, held_fp32 = r["launches"][-4:]

    # softmax rows of 16385-32768 held whole in registers by 32 warps, longer ones in steps of 8192 (16 warps), from
    # 73728 of 16384 (32 warps). On Hopper, with at least 4 rows per multiprocessor (528), softmax_held_kernel holds
    # rows of 8193-114688 16-bit elements (57344 float32) in shared memory, a program per row: 32 KB 8 warps, 64 KB 16,
    # 112 KB 16, 224 KB 32; from 16 rows per multiprocessor (2112) also rows past 224 KB, with 16384 16-bit elements
    # (8192 float32) in registers. Rows past 224 KB go to softmax_cluster_kernel instead, 16 warps a program holding
    # 64 KB, in clusters of 4 (up to 131072 16-bit elements, 65536 float32) from 4 up to 16 rows per multiprocessor,
    # and of 8 (262144, 131072) from one where each program's share is at least 48 KB (from 196608 16-bit elements).
    # Other rows, and those that miss the hints (40008 is not a whole number of 16-element vectors), loop; logsumexp
    # keeps its configs.
    assert [row_choice(v) for v in long_rows] == [
        ("registers", 2, 1024, 32768),
        ("loop", 2, 512, 8192),
        ("loop", 2, 512, 8192),
        ("loop", 2, 1024, 16384),
        ("held", 528, 256, 16384, 6, 0),
        ("held", 528, 512, 57344, 2, 0),
        ("loop", 527, 512, 8192),
        ("held", 600, 1024, 114688, 1, 0),
        ("cluster", 1056, 512, 32768, 4, 4),
        ("cluster", 1055, 512, 32768, 4, 4),
        ("held", 528, 512, 16384, 3, 0),
        ("cluster", 528, 512, 16384, 4, 4),
        ("loop", 528, 256, 4096),
        ("held", 2112, 1024, 114688, 1, 16384),
        ("cluster", 2111, 512, 32768, 4, 4),
        ("loop", 527, 1024, 16384),
        ("loop", 132, 1024, 16384),
        ("cluster", 132, 512, 32768, 8, 8),
        ("loop", 131, 1024, 16384),
        ("loop", 132, 1024, 16384),
        ("held", 2112, 1024, 57344, 1, 8192),
        ("cluster", 132, 512, 16384, 8, 8),
    ]
    assert decode(long_rows[7]["params"], "softmax_held_kernel")[2:6] == [57360, 57360, 57360, 1]
    assert decode(long_rows[17]["params"], "softmax_cluster_kernel")[2:6] == [196608, 196608, 196608, 1]
    assert long_lse["variant"]["constexprs"]["BLOCK_N"] == 4096 and long_lse["variant"]["constexprs"]["LOOP"]
    assert lse["variant"]["keys"] == {"LSE": True} and soft["variant"]["keys"] == {"LSE": False}
    assert lse["variant"]["constexprs"]["BLOCK_N"] == 4096 and not lse["variant"]["constexprs"]["LOOP"]
    assert "stride_y" in lse["variant"]["aligned_args"] and lse["block"] == [128, 1, 1]  # 4 warps
    assert decode(lse["params"], "softmax_kernel")[2:6] == [4096, 0, 4096, 2]
    g = decode(group["params"], "group_norm_kernel")
    assert group["grid"] == [64, 1, 1] and g[:5] == [A, C, A, B, A]  # no bias or partials: x's pointer
    assert g[5:10] == [512, 4096, 256, 2, 32] and g[11:13] == [1, 0]  # the chunk: the group rounded up
    # 32 groups of 32768, fewer than 2 per SM, split for 4 programs per SM: 17 splits, chunks rounded up to 4096: 8
    assert stats["kernel"] == "group_norm_stats_kernel" and stats["grid"] == [32, 8, 1]
    partials = decode(stats["params"], "group_norm_stats_kernel")[1]
    assert decode(stats["params"], "group_norm_stats_kernel")[:4] == [A, partials, 32768, 4096]
    g = decode(split["params"], "group_norm_kernel")
    assert split["grid"] == [32, 8, 1] and g[:7] == [A, C, C, B, partials, 32768, 4096]
    assert split["variant"]["constexprs"]["LOOP"] and r["allocs"] == 1 and r["frees"] >= 1
    # on Hopper, groups of 48-64 KB a program for clusters of 2, 4 or 8 take group_norm_cluster_kernel where the
    # clusters make 6 programs per multiprocessor (792 of the fake's 132) or more: 2048 float32 groups of 32768 (128
    # KB) in clusters of 2, 400 of 65536 in clusters of 4; 300 groups of 32768 (600 programs) keep group_norm_kernel's
    # steps of 4096 and 8 warps, and 1024 bf16 groups of 40960 (80 KB: shares of 40 KB) its steps of 8192
    g = decode(whole["params"], "group_norm_cluster_kernel")
    assert whole["grid"] == [4096, 1, 1] and whole["cluster"] == 2 and g[4:6] == [32768, 16384]
    assert whole["variant"]["constexprs"] == {"HELD": 16384, "CHUNK": 4096, "CLUSTER": 2}
    assert whole["block"] == [256, 1, 1]
    assert long_groups["grid"] == [1600, 1, 1] and long_groups["cluster"] == 4
    assert long_groups["variant"]["constexprs"]["CLUSTER"] == 4
    assert few_long_groups["kernel"] == "group_norm_kernel" and few_long_groups["grid"] == [300, 1, 1]
    assert few_long_groups["variant"]["constexprs"]["BLOCK_N"] == 4096 and few_long_groups["block"] == [256, 1, 1]
    assert small_shares["kernel"] == "group_norm_kernel" and small_shares["grid"] == [1024, 1, 1]
    assert small_shares["variant"]["constexprs"]["BLOCK_N"] == 8192
    # unsplit groups of 8193 to 64 KB on Hopper, at least 3 per multiprocessor (a wave): the held kernel, a program
    # per group (32768 bf16, 16384 fp32 elements; 32768 fp32 ones take the clusters, 384 groups group_norm_kernel's
    # steps)
    assert held_bf16["kernel"] == "group_norm_held_kernel" and held_bf16["grid"] == [512, 1, 1]
    assert decode(held_bf16["params"], "group_norm_held_kernel")[4:8] == [32768, 4096, 8, 32]
    assert held_bf16["variant"]["constexprs"]["HELD"] == 32768 and held_bf16["block"] == [256, 1, 1]
    assert not_held_fp32["kernel"] == "group_norm_cluster_kernel" and under_a_wave["kernel"] == "group_norm_kernel"
    assert held_fp32["kernel"] == "group_norm_held_kernel" and held_fp32["variant"]["constexprs"]["HELD"] == 16384


@needs_sm90
def test_held_row_norm_launches(fake_driver):
    """On Hopper, rows past 32768 elements with at least 4 rows per multiprocessor (528 of the fake's 132) take
    row_norm_held_kernel where the row fits its configs (112 KB two programs per multiprocessor, 224 KB one; with a
    residual or a gate less a ring of four steps, or with a gate after the norm 112 KB of each input; in clusters of
    4 past those (shares of 64 KB three programs per multiprocessor, then 112 KB two), and of 2 for a gate before the
    norm), with row_norm_kernel's arguments; other rows take row_norm_kernel."""
    r = scenario(
        fake_driver,
        f"""
        def norm(shape, dtype, norm=0, residual=False, gate=False, pre=1):
            n = shape[-1]
            x, out, w = tensor(shape, dtype, {A}), tensor(shape, dtype, {B}), tensor((n,), dtype, {C})
            other = tensor(shape, dtype, {D})
            options = _library.NormOptions(norm, 1e-5, 0.0, 0, pre)
            _library.call("xopsaot_norm", (x, w, None, other if residual else None, other if gate else None, out,
                                           tensor(shape, dtype, {E}) if residual else None), ctypes.byref(options), 0)

        fake.fake_cuda_expect_params(22)
        norm((528, 40000), "bfloat16")
        norm((527, 40000), "bfloat16")
        norm((600, 100000), "float16", norm=1)
        norm((528, 114704), "bfloat16")
        norm((528, 40000), "bfloat16", residual=True)
        norm((528, 57344), "float16", norm=1, gate=True)
        norm((528, 57360), "bfloat16", gate=True)
        norm((528, 40000), "float32")
        norm((528, 40000), "float32", residual=True)
        norm((528, 40008), "bfloat16")
        norm((528, 50000), "bfloat16", gate=True, pre=0)
        norm((528, 57352), "bfloat16", gate=True, pre=0)
        norm((528, 100000), "bfloat16", gate=True, pre=0)
        norm((528, 40000), "float32", gate=True)
        norm((528, 100000), "float32", norm=1)
        norm((528, 163848), "bfloat16", residual=True)
        norm((528, 229376), "float16", norm=1)
        norm((528, 229392), "bfloat16")
        emit(launches=launches())
    """,
    )

    assert [row_choice(v) for v in r["launches"]] == [
        ("held", 528, 512, 57344, 2, 0),
        ("loop", 527, 512, 8192),
        ("held", 600, 1024, 114688, 1, 0),
        ("cluster", 528, 512, 32768, 4, 4),
        ("held", 528, 512, 40960, 2, 0),
        ("cluster", 528, 512, 40960, 2, 2),
        ("cluster", 528, 512, 40960, 2, 2),
        ("held", 528, 1024, 57344, 1, 0),
        ("held", 528, 1024, 40960, 1, 0),
        ("loop", 528, 256, 4096),
        ("held", 528, 1024, 57344, 1, 0),
        ("loop", 528, 256, 4096),
        ("cluster", 528, 512, 40960, 4, 4),
        ("cluster", 528, 512, 20480, 2, 2),
        ("cluster", 528, 512, 28672, 4, 4),
        ("loop", 528, 256, 4096),
        ("cluster", 528, 512, 57344, 4, 4),
        ("loop", 528, 1024, 16384),
    ]
    # the second input's ring: four steps, or with a gate after the norm the whole row's seven
    rings = [v["variant"]["constexprs"].get("RING") for v in r["launches"]]
    assert rings == [0, None, 0, 0, 4, 4, 4, 0, 4, None, 7, None, 4, 4, 0, None, 0, None]
    assert decode(r["launches"][3]["params"], "row_norm_held_kernel")[12] == 114704  # the whole row's length
    residual, gate = r["launches"][4], r["launches"][5]
    assert residual["variant"]["keys"] == {"HAS_RESIDUAL": True, "HAS_GATE": False}
    assert gate["variant"]["keys"] == {"HAS_RESIDUAL": False, "HAS_GATE": True}
    params = decode(residual["params"], "row_norm_held_kernel")
    assert params[:7] == [A, C, A, D, A, B, E] and params[12:15] == [40000, pytest.approx(1e-5), 0.0]
    assert decode(gate["params"], "row_norm_held_kernel")[15:20] == [1, 1, 0, 1, 1]  # layer, weight, no bias, silu, pre


# ---- argument validation in the C layer: no driver needed ----


def raw_call(name, *descriptors, scalars=(0,)):
    """Call a C op with hand-packed descriptors (bytes or None)."""
    buffers = [None if d is None else __import__("ctypes").create_string_buffer(d, len(d)) for d in descriptors]
    addresses = [None if b is None else __import__("ctypes").addressof(b) for b in buffers]
    lib = _library.library()
    status = getattr(lib, name)(*addresses, *scalars)
    return status, lib.xopsaot_last_error().decode()


def attn(scale, causal=0):
    return (_library.AttentionOptions(scale, causal, -1, -1, 0.0, 0), None)


def norm_options(kind=0, eps=1e-6):
    return (_library.NormOptions(kind, eps, 0.0, 0, 1), None)


def descriptor(shape, dtype=1, ptr=A, strides=None, ndim=None, device=0):
    n = len(shape)
    strides = strides or [int(x) for x in __import__("xopsaot._arrays")._arrays.contiguous_strides(shape)]
    pad = [0] * (8 - n)
    return _library.TENSOR.pack(ptr, *shape, *pad, *strides, *pad, n if ndim is None else ndim, dtype, device, 0)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: raw_call("xopsaot_add", None, descriptor((4,)), descriptor((4,))), "add: a is NULL"),
        (lambda: raw_call("xopsaot_add", *[descriptor((4,), ndim=9)] * 3), "a has ndim 9; 0 to 8 are supported"),
        (lambda: raw_call("xopsaot_add", *[descriptor((-4,))] * 3), "add: a.shape[0] is negative"),
        (lambda: raw_call("xopsaot_add", *[descriptor((4,), dtype=99)] * 3), "invalid dtype code 99"),
        (
            lambda: raw_call("xopsaot_add", descriptor((4,)), descriptor((4,), device=1), descriptor((4,))),
            "add: y is on device 1 but out is on device 0",
        ),
        (
            lambda: raw_call("xopsaot_add", *[descriptor((4,), dtype=4)] * 3),
            "add: dtype float64 is not supported; supported: float16, bfloat16, float32, int32, int64, bool",
        ),
        (
            lambda: raw_call("xopsaot_flash_attn", *[descriptor((1, 4, 2, 264))] * 4, None, None, scalars=attn(0.1)),
            "flash_attn: headdim is 264; supported: multiples of 8 up to 256",
        ),
        (
            lambda: raw_call(
                "xopsaot_flash_attn", *[descriptor((1, 4, 2, 64), dtype=3)] * 4, None, None, scalars=attn(0.1)
            ),
            "flash_attn: dtype float32 is not compiled (compiled: float16, bfloat16)",
        ),
        (
            lambda: raw_call(
                "xopsaot_flash_attn", *[descriptor((1, 4, 2, 64))] * 4, None, None, scalars=attn(float("inf"))
            ),
            "softmax_scale must be finite",
        ),
        (
            lambda: raw_call(
                "xopsaot_rms_norm",
                descriptor((2, 8)),
                descriptor((8,)),
                descriptor((2, 8)),
                descriptor((2, 8)),
                None,
                scalars=(1e-6, 0),
            ),
            "residual and residual_out go together",
        ),
        (
            lambda: raw_call(
                "xopsaot_norm", *[descriptor((2, 8))] + [None] * 2 + [descriptor((2, 8))] * 4, scalars=norm_options()
            ),
            "a residual and a gate cannot be combined",
        ),
        (
            lambda: raw_call(
                "xopsaot_norm", descriptor((2, 8)), *[None] * 4, descriptor((2, 8)), None, scalars=norm_options(kind=2)
            ),
            "norm is 2; supported: 0 (rms), 1 (layer)",
        ),
        (
            lambda: raw_call(
                "xopsaot_norm", descriptor((2, 8)), *[None] * 4, descriptor((2, 8)), None, scalars=(None, 0)
            ),
            "options is NULL",
        ),
        (
            lambda: raw_call(
                "xopsaot_norm",
                descriptor((2, 8)),
                descriptor((7,)),
                *[None] * 3,
                descriptor((2, 8)),
                None,
                scalars=norm_options(),
            ),  # fmt: skip
            "weight has 7 elements but x's last dim is 8",
        ),
        (
            lambda: raw_call(
                "xopsaot_group_norm", descriptor((2, 6, 5)), None, None, descriptor((2, 6, 5)), scalars=(4, 1e-5, 0)
            ),
            "num_groups is 4; it must divide the 6 channels",
        ),
        (
            lambda: raw_call(
                "xopsaot_matmul", descriptor((4, 8)), descriptor((8, 6), strides=(12, 2)), descriptor((4, 6))
            ),
            "b must be contiguous along one of its last two dims",
        ),
        (
            lambda: raw_call("xopsaot_softmax_family", descriptor((4, 8)), descriptor((4, 8)), scalars=(3, 0)),
            "kind is 3; supported: 0 (softmax), 1 (log_softmax), 2 (logsumexp)",
        ),
        (
            lambda: raw_call("xopsaot_softmax_family", descriptor((4, 8)), descriptor((4, 2)), scalars=(2, 0)),
            "logsumexp: out must be contiguous, of x's shape with its last dim dropped or 1",
        ),
        (
            lambda: raw_call("xopsaot_activation", descriptor((4, 8)), descriptor((4, 8)), scalars=(6, 0)),
            "act is 6; supported: 0 (relu) to 5 (tanh)",
        ),
        (
            lambda: raw_call("xopsaot_gated_activation", descriptor((4, 8)), descriptor((4, 8)), scalars=(3, 0)),
            "must be even and out must be x's shape with half of it",
        ),
        (
            lambda: raw_call(
                "xopsaot_rotary",
                *[descriptor((2, 8, 3, 64))] + [descriptor((16, 40))] * 2 + [None] * 2 + [descriptor((2, 8, 3, 64))],
                scalars=(0, 0, 0, 0),
            ),  # fmt: skip
            "cos has 40 columns, so rotary_dim is 80, more than x's head_dim 64",
        ),
        (
            lambda: raw_call(
                "xopsaot_rotary_qk",
                descriptor((4,), dtype=7),
                descriptor((4, 2, 64)),
                None,
                descriptor((9, 64)),
                scalars=(1, 0),
            ),  # fmt: skip
            "rotary_qk: positions has dtype int32, expected int64",
        ),
        (
            lambda: raw_call(
                "xopsaot_lrpe_cosine",
                descriptor((1, 4, 2, 8)),
                descriptor((3, 8), dtype=3),
                descriptor((1, 4, 2, 16)),
                scalars=(0, 0),
            ),  # fmt: skip
            "theta has shape (3, 8); it must broadcast to (heads, head_dim) = (2, 8)",
        ),
        (
            lambda: raw_call("xopsaot_softmax", descriptor((4, 8), strides=(8, 2)), descriptor((4, 8))),
            "x must be contiguous in its last dim",
        ),
        (
            lambda: raw_call("xopsaot_softmax", descriptor((1, 2**31 - 65535)), descriptor((1, 2**31 - 65535))),
            "softmax: rows of 2147418113 elements are too long; at most 2147418112 are supported",
        ),
        (
            lambda: raw_call(
                "xopsaot_group_norm",
                descriptor((1, 2, 2**31)),
                None,
                None,
                descriptor((1, 2, 2**31)),
                scalars=(1, 1e-5, None),
            ),  # fmt: skip
            "group_norm: a group holds 4294967296 elements of 2 channels; at most 2147479552 elements and 2147483647 "
            "channels are supported",
        ),
    ],
)
def test_c_layer_rejects_bad_arguments(call, message):
    status, text = call()
    assert status in (_library.INVALID_ARGUMENT, _library.UNSUPPORTED)
    assert message in text


def test_library_has_no_link_dependency_on_cuda():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf not found")
    dynamic = subprocess.run([readelf, "-d", str(_library.LIBRARY_PATH)], capture_output=True, text=True).stdout
    assert "NEEDED" in dynamic and "libcuda" not in dynamic and "libcudart" not in dynamic
    assert xopsaot.info()["library"] == str(_library.LIBRARY_PATH)


PRETEND_GPU = """
import torch
from xopsaot import _arrays, _plans
torch.Tensor.is_cuda = property(lambda self: True)  # CPU tensors pose as cuda:0 tensors
torch.Tensor.get_device = lambda self: 0
framework = _arrays.TorchFramework
framework.empty = lambda self, shape, dtype, device: self.view(self.torch.zeros(shape, dtype=self.dtypes[dtype]))
framework.stream = lambda self, device: 0x77
"""


@needs_sm90
@pytest.mark.skipif(__import__("conftest").cuda_available(), reason="simulates CUDA tensors; test_gpu.py has real ones")
def test_replayed_calls_patch_only_the_data_pointers(fake_driver):
    pytest.importorskip("torch")
    r = scenario(
        fake_driver,
        PRETEND_GPU
        + textwrap.dedent(
            """
        fake.fake_cuda_expect_params(20)
        x = [torch.randn(4, 64, dtype=torch.float16) for _ in range(3)]
        w = torch.randn(64, dtype=torch.float16)
        outs = [xopsaot.rms_norm(x[i], w, 1e-5, residual=x[(i + 1) % 3]) for i in range(3)]
        plans = len(_plans.plans)
        xopsaot.rms_norm(torch.randn(4, 128, dtype=torch.float16)[:, :64], w)  # row-strided: a new signature
        xopsaot.rms_norm(x[0].T.contiguous().T, w)  # needs a contiguous copy: not recorded
        fake.fake_cuda_expect_params(0)  # softmax's kernel takes fewer than row_norm's 20 parameters
        xopsaot.softmax(x[0], 0)  # moves an axis: never recorded
        xopsaot.softmax(x[0], 0)
        emit(launches=launches(), plans=plans, plans_after=len(_plans.plans),
             ptrs=[[t.data_ptr() for t in (x[i], w, x[i], x[(i + 1) % 3], x[i], outs[i][0], outs[i][1])]
                   for i in range(3)])
    """
        ),
    )
    first, second, third = r["launches"][:3]
    assert r["plans"] == 1  # one signature, recorded by the first call and replayed by the others
    for launch, ptrs in zip((first, second, third), r["ptrs"]):
        p = decode(launch["params"], "row_norm_kernel")
        assert p[:7] == ptrs  # X, W, B, R, G, Y, H: this call's tensors (x stands in for the absent B and G)
        assert p[7:20] == decode(first["params"], "row_norm_kernel")[7:20]  # strides, n_cols, eps, flags: the same
        assert launch["stream"] == 0x77 and launch["variant"] == first["variant"]
    assert len({tuple(p[5:7]) for p in r["ptrs"]}) == 3  # every call got new outputs
    assert r["plans_after"] == 2 and len(r["launches"]) == 7


@needs_sm90
@pytest.mark.skipif(__import__("conftest").cuda_available(), reason="simulates CUDA tensors; test_gpu.py has real ones")
def test_replayed_in_place_calls_return_their_arguments(fake_driver):
    """rotary_qk updates q and k in place and returns them: a replay returns the new call's q and k, and k=None
    stays None."""
    pytest.importorskip("torch")
    r = scenario(
        fake_driver,
        PRETEND_GPU
        + textwrap.dedent(
            """
        fake.fake_cuda_expect_params(29)
        cache = torch.randn(64, 64, dtype=torch.float16)
        pos = torch.arange(4)
        qs = [torch.randn(4, 2, 64, dtype=torch.float16) for _ in range(3)]
        ks = [torch.randn(4, 1, 64, dtype=torch.float16) for _ in range(3)]
        same = [all(a is b for a, b in zip(xopsaot.rotary_qk(pos, qs[i], ks[i], cache, validate=False), (qs[i], ks[i])))
                for i in range(3)]
        no_k = [xopsaot.rotary_qk(pos, qs[i], None, cache, validate=False)[1] is None for i in range(2)]
        emit(same=same, no_k=no_k, plans=len(_plans.plans), launches=len(launches()),
             q_ptrs=[l["params"][0] for l in launches()], ptrs=[q.data_ptr() for q in qs])
    """
        ),
    )
    assert r["same"] == [True] * 3 and r["no_k"] == [True] * 2 and r["plans"] == 2 and r["launches"] == 5
    assert r["q_ptrs"][:3] == r["ptrs"]


@needs_sm90
@pytest.mark.skipif(__import__("conftest").cuda_available(), reason="simulates CUDA tensors; test_gpu.py has real ones")
def test_replayed_outputs_copy_a_matching_argument(fake_driver):
    """A replayed call makes an output of an argument's shape and dtype with empty_like of a contiguous argument
    (the cheaper allocation), and any other output from its recorded shape: new tensors every call, each launch
    given the new output's pointer."""
    pytest.importorskip("torch")
    r = scenario(
        fake_driver,
        PRETEND_GPU
        + textwrap.dedent(
            """
        full = [torch.randn(8, 64, dtype=torch.float16) for _ in range(2)]
        row = torch.randn(64, dtype=torch.float16)
        calls = {
            "same": lambda: xopsaot.add(full[0], full[1]),
            "row first": lambda: xopsaot.mul(row, full[1]),  # the output is full[1]'s twin, the second argument
            "compared": lambda: xopsaot.gt(full[0], full[1]),  # a bool out: no twin
            "strided": lambda: xopsaot.add(full[0].T, full[1].T),  # transposed arguments are no twins
        }
        seen = {}
        for name, call in calls.items():
            fake.fake_cuda_expect_params(30 if name == "strided" else 16)  # the kernel's parameters and 2 scratch
            outs = [call() for _ in range(3)]
            plan = list(_plans.plans.values())[-1]
            pointers = [o.data_ptr() for o in outs]
            launched = [l["params"][2] for l in launches()[-3:]]  # OUT
            seen[name] = {"outputs": [list(map(str, o)) for o in plan.outputs],
                          "pointers_new": len(set(pointers)) == 3 and launched == pointers,
                          "shapes": [list(o.shape) for o in outs], "dtypes": [str(o.dtype) for o in outs],
                          "contiguous": all(o.is_contiguous() for o in outs)}
        emit(**seen)
    """
        ),
    )
    assert r["same"]["outputs"] == [["like", "0"]]
    assert r["row first"]["outputs"] == [["like", "1"]]
    assert r["compared"]["outputs"][0][0] == "new" and r["strided"]["outputs"][0][0] == "new"
    for name, case in r.items():
        assert case["pointers_new"] and case["contiguous"], name
        assert case["shapes"] == [[64, 8] if name == "strided" else [8, 64]] * 3, name
        assert case["dtypes"] == ["torch.bool" if name == "compared" else "torch.float16"] * 3, name


@needs_sm90
@pytest.mark.skipif(__import__("conftest").cuda_available(), reason="simulates CUDA tensors; test_gpu.py has real ones")
def test_only_calls_that_read_device_values_are_not_replayed(fake_driver):
    """validate=True copies index tensors to the host to check them, so such a call runs the full path every time.
    A validated call with no index tensor to read (apply_rotary with an int offset, the KV cache without
    cache_seqlens or block_table, cross entropy never) is recorded like any other, and replayed."""
    pytest.importorskip("torch")
    r = scenario(
        fake_driver,
        PRETEND_GPU
        + textwrap.dedent(
            """
        framework.capturing = lambda self, device: False
        x, packed = torch.randn(2, 9, 4, 64, dtype=torch.float16), torch.randn(18, 4, 64, dtype=torch.float16)
        cos = sin = torch.randn(40, 32, dtype=torch.float16)
        cu = torch.tensor([0, 9, 18], dtype=torch.int32)
        q, cache = torch.randn(2, 1, 8, 64, dtype=torch.float16), torch.zeros(2, 64, 2, 64, dtype=torch.float16)
        lengths = torch.tensor([5, 7], dtype=torch.int32)
        logits, target = torch.randn(6, 50, dtype=torch.float16), torch.tensor([1, 2, 3, 4, 5, 6])
        calls = {
            "rotary, int offset": lambda: xopsaot.apply_rotary(x, cos, sin, seqlen_offsets=3),
            "rotary, cu_seqlens": lambda: xopsaot.apply_rotary(packed, cos, sin, cu_seqlens=cu, max_seqlen=9),
            "rotary, cu_seqlens unchecked": lambda: xopsaot.apply_rotary(packed, cos, sin, cu_seqlens=cu,
                                                                         max_seqlen=9, validate=False),
            "kvcache, whole cache": lambda: xopsaot.flash_attn_with_kvcache(q, cache, cache),
            "kvcache, cache_seqlens": lambda: xopsaot.flash_attn_with_kvcache(q, cache, cache, cache_seqlens=lengths),
            "cross_entropy": lambda: xopsaot.cross_entropy(logits, target),
        }
        seen = {}
        for name, call in calls.items():
            _plans.clear()
            fake.fake_cuda_reset()
            for _ in range(3):
                call()
            seen[name] = [len(_plans.plans), len(launches()) // 3]
        emit(**seen)
    """
        ),
    )
    for name, (plans, launches) in r.items():
        assert launches >= 1, name  # every call launched its kernels, replayed or not
        assert plans == (0 if name in ("rotary, cu_seqlens", "kvcache, cache_seqlens", "cross_entropy") else 1), name


@needs_sm90
@pytest.mark.skipif(__import__("conftest").cuda_available(), reason="simulates CUDA tensors; test_gpu.py has real ones")
def test_replays_draw_their_own_seeds(fake_driver):
    """A call with seed=None is recorded, and each replay launches with a fresh seed of its own where the recorded
    call's went (dropout's seed argument, the seed of sample's options); every other parameter stays the
    recorded one. A fixed seed is replayed as it is."""
    pytest.importorskip("torch")
    r = scenario(
        fake_driver,
        PRETEND_GPU
        + textwrap.dedent(
            """
        args = {k["name"]: k["args"] for k in MANIFEST["kernels"]}
        x, logits = torch.randn(4, 1000, dtype=torch.float16), torch.randn(2, 300, dtype=torch.float32)
        calls = {
            "dropout": ("dropout_kernel", lambda seed: xopsaot.dropout(x, 0.25, seed=seed)),
            "sample": ("sample_kernel", lambda seed: xopsaot.sample(logits, 0.8, top_k=20, seed=seed)),
        }
        seen = {}
        for name, (kernel, call) in calls.items():
            for seed in (None, 12345):
                _plans.clear()
                fake.fake_cuda_reset()
                fake.fake_cuda_expect_params(len(args[kernel]))
                for _ in range(4):
                    call(seed)
                seen[f"{name} {seed}"] = dict(plans=len(_plans.plans), kernels=[l["kernel"] for l in launches()],
                                              params=[l["params"] for l in launches()])
        emit(**seen)
    """
        ),
    )
    for name, case in r.items():
        kernel = "dropout_kernel" if name.startswith("dropout") else "sample_kernel"
        assert case["plans"] == 1 and case["kernels"] == [kernel] * 4, name
        (entry,) = [k for k in _library.manifest()["kernels"] if k["name"] == kernel]
        params = [dict(zip([a["name"] for a in entry["args"]], decode(p, kernel))) for p in case["params"]]
        seeds = [p.pop("seed") for p in params]
        for p in params:
            p.pop("Y" if kernel == "dropout_kernel" else "Out")  # each call's new output
        assert all(p == params[0] for p in params), (name, params)
        if name.endswith("None"):
            assert len(set(seeds)) == 4 and all(0 <= s < 2**63 for s in seeds), name
        else:
            assert seeds == [12345] * 4, name
