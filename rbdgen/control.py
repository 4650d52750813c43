"""Closed-loop simulation: computed-torque PD control of a fixed-base robot (issue 14).

What for: to measure what stale-data inverse dynamics (:func:`rbdgen.reference.rnea_stale`)
costs in tracking, against exact RNEA, as the control period grows — and where it goes unstable::

    import rbdgen.control as ctl
    m = ctl.planar_arm()                                   # 3-link arm, gravity in its plane
    r = ctl.simulate(m, "fast", controller="yamakita", period=1e-3, duration=1.0)
    r.max_error, r.rms_error, r.diverged                   # rad, rad, bool

(docs/control.md: the API, the study and its conclusions.)

**Plant.** The robot's exact forward dynamics (``aba``) integrated by the classical fourth-order
Runge–Kutta method at a fixed step ``plant_step`` (default 0.25 ms). The torque is constant over
each plant step (a zero-order hold whose switching instants fall on step boundaries, which is
why the control period and the delay must be multiples of the step): RK4 then integrates a
smooth right-hand side and keeps its fourth order. 0.25 ms is the smallest control period of the
study, and RK4's error at that step is far below the tracking errors being measured: for the
closed loop's fastest rate Ω (≈ the gains' ω_n, or the joint speeds in "very fast" motion, a few
tens of rad/s) the global error is ~(Ω h)⁴ ≈ 1e-9 relative (tests check the fourth order and the
energy balance). ``plant="reference"`` (default) is :func:`rbdgen.reference.aba`;
``plant="compiled"`` builds the generated ``aba`` kernel (≈ 1000× faster, needs a C++
compiler); or pass any callable ``aba(q, v, tau) -> qdd``.

**Controller.** Every control period ``T`` (``period``) the controller measures (q, v) exactly at
t_k = kT and computes ::

    a_cmd = qdd_des(t_k) + Kd (v_des(t_k) - v) + Kp (q_des(t_k) - q)
    tau_k = ID(q, v, a_cmd)

with ``ID`` exact RNEA (``controller="exact"``) or stale RNEA (``controller`` = a scheme of
:data:`rbdgen.reference.STALE_SCHEMES`; its state carried from call to call, ``None`` on the
first). ``tau_k`` is applied from t_k + d to t_{k+1} + d (zero-order hold), ``d`` = ``delay``, a
multiple of the plant step, any d ≥ 0 (d > T: several torques in flight). Before the first
torque arrives (t < d) the plant gets ``tau_0``, as if the loop had been running with the robot
on the trajectory. With exact ID, continuous time and d = 0 the error e = q_des − q obeys
ë + Kd ė + Kp e = 0 per joint; the defaults ``Kp = ω_n² I``, ``Kd = 2 ζ ω_n I`` with
ω_n = 20 rad/s (3.2 Hz) and ζ = 1 (critically damped: no overshoot). ω_n T = 0.4 at the study's
longest period, 20 ms: slow enough for the exact loop to stay stable there, fast enough that
tracking errors are set by the controller, not by the gains.

**Inverse dynamics backend.** ``inverse_dynamics=None`` uses the NumPy reference. A callable
replaces it: ``f(q, v, a) -> tau`` for ``controller="exact"``; ``f(q, v, a, state) ->
(tau, state)`` for a stale scheme, ``state`` opaque to the simulator (``None`` on the first call,
then whatever ``f`` returned). :func:`kernel_inverse_dynamics` makes one from generated kernels
(``kern.rnea``, ``kern.rnea_stale``, ``kern.rnea_stale_yamakita``, ``kern.rnea_stale_hamilton``,
``kern.rnea_stale_binder_herzog_lwp``: :data:`KERNEL_FOR`).

**Trajectories** (:func:`trajectory`): per joint, two sinusoids about the middle of the joint's
range, ``q = c + A (0.6 sin(ωt + φ₁) + 0.4 sin(1.7ωt + φ₂))``, so |q − c| ≤ A and the joint
stays inside its limits (A = ``amplitude`` × half the range). ω = 2πf, f the base frequency:
:data:`SPEEDS` = slow 0.2 Hz, fast 1 Hz, very fast 2.5 Hz. The peak speed, acceleration and jerk
are ≤ 1.28 Aω, 1.76 Aω², 2.57 Aω³ (for the iiwa at amplitude 0.25, A ≈ 0.5–0.75 rad: very fast
reaches up to ~15 rad/s and ~300 rad/s², beyond what the real robot can do — a stress test).

**Result** (:class:`SimResult`): the time series at every plant step, max and RMS tracking error,
``diverged`` (the error passed ``diverge_at`` rad, or a state became non-finite: the run stops
there), and the robot's energy and the actuators' work.
"""
from __future__ import annotations

