"""The CPU target: C++17 kernels and a Python package, compiled with g++/clang++.

``emit`` prints the sources (dialect, parts, batch path, CPython binding); this module is the
:class:`~rbdgen.targets.base.Target`: its options, how lanes are chosen for this machine, and
how sources are compiled (:func:`rbdgen.toolchain.compiler.build_library`, g++ flags per source)
and loaded (:class:`rbdgen.kernels.loaded.CompiledKernels`).
"""
from __future__ import annotations

import warnings

import numpy as np

from ...codegen.sources import Sources, check_dtype, kernel_entry
from ...errors import RbdgenError
from ...kernels.loaded import CompiledKernels, kernel_specs
from ...toolchain.compiler import build_library, cxx_flags, python_include, resolve_march, vector_bytes
from ..base import CXX, OPT, Option, Target, check_opt, register
from .emit import (CPU, DEFAULT_OPT, LARGE_OPT, LARGE_STATEMENTS, NO_SLP, generate_cpu, kernel_lanes,
                   resolve_auto_lanes)

__all__ = ["CPU", "CpuTarget", "default_lanes", "generate_cpu", "kernel_lanes", "resolve_auto_lanes"]


def default_lanes(dtype: str, march: str | None, cxx: str | None = None):
    """States per SIMD vector in the batch path, for ``march`` as
    :func:`~rbdgen.toolchain.compiler.resolve_march` resolves it: one 16-byte register on baseline
    x86-64 (SSE2; wider GCC vectors there are lowered to slow generic code: measured 70× slower
    on M⁻¹), one 32-byte register where there is AVX. Where there is AVX-512, ``(32-byte lanes,
    64-byte lanes)`` for doubles: each kernel takes one or the other (:func:`kernel_lanes`)."""
    size = 8 if dtype == "float64" else 4
    have = vector_bytes(resolve_march(march, cxx), cxx)
    base = min(have, 32) // size
    return (base, have // size) if have > 32 and dtype == "float64" else base


def _check_lanes(value):
    """lanes: 2, 4, 8 or 16, or (narrow, wide) of those (rbdgen.build's choice per kernel)."""
    ok = (2, 4, 8, 16)
    vals = value if isinstance(value, tuple) and len(value) == 2 else (value,)
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) not in ok for v in vals):
        raise RbdgenError(f"lanes must be one of 2, 4, 8, 16 (states per SIMD vector), got {value!r}")
    return tuple(int(v) for v in vals) if isinstance(value, tuple) else int(value)


