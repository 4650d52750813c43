"""The HLS target's code: Vitis-HLS-style C++ (one top function per kernel), a C-simulation harness, a
self-checking testbench and a synthesis Tcl script; plus the cost model of ``inspect --cost
--target hls``.

The statements come from the one printer (:func:`print_kernel`) with the :data:`HLS` dialect:
literals are written ``S(0.5)`` because ``ap_fixed`` has no arithmetic with ``double``, and
``rbd_sin``/``rbd_cos`` are ``hls::sin``/``hls::cos`` under synthesis and the standard library
(through ``double``) in C simulation. Kernel bodies are templates over the scalar ``S``: the
top function instantiates them with the chosen numeric type, the testbench also with
``double`` (the quantisation error of a format is measured against the same statements in
double precision). Templates only place what Python computed (see ``templates/hls/``).

Numeric type: ``double``, ``float`` or ``ap_fixed<W, I, Q, O>`` (W total bits, I integer bits
including the sign, Q rounding mode, O overflow mode), chosen at generation time. Every
statement's result is quantised to that type, as in hardware; so are the constants and the
inputs.
"""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, replace

import numpy as np

from ... import registry
from ...codegen import escape as esc
from ...codegen.printer import DEFAULT_PART_SIZE, Dialect, print_kernel
from ...codegen.rolled import print_rolled
from ...codegen.render import render
from ...codegen.sources import prefix_for
from ...errors import RbdgenError, RbdgenWarning
from ...model import RobotModel
from ...textutil import text_table
from ..base import TOL64
from .cordic import cordic
from ...ir.roll import roll
from .cost import kernel_cost, rolled_cost
from .schedule import PARTS, budget_cost, epilogue_all_at_once, part_preset

#: the rolled lowering's kinds (--unroll no): each kind's function one module of the design,
#: shared by its members (seed 001's "folding" of multiplier resources over the links), not
#: inlined into the top function's one datapath
ROLLED_PRAGMA = "#pragma HLS INLINE off"
#: the one printer's dialect for HLS: ``S(…)`` literals (valid for double, float and ap_fixed);
#: one ``rbd_sincos`` per angle (a CORDIC for ap_fixed); divisions through ``rbd_div``, which
#: saturates a zero divisor's quotient and sets the flag ``dz`` that every part is passed; the
#: products printed dense (B's structural zeros included: a pipelined element loop wants the
#: same k products for every element), summed in local accumulators, every output port written
#: once and never read
HLS = Dialect("hls", literal_suffix={"hls": ""}, literal_wrap="S({})", zero="S(0.0)", sincos="rbd_sincos",
              op_spelling={"div": "rbd_div({0}, {1}, dz)"}, extra_args=", dz", extra_params=", bool& dz",
              epilogue="dot", epilogue_inner_pragma="#pragma HLS UNROLL", reuse_workspace=False,
              rolled_qualifier="static", rolled_static=True, rolled_pragma=ROLLED_PRAGMA)
#: the "dot" epilogue's element loop in a design that is not pipelined as a whole: one element
#: per cycle, its k products unrolled (k multipliers; the inner loop's UNROLL says so, though
#: PIPELINE implies it); with --ii the whole function is pipelined and the tool unrolls every
#: loop in it
EPILOGUE_PIPELINE = "#pragma HLS PIPELINE II=1"

ROUNDING = ("AP_RND", "AP_RND_ZERO", "AP_RND_MIN_INF", "AP_RND_INF", "AP_RND_CONV", "AP_TRN", "AP_TRN_ZERO")
OVERFLOW = ("AP_SAT", "AP_SAT_ZERO", "AP_SAT_SYM", "AP_WRAP", "AP_WRAP_SM")
INTERFACES = ("ap_memory", "s_axilite", "m_axi")
#: widest ap_fixed accepted (ap_fixed itself goes further; nothing here needs more)
MAX_W = 64
DEFAULT_PART = "xcvu9p-flga2104-2-e"
DEFAULT_CLOCK_MHZ = 250.0
#: the clocks a design may target: an FPGA fabric runs from a few MHz to about a GHz (the
#: synthesis script's period, 1000/f ns, is printed to 3 decimals: 1e-300 MHz wrote 300 digits)
MIN_CLOCK_MHZ = 1.0
MAX_CLOCK_MHZ = 2000.0
DEFAULT_ROUNDING = "AP_RND_CONV"
DEFAULT_OVERFLOW = "AP_SAT"


# ---- the numeric type ------------------------------------------------------------------------

