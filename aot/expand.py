"""Expand the declared signature grids into the list of variants to compile, in selection order."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .spec import (
    ALIGNED_AND_FALLBACK,
    ALIGNED_ONLY,
    PDL_PARAM,
    TRITON_TYPES,
    Config,
    Kernel,
    Target,
    has_pdl,
    identifiers,
)

PREDICATE_BUILTINS = {"cdiv", "min", "max"}  # defined in the generated C


@dataclass(frozen=True)
class Variant:
    """One compiled binary: a kernel at one target, key values, config and alignment."""

    kernel: Kernel
    source: Path  # the kernels_src file the kernel lives in
    target: Target
    dtypes: tuple[tuple[str, str], ...]  # dtype axis -> dtype (spec.DTYPES)
    keys: tuple[tuple[str, Any], ...]  # constexpr axis -> value
    config: Config
    aligned: bool

    @property
    def constexprs(self) -> dict[str, Any]:
        return {**dict(self.keys), **dict(self.config.constexprs)}

    @property
    def pdl(self) -> bool:
        """The kernel waits for its predecessor (spec.PDL_PARAM) and the target can launch it early."""
        return self.kernel.declares_pdl and has_pdl(self.target)

    @property
    def compile_constexprs(self) -> dict[str, Any]:
        """constexprs plus the target's (PDL_PARAM where the kernel declares it), and the defaults of constexpr
        parameters that neither gives (a tag or switch that only some configs set)."""
        extra = {PDL_PARAM: self.pdl} if self.kernel.declares_pdl else {}
        params = getattr(self.kernel.fn, "params", ())
        defaults = {p.name: p.default for p in params if p.is_constexpr and p.has_default}
        return {**defaults, **self.constexprs, **extra}

    def signature(self) -> dict[str, str]:
        """The ASTSource signature: every parameter of the Triton function in order."""
        dtypes = dict(self.dtypes)
        types = {}
        for a in self.kernel.args:
            dtype = dtypes.get(a.base_type, a.base_type)
            triton_type = TRITON_TYPES.get(dtype, dtype)
            if a.is_descriptor:
                types[a.name] = descriptor_type(triton_type, [self.constexprs.get(b, b) for b in a.block])
            else:
                types[a.name] = ("*" if a.is_pointer else "") + triton_type
        constexprs = self.compile_constexprs
        sig = {}
        for name in self.kernel.fn.arg_names:
            if name in types:
                sig[name] = types[name]
            elif name in constexprs:
                sig[name] = "constexpr"
            else:
                raise ValueError(f"{self.kernel.name}: parameter {name} is neither an argument nor a constexpr")
        return sig

    def attrs(self) -> dict[tuple[int, ...], list]:
        if not self.aligned:
            return {}
        names = list(self.kernel.fn.arg_names)
        return {(names.index(a.name),): [["tt.divisibility", a.divisor]] for a in self.kernel.args if a.aligned}

    def aligned_args(self) -> list[str]:
        return [a.name for a in self.kernel.args if a.aligned] if self.aligned else []

    def cluster_suffix(self) -> str:
        return f"c{self.config.cluster}" if self.config.cluster > 1 else ""

    def label(self) -> str:
        parts = [self.kernel.name, self.target.name]
        parts += [v for _, v in self.dtypes]
        parts += [f"{k}={v}" for k, v in self.keys]
        parts += [f"{k}={v}" for k, v in self.config.constexprs.items()]
        parts += [f"w{self.config.num_warps}s{self.config.num_stages}" + self.cluster_suffix()]
        if self.aligned:
            parts.append("aligned")
        return "/".join(str(p) for p in parts)


def descriptor_type(dtype: str, block: list[int]) -> str:
    """The signature type of a host TMA descriptor argument: its box and the shared layout Triton picks for it."""
    import triton.language as tl
    from triton.experimental.gluon.language import NVMMASharedLayout

    layout = NVMMASharedLayout.get_default_for(block, tl.str_to_ty(dtype, None))
    return f"tensordesc<{dtype}[{','.join(map(str, block))}],{layout!r}>"


def load_kernels(directory: Path) -> list[tuple[Path, Kernel]]:
    """Import every kernels_src file and collect its KERNELS list."""
    found = []
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue
        module = import_file(path)
        for kernel in getattr(module, "KERNELS", ()):
            kernel.validate()
            found.append((path, kernel))
    names = [k.name for _, k in found]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise ValueError(f"kernel names must be unique across kernels_src: {sorted(duplicated)}")
    return found


def import_file(path: Path):
    name = f"kernels_src.{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def expand(kernels: list[tuple[Path, Kernel]], targets: list[Target]) -> list[Variant]:
    variants = []
    for source, kernel in kernels:
        first = len(variants)
        dtype_axes, const_axes = kernel.dtype_axes(), kernel.constexpr_axes()
        has_hints = any(a.aligned for a in kernel.args)
        alignments = [True] if kernel.aligned == ALIGNED_ONLY else [True, False]
        if not has_hints:
            alignments = [False]
        elif kernel.aligned not in (ALIGNED_ONLY, ALIGNED_AND_FALLBACK):
            raise ValueError(f"{kernel.name}: aligned must be 'only' or 'both'")
        for target in targets:
            if not kernel.targets(target):
                continue
            if any(a.is_descriptor for a in kernel.args) and not (target.backend == "cuda" and target.arch >= 90):
                raise ValueError(f"{kernel.name}: host TMA descriptors need CUDA sm_90 or later, not {target}")
            axes = dtype_axes + const_axes
            for values in itertools.product(*(kernel.keys[a] for a in axes)):
                key_values = dict(zip(axes, values))
                if not kernel.combos(key_values):
                    continue
                dtypes = tuple((a, key_values[a]) for a in dtype_axes)
                keys = tuple((a, key_values[a]) for a in const_axes)
                configs = kernel.configs_for(target, key_values)
                check_alternates(kernel, configs)
                check_fallbacks(kernel, configs, alignments)
                check_clusters(kernel, configs, target)
                for config in configs:
                    for aligned in alignments:
                        if config.hinted if aligned else config.fallback:
                            variants.append(Variant(kernel, source, target, dtypes, keys, config, aligned))
        if len(variants) > first:  # its config constexprs are known only from its variants
            check_expressions(kernel, variants[first:])
    return variants


def check_clusters(kernel: Kernel, configs: list[Config], target: Target) -> None:
    """Thread-block clusters exist on CUDA sm_90 and later, of up to 8 programs (portable sizes)."""
    for config in configs:
        if config.cluster != 1 and not (target.backend == "cuda" and int(target.arch) >= 90):
            raise ValueError(f"{kernel.name}: clusters need CUDA sm_90 or later, not {target.name}")
        if not 1 <= config.cluster <= 8:
            raise ValueError(f"{kernel.name}: a cluster holds 1 to 8 programs, not {config.cluster}")


def check_fallbacks(kernel: Kernel, configs: list[Config], alignments: list[bool]) -> None:
    """Where unhinted variants are compiled, the last config must have one and no predicate: arguments that miss
    the hints always find a variant."""
    if False in alignments and configs and (not configs[-1].fallback or configs[-1].when):
        raise ValueError(f"{kernel.name}: the last config needs a fallback variant and no predicate")
    if any(not c.hinted and (False not in alignments or not c.fallback) for c in configs):
        raise ValueError(f"{kernel.name}: a config with hinted=False must compile the unhinted variant")


def check_alternates(kernel: Kernel, configs: list[Config]) -> None:
    """An alternate config competes with the closest preceding non-alternate one and shares its predicate."""
    primary = None
    for config in configs:
        if not config.alternate:
            primary = config
        elif primary is None or config.when != primary.when:
            raise ValueError(f"{kernel.name}: alternate config {config} needs a preceding config with its predicate")


def int_constexprs(kernel: Kernel, variants: list[Variant]) -> list[str]:
    """Integer constexpr names the generated C binds for grid and predicate expressions, in a fixed order."""
    names = list(kernel.constexpr_axes())
    for v in variants:
        for k, value in v.config.constexprs.items():
            if k not in names and isinstance(value, (int, bool)):
                names.append(k)
    return names


def check_expressions(kernel: Kernel, variants: list[Variant]) -> None:
    """Grid expressions and predicates may name the integer arguments, the integer constexprs, cdiv/min/max and
    NUM_SMS (the device's multiprocessor count). Checked before anything compiles."""
    names = kernel.int_names() | set(int_constexprs(kernel, variants)) | PREDICATE_BUILTINS | {"NUM_SMS"}
    checks = [("grid expression", e, names) for e in kernel.grid]
    checks += [("predicate", w, names) for w in sorted({v.config.when for v in variants if v.config.when})]
    for what, expr, allowed in checks:
        unknown = identifiers(str(expr)) - allowed
        if unknown:
            raise ValueError(f"{kernel.name}: {what} {expr!r} names unknown {sorted(unknown)}")
