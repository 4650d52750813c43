"""The CUDA target's code: the same kernel IR as the CPU, printed for the GPU in two launch shapes.

* **thread** — one thread per state. Each thread block stages its states' inputs through shared
  memory with coalesced loads (a batch is a C-contiguous ``(N, size)`` array, so the states of
  one block are one contiguous stretch of memory), runs the per-state straight-line function,
  and writes its outputs back through shared memory the same way. Arrays too large to stage
  (shared memory > 48 KiB for 32 states) are read and written in place.
* **block** — ``lanes`` threads cooperate on each state, and the lanes of a warp hold *different
  states running the same code*: a block is ``blockDim = (32 states, lanes)``, ``threadIdx.x``
  the state and ``threadIdx.y`` the lane, so each warp is one lane of 32 states. The kernel's
  statements are level-scheduled (:mod:`rbdgen.ir.schedule`): tasks of a stage (bodies of one
  tree level, branches, gradient columns) go to different lanes — different warps, which the
  SM's four schedulers run side by side, not one after another as divergent paths of one warp
  would be — a barrier separates stages, and values that cross lanes live in a per-state
  workspace in shared memory (or global memory when it does not fit), whose dead slots are
  reused. The dense ``−M⁻¹ ∂τ/∂u`` products of ∇FD are shared out one element per lane.

Which shape a launch takes (``shape="auto"``) follows :func:`warp_model`: the block shape
shortens one state's latency by its predicted speed-up, and pays when the thread shape cannot
give every warp scheduler of the GPU a warp (fewer than 4 × SMs × 32 states); see
``docs/cuda.md``.

Every piece of per-state math is a ``__host__ __device__`` function, and each ``__global__``
kernel is only a sequence of calls to such functions separated by barriers. The same sequence
is also generated as a host function (``…_emulate_thread`` / ``…_emulate_block``) that runs
every thread of every block in turn, so the GPU program — index arithmetic, staging, the
stage/thread split and the workspace — executes and is checked on a machine without a GPU.

The same sources are also a CMake project (``rbdgen::<name>_cuda``, CMake's CUDA language;
issue 45, ``docs/cpp.md``) for C++ users who never run Python.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import SimpleNamespace


from ... import registry
from ...codegen import escape as esc
from ...codegen.printer import DEFAULT_PART_SIZE, SPLIT_ABOVE, Dialect, print_epilogue_shared, print_kernel
from ...codegen.render import render
from ...codegen.rolled import print_rolled, print_rolled_lanes
from ...codegen.sources import DTYPES, c_identifier, prefix_for
from ...ir.roll import check_unroll, relayout, roll
from ...ir.schedule import Schedule, level_schedule
from ...model import RobotModel
from ...textutil import text_table
from .nvcc import DEFAULT_ARCHS, DEVICE_FLAGS
from .resources import H100, occupancy

#: the thread shape's products keep their span loops rolled: fully unrolled, nvcc held the
#: quadruped ∇FD's output rows in registers (255 a thread) and spilled 1.5 KiB; rolled, 168 and none
#: (device code only: the host emulation's g++ rejects an unknown pragma under -Werror)
CUDA = Dialect("cuda", sincos="rbd_sincos", epilogue_span_pragma="#ifdef __CUDA_ARCH__\n#pragma unroll 1\n#endif",
               rolled_qualifier="static __host__ __device__ __noinline__")
#: a rolled kernel's tables (rbdgen.codegen.rolled) up to this size are read from constant memory
#: (64 KiB a module; the members of a kind are the same for every thread of a warp, so a read is a
#: broadcast from the constant cache), larger ones from global memory through the L1 cache
CONSTANT_TABLES = 32 * 1024

#: shared memory a block may take without opting in (every GPU since Kepler)
SHARED_LIMIT = 48 * 1024
#: threads per block in the thread shape (fewer when the staged arrays do not fit)
THREAD_TILE = 128
#: lanes per state in the block shape, at most: 32 states × 16 lanes = 512 threads a block,
#: which leaves ptxas 128 registers per thread (at 1024 threads it has 64 and spills); more
#: lanes than the SM's 4 schedulers only help while a stage has more tasks than lanes anyway
MAX_LANES = 16
#: states per block of the block shape: one warp's worth, so a warp is one lane of 32 states
WARP = 32
#: warp schedulers per SM (every NVIDIA GPU since Maxwell): warps of one block beyond this many
#: share issue slots
SCHEDULERS = 4
#: the block shape is chosen by auto only when it predicts at least this speed-up of one state
BLOCK_MIN_SPEEDUP = 1.5
#: per-thread scratch (local memory) above which auto does not choose the thread shape, and
#: above which the thread shape is not generated at all (the driver reserves local memory for
#: every thread the GPU can hold: 16 KiB × 2048 × 132 SMs = 4.4 GB on an H100)
THREAD_LOCAL_PREFER = 1024
#: the thread shape's kernels of more statements than this are cut into parts of at most
#: THREAD_PART_SIZE passing values through local memory (the CPU's: above 1 500, parts of 600,
#: for its compile time). Register pressure is what sets them here: one function of the iiwa's
#: aba (1 297 statements) took 190 registers from ptxas, an eighth of an H100 SM's warps, and
#: parts of 600 left contact_terms a 4-byte spill under the thread tile's launch bound of 128
#: registers; split at 1 200 into parts of 400, aba takes 118 (a quarter), contact_terms 126,
#: ∇FD 168 instead of 254 (ptxas 12.x, sm_90; docs/performance.md §36)
THREAD_SPLIT_ABOVE = 1200
THREAD_PART_SIZE = 400
THREAD_LOCAL_LIMIT = 16 * 1024
SHAPES = {"auto": 0, "thread": 1, "block": 2}


@dataclass
class GeneratedCuda:
    prefix: str
    files: dict      # file name → text
    sources: dict    # dtype → the .cu files to compile (the shared runtime source included)
    headers: dict    # dtype → the headers those include (the API header first)
    header: str      # the API header
    kernels: dict    # kernel name → info dict (shapes, lanes, …)
    cmake: tuple = ()  # the CMake project's files (CMakeLists.txt, package config, pkg-config, example)


def _signature(ins, outs, scalar, maybe_unused=False):
    mu = "[[maybe_unused]] " if maybe_unused else ""
    return ", ".join([f"{mu}const {scalar}* __restrict {a.name}" for a in ins]
                     + [f"{mu}{scalar}* __restrict {a.name}" for a in outs])


def _thread_layout(ins, outs, nbytes):
    """Tile layout of the thread shape: which arrays are staged through shared memory, the
    per-state stride (odd, so that threads reading the same offset of consecutive states hit
    different shared-memory banks), their offsets, and the states per block. Of 128, 64 or 32
    states with inputs and outputs staged, or inputs only (outputs written in place), the
    layout an SM holds most states of, assuming 128 registers a thread (what the unrolled
    kernels take); ties go to staging the outputs too, then to larger tiles. tile = 0: nothing
    fits in 48 KiB, arrays used in place."""
    best = None
    for tile in (THREAD_TILE, 64, 32):
        for staged in (list(ins) + list(outs), list(ins)):
            stride = sum(a.size for a in staged) | 1
            if tile * stride * nbytes > SHARED_LIMIT:
                continue
            resident = occupancy(H100, tile, 128, tile * stride * nbytes)["blocks"] * tile
            key = (resident, len(staged) > len(ins), tile)
            if best is None or key > best[0]:
                offs, o = {}, 0
                for a in staged:
                    offs[a.name] = o
                    o += a.size
                best = (key, (tile, stride, offs, len(staged) > len(ins)))
    return best[1] if best else (0, 1, {}, False)


def _table_bytes(lines: list, nbytes: int) -> int:
    """Bytes of the rolled tables printed in ``lines`` (their declared sizes: ints 4 bytes, the
    scalar ``nbytes``)."""
    total = 0
    for ln in lines:
        if ln.startswith("static ") and "[" in ln and ln.endswith("= {"):
            dims = [int(d) for d in re.findall(r"\[(\d+)\]", ln)]
            total += math.prod(dims) * (4 if " int " in ln else nbytes)
    return total


def _epilogue_ops(kernel) -> int:
    """Multiplies and adds of the ``post`` products as printed (over B's nonzero spans,
    :meth:`~rbdgen.ir.graph.MatMul.op_counts`)."""
    return sum(sum(mm.op_counts()) for mm in kernel.post)


def warp_model(sched, total: int, epilogue_ops: int = 0, states_per_block: int = WARP) -> dict:
    """Predicted latency of one state in the block shape, in warp-instruction issue slots,
    against the thread shape (one thread does all ``total`` + ``epilogue_ops`` statements).
    A warp holds ``32 / states_per_block`` consecutive lanes of its states (one lane when a
    block has 32 states); the cases of the lanes in one warp run one after another (divergence),
    different warps side by side. A stage lasts as long as its busiest warp, but no less than its
    work divided over the SM's ``SCHEDULERS`` warp schedulers; the epilogue products are shared out
    over the lanes likewise. ``speedup_old``: the earlier layout, where all lanes of a state
    were threads of one warp (a stage took the sum of its lanes' work) — kept to show what the
    layout changed."""
    group = max(1, WARP // states_per_block)
    new = old = 0
    for loads in sched.lane_loads:
        warps = [sum(loads[g:g + group]) for g in range(0, len(loads), group)]
        new += max(max(warps), -(-sum(loads) // SCHEDULERS))
        old += sum(loads)
    lanes = max(sched.lanes, 1)
    new += -(-epilogue_ops // min(-(-lanes // group), SCHEDULERS))
    old += epilogue_ops
    work = total + epilogue_ops
    return {"slots": new, "speedup": work / max(new, 1), "speedup_old": work / max(old, 1)}


def generate_cuda(model: RobotModel, dtypes=("float64",), kernels=None, *, fold: bool = True,
                  part_size: int = DEFAULT_PART_SIZE, name: str | None = None, max_lanes: int = MAX_LANES,
                  progress=None, unroll=True) -> GeneratedCuda:
    """Render the CUDA sources of ``kernels``. Deterministic: same input → same bytes.
    ``unroll``: True (straight-line code), False (loops over bodies, one function per kind of
    body: :mod:`rbdgen.codegen.rolled`; the block shape's lanes share out each tree level's
    bodies) or "auto" (rolled from :data:`rbdgen.ir.roll.AUTO_OPS` operations, per kernel)."""
    unroll = check_unroll(unroll)
    kernels = registry.applicable(model, kernels)
    prefix = prefix_for(name or model.name)
    robot = esc.comment(model.name)  # names reach generated code only through rbdgen.codegen.escape
    banner = f"Generated by rbdgen from {robot} — do not edit. Regenerate with `rbdgen generate --target cuda`."
    header = f"{prefix}.cuh"
    files, info, api = {}, {}, []
    sources = {d: [] for d in dtypes}
    headers = {d: [] for d in dtypes}
    base = "floating" if model.floating_base else "fixed"
    for k in kernels:
        if progress:
            progress(f"tracing {k}")
        # rolled: traced with the model's numbers as parameters, one function per kind of body
        kernel, rolled = registry.trace_lowered(model, k, unroll, fold)
        if rolled:
            # the thread shape runs the blocks in the trace's order, the block shape in stages: each
            # its own workspace layout (the first holds fewer values: a gradient's columns one
            # after another instead of side by side), the same kinds and constants
            R = roll(kernel)
            RC = relayout(R, cooperative=True)
        shape = registry.get(k).gpu_shape  # the kernel's preferred launch shape
        sched = None if rolled else level_schedule(kernel, max_lanes=max_lanes)
        counts = kernel.op_counts()
        epi_ops = _epilogue_ops(kernel)
        api_k = None
        for dtype in dtypes:
            tag, ctype = DTYPES[dtype]
            nbytes = 8 if dtype == "float64" else 4
            if progress:
                progress(f"printing {k} ({dtype})")
            tables, rolled_info = [], None
            if rolled:
                macro = f"{prefix.upper()}_{k.upper()}_{tag.upper()}_TABLE"
                decl = f"static {macro} const"
                pt = print_rolled(kernel, dtype, CUDA, rolled=R, table=decl)
                rl = print_rolled_lanes(kernel, RC, dtype, CUDA, max_lanes, table=decl, suffix="_b")
                sched = Schedule(rl.lanes, rl.n_stages, {}, [], rl.width, [max(x) for x in rl.lane_loads],
                                 rl.lane_loads)
                pb = SimpleNamespace(scratch=rl.scratch, temp_base=rl.temp_base, parts=[])
                epi = [rl.gather] + print_epilogue_shared(kernel, pb, dtype, CUDA, "lane", "LANES")
                tables = pt.tables + rl.tables
                nbytes_tables = _table_bytes(tables, nbytes)
                rolled_info = {"stages": rl.n_stages, "fn": rl.stage_fn, "macro": macro, "bytes": nbytes_tables,
                               "space": "__constant__" if nbytes_tables <= CONSTANT_TABLES else "__device__",
                               "kinds": len(R.kinds), "segments": len(R.segments)}
            else:
                pt = print_kernel(kernel, dtype, CUDA, part_size=min(part_size, THREAD_PART_SIZE),
                                  split_above=THREAD_SPLIT_ABOVE)
                pb = print_kernel(kernel, dtype, CUDA, partition=sched.part, epilogue=False,
                                  part_stage=[st for st, _ in sched.pieces])
                epi = print_epilogue_shared(kernel, pb, dtype, CUDA, "lane", "LANES")
            n_ops = sum(map(sum, sched.lane_loads))
            ins, outs = pt.inputs, pt.outputs
            arrays = list(ins) + list(outs)
            tile, stride, offs, staged_out = _thread_layout(ins, outs, nbytes)
            host_offs, o = {}, 0  # the arrays' places in one device buffer (numpy entry point)
            for a in arrays:
                host_offs[a.name] = o
                o += a.size
            # the thread shape's scratch is per-thread local memory: past the limit there is none
            thread_ok = pt.scratch * nbytes <= THREAD_LOCAL_LIMIT
            # block shape: stages of pieces; states per block and where the workspace lives
            stages = [[] for _ in range(0 if rolled else sched.n_stages)]
            for p, (st, lane) in enumerate(sched.pieces):
                stages[st].append({"lane": lane, "lines": pb.parts[p].lines})
            lanes = sched.lanes
            # per state: the workspace, then a copy of the inputs (the state, kept in shared
            # memory next to the values the threads exchange) when 32 states (else 16, 8: a warp
            # then holds 2 or 4 lanes) fit in shared memory; odd stride: no bank conflicts
            n_in = sum(a.size for a in ins)
            scr_b = (pb.scratch + n_in) | 1
            spb = WARP
            while spb > 8 and spb * scr_b * nbytes > SHARED_LIMIT:
                spb //= 2
            ws_shared = spb * scr_b * nbytes <= SHARED_LIMIT
            if not ws_shared:  # global workspace: the inputs are read where they are
                spb, scr_b = WARP, max(pb.scratch, 1)
            model_w = warp_model(sched, n_ops, epi_ops, spb)
            in_off, o = {}, pb.scratch
            for a in ins:
                in_off[a.name] = o
                o += a.size
            b_args = [f"w + {in_off[a.name]}" if ws_shared else f"{a.name} + c * {a.size}" for a in ins]
            b_args += [f"{a.name} + c * {a.size}" for a in outs]
            b_emu = [f"w + {in_off[a.name]}" if ws_shared else f"{a.name} + i * {a.size}" for a in ins]
            b_emu += [f"{a.name} + i * {a.size}" for a in outs]
            phases = [f"{k}_s{s}" for s in range(len(stages))] + [f"{k}_e{j}" for j in range(len(epi))]
            kk = {
                "name": k, "doc": kernel.doc, "inputs": ins, "outputs": outs, "arrays": arrays, "counts": counts,
                "t_parts": pt.parts, "t_body": pt.body, "t_scratch": pt.scratch, "n_statements": pt.n_statements,
                "sig": _signature(ins, outs, "S"), "sig_mu": _signature(ins, outs, "S", True),
                "in_sig_mu": _signature(ins, [], "S", True), "out_sig": _signature([], outs, "S"),
                "c_sig": _signature(ins, outs, ctype), "call": ", ".join(a.name for a in arrays),
                "tile": tile, "stride": stride, "toffs": offs, "offs": host_offs, "tile_bytes": tile * stride * nbytes,
                "staged_out": staged_out, "thread_ok": thread_ok,
                "thread_pref": 0 if not thread_ok else (2 if pt.scratch * nbytes > THREAD_LOCAL_PREFER else 1),
                "t_args": ", ".join(f"s + {offs[a.name]}" if a.name in offs else f"{a.name} + i * {a.size}"
                                    for a in arrays),
                "in_call": ", ".join(a.name for a in ins), "out_call": ", ".join(a.name for a in outs),
                "staged_desc": " and ".join(x for x in ("inputs", "outputs" if staged_out else "") if x),
                "stages": stages, "epilogue": epi, "phases": phases, "lanes": lanes, "spb": spb,
                "b_scratch": scr_b, "ws_shared": ws_shared, "n_stages": sched.n_stages, "width": sched.width,
                "block_threads": lanes * spb, "block_scratch": spb * scr_b,
                "state_size": sum(a.size for a in arrays), "in_size": sum(a.size for a in ins),
                "out_size": sum(a.size for a in outs),
                "speedup": model_w["speedup"], "speedup_pct": int(round(100 * model_w["speedup"])),
                # long stage functions stay out of line, as the printer splits long kernels
                "stage_inline": "__noinline__" if pt.n_statements > SPLIT_ABOVE else "inline",
                "state_args": ", ".join(b_args), "emu_args": ", ".join(b_emu), "in_off": in_off,
                "direct_args": ", ".join(f"{a.name} + i * {a.size}" for a in arrays),
                "tables": tables, "rolled": rolled_info,
            }
            ctx = dict(banner=banner, robot=robot, dtype=dtype, ctype=ctype, tag=tag, prefix=prefix,
                       header=header, k=kk)
            dev = f"{prefix}_{k}_{tag}.cuh"
            files[dev] = render("cuda/device.cuh.j2", **ctx)
            src = f"{prefix}_{k}_{tag}.cu"
            files[src] = render("cuda/kernels.cu.j2", device_header=dev, **ctx)
            sources[dtype].append(src)
            headers[dtype].append(dev)
            info.setdefault(k, {})[dtype] = {
                "lanes": lanes, "states_per_block": spb, "stages": sched.n_stages, "width": sched.width,
                "thread_tile": tile, "workspace": "shared" if ws_shared else "global",
                "thread_tile_bytes": tile * stride * nbytes, "block_threads": lanes * spb,
                "block_shared_bytes": spb * scr_b * nbytes if ws_shared else 0,
                "scratch_thread": pt.scratch, "scratch_block": pb.scratch, "counts": counts,
                "inputs": [(a.name, a.size) for a in ins], "outputs": [(a.name, tuple(a.shape)) for a in outs],
                "default_shape": shape if thread_ok else "block", "doc": kernel.doc, "source": src,
                "speedup": model_w["speedup"], "speedup_old": model_w["speedup_old"], "thread_shape": thread_ok,
                "outputs_staged": staged_out, "lowering": "rolled" if rolled else "unrolled",
                "tables_bytes": rolled_info["bytes"] if rolled else 0,
            }
            if api_k is None:
                api_k = {"name": k, "doc": kernel.doc, "inputs": ins, "outputs": outs, "c_sig": {}}
                api.append(api_k)
            api_k["c_sig"][tag] = kk["c_sig"]
    src = f"{prefix}_runtime.cu"
    files[src] = render("cuda/runtime.cu.j2", banner=banner, prefix=prefix, header=header)
    for d in dtypes:
        sources[d].append(src)
        headers[d].insert(0, header)
    files[header] = render("cuda/api.cuh.j2", banner=banner, robot=robot, nb=model.nb, nq=model.nq,
                           nv=model.nv, base=base, guard=prefix.upper() + "_CUH", prefix=prefix, kernels=api,
                           dtypes=[{"tag": DTYPES[d][0], "ctype": DTYPES[d][1]} for d in dtypes])
    cmake = _cmake_project(files, model, name or model.name, prefix, banner, robot, header, dtypes, sources,
                           headers, api)
    return GeneratedCuda(prefix, files, sources, headers, header, info, cmake)


def _cmake_project(files: dict, model, name: str, prefix: str, banner: str, robot: str, header: str, dtypes,
                   sources: dict, headers: dict, api: list) -> tuple:
    """Add the CMake project of the CUDA sources to ``files`` (issue 45, docs/cpp.md): the library
    ``rbdgen::<name>_cuda`` (CMake's CUDA language, nvcc's flags as
    :func:`rbdgen.targets.cuda.nvcc.nvcc_flags` sets them), install rules, package config,
    pkg-config file and an example program; returns their names. Only the package's name and
    file names reach code here; the robot's name, comments."""
    # nvcc_flags: DEVICE_FLAGS, -O3, -Xcompiler -fPIC,-Wall,-Wextra, one -gencode per architecture
    # plus the newest's PTX; CMake says -std=c++17 as CUDA_STANDARD and the gencodes as CUDA_ARCHITECTURES
    assert DEVICE_FLAGS == ("-std=c++17",), "nvcc's device flags changed: update templates/cuda/CMakeLists.txt.j2"
    archs = ";".join([f"{a}-real" for a in DEFAULT_ARCHS[:-1]] + [DEFAULT_ARCHS[-1]])
    lib = f"{prefix}_cuda"
    pkg = c_identifier(name) + "_cuda"
    srcs = [s for d in dtypes for s in sources[d]]
    srcs = list(dict.fromkeys(srcs))  # the runtime source is every dtype's
    hdrs = list(dict.fromkeys(h for d in dtypes for h in headers[d]))
    names = {"cmake": "CMakeLists.txt", "config": f"{lib}-config.cmake.in", "pc": f"{lib}.pc.in",
             "example": f"{lib}_example.cpp"}
    dtype = dtypes[0]
    tag, ctype = DTYPES[dtype]
    first = next((k for k in api if k["name"] == "rnea"), api[0])
    ctx = dict(banner=banner, robot=robot, prefix=prefix, lib=lib, upper=lib.upper(), package=pkg, header=header,
               sources=srcs, headers=hdrs, archs=archs, names=names)
    files[names["cmake"]] = render("cuda/CMakeLists.txt.j2", **ctx)
    files[names["config"]] = render("cuda/config.cmake.in.j2", **ctx)
    files[names["pc"]] = render("cuda/pkgconfig.pc.in.j2", **ctx)
    inputs = []  # as the CPU example's (rbdgen.targets.cpu.emit._example_inputs; targets import no other target)
    for a in first["inputs"]:
        if a.name == "q" and a.size == model.nq:
            vals = [0.0] * model.nq
            for b in range(model.nb):
                q0 = model.q_start[b]
                if model.joint_types[b] == "floating":
                    vals[q0 + 6] = 1.0
                elif model.joint_types[b] == "spherical":  # the identity quaternion
                    vals[q0 + 3] = 1.0
                elif model.nq_joint(b) == 1:
                    vals[q0] = round(0.1 * (q0 + 1), 10)
        else:
            vals = [round(0.05 * ((i % 7) + 1), 10) for i in range(a.size)]
        inputs.append({"name": a.name, "size": a.size,
                       "init": ", ".join(f"{x!r}{'f' if ctype == 'float' else ''}" for x in vals)})
    files[names["example"]] = render("cuda/example.cpp.j2", **ctx, tag=tag, ctype=ctype, kernel=first, inputs=inputs,
                                     shown=min(first["outputs"][0].size, 7))  # values printed
    return tuple(names.values())


def schedule_table(model: RobotModel, kernels=None, max_lanes: int = MAX_LANES, progress=None,
                   gen: GeneratedCuda | None = None, dtype: str = "float64") -> list[dict]:
    """Per kernel, what the block shape does with one state: lanes, stages (barriers),
    independent tasks in the widest stage, the statements on the critical path through the
    stages (the busiest lane of each stage, summed), the bound on the speed-up over one thread
    that follows (total / critical; the epilogue products not counted), and the speed-up the warp
    model predicts (:func:`warp_model`; the epilogue counted) for this layout and, for
    comparison, for the earlier one that put a state's lanes in one warp. The states per block
    are those of ``gen`` (generated sources) where given, else 32."""
    rows = []
    for k in registry.applicable(model, kernels):
        if progress:
            progress(f"scheduling {k}")
        kernel = registry.trace(model, k)
        s = level_schedule(kernel, max_lanes=max_lanes)
        total = sum(1 for n in kernel.live_nodes() if n.op not in ("const", "input"))
        epi = _epilogue_ops(kernel)
        spb = gen.kernels[k][dtype]["states_per_block"] if gen is not None else WARP
        wm = warp_model(s, total, epi, spb)
        rows.append({"kernel": k, "statements": total, "lanes": s.lanes, "stages": s.n_stages, "width": s.width,
                     "critical": s.critical_ops, "speedup_bound": total / max(s.critical_ops, 1),
                     "speedup": wm["speedup"], "speedup_old": wm["speedup_old"], "states_per_block": spb,
                     "default_shape": registry.get(k).gpu_shape})
    return rows


def format_rolled_table(gen: GeneratedCuda, kernels, dtype: str) -> str:
    """The rolled kernels of ``gen`` (``--unroll no``/``auto``): the block shape's lanes and stages
    (a barrier after each), the workspace per state of each shape and the tables' bytes."""
    table = [("kernel", "lanes", "stages", "widest", "workspace thread", "workspace block", "tables", "memory")]
    for k in kernels:
        e = gen.kernels[k][dtype]
        table.append((k, str(e["lanes"]), str(e["stages"]), str(e["width"]), str(e["scratch_thread"]),
                      str(e["scratch_block"]), f"{e['tables_bytes']} B",
                      "constant" if e["tables_bytes"] <= CONSTANT_TABLES else "global"))
    head = ["rolled kernels (--unroll): the kinds' functions over the bodies; block shape: each stage's bodies shared "
            "out over the lanes, a barrier after each stage; workspace: scalars per state; tables in constant "
            f"memory up to {CONSTANT_TABLES // 1024} KiB (docs/cuda.md, Rolled kernels)", ""]
    return "\n".join(head + text_table(table))


def format_schedule_table(rows: list[dict]) -> str:
    head = ("kernel", "statements", "lanes", "stages", "widest", "critical", "bound", "states/block", "predicted",
            "one-warp layout")
    table = [head] + [(r["kernel"], str(r["statements"]), str(r["lanes"]), str(r["stages"]), str(r["width"]),
                       str(r["critical"]), f"{r['speedup_bound']:.1f}x", str(r["states_per_block"]),
                       f"{r['speedup']:.2f}x",
                       f"{r['speedup_old']:.2f}x") for r in rows]
    lines = ["cuda block shape (one state on cooperating lanes, each lane a warp of 32 states): lanes per state, "
             "stages (= barriers), independent tasks in the widest stage, statements on the critical path "
             "(busiest lane per stage), the speed-up bound over one thread (statements / critical), states per "
             "block, and the speed-up of one state's latency the warp model predicts (a warp holds 32 / states "
             "lanes, run one after another; a stage lasts as long as its busiest warp and no less than its work "
             f"over the SM's {SCHEDULERS} warp schedulers; dense products shared out likewise) — beside it, the same model for a layout with a state's lanes in one warp, whose "
             "divergent cases run one after another", ""]
    return "\n".join(lines + text_table(table, left=(0,)))
