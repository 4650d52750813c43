"""The CPU target's code: a header and one source per dtype, extern "C" per kernel, for one state
and for a batch (vectorised across states with GCC vector types, OpenMP across blocks), and
the compile settings those sources are made for (which kernels go to -Os, lanes per kernel),
printed a second time as a CMake project (library, install rules, package config, pkg-config
file, example program) for C++ users who never run Python (issue 45, docs/cpp.md)."""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import re
from dataclasses import dataclass

from ... import registry
from ...codegen import escape as esc
from ...codegen import trig
from ...codegen.printer import DEFAULT_PART_SIZE, Dialect, print_kernel, tiled
from ...codegen.render import render
from ...codegen.rolled import print_rolled
from ...ir.roll import check_unroll, roll
from ...codegen.sources import DTYPES, c_identifier, prefix_for
from ...errors import RbdgenError
from ...model import RobotModel
from ...toolchain.compiler import cxx_flags

CPU = Dialect("cpu", sincos="rbd_sincos", hoist_trig=True, sincos_group=4, sincos_inline="_inline", spread_constants=True, const_runs=3,
              const_runs_below=5000, epilogue="tiles")  # = LARGE_STATEMENTS (asserted below)

#: a batch runs in parallel only when it carries at least this many operations (~10 µs of the
#: SIMD batch path's work on the 2-core EPYC), and at least what the library measures, once per
#: process, as worth waking its OpenMP team for (twice the wake, in the batch path's work: ~2 M
#: operations on that VM; the template's rbd_parallel_threshold, issue 47)
PARALLEL_OPS = 200_000
#: a single-state call keeps its scratch on the stack up to this size; above it (rolled kernels of big
#: robots: every value that crosses a body's block is in the scratch) in a buffer per thread
STACK_SCRATCH_BYTES = 256 * 1024
#: most dimensions of one state's array in the CPython binding (forward kinematics: nb × 4 × 4)
MAX_NDIM = 4

#: kernels of at least this many statements are compiled for size when no ``opt`` is given:
#: their straight-line parts go to translation units of their own (PARTS_PER_SOURCE statements
#: or so each), compiled with -Os, while the kernel's driver, batch loop and any looped product
#: stay in its main source at -O3. Such kernels outgrow the instruction cache (from ~5 000
#: statements every kernel runs at ~3 G multiplies and adds per second, those up to ~2 500 at
#: 5.3-5.8 G/s; docs/performance.md §7), and smaller code is then faster: TALOS rnea, aba, minv
#: and ∇ID 6-10%, quadruped aba/minv/∇ID 7-12%, iiwa ∇ID 8%; below it -Os is slower (iiwa rnea)
#: or level. Loops want -O3: all of ∇FD at -Os takes TALOS 34 -> 51 µs. Several part sources
#: also let a build spread one big kernel over the cores. docs/performance.md §8 has the runs.
LARGE_STATEMENTS = 5000
assert CPU.const_runs_below == LARGE_STATEMENTS  # constant runs only where kernels are compiled at -O3
PARTS_PER_SOURCE = 6000
#: the rolled kernels' kinds go to translation units of their own, of about this many operations
#: (each kind once per library, however many kernels run it: :func:`_shared_kinds`)
KIND_OPS_PER_SOURCE = 5000
#: the flag of those kernels, and of the others
LARGE_OPT, DEFAULT_OPT = "-Os", "-O3"
#: in rbdgen.toolchain.compiler.cxx_flags (which says why), except for the sources with a looped
#: product: g++ unrolls its short column loops and the SLP vectoriser packs them (TALOS ∇FD
#: 32.2 µs with it, 34.3 without)
NO_SLP = "-fno-tree-slp-vectorize"

#: lanes of the batch path: sources generated on their own (rbdgen generate, no lanes given) leave
#: them to the preprocessor, one register of the instruction set they are compiled for ("auto":
#: 16 bytes on baseline x86-64 and Arm, 32 with AVX, 64 with AVX-512 for the kernels that pay for
#: them; resolve_auto_lanes); rbdgen.build picks them for the -march it compiles for (default_lanes)


