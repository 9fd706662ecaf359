"""The vocabulary a kernels_src file uses to declare the signature grid of its kernels.

A `Kernel` names a Triton function, its runtime arguments, the axes the runtime selects on (dtypes and
constexpr values), the configs compiled per target, and its launch grid as C expressions. The generator
expands the grid into variants; the runtime selects among them from generated tables. Nothing here knows
about any particular op.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Union

# Triton scalar types an argument may have; "*T" / "T" name a dtype axis instead.
SCALAR_TYPES = ("i32", "i64", "fp32")
DTYPES = ("fp16", "bf16", "fp32", "e4m3", "i32", "i64", "bool")
# The Triton type a dtype axis value compiles as. fp8 e4m3 (OCP, torch.float8_e4m3fn) travels as raw bytes and
# kernels decode it themselves: every target then reads the same format (AMD's native fp8 is the fnuz variant,
# and sm_80 has no fp8 conversions).
TRITON_TYPES = {"e4m3": "u8", "bool": "i1"}  # Triton stores i1 as one byte, as torch and NumPy store bool


@dataclass(frozen=True)
class Target:
    """One compilation target: a backend and an architecture (`cuda:80`, `cuda:90`, later `hip:gfx942`)."""

    backend: str
    arch: Union[int, str]

    @classmethod
    def parse(cls, text: str) -> Target:
        backend, _, arch = text.partition(":")
        if backend not in ("cuda", "hip") or not arch:
            raise ValueError(f"target {text!r}: expected 'cuda:<sm>' or 'hip:<gfx>'")
        return cls(backend, int(arch) if backend == "cuda" else arch)

    @property
    def name(self) -> str:
        return f"sm_{self.arch}" if self.backend == "cuda" else str(self.arch)

    def __str__(self) -> str:
        return f"{self.backend}:{self.arch}"


@dataclass(frozen=True)
class Arg:
    """A runtime argument. `type` is a Triton type ("*fp32", "i64") or refers to a dtype axis ("*T").

    `aligned` says the argument may be compiled with a divisibility hint: the pointer is 16-byte aligned, the
    integer a multiple of `divisor` (16 unless said; 8 elements are 16 bytes of a 2-byte dtype). The runtime
    checks the hint before choosing such a variant.
    """

    name: str
    type: str
    aligned: bool = False
    divisor: int = 16
    block: tuple[Union[int, str], ...] = ()  # a descriptor's box: sizes or constexpr names

    @property
    def is_pointer(self) -> bool:
        return self.type.startswith("*")

    @property
    def is_descriptor(self) -> bool:
        return self.type.startswith(DESCRIPTOR)

    @property
    def base_type(self) -> str:
        """The scalar type or dtype axis, without the pointer or descriptor mark."""
        return self.type[len(DESCRIPTOR) :] if self.is_descriptor else self.type.lstrip("*")


DESCRIPTOR = "desc:"  # the type prefix of a host TMA descriptor argument (tensor_desc)
MAX_DESCRIPTORS = 4  # per kernel: csrc/runtime.h's XO_MAX_TMA_ARGS


def ptr(name: str, dtype: str, aligned: bool = True) -> Arg:
    return Arg(name, "*" + dtype, aligned)


def i32(name: str, aligned: bool = False, divisor: int = 16) -> Arg:
    return Arg(name, "i32", aligned, divisor)


def i64(name: str, aligned: bool = False, divisor: int = 16) -> Arg:
    return Arg(name, "i64", aligned, divisor)


def f32(name: str) -> Arg:
    return Arg(name, "fp32")


def tensor_desc(name: str, dtype: str, block: Sequence[Union[int, str]]) -> Arg:
    """A TMA descriptor the launcher makes on the host (cuTensorMapEncodeTiled; CUDA sm_90 and later) and passes as
    a kernel parameter, where a device-made one would cost each program a round trip to memory. The op fills an
    xo_tma_desc (the tensor's base, shape and strides in elements, the last stride 1); `block` is the box each load
    moves (sizes or constexpr names), whose shared layout Triton picks (NVMMASharedLayout.get_default_for)."""
    return Arg(name, DESCRIPTOR + dtype, block=tuple(block))


@dataclass(frozen=True)
class Config:
    """One compiled config: constexpr values, warps, stages, and an optional C predicate `when` over the
    runtime integer arguments, the constexprs and NUM_SMS (the device's multiprocessor count) that must hold for the
    runtime to pick it (first match wins).

    `fallback=False` compiles no unhinted variant of the config (kernels with ALIGNED_AND_FALLBACK): arguments that
    miss the hints go to a later config that has one, which must accept any arguments (it trims the build where
    unaligned arguments are rare and one general config serves them). `hinted=False` is the converse, for a last
    config that only serves what misses the hints (the earlier configs' predicates leave it no hinted arguments).

    `alternate` configs are compiled for XOPSAOT_AUTOTUNE only: each one competes with the closest preceding
    non-alternate config of the same signature (its bucket, whose predicate it shares) when the runtime times
    the candidates at first use. Only kernels whose launches can be repeated (no output aliases an input)
    may declare them.

    `maxnreg` caps the registers per thread (ptxas's maxnreg): warp-specialized Gluon kernels need it, since the
    registers their partitions are given (`gl.warp_specialize`) are shares of it.

    `cluster` launches the variant in thread-block clusters of that many programs along grid x (CUDA sm_90 and
    later), which the hardware runs together, so they may wait for one another (a cluster barrier). Each program of
    the grid expression then runs as `cluster` programs: program_id(0) counts them, grid x times `cluster`."""

    constexprs: Mapping[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    when: str = ""
    alternate: bool = False
    fallback: bool = True
    hinted: bool = True
    maxnreg: int | None = None
    cluster: int = 1


ConfigSource = Union[Sequence[Config], Callable[[Target, Mapping[str, Any]], Sequence[Config]]]

# Programmatic dependent launch: a kernel with a constexpr parameter of this name (default False) waits for the
# previous kernel in its stream before its first memory access when it is true (triton.language.extra.cuda.gdc_wait).
# The generator sets it on targets that have the feature and compiles those variants with launch_pdl, so the runtime
# lets their blocks start while the previous kernel finishes.
PDL_PARAM = "PDL"


def has_pdl(target: Target) -> bool:
    """Programmatic dependent launch (griddepcontrol): CUDA sm_90 and later."""
    return target.backend == "cuda" and int(target.arch) >= 90


def is_hopper(target: Target) -> bool:
    """CUDA sm_90 alone: a `targets` predicate for kernels written for Hopper (Gluon's TMA, wgmma, shared memory
    sizes) and measured there only."""
    return target.backend == "cuda" and target.arch == 90


ALIGNED_ONLY = "only"  # compile only the hinted variant; the op layer guarantees the hints
ALIGNED_AND_FALLBACK = "both"  # hinted variant first, unhinted fallback for anything else


@dataclass(frozen=True)
class Kernel:
    """A Triton kernel and the grid of signatures compiled for it.

    fn:      the @triton.jit function.
    op:      the public op it serves (recorded in the manifest).
    args:    runtime arguments in the kernel's order; constexpr parameters are not listed here.
    keys:    selection axes, each with the values compiled. A key named in an argument type ("*T") is a dtype
             axis (values from DTYPES); any other key is a constexpr passed to the kernel.
    grid:    three C expressions over the integer arguments, the grid arguments, the constexprs and NUM_SMS;
             `cdiv`, `min` and `max` are available. Evaluated in 64-bit.
    configs: a list of Config, or a function (target, key values) -> list of Config.
    aligned: ALIGNED_AND_FALLBACK or ALIGNED_ONLY (see above); irrelevant when no argument is `aligned`.
    targets: a predicate on Target to leave out targets the kernel cannot serve (default: all).
    grid_args: integer values the op passes for the grid and predicates only (not kernel parameters).
    combos:  a predicate on the key values ({axis: value}) to compile only some combinations of the axes.
    exports: integers of the kernel's shape that the op layer sizes its launches by (a reduction's width, a block
             the op's arithmetic must stay below), emitted in xk_kernels.h as XK_<KERNEL>_<NAME>: one source for
             a number both sides use.
    """

    fn: Any
    op: str
    args: Sequence[Arg]
    keys: Mapping[str, Sequence[Any]]
    grid: Sequence[str]
    configs: ConfigSource
    aligned: str = ALIGNED_AND_FALLBACK
    targets: Callable[[Target], bool] = lambda target: True
    grid_args: Sequence[Arg] = ()
    combos: Callable[[Mapping[str, Any]], bool] = lambda values: True
    exports: Mapping[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.fn.__name__

    @property
    def declares_pdl(self) -> bool:
        """The kernel waits for its predecessor when its PDL_PARAM constexpr is true."""
        return PDL_PARAM in getattr(self.fn, "arg_names", ())

    def int_names(self) -> set[str]:
        """Integer values grid and predicate expressions may use."""
        return {a.name for a in list(self.args) + list(self.grid_args) if a.type in ("i32", "i64")}

    def dtype_axes(self) -> list[str]:
        used = {a.base_type for a in self.args}
        return [k for k in self.keys if k in used]

    def constexpr_axes(self) -> list[str]:
        return [k for k in self.keys if k not in self.dtype_axes()]

    def configs_for(self, target: Target, key_values: Mapping[str, Any]) -> list[Config]:
        source = self.configs
        return list(source(target, key_values) if callable(source) else source)

    def validate(self) -> None:
        if len(self.grid) != 3:
            raise ValueError(f"{self.name}: grid needs three expressions")
        names = [a.name for a in self.args] + [a.name for a in self.grid_args]
        if any(a.type not in ("i32", "i64") for a in self.grid_args):
            raise ValueError(f"{self.name}: grid arguments must be integers")
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate argument names")
        jit_names = list(getattr(self.fn, "arg_names", names))
        for axis in self.dtype_axes():
            bad = [v for v in self.keys[axis] if v not in DTYPES]
            if bad:
                raise ValueError(f"{self.name}: dtype axis {axis} has unknown dtypes {bad}")
        if sum(a.is_descriptor for a in self.args) > MAX_DESCRIPTORS:
            raise ValueError(f"{self.name}: at most {MAX_DESCRIPTORS} descriptor arguments (XO_MAX_TMA_ARGS)")
        for a in self.args:
            base = a.base_type
            if a.is_descriptor and (base not in self.keys or not 1 <= len(a.block) <= 5 or a.aligned):
                raise ValueError(f"{self.name}: descriptor {a.name} needs a dtype axis, a block of rank 1 to 5, "
                                 "and no hint")  # fmt: skip
            if base not in SCALAR_TYPES + DTYPES and base not in self.keys:
                raise ValueError(f"{self.name}: argument {a.name} has unknown type {a.type}")
            if a.name not in jit_names:
                raise ValueError(f"{self.name}: {a.name} is not a parameter of the kernel")
            if a.divisor not in (2, 4, 8, 16) or (a.is_pointer and a.divisor != 16):
                raise ValueError(f"{self.name}: {a.name}: divisor must be 2, 4, 8 or 16 (16 for pointers)")
        for axis in self.constexpr_axes():
            if axis not in jit_names:
                raise ValueError(f"{self.name}: key {axis} is not a parameter of the kernel")
        for name, value in self.exports.items():
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or type(value) is not int:
                raise ValueError(f"{self.name}: export {name}={value!r} needs an upper-case name and an int value")


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifiers(expr: str) -> set[str]:
    """Names an expression refers to (used to check grid and predicate expressions)."""
    return set(_IDENT.findall(expr))