import math
import os
import tempfile
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from . import reference as ref
from .reference.stale import SCHEME_KERNELS, STALE_SCHEMES

#: trajectory presets: base frequency in Hz
SPEEDS = {"slow": 0.2, "fast": 1.0, "very fast": 2.5}
#: ``controller=`` values
CONTROLLERS = ("exact",) + tuple(STALE_SCHEMES)
#: the second sinusoid's frequency ratio and the two weights (sum 1: |q − c| ≤ A)
_RATIO, _W1, _W2 = 1.7, 0.6, 0.4

DEFAULT_PLANT_STEP = 2.5e-4
DEFAULT_NATURAL_FREQUENCY = 20.0
DEFAULT_DAMPING = 1.0
_PLAIN_JOINTS = ("revolute", "continuous", "prismatic")


# ---- models ---------------------------------------------------------------------------------

def planar_arm_urdf(n: int = 3, lengths=None, masses=None, width: float = 0.05) -> str:
    """URDF text of an ``n``-link planar arm: revolute joints about y, links along x at q = 0,
    so gravity (−z) acts in the arm's plane. Each link is a uniform bar (square section
    ``width``): centre of mass at mid-length, I_xx = m w²/6, I_yy = I_zz = m (l² + w²)/12.
    Defaults: lengths 0.5, 0.4, 0.3, … m (−0.1 per link, ≥ 0.1), masses 3, 2, 1, … kg (≥ 0.5);
    joint limits ±π, effort 100 N·m."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n: the number of links must be an integer ≥ 1, got {n!r}")
    lengths = [max(0.5 - 0.1 * i, 0.1) for i in range(n)] if lengths is None else list(lengths)
    masses = [max(3.0 - 1.0 * i, 0.5) for i in range(n)] if masses is None else list(masses)
    for name, xs in (("lengths", lengths), ("masses", masses)):
        if len(xs) != n or not all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in xs):
            raise ValueError(f"{name}: expected {n} positive numbers, got {xs!r}")
    if not (isinstance(width, (int, float)) and math.isfinite(width) and width > 0):
        raise ValueError(f"width: expected a positive number, got {width!r}")
    w = float(width)
    out = ['<?xml version="1.0"?>', f'<robot name="planar_arm{n}">', '  <link name="base"/>']
    prev, x0 = "base", 0.0
    for i, (l, m) in enumerate(zip(map(float, lengths), map(float, masses))):
        ixx, iyy = m * w * w / 6.0, m * (l * l + w * w) / 12.0
        out += [f'  <link name="link{i + 1}"><inertial><origin xyz="{l / 2!r} 0 0" rpy="0 0 0"/>'
                f'<mass value="{m!r}"/><inertia ixx="{ixx!r}" ixy="0" ixz="0" iyy="{iyy!r}" iyz="0" '
                f'izz="{iyy!r}"/></inertial></link>',
                f'  <joint name="joint{i + 1}" type="revolute"><parent link="{prev}"/>'
                f'<child link="link{i + 1}"/><origin xyz="{x0!r} 0 0" rpy="0 0 0"/><axis xyz="0 1 0"/>'
                f'<limit lower="{-math.pi!r}" upper="{math.pi!r}" effort="100" velocity="10"/></joint>']
        prev, x0 = f"link{i + 1}", l
    out += ['  <link name="tip"/>',
            f'  <joint name="tip_joint" type="fixed"><parent link="{prev}"/><child link="tip"/>'
            f'<origin xyz="{x0!r} 0 0" rpy="0 0 0"/></joint>', "</robot>"]
    return "\n".join(out) + "\n"


def planar_arm(n: int = 3, **kw):
    """The :func:`planar_arm_urdf` arm loaded as a :class:`~rbdgen.RobotModel` (``gravity=`` is
    passed to :func:`rbdgen.load_urdf`, the rest to :func:`planar_arm_urdf`)."""
    from . import load_urdf

    load_kw = {k: kw.pop(k) for k in ("gravity",) if k in kw}
    text = planar_arm_urdf(n, **kw)
    fd, path = tempfile.mkstemp(suffix=".urdf", prefix="rbdgen-planar-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return load_urdf(path, **load_kw)
    finally:
        os.unlink(path)


def without_gravity(model):
    """The same robot with gravity switched off (for open-loop energy checks)."""
    _check_model(model)
    return replace(model, gravity=np.zeros(3))


def _check_model(model):
    from .model import RobotModel

    if not isinstance(model, RobotModel):
        raise ValueError(f"model: expected a RobotModel from rbdgen.load_urdf (a plain tree; mimic-coupled "
                         f"models are not supported here), got {type(model).__name__}")
    if model.floating_base or model.nq != model.nv:
        raise ValueError(f"model: the simulator takes fixed-base robots whose joint positions are plain "
                         f"coordinates (nq == nv); {model.name} is "
                         f"{'floating-base' if model.floating_base else f'nq={model.nq}, nv={model.nv}'}")
    bad = [f"{j} ({t})" for j, t in zip(model.joint_names, model.joint_types) if t not in _PLAIN_JOINTS]
    if bad:
        raise ValueError(f"model: joints the simulator cannot integrate as plain coordinates: {', '.join(bad)}")


# ---- trajectories ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Trajectory:
    """``q = c + A (0.6 sin(ωt + φ₁) + 0.4 sin(1.7ωt + φ₂))`` per joint; call it with a time
    (or an array of times) to get ``(q, v, a)``, each ``(nq,)`` (or ``(len(t), nq)``)."""

    center: np.ndarray
    amplitude: np.ndarray
    omega: float
    phase: np.ndarray  # (nq, 2)
    speed: str | float = ""

    def __call__(self, t):
        t = np.asarray(t, dtype=float)[..., None]
        w1, w2 = self.omega, _RATIO * self.omega
        s1, c1 = np.sin(w1 * t + self.phase[:, 0]), np.cos(w1 * t + self.phase[:, 0])
        s2, c2 = np.sin(w2 * t + self.phase[:, 1]), np.cos(w2 * t + self.phase[:, 1])
        A = self.amplitude
        q = self.center + A * (_W1 * s1 + _W2 * s2)
        v = A * (_W1 * w1 * c1 + _W2 * w2 * c2)
        a = -A * (_W1 * w1 * w1 * s1 + _W2 * w2 * w2 * s2)
        return q, v, a

    def jerk(self, t):
        """d³q/dt³ (for error bounds)."""
        t = np.asarray(t, dtype=float)[..., None]
        w1, w2 = self.omega, _RATIO * self.omega
        return -self.amplitude * (_W1 * w1 ** 3 * np.cos(w1 * t + self.phase[:, 0])
                                  + _W2 * w2 ** 3 * np.cos(w2 * t + self.phase[:, 1]))


def trajectory(model, speed="fast", amplitude: float = 0.25, seed: int = 0) -> Trajectory:
    """A smooth trajectory inside the joint limits (see the module doc). ``speed``: a name of
    :data:`SPEEDS` or a base frequency in Hz; ``amplitude``: the fraction (0, 1] of each joint's
    half range (joints without limits: of π rad, or 0.5 m for a prismatic joint); ``seed``: the
    phases."""
    _check_model(model)
    if isinstance(speed, str):
        if speed not in SPEEDS:
            raise ValueError(f"speed must be one of {', '.join(map(repr, SPEEDS))} or a frequency in Hz, got {speed!r}")
        f = SPEEDS[speed]
    elif isinstance(speed, (int, float, np.floating)) and not isinstance(speed, bool) and math.isfinite(speed) and speed > 0:
        f = float(speed)
    else:
        raise ValueError(f"speed must be one of {', '.join(map(repr, SPEEDS))} or a positive frequency in Hz, got {speed!r}")
    if not (isinstance(amplitude, (int, float, np.floating)) and not isinstance(amplitude, bool)
            and 0 < amplitude <= 1):
        raise ValueError(f"amplitude: a fraction of each joint's half range in (0, 1], got {amplitude!r}")
    lo, hi = np.array(model.lower, dtype=float), np.array(model.upper, dtype=float)
    for i, t in enumerate(model.joint_types):
        if t == "continuous" or not (np.isfinite(lo[i]) and np.isfinite(hi[i])):
            r = 0.5 if t == "prismatic" else math.pi
            lo[i], hi[i] = -r, r
    rng = np.random.default_rng(seed)
    return Trajectory(center=(lo + hi) / 2, amplitude=float(amplitude) * (hi - lo) / 2, omega=2 * math.pi * f,
                      phase=rng.uniform(0, 2 * math.pi, (model.nq, 2)), speed=speed)


# ---- results --------------------------------------------------------------------------------

@dataclass
class SimResult:
    """One run. Time series at every plant step (the torque applied over [t, t + h)); ``q`` etc.
    end where the run stopped if it diverged."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    q_des: np.ndarray
    v_des: np.ndarray
    tau: np.ndarray
    controller: str
    period: float
    delay: float
    plant_step: float
    diverged: bool
    diverged_at: float | None
    model: object = field(repr=False)

    @property
    def error(self) -> np.ndarray:
        """q_des − q, ``(len(t), nq)``."""
        return self.q_des - self.q

    @property
    def max_error(self) -> float:
        """max over time and joints of |q_des − q| (rad); ``inf`` if the run diverged."""
        if self.diverged:
            return math.inf
        return float(np.max(np.abs(self.error)))

    @property
    def rms_error(self) -> float:
        """RMS over time and joints of q_des − q (rad); ``inf`` if the run diverged."""
        if self.diverged:
            return math.inf
        return float(np.sqrt(np.mean(self.error ** 2)))

    def energy(self, stride: int = 1):
        """``(kinetic, potential)`` at ``t[::stride]`` (J): ½ vᵀM(q)v with the reference
        ``crba``, and −Σ mᵢ g·cᵢ with each body's centre of mass placed by the reference forward
        kinematics (zero at the world origin)."""
        return kinetic_energy(self.model, self.q[::stride], self.v[::stride]), \
            potential_energy(self.model, self.q[::stride])

    def actuator_work(self) -> np.ndarray:
        """Work done by the joint torques from t[0] to each t (J). The torque is constant over
        each plant step, so the work over a step is τ·Δq exactly (no quadrature error)."""
        dw = np.einsum("ij,ij->i", self.tau[:-1], np.diff(self.q, axis=0))
        return np.concatenate([[0.0], np.cumsum(dw)])