@dataclass(frozen=True)
class NumType:
    """The scalar type of the generated datapath."""

    kind: str                 # "double" | "float" | "fixed"
    W: int = 0
    I: int = 0                # noqa: E741 (the HLS name)
    rounding: str = DEFAULT_ROUNDING
    overflow: str = DEFAULT_OVERFLOW

    @property
    def ctype(self) -> str:
        if self.kind == "fixed":
            return f"ap_fixed<{self.W}, {self.I}, {self.rounding}, {self.overflow}>"
        return self.kind

    @property
    def tag(self) -> str:
        """Short name used in file and symbol names."""
        if self.kind != "fixed":
            return {"double": "f64", "float": "f32"}[self.kind]
        t = f"fx{self.W}_{self.I}"
        if (self.rounding, self.overflow) != (DEFAULT_ROUNDING, DEFAULT_OVERFLOW):
            t += "_" + self.rounding[3:].lower() + "_" + self.overflow[3:].lower()
        return t

    @property
    def bits(self) -> int:
        return {"double": 64, "float": 32}.get(self.kind, self.W)

    @property
    def frac_bits(self) -> int:
        return self.W - self.I

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"ap_fixed<{self.W},{self.I}> ({self.frac_bits} fractional bits, {self.rounding}, {self.overflow})"
        return self.kind


def parse_fixed(text) -> tuple[int, int]:
    """``"32,16"`` (or a (W, I) pair) → (W, I), checked; RbdgenError names what is wrong."""
    if isinstance(text, (tuple, list)):
        parts = list(text)
    else:
        parts = [p.strip() for p in str(text).replace(" ", ",").split(",") if p.strip()]
    if len(parts) != 2:
        raise RbdgenError(f"--fixed expects W,I (total bits, integer bits), e.g. 32,16; got {text!r}")
    try:
        W, I = (int(p) for p in parts)  # noqa: E741
    except (TypeError, ValueError):
        raise RbdgenError(f"--fixed expects two integers W,I such as 32,16; got {text!r}") from None
    return W, I


def numeric_type(dtype: str = "float64", fixed=None, rounding: str = DEFAULT_ROUNDING,
                 overflow: str = DEFAULT_OVERFLOW) -> NumType:
    """The datapath type: ``fixed=(W, I)`` (or "W,I") for ap_fixed, else ``dtype`` float64 /
    float32 for double / float."""
    if fixed is not None:
        W, I = parse_fixed(fixed)  # noqa: E741
        if not 2 <= W <= MAX_W:
            raise RbdgenError(f"--fixed {W},{I}: total width W must be between 2 and {MAX_W} bits, got {W}")
        if not 1 <= I <= W:
            raise RbdgenError(f"--fixed {W},{I}: integer bits I (sign included) must be between 1 and W={W}, got {I}")
        if rounding not in ROUNDING:
            raise RbdgenError(f"unknown rounding mode {rounding!r} (one of {', '.join(ROUNDING)})")
        if overflow not in OVERFLOW:
            raise RbdgenError(f"unknown overflow mode {overflow!r} (one of {', '.join(OVERFLOW)})")
        return NumType("fixed", W, I, rounding, overflow)
    dt = np.dtype(dtype).name if not isinstance(dtype, str) or dtype in ("float64", "float32") else dtype
    kinds = {"float64": "double", "double": "double", "float32": "float", "float": "float"}
    if dt not in kinds:
        raise RbdgenError(f"HLS dtype must be float64 (double) or float32 (float), or give fixed=(W, I); got {dtype!r}")
    return NumType(kinds[dt])


# ---- generation ------------------------------------------------------------------------------

def port_limited_ii(inputs, outputs, interface: str) -> int:
    """The smallest initiation interval the ports allow (``inputs``/``outputs``: sizes in words).
    ``ap_memory``: 1 (every word its own register port). ``s_axilite``: each array is a memory
    in the AXI4-Lite adapter with one port toward the kernel, one word per cycle: the largest
    array. ``m_axi``: all arrays share one AXI master (``bundle=gmem``), whose read and write
    channels each move one word per cycle: the larger of the words read and the words written."""
    if interface == "ap_memory":
        return 1
    if interface == "s_axilite":
        return max(list(inputs) + list(outputs))
    return max(sum(inputs), sum(outputs))


def _check_ii_ports(k: str, ii, inputs, outputs, interface: str) -> None:
    limit = port_limited_ii(inputs, outputs, interface)
    if ii is not None and ii < limit:
        warnings.warn(f"--ii {ii}: the {interface} ports of {k} move one word per cycle, so a new state can start "
                      f"every {limit} cycles at best; the tool will not reach II={ii} (ask for --ii {limit}, or "
                      "--interface ap_memory)", RbdgenWarning, stacklevel=3)


@dataclass
class GeneratedHLS:
    prefix: str
    numtype: NumType
    files: dict           # file name → text
    kernels: dict         # kernel name → PrintedKernel
    header: str
    sources: list         # kernel sources (synthesizable), one per kernel
    harness: str          # C-simulation harness (extern "C", double in/out) for Python
    harness_prefix: str   # symbol prefix of the harness functions
    testbench: str
    tcl: str
    csim_ops: str | None = None  # the fast C simulation's operators of an ap_fixed format (csim_format)