@dataclass
class Generated:
    prefix: str
    files: dict          # file name → text
    kernels: dict        # kernel name → PrintedKernel (per dtype: last one)
    header: str
    sources: dict        # dtype → list of source file names (one per kernel)
    lanes: dict          # dtype → lanes of the batch path (the widest kernel's)
    python_sources: dict  # dtype → (CPython module source file name, module name)
    large: dict = None    # dtype → the part sources of large kernels (LARGE_STATEMENTS)
    looped: dict = None   # dtype → the sources with a looped product (∇FD's epilogue)
    kernel_lanes: dict = None  # dtype → {kernel: lanes of its batch path}
    cmake: tuple = ()     # the CMake project's files (CMakeLists.txt, package config, pkg-config, example)
    kinds: dict = None    # dtype → {kinds source: the kernels that call its kinds} (rolled kernels)


#: a model of this many bodies or more has its kernels traced and printed in worker processes,
#: one kernel each, on the machine's cores (a 3 000-link chain's rnea_scan alone takes ~50 s)
PARALLEL_BODIES = 100
_job: tuple = ()  # (model, dtypes, fold, part_size, unroll) for the forked workers


def _print_one(model, k: str, dtypes, fold: bool, part_size: int, unroll, progress=None):
    """({dtype: PrintedKernel}, the kernel's post products) of one kernel, traced (folded, or
    for the rolled lowering with the model's numbers as parameters) and printed."""
    if progress:
        progress(f"tracing {k}")
    # rolled: the same algorithm traced with the model's per-body numbers as parameters (not
    # folded), one piece of code per joint kind (rbdgen.ir.roll)
    kern, rolled = registry.trace_lowered(model, k, unroll, fold)
    if rolled:
        R = roll(kern)
    out = {}
    for dt in dtypes:
        if progress:
            progress(f"printing {k} ({dt})")
        out[dt] = (print_rolled(kern, dt, CPU, rolled=R, share=True) if rolled
                   else print_kernel(kern, dt, CPU, part_size=part_size))
    return out, list(kern.post)


def _print_job(k: str):
    """In a worker: (True, the kernel printed) or (False, None) where it failed (the parent redoes
    it, so that the error is raised there as it would be)."""
    model, dtypes, fold, part_size, unroll = _job
    try:
        return True, _print_one(model, k, dtypes, fold, part_size, unroll)
    except Exception:  # noqa: BLE001 — see above
        return False, None


def _print_kernels(model, kernels, dtypes, fold, part_size, unroll, progress):
    """{kernel: {dtype: PrintedKernel}}, {kernel: post products}: in this process, or for a big
    model (:data:`PARALLEL_BODIES`) in forked workers, one kernel each, biggest first. The
    result is the same either way (each kernel is traced and printed on its own); a worker that
    fails has its kernel redone here, so that its error is raised as it would be."""
    global _job
    printed, posts = {}, {}
    workers = min(len(kernels), os.cpu_count() or 1)
    if workers > 1 and model.nb >= PARALLEL_BODIES and "fork" in multiprocessing.get_all_start_methods():
        _job = (model, tuple(dtypes), fold, part_size, unroll)
        order = sorted(kernels, key=lambda k: -_weight(k))
        ex = None
        try:
            ex = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
            futs = {ex.submit(_print_job, k): k for k in order}
            for n, f in enumerate(concurrent.futures.as_completed(futs), 1):
                ok, val = f.result()
                if ok:
                    k = futs[f]
                    printed[k], posts[k] = val
                    if progress:
                        progress(f"generated {k} ({n}/{len(kernels)}, {workers} processes)")
        except (OSError, concurrent.futures.process.BrokenProcessPool):
            pass  # no processes to be had, or one died: the rest here
        except BaseException:
            # Ctrl-C, SIGTERM (the CLI's cleanup), a bug: the workers end now, not when done
            _stop(ex)
            raise
        finally:
            _job = ()
            if ex is not None:
                ex.shutdown(wait=True, cancel_futures=True)
    for k in kernels:
        if k not in printed:
            printed[k], posts[k] = _print_one(model, k, dtypes, fold, part_size, unroll, progress)
    return printed, posts


def _stop(ex) -> None:
    """End the worker processes of ``ex`` at once (what is queued is cancelled by its shutdown)."""
    if ex is None:
        return
    for p in list(getattr(ex, "_processes", {}).values()):  # CPython's executor keeps them there
        try:
            p.terminate()
        except (OSError, ValueError):
            pass


def _weight(k: str) -> int:
    """A kernel's rough cost to trace, for the order of the workers' queue (the O(n²) and
    log-depth kernels first)."""
    heavy = ("derivatives", "scan", "minv", "crba", "osim", "contact")
    return sum(2 for h in heavy if h in k) + (1 if "aba" in k else 0)


