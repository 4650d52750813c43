"""Mimic joints coupled (the default): a follower moves with its leader, q_F = m·q_L + o, and
nq/nv count the free joints only, as Pinocchio's buildModelFromUrdf(..., mimic=True).

Oracles: Pinocchio (mimic=True) for what it computes with mimic joints (rnea, nle, gravity,
crba, forward kinematics: test_reference_vs_pinocchio.py on the Panda; here on a synthetic
robot with multipliers, offsets and a chain of mimics); for what it refuses (aba, minv and both
derivative sets), the identities M·aba(τ) = τ − nle and minv·crba = I, and finite differences
(test_reference_derivatives.py). Every target's kernels against the reference: the robot-set
tests (test_ir.py, test_cpu_kernels.py) include the coupled Panda; CUDA and HLS run here.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen import registry
from rbdgen.errors import UnsupportedError

from conftest import ROBOT_CASES, TOL64, assert_one_error_line, kernel_err, load_case, relerr, run_main
from test_model import joint, link, urdf, write


def _panda():
    return load_case(*[c.values for c in ROBOT_CASES if c.id == "panda_coupled-fixed"][0])


def _chain(tmp_path, j4_mimic='<mimic joint="j3" multiplier="0.5" offset="0.1"/>', name="robot.urdf"):
    """A revolute arm with a prismatic gripper: finger 2 mimics finger 1 (multiplier -1.5, offset
    0.01), joint 3 mimics joint 2 (2, −0.3), and by default the wrist joint 4 mimics joint 3
    (a chain: 0.5·(2·q2 − 0.3) + 0.1 = q2 − 0.05)."""
    parts = [link(n) for n in ("base", "l1", "l2", "l3", "l4", "f1", "f2")]
    parts += [joint("j1", "base", "l1", xyz="0 0 0.3"),
              joint("j2", "l1", "l2", axis="0 1 0", xyz="0 0 0.4"),
              joint("j3", "l2", "l3", axis="1 0 0", xyz="0.2 0 0", extra='<mimic joint="j2" multiplier="2" offset="-0.3"/>'),
              joint("j4", "l3", "l4", axis="0 0 1", xyz="0.2 0 0", extra=j4_mimic),
              joint("jf1", "l4", "f1", type="prismatic", axis="0 1 0", xyz="0.05 0 0"),
              joint("jf2", "l4", "f2", type="prismatic", axis="0 1 0", xyz="0.05 0 0",
                    extra='<mimic joint="jf1" multiplier="-1.5" offset="0.01"/>')]
    return write(tmp_path, urdf(*parts), name)


def test_panda_is_coupled_by_default():
    m = _panda()
    assert m.coupled and (m.nq, m.nv, m.nb) == (8, 8, 9) and m.followers == ("panda_finger_joint2",)
    assert rbdgen.load_urdf(m.source, mimic="independent").nv == 9


def test_pinocchio_crba_with_mimic_needs_fresh_data(tmp_path):
    """Why the crba adapter makes a fresh Data for mimic models: Pinocchio 4.1 reusing one gives
    another M the second time (if this starts failing, Pinocchio fixed it: drop the workaround)."""
    p = _chain(tmp_path, j4_mimic="")
    m = rbdgen.load_urdf(p)
    pm = pin.buildModelFromUrdf(str(p), mimic=True)
    data = pm.createData()
    qp = m.to_pinocchio_q(m.random_q(np.random.default_rng(0)))
    first, second = pin.crba(pm, data, qp).copy(), pin.crba(pm, data, qp).copy()
    assert np.abs(first - second).max() > 1e-3


def test_a_chain_of_mimics_is_its_resolved_mimic(tmp_path):
    """Pinocchio cannot build a mimic of a mimic; rbdgen resolves the chain, which must equal
    writing the resolved coupling directly."""
    m = rbdgen.load_urdf(_chain(tmp_path))
    assert (m.nq, m.nv, m.nb) == (3, 3, 6)  # j1, j2, jf1 free
    assert m.mimic[2] == (1, 2.0, -0.3) and m.mimic[3] == (1, 1.0, 0.5 * -0.3 + 0.1)
    direct = rbdgen.load_urdf(_chain(tmp_path, '<mimic joint="j2" multiplier="1" offset="-0.05"/>', "direct.urdf"))
    rng = np.random.default_rng(1)
    q, v, a = m.random_q(rng, 3), rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    assert relerr(ref.rnea(m, q, v, a), ref.rnea(direct, q, v, a)) <= TOL64
    assert relerr(ref.crba(m, q), ref.crba(direct, q)) <= TOL64


def test_multipliers_and_offsets_match_pinocchio(tmp_path):
    p = _chain(tmp_path, j4_mimic="")
    m = rbdgen.load_urdf(p)
    assert (m.nq, m.nv, m.nb) == (4, 4, 6)
    pm = pin.buildModelFromUrdf(str(p), mimic=True)
    data = pm.createData()
    assert list(pm.names[1:]) == list(m.joint_names) and pm.nv == m.nv
    rng = np.random.default_rng(2)
    for _ in range(3):
        q, v, a = m.random_q(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)
        qp = m.to_pinocchio_q(q)
        assert relerr(ref.rnea(m, q, v, a), pin.rnea(pm, data, qp, v, a)) <= TOL64
        assert relerr(ref.crba(m, q), registry.get("crba").pinocchio(pin, pm, data, qp)[0]) <= TOL64
        pin.forwardKinematics(pm, data, qp)
        T = np.stack([data.oMi[j].homogeneous for j in range(1, pm.njoints)])
        assert relerr(ref.forward_kinematics(m, q), T) <= TOL64


@pytest.mark.parametrize("which", ["panda", "chain"])
def test_forward_dynamics_identities(which, tmp_path):
    m = _panda() if which == "panda" else rbdgen.load_urdf(_chain(tmp_path))
    rng = np.random.default_rng(4)
    q, v, tau = m.random_q(rng, 4), rng.normal(size=(4, m.nv)), rng.normal(size=(4, m.nv))
    M = ref.crba(m, q)
    qdd = ref.aba(m, q, v, tau)
    assert relerr(np.einsum("nij,nj->ni", M, qdd), tau - ref.nle(m, q, v)) <= TOL64
    assert relerr(ref.minv(m, q) @ M, np.broadcast_to(np.eye(m.nv), M.shape)) <= TOL64
    # the traced kernels (IR interpreter) agree with those references
    env = {"q": q, "v": v, "tau": tau, "a": qdd}
    for k in ("aba", "minv", "aba_derivatives"):
        d = registry.get(k)
        got = rbdgen.ir.run(registry.trace(m, k), *(env[n] for n in d.input_names))
        assert kernel_err(got, d.reference(m, *(env[n] for n in d.input_names))) <= TOL64, k


@pytest.fixture(scope="module")
def panda():
    return _panda()


def test_cuda_emulated_coupled(panda):
    pytest.importorskip("nvidia", reason="nvcc comes from the CUDA wheels `make` installs")
    kernels = ("rnea", "aba", "aba_derivatives")
    kern = rbdgen.build(panda, target="cuda", kernels=kernels, opt="-O0", arch="compute_90").emulated()  # PTX only: emulated
    env = registry.random_inputs(panda, 5, seed=6)
    for k in kernels:
        d = registry.get(k)
        got = kern.kernel(k)(*(env[n] for n in d.input_names))
        assert kernel_err(got, d.reference(panda, *(env[n] for n in d.input_names))) <= TOL64, k


def test_hls_csim_coupled(panda):
    kernels = ("rnea", "aba", "forward_kinematics")
    kern = rbdgen.build(panda, target="hls", kernels=kernels, opt="-O0")
    env = registry.random_inputs(panda, 5, seed=7)
    for k in kernels:
        d = registry.get(k)
        got = kern.kernel(k)(*(env[n] for n in d.input_names))
        assert kernel_err(got, d.reference(panda, *(env[n] for n in d.input_names))) <= TOL64, k


def test_cli_generate_and_refuse(tmp_path, capsys):
    p = _chain(tmp_path)
    rc, out, err = run_main(capsys, "generate", p, "--out", tmp_path / "out", "--kernels", "rnea,aba", "--dtype",
                            "float64", "-q")
    assert rc == 0, err
    rc, out, err = run_main(capsys, "inspect", p)
    assert rc == 0 and "j3 = 2 * j2 + -0.3" in out and "j4 = 1 * j2 + -0.05" in out and "nq 3   nv 3" in out
    rc, out, err = run_main(capsys, "inspect", p, "--mimic", "refuse")
    assert rc == 2
    assert_one_error_line(err, out, str(p), "mimic", "mimic='couple'", "mimic='independent'")


def test_mimic_of_a_floating_or_fixed_joint_is_refused(tmp_path):
    p = write(tmp_path, urdf(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"),
                             joint("j2", "l1", "l2", type="fixed", extra='<mimic joint="j1"/>'),
                             ))
    assert rbdgen.load_urdf(p).nv == 1  # a fixed joint's <mimic> means nothing: merged as usual
    p2 = write(tmp_path, urdf(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1", type="fixed"),
                              joint("j2", "l1", "l2", extra='<mimic joint="j1"/>')), "b.urdf")
    with pytest.raises(UnsupportedError, match="'j1'"):
        rbdgen.load_urdf(p2)
