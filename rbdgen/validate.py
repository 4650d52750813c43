"""``rbdgen validate``: build a robot's kernels for any target and check every one of them on
random states against its declared reference and, when it is installed, against Pinocchio.

Error measure: per output array, ``max|x − y| / max|y|`` over all states (the batch call, and
one call per state stacked), and per state against Pinocchio; a kernel's error is the largest.
It scales with the outputs: a robot whose outputs are all tiny (1e-9 kg links) is checked as
closely as any other. (Until issue 46 the divisor was ``max(1, max|y|)``, as in the tests'
``conftest.relerr``: an absolute floor of 1 under which outputs below 1e-9 passed whatever the
kernel computed.) The divisor's only floor is the smallest normal number of the kernel's
dtype (float64: 2.2e-308), below which a value has lost relative precision; an output that is
exactly zero must then be computed as zero, which structural zeros are, on both sides (pruned
from the kernels, products with exact zeros in the reference). A kernel passes when both
errors are at most its bound for the build (:meth:`rbdgen.targets.base.Target.tolerance`:
float64 1e-9; float32 and fixed point the bounds declared with the kernel in
:mod:`rbdgen.registry`); a build with no measured bound (an ap_fixed format nothing was measured
for, and none it refines: :func:`rbdgen.targets.hls.emit.measured_bound`) fails as "no bound".
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

from . import registry
from .errors import RbdgenError
from .targets import TOL64, get_target
from .textutil import text_table

__all__ = ["MAX_STATES", "MEASURE", "TOL64", "Row", "format_table", "pinocchio_model", "random_states", "relerr",
           "tolerance", "validate"]

#: the error measure, as the CLI states it
MEASURE = "max|x - y| / max|y| per output, over all states"
#: the most random states one validation draws: they are all held in memory, with every kernel's
#: outputs for them, and each is also run as a single call from Python (99 999 999 999 999 asked
#: for a 4.97 PiB array)
MAX_STATES = 100_000


def tolerance(kernel: str, model, dtype) -> float:
    """The CPU/CUDA bound of ``kernel`` for ``dtype`` (float64 1e-9; float32 as declared)."""
    return get_target("cpu").tolerance(registry.get(kernel), dtype, {})


def relerr(x, y, floor: float = 1.0) -> float:
    """max |x − y| / max(floor, max |y|); NaN anywhere gives NaN (which fails every bound).
    The default floor 1 is the tests' measure (absolute below 1); :func:`validate` passes the
    smallest normal number of the kernel's dtype, so that the error scales with the outputs."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"shapes differ: {x.shape} vs {y.shape}")
    if x.size == 0:
        return 0.0
    d = np.abs(x - y)
    if np.isnan(d).any():
        return float("nan")
    return float(np.max(d) / max(floor, float(np.max(np.abs(y)))))


def _tuple(x):
    return tuple(x) if isinstance(x, tuple) else (x,)


def _max(errs):
    """max that keeps NaN."""
    errs = list(errs)
    return float("nan") if any(e != e for e in errs) else max(errs, default=0.0)


@dataclass
class Row:
    kernel: str
    ops: int
    err_ref: float
    err_pin: float | None   # None: not compared (see note)
    tol: float
    note: str = ""
    #: where the Pinocchio comparison is held to more than ``tol`` (a kernel that solves with an
    #: ill-conditioned M: :func:`_conditioning_bound`): the largest of its per-state bounds, and
    #: whether every state met its own; None: ``tol`` bounds it
    tol_pin: float | None = None
    pin_ok: bool | None = None

    @property
    def passed(self) -> bool:
        ok = self.err_ref <= self.tol  # False for NaN
        if self.err_pin is None:
            return bool(ok)
        return bool(ok and (self.pin_ok if self.pin_ok is not None else self.err_pin <= self.tol))


# ---- Pinocchio --------------------------------------------------------------------------------

@contextlib.contextmanager
def _captured_stderr():
    """Collect what C++ code writes to file descriptor 2 (std::cerr) instead of letting it reach
    the user's terminal before rbdgen's own one-line message; the text lands in the dict."""
    said: dict = {}
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real fd 2 (embedded interpreters)
        yield said
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            said["text"] = tmp.read().decode("utf-8", "replace")


