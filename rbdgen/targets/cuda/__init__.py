"""The CUDA target: ``.cu``/``.cuh`` sources built with nvcc into one shared library, called on
GPU arrays (cupy, any ``__cuda_array_interface__``) or NumPy arrays, and emulated on the CPU
where there is no GPU.

``emit`` prints the sources (thread and block launch shapes, host emulation), ``nvcc`` is the
toolchain step (nvcc, architectures, ptxas reports), ``resources`` the occupancy and roofline
report (``inspect --cost --target cuda``, CI's resource bounds), ``runtime`` the loaded kernels
(launches, streams, emulation). This module is the :class:`~rbdgen.targets.base.Target`.
"""
from __future__ import annotations

from ...codegen.sources import DTYPES, Sources, check_dtype
from ...ir.roll import check_unroll
from ..base import OPT, UNROLL, Option, Target, check_opt, register
from .emit import format_rolled_table, format_schedule_table, generate_cuda, schedule_table
from .resources import format_resources, gpu_for, kernel_resources
from .runtime import compile_and_load


class CudaTarget(Target):
    name = "cuda"
    help = "CUDA .cu/.cuh built with nvcc; GPU arrays (cupy) or numpy; emulated on the CPU without a GPU"
    compiler = "nvcc (the CUDA compiler)"
    returns = "rbdgen.targets.cuda.runtime.CudaKernels"
    salt_modules = Target.salt_modules + ("rbdgen.ir.schedule",)
    options = (
        OPT,
        Option("arch", "--arch", "cuda: GPU architecture(s), e.g. sm_90 or 80,90 (default: the GPUs found, "
               "else sm_80 and sm_90; compute_90: PTX only, compiled by the driver on the GPU); inspect --cost: "
               "the one the resource report is for (sm_80 or sm_90, default sm_90)", ("compile", "cost"),
               {"metavar": "SM"}),
        Option("nvcc", "--nvcc", "cuda: the nvcc to use (default: $NVCC, else the one `make` installs)",
               ("compile", "cost"), {"metavar": "PATH"}),
        Option("werror", "", "cuda: warnings are errors (as in CI)", ("compile",)),
        Option("emulate", "--emulate", "cuda: run the GPU program on the CPU (no GPU needed)", ("run",),
               {"is_flag": True}),
        UNROLL,
    )

    def generate(self, model, kernels, *, dtypes, name, fold=True, progress=None, unroll=True):
        gen = generate_cuda(model, dtypes=dtypes, kernels=kernels, fold=fold, name=name, progress=progress,
                            unroll=check_unroll(unroll))
        entries = {}
        for k, per in gen.kernels.items():
            i = per[dtypes[0]]
            entries[k] = {"doc": i["doc"], "inputs": [{"name": n, "size": int(sz)} for n, sz in i["inputs"]],
                          "outputs": [{"name": n, "shape": [int(x) for x in shp]} for n, shp in i["outputs"]],
                          "ops": {c: int(v) for c, v in i["counts"].items()}}
        info = {"header": gen.header, "sources": gen.sources, "headers": gen.headers,
                "library": gen.prefix + "_cuda" + ("" if fold else "_dense"),
                "launch": {k: {d: {x: i[d][x] for x in ("lanes", "states_per_block", "stages", "width",
                                                         "thread_tile", "workspace", "default_shape",
                                                         "thread_shape", "speedup", "lowering")}
                               for d in dtypes} for k, i in gen.kernels.items()},
                # the CMake project of the same sources, for C++ without Python (docs/cpp.md); not read by load
                "cmake": list(gen.cmake)}
        return Sources(self.name, gen.prefix, dict(gen.files), entries, info, tuple(dtypes))

    def subset(self, sources, kernels, dtype):
        """The sources of a library with only ``kernels``: each one's ``.cu`` and ``.cuh``, with the
        package's shared header and runtime (streams, pools), which name no kernel. None where a
        kernel's files are not where the generator puts them."""
        dt = check_dtype(sources, dtype)
        info, prefix, tag = sources.info, sources.prefix, DTYPES[dt][0]
        keep = [k for k in sources.kernels if k in set(kernels)]
        if len(keep) != len(set(kernels)):
            return None
        own = {f"{prefix}_{k}_{tag}{ext}": k for k in sources.kernels for ext in (".cu", ".cuh")}
        if not all(f"{prefix}_{k}_{tag}.cu" in info["sources"][dt] for k in sources.kernels):
            return None
        srcs = [f for f in info["sources"][dt] if own.get(f, keep[0]) in keep]
        hdrs = [f for f in info["headers"][dt] if own.get(f, keep[0]) in keep]
        files = {f: sources.files[f] for f in [*hdrs, *srcs]}
        sub = {**info, "sources": {dt: srcs}, "headers": {dt: hdrs},
               "launch": {k: v for k, v in info["launch"].items() if k in keep}}
        return Sources(sources.target, prefix, files, {k: sources.kernels[k] for k in keep}, sub, (dt,))

    def load(self, sources, model, dtype, *, progress=None, opt="-O3", arch=None, nvcc=None, werror=False):
        dt = check_dtype(sources, dtype)
        info = sources.info
        files = {fn: sources.files[fn] for fn in [*info["headers"][dt], *info["sources"][dt]]}
        ki = {k: {"doc": e["doc"], "inputs": [(a["name"], a["size"]) for a in e["inputs"]],
                  "outputs": [(a["name"], tuple(a["shape"])) for a in e["outputs"]], "counts": dict(e["ops"]),
                  **info["launch"][k][dt]}  # lanes, states per block, stages, default shape, …
              for k, e in sources.kernels.items()}
        return compile_and_load(files, list(info["sources"][dt]), info["library"], model, sources.prefix, dt, ki,
                                arch=arch, opt=check_opt(opt), nvcc=nvcc, werror=werror, progress=progress)

    def for_validation(self, kern, emulate=False):
        if emulate:
            return kern.emulated("default")
        kern.require_gpu("rbdgen validate --target cuda")
        return kern

    def describe(self, options):
        return ("cuda" + (" (emulated on the CPU)" if options.get("emulate") else "")
                + f", {options.get('opt') or '-O3'}" + (f", arch {options['arch']}" if options.get("arch") else ""))

    def cost_sections(self, model, kernels, *, dtype=None, progress=None, arch=None, nvcc=None, opt=None,
                      unroll=True):
        dtype = dtype or "float64"
        gpu = gpu_for(arch)
        gen = generate_cuda(model, dtypes=(dtype,), kernels=kernels, progress=progress, unroll=check_unroll(unroll))
        check_opt(opt or "-O3")  # refused as for a build, though nvcc's -O does not reach ptxas's report
        rows = kernel_resources(gen, dtype, gpu=gpu, nvcc=nvcc, progress=progress)
        straight = [k for k in gen.kernels if gen.kernels[k][dtype]["lowering"] == "unrolled"]
        rolled = [k for k in gen.kernels if k not in straight]
        out = [format_schedule_table(schedule_table(model, straight, progress=progress, gen=gen, dtype=dtype))] \
            if straight else []
        if rolled:
            out.append(format_rolled_table(gen, rolled, dtype))
        return out + [format_resources(rows, gpu, dtype)]


register(CudaTarget())