def generate_cpu(model: RobotModel, dtypes=("float64",), kernels=None, *, fold: bool = True,
                 part_size: int = DEFAULT_PART_SIZE, lanes: dict | None = None, name: str | None = None,
                 dense_counts: bool = False, simd: bool = True, python: bool = True,
                 progress=None, unroll=True) -> Generated:
    """Render the CPU sources of ``kernels`` for ``model``. Deterministic: same input → same bytes.
    ``unroll``: True (straight-line code), False (loops over bodies, :mod:`rbdgen.codegen.rolled`)
    or "auto" (:func:`rbdgen.ir.roll.choose`, per kernel)."""
    unroll = check_unroll(unroll)
    kernels = registry.applicable(model, kernels)
    prefix = prefix_for(name or model.name)
    printed, posts = _print_kernels(model, kernels, dtypes, fold, part_size, unroll, progress)
    dense = {}
    if dense_counts:
        for k in kernels:
            dense[k] = registry.trace(model, k, fold=False).op_counts()
    # no version in the sources: a new rbdgen release that prints the same code rewrites no file
    # but the manifest
    robot = esc.comment(model.name)  # names reach generated code only through rbdgen.codegen.escape
    banner = f"Generated by rbdgen from {robot} — do not edit. Regenerate with `rbdgen generate`."
    header = f"{prefix}.h"
    trig_header = f"{prefix}_sincos.hpp"
    files, sources, printed_all, lane_map, py_sources, large, looped, kinds = {}, {}, {}, {}, {}, {}, {}, {}
    kernel_lane = {}
    base = "floating" if model.floating_base else "fixed"
    header_kernels = []
    for dtype in dtypes:
        tag, ctype = DTYPES[dtype]
        spec = (lanes or {}).get(dtype, "auto")
        ks = []
        for k in kernels:
            pk = printed[k][dtype]
            printed_all[k] = pk
            ins, outs = pk.inputs, pk.outputs
            t_args = ", ".join([f"const S* __restrict {a.name}" for a in ins] + [f"S* __restrict {a.name}" for a in outs])
            part_args = ", ".join([f"[[maybe_unused]] const S* __restrict {a.name}" for a in ins]
                                  + [f"[[maybe_unused]] S* __restrict {a.name}" for a in outs])
            c_args = ", ".join([f"const {ctype}* {a.name}" for a in ins] + [f"{ctype}* {a.name}" for a in outs])
            call = ", ".join(a.name for a in ins + outs)
            vcall = ", ".join(f"{a.name}_v" for a in ins + outs)
            offs = ", ".join(f"{a.name} + i * {a.name}_stride" for a in ins + outs)
            # the strided batch entry point: each array followed by its row stride (in elements)
            c_strided = ", ".join([f"const {ctype}* {a.name}, long {a.name}_stride" for a in ins]
                                  + [f"{ctype}* {a.name}, long {a.name}_stride" for a in outs])
            contig = ", ".join(f"{a.name}, {a.size}L" for a in ins + outs)
            # the states-last batch entry point: each array followed by its leading dimension
            c_ld = ", ".join([f"const {ctype}* {a.name}, long {a.name}_ld" for a in ins]
                             + [f"{ctype}* {a.name}, long {a.name}_ld" for a in outs])
            ks.append({
                "name": k, "doc": pk.doc, "inputs": ins, "outputs": outs, "parts": pk.parts, "body": pk.body,
                "scratch": pk.scratch, "scratch_bytes": pk.scratch * (8 if dtype == "float64" else 4),
                "heap_scratch": pk.scratch * (8 if dtype == "float64" else 4) > STACK_SCRATCH_BYTES,
                "tables": pk.tables, "lowering": pk.lowering,
                "counts": pk.counts, "dense": dense.get(k),
                "n_statements": pk.n_statements, "t_args": t_args, "part_args": part_args, "c_args": c_args,
                "call_args": call, "vcall_args": vcall, "offset_args": offs, "c_strided_args": c_strided,
                "contig_args": contig, "c_ld_args": c_ld,
                "out_size": sum(a.size for a in outs), "max_out": max((a.size for a in outs), default=0),
                "row_args": ", ".join(f"{a.name}_r" for a in ins + outs),
                "rows_size": sum(a.size for a in ins + outs), "row_off": _offsets([*ins, *outs]),
                "buffer_size": sum(a.size for a in ins + outs) + pk.scratch,
                "buf_off": _offsets([*ins, *outs], pk.scratch),
            })
            if dtype == dtypes[0]:
                header_kernels.append({"name": k, "doc": pk.doc, "inputs": ins, "outputs": outs, "c_args": {},
                                       "c_strided_args": {}, "c_ld_args": {}, "scratch": {}})
        for hk, kk in zip(header_kernels, ks):
            hk["c_args"][tag] = kk["c_args"]
            hk["c_strided_args"][tag] = kk["c_strided_args"]
            hk["c_ld_args"][tag] = kk["c_ld_args"]
            hk["scratch"][tag] = {"n": kk["scratch"], "bytes": kk["scratch_bytes"], "heap": kk["heap_scratch"],
                                  "macro": f"{prefix}_{kk['name']}_{tag}_WORKSPACE".upper()}
        sources[dtype], large[dtype], looped[dtype] = [], [], []
        kernel_lane[dtype] = {}
        for kk in ks:
            kk["lanes"] = kernel_lanes(spec, kk["counts"]["mul"] + kk["counts"]["add"],
                                       sum(a.size for a in kk["outputs"]), kk["n_statements"])
            kernel_lane[dtype][kk["name"]] = kk["lanes"] if simd else 1
        kinds[dtype] = {}
        for i, group in enumerate(groups := _shared_kinds(ks, printed, dtype, kernel_lane[dtype])):
            ksrc = f"{prefix}_kinds{i}_{tag}.cpp"
            files[ksrc] = render("cpu/kinds.cpp.j2", banner=banner, robot=robot, dtype=dtype, ctype=ctype,
                                 header=header, trig_header=trig_header, prefix=prefix, tag=tag, simd=simd,
                                 kinds=group, part=i, n_parts=len(groups))
            sources[dtype].append(ksrc)
            kinds[dtype][ksrc] = sorted({u for k in group for u in k["user_list"]})
        for kk in ks:
            src = f"{prefix}_{kk['name']}_{tag}.cpp"
            nl = kk["lanes"]
            if posts[kk["name"]]:
                looped[dtype].append(src)
            kk["part_files"] = []
            if kk["n_statements"] >= LARGE_STATEMENTS and kk["parts"]:
                n_in, n_out = len(kk["inputs"]), len(kk["outputs"])
                kk["part_types"] = ", ".join(["const @*"] * n_in + ["@*"] * (n_out + 1))
                for i, group in enumerate(_group_parts(kk["parts"], PARTS_PER_SOURCE)):
                    psrc = f"{prefix}_{kk['name']}_parts{i}_{tag}.cpp"
                    kk["part_files"].append(psrc)
                    files[psrc] = render("cpu/parts.cpp.j2", banner=banner, robot=robot, dtype=dtype, ctype=ctype,
                                         lanes=nl if isinstance(nl, int) else "auto", wide=nl == "auto-wide",
                                         header=header, trig_header=trig_header, prefix=prefix, tag=tag,
                                         k=kk, parts=group, first=group[0].name, last=group[-1].name, main=src,
                                         simd=simd)
                    sources[dtype].append(psrc)
                    large[dtype].append(psrc)
            files[src] = render("cpu/kernels.cpp.j2", banner=banner, robot=robot, dtype=dtype, ctype=ctype,
                                lanes=nl if isinstance(nl, int) else "auto", wide=nl == "auto-wide",
                                header=header, trig_header=trig_header, prefix=prefix, tag=tag, kernels=[kk], simd=simd,
                                parallel_ops=PARALLEL_OPS, products=any(tiled(mm, dtype, CPU) for mm in posts[kk["name"]]))
            sources[dtype].append(src)
        # the widest: a multiple of every kernel's lanes (all powers of two); "auto": the compiler decides
        ls = list(kernel_lane[dtype].values())
        lane_map[dtype] = "auto" if any(isinstance(x, str) for x in ls) else max(ls, default=1)
        if python:
            modname = f"{prefix}_{tag}_ext" + ("" if fold else "_dense")
            pyk = []
            built = {kk["name"] for kk in ks}
            for kk in ks:
                args = []
                for a, is_out in [(x, 0) for x in kk["inputs"]] + [(x, 1) for x in kk["outputs"]]:
                    shp = tuple(a.shape)
                    if len(shp) > MAX_NDIM:
                        raise RbdgenError(f"{kk['name']}: array {a.name!r} has {len(shp)} dimensions; the "
                                          f"Python binding takes at most {MAX_NDIM}")
                    args.append({"name": a.name, "ndim": len(shp), "out": is_out,
                                 "shape": ", ".join(str(x) for x in shp + (0,) * (MAX_NDIM - len(shp)))})
                ptrs = ", ".join(f"({ctype}*)b[{i}].buf" if i >= len(kk["inputs"]) else f"(const {ctype}*)b[{i}].buf"
                                 for i in range(len(args)))
                n_in = len(kk["inputs"])
                pyk.append({"name": kk["name"], "args": args, "arg_names": ", ".join(a["name"] for a in args),
                            # kern.rnea(q, v, a, f_ext=x) is rnea_fext(q, v, a, x) where both are built
                            "variants": [{"kw": esc.c_string(kw), "kernel": v} for kw, v in registry.variants(kk["name"]).items()
                                         if v in built],
                            "in_names": ", ".join(a["name"] for a in args[:n_in]), "n_in": n_in,
                            "n_out": len(args) - n_in, "fast_ptrs": ", ".join(f"p[{i}]" for i in range(len(args))),
                            "single": f"{prefix}_{kk['name']}_{tag}", "batch": f"{prefix}_{kk['name']}_{tag}_batch",
                            "ptrs": ptrs, "doc": esc.c_string(kk["doc"]),
                            "strided_ptrs": ", ".join(f"{pp}, st[{i}]" for i, pp in enumerate(ptrs.split(", "))),
                            "fast_strided_ptrs": ", ".join(f"p[{i}], s[{i}]" for i in range(len(args)))})
            src = f"{prefix}_python_{tag}.cpp"
            files[src] = render("cpu/pymodule.cpp.j2", banner=banner, robot=robot, dtype=dtype, ctype=ctype,
                                fmt="d" if dtype == "float64" else "f", header=header,
                                npy_type="NPY_DOUBLE" if dtype == "float64" else "NPY_FLOAT", kernels=pyk, modname=modname, robot_str=esc.c_string(model.name),
                                max_ndim=MAX_NDIM, max_out=max((k["n_out"] for k in pyk), default=1))
            py_sources[dtype] = (src, modname)
    files[header] = render("cpu/kernels.h.j2", banner=banner, robot=robot, nb=model.nb, nq=model.nq,
                           nv=model.nv, base=base, guard=prefix.upper() + "_H", prefix=prefix,
                           kernels=header_kernels, dtypes=[{"tag": DTYPES[d][0], "ctype": DTYPES[d][1]} for d in dtypes],
                           floating=model.floating_base, robot_str=esc.c_string(model.name), simd=simd,
                           **_layout(model))
    files[trig_header] = render("cpu/sincos.hpp.j2", banner=banner, robot=robot, prefix=prefix,
                                guard=prefix.upper() + "_SINCOS_HPP", **trig.template_constants())
    cmake = _cmake_project(files, model, name or model.name, prefix, banner, robot, header, trig_header, dtypes,
                           sources, large, looped, py_sources, header_kernels)
    return Generated(prefix, files, printed_all, header, sources, lane_map, py_sources, large, looped, kernel_lane,
                     cmake, kinds)


