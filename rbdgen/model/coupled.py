"""Mimic joints coupled: a robot whose followers move with their leaders.

A URDF ``<mimic joint="L" multiplier="m" offset="o"/>`` on joint F says ``q_F = m·q_L + o``.
:class:`CoupledModel` keeps the full tree (:attr:`CoupledModel.tree`, a :class:`RobotModel` in
which F is an ordinary joint) and the affine map from the *reduced* coordinates — the leaders'
and every other free joint's, as Pinocchio's ``buildModelFromUrdf(..., mimic=True)`` counts
them — to the tree's:

    q_tree = Gq · q + bq          v_tree = G · v          a_tree = G · a

Every kernel is then the tree's algorithm on expanded inputs with its outputs contracted (the
principle of virtual work: ``τ = Gᵀ τ_tree``, ``M = Gᵀ M_tree G``, ``∂τ/∂q = Gᵀ ∂τ_tree/∂q_tree
G`` since q_tree is affine in q), except forward dynamics, whose articulated-body recursion has
no coupled form: it solves ``M q̈ = τ − nle`` (see :mod:`rbdgen.algorithms.dynamics`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import spatial as sp

if TYPE_CHECKING:  # the annotation only: model.py builds CoupledModels, so it imports this module
    from .model import RobotModel


class CoupledModel:
    """A :class:`RobotModel` with mimic joints coupled (see the module docstring). It answers the
    questions a user and the code generator ask of a model — sizes, names, random states,
    Pinocchio's layout — in reduced coordinates; :attr:`tree` is the uncoupled tree."""

    coupled = True

    def __init__(self, tree: RobotModel, mimic: dict):
        """``mimic``: follower body → (leader body, multiplier, offset), 1-DoF joints only."""
        self.tree = tree
        self.mimic = dict(mimic)
        self._free = [b for b in range(tree.nb) if b not in self.mimic]
        # reduced coordinates: the free joints' own, in tree order; a follower has none (its
        # start is where the next free joint's begin: an empty slice, as nq_joint/nv_joint say)
        self.q_start, self.v_start = {}, {}
        nq = nv = 0
        for b in range(tree.nb):
            self.q_start[b], self.v_start[b] = nq, nv
            nq += self.nq_joint(b)
            nv += self.nv_joint(b)
        self.nq, self.nv = nq, nv
        Gq, bq, G = np.zeros((tree.nq, nq)), np.zeros(tree.nq), np.zeros((tree.nv, nv))
        for b in range(tree.nb):
            lead, mult, off = self.mimic.get(b, (b, 1.0, 0.0))
            for k in range(tree.nq_joint(b)):
                Gq[tree.q_start[b] + k, self.q_start[lead] + k] = mult
            bq[tree.q_start[b]] += off if b in self.mimic else 0.0
            for k in range(tree.nv_joint(b)):
                G[tree.v_start[b] + k, self.v_start[lead] + k] = mult
        for a in (Gq, bq, G):
            a.setflags(write=False)
        self.Gq, self.bq, self.G = Gq, bq, G

    # ---- what is the same as the tree's --------------------------------------------------------
    def __getattr__(self, name):
        # names, tree structure, inertias, gravity: the tree's (sizes and layouts are overridden)
        if name in ("q_slice", "v_slice", "lower", "upper", "velocity_limit", "effort_limit"):
            raise AttributeError(f"CoupledModel.{name}: use .tree.{name} (tree coordinates)")
        return getattr(self.tree, name)

    def with_frames(self, names) -> "CoupledModel":
        """This model with other selected frames (:meth:`RobotModel.with_frames`)."""
        return CoupledModel(self.tree.with_frames(names), self.mimic)

    def with_constraints(self, constraints) -> "CoupledModel":
        """Refused: the generated constrained_fd has no form for coupled mimic joints."""
        from ..errors import UnsupportedError

        raise UnsupportedError("constrained_fd has no form for coupled mimic joints; load with mimic='independent', "
                               "or solve contacts and loops at run time with kern.contact_fd",
                               file=getattr(self.tree, "source", None))

    @property
    def constraints(self) -> tuple:
        return ()

    @property
    def nc(self) -> int:
        return 0

    @property
    def armature(self) -> np.ndarray:
        """The armature of the reduced DOFs (nv,): the diagonal of Gᵀ diag(tree.armature) G (a
        follower's rotor counts m² times on its leader's DOF), what the contracted M gets. The
        kernels trace the tree's (:attr:`tree` ``.armature``), contracted like everything else."""
        a = np.asarray(self.tree.armature, dtype=float)
        return (self.G * self.G * a[:, None]).sum(axis=0)

    def with_armature(self, armature) -> "CoupledModel":
        """This model with another armature (as :meth:`RobotModel.with_armature`): a dict names
        any joint of the tree (a follower's rotor too); one number or an (nv,) array sets the
        free joints' DOFs (reduced coordinates; one number leaves a free-flyer's out), and the
        followers' to zero."""
        tree = self.tree
        if isinstance(armature, dict):
            return CoupledModel(tree.with_armature(armature), self.mimic)
        if isinstance(armature, (int, float, np.integer, np.floating)) and not isinstance(armature, (bool, np.bool_)):
            reduced = np.zeros(self.nv)
            for b in self._free:
                if tree.joint_types[b] != "floating":
                    reduced[self.v_start[b]:self.v_start[b] + self.nv_joint(b)] = float(armature)
        else:
            try:
                reduced = np.array(armature, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"armature must be {self.nv} numbers (one per DOF), got {armature!r}") from None
            if reduced.shape != (self.nv,):
                raise ValueError(f"armature must have shape ({self.nv},) (one value per DOF of the coupled "
                                 f"model, q̇'s layout), got {reduced.shape}")
        full = np.zeros(tree.nv)
        for b in self._free:
            full[tree.v_slice(b)] = reduced[self.v_start[b]:self.v_start[b] + self.nv_joint(b)]
        return CoupledModel(tree.with_armature(full), self.mimic)

    # ---- reduced coordinates -------------------------------------------------------------------
    def nq_joint(self, b: int) -> int:
        """Reduced coordinates of body ``b``'s joint: the tree's for a free joint, 0 for a follower
        (``q_start[b]`` and ``nq_joint(b)`` then locate any column of the reduced q, like a
        RobotModel's)."""
        return 0 if b in self.mimic else self.tree.nq_joint(b)

    def nv_joint(self, b: int) -> int:
        """Reduced velocities of body ``b``'s joint (0 for a follower; see :meth:`nq_joint`)."""
        return 0 if b in self.mimic else self.tree.nv_joint(b)

    def expand_q(self, q):
        return sp.mm(q, self.Gq.T) + self.bq

    def expand_v(self, v):
        return sp.mm(v, self.G.T)

    def reduce_q(self, q_tree):
        """The reduced coordinates of a tree configuration (the free joints' entries)."""
        idx = [self.tree.q_start[b] + k for b in self._free for k in range(self.tree.nq_joint(b))]
        return np.ascontiguousarray(np.asarray(q_tree, dtype=float)[..., idx])

    def neutral(self) -> np.ndarray:
        return self.reduce_q(self.tree.neutral())

    def integrate(self, q, dv) -> np.ndarray:
        """q ⊕ dv in reduced coordinates (the tree's integration of the expanded pair)."""
        return self.reduce_q(self.tree.integrate(self.expand_q(q), self.expand_v(dv)))

    def random_q(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Random configurations within the free joints' limits (a follower's own limits are
        not imposed: it is where its leader puts it)."""
        return self.reduce_q(self.tree.random_q(rng, n))

    def to_pinocchio_q(self, q) -> np.ndarray:
        """Reduced q → Pinocchio's q of the same model built with ``mimic=True`` (the free joints'
        entries, a continuous joint's angle as (cos, sin))."""
        qp = self.tree.to_pinocchio_q(self.expand_q(q))
        idx, k = [], 0
        for b in range(self.tree.nb):
            n = self.tree.nq_pinocchio_joint(b)
            if b not in self.mimic:
                idx += range(k, k + n)
            k += n
        return np.ascontiguousarray(qp[..., idx])

    @property
    def nq_pinocchio(self) -> int:
        return sum(self.tree.nq_pinocchio_joint(b) for b in self._free)

    @property
    def followers(self) -> tuple:
        return tuple(self.tree.joint_names[b] for b in sorted(self.mimic))

    def __repr__(self) -> str:
        base = "floating" if self.floating_base else "fixed"
        return (f"CoupledModel({self.name!r}, {base} base, nb={self.nb}, nq={self.nq}, nv={self.nv}; "
                f"mimic joints {', '.join(self.followers)} coupled)")
