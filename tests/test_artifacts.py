"""The built artifacts: the manifest lists every promised variant for every arch, each binary is a CUDA ELF for
its arch with the recorded sha256, and the package holds the library, manifest and public header."""

from __future__ import annotations

import hashlib
import itertools
import struct

import pytest

from xopsaot import _library
from xopsaot._ops import attention

MANIFEST = _library.manifest()

# What issues 2, 3 and 4 promise for every arch: op -> kernel, dtypes, and the keys each dtype is compiled with.
PROMISED = {
    "elementwise": (
        "elementwise_kernel",
        ["float16", "bfloat16", "float32", "int32", "int64", "bool"],
        {"OPS": [1], "FIXED_OP": [0]},
    ),
    "norm": (
        "row_norm_kernel",
        ["float16", "bfloat16", "float32"],
        {"HAS_RESIDUAL": [False, True], "HAS_GATE": [False, True]},
    ),
    "dropout": ("dropout_kernel", ["float16", "bfloat16", "float32"], {}),
    "scan": ("scan_kernel", ["float16", "bfloat16", "float32", "int32", "int64", "bool"], {"CHUNKED": [False, True]}),
    "group_norm": ("group_norm_kernel", ["float16", "bfloat16", "float32"], {}),
    "softmax": ("softmax_kernel", ["float16", "bfloat16", "float32"], {"LSE": [False, True]}),
    "rotary": ("rotary_kernel", ["float16", "bfloat16", "float32"], {"INTERLEAVED": [False, True]}),
    "lrpe_cosine": ("lrpe_cosine_kernel", ["float16", "bfloat16", "float32"], {}),
    "matmul": (
        "matmul_kernel",
        ["float16", "bfloat16", "float32"],
        {"B_K_CONTIGUOUS": [False, True], "EPILOGUE": [False, True]},
    ),
    "cross_entropy": ("cross_entropy_kernel", ["float16", "bfloat16", "float32"], {}),
    "sample": ("sample_kernel", ["float16", "bfloat16", "float32"], {}),
    "flash_attn": (
        "attn_fwd",
        ["float16", "bfloat16"],
        {"BLOCK_D": [64, 128, 256], "PAGED": [False, True], "MODS": [False, True]},
    ),
}


def test_full_builds_cover_every_default_arch():
    requested = [a.removesuffix("a") for a in MANIFEST["archs_requested"]]
    if requested != MANIFEST["archs_default"]:
        pytest.skip(f"a narrowed build (XOPSAOT_CUDA_ARCHS): {requested}")
    assert [a.removesuffix("a") for a in MANIFEST["archs"]] == MANIFEST["archs_default"]
    assert MANIFEST["archs_default"] == ["sm_80", "sm_90", "sm_100", "sm_120"]


@pytest.mark.parametrize("op", sorted(PROMISED))
def test_manifest_lists_every_promised_variant(op):
    kernel, dtypes, keys = PROMISED[op]
    for arch in MANIFEST["archs"]:
        have = {
            (v["dtypes"]["T"], tuple(sorted(v["keys"].items())))
            for v in MANIFEST["variants"]
            if v["kernel"] == kernel and v["op"] == op and v["arch"] == arch
        }
        for dtype, values in itertools.product(dtypes, itertools.product(*keys.values())):
            chosen = dict(zip(keys, values))
            if chosen.get("HAS_RESIDUAL") and chosen.get("HAS_GATE"):
                continue  # norm_gate takes no residual: not compiled, on purpose
            assert (dtype, tuple(sorted(zip(keys, values)))) in have, f"{op} {arch} {dtype} {values} missing"


def test_fp8_cache_variants_decode_natively_where_the_target_can():
    """attn_fwd's fp8-cache variants on every arch, decoding e4m3 by conversion instructions from sm_89 on and by
    bit arithmetic before (NATIVE_FP8); 16-bit caches never take that path."""
    variants = [v for v in MANIFEST["variants"] if v["kernel"] == "attn_fwd"]
    for arch in MANIFEST["archs"]:
        fp8 = [v for v in variants if v["arch"] == arch and v["dtypes"]["KV"] == "float8_e4m3fn"]
        assert {v["dtypes"]["T"] for v in fp8} == {"float16", "bfloat16"}, arch
        native = int(arch.removeprefix("sm_").rstrip("a")) >= 89
        assert {v["constexprs"]["NATIVE_FP8"] for v in fp8} == {native}, arch
    assert not any(v["constexprs"]["NATIVE_FP8"] for v in variants if v["dtypes"]["KV"] != "float8_e4m3fn")