def _c_float(x: float) -> str:
    s = repr(float(x))
    return s if ("e" in s or "." in s or "n" in s) else s + ".0"


def generate_hls(model: RobotModel, numtype: NumType | None = None, kernels=None, *, ii: int | None = None,
                 interface: str = "ap_memory", part: str = DEFAULT_PART, clock_mhz: float = DEFAULT_CLOCK_MHZ,
                 name: str | None = None, part_size: int = DEFAULT_PART_SIZE, tb_states: int = 4,
                 tb_tol: float | None = None, fold: bool = True, dsp_budget: int | None = None,
                 progress=None, unroll=True) -> GeneratedHLS:
    """Render the HLS sources of ``kernels`` for ``model``. Deterministic: same input → same bytes.

    ``ii``: when given, each top function is pipelined with ``#pragma HLS PIPELINE II=ii``
    (throughput: a new state every ``ii`` cycles, the datapath fully spatial); otherwise the
    design is latency-oriented (one evaluation at a time, operators shared by the scheduler).
    ``interface``: ``ap_memory`` (default: port arrays completely partitioned into registers,
    lowest latency), ``s_axilite`` (registers on an AXI4-Lite slave, for a processor-attached
    accelerator) or ``m_axi`` (arrays in external memory); the last two copy the ports into
    local, completely partitioned arrays first.

    ``dsp_budget``: each kernel's top function within that many DSP48E2 slices: the operators a
    list schedule within the budget uses (rbdgen/targets/hls/schedule.py) become ``ALLOCATION``
    limits, the CORDIC a shared pipelined unit; the arithmetic, and so the C simulation, is
    unchanged bit for bit. ``part``: a part number, or a preset (``PARTS``: vcu118, u250, u280,
    zcu102, zu9eg, zu3eg), which for an ap_fixed datapath also sets ``dsp_budget`` to the
    part's DSP slices unless one is given (a larger one is an error).

    ``unroll``: True (the straight-line datapath), False (rolled, :mod:`rbdgen.codegen.rolled`:
    a module per kind of body, run over its members from ROM tables) or "auto" (rolled from
    :data:`rbdgen.ir.roll.AUTO_OPS` operations). With ``ii`` a rolled kernel's modules and its
    runs' loops are pipelined (:func:`rolled_dialect`), not the top function. A rolled kernel
    takes no ``dsp_budget`` (the list schedule is the straight-line datapath's); a part
    preset's budget does not apply to it.
    """
    numtype = numtype or NumType("double")
    part_name, preset = part, part_preset(part)
    _check_rolled_options(unroll, dsp_budget)
    part, dsp_budget = resolve_part(part, dsp_budget, numtype, ii)
    if ii is not None and (not isinstance(ii, int) or ii < 1):
        raise RbdgenError(f"II must be a positive integer, got {ii!r}")
    if interface not in INTERFACES:
        raise RbdgenError(f"unknown interface {interface!r} (one of {', '.join(INTERFACES)})")
    why = _clock_problem(clock_mhz)
    if why:
        raise RbdgenError(f"clock must be {why}, got {clock_mhz!r}")
    kernels = registry.applicable(model, kernels)
    prefix = prefix_for(name or model.name)
    robot = esc.comment(model.name)  # names reach generated code only through rbdgen.codegen.escape
    banner = (f"Generated by rbdgen from {robot} for HLS ({numtype.describe()}) — do not edit. "
              f"Regenerate with `rbdgen generate --target hls`.")
    header = f"{prefix}.h"
    ns = f"{prefix}_impl"
    data_t = f"{prefix}_data_t"
    printed, ks = {}, []
    dialect = replace(HLS, epilogue_pragma=EPILOGUE_PIPELINE if ii is None else "")
    for k in kernels:
        if progress:
            progress(f"tracing {k}")
        kern, rolled = registry.trace_lowered(model, k, unroll, fold)
        alloc, kdialect = [], dialect
        if dsp_budget is not None and not rolled:
            if progress:
                progress(f"scheduling {k} within {dsp_budget} DSPs")
            bc = budget_cost(kern, numtype, clock_mhz, dsp_budget)
            alloc = budget_pragmas(bc)
            if preset and bc["lut"] > preset[2]:
                warnings.warn(f"{k} within {dsp_budget} DSPs needs ~{bc['lut']} LUTs by the cost model, more than the "
                              f"{preset[2]} of --part {part_name}: sharing a few multipliers among many products "
                              "costs wide operand multiplexers (give a larger --dsp-budget, or a larger part)",
                              RbdgenWarning, stacklevel=2)
            e_ii, e_u = bc["epilogue_plan"]
            kdialect = replace(dialect, **epilogue_pragmas(kern, e_ii, e_u))
        if progress:
            progress(f"printing {k} (hls, {numtype.ctype})")
        if rolled:  # every workspace slot written once: its accesses carry the data's dependences only
            pk = print_rolled(kern, "hls", rolled_dialect(kdialect, ii), rolled=roll(kern, reuse=False))
        else:
            pk = print_kernel(kern, "hls", kdialect, part_size=part_size)
        printed[k] = pk
        ins, outs = pk.inputs, pk.outputs
        _check_ii_ports(k, ii, [a.size for a in ins], [a.size for a in outs], interface)
        arrays = [{"name": a.name, "size": a.size, "out": False} for a in ins] + \
                 [{"name": a.name, "size": a.size, "out": True} for a in outs]
        ks.append({
            "name": k, "doc": pk.doc, "counts": pk.counts, "parts": pk.parts, "body": pk.body,
            "scratch": pk.scratch, "n_statements": pk.n_statements, "arrays": arrays, "divides": pk.counts["div"] > 0,
            "alloc": alloc if not rolled else [], "rolled": rolled, "tables": pk.tables,
            "inputs": [a for a in arrays if not a["out"]], "outputs": [a for a in arrays if a["out"]],
            "top": f"{prefix}_{k}",
            "t_args": ", ".join([f"const S* {a.name}" for a in ins] + [f"S* {a.name}" for a in outs]),
            "part_args": ", ".join([f"const S* {a.name}" for a in ins]
                                   + [f"S* {a.name}" for a in outs]),
            "top_args": ", ".join([f"const {data_t} {a.name}[{a.size}]" for a in ins]
                                  + [f"{data_t} {a.name}[{a.size}]" for a in outs]),
            "csim_args": ", ".join([f"const {ns}::csim_t {a.name}[{a.size}]" for a in ins]
                                   + [f"{ns}::csim_t {a.name}[{a.size}]" for a in outs]),
            "ref_args": ", ".join([f"const double* {a.name}" for a in ins] + [f"double* {a.name}" for a in outs]),
            "c_args": ", ".join([f"const double* {a.name}" for a in ins] + [f"double* {a.name}" for a in outs]),
            "call_args": ", ".join(a.name for a in ins + outs),
            "local_args": ", ".join(f"{a.name}_l" for a in ins + outs),
            "offset_args": ", ".join(f"{a.name} + i * {a.size}" for a in ins + outs),
        })
    fixed = numtype.kind == "fixed"
    W = numtype.W
    # a zero divisor's saturated quotient: the format's extremes (AP_SAT_SYM: ±max)
    sym = numtype.overflow == "AP_SAT_SYM"
    raw = dict(raw_max=f"{2 ** (W - 1) - 1}LL", raw_min=f"-{2 ** (W - 1) - 1}LL" if sym else f"(-{2 ** (W - 1) - 1}LL - 1)",
               raw_max_bits=f"0x{2 ** (W - 1) - 1:X}ULL", raw_min_bits=f"0x{2 ** (W - 1) + (1 if sym else 0):X}ULL",
               msb=W - 1) if fixed else {}
    cordic_lines = cordic(numtype.W, numtype.I).c_function("rbd_sincos", data_t, shared=dsp_budget is not None) \
        if fixed else []
    fmt = csim_format(numtype) if fixed else {}
    ctx = dict(**raw, **{k: v for k, v in fmt.items() if k != "fmt_text"}, cordic_lines=cordic_lines,
               banner=banner, robot=robot, robot_str=esc.c_string(model.name), prefix=prefix, ns=ns, data_t=data_t,
               ctype=numtype.ctype, dsp_budget=dsp_budget,
               fixed=fixed, numtype=numtype.describe(), numtype_W=numtype.W, numtype_I=numtype.I, header=header, kernels=ks, ii=ii, interface=interface,
               nq=model.nq, nv=model.nv, nb=model.nb, base="floating" if model.floating_base else "fixed")
    files = {header: render("hls/kernels.h.j2", **ctx)}
    sources = []
    for kk in ks:
        src = f"{prefix}_{kk['name']}.cpp"
        files[src] = render("hls/kernel.cpp.j2", k=kk, **ctx)
        sources.append(src)
    # C-simulation harness for Python: double in, double out, one state or a batch
    harness_prefix = f"{prefix}_csim"
    harness = f"{prefix}_csim.cpp"
    files[harness] = render("hls/csim.cpp.j2", harness_prefix=harness_prefix, **ctx)
    if fixed:  # the fast C simulation's operators: the same file for every robot of this format
        files[fmt["fmt_source"]] = fmt["fmt_text"]
    # testbench: seeded random states within the joint limits, format vs the same code in double
    env = testbench_states(model, tb_states)
    # q, v, a, tau always (as before other inputs existed), the others where a kernel here takes them
    used = {n for kk in ks for n in registry.get(kk["name"]).input_names}
    tb_inputs = [{"name": n, "size": x.shape[1], "data": ", ".join(_c_float(v) for v in x.ravel())}
                 for n, x in env.items() if n in ("q", "v", "a", "tau") or n in used]
    for kk in ks:
        # twice the measured bound of this kernel and type (as `rbdgen validate` holds it), or tb_tol
        kk["tb_tol"] = _c_float(tb_tol if tb_tol is not None else testbench_tolerance(registry.get(kk["name"]), numtype))
    testbench = f"{prefix}_tb.cpp"
    files[testbench] = render("hls/testbench.cpp.j2", tb_inputs=tb_inputs, tb_states=tb_states, **ctx)
    period = 1000.0 / clock_mhz
    files["hls_project.tcl"] = render("hls/project.tcl.j2", part=part, period=f"{period:.3f}", testbench=testbench,
                                      **ctx)
    for kk in ks:
        files[f"hls_{kk['name']}.tcl"] = render("hls/kernel.tcl.j2", k=kk, **ctx)
    tcl = "run_hls.tcl"
    files[tcl] = render("hls/run_hls.tcl.j2", part=part, clock_mhz=f"{clock_mhz:g}", **ctx)
    return GeneratedHLS(prefix, numtype, files, printed, header, sources, harness, harness_prefix, testbench, tcl,
                        fmt.get("fmt_source"))


