"""Build (generate, compile, cache) and load kernels, for any registered target."""
from __future__ import annotations

import numpy as np

from .. import registry
from ..backends.base import get_target
from ..errors import RbdgenError
from ..model import CoupledModel, RobotModel
from .compiler import cache_dir

__all__ = ["build", "cache_dir"]


def build(model: RobotModel, target: str = "cpu", dtype="float64", *, kernels=None, frames=None,
          fold: bool = True, progress=None, name: str | None = None, **options):
    """Generate, compile (cached) and load the kernels of ``model`` for ``target``.

    ``kernels``: names (a list, or one comma-separated string; default all the model can have).
    ``frames``: URDF link names (or ``"leaves"``) to generate the frame and contact kernels for
    (default: the model's own selection, :meth:`RobotModel.with_frames`; none: those kernels are
    left out). ``fold=False``
    builds the dense (unpruned) variant, for comparison. The other keywords are the target's
    options (:mod:`rbdgen.backends`; ``rbdgen generate --help`` lists them):

    * ``cpu`` → :class:`~rbdgen.jit.loaded.CompiledKernels`: ``opt`` (default: -O3, and -Os
      for the parts of kernels of ≥ 5 000 statements; one given applies to all), ``march`` (default:
      this machine, ``-march=native``, or ``$RBDGEN_MARCH``; ``"portable"``: any x86-64; any
      other value is passed as ``-march=…``), ``cxx``, ``simd`` (False drops the
      vectorised batch path: half the compile time), ``lanes``.
    * ``cuda`` → :class:`~rbdgen.jit.cuda.CudaKernels`: ``opt``, ``arch`` (default the GPUs found
      here, else sm_80 and sm_90), ``nvcc``, ``werror``.
    * ``hls`` → :class:`~rbdgen.jit.hls.HLSKernels` (C simulation): ``fixed=(W, I)``,
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
    try:
        kernels = registry.applicable(model, kernels)
    except RbdgenError as e:  # a bad argument to a Python function
        raise ValueError(str(e)) from None
    unknown = sorted(set(options) - t.option_names())
    if unknown:
        raise TypeError(f"build(target={target!r}) got option(s) {', '.join(unknown)} it does not take "
                        f"(it takes: {', '.join(sorted(t.option_names()))})")
    registry.check_model(model, kernels)
    return t.build(model, kernels, dt, fold=fold, name=name, progress=progress,
                   **{k: v for k, v in options.items() if v is not None})
