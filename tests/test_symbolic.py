"""Sparsity analysis: the symbolic/decomposed joint transforms equal the model's numeric ones,
entries are classified correctly, and snapping reports what it changed."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import rbdgen
from rbdgen import reference as ref
from rbdgen.symbolic import CONST, ONE, QDEP, ZERO, joint_transform, numeric_X, snap_model, sparsity, symbolic_X

from conftest import ROBOT_CASES, load_case


@pytest.mark.parametrize("robot,floating", [c for c in ROBOT_CASES if c.id in
                                            ("iiwa14-fixed", "kinova-fixed", "quadruped-floating", "talos_reduced-floating")])
def test_decomposed_transforms_equal_model(robot, floating):
    m = load_case(robot, floating)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = m.random_q(rng)
        for i in range(m.nb):
            qi = q[m.q_slice(i)]
            X_model = m.joint_transform(i, qi) @ m.X_tree[i]
            assert np.allclose(numeric_X(joint_transform(m, i), qi), X_model, atol=1e-14)
            if m.joint_types[i] != "floating":
                Xs = symbolic_X(m, i)
                subs = {sympy.Symbol(f"c{i}"): np.cos(qi[0]), sympy.Symbol(f"s{i}"): np.sin(qi[0]),
                        sympy.Symbol(f"q{i}"): qi[0]}
                Xn = np.array(Xs.subs(subs).evalf(), dtype=float)
                assert np.allclose(Xn, X_model, atol=1e-12)


def _urdf(tmp_path, rpy, axis="0 0 1", jtype="revolute"):
    p = tmp_path / "one.urdf"
    p.write_text(f"""<robot name="one">
  <link name="base"/>
  <link name="l1"><inertial><mass value="1"/><origin xyz="0.1 0 0"/>
    <inertia ixx="0.1" iyy="0.2" izz="0.25" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="{jtype}"><parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0.5" rpy="{rpy}"/><axis xyz="{axis}"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>""")
    return p


def test_classification_of_a_z_revolute(tmp_path):
    m = rbdgen.load_urdf(_urdf(tmp_path, "0 0 0"))
    (sp,) = sparsity(m)
    X = sp.X
    # E = Rz(q)ᵀ: rows 0,1 depend on q in columns 0,1; E[2][2] = 1; the rest of E is zero
    assert X[0][0] == QDEP and X[0][1] == QDEP and X[0][2] == ZERO and X[2][2] == ONE
    assert all(X[r][c] == ZERO for r in range(3) for c in range(3, 6))   # upper-right block
    assert X[3][0] == QDEP and X[5][2] == ZERO                            # −E [r]×, r = (0, 0, 0.5)
    assert sp.S == [[ZERO], [ZERO], [ONE], [ZERO], [ZERO], [ZERO]]
    assert sp.I[5][5] == ONE and sp.I[0][0] == CONST
    assert sp.pruned_mults < sp.dense_mults


def test_quarter_turns_are_exact(tmp_path):
    """rpy = π/2 written at full precision gives exact zeros (no 6e-17 noise to multiply)."""
    m = rbdgen.load_urdf(_urdf(tmp_path, "1.5707963267948966 0 0"))
    E = m.X_tree[0][:3, :3]
    assert set(np.unique(E)) <= {-1.0, 0.0, 1.0}


def test_snap_reports_and_moves_results_by_the_rounding(tmp_path):
    m = rbdgen.load_urdf(_urdf(tmp_path, "1.5708 0 0"))
    E = m.X_tree[0][:3, :3]
    assert np.count_nonzero((np.abs(E) < 1e-5) & (E != 0.0)) == 2  # cos(1.5708) = 3.7e-6 twice
    m2, rep = snap_model(m, 1e-5)
    assert rep and len(rep.snapped) >= 2
    assert all(abs(old - new) <= 1e-5 for *_, old, new in rep.snapped)
    E2 = m2.X_tree[0][:3, :3]
    assert set(np.unique(E2)) <= {-1.0, 0.0, 1.0}
    q = np.array([0.3]); v = np.array([0.2]); a = np.array([-0.1])
    d = np.max(np.abs(ref.rnea(m2, q, v, a) - ref.rnea(m, q, v, a)))
    assert 0 < d < 1e-4       # the rounding of 1.5708, no more
    m3, rep0 = snap_model(m, 0.0)
    assert m3 is m and not rep0