def kinetic_energy(model, q, v) -> np.ndarray:
    """½ vᵀ M(q) v for each row of ``q``, ``v`` (``(N, nq)``) — the reference ``crba``."""
    q, v = np.atleast_2d(q), np.atleast_2d(v)
    M = ref.crba(model, q)
    return 0.5 * np.einsum("ni,nij,nj->n", v, M, v)


def potential_energy(model, q) -> np.ndarray:
    """−Σ mᵢ g·cᵢ (world coordinates) for each row of ``q``."""
    q = np.atleast_2d(q)
    oMb = ref.forward_kinematics(model, q)                      # (N, nb, 4, 4)
    mass = model.inertia[:, 5, 5]
    mc = model.inertia[:, 0:3, 3:6]                             # m·[c]× (Featherstone's spatial inertia)
    c = np.stack([mc[:, 2, 1], mc[:, 0, 2], mc[:, 1, 0]], axis=1) / np.where(mass > 0, mass, 1.0)[:, None]
    cw = np.einsum("nbij,bj->nbi", oMb[..., :3, :3], c) + oMb[..., :3, 3]
    return -np.einsum("b,nbi,i->n", mass, cw, np.asarray(model.gravity, dtype=float))


# ---- the simulator --------------------------------------------------------------------------

def _positive(name, x):
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name}: expected a positive number of seconds, got {x!r}")
    return float(x)