def pinocchio_model(model):
    """(pinocchio module, pinocchio model) for ``model``, or (None, reason)."""
    try:
        import pinocchio as pin
    except ImportError:
        return None, "pinocchio not installed"
    path = str(model.source)
    said: dict = {}
    try:
        from .model.mjcf import model_format

        mjcf = model_format(path) == "mjcf"
    except Exception:  # noqa: BLE001 — not a file any more (a model built in Python): Pinocchio's parser says why
        mjcf = False
    try:
        # coupled mimic joints: Pinocchio's mimic=True counts the same coordinates
        mimic = {"mimic": True} if getattr(model, "coupled", False) else {}
        with _captured_stderr() as said:  # Pinocchio's parser prints its own "Error:" lines
            if mjcf:
                pm, note = _pinocchio_mjcf(pin, model, path)
            else:
                pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer(), **mimic) if model.floating_base \
                    else pin.buildModelFromUrdf(path, **mimic)
    except Exception as e:  # noqa: BLE001 — any failure of the oracle only drops the comparison
        why = " ".join((str(e) + " " + said.get("text", "")).split())
        return None, f"pinocchio cannot load {model.source}: {why[:200]}"
    if mjcf:
        if pm is None:
            return None, note
        pm.rbdgen_note = note
    elif list(pm.names[1:]) != list(model.joint_names) or pm.nv != model.nv or pm.nq != model.nq_pinocchio:
        return None, "pinocchio's joints differ from rbdgen's (order or sizes): not compared"
    pm.gravity.linear = np.asarray(model.gravity, dtype=float)
    arm = getattr(model, "armature", None)
    if arm is not None and np.any(arm):  # each DOF's rotor inertia: Pinocchio's model.armature
        pm.armature = np.asarray(arm, dtype=float)
    pm.rbdgen_frames = tuple(getattr(model, "frames", ()))  # what the frame kernels' counterparts read
    pm.rbdgen_constraints = tuple(getattr(model, "constraints", ()))  # and constrained_fd's
    missing = [f for f in pm.rbdgen_frames if not pm.existFrame(f)]
    if missing:
        return None, f"pinocchio has no frame {missing[0]!r}"
    return pin, pm


#: Pinocchio's joint models → rbdgen's joint types (the MJCF comparison's structure check)
_PIN_KINDS = {"JointModelRX": "revolute", "JointModelRY": "revolute", "JointModelRZ": "revolute",
              "JointModelRevoluteUnaligned": "revolute", "JointModelPX": "prismatic", "JointModelPY": "prismatic",
              "JointModelPZ": "prismatic", "JointModelPrismaticUnaligned": "prismatic",
              "JointModelSpherical": "spherical", "JointModelFreeFlyer": "floating"}


def _se3(pin, R, p):
    return pin.SE3(np.array(R, dtype=float), np.array(p, dtype=float))


def _x_pose(X):
    """(R, p) of a motion transform X = pose_to_X(R, p)."""
    E = X[:3, :3]
    rx = -E.T @ X[3:, :3]
    return E.T, np.array([rx[2, 1], rx[0, 2], rx[1, 0]])


