"""The HLS target (FPGA): Vitis-HLS C++ top functions, a self-checking testbench and synthesis
Tcl, C-simulated here with g++ against Xilinx's ``ap_types`` headers.

``emit`` prints the sources (numeric types, pragmas, testbench), ``cost`` is the as-soon-as-
possible latency and resource model, ``schedule`` the list schedule within a DSP budget,
``cordic`` the generated sine/cosine unit, ``csim`` the toolchain step and loader (g++ flags,
the ``ap_types`` headers, the C-simulation kernels). This module is the
:class:`~rbdgen.targets.base.Target`.
"""
from __future__ import annotations

from ...codegen.sources import Sources, kernel_entry
from ...errors import RbdgenError
from ...kernels.loaded import kernel_specs
from ...toolchain.compiler import build_library, find_cxx, shared_pch
from ...ir.roll import check_unroll
from ..base import CXX, OPT, UNROLL, Option, Target, check_opt, register
from .autofix import default_tol, format_auto_table, resolve_fixed
from .csim import CSIM_AP_TYPES, HLSKernels, ap_types_dir, hls_flags
from .emit import (DEFAULT_CLOCK_MHZ, DEFAULT_OVERFLOW, DEFAULT_PART, DEFAULT_ROUNDING, INTERFACES, OVERFLOW,
                   ROUNDING, NumType, _check_clock, _check_dsp_budget, _check_fixed, _check_ii, _check_rolled_options,
                   _check_tol, budget_table,
                   cost_table, format_budget_table, format_cost_table, generate_hls, measured_bound, numeric_type,
                   parse_fixed, resolve_part)
from .schedule import PARTS, part_preset


#: how a format's operators (``rbd_csim_fx…cpp``) are compiled, whatever the build's own ``opt``:
#: they are optimised in every build anyway (the file's ``#pragma GCC optimize("O2")``), so one
#: archive per format serves the -O0 and the -O1 builds alike
CSIM_OPS_OPT = "-O2"


def _ap_types_pch(cxx, flags):
    """The ap_types precompiled for ``flags`` (:data:`CSIM_AP_TYPES`; None where not GCC)."""
    return shared_pch(find_cxx(cxx), flags, "rbd_csim_ap_types.h", CSIM_AP_TYPES, deps=(ap_types_dir(),))


def _csim_ops_archive(text: str, name: str, cxx, progress):
    """The fast C simulation's operators and CORDIC on one ap_fixed format (``name``, the same
    file for every robot: ~5 s of g++): compiled once per format into the compile cache as a
    static archive, which each C-simulation library of the format links; its path."""
    flags = hls_flags(CSIM_OPS_OPT, "fast")
    shared = _ap_types_pch(cxx, flags)
    return build_library({name: text}, [name], name[:-len(".cpp")],
                         [*flags, "-include", str(shared.header)] if shared else flags, cxx=cxx, progress=progress,
                         static=True, prepare=(lambda: shared.make(progress)) if shared else None)


