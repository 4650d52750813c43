"""A floating base's quaternion need not be unit (issue 46, item 3).

q = [xyz, quaternion u = (x y z w)]. The NumPy reference takes the rotation of u/|u|
(rbdgen.spatial.quat_to_rot); the kernels used to take u as unit, so at |u| = 1.01 they were
1e-2 off the reference, at |u| = 2 by 4 to 170 (relative), with nothing to say so. Now they build
the rotation of u/|u| too (rbdgen/algorithms/trace.py: s = 2/|u|² in place of 2, no square
root). Checked on the floating quadruped (branched: every kernel family has work there),
through the IR interpreter (the definition of what the IR means) and compiled for the CPU, for
every kernel that takes q, against the reference (the independent oracle). A zero quaternion
has no rotation: every output that depends on the base's orientation is NaN in the kernels and
in the reference, and a finite kernel output is the value it has at every orientation
(README.md, docs/errors.md). On an HLS ap_fixed datapath the division saturates instead: the
base is taken unrotated and the division by zero is counted (div_by_zero).
"""
from __future__ import annotations

import warnings

import numpy as np

import rbdgen
from rbdgen import registry
from rbdgen.algorithms import KERNELS, trace
from rbdgen.ir import run

from conftest import ROBOT_CASES, TOL64, kernel_args, kernel_err, load_case, random_state, ref_out

#: |u| of the checks: inside, just off, and well outside the unit sphere
SCALES = (0.5, 1.01, 2.0)
#: every kernel that takes a configuration
Q_KERNELS = tuple(k for k in KERNELS if "q" in registry.get(k).input_names)
N = 3  # states per scale


def _model():
    return load_case(*[c for c in ROBOT_CASES if c.id == "quadruped-floating"][0].values)


def _quat(m) -> slice:
    """q's columns holding the free-flyer's quaternion."""
    (i,) = [i for i, t in enumerate(m.joint_types) if t == "floating"]
    s = m.q_slice(i)
    return slice(s.start + 3, s.start + 7)