# ---- the header's names and coordinates ---------------------------------------------------------

def _layout(model) -> dict:
    """What the header says of the robot's coordinates: per joint (one per body, in the kernels'
    body order) its name, type, body, where its entries start in q and v and how many there are,
    as rows of a comment table (names through :func:`rbdgen.codegen.escape.comment`) and as C
    string bodies (:func:`rbdgen.codegen.escape.c_string`): a C++ user needs no manifest."""
    mimic = getattr(model, "mimic", None) or {}
    rows = []
    for b in range(model.nb):
        nq, nv = model.nq_joint(b), model.nv_joint(b)
        q0, v0 = model.q_start[b], model.v_start[b]
        qs = "-" if nq == 0 else f"q[{q0}]" if nq == 1 else f"q[{q0}..{q0 + nq})"
        vs = "-" if nv == 0 else f"v[{v0}]" if nv == 1 else f"v[{v0}..{v0 + nv})"
        if b in mimic:
            lead, mult, off = mimic[b]
            note = f"mimic: {mult!r} * {esc.comment(model.joint_names[lead])} + {off!r}, no coordinates of its own"
        elif model.joint_types[b] == "floating":
            note = "q = [x y z qx qy qz qw] (unit quaternion), v = [linear; angular] in the base frame"
        elif model.joint_types[b] == "spherical":
            note = "q = [qx qy qz qw] (unit quaternion), v = angular velocity in the body frame"
        elif model.joint_types[b] == "planar":
            note = "q = [x y theta] in the joint frame's x-y plane, v = [vx vy omega] in the body frame"
        else:
            note = ""
        rows.append({"joint": esc.comment(model.joint_names[b]), "type": model.joint_types[b],
                     "body": esc.comment(model.body_names[b]), "q": qs, "v": vs, "note": note,
                     "joint_str": esc.c_string(model.joint_names[b]), "body_str": esc.c_string(model.body_names[b]),
                     "q0": q0, "nq": nq, "v0": v0, "nv": nv})
    # a table whose columns line up; the widths come from names, so a name changes comment
    # lines only (tests/test_names.py)
    wj = max([len("joint"), *(len(r["joint"]) for r in rows)])
    wt = max([len("type"), *(len(r["type"]) for r in rows)])
    wb = max([len("body"), *(len(r["body"]) for r in rows)])
    wq = max([len("q"), *(len(r["q"]) for r in rows)])
    wv = max([len("v"), *(len(r["v"]) for r in rows)])

    def line(i, j, t, bd, q, v, note):
        return f"{i:>3}  {j:<{wj}}  {t:<{wt}}  {bd:<{wb}}  {q:<{wq}}  {v:<{wv}}  {note}".rstrip()

    table = [line("", "joint", "type", "body", "q", "v", "")]
    table += [line(str(b), r["joint"], r["type"], r["body"], r["q"], r["v"], r["note"]) for b, r in enumerate(rows)]
    frames = [{"comment": esc.comment(f), "str": esc.c_string(f)} for f in getattr(model, "frames", ())]
    return {"joints": rows, "layout_table": table, "frames": frames}


