"""The gradient rules the framework wrappers (``rbdgen.jax``, ``rbdgen.torch``) share.

Our derivative kernels differentiate with respect to the **tangent space**, as Pinocchio does:
``dtau_dq[:, k]`` is the change of τ along the k-th velocity direction, q ↦ q ⊕ ε·e_k
(:meth:`RobotModel.integrate`). For a fixed-base robot whose joints are revolute, prismatic or
continuous (one angle each), q's coordinates *are* the tangent directions, nq = nv, and these
are ordinary partial derivatives.

A floating base stores its pose as position p (3, world frame) and unit quaternion u (4,
(x, y, z, w)), nq = nv + 1, while its tangent is the body-frame twist δ = [linear; angular]
(6). A framework differentiating with respect to q's coordinates needs ∂/∂q (nv × nq), so
each wrapper composes our tangent derivative with the tangent map T(q) (nv × nq), δ = T·dq:

* linear: δ_lin = Rᵀ dp (R the base rotation);
* angular: δ_ang = 2 vec(ū ⊗ du) = 2 (w du_xyz − dw u_xyz − u_xyz × du_xyz);
* every revolute, continuous or prismatic joint's coordinate: the identity.

A spherical joint stores a quaternion u (4) and its tangent is the body-frame rotation ω (3):
its block of T is the free-flyer's angular one. A planar joint stores (x, y, θ), x and y along
its joint frame's axes, and its tangent is the body-frame (vx, vy, ω) (Pinocchio's SE(2)
integration): δ_xy = R(θ)ᵀ (dx, dy), δ_ω = dθ; nq = nv there, yet T is not the identity.

So ∂τ/∂q = (∂τ/∂δ) · T(q). T maps the radial direction du ∝ u to zero twist: ∂τ/∂q is the
derivative of τ(p, u/|u|, …), the function the NumPy reference and the generated kernels compute
(both use the rotation of u/|u|; Pinocchio takes u as unit). Off the unit sphere the angular
rows carry 1/|u|: the rotation moves by d(u/|u|) = (du − ū ūᵀdu)/|u|. Velocities, accelerations
and torques are tangent quantities already (nv): no map.

Which kernels are differentiable, and which kernels give their partial derivatives, is part of
each kernel's declaration (:class:`rbdgen.registry.Gradient`; :func:`differentiable` lists them).
Today (tangents dq, dv, da, dτ; cotangents g):

* inverse dynamics: dτ = ∂τ/∂δ·T·dq + ∂τ/∂v·dv + M·da, from the ∇ID and CRBA kernels;
* forward dynamics: dq̈ = ∂q̈/∂δ·T·dq + ∂q̈/∂v·dv + M⁻¹·dτ, from the ∇FD kernel;

and the reverse rules are the transposes (g_q = Tᵀ (∂τ/∂δ)ᵀ g, …). :func:`partials` returns a
kernel's partial derivatives with the q-block already composed with T.
"""
from __future__ import annotations

import numpy as np

from . import registry
from .model.model import CURVED_JOINTS

__all__ = ["tangent_map", "differentiable", "partials", "rule", "rnea_partials", "aba_partials"]


def differentiable() -> dict:
    """Kernel → the kernels its gradient needs (:func:`rbdgen.registry.differentiable`)."""
    return registry.differentiable()


def _layout(model):
    """(identity rows, identity cols, [(v0, q0) of each floating joint], [(v0, q0) of each
    spherical joint], [(v0, q0) of each planar joint]) of ``model``, cached."""
    key = id(model)
    hit = _LAYOUTS.get(key)
    if hit is None or hit[0] is not model:
        rows, cols, free, ball, planar = [], [], [], [], []
        for i, t in enumerate(model.joint_types):
            # q_start/nq_joint, not q_slice: a mimic-coupled model has them (a follower: none)
            q0, v0 = model.q_start[i], model.v_start[i]
            if t == "floating":
                free.append((v0, q0))
            elif t == "spherical":
                ball.append((v0, q0))
            elif t == "planar":
                planar.append((v0, q0))
            else:
                rows += range(v0, v0 + model.nv_joint(i))
                cols += range(q0, q0 + model.nq_joint(i))
        hit = (model, np.array(rows, dtype=np.intp), np.array(cols, dtype=np.intp), free, ball, planar)
        if len(_LAYOUTS) > 64:
            _LAYOUTS.clear()
        _LAYOUTS[key] = hit
    return hit[1:]


_LAYOUTS: dict = {}