class HlsTarget(Target):
    # generating HLS sources warns (an initiation interval the ports cannot keep, a DSP budget
    # the cost model needs more LUTs for): a cached build would not say it again
    cache_generation = False
    name = "hls"
    help = "FPGA: Vitis-HLS C++ top functions, testbench and Tcl; C-simulated with g++ and the ap_types headers"
    python_package = False
    compiler = "g++ and the ap_types headers (C simulation)"
    returns = "rbdgen.targets.hls.csim.HLSKernels"
    options = (
        Option("fixed", "--fixed", "hls: ap_fixed<W,I> datapath (W total bits <= 64, I integer bits incl. sign), "
               "e.g. 32,16, or 'auto': the narrowest format whose measured error meets --tol for every kernel "
               "(docs/hls.md); default: floating point of --dtype", ("generate", "cost"), {"metavar": "W,I|auto"},
               check=_check_fixed),
        Option("tol", "--tol", "hls: with --fixed auto, the relative error each kernel's format must meet on sampled "
               "states (default: the kernel's float32 bound x 100)", ("generate", "cost"),
               {"type": float, "metavar": "E"}, check=_check_tol),
        Option("rounding", "--rounding", f"hls: ap_fixed rounding (quantisation) mode (default {DEFAULT_ROUNDING})",
               ("generate", "cost"), {"choices": ROUNDING}),
        Option("overflow", "--overflow", f"hls: ap_fixed overflow mode (default {DEFAULT_OVERFLOW})",
               ("generate", "cost"), {"choices": OVERFLOW}),
        Option("clock_mhz", "--clock-mhz", f"hls: target clock in MHz (default {DEFAULT_CLOCK_MHZ:g})",
               ("generate", "cost"), {"type": float, "metavar": "F"}, check=_check_clock),
        Option("ii", "--ii", "hls: pipeline each kernel with initiation interval N (throughput); default: "
               "latency-oriented, not pipelined", ("generate", "cost"), {"type": int, "metavar": "N"},
               check=_check_ii),
        Option("part", "--part", f"hls: FPGA part for the synthesis script (default {DEFAULT_PART}), or a preset "
               f"that also sets --dsp-budget to its DSPs for ap_fixed: {', '.join(PARTS)}", ("generate", "cost"),
               {"metavar": "PART"}),
        Option("dsp_budget", "--dsp-budget", "hls: each kernel within N DSP48E2 slices (ap_fixed datapaths): a list "
               "schedule picks the shared multipliers and CORDIC units, ALLOCATION pragmas hold the tool to them "
               "(docs/hls.md)", ("generate", "cost"), {"type": int, "metavar": "N"}, check=_check_dsp_budget),
        UNROLL,
        Option("interface", "--interface", "hls: port protocol of the top functions (default ap_memory: ports "
               "partitioned into registers; see docs/hls.md)", ("generate",), {"choices": INTERFACES}),
        OPT,
        Option("csim", "", "hls: C simulation through the fast operator wrapper ('fast') or the top functions "
               "('top'); bit-identical", ("compile",)),
        CXX,
    )

    @staticmethod
    def numtype(dtypes, fixed=None, rounding=None, overflow=None) -> NumType:
        if fixed is None and len(dtypes) != 1:
            raise RbdgenError("--target hls takes one datapath type: --fixed W,I, or a single --dtype")
        return numeric_type(dtypes[0], fixed, rounding or DEFAULT_ROUNDING, overflow or DEFAULT_OVERFLOW)

    def generate(self, model, kernels, *, dtypes, name, fold=True, progress=None, fixed=None, rounding=None,
                 overflow=None, ii=None, clock_mhz=None, part=None, interface=None, dsp_budget=None, tol=None,
                 unroll=True):
        unroll = check_unroll(unroll)
        if unroll is not True and isinstance(fixed, str) and fixed.strip().lower() == "auto":
            raise RbdgenError("--fixed auto with --unroll no/auto: the formats are chosen on the straight-line "
                              "datapath's C simulation; give the rolled kernels a format (--fixed W,I)")
        fixed, choices = resolve_fixed(model, kernels, fixed, tol, rounding, overflow, progress)
        nt = self.numtype(dtypes, fixed, rounding, overflow)
        gen = generate_hls(model, nt, kernels, ii=ii, interface=interface or "ap_memory", part=part or DEFAULT_PART,
                           clock_mhz=DEFAULT_CLOCK_MHZ if clock_mhz is None else clock_mhz, name=name, fold=fold,
                           dsp_budget=dsp_budget, progress=progress, unroll=unroll)
        entries = {k: {**kernel_entry(pk), "top": f"{gen.prefix}_{k}"} for k, pk in gen.kernels.items()}
        info = {"header": gen.header, "hls_sources": list(gen.sources), "csim_harness": gen.harness,
                "harness_prefix": gen.harness_prefix, "csim_ops": gen.csim_ops, "testbench": gen.testbench, "tcl": gen.tcl,
                "library": f"{gen.prefix}_hls_{nt.tag}" + ("" if fold else "_dense"),
                "numtype": {"kind": nt.kind, "W": nt.W, "I": nt.I, "rounding": nt.rounding, "overflow": nt.overflow},
                "type": nt.ctype, **({"fixed_auto": choices} if choices else {})}
        return Sources(self.name, gen.prefix, dict(gen.files), entries, info, (nt.ctype,))

    def load(self, sources, model, dtype=None, *, progress=None, opt=None, csim="fast", cxx=None):
        info = sources.info
        flags = hls_flags(check_opt(opt or "-O1"), csim)
        names = [info["header"], *info["hls_sources"], info["csim_harness"]]
        shared, link, ap_flags = None, (), flags
        if csim == "fast" and info["numtype"]["kind"] == "fixed":
            # only the harness and the format's operators read the ap_types here (the kernel
            # sources see raw integers): their precompiled form, shared with every fixed-point
            # build of these flags, comes first
            shared = _ap_types_pch(cxx, flags)
            ap_flags = [*flags, "-include", str(shared.header)] if shared else flags
            ops = info.get("csim_ops")
            if ops:
                link = (_csim_ops_archive(sources.files[ops], ops, cxx, progress),)
        # every source includes the header (and through it the ap_types) first: precompiled once
        lib = build_library({fn: sources.files[fn] for fn in names}, names[1:], info["library"], flags, cxx=cxx,
                            progress=progress, pch=info["header"],
                            source_flags={info["csim_harness"]: ap_flags} if shared else None,
                            prepare=(lambda: shared.make(progress)) if shared else None, link=link)
        return HLSKernels(lib, model, NumType(**info["numtype"]), info["harness_prefix"], kernel_specs(sources.kernels))

    def tolerance(self, decl, dtype, options):
        fixed = options.get("fixed")
        if fixed == "auto":  # the accuracy the format was chosen for
            return options.get("tol") or default_tol(decl)
        if fixed is None:
            return super().tolerance(decl, dtype, options)
        W, I = parse_fixed(fixed)  # noqa: E741
        return measured_bound(decl, NumType("fixed", W, I))

    def describe(self, options):
        if options.get("fixed") == "auto":
            return "hls C simulation, ap_fixed chosen per --fixed auto"
        nt = self.numtype((options.get("dtype", "float64"),), options.get("fixed"), options.get("rounding"),
                          options.get("overflow"))
        return f"hls C simulation, {nt.describe()}"

    def cost_sections(self, model, kernels, *, dtype="float64", progress=None, fixed=None, rounding=None,
                      overflow=None, clock_mhz=None, ii=None, part=None, dsp_budget=None, tol=None, unroll=True):
        unroll = check_unroll(unroll)
        _check_rolled_options(unroll, dsp_budget)
        fixed, choices = resolve_fixed(model, kernels, fixed, tol, rounding, overflow, progress)
        nt = self.numtype((dtype,), fixed, rounding, overflow)
        clock = clock_mhz or DEFAULT_CLOCK_MHZ
        out = [format_auto_table(choices, nt)] if choices else []
        out += [format_cost_table(cost_table(model, nt, kernels, clock_mhz=clock, ii=ii, progress=progress,
                                             unroll=unroll), nt, clock, ii)]
        part_no, budget = resolve_part(part or DEFAULT_PART, dsp_budget, nt, ii)
        if unroll is False:
            budget = None  # a part preset's budget: for the straight-line design
        if budget is not None:
            out.append(format_budget_table(budget_table(model, nt, budget, kernels, clock, progress=progress),
                                           nt, clock, budget, part if part_preset(part) else None))
        return out


register(HlsTarget())