# ---- the CMake project --------------------------------------------------------------------------

#: rbdgen's compile flags that CMake spells its own way (the standard, position-independent code)
#: or that depend on the source (the optimisation level, SLP vectorisation): every other flag of
#: :func:`rbdgen.toolchain.compiler.cxx_flags` is passed to every source as it is
_CMAKE_OWN = ("-std=c++17", "-fPIC", DEFAULT_OPT, NO_SLP)


def _cmake_flags() -> list:
    flags = cxx_flags(opt=DEFAULT_OPT, march=None, openmp=False)
    missing = [f for f in _CMAKE_OWN if f not in flags]
    assert not missing, f"rbdgen.toolchain.compiler.cxx_flags no longer has {missing}: update the CMake project"
    return [f for f in flags if f not in _CMAKE_OWN]


def _example_inputs(model, kernel: dict, ctype: str) -> list:
    """Inputs of the example program: a configuration near the neutral one (q: the quaternion of a
    floating base is the identity, every 1-DoF joint at 0.1·(its index + 1)), other arrays a ramp."""
    out = []
    for a in kernel["inputs"]:
        if a.name == "q" and a.size == model.nq:
            vals = [0.0] * model.nq
            for b in range(model.nb):
                q0, nq = model.q_start[b], model.nq_joint(b)
                if model.joint_types[b] == "floating":
                    vals[q0 + 6] = 1.0
                elif model.joint_types[b] == "spherical":  # the identity quaternion
                    vals[q0 + 3] = 1.0
                elif nq == 1:
                    vals[q0] = round(0.1 * (q0 + 1), 10)
        else:
            vals = [round(0.05 * ((i % 7) + 1), 10) for i in range(a.size)]
        suffix = "f" if ctype == "float" else ""
        out.append({"name": a.name, "size": a.size, "init": ", ".join(f"{x!r}{suffix}" for x in vals)})
    return out


