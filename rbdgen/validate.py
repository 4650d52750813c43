"""``rbdgen validate``: build a robot's kernels and check every one of them on random states
against the NumPy reference and, when it is installed, against Pinocchio.

Error measure (as in the tests): ``max|x − y| / max(1, max|y|)`` over all states and outputs of
a kernel, for the batch call and for one call per state. A kernel passes when both errors are at
most the tolerance of its dtype (float64: 1e-9; float32: :func:`float32_tolerance`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import reference as ref
from .algorithms import KERNELS
from .textutil import text_table

#: float64: two independent float64 computations of the same quantity (see tests/conftest.py)
TOL64 = 1e-9


#: float32 bounds (relative, max-norm): the worst error measured over the 21 robot cases of the
#: test suite (IR run in float32, random states), with ~8× margin: 5e-7 for the recursive
#: kernels, 1.4e-6 for aba/minv, 1.5e-5 for aba_derivatives (solo12 floating base, cond(M) 3e4).
#: Forward dynamics amplifies round-off by the conditioning of M, so a robot with a much
#: worse-conditioned M can exceed these; float64 is then the right choice.
FLOAT32_TOL = {
    "rnea": 4e-6, "nle": 4e-6, "gravity": 4e-6, "crba": 4e-6, "rnea_derivatives": 4e-6,
    "aba": 2e-5, "minv": 2e-5, "aba_derivatives": 1.2e-4,
}


def float32_tolerance(kernel: str, model) -> float:
    """Bound on a float32 kernel's relative error (see FLOAT32_TOL)."""
    return FLOAT32_TOL.get(kernel, 1e-3)


def tolerance(kernel: str, model, dtype) -> float:
    return TOL64 if np.dtype(dtype) == np.float64 else float32_tolerance(kernel, model)