def test_elementwise_kernels_cover_every_dtype_pair():
    """Both elementwise kernels, per arch: each input dtype with its own output and with bool (the comparisons);
    the flat kernel's binary math variants (OPS 2) for every non-bool input with its own output, its unary math
    variants (OPS 3) and division's and exp's own (FIXED_OP) for floating-point ones."""
    types = ["float16", "bfloat16", "float32", "int32", "int64", "bool"]
    floats = types[:3]
    pairs = {(t, t) for t in types} | {(t, "bool") for t in types}
    wanted = {
        "elementwise_kernel": {p + (1, 0) for p in pairs}
        | {(t, t, 2, 0) for t in types if t != "bool"}
        | {(t, t, ops, fixed) for t in floats for ops, fixed in ((3, 0), (2, 2), (3, 18))},
        "elementwise_strided_kernel": {p + (None, None) for p in pairs},
    }
    for kernel, want in wanted.items():
        for arch in MANIFEST["archs"]:
            have = {(v["dtypes"]["T"], v["dtypes"]["O"], v["keys"].get("OPS"), v["keys"].get("FIXED_OP"))
                    for v in MANIFEST["variants"] if v["kernel"] == kernel and v["arch"] == arch}  # fmt: skip
            assert have == want, f"{kernel} {arch}: {sorted(want ^ have, key=str)}"


def test_every_kernel_waits_for_its_predecessor_from_sm90_on():
    """Every kernel declares aot.spec.PDL_PARAM, so its sm_90+ variants start with the wait and are launched with
    programmatic dependent launch; older archs have neither."""
    for v in MANIFEST["variants"]:
        assert v["pdl"] == (v["backend"] == "cuda" and int(v["arch"][3:].rstrip("a")) >= 90), v["label"]


def test_unaligned_rows_have_the_looping_fallback():
    """Row kernels compile unhinted variants only for the looping config (it takes any length)."""
    for kernel in ("row_norm_kernel", "group_norm_kernel", "softmax_kernel"):
        for arch in MANIFEST["archs"]:
            fallbacks = [v for v in MANIFEST["variants"]
                         if v["kernel"] == kernel and v["arch"] == arch and not v["aligned_args"]]  # fmt: skip
            assert fallbacks and all(v["constexprs"].get("LOOP") and v["when"] == "" for v in fallbacks), kernel


def test_long_rows_have_a_looping_variant():
    for kernel in ("row_norm_kernel", "group_norm_kernel", "softmax_kernel"):
        for arch in MANIFEST["archs"]:
            assert any(
                v["constexprs"].get("LOOP") and v["when"] == ""
                for v in MANIFEST["variants"]
                if v["kernel"] == kernel and v["arch"] == arch
            ), f"{kernel} {arch} has no variant for rows of any length"


def test_manifest_records_what_a_variant_needs():
    for v in MANIFEST["variants"]:
        for field in (
            "op",
            "kernel",
            "arch",
            "dtypes",
            "constexprs",
            "num_warps",
            "num_stages",
            "cluster",
            "shared",
            "symbol",
            "hidden_args",
            "triton_version",
            "sha256",
            "assembler",
        ):
            assert field in v, f"variant {v['index']} lacks {field}"
        assert [h["name"] for h in v["hidden_args"]] == ["global_scratch", "profile_scratch"]
    assert MANIFEST["triton_version"] == "3.9.0"
    assert _library.library().xopsaot_variant_count() == len(MANIFEST["variants"])