def _cmake_project(files: dict, model, name: str, prefix: str, banner: str, robot: str, header: str, trig_header: str,
                   dtypes, sources: dict, large: dict, looped: dict, py_sources: dict, header_kernels: list) -> tuple:
    """Add the CMake project's files to ``files`` and return their names: ``CMakeLists.txt``
    (library ``rbdgen::<name>`` from the kernel sources with rbdgen's flags per source, options,
    install rules), the package config and pkg-config templates it configures, and an example
    program. Only the package's name and file names reach code here; the robot's name, comments."""
    pkg = c_identifier(name)  # a package's name already is one (rbdgen.package.write.check_package_name)
    upper = prefix.upper()
    groups = {"default": [], "large": [], "looped": []}
    for d in dtypes:
        for src in sources[d]:
            kind = "large" if src in large[d] else "looped" if src in looped[d] else "default"
            groups[kind].append(src)
    python = [py_sources[d][0] for d in dtypes if d in py_sources]
    names = {"cmake": "CMakeLists.txt", "config": f"{prefix}-config.cmake.in", "pc": f"{prefix}.pc.in",
             "example": f"{prefix}_example.cpp"}
    dtype = dtypes[0]
    tag, ctype = DTYPES[dtype]
    first = next((k for k in header_kernels if k["name"] == "rnea"), header_kernels[0])
    ctx = dict(banner=banner, robot=robot, prefix=prefix, upper=upper, package=pkg, header=header,
               trig_header=trig_header, groups=groups, python=python, flags=_cmake_flags(), default_opt=DEFAULT_OPT,
               large_opt=LARGE_OPT, no_slp=NO_SLP, names=names, large_statements=LARGE_STATEMENTS)
    files[names["cmake"]] = render("cpu/CMakeLists.txt.j2", **ctx)
    files[names["config"]] = render("cpu/config.cmake.in.j2", **ctx)
    files[names["pc"]] = render("cpu/pkgconfig.pc.in.j2", **ctx)
    files[names["example"]] = render(
        "cpu/example.cpp.j2", **ctx, tag=tag, ctype=ctype, kernel=first, inputs=_example_inputs(model, first, ctype),
        call_in=", ".join(a.name for a in first["inputs"]), call_out=", ".join(a.name for a in first["outputs"]),
        scratch=first["scratch"][tag])
    return tuple(names.values())


