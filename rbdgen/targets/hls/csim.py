"""C simulation of the HLS kernels: compile the generated HLS C++ with g++ against Xilinx's
Apache-2.0 ``ap_types`` headers and load it with the same machinery as the CPU kernels.

The headers are not part of rbdgen: ``make venv`` installs the ``hls4ml`` wheel (without its
dependencies), which ships them, and :func:`ap_types_dir` finds them in site-packages;
``RBDGEN_AP_TYPES`` points at another copy (e.g. ``$XILINX_HLS/include``).
"""
from __future__ import annotations

import ctypes
import glob
import os
import site
import sysconfig
from pathlib import Path

import numpy as np

from ...errors import BuildError, RbdgenError
from ...kernels.loaded import CompiledKernels
from ...toolchain.compiler import cxx_flags
from .emit import NumType

AP_TYPES_ENV = "RBDGEN_AP_TYPES"


def ap_types_dir() -> Path:
    """The folder holding ``ap_fixed.h``: ``$RBDGEN_AP_TYPES``, else the copy the hls4ml wheel
    installed in this Python's site-packages."""
    env = os.environ.get(AP_TYPES_ENV)
    if env:
        p = Path(env)
        if not (p / "ap_fixed.h").is_file():
            raise BuildError(f"{AP_TYPES_ENV}={env}: no ap_fixed.h in that folder")
        return p
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    try:
        roots.update(site.getsitepackages())
    except AttributeError:  # some virtualenv layouts
        pass
    for root in sorted(roots):
        for cand in [os.path.join(root, "hls4ml", "templates", "vivado", "ap_types")] + \
                sorted(glob.glob(os.path.join(root, "hls4ml", "**", "ap_fixed.h"), recursive=True)):
            d = Path(cand if not cand.endswith(".h") else os.path.dirname(cand))
            if (d / "ap_fixed.h").is_file():
                return d
    raise BuildError("the HLS C simulation needs Xilinx's ap_types headers (ap_fixed.h), which were not found: "
                     "run `make venv` (installs them with `pip install --no-deps hls4ml==1.3.0`) or set "
                     f"{AP_TYPES_ENV} to a folder holding ap_fixed.h")


CSIM_MODES = ("fast", "top")

#: what a fixed-point harness (templates/hls/csim.cpp.j2) reads of the ap_types, in its order: its
#: first lines ask for the operators, and the ap_fixed code they expand to, optimised, then its
#: header includes <ap_fixed.h>. The fast C simulation's build compiles the harness with this
#: header -included first, precompiled once per compiler and flags and shared by every
#: fixed-point build (:func:`rbdgen.toolchain.compiler.shared_pch`): the harness compiles to the
#: same object (tests/test_hls.py), without its ~2 s of parsing the ap_types.
CSIM_AP_TYPES = """// the ap_types as an rbdgen HLS C-simulation harness reads them (rbdgen.targets.hls.csim)
#if defined(RBD_HLS_CSIM_FAST) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O2")
#endif
#include <ap_fixed.h>
"""


def hls_flags(opt: str = "-O1", csim: str = "fast") -> list[str]:
    """g++ flags of the C simulation: the ap_types headers as system headers (their own
    warnings are not ours), no OpenMP, no double reference (only the testbench needs it);
    ``csim="fast"`` runs the kernel bodies through the out-of-line operator wrapper (same
    arithmetic, see the generated header), ``"top"`` the synthesizable top functions."""
    if csim not in CSIM_MODES:
        raise RbdgenError(f"csim must be one of {', '.join(CSIM_MODES)}, got {csim!r}")
    extra = ["-isystem", str(ap_types_dir()), "-Wno-unused-parameter", "-Wno-unknown-pragmas",
             "-DRBD_HLS_NO_DOUBLE_REFERENCE"]
    if csim == "fast":
        extra.append("-DRBD_HLS_CSIM_FAST")
    return cxx_flags(opt=opt, openmp=False, extra=extra)


class HLSKernels(CompiledKernels):
    """C-simulated HLS kernels: the methods of :class:`CompiledKernels`, float64 arrays in and
    out (converted to and from the datapath type ``numtype`` inside the harness)."""

    def __init__(self, lib_path, model, numtype: NumType, harness_prefix: str, specs: dict, **kw):
        self.numtype = numtype
        super().__init__(lib_path, model, harness_prefix, "float64", specs, target="hls", **kw)
        self._div0 = getattr(self._lib, f"{harness_prefix}_div_by_zero")
        self._div0.argtypes = []
        self._div0.restype = ctypes.c_long
        self._sincos = getattr(self._lib, f"{harness_prefix}_sincos")
        ptr = ctypes.POINTER(ctypes.c_double)
        self._sincos.argtypes = [ctypes.c_long, ptr, ptr, ptr]
        self._sincos.restype = None

    def div_by_zero(self) -> int:
        """States run since the last call in which a divisor was zero (for ap_fixed: quantised to
        zero). Their quotients saturated to the format's extreme of the dividend's sign, in C
        simulation and hardware alike (``rbd_div``); the hardware reports it on the kernel's
        ``div_by_zero`` port."""
        return int(self._div0())

    def sincos(self, x):
        """The datapath's sine and cosine (for ap_fixed the generated CORDIC, as in hardware) of
        float64 angles (any shape; quantised to the datapath type first): ``(sin, cos)``."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        s, c = np.empty_like(x), np.empty_like(x)
        ptr = ctypes.POINTER(ctypes.c_double)
        self._sincos(x.size, x.ctypes.data_as(ptr), s.ctypes.data_as(ptr), c.ctypes.data_as(ptr))
        return s, c

    def __repr__(self):
        return (f"<rbdgen HLS C-simulation kernels for {self.model.name!r} ({self.numtype.describe()}, "
                f"nq={self.nq}, nv={self.nv}): {', '.join(self.kernels)}>")
