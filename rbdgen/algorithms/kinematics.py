"""Kinematics: every body's placement in the world, traced and declared.

Body i's frame relative to its parent's is the inverse of the Plücker transform X_i = plux(E, r)
of the joint (E rotates parent coordinates into body coordinates, r is the body origin in parent
coordinates): rotation Eᵀ, translation r. Placements compose down the tree:

    ᵒR_i = ᵒR_p · E_iᵀ        ᵒp_i = ᵒp_p + ᵒR_p · r_i

(the root's parent is the world: ᵒR = I, ᵒp = 0). The output is the homogeneous transform
[ᵒR_i ᵒp_i; 0 0 0 1] of each body, in ``model.body_names`` order: Pinocchio's ``data.oMi[i + 1]``
after ``forwardKinematics``.
"""
from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..registry import Arg, declare
from . import spatial as S
from .trace import Trace


def placements(t: Trace, q):
    """(ᵒR_i, ᵒp_i) of every body as Values (3×3 rows, 3)."""
    m, g = t.m, t.g
    R, p = [None] * m.nb, [None] * m.nb
    for i in range(m.nb):
        t.block("forward kinematics", i)
        X = t.X(i, q)
        ET = S.transpose(X.E)
        par = m.parent[i]
        if par < 0:
            R[i], p[i] = ET, list(X.r)
        else:
            R[i] = S.mat_mat(g, R[par], ET)
            p[i] = S.vadd(p[par], S.mat3_vec(g, R[par], X.r))
    return R, p


def _forward_kinematics(t: Trace, q):
    m, g = t.m, t.g
    R, p = placements(t, q)
    zero, one = g.const(0.0), g.const(1.0)
    out = []
    for i in range(m.nb):
        for r in range(3):
            out += list(R[i][r]) + [p[i][r]]
        out += [zero, zero, zero, one]
    return {"oMb": out}


def _c_forward_kinematics(t, c, q):
    return _forward_kinematics(t, c.q(q))


def _pin_forward_kinematics(pin, pm, data, q):
    pin.forwardKinematics(pm, data, q)
    return (np.stack([np.array(data.oMi[j].homogeneous) for j in range(1, pm.njoints)]),)


declare("forward_kinematics", "placement of every body in the world (homogeneous 4×4, body_names order)",
        inputs=("q",), outputs=(Arg("oMb", ("nb", 4, 4), "body placements in the world"),),
        algorithm=_forward_kinematics, coupled=_c_forward_kinematics, reference=ref.forward_kinematics, pinocchio=_pin_forward_kinematics,
        pinocchio_note="Pinocchio's data.oMi after forwardKinematics (joint frame = body frame)",
        # a product of unit rotations and the model's offsets: float32 round-off ~1e-7 per level
        float32_tol=4e-6, fixed_tol={(32, 16): 4e-4, (48, 24): 1e-6}, gpu_shape="thread",
        pinocchio_cpp=("pinocchio/algorithm/kinematics.hpp", "pin::forwardKinematics(model, data, q[i])"))