def test_exports_are_the_compiled_shapes():
    """The integers kernels_src exports to the op layer's C (aot.spec.Kernel.exports, in the generated header) are
    those the kernels' variants compile: the limits and block sizes C sizes its launches by."""
    exports = {k["name"]: k["exports"] for k in MANIFEST["kernels"]}

    def compiled(kernel, name, **where):
        found = {v["constexprs"][name] for v in MANIFEST["variants"]
                 if v["kernel"] == kernel and all(v["constexprs"].get(k) == x for k, x in where.items())}  # fmt: skip
        assert found, (kernel, name, where)
        return found

    # Python checks num_splits against its own copy, on the NumPy path too (where no library may be loaded)
    assert compiled("attn_combine", "MAX_SPLITS") == {exports["attn_combine"]["MAX_SPLITS"]} == {attention.MAX_SPLITS}
    assert compiled("elementwise_kernel", "BLOCK") == {exports["elementwise_kernel"]["BLOCK"]}
    scan = exports["scan_kernel"]
    assert compiled("scan_kernel", "BLOCK_I") - {1} == {scan["LANES"], scan["CUMSUM_LANES"]}
    group = exports["group_norm_kernel"]
    assert max(compiled("group_norm_kernel", "BLOCK_N", LOOP=False)) == group["WHOLE_BLOCK"]
    assert group["LOOP_BLOCK"] in compiled("group_norm_kernel", "BLOCK_N", LOOP=True)
    assert compiled("group_norm_stats_kernel", "BLOCK_N") == {group["LOOP_BLOCK"]}
    # the rows held whole in registers, past which C tries the Hopper kernels that hold rows in shared memory
    assert max(compiled("softmax_kernel", "BLOCK_N", LSE=True, LOOP=False)) == exports["softmax_kernel"]["REGISTER_ROW"]
    assert max(compiled("row_norm_kernel", "BLOCK_N", LOOP=False)) == exports["row_norm_kernel"]["REGISTER_ROW"]


def test_only_cluster_kernels_launch_in_clusters():
    """A variant launched in thread-block clusters (aot.spec.Config.cluster) is a Hopper *_cluster_kernel one, or
    row_norm_held_kernel's with a CLUSTER constexpr, whose CLUSTER programs per row make one cluster; every other
    variant launches plain programs."""
    clustered = [v for v in MANIFEST["variants"] if v["cluster"] != 1]
    for v in MANIFEST["variants"]:
        if v["kernel"].endswith("_cluster_kernel") or "CLUSTER" in v["constexprs"]:
            assert v["cluster"] == v["constexprs"]["CLUSTER"] in (2, 4, 8) and v["arch"] == "sm_90a", v["label"]
            assert v["kernel"] != "row_norm_held_kernel" or v["cluster"] in (2, 4), v["label"]
        else:
            assert v["cluster"] == 1, v["label"]
    assert clustered or not any(a.startswith("sm_90") for a in MANIFEST["archs"])