class CpuTarget(Target):
    name = "cpu"
    help = "C++17 and a Python package (g++/clang++; SIMD across states, OpenMP across blocks)"
    compiler = "a C++ compiler"
    returns = "rbdgen.kernels.loaded.CompiledKernels"
    options = (
        OPT,
        Option("march", "--march", "cpu: passed as -march=… (default: native, this machine, or $RBDGEN_MARCH; "
               "'portable' for any x86-64)", ("compile",),
               {"metavar": "ARCH"}),
        CXX,
        Option("simd", "", "cpu: vectorised batch path (default True; False halves compile time)", ("generate",)),
        Option("lanes", "--lanes", "cpu: states per SIMD vector in the batch path, 2, 4, 8 or 16, fixed in the "
               "sources (default: one register of the instruction set the sources are compiled for, with AVX-512 "
               "8 doubles for the kernels whose arithmetic pays for them)",
               ("generate",), {"type": int, "metavar": "N"}, check=_check_lanes),
    )

    def generate(self, model, kernels, *, dtypes, name, fold=True, progress=None, simd=True, lanes=None):
        # lanes: one number for every kernel, or (narrow, wide) for each kernel to take one
        # (kernel_lanes; rbdgen.build passes that where there is AVX-512); None: "auto"
        lane_map = None if lanes is None else {d: _check_lanes(lanes) for d in dtypes}
        gen = generate_cpu(model, dtypes=dtypes, kernels=kernels, fold=fold, name=name, progress=progress,
                           simd=simd, python=python_include() is not None, lanes=lane_map)
        info = {
            "header": gen.header,
            # included by the kernel sources only (C++: the sine/cosine shared by every kernel)
            "private_headers": [gen.prefix + "_sincos.hpp"],
            "sources": {d: list(gen.sources[d]) for d in dtypes},
            # compiled with LARGE_OPT unless an opt is given (cpu.LARGE_STATEMENTS says why)
            "large_sources": {d: list(gen.large[d]) for d in dtypes},
            # compiled with SLP vectorisation (NO_SLP says why)
            "looped_sources": {d: list(gen.looped[d]) for d in dtypes},
            "lanes": {d: gen.lanes[d] for d in dtypes},  # the widest kernel's, or "auto"
            "kernel_lanes": {d: dict(gen.kernel_lanes[d]) for d in dtypes},
            "library": gen.prefix + ("" if fold else "_dense"),
            # CPython bindings of the kernels (fast calls), compiled into the same library when
            # Python.h is available; otherwise the kernels are called through ctypes
            "python_modules": {d: {"source": src, "module": mod} for d, (src, mod) in sorted(gen.python_sources.items())},
        }
        return Sources(self.name, gen.prefix, dict(gen.files), {k: kernel_entry(pk) for k, pk in gen.kernels.items()},
                       info, tuple(dtypes))

    def build(self, model, kernels, dtype, *, march=None, lanes=None, **options):
        if lanes is None:
            lanes = default_lanes(np.dtype(dtype).name, march, options.get("cxx"))
        return super().build(model, kernels, dtype, march=march, lanes=lanes, **options)

    def load(self, sources, model, dtype, *, progress=None, opt=None, march=None, cxx=None):
        dt = check_dtype(sources, dtype)
        info = sources.info
        files = {fn: sources.files[fn] for fn in [info["header"], *info.get("private_headers", ()),
                                                    *info["sources"][dt]]}
        srcs = list(info["sources"][dt])
        # no opt: -O3, and -Os for the large straight-line kernels; an opt given is used for all
        target = resolve_march(march, cxx)
        flags = cxx_flags(opt=DEFAULT_OPT if opt is None else check_opt(opt), march=target)
        large = info.get("large_sources", {}).get(dt, ()) if opt is None else ()
        module = None
        py = info.get("python_modules", {}).get(dt)
        include = python_include() if py else None
        if include:
            files[py["source"]] = sources.files[py["source"]]
            srcs.append(py["source"])
            flags = flags + [f"-I{d}" for d in include]
            module = py["module"]
        source_flags = {src: [LARGE_OPT if f == DEFAULT_OPT else f for f in flags] for src in large}
        for src in info.get("looped_sources", {}).get(dt, ()):
            source_flags[src] = [f for f in flags if f != NO_SLP]
        lib = build_library(files, srcs, info.get("library", sources.prefix), flags, cxx=cxx, progress=progress,
                            source_flags=source_flags)
        have = vector_bytes(target, cxx)
        kl = {k: resolve_auto_lanes(v, dt, have) for k, v in info.get("kernel_lanes", {}).get(dt, {}).items()}
        lanes = info["lanes"][dt]
        if lanes == "auto":  # generated without lanes: the instruction set of this build decides
            lanes = max(kl.values(), default=resolve_auto_lanes("auto", dt, have))
        wide = lanes * np.dtype(dt).itemsize
        if wide > have:  # e.g. kernels pickled on an AVX machine, loaded on one without
            warnings.warn(f"{sources.prefix}: the batch path was generated for {lanes} states per "
                          f"vector ({wide} bytes), wider than the {have}-byte registers of this build "
                          f"({f'-march={target}' if target else 'portable'}): batches run "
                          "through slow generic vector code. Build with march='portable' (or lanes=) where the "
                          "kernels are generated.", RuntimeWarning, stacklevel=2)
        return CompiledKernels(lib, model, sources.prefix, dt, kernel_specs(sources.kernels), lanes=lanes,
                               kernel_lanes=kl or None,
                               module=module)

    def describe(self, options):
        march = resolve_march(options.get("march"), options.get("cxx"))
        opt = options.get("opt") or f"{DEFAULT_OPT} ({LARGE_OPT} for kernels of ≥ {LARGE_STATEMENTS} statements)"
        return f"cpu, {opt}" + (f" -march={march}" if march else " (portable)")


register(CpuTarget())
