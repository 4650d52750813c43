"""What a GPU would see of our CUDA kernels, measured from the compiler where no GPU is at hand.

``ptxas -v`` reports, for every ``__global__`` function and every function it calls, the
registers per thread, the stack frame (local memory) and the bytes spilled. From those and the
launch configuration the generator chose (threads and dynamic shared memory per block) follows
the *theoretical occupancy* — how many blocks, warps and states one multiprocessor holds at
once — by the rules of NVIDIA's occupancy calculator, here for the H100 (sm_90):

* registers are allocated per warp in units of 256 (a thread asking for R registers costs
  ⌈32·R / 256⌉·256 per warp); 65,536 per SM;
* shared memory is allocated per block in units of 128 bytes, plus 1 KiB the system reserves
  per block; 228 KiB per SM, at most 227 KiB per block;
* at most 64 warps (2,048 threads) and 32 blocks per SM.

The *roofline* gives the most states per second the whole GPU could compute: the lesser of the
FP64 (or FP32) arithmetic bound and the memory bound.

* arithmetic: ``max(mul, add)`` fused multiply-adds (every multiply paired with an add: the
  bound) plus ``DIV_INSTR`` instructions per division and ``SINCOS_INSTR`` per sine-cosine pair
  (the software sequences CUDA's libdevice runs for them in double precision), at 64 FP64 (128
  FP32) instructions per clock per SM, 132 SMs, 1.98 GHz;
* memory: each state's inputs are read and its outputs written once (the compulsory traffic),
  at 3.35 TB/s (HBM3).

These are bounds, not predictions of a measured rate: a kernel with 25 % occupancy, whose warps
mostly wait on the previous FP64 result, reaches a fraction of its arithmetic bound. The figures
are what ``inspect --cost --target cuda`` prints and what CI holds the bundled robots to
(tests/test_cuda_resources.py), so a change that makes a kernel spill, take kilobytes of local
memory per thread or lose occupancy shows on a machine without a GPU.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ...errors import BuildError
from ...textutil import text_table
from .nvcc import arch_number, parse_archs, ptxas_reports

#: instructions of the FP64 pipe per division / per sin-cos pair (approximate; see module doc)
DIV_INSTR = 10
SINCOS_INSTR = 40


@dataclass(frozen=True)
class Gpu:
    """The limits of one GPU that occupancy and the roofline depend on."""

    name: str
    arch: str            # compute capability, e.g. "90"
    sms: int
    clock_ghz: float     # boost clock
    fp64_per_clk: int    # FP64 instructions (FMA = 1) per clock per SM
    fp32_per_clk: int
    mem_bw: float        # bytes / s
    regs_per_sm: int = 65536
    reg_unit: int = 256  # registers are allocated per warp in units of this
    max_warps: int = 64
    max_blocks: int = 32
    smem_per_sm: int = 228 * 1024
    smem_per_block: int = 227 * 1024
    smem_reserved: int = 1024  # per block, by the system
    smem_unit: int = 128


#: NVIDIA H100 SXM5 80 GB (the data-centre GPU our goals are stated for)
H100 = Gpu("H100 SXM5", "90", sms=132, clock_ghz=1.98, fp64_per_clk=64, fp32_per_clk=128, mem_bw=3.35e12)
#: NVIDIA A100 SXM4 80 GB (9.7 TFLOP/s FP64 without tensor cores: 32 FMA per clock per SM)
A100 = Gpu("A100 SXM4", "80", sms=108, clock_ghz=1.41, fp64_per_clk=32, fp32_per_clk=64, mem_bw=2.04e12,
           smem_per_sm=164 * 1024, smem_per_block=163 * 1024)
GPUS = {g.arch: g for g in (A100, H100)}


def gpu_for(arch) -> Gpu:
    """The GPU of one architecture (``None``: the H100)."""
    if arch is None:
        return H100
    archs = [arch_number(a) for a in parse_archs(arch)]
    if len(archs) != 1 or archs[0] not in GPUS:
        raise BuildError(f"the resource report is for one architecture of {', '.join('sm_' + a for a in GPUS)}, "
                         f"got {arch!r}")
    return GPUS[archs[0]]


def occupancy(gpu: Gpu, threads: int, registers: int, smem: int) -> dict:
    """Blocks and warps one SM holds of a kernel with ``threads`` per block, ``registers`` per
    thread and ``smem`` bytes of shared memory per block (static + dynamic); which resource
    limits it; and the theoretical occupancy (resident warps / 64)."""
    warps = -(-threads // 32)
    limits = {"warps": gpu.max_warps // warps, "blocks": gpu.max_blocks}
    if registers:
        per_warp = -(-registers * 32 // gpu.reg_unit) * gpu.reg_unit
        limits["registers"] = (gpu.regs_per_sm // per_warp) // warps
    if smem > gpu.smem_per_block:
        limits["shared memory"] = 0
    else:
        per_block = -(-(smem + gpu.smem_reserved) // gpu.smem_unit) * gpu.smem_unit
        limits["shared memory"] = gpu.smem_per_sm // per_block
    blocks = min(limits.values())
    limiter = min(limits, key=lambda k: (limits[k], k != "registers"))
    return {"blocks": blocks, "warps": blocks * warps, "occupancy": blocks * warps / gpu.max_warps,
            "limiter": limiter}


def roofline(gpu: Gpu, counts: dict, bytes_per_state: int, dtype: str = "float64") -> dict:
    """States per second the whole GPU could at most compute (see the module doc)."""
    per_clk = gpu.fp64_per_clk if dtype == "float64" else gpu.fp32_per_clk
    instr = max(counts["mul"], counts["add"]) + DIV_INSTR * counts["div"] + SINCOS_INSTR * counts["sincos"]
    compute = gpu.sms * per_clk * gpu.clock_ghz * 1e9 / max(instr, 1)
    memory = gpu.mem_bw / max(bytes_per_state, 1)
    return {"instructions": instr, "compute": compute, "memory": memory, "states_per_s": min(compute, memory),
            "bound": "FP64" if compute <= memory and dtype == "float64" else ("FP32" if compute <= memory else "memory")}


_PART = re.compile(r"_part\d+I")
_STAGE = re.compile(r"_[se]\d+I")


def _shape_of(mangled: str) -> str | None:
    """Which launch shape a function of one kernel's .cu belongs to: thread (its kernel and the
    out-of-line parts of the per-state function), block (its kernel and stage functions), or
    None (helpers both call, e.g. libdevice's trigonometric slow path)."""
    if "_thread_kernel" in mangled or _PART.search(mangled):
        return "thread"
    if "_block_kernel" in mangled or _STAGE.search(mangled):
        return "block"
    return None


def kernel_resources(gen, dtype: str = "float64", *, gpu: Gpu = H100, nvcc: str | None = None,
                     progress=None) -> list[dict]:
    """One row per kernel and launch shape of a :class:`~rbdgen.targets.cuda.emit.GeneratedCuda`:
    ptxas's registers, local memory and spills, the launch configuration, the occupancy on
    ``gpu``, and the roofline."""
    nbytes = 8 if dtype == "float64" else 4
    sources = {k: per[dtype]["source"] for k, per in gen.kernels.items()}
    reports = ptxas_reports(gen.files, list(sources.values()), arch=gpu.arch, nvcc=nvcc, progress=progress)
    rows = []
    for k, src in sources.items():
        info = gen.kernels[k][dtype]
        funcs = reports[src]
        bytes_state = nbytes * (sum(sz for _, sz in info["inputs"])
                                + sum(math.prod(s) for _, s in info["outputs"]))
        roof = roofline(gpu, info["counts"], bytes_state, dtype)
        for shape in ("thread", "block"):
            if shape == "thread" and not info["thread_shape"]:
                continue  # not generated: one state's workspace is over the per-thread limit
            mine = [f for f in funcs.values() if _shape_of(f.name) == shape]
            entry = next((f for f in mine if f.entry), None)
            if entry is None:
                raise BuildError(f"ptxas report of {src} has no {shape} kernel")
            if shape == "thread":
                threads = info["thread_tile"] or 128
                dyn = info["thread_tile_bytes"]
                states = threads
            else:
                threads = info["block_threads"]
                dyn = info["block_shared_bytes"]
                states = info["states_per_block"]
            smem = dyn + entry.static_smem
            occ = occupancy(gpu, threads, entry.registers, smem)
            rows.append({
                "kernel": k, "shape": shape, "registers": entry.registers, "local_bytes": entry.cumulative_stack,
                "spill_bytes": sum(f.spill_stores for f in mine) + sum(f.spill_stores for f in funcs.values()
                                                                       if _shape_of(f.name) is None),
                "threads": threads, "shared_bytes": smem, "states_per_block": states, **occ,
                "states_per_sm": occ["blocks"] * states,
                # what the driver reserves for local memory: per-thread bytes × every thread the GPU can hold
                "local_reserve": entry.cumulative_stack * gpu.max_warps * 32 * gpu.sms,
                "roofline": roof, "speedup": info.get("speedup"),
            })
    return rows


def _si(x: float) -> str:
    for div, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.3g}{suf}"
    return f"{x:.3g}"