def test_host_descriptor_variants_record_their_encoding():
    """The Hopper prefill kernels' host descriptors: attn_fwd_ws_dense's three 3-D ones (boxes of one batch
    element), attn_fwd_ws's 2-D query and key ones; rows of at most 128 bytes (the 128-byte swizzle's limit: wider
    heads take two copies) of 16-bit elements. matmul_ws's four 2-D ones and attn_decode_tma's two below (16-bit or
    fp8 caches). No other kernel records any."""
    kernels = {"attn_fwd_ws_dense": ["desc_q", "desc_k", "desc_v"], "attn_fwd_ws": ["desc_q", "desc_k"]}
    matmul = [v for v in MANIFEST["variants"] if v["kernel"] == "matmul_ws"]
    decode = [v for v in MANIFEST["variants"] if v["kernel"] == "attn_decode_tma"]
    others = {*kernels, "matmul_ws", "attn_decode_tma"}
    assert all(not v["tma_descriptors"] for v in MANIFEST["variants"] if v["kernel"] not in others)
    assert bool(matmul) == bool(decode) == ("sm_90a" in MANIFEST["archs"])
    for v in decode:  # the caches' rows: runs of 16 keys, 64 columns of one head per copy (an fp8 cache's bytes)
        assert [d["arg"] for d in v["tma_descriptors"]] == ["desc_k", "desc_v"]
        assert [d["block_size"] for d in v["tma_descriptors"]] == [[16, 64], [16, 64]]
        size, swizzle = (1, 2) if v["dtypes"]["KV"] == "float8_e4m3fn" else (2, 3)  # 64-byte rows: 64-byte swizzle
        assert all(d["elem_size"] == size and d["swizzle"] == swizzle for d in v["tma_descriptors"])
    assert {v["dtypes"]["KV"] for v in decode} == ({"float16", "bfloat16", "float8_e4m3fn"} if decode else set())
    for v in matmul:  # a, b (a weight's rows, or b's), the output and the residual; 128-byte rows, tiles in copies
        c = v["constexprs"]
        b_box = [c["BLOCK_N"], c["BLOCK_K"]] if v["keys"]["B_K_CONTIGUOUS"] else [c["BLOCK_K"], 64]
        assert [d["arg"] for d in v["tma_descriptors"]] == ["desc_a", "desc_b", "desc_c", "desc_r"]
        assert [d["block_size"] for d in v["tma_descriptors"]] == [[64, c["BLOCK_K"]], b_box, [64, 64], [64, 64]]
        assert all(d["elem_size"] == 2 and d["swizzle"] == 3 for d in v["tma_descriptors"])
    hopper = [v for v in MANIFEST["variants"] if v["kernel"] in kernels]
    assert bool(hopper) == ("sm_90a" in MANIFEST["archs"])
    for v in hopper:
        block_n, dim = v["constexprs"]["BLOCK_N"], min(v["keys"]["BLOCK_D"], 64)
        lead = [1] if v["kernel"] == "attn_fwd_ws_dense" else []
        assert [d["arg"] for d in v["tma_descriptors"]] == kernels[v["kernel"]]
        boxes = [d["block_size"] for d in v["tma_descriptors"]]
        assert boxes == [lead + [64, dim]] + [lead + [block_n, dim]] * (len(boxes) - 1)
        assert all(d["elem_size"] == 2 and d["swizzle"] == 3 for d in v["tma_descriptors"])


def elf_arch(binary: bytes) -> int:
    """The SM version of a CUDA ELF: ELF ABI v7 keeps it in e_flags' low byte, v8 in the next byte."""
    assert binary[:4] == b"\x7fELF" and binary[4] == 2, "not a 64-bit ELF"
    (machine,) = struct.unpack_from("<H", binary, 18)
    assert machine == 190, f"e_machine {machine} is not EM_CUDA"
    (flags,) = struct.unpack_from("<I", binary, 48)
    return (flags >> 8) & 0xFF if binary[8] >= 8 else flags & 0xFF


def test_every_binary_is_a_cuda_elf_for_its_arch():
    for v in MANIFEST["variants"]:
        binary = _library.variant_binary(v["index"])
        assert len(binary) == v["size"] and hashlib.sha256(binary).hexdigest() == v["sha256"], v["index"]
        assert f"sm_{elf_arch(binary)}" == v["arch"].removesuffix("a"), v["index"]


def test_sm80_and_sm90_binaries_load_on_cuda_12_drivers():
    """sm_80 and sm_90 are assembled by ptxas 12.x (ELF ABI v7): any CUDA 12 driver loads them."""
    for v in MANIFEST["variants"]:
        if v["arch"] in ("sm_80", "sm_90a"):
            assert v["assembler"].startswith("ptxas 12."), v["assembler"]
            assert _library.variant_binary(v["index"])[8] == 7


def test_package_contents():
    assert _library.LIBRARY_PATH.exists() and _library.MANIFEST_PATH.exists()
    header = _library.HEADER_PATH.read_text()
    assert "xopsaot_flash_attn" in header and "XOPSAOT_ABI_VERSION" in header
    assert _library.library().xopsaot_abi_version() == 6


def test_autotune_alternates_only_on_the_tuned_target():
    """Alternates are configs measured close to the table's on the tuning GPU; sm_90 is the only tuned target
    (kernels_src/attention_tuning.json), so the other targets compile none (build time, not a guess)."""
    with_alternates = {v["arch"] for v in MANIFEST["variants"] if v["alternate_of"] is not None}
    assert with_alternates <= {"sm_90a"}
