"""The code-generation targets, one folder each: ``cpu/``, ``cuda/``, ``hls/``.

A folder holds everything its target is: the printer dialect and template rendering (emit),
its cost model / resource report / scheduler, its toolchain step and its loader. The folder's
``__init__`` defines the :class:`~rbdgen.targets.base.Target` subclass and registers it;
:mod:`rbdgen.targets.base` finds the folders (no list of them to edit). This package's
:func:`build` (``rbdgen.build``) and :func:`get_target` are how everything else reaches a target.

May import: the kernel layers (``model``, ``registry``, ``algorithms``, ``ir``, ``reference``)
and the shared layers — ``codegen`` (printer, escaping, templates), ``toolchain`` (compiler
runner, caches, rebuild on unpickle), ``kernels`` (the loaded-kernel objects). A target never
imports another target, the CLI, ``package``, or ``validate``; the shared layers never import a
target (tests/test_layout.py checks the import graph).
"""
from __future__ import annotations

import numpy as np

from .. import registry
from ..errors import RbdgenError
from ..model import CoupledModel, RobotModel
from ..progress import reporting
from ..toolchain.compiler import cache_dir
from .base import TOL64, Option, Target, all_options, get_target, register, targets, targets_of

__all__ = ["build", "cache_dir", "get_target", "targets", "targets_of", "all_options", "register", "Option",
           "Target", "TOL64"]


def build(model: RobotModel, target: str = "cpu", dtype="float64", *, kernels=None, frames=None,
          constraints=None, fold: bool = True, progress=None, name: str | None = None, **options):
    """Generate, compile (cached) and load the kernels of ``model`` for ``target``.

    ``kernels``: names (a list, or one comma-separated string; default all the model can have).
    ``frames``: URDF link names (or ``"leaves"``) to generate the frame and contact kernels for
    (default: the model's own selection, :meth:`RobotModel.with_frames`; none: those kernels are
    left out). ``constraints``: the rigid contacts and loops (``rbdgen.Contact("foot", "3d")``,
    ``rbdgen.Loop("a", "b", "6d")``) the ``constrained_fd`` kernel is generated for (default: the
    model's own, :meth:`RobotModel.with_constraints`; their frames are selected too). ``fold=False``
    builds the dense (unpruned) variant, for comparison. ``progress``: what is being generated
    and compiled, and how many sources remain (``compiling 7/23: rbd_iiwa14_aba_f64.cpp``), as
    one line on stderr rewritten in place when stderr is a terminal, cleared when done (None, the
    default; nothing when stderr is not a terminal); ``False``: nothing; ``True``: also a plain
    line per message elsewhere; a callable: called with each message (:mod:`rbdgen.progress`).
    The other keywords are the target's
    options (:mod:`rbdgen.targets`; ``rbdgen generate --help`` lists them):

    * ``cpu`` → :class:`~rbdgen.kernels.loaded.CompiledKernels`: ``opt`` (default: -O3, and -Os
      for the parts of kernels of ≥ 5 000 statements; one given applies to all), ``march`` (default:
      this machine, ``-march=native``, or ``$RBDGEN_MARCH``; ``"portable"``: any x86-64; any
      other value is passed as ``-march=…``), ``cxx``, ``simd`` (False drops the
      vectorised batch path: half the compile time), ``lanes``, ``unroll`` (True: straight-line
      code, the default; False: loops over the bodies, one piece of code per kind of body, for
      big robots; "auto": rolled for kernels of ≥ :data:`rbdgen.ir.roll.AUTO_OPS` operations).
    * ``cuda`` → :class:`~rbdgen.targets.cuda.runtime.CudaKernels`: ``opt``, ``arch`` (default the GPUs found
      here, else sm_80 and sm_90), ``nvcc``, ``werror``.
    * ``hls`` → :class:`~rbdgen.targets.hls.csim.HLSKernels` (C simulation): ``fixed=(W, I)``,
      ``rounding``, ``overflow``, ``opt`` (-O1), ``csim``, ``cxx``, and the design options
      ``ii``, ``clock_mhz``, ``part``, ``interface``.

    An option the target does not take is a ``TypeError`` naming it.
    """
    if not isinstance(model, (RobotModel, CoupledModel)):
        raise TypeError(f"build() takes a RobotModel (from rbdgen.load_urdf), got {type(model).__name__}")
    t = get_target(target)
    try:
        dt = np.dtype(dtype).name
    except TypeError:
        dt = None
    if dt not in ("float64", "float32"):
        raise ValueError(f"dtype must be float64 or float32, got {dtype!r}")
    if frames is not None:
        model = model.with_frames(frames)
    if constraints is not None:
        model = model.with_constraints(constraints)
    try:
        kernels = registry.applicable(model, kernels)
    except RbdgenError as e:  # a bad argument to a Python function
        raise ValueError(str(e)) from None
    unknown = sorted(set(options) - t.option_names())
    if unknown:
        raise TypeError(f"build(target={target!r}) got option(s) {', '.join(unknown)} it does not take "
                        f"(it takes: {', '.join(sorted(t.option_names()))})")
    registry.check_model(model, kernels)
    with reporting(progress) as p:
        return t.build(model, kernels, dt, fold=fold, name=name, progress=p,
                       **{k: v for k, v in options.items() if v is not None})