def tangent_map(model, q) -> np.ndarray:
    """T(q), (…, nv, nq): the body-frame tangent δ = T·dq of a change dq of q's coordinates
    (first order; see the module's docstring). The identity where every joint is revolute,
    continuous or prismatic."""
    q = np.asarray(q, dtype=float)
    if q.shape[-1] != model.nq:
        raise ValueError(f"tangent_map: q has {q.shape[-1]} coordinates, the model {model.nq}")
    rows, cols, free, ball, planar = _layout(model)
    lead = q.shape[:-1]
    T = np.zeros(lead + (model.nv, model.nq))
    T[..., rows, cols] = 1.0
    for v0, p0 in free:
        u = q[..., p0 + 3: p0 + 7]
        n = np.sqrt(np.sum(u * u, axis=-1, keepdims=True))
        u = u / n  # the rotation is that of u/|u|: a change du moves it by d(u/|u|), |u|⁻¹ du tangentially
        x, y, z, w = u[..., 0], u[..., 1], u[..., 2], u[..., 3]
        xx, yy, zz, xy, xz, yz, wx, wy, wz = x * x, y * y, z * z, x * y, x * z, y * z, w * x, w * y, w * z
        # δ_lin = Rᵀ dp, R the rotation of the normalised quaternion: (Rᵀ)[r, c] = R[c, r]
        lin = T[..., v0:v0 + 3, p0:p0 + 3]
        lin[..., 0, 0], lin[..., 1, 0], lin[..., 2, 0] = 1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy)
        lin[..., 0, 1], lin[..., 1, 1], lin[..., 2, 1] = 2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx)
        lin[..., 0, 2], lin[..., 1, 2], lin[..., 2, 2] = 2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy)
        _angular(T[..., v0 + 3:v0 + 6, p0 + 3:p0 + 7], q[..., p0 + 3: p0 + 7])
    for v0, p0 in ball:  # the free-flyer's angular block
        _angular(T[..., v0:v0 + 3, p0:p0 + 4], q[..., p0:p0 + 4])
    for v0, p0 in planar:
        # (dx, dy) along the joint frame's axes → the body frame's: R(θ)ᵀ; dθ → ω
        c, s = np.cos(q[..., p0 + 2]), np.sin(q[..., p0 + 2])
        T[..., v0, p0], T[..., v0, p0 + 1] = c, s
        T[..., v0 + 1, p0], T[..., v0 + 1, p0 + 1] = -s, c
        T[..., v0 + 2, p0 + 2] = 1.0
    return T


def _angular(ang, u):
    """Fill ``ang`` (…, 3, 4), the body-frame rotation δ_ang of a change du of the quaternion u
    (x y z w, any norm)."""
    n = np.sqrt(np.sum(u * u, axis=-1, keepdims=True))
    u = u / n  # the rotation is that of u/|u|: a change du moves it by d(u/|u|), |u|⁻¹ du tangentially
    x, y, z, w = u[..., 0], u[..., 1], u[..., 2], u[..., 3]
    # δ_ang = 2 (w du − dw u − u × du): 2 (w I − [u]×) on du_xyz, −2 u on dw
    ang[..., 0, 0] = ang[..., 1, 1] = ang[..., 2, 2] = 2 * w
    ang[..., 0, 1], ang[..., 0, 2] = 2 * z, -2 * y
    ang[..., 1, 0], ang[..., 1, 2] = -2 * z, 2 * x
    ang[..., 2, 0], ang[..., 2, 1] = 2 * y, -2 * x
    ang[..., :, 3] = -2 * u[..., :3]
    ang /= n[..., None]  # δ_ang of d(u/|u|): the radial part is already mapped to zero


def need(kern, name):
    """Refuse, naming them, when the kernels differentiating ``name`` were not built."""
    _need(kern, registry.get(name).gradient.needs, name)


def _need(kern, names, what):
    missing = [k for k in names if k not in kern.kernels]
    if missing:
        raise ValueError(f"differentiating {what} needs the kernels {', '.join(names)}; not built: "
                         f"{', '.join(missing)} (build with kernels=[..., {', '.join(map(repr, missing))}])")


def _host(x):
    return x if isinstance(x, np.ndarray) else x.get()  # cupy → numpy


def _compose_q(model, J_tangent, q):
    """(…, nv, nv) derivative along the tangent → (…, nv, nq) along q's coordinates."""
    types = getattr(model, "joint_types", None)
    if not types:  # a model that does not say its joints (a package of an older manifest)
        if model.nq != model.nv:
            raise ValueError(f"{model!r}: its joint kinds are not known, so ∂/∂q cannot be mapped onto q's "
                             "coordinates; regenerate the package, or differentiate rbdgen.build(model)'s kernels")
        raise ValueError(f"{model!r}: its joint kinds are not known (a planar joint's q is not its tangent "
                         "either); regenerate the package, or differentiate rbdgen.build(model)'s kernels")
    if not any(t in CURVED_JOINTS for t in types):
        return J_tangent  # T is the identity: no copy, no product
    return J_tangent @ tangent_map(model, q)


def partials(kern, name, *inputs):
    """The derivatives of kernel ``name``'s output with respect to each of its inputs at
    ``inputs``, numpy: ∂y/∂q (…, n, nq) along q's coordinates, then the others (…, n, nv), from
    the kernels its declaration's :class:`~rbdgen.registry.Gradient` names (a ``ValueError``
    naming them where they were not built)."""
    g = registry.get(name).gradient
    if g is None:
        raise ValueError(f"{name} is not differentiable (differentiable: {', '.join(differentiable())})")
    _need(kern, g.needs, name)
    first, *rest = (_host(x) for x in g.partials(kern, *inputs))
    return (_compose_q(kern.model, first, _host(inputs[0])), *rest)


def rule(name):
    """``partials`` for kernel ``name`` as ``f(kern, *inputs)``, or None where it has no gradient."""
    if name not in differentiable():
        return None

    def f(kern, *inputs):
        return partials(kern, name, *inputs)

    f.__name__ = f.__qualname__ = f"{name}_partials"
    f.__doc__ = f"The partial derivatives of {name} (:func:`rbdgen.autodiff.partials`)."
    return f


#: inverse dynamics: (∂τ/∂q (…, nv, nq), ∂τ/∂v, ∂τ/∂a = M) at (q, v, a)
rnea_partials = rule("rnea")
#: forward dynamics: (∂q̈/∂q (…, nv, nq), ∂q̈/∂v, ∂q̈/∂τ = M⁻¹) at (q, v, τ)
aba_partials = rule("aba")