def csim_format(numtype: NumType) -> dict:
    """The fast C simulation's operators of an ap_fixed format, which depend on nothing else:
    ``fmt_ns`` (their namespace, named by W, I and both modes), ``fmt_source`` (the file that
    defines them, ``<fmt_ns>.cpp``), ``fmt_text`` (its text) and ``csim_decls`` (the types and
    declarations, the same text in that file and in every design's header). A C-simulation
    build compiles the file once per format and links it (:meth:`HlsTarget.load`)."""
    fmt_ns = (f"rbd_csim_fx{numtype.W}_{numtype.I}_{numtype.rounding[3:].lower()}_"
              f"{numtype.overflow[3:].lower()}")
    ctx = dict(fmt_ns=fmt_ns, fmt_source=f"{fmt_ns}.cpp", ctype=numtype.ctype, numtype=numtype.describe(),
               numtype_W=numtype.W)
    decls = render("hls/csim_format.j2", **ctx).rstrip("\n")
    text = render("hls/csim_ops.cpp.j2", csim_decls=decls,
                  cordic_lines=cordic(numtype.W, numtype.I).c_function("rbd_cordic", "data_t"), **ctx)
    return dict(fmt_ns=fmt_ns, fmt_source=ctx["fmt_source"], fmt_text=text, csim_decls=decls)