def _shared_kinds(ks: list, printed: dict, dtype: str, lanes: dict) -> list:
    """The rolled kernels' kinds (``print_rolled(share=True)``), each text once, named
    ``rbd_kind<i>`` (each kernel's tables and body, ``ks``' dicts, renamed to match). A kind that
    only one kernel calls is defined in that kernel's source, where it was printed (static: g++
    may specialise it for its one caller; out of it, the quadruped's aba ran 2 % slower); those
    that several call go to sources of their own: returned in groups of about
    :data:`KIND_OPS_PER_SOURCE` operations (a translation unit each), in the order the kernels
    first call them, the biggest kernel first. Per kind: its name, text, the parameters of its
    explicit instantiations (``@S@`` for the scalar), the vector widths it is instantiated for,
    its users."""
    index: dict = {}
    kinds: list = []
    # the biggest kernels' kinds first, so that each one's kinds lie together in the library's code
    # (TALOS's ∇FD calls 232 kinds): a call touches fewer pages of it
    order = sorted(ks, key=lambda kk: -sum(sk.ops for sk in printed[kk["name"]][dtype].kinds))
    for kk in order:
        for sk in printed[kk["name"]][dtype].kinds:
            i = index.get(sk.text)
            if i is None:
                i = index[sk.text] = len(kinds)
                kinds.append({"name": f"rbd_kind{i}", "text": sk.text.replace("@KIND@", f"rbd_kind{i}"),
                              "params": re.sub(r"\bS\*", "@S@*", sk.params), "ops": sk.ops, "like": sk.like,
                              "user_list": [], "lanes": set()})
            k = kinds[i]
            if kk["name"] not in k["user_list"]:
                k["user_list"].append(kk["name"])
            k["lanes"].add(lanes[kk["name"]])
    for kk in order:
        pk = printed[kk["name"]][dtype]
        if not pk.kinds:
            continue
        rename = {sk.local: kinds[index[sk.text]]["name"] for sk in pk.kinds}
        own = {kinds[index[sk.text]]["name"]: kinds[index[sk.text]]["text"] for sk in pk.kinds
               if len(kinds[index[sk.text]]["user_list"]) == 1}
        pat = re.compile(r"\b(" + re.escape(kk["name"]) + r"_k\d+)(?=[<(])")
        sub = lambda m: rename[m.group(1)]  # noqa: E731
        tables = []
        for line in kk["tables"]:
            line = pat.sub(sub, line)
            decl = re.match(r"template <typename S> __attribute__\(\(visibility\(\"hidden\"\)\)\) void (rbd_kind\d+)\(", line)
            if decl and decl.group(1) in own:  # its only caller's: defined here
                tables += own[decl.group(1)].replace('__attribute__((noinline, visibility("hidden")))',
                                                     "static __attribute__((noinline))").splitlines()
            else:
                tables.append(line)
        kk["tables"] = tables
        kk["body"] = [pat.sub(sub, line) for line in kk["body"]]
    shared = [k for k in kinds if len(k["user_list"]) > 1]
    for k in shared:
        k["users"] = ", ".join(k["user_list"])
        widths = []  # C expressions of the vector widths, each instantiated once (#if: not equal to an earlier one)
        for lane in sorted(k.pop("lanes"), key=str):
            w = {"auto": "RBD_LANES_AUTO", "auto-wide": "RBD_LANES_WIDE"}.get(lane, str(lane))
            if w != "1" and w not in widths:
                widths.append(w)
        k["widths"] = [{"n": w, "guard": " && ".join(f"{w} != {e}" for e in widths[:j])}
                       for j, w in enumerate(widths)]
    groups, ops = [], KIND_OPS_PER_SOURCE
    for k in shared:
        if ops >= KIND_OPS_PER_SOURCE:
            groups.append([])
            ops = 0
        groups[-1].append(k)
        ops += k["ops"]
    return groups


