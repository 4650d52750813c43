"""Build (generate, compile, cache) and load kernels."""
from __future__ import annotations

import numpy as np

from ..algorithms import KERNELS
from ..backends.cpu import DTYPES, generate_cpu
from ..errors import RbdgenError
from ..model import RobotModel
from .compiler import build_library, cache_dir, cxx_flags, python_include
from .loaded import CompiledKernels

__all__ = ["build", "cache_dir"]

TARGETS = ("cpu", "cuda")


def build(model: RobotModel, target: str = "cpu", dtype="float64", *, kernels=KERNELS, opt: str = "-O3",
          march: str | None = None, cxx: str | None = None, fold: bool = True, simd: bool = True,
          lanes: int | None = None, progress=None, name: str | None = None, arch=None, nvcc: str | None = None,
          werror: bool = False, **target_options):
    """Generate, compile (cached) and load the kernels of ``model``.

    ``target="cpu"`` returns :class:`CompiledKernels`; ``target="cuda"`` returns
    :class:`~rbdgen.jit.cuda.CudaKernels` (``arch``: CUDA architecture(s), default the GPUs
    found here, else sm_80 and sm_90; ``nvcc``: the compiler, default the one the Makefile
    installs; ``werror``: warnings are errors, as in CI). ``march``, ``simd`` and ``lanes``
    apply to the CPU.

    ``march``: passed as ``-march=…`` (default: none, a portable build; ``"native"`` for this
    machine). ``fold=False`` builds the dense (unpruned) variant, for comparison. ``simd=False``
    drops the vectorised batch path (the batch runs the single-state kernel per state under
    OpenMP): half the compile time, for when batches are rare.

    ``target="hls"``: C simulation of the FPGA kernels, see :func:`rbdgen.jit.hls.build_hls`
    (``fixed=(W, I)``, ``rounding``, ``overflow``, ``csim``; compiled at -O1 unless another
    ``opt`` than the default is given).
    """
    if not isinstance(model, RobotModel):
        raise TypeError(f"build() takes a RobotModel (from rbdgen.load_urdf), got {type(model).__name__}")
    if target == "hls":
        from .hls import build_hls

        if opt != "-O3":  # build()'s default is the CPU's; the C simulation defaults to -O1
            target_options.setdefault("opt", opt)
        return build_hls(model, dtype, kernels=kernels, cxx=cxx, fold=fold, name=name, progress=progress,
                         **target_options)
    if target_options:
        raise TypeError(f"build(target={target!r}) got unexpected option(s): {', '.join(sorted(target_options))}")
    dt = np.dtype(dtype).name
    if target not in TARGETS:
        raise RbdgenError(f"unknown target {target!r} (available: {', '.join(TARGETS)}, hls)")
    if dt not in DTYPES:
        raise ValueError(f"dtype must be float64 or float32, got {dtype!r}")
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise ValueError(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(KERNELS)}")
    if target == "cuda":
        return build_cuda(model, dt, kernels=kernels, opt=opt, arch=arch, nvcc=nvcc, werror=werror, fold=fold,
                          progress=progress, name=name)
    if lanes is None:
        lanes = default_lanes(dt, march)
    include = python_include()
    gen = generate_cpu(model, dtypes=(dt,), kernels=tuple(kernels), fold=fold, progress=progress, name=name,
                       simd=simd, python=include is not None, lanes={dt: lanes})
    flags = cxx_flags(opt=opt, march=march)
    sources = list(gen.sources[dt])
    module = None
    if dt in gen.python_sources:
        src, module = gen.python_sources[dt]
        sources.append(src)
        flags = flags + [f"-I{include}"]
    lib = build_library(gen.files, sources, gen.prefix + ("" if fold else "_dense"), flags, cxx=cxx,
                        progress=progress)
    return CompiledKernels(lib, model, gen.prefix, dt, gen.kernels, lanes=gen.lanes[dt], module=module)


def build_cuda(model: RobotModel, dtype: str, *, kernels=KERNELS, opt="-O3", arch=None, nvcc=None,
               werror=False, fold=True, progress=None, name=None):
    from ..backends.cuda import generate_cuda
    from .cuda import compile_and_load

    gen = generate_cuda(model, dtypes=(dtype,), kernels=tuple(kernels), fold=fold, progress=progress, name=name)
    return compile_and_load(gen.files, gen.sources[dtype], gen.prefix + "_cuda" + ("" if fold else "_dense"), model,
                            gen.prefix, dtype, {k: v[dtype] for k, v in gen.kernels.items()}, arch=arch, opt=opt,
                            nvcc=nvcc, werror=werror, progress=progress)


def default_lanes(dtype: str, march: str | None) -> int:
    """States per SIMD vector in the batch path: one native register's worth. A portable build
    (no -march) targets baseline x86-64, whose SSE2 registers hold 16 bytes; wider GCC vectors
    there are lowered to slow generic code (measured 70× slower on M⁻¹). With -march given,
    32 bytes (AVX2 and up)."""
    width = 16 if march is None else 32
    return width // (8 if dtype == "float64" else 4)