def _with_q(name, args, q):
    """``args`` (kernel ``name``'s inputs, declared order) with q replaced: the other inputs,
    the stale-data kernels' ``stale`` included, stay as drawn."""
    names = registry.get(name).input_names
    return tuple(q if n == "q" else x for n, x in zip(names, args))


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _reference(m, name, *args):
    """The reference's outputs, always a tuple; NumPy's invalid-value warning of a zero
    quaternion (0/0) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _tuple(ref_out(m, name, *args))


def _scaled_states(m, seed=46):
    """(unit q, q with each state's quaternion scaled by every |u| of SCALES, v, a, tau): the
    scaled batch is the unit one repeated per scale (rows scale-major), its other inputs too."""
    q, v, a, tau = random_state(m, seed=seed, n=N)
    u = _quat(m)
    qs = np.concatenate([q] * len(SCALES))
    qs[:, u] *= np.repeat(SCALES, N)[:, None]
    rep = lambda x: np.concatenate([x] * len(SCALES))  # noqa: E731
    return q, qs, rep(v), rep(a), rep(tau)


def test_scaled_states_are_what_they_say():
    m = _model()
    q, qs, *_ = _scaled_states(m)
    u = _quat(m)
    assert np.allclose(np.linalg.norm(q[:, u], axis=1), 1.0)
    assert np.allclose(np.linalg.norm(qs[:, u], axis=1), np.repeat(SCALES, N))
    assert len(Q_KERNELS) >= 20 and {"rnea", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives",
                                     "forward_kinematics", "rnea_scan", "rnea_stale", "contact_terms"} <= set(Q_KERNELS)


def test_reference_normalises_the_quaternion():
    """The oracle's side of the contract: its outputs at c·u are its outputs at u."""
    m = _model()
    q, qs, v, a, tau = _scaled_states(m)
    for k in Q_KERNELS:
        args = kernel_args(k, qs, v, a, tau, m)
        unit = _reference(m, k, *_with_q(k, args, np.concatenate([q] * len(SCALES))))
        assert kernel_err(_reference(m, k, *args), unit) <= TOL64, k


def _errors(f, m, q, v, a, tau):
    """Kernel ``f(name, *args)`` against the reference, per kernel taking q, and per |u|."""
    errs = {}
    for k in Q_KERNELS:
        args = kernel_args(k, q, v, a, tau, m)
        got, exp = _tuple(f(k, *args)), _reference(m, k, *args)
        for j, c in enumerate(SCALES):
            rows = slice(j * N, (j + 1) * N)
            errs[(k, c)] = kernel_err(tuple(g[rows] for g in got), tuple(e[rows] for e in exp))
    return errs


def test_interpreted_kernels_normalise_the_quaternion():
    """Every kernel taking q, through the IR interpreter, at |u| = 0.5, 1.01, 2."""
    m = _model()
    _, qs, v, a, tau = _scaled_states(m)
    errs = _errors(lambda k, *args: run(trace(m, k), *args), m, qs, v, a, tau)
    bad = {key: e for key, e in errs.items() if not e <= TOL64}
    assert not bad, f"kernel vs reference above {TOL64} (kernel, |u|): {bad}"


_built: dict = {}


def _compiled(m):
    """The float64 CPU build of tests/test_cpu_kernels.py's quadruped-floating case (the same
    call, so the two share the compile cache): every kernel, SIMD batch path, -O0."""
    if "cpu" not in _built:
        _built["cpu"] = rbdgen.build(m, dtype="float64", kernels=tuple(KERNELS), opt="-O0", simd=True)
    return _built["cpu"]


def test_compiled_kernels_normalise_the_quaternion():
    """The same through the compiled C++ kernels: the batch (SIMD lanes and a scalar
    remainder) and one state at every |u|."""
    m = _model()
    kern = _compiled(m)
    _, qs, v, a, tau = _scaled_states(m)
    errs = _errors(lambda k, *args: kern.kernel(k)(*args), m, qs, v, a, tau)
    for j, c in enumerate(SCALES):
        r = j * N + 1
        for k in Q_KERNELS:
            args = tuple(x[r] for x in kernel_args(k, qs, v, a, tau, m))
            errs[(k, c, "one state")] = kernel_err(_tuple(kern.kernel(k)(*args)), _reference(m, k, *args))
    bad = {key: e for key, e in errs.items() if not e <= TOL64}
    assert not bad, f"compiled kernel vs reference above {TOL64}: {bad}"


# ---- a zero quaternion -------------------------------------------------------------------------

def _zero_quaternion_case(m, f):
    """For every kernel taking q: (its outputs at u = 0 from ``f``, the reference's at u = 0,
    the reference's at a unit u, which entries depend on the base's orientation). The other
    inputs are drawn at unit u and kept; an entry depends on the orientation where the reference
    differs between three random unit quaternions (all else equal)."""
    q, v, a, tau = random_state(m, seed=47, n=1)
    u = _quat(m)
    rng = np.random.default_rng(47)
    qs = []
    for _ in range(3):
        qo = q.copy()
        qo[:, u] = rng.normal(size=4)
        qo[:, u] /= np.linalg.norm(qo[:, u])
        qs.append(qo)
    q0 = q.copy()
    q0[:, u] = 0.0
    out = {}
    for k in Q_KERNELS:
        args = kernel_args(k, q, v, a, tau, m)
        refs = [_reference(m, k, *_with_q(k, args, qo)) for qo in qs]
        scale = [max(1.0, float(np.max(np.abs(r)))) for r in refs[0]]
        dep = tuple(np.any([np.abs(r[i] - refs[0][i]) > 1e-9 * scale[i] for r in refs[1:]], axis=0)
                    for i in range(len(refs[0])))
        out[k] = (_tuple(f(k, *_with_q(k, args, q0))), _reference(m, k, *_with_q(k, args, q0)), refs[0], dep)
    return out


def _check_zero_quaternion(m, f):
    bad = []
    case = _zero_quaternion_case(m, f)
    for k in ("rnea", "aba", "forward_kinematics", "frame_jacobian_world", "rnea_stale"):  # the test has teeth
        assert all(d.any() for d in case[k][3][:1]), k
    for k, (got, exp, unit, dep) in case.items():
        for i, (g, e, ue, d) in enumerate(zip(got, exp, unit, dep)):
            scale = max(1.0, float(np.max(np.abs(ue))))
            if not np.isnan(g[d]).all():
                bad.append((k, i, "kernel finite where the output depends on the orientation"))
            if not np.isnan(e[d]).all():
                bad.append((k, i, "reference finite where the output depends on the orientation"))
            fin = ~np.isnan(g)
            if not np.all(np.abs(g[fin] - ue[fin]) <= TOL64 * scale):
                bad.append((k, i, "a finite kernel output is not its value at every orientation"))
            if np.isinf(g).any():
                bad.append((k, i, "kernel inf"))
    assert not bad, bad


def test_zero_quaternion_interpreted():
    """u = 0: NaN in every output that depends on the orientation, kernel (2/0·0) and reference
    (0/0) alike; every finite output the right number."""
    m = _model()
    _check_zero_quaternion(m, lambda k, *args: run(trace(m, k), *args))


def test_zero_quaternion_compiled():
    m = _model()
    kern = _compiled(m)
    _check_zero_quaternion(m, lambda k, *args: kern.kernel(k)(*args))


def test_zero_quaternion_fixed_point_saturates_and_is_counted():
    """ap_fixed has no NaN: rbd_div saturates 2/0, every product with it is 0 and the base is
    taken unrotated (R = I), and the division by zero is counted. A non-unit quaternion is
    normalised there too, within the kernel's declared Q16.16 bound."""
    m = _model()
    kern = rbdgen.build(m, target="hls", fixed=(32, 16), kernels=("forward_kinematics",), opt="-O0")
    tol = registry.get("forward_kinematics").fixed_tol[(32, 16)]
    u = _quat(m)
    q = random_state(m, seed=48, n=4)[0]
    kern.div_by_zero()
    qs = q.copy()
    qs[:, u] *= np.array([0.5, 1.0, 1.01, 2.0])[:, None]
    fk = lambda q: _tuple(kern.kernel("forward_kinematics")(q))  # noqa: E731
    assert kernel_err(fk(qs), _reference(m, "forward_kinematics", q)) <= tol
    assert kern.div_by_zero() == 0
    q0, qi = q.copy(), q.copy()
    q0[:, u], qi[:, u] = 0.0, [0.0, 0.0, 0.0, 1.0]
    got = fk(q0)
    assert kern.div_by_zero() == len(q0)
    assert np.all(np.isfinite(got[0])) and kernel_err(got, _reference(m, "forward_kinematics", qi)) <= tol