def relerr(x, y) -> float:
    """max |x − y| / max(1, max |y|); NaN anywhere gives NaN (which fails every bound)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"shapes differ: {x.shape} vs {y.shape}")
    if x.size == 0:
        return 0.0
    d = np.abs(x - y)
    if np.isnan(d).any():
        return float("nan")
    return float(np.max(d) / max(1.0, float(np.max(np.abs(y)))))


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

    @property
    def passed(self) -> bool:
        ok = self.err_ref <= self.tol  # False for NaN
        return bool(ok and (self.err_pin is None or self.err_pin <= self.tol))


# ---- Pinocchio --------------------------------------------------------------------------------

def _sym(U):
    """Pinocchio fills only the upper triangle of M and M⁻¹."""
    U = np.array(U, dtype=float)
    return np.triu(U) + np.triu(U, 1).T


def pinocchio_model(model):
    """(pinocchio module, pinocchio model) for ``model``, or (None, reason)."""
    try:
        import pinocchio as pin
    except ImportError:
        return None, "pinocchio not installed"
    try:
        path = str(model.source)
        pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if model.floating_base \
            else pin.buildModelFromUrdf(path)
    except Exception as e:  # noqa: BLE001 — any failure of the oracle only drops the comparison
        return None, f"pinocchio cannot load {model.source}: {' '.join(str(e).split())[:200]}"
    if list(pm.names[1:]) != list(model.joint_names) or pm.nv != model.nv or pm.nq != model.nq_pinocchio:
        return None, "pinocchio's joints differ from rbdgen's (order or sizes): not compared"
    pm.gravity.linear = np.asarray(model.gravity, dtype=float)
    return pin, pm


def pinocchio_eval(pin, pm, data, name, qp, args):
    """Kernel ``name`` through Pinocchio at one state; every array copied (they are views into data)."""
    if name == "rnea":
        return (pin.rnea(pm, data, qp, *args).copy(),)
    if name == "nle":
        return (pin.nonLinearEffects(pm, data, qp, *args).copy(),)
    if name == "gravity":
        return (pin.computeGeneralizedGravity(pm, data, qp).copy(),)
    if name == "crba":
        return (_sym(pin.crba(pm, data, qp)),)
    if name == "aba":
        return (pin.aba(pm, data, qp, *args).copy(),)
    if name == "minv":
        return (_sym(pin.computeMinverse(pm, data, qp)),)
    if name == "rnea_derivatives":
        dq, dv, _ = pin.computeRNEADerivatives(pm, data, qp, *args)
        return dq.copy(), dv.copy()
    if name == "aba_derivatives":
        ddq, ddv, dtau = pin.computeABADerivatives(pm, data, qp, *args)
        return ddq.copy(), ddv.copy(), _sym(dtau)
    raise KeyError(name)


# ---- validation -------------------------------------------------------------------------------

def random_states(model, n: int, seed: int = 0) -> dict:
    """``n`` random states: q within the joint limits (unit quaternions), v, a, tau normal."""
    rng = np.random.default_rng(seed)
    q = model.random_q(rng, n)
    return {"q": q, "v": rng.normal(size=(n, model.nv)), "a": rng.normal(size=(n, model.nv)),
            "tau": rng.normal(size=(n, model.nv))}


def validate(model, *, target: str = "cpu", dtype="float64", states: int = 16, seed: int = 0, opt: str = "-O3",
             march: str | None = None, kernels=KERNELS, pinocchio: bool = True, progress=None,
             compiled=None, arch=None, emulate: bool = False) -> list[Row]:
    """Build ``kernels`` with :func:`rbdgen.build` (or use ``compiled``) and compare each, batch and
    single state, with the reference (and Pinocchio) on ``states`` random states. One row per kernel.
    ``target="cuda"``: on the GPU (``arch``), or with ``emulate`` the GPU program run on the CPU."""
    from . import build

    dt = np.dtype(dtype)
    if states < 1:
        raise ValueError(f"states must be at least 1, got {states}")
    kernels = tuple(k for k in KERNELS if k in kernels)
    extra = {"arch": arch} if target == "cuda" else {"march": march}
    k_ = compiled if compiled is not None else build(model, target=target, dtype=dt.name, kernels=kernels, opt=opt,
                                                     progress=progress, **extra)
    if emulate:
        k_ = k_.emulated("default")
    elif target == "cuda":
        k_.require_gpu("rbdgen validate --target cuda")
    st64 = random_states(model, states, seed)
    # the kernels see the inputs rounded to their dtype; the oracles see exactly the same numbers
    st = {n: np.ascontiguousarray(x, dtype=dt) for n, x in st64.items()}
    st_ref = {n: x.astype(np.float64) for n, x in st.items()}

    pin, pm = (None, "not compared (--no-pinocchio)") if not pinocchio else pinocchio_model(model)
    pin_note = "" if pin is not None else pm
    data = pm.createData() if pin is not None else None

    rows = []
    for name in kernels:
        if progress:
            progress(f"checking {name}")
        method = getattr(k_, name)
        in_names = [n for n, _ in method.inputs]
        args = [st[n] for n in in_names]
        # reference: every state at once (its own loop)
        want = _tuple(getattr(ref, name)(model, *(st_ref[n] for n in in_names)))
        batch = _tuple(method(*args))
        singles = [_tuple(method(*(a[i] for a in args))) for i in range(states)]
        errs = [relerr(g, w) for g, w in zip(batch, want)]
        errs += [relerr(np.stack([s[j] for s in singles]), want[j]) for j in range(len(want))]
        err_ref = _max(errs)
        err_pin = None
        if pin is not None:
            pe = []
            for i in range(states):
                qp = model.to_pinocchio_q(st_ref["q"][i])
                exp = pinocchio_eval(pin, pm, data, name, qp, [st_ref[n][i] for n in in_names[1:]])
                pe += [relerr(b[i], e) for b, e in zip(batch, exp)]
                pe += [relerr(s, e) for s, e in zip(singles[i], exp)]
            err_pin = _max(pe)
        ops = int(k_.op_counts[name]["total"])
        rows.append(Row(name, ops, err_ref, err_pin, tolerance(name, model, dt), pin_note))
    return rows


def _fmt_err(e) -> str:
    if e is None:
        return "n/a"
    return "nan" if e != e else f"{e:.1e}"


def format_table(rows: list[Row]) -> str:
    table = [("kernel", "ops", "vs reference", "vs pinocchio", "tolerance", "result")]
    for r in rows:
        table.append((r.kernel, str(r.ops), _fmt_err(r.err_ref), _fmt_err(r.err_pin), f"{r.tol:.0e}",
                      "pass" if r.passed else "FAIL"))
    return "\n".join(text_table(table, left=(0, 5)))