def _check_rolled_options(unroll, dsp_budget) -> None:
    """``--dsp-budget`` schedules the straight-line datapath: refused with a rolled one."""
    if unroll is not True and dsp_budget is not None:
        raise RbdgenError(f"--unroll {'no' if unroll is False else unroll} with --dsp-budget {dsp_budget}: "
                          "the HLS target budgets the straight-line datapath only (--unroll yes); a rolled kernel "
                          "is one module per kind of body, shared by its members")


def rolled_dialect(dialect: Dialect, ii: int | None) -> Dialect:
    """The dialect of a rolled kernel: each kind a module (INLINE off); with ``ii``, each kind's
    module pipelined (a member every ``ii`` cycles) and each run's loop too, told that ``w``
    carries no dependence between members where none reads another's value
    (:func:`rbdgen.ir.roll.run_independent`; the layout writes every slot once)."""
    if ii is None:
        return dialect
    pipe = f"#pragma HLS PIPELINE II={ii}"
    return replace(dialect, rolled_pragma=f"{ROLLED_PRAGMA}\n{pipe}", rolled_run_pragma=pipe,
                   rolled_independent_pragma="#pragma HLS DEPENDENCE variable=w type=inter false")


def resolve_part(part: str, dsp_budget, numtype: NumType, ii: int | None = None):
    """(part number, DSP budget): a preset name (see ``PARTS``) becomes its part number and, for an
    ap_fixed latency design (no ``ii``), the default budget of its DSP slices."""
    if dsp_budget is not None:
        _check_dsp_budget(dsp_budget)
    if dsp_budget is not None and ii is not None:
        raise RbdgenError(f"--dsp-budget {dsp_budget} with --ii {ii}: a budget shares operators in the latency "
                          "design, --ii pipelines every operation on its own operator; choose one")
    preset = part_preset(part)
    if preset is None:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", part or ""):
            raise RbdgenError(f"FPGA part {part!r} is not a part name such as {DEFAULT_PART} or a preset "
                              f"({', '.join(PARTS)})")
        return part, dsp_budget
    number, dsps, _, what = preset
    if dsp_budget is not None and dsp_budget > dsps:
        raise RbdgenError(f"--dsp-budget {dsp_budget} is more than the {dsps} DSP slices of --part {part} ({what})")
    if dsp_budget is None and numtype.kind == "fixed" and ii is None:
        dsp_budget = dsps
    return number, dsp_budget