def _steps(name, x, h, allow_zero=False):
    """x as a whole number of plant steps h."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)) or not math.isfinite(x) \
            or x < 0 or (x == 0 and not allow_zero):
        raise ValueError(f"{name}: expected a {'non-negative' if allow_zero else 'positive'} number of seconds, got {x!r}")
    k = round(x / h)
    if abs(k * h - x) > 1e-9 * max(x, h):
        raise ValueError(f"{name}: {x!r} s is not a whole number of plant steps ({h!r} s)")
    return int(k)


def _plant(model, plant):
    if callable(plant):
        return plant
    if plant == "reference":
        return lambda q, v, tau: ref.aba(model, q, v, tau)
    if plant == "compiled":
        from . import build

        return build(model, kernels=["aba"], simd=False).aba
    raise ValueError(f"plant: expected 'reference', 'compiled' or a callable aba(q, v, tau) -> qdd, got {plant!r}")


def _gain(name, x, default, n):
    if x is None:
        return np.full(n, default)
    g = np.asarray(x, dtype=float)
    if g.ndim == 0:
        g = np.full(n, float(g))
    if g.shape != (n,) or not np.all(np.isfinite(g)) or np.any(g < 0):
        raise ValueError(f"{name}: expected a non-negative number or {n} of them, got {x!r}")
    return g


def simulate(model, motion=None, *, controller: str = "exact", period: float = 1e-3, delay: float = 0.0,
             duration: float = 2.0, plant_step: float = DEFAULT_PLANT_STEP,
             natural_frequency: float = DEFAULT_NATURAL_FREQUENCY, damping: float = DEFAULT_DAMPING,
             kp=None, kd=None, inverse_dynamics=None, plant="reference", q0=None, v0=None,
             diverge_at: float = 1.0) -> SimResult:
    """Computed-torque control of ``model`` along ``motion`` (a :class:`Trajectory`, a name
    of :data:`SPEEDS`, or ``None``: "fast"); see the module doc for what each argument means.

    ``kp``, ``kd`` (a number or one per joint) override ``natural_frequency`` (ω_n, rad/s) and
    ``damping`` (ζ): Kp = ω_n², Kd = 2ζω_n. ``q0``, ``v0``: the initial state (default: on the
    trajectory at t = 0). ``diverge_at``: the tracking error (rad, any joint) taken as
    divergence. Times in seconds; ``period``, ``delay`` and ``duration`` whole numbers of
    ``plant_step``."""
    _check_model(model)
    if controller not in CONTROLLERS:
        raise ValueError(f"controller must be one of {', '.join(map(repr, CONTROLLERS))}, got {controller!r}")
    if motion is None:
        motion = "fast"
    if isinstance(motion, str):
        motion = trajectory(model, motion)
    if not isinstance(motion, Trajectory):
        raise ValueError(f"motion: expected a Trajectory (rbdgen.control.trajectory) or a speed name, "
                         f"got {type(motion).__name__}")
    if motion.center.shape != (model.nq,):
        raise ValueError(f"motion: made for {motion.center.shape[0]} joints, the model has {model.nq}")
    h = _positive("plant_step", plant_step)
    K = _steps("period", period, h)
    D = _steps("delay", delay, h, allow_zero=True)
    N = _steps("duration", duration, h)
    wn = _positive("natural_frequency", natural_frequency)
    if isinstance(damping, bool) or not isinstance(damping, (int, float, np.floating)) or not math.isfinite(damping) or damping < 0:
        raise ValueError(f"damping: expected a non-negative number, got {damping!r}")
    Kp = _gain("kp", kp, wn * wn, model.nv)
    Kd = _gain("kd", kd, 2.0 * float(damping) * wn, model.nv)
    if isinstance(diverge_at, bool) or not isinstance(diverge_at, (int, float, np.floating)) or not diverge_at > 0:
        raise ValueError(f"diverge_at: expected a positive error in rad, got {diverge_at!r}")
    if inverse_dynamics is not None and not callable(inverse_dynamics):
        raise ValueError(f"inverse_dynamics: expected a callable, got {type(inverse_dynamics).__name__}")
    fd = _plant(model, plant)
    if inverse_dynamics is None:
        if controller == "exact":
            ident = lambda q, v, a: ref.rnea(model, q, v, a)  # noqa: E731
        else:
            ident = lambda q, v, a, s: ref.rnea_stale(model, q, v, a, s, scheme=controller)  # noqa: E731
    else:
        ident = inverse_dynamics

    t = np.arange(N + 1) * h
    qd_all, vd_all, ad_all = motion(t)
    n = model.nq
    q = qd_all[0].copy() if q0 is None else _state("q0", q0, n)
    v = vd_all[0].copy() if v0 is None else _state("v0", v0, n)
    Q, V, TAU = np.empty((N + 1, n)), np.empty((N + 1, n)), np.empty((N + 1, n))
    pending: deque = deque()
    tau_now = None
    stale = None
    diverged_at = None
    last = N
    for k in range(N + 1):
        Q[k], V[k] = q, v
        e = qd_all[k] - q
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))) or np.max(np.abs(e)) > diverge_at:
            diverged_at, last = float(t[k]), k
            break
        if k % K == 0:
            a_cmd = ad_all[k] + Kd * (vd_all[k] - v) + Kp * e
            if controller == "exact":
                tau_k = np.asarray(ident(q, v, a_cmd), dtype=float)
            else:
                tau_k, stale = ident(q, v, a_cmd, stale)
                tau_k = np.asarray(tau_k, dtype=float)
            if tau_k.shape != (n,):
                raise ValueError(f"inverse_dynamics: returned a torque of shape {tau_k.shape}, expected ({n},)")
            pending.append((k + D, tau_k))
            if tau_now is None:
                tau_now = tau_k
        while pending and pending[0][0] <= k:
            tau_now = pending.popleft()[1]
        TAU[k] = tau_now
        if k == N:
            break
        q, v = _rk4(fd, q, v, tau_now, h)
    s = slice(0, last + 1)
    if diverged_at is not None:
        TAU[last] = np.nan  # nothing was applied from there
    return SimResult(t=t[s], q=Q[s], v=V[s], q_des=qd_all[s], v_des=vd_all[s], tau=TAU[s], controller=controller,
                     period=K * h, delay=D * h, plant_step=h, diverged=diverged_at is not None,
                     diverged_at=diverged_at, model=model)


def _state(name, x, n):
    a = np.asarray(x, dtype=float)
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: expected {n} finite numbers, got shape {a.shape}")
    return a.copy()


def _rk4(fd, q, v, tau, h):
    """One classical Runge–Kutta step of q̇ = v, v̇ = aba(q, v, τ) with τ held."""
    a1 = fd(q, v, tau)
    q2, v2 = q + 0.5 * h * v, v + 0.5 * h * a1
    a2 = fd(q2, v2, tau)
    q3, v3 = q + 0.5 * h * v2, v + 0.5 * h * a2
    a3 = fd(q3, v3, tau)
    q4, v4 = q + h * v3, v + h * a3
    a4 = fd(q4, v4, tau)
    return (q + h / 6.0 * (v + 2.0 * v2 + 2.0 * v3 + v4),
            v + h / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4))


#: the generated kernel that computes each controller's inverse dynamics (rbdgen.registry)
KERNEL_FOR = {"exact": "rnea", **SCHEME_KERNELS}


def kernel_inverse_dynamics(kern, controller: str):
    """The ``inverse_dynamics=`` callable for ``controller`` from built kernels ``kern``
    (``rbdgen.build(model, kernels=[...])`` with :data:`KERNEL_FOR`'s kernel): ``kern.rnea``, or
    the stale kernel started, on the first call, from ``kern.rnea_stale_start(…, kernel=…)`` (the
    exact state of that kernel's layout, as the reference's ``state=None``)."""
    if controller not in KERNEL_FOR:
        raise ValueError(f"controller must be one of {', '.join(map(repr, CONTROLLERS))}, got {controller!r}")
    name = KERNEL_FOR[controller]
    f = getattr(kern, name, None) if name in getattr(kern, "kernels", ()) else None
    if f is None:
        raise ValueError(f"kern: has no {name} kernel (controller {controller!r}); build it with "
                         f"rbdgen.build(model, kernels=[..., {name!r}])")
    if controller == "exact":
        return f

    def stale_id(q, v, a, state):
        if state is None:
            state = kern.rnea_stale_start(q, v, a, kernel=name)
        return f(q, v, a, state)

    return stale_id


def simulate_open_loop(model, q0, v0, *, duration: float, plant_step: float = DEFAULT_PLANT_STEP,
                       tau=None, plant="reference") -> SimResult:
    """The plant alone: constant joint torque ``tau`` (default zero) from (q0, v0). With
    :func:`without_gravity` and zero torque the kinetic energy is conserved (up to RK4's error)."""
    _check_model(model)
    h = _positive("plant_step", plant_step)
    N = _steps("duration", duration, h)
    n = model.nq
    q, v = _state("q0", q0, n), _state("v0", v0, n)
    tau = np.zeros(n) if tau is None else _state("tau", tau, n)
    fd = _plant(model, plant)
    Q, V = np.empty((N + 1, n)), np.empty((N + 1, n))
    for k in range(N + 1):
        Q[k], V[k] = q, v
        if k < N:
            q, v = _rk4(fd, q, v, tau, h)
    t = np.arange(N + 1) * h
    return SimResult(t=t, q=Q, v=V, q_des=Q.copy(), v_des=V.copy(), tau=np.tile(tau, (N + 1, 1)),
                     controller="open loop", period=math.nan, delay=0.0, plant_step=h, diverged=False,
                     diverged_at=None, model=model)