def _bytes(x: int) -> str:
    return f"{x / 1024:.1f} KiB" if x >= 1024 else f"{x} B"


def format_resources(rows: list[dict], gpu: Gpu = H100, dtype: str = "float64") -> str:
    head = ("kernel", "shape", "regs", "local/thread", "spills", "threads", "shared/block", "blocks/SM",
            "states/SM", "occupancy", "limited by", "roofline states/s")
    table = [head]
    for r in rows:
        roof = r["roofline"]
        table.append((r["kernel"], r["shape"], str(r["registers"]), _bytes(r["local_bytes"]),
                      _bytes(r["spill_bytes"]), str(r["threads"]), _bytes(r["shared_bytes"]), str(r["blocks"]),
                      str(r["states_per_sm"]), f"{100 * r['occupancy']:.1f}%", r["limiter"],
                      f"{_si(roof['states_per_s'])} ({roof['bound']})"))
    lines = [f"cuda resources from ptxas -v (sm_{gpu.arch}, {dtype}) and theoretical occupancy on an {gpu.name} "
             f"({gpu.sms} SMs; per SM {gpu.regs_per_sm // 1024}K registers, {gpu.smem_per_sm // 1024} KiB shared, "
             f"{gpu.max_warps} warps). local/thread: ptxas's cumulative stack (local memory); the roofline is the "
             f"lesser of the {'FP64' if dtype == 'float64' else 'FP32'} bound (fused multiply-adds, {DIV_INSTR} "
             f"instructions per division, {SINCOS_INSTR} per sin-cos, {gpu.clock_ghz} GHz) and the memory bound "
             f"(inputs read and outputs written once, {gpu.mem_bw / 1e12:.2f} TB/s)", ""]
    return "\n".join(lines + text_table(table, left=(0, 1, 10)))