def epilogue_pragmas(kern, ii: int, per_step: int) -> dict:
    """The dense products' loop pragmas for ``per_step`` elements every ``ii`` cycles
    (:func:`rbdgen.targets.hls.schedule.epilogue_plan`): a pipelined element loop (unrolled by a
    factor); for whole rows, a pipelined row loop (unrolled by the rows a step) over an unrolled
    element loop; for every element of every product at once, both loops unrolled, so that the
    products' multiplies are straight-line operations the tool starts side by side."""
    if not kern.post:
        return {}
    m = min(mm.m for mm in kern.post)
    if epilogue_all_at_once(kern, per_step):
        return {"epilogue_row_pragma": "#pragma HLS UNROLL", "epilogue_pragma": "#pragma HLS UNROLL"}
    if per_step >= m:
        rows = per_step // m
        return {"epilogue_row_pragma": f"#pragma HLS PIPELINE II={ii}"
                + (f"\n#pragma HLS UNROLL factor={rows}" if rows > 1 else ""), "epilogue_pragma": "#pragma HLS UNROLL"}
    return {"epilogue_row_pragma": "", "epilogue_pragma": f"#pragma HLS PIPELINE II={ii}"
            + (f"\n#pragma HLS UNROLL factor={per_step}" if per_step > 1 else "")}


def budget_pragmas(bc: dict) -> list[str]:
    """The top function's lines that hold the tool to a budgeted schedule ``bc``
    (:func:`rbdgen.targets.hls.schedule.budget_cost`)."""
    lines = [f"// DSP budget {bc['dsp_budget']}: {bc['mul_units']} shared multipliers of {bc['mul_dsp']} DSP48E2"
             + (f" and {bc['sincos_units']} CORDIC unit(s) of {bc['sincos_dsp']}" if bc["limit_sincos"] else "")
             + f" = {bc['dsp']} DSPs;",
             f"// list schedule: {bc['latency_cycles']} cycles at {bc['clock_mhz']:g} MHz (rbdgen inspect --cost "
             "--dsp-budget; rbdgen/targets/hls/schedule.py)"]
    if bc["limit_mul"]:
        lines.append(f"#pragma HLS ALLOCATION operation instances=mul limit={bc['limit_mul']}")
    if bc["limit_sincos"]:
        lines.append(f"#pragma HLS ALLOCATION function instances=rbd_sincos limit={bc['limit_sincos']}")
    return lines


def measured_bound(decl, numtype: NumType) -> float | None:
    """The relative error bound of kernel ``decl`` C-simulated in ``numtype`` against the float64
    reference: double 1e-9 (round-off), float the declared float32 bound; ap_fixed<W, I> the bound
    measured for that format (``decl.fixed_tol``), or one derived from a measured format that it
    refines; None when there is none (validation then fails the kernel: "no measured bound").

    Derived: from every measured ap_fixed<W', I'> that the format refines, at least as many
    fractional bits (F ≥ F') and at least as many integer bits (I ≥ I'), that bound scaled by
    the quantum, 2^(F' − F); the smallest of these. The finer format rounds every constant,
    input and result to a quantum 2^(F' − F) times the measured one's (the CORDIC's error budget
    is in quanta too) and saturates nowhere the measured one did not, so its error scales down
    with the quantum: measured from Q16.16 to Q24.24 (a 256× finer quantum) the worst errors
    fell 220× (∇ID) to 9000× (aba), which the declared bounds' ~2× margin covers. Nothing is
    derived for fewer fractional or integer bits: there the error grows faster than the quantum
    (overflow, divisions by coarsely quantised pivots), and a bound extrapolated that way (capped
    at 1) let ap_fixed<32,30> pass at an error of 0.5."""
    if numtype.kind == "double":
        return TOL64
    if numtype.kind == "float":
        return decl.float32_tol
    if (numtype.W, numtype.I) in decl.fixed_tol:
        return decl.fixed_tol[(numtype.W, numtype.I)]
    F, I = numtype.frac_bits, numtype.I  # noqa: E741
    derived = [tol * 2.0 ** ((W0 - I0) - F) for (W0, I0), tol in decl.fixed_tol.items()
               if F >= W0 - I0 and I >= I0]
    return min(derived) if derived else None