def _group_parts(parts, size: int) -> list:
    """``parts`` in order, cut into consecutive groups of about ``size`` statements."""
    groups, n = [[]], 0
    for p in parts:
        if groups[-1] and n + len(p.lines) > size:
            groups.append([])
            n = 0
        groups[-1].append(p)
        n += len(p.lines)
    return groups


def _offsets(arrays, scratch: int = 0) -> dict:
    """Offsets of ``arrays`` laid end to end (and of the scratch ``w`` after them)."""
    offs, o = {}, 0
    for a in arrays:
        offs[a.name] = o
        o += a.size
    offs["w"] = o
    return offs


#: with AVX-512, a kernel's batch path takes 64-byte vectors (8 doubles) when it does at least
#: this many multiplies and adds per value it writes, and has fewer statements than
#: WIDE_MAX_STATEMENTS; otherwise 32-byte ones. Measured (2-core AMD EPYC, Zen 5, 256 states, one
#: thread, 8 lanes against 4): `rnea` 1.5–1.9× faster, `aba` 1.6–1.75×, M⁻¹ 1.14–1.4×, ∇ID of the
#: iiwa and the quadruped 1.1–1.2×; but kernels that write many values for their arithmetic lose
#: (floating-base CRBA 0.78–0.89×, FK 0.86–0.96×, the quadruped's and TALOS's frame Jacobians
#: 0.72–0.85×, the stale-data kernels 0.81–0.88×: the lane transposes and copies grow with the
#: lanes), and so do TALOS's ∇ID and ∇FD (0.91×, 0.92×: 44 k and 83 k statements, spilling 64-byte
#: values); docs/performance.md §17
WIDE_OPS_PER_VALUE = 10
WIDE_MAX_STATEMENTS = 40_000


def kernel_lanes(lanes, ops: int, values_out: int, statements: int):
    """A kernel's lanes: ``lanes`` itself when it is one number; from ``(narrow, wide)``, the wide
    one for a kernel with ≥ WIDE_OPS_PER_VALUE multiplies and adds per output value and fewer
    than WIDE_MAX_STATEMENTS statements. ``"auto"`` (sources generated without lanes: the
    compiler's instruction set decides, see :func:`resolve_auto_lanes`): ``"auto-wide"`` for such
    a kernel, else ``"auto"``."""
    if isinstance(lanes, int):
        return lanes
    pays = ops >= WIDE_OPS_PER_VALUE * max(values_out, 1) and statements < WIDE_MAX_STATEMENTS
    if lanes == "auto":
        return "auto-wide" if pays else "auto"
    narrow, wide = lanes
    return wide if pays else narrow


def resolve_auto_lanes(lanes, dtype: str, register_bytes: int) -> int:
    """What the preprocessor makes of a source generated with ``"auto"``/``"auto-wide"`` lanes
    (templates/cpu/prelude.cpp.j2), compiled for registers of ``register_bytes``: one register's
    worth, 32 bytes on AVX-512 unless the kernel is "auto-wide" (doubles only)."""
    if isinstance(lanes, int):
        return lanes
    size = 8 if dtype == "float64" else 4
    if register_bytes > 32 and not (lanes == "auto-wide" and dtype == "float64"):
        register_bytes = 32
    return register_bytes // size