def _pinocchio_mjcf(pin, model, path):
    """(Pinocchio's model of an MJCF file with rbdgen's numbers, note) or (None, why not).

    Pinocchio's MJCF parser makes one composite joint of a body's several joints (rbdgen: a chain
    of bodies), reads only the first top-level body, and reads some files differently from MuJoCo
    (docs/mjcf.md: a joint ``pos`` from a default class, geoms without collision and meshes in
    the inertia, ``settotalmass``, a welded root body's pose, …). The structure — joint types in
    order, nq, nv — must be the same; the numbers (joint placements, inertias, frames) are then
    rbdgen's, so that the comparison checks the kernels, and the note says how many differed."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # buildModelFromMJCF(path, root) is deprecated in Pinocchio 4
        pm = pin.buildModelFromMJCF(path)
        if model.joint_types and model.joint_types[0] == "floating" and model.joint_names[0] == "root_joint" \
                and pm.njoints > 1 and pm.joints[1].shortname() != "JointModelFreeFlyer":
            pm = pin.buildModelFromMJCF(path, pin.JointModelFreeFlyer(), "root_joint")
            pm = pm[0] if isinstance(pm, tuple) else pm
    if pm.nv != model.nv:
        return None, (f"pinocchio's MJCF parser makes nv {pm.nv}, rbdgen {model.nv} (it reads the first top-level "
                      f"body only): not compared")
    groups, owner = [], {}
    for j in range(1, pm.njoints):
        jm = pm.joints[j]
        subs = list(jm.extract().joints) if jm.shortname() == "JointModelComposite" else [jm]
        grp = [b for b in range(model.nb) if jm.idx_v <= model.v_start[b] < jm.idx_v + jm.nv]
        if [_PIN_KINDS.get(x.shortname()) for x in subs] != [model.joint_types[b] for b in grp]:
            return None, "pinocchio's joints differ from rbdgen's (order or types): not compared"
        groups.append((j, grp))
        owner[grp[-1]] = j
    placed = inert = 0
    for j, grp in groups:
        pose = [_x_pose(model.X_tree[b]) for b in grp]
        if len(grp) == 1:
            new = _se3(pin, *pose[0])
            placed += not new.isApprox(pm.jointPlacements[j], 1e-12)
            pm.jointPlacements[j] = new
        else:
            jm = pm.joints[j].extract()
            first = _se3(pin, *pose[0])
            placed += not first.isApprox(pm.jointPlacements[j] * jm.jointPlacements[0], 1e-12)
            pm.jointPlacements[j] = first
            jm.jointPlacements[0] = pin.SE3.Identity()
            for k in range(1, len(grp)):
                new = _se3(pin, *pose[k])
                placed += not new.isApprox(jm.jointPlacements[k], 1e-12)
                jm.jointPlacements[k] = new
            pm.joints[j] = pin.JointModel(jm)
        from . import spatial as sp

        m, c, Ic = sp.inertia_parts(model.inertia[grp[-1]])
        new = pin.Inertia(float(m), np.array(c), 0.5 * (Ic + Ic.T))
        inert += not np.allclose(new.matrix(), pm.inertias[j].matrix(), rtol=1e-12, atol=1e-15)
        pm.inertias[j] = new
    # MJCF names bodies and joints separately, and Pinocchio makes a frame of each: where a joint
    # frame has a body's (or site's) name, it is renamed, so that a frame name finds the body
    links = {f.name: f for f in model.link_frames}
    for k, fr in enumerate(pm.frames):
        if fr.name in links and fr.type not in (pin.FrameType.BODY, pin.FrameType.OP_FRAME):
            pm.frames[k].name = fr.name + "#joint"
    for k, fr in enumerate(pm.frames):
        f = links.get(fr.name)
        if f is not None and f.body in owner:
            pm.frames[k].placement = _se3(pin, f.R, f.p)
            pm.frames[k].parentJoint = owner[f.body]
    note = ""
    if placed or inert:
        note = (f"pinocchio's MJCF parser reads {placed} joint placement(s) and {inert} inertia(s) of this file "
                f"differently from MuJoCo (docs/mjcf.md); its algorithms ran on rbdgen's numbers")
    return pm, note


# ---- validation -------------------------------------------------------------------------------

def random_states(model, n: int, seed: int = 0, kernels=None) -> dict:
    """``n`` random values of every kernel input, or of those ``kernels`` (names) read (see
    :func:`rbdgen.registry.random_inputs`: the same values either way)."""
    return registry.random_inputs(model, n, seed, None if kernels is None else registry.inputs_of(kernels))


def validate(model, *, target: str = "cpu", dtype="float64", states: int = 16, seed: int = 0, kernels=None,
             pinocchio: bool = True, progress=None, compiled=None, **options) -> list[Row]:
    """Build ``kernels`` with :func:`rbdgen.build` for ``target`` (or use ``compiled``) and compare
    each, batch and single state, with its reference (and Pinocchio) on ``states`` random states.
    One row per kernel. ``options``: the target's options (e.g. ``fixed=(32, 16)`` for hls,
    ``emulate=True`` for cuda: the GPU program run on the CPU)."""
    from . import build

    t = get_target(target)
    dt = np.dtype(dtype)
    if isinstance(states, bool) or not isinstance(states, (int, np.integer)) or not 1 <= states <= MAX_STATES:
        raise ValueError(f"states must be a whole number from 1 to {MAX_STATES}, got {states!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative whole number, got {seed!r}")
    kernels = registry.applicable(model, kernels)
    st = t.split_options(options, where="validate")
    k_ = compiled if compiled is not None else build(model, target=target, dtype=dt.name, kernels=kernels,
                                                     progress=progress, **st["generate"], **st["compile"])
    k_ = t.for_validation(k_, **st["run"])
    try:
        return _validate(model, k_, t, dt, st, states, seed, kernels, pinocchio, progress)
    except MemoryError:  # the states, the kernels' outputs for them, the references: all in memory
        raise RbdgenError(f"not enough memory to validate {states} states at once; give fewer states") from None


def _conditioning_bound(model, env: dict, tol: float) -> np.ndarray:
    """Per state, how far two correct float64 computations of a kernel that solves with the mass
    matrix (``needs_minv``) may differ: max(``tol``, ε · cond(M)). A solve with M loses up to
    about cond(M) · ε of relative accuracy in any backward-stable method, which neither rbdgen's
    recursion nor Pinocchio's escapes: on the full iCub with a floating base (cond(M) 10⁷…10¹¹ at
    random states) Pinocchio's M⁻¹ is up to 2.7e-7 from rbdgen's, and rbdgen's within 1e-9 of an
    iteratively refined inverse (tests/test_cli_codegen.py, benchmarks/results/robots.md). On a
    well-conditioned robot (cond(M) ≲ 10⁵) it is ``tol``."""
    (M,) = registry.reference(model, "crba", env)
    M = np.asarray(M, dtype=float).reshape(-1, model.nv, model.nv)
    cond = np.linalg.cond(M)
    return np.maximum(tol, np.finfo(np.float64).eps * np.where(np.isfinite(cond), cond, np.inf))


def _validate(model, k_, t, dt, st, states, seed, kernels, pinocchio, progress) -> list[Row]:
    floor = float(np.finfo(k_.dtype).tiny)  # the divisor's floor (module docstring)
    st64 = random_states(model, states, seed, kernels)
    # the kernels see the inputs rounded to the datapath's dtype; the oracles see exactly the same numbers
    st_dt = {n: np.ascontiguousarray(np.asarray(x, dtype=dt), dtype=k_.dtype) for n, x in st64.items()}
    st_ref = {n: x.astype(np.float64) for n, x in st_dt.items()}

    pin, pm = (None, "not compared (--no-pinocchio)") if not pinocchio else pinocchio_model(model)
    pin_note = getattr(pm, "rbdgen_note", "") if pin is not None else pm
    data = pm.createData() if pin is not None else None

    rows = []
    for name in kernels:
        if progress:
            progress(f"checking {name}")
        decl = registry.get(name)
        method = k_.kernel(name)
        in_names = decl.input_names
        args = [st_dt[n] for n in in_names]
        want = registry.reference(model, name, st_ref)
        batch = _tuple(method(*args))
        singles = [_tuple(method(*(a[i] for a in args))) for i in range(states)]
        errs = [relerr(g, w, floor) for g, w in zip(batch, want)]
        errs += [relerr(np.stack([s[j] for s in singles]), want[j], floor) for j in range(len(want))]
        err_ref = _max(errs)
        err_pin, note = None, pin_note
        if pin is not None and decl.pinocchio is None:
            note = f"{name}: no Pinocchio counterpart declared"
        elif pin is not None:
            pe = []
            env_p, batch_p, singles_p = st_ref, batch, singles
            if decl.pinocchio_env is not None:
                # inputs that make a Pinocchio quantity (the stale-data kernels: the exact state)
                env_p = decl.pinocchio_env(model, st_ref)
                args_p = [np.ascontiguousarray(env_p[n], dtype=k_.dtype) for n in in_names]
                batch_p = _tuple(method(*args_p))
                singles_p = [_tuple(method(*(a[i] for a in args_p))) for i in range(states)]
            try:
                for i in range(states):
                    qp = model.to_pinocchio_q(env_p["q"][i])
                    exp = decl.pinocchio(pin, pm, data, qp, *[env_p[n][i] for n in in_names[1:]])
                    pe.append(_max([relerr(b[i], e, floor) for b, e in zip(batch_p, exp)]
                                   + [relerr(s, e, floor) for s, e in zip(singles_p[i], exp)]))
                err_pin = _max(pe)
            except Exception as e:  # noqa: BLE001 — e.g. Pinocchio's aba refuses mimic joints
                note = f"{name}: Pinocchio cannot compute it here ({' '.join(str(e).split())[:120]})"
        tol = t.tolerance(decl, dt, st["generate"])
        if tol is None:  # fails: an error is only small against a bound measured for the format
            tol, note = float("nan"), (f"{name}: no measured bound for this format (nor for a format it refines, "
                                       f"with at least as many fractional and integer bits): not passed")
        tol_pin = pin_ok = None
        if err_pin is not None and tol == tol and decl.needs_minv and err_pin == err_pin and not err_pin <= tol:
            bound = _conditioning_bound(model, env_p, tol)
            if np.any(bound > tol):
                tol_pin, pin_ok = float(np.max(bound)), bool(np.all(np.asarray(pe) <= bound))
                cond = tol_pin / np.finfo(np.float64).eps
                note = (f"{note}; " if note else "") + (
                    f"{name}: vs Pinocchio bounded per state by ε·cond(M), up to {tol_pin:.1e} (cond(M) up to "
                    f"{cond:.1e}): two correct solves with M differ by that much; vs the reference, {tol:.0e}")
        ops = int(k_.op_counts[name]["total"])
        rows.append(Row(name, ops, err_ref, err_pin, tol, note, tol_pin, pin_ok))
    return rows


def _fmt_err(e) -> str:
    if e is None:
        return "n/a"
    return "nan" if e != e else f"{e:.1e}"


def format_table(rows: list[Row]) -> str:
    table = [("kernel", "ops", "vs reference", "vs pinocchio", "tolerance", "result")]
    for r in rows:
        table.append((r.kernel, str(r.ops), _fmt_err(r.err_ref), _fmt_err(r.err_pin),
                      "no bound" if r.tol != r.tol else f"{r.tol:.0e}" + ("" if r.tol_pin is None else
                                                                            f" (pinocchio {r.tol_pin:.0e})"),
                      "pass" if r.passed else "FAIL"))
    return "\n".join(text_table(table, left=(0, 5)))