def testbench_states(model, n: int = 4) -> dict:
    """The generated testbenches' states (HLS and Verilog): seeded random states within the joint
    limits, input name → array (n, size)."""
    rng = np.random.default_rng(12345)
    q = model.random_q(rng, n)
    env = {"q": q, "v": rng.normal(size=(n, model.nv)), "a": rng.normal(size=(n, model.nv)),
           "tau": 10.0 * rng.normal(size=(n, model.nv))}
    return registry.complete_inputs(model, env, seed=12345)  # inputs beyond these (stale): as the registry draws them


def testbench_tolerance(decl, numtype: NumType) -> float:
    """The generated testbench's tolerance for kernel ``decl``: twice its measured bound (double:
    the bound itself, round-off has no margin to give; :func:`measured_bound`, derived ones
    included); where there is none, 2^(14 − F) quanta of the format (catches overflow and wiring
    mistakes only; ``rbdgen validate`` fails such a kernel)."""
    bound = measured_bound(decl, numtype)
    if bound is None:
        return min(0.5, 2.0 ** (14 - numtype.frac_bits))
    return bound if numtype.kind == "double" else min(1.0, 2.0 * bound)


# ---- cost model (rbdgen/targets/hls/cost.py; stated in docs/hls.md) ---------------------------

def hls_cost(kernel, numtype: NumType, clock_mhz: float = DEFAULT_CLOCK_MHZ, ii: int | None = None,
             divider: str = "tool") -> dict:
    """Latency and resource estimate of one traced kernel: see :mod:`rbdgen.targets.hls.cost`.

    The IR's counts (``mul``, ``add``, ``div``, ``sincos``, ``depth``, ``total``) as
    ``Kernel.op_counts(dense_epilogue=True)`` (the products are printed dense here: every
    element of the pipelined loop takes the same k products); what the tool folds
    (``zero_mul``, ``shift_mul``), ``const_mul``,
    ``sincos_units`` (one CORDIC per angle); ``dsp``, ``lut``, ``ff`` of the design (default:
    by peak concurrency; ``ii``: pipelined, DSPs shared ``ii`` ways), ``dsp_spatial`` (one
    operator per operation), ``latency_cycles`` and ``latency_us`` at ``clock_mhz``. ``divider``:
    the HLS tool's ("tool") or the Verilog target's ("narrow", :data:`~rbdgen.targets.hls.cost.DIVIDERS`)."""
    return kernel_cost(kernel, numtype, clock_mhz, ii, divider)


def cost_table(model: RobotModel, numtype: NumType, kernels=None, clock_mhz: float = DEFAULT_CLOCK_MHZ,
               ii: int | None = None, progress=None, unroll=True, divider: str = "tool") -> list[dict]:
    """Per kernel, the estimate of its design: the straight-line one (:func:`hls_cost`), or for
    the kernels ``unroll`` rolls, the folded one (:func:`rbdgen.targets.hls.cost.rolled_cost`)."""
    rows = []
    for k in registry.applicable(model, kernels):
        if progress:
            progress(f"tracing {k}")
        kern, rolled = registry.trace_lowered(model, k, unroll)
        if rolled:
            rows.append({"kernel": k, **rolled_cost(kern, roll(kern, reuse=False), numtype, clock_mhz, ii)})
        else:
            rows.append({"kernel": k, "lowering": "unrolled", **hls_cost(kern, numtype, clock_mhz, ii, divider)})
    return rows


def format_cost_table(rows: list[dict], numtype: NumType, clock_mhz: float, ii: int | None,
                      what: str = "HLS cost estimate") -> str:
    fixed = numtype.kind == "fixed"
    cols = [("mul", "mul"), ("const_mul", "×const"), ("zero_mul", "×0"), ("add", "add/sub"), ("div", "div"),
            ("sincos_units", "sincos"), ("depth", "depth"), ("dsp", "DSP"), ("dsp_spatial", "DSP-spatial")]
    if fixed:
        cols += [("lut", "LUT"), ("ff", "FF")]
    cols += [("latency_cycles", "cycles"), ("latency_us", "latency")]
    rolled = any(r.get("lowering") == "rolled" for r in rows)
    if rolled:
        cols = [("lowering", "lowering"), ("kinds", "kinds"), ("members", "blocks")] + cols + \
            [("w_words", "w words"), ("rom_bits", "ROM bits")]
    table = [("kernel",) + tuple(h for _, h in cols)]
    for r in rows:
        cells = []
        for c, _ in cols:
            cells.append(f"{r[c] * 1000:.0f} ns" if c == "latency_us" else str(r.get(c, "-")))
        table.append((r["kernel"],) + tuple(cells))
    r0 = rows[0] if rows else {}
    head = [f"{what}: {numtype.describe()}, clock {clock_mhz:g} MHz, "
            + (f"pipelined II={ii} (every operation its own operator, DSPs shared up to {ii}x)" if ii
               else "latency-oriented (not pipelined): operators by peak use in an as-soon-as-possible schedule"),
            f"DSP48E2 per variable multiplier: {r0.get('mul_dsp', '-')}; ×const: multiplies by a model constant "
            "(DSPs by the constant's significant bits), ×0: constants that quantise to 0 (folded away);",
            f"sincos: CORDIC units, one per angle ({r0.get('sincos_cycles', '-')} cycles each); "
            + (f"a divider takes {r0.get('div_cycles', '-')} cycles; " if fixed else "")
            + "DSP-spatial: one operator per operation;",
            "cycles: the schedule's length (model and assumptions: docs/hls.md, rbdgen/targets/hls/cost.py)"]
    if rolled:
        head.append("rolled (--unroll no): a module per kind of body, its operators serving the kind's bodies one "
                    "after another; DSP/LUT/FF: the modules side by side, one CORDIC; w words: the workspace "
                    "memory; ROM bits: the kinds' tables (rolled_cost in rbdgen/targets/hls/cost.py)")
    head.append("")
    return "\n".join(head + text_table(table))


def budget_table(model: RobotModel, numtype: NumType, dsp_budget: int, kernels=None,
                 clock_mhz: float = DEFAULT_CLOCK_MHZ, progress=None, divider: str = "tool") -> list[dict]:
    """Per kernel, the list-scheduled design within ``dsp_budget`` (``budget_cost``) beside the
    unbudgeted estimate; ``divider`` as :func:`hls_cost`'s."""
    rows = []
    for k in registry.applicable(model, kernels):
        if progress:
            progress(f"scheduling {k} within {dsp_budget} DSPs")
        kern = registry.trace(model, k)
        free = hls_cost(kern, numtype, clock_mhz, divider=divider)
        rows.append({"kernel": k, **budget_cost(kern, numtype, clock_mhz, dsp_budget, divider=divider),
                     "free_dsp": free["dsp"], "free_cycles": free["latency_cycles"]})
    return rows


def format_budget_table(rows: list[dict], numtype: NumType, clock_mhz: float, dsp_budget: int,
                        preset: str | None = None) -> str:
    head = [f"Within a DSP budget of {dsp_budget} per kernel"
            + (f" (--part {preset}: {part_preset(preset)[3]}, {part_preset(preset)[1]} DSPs, "
               f"{part_preset(preset)[2]} LUTs)" if preset else "")
            + f": list schedule, critical-path priority, {numtype.describe()}, {clock_mhz:g} MHz",
            "mul: shared full-width multipliers (ALLOCATION limit), CORDIC: shared pipelined sin/cos units; "
            "div/add: used, not limited;",
            "II: cycles between back-to-back states through the same operators; unbudgeted: the estimate above", ""]
    luts = part_preset(preset)[2] if preset else None
    table = [("kernel", "DSP", "mul", "CORDIC", "div", "add", "cycles", "latency", "II", "LUT", "FF",
              "unbudgeted DSP", "unbudgeted cycles") + (("fits the part's LUTs",) if luts else ())]
    for r in rows:
        table.append((r["kernel"], str(r["dsp"]), str(r["mul_units"]), str(r["sincos_units"]), str(r["div_units"]),
                      str(r["add_units"]), str(r["latency_cycles"]), f"{r['latency_us'] * 1000:.0f} ns", str(r["ii"]),
                      str(r["lut"]), str(r["ff"]), str(r["free_dsp"]), str(r["free_cycles"]))
                     + (("yes" if r["lut"] <= luts else "no: operand muxes",) if luts else ()))
    return "\n".join(head + text_table(table))


# ---- the target ------------------------------------------------------------------------------

def _check_fixed(value):
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"  # chosen per kernel when the model is known (rbdgen/targets/hls/autofix.py)
    nt = numeric_type(fixed=value)
    return (nt.W, nt.I)


def _check_tol(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise RbdgenError(f"--tol must be a positive relative error (e.g. 1e-3), got {value!r}")
    return float(value)



def _clock_problem(value) -> str | None:
    """Why ``value`` is not a clock in MHz a design can have, or None."""
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        return "a positive frequency in MHz"
    if not MIN_CLOCK_MHZ <= value <= MAX_CLOCK_MHZ:
        return f"a frequency from {MIN_CLOCK_MHZ:g} to {MAX_CLOCK_MHZ:g} MHz (an FPGA's clock)"
    return None


def _check_clock(value):
    why = _clock_problem(value)
    if why:
        raise RbdgenError(f"expected {why} such as 250, got {value!r}")
    return float(value)


def _check_dsp_budget(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RbdgenError(f"--dsp-budget must be a positive number of DSP slices, got {value!r}")
    return value


def _check_ii(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RbdgenError(f"II must be a positive integer, got {value!r}")
    return value
