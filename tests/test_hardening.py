"""Inputs that used to crash, hang or silently give wrong numbers (each case failed before the
fix): one clear line instead of a traceback, nothing left behind, and Pinocchio's numbers where
the input is valid."""
from __future__ import annotations

import os
import time

import numpy as np
import pinocchio as pin
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen import registry
from rbdgen.errors import UnsupportedError, URDFError

from conftest import TOL64, assert_one_error_line, relerr, run_main
from test_model import joint, link, urdf, write


# ---- huge but finite angles -------------------------------------------------------------------

@pytest.mark.parametrize("angle", ["1e300", "1e16", "-3e17", "123456.789", "25.132741228718345"])
def test_any_finite_angle_gives_pinocchios_transform(tmp_path, angle):
    """Quarter turns are snapped only for angles of a few turns: above ~1e16 every double is
    within 4 ulps of some k·π/2, and snapping them all disagreed with Pinocchio by 1.7."""
    p = write(tmp_path, urdf(link("base"), link("l1"), link("l2"),
                             joint("j1", "base", "l1", rpy=f"{angle} 0.3 0", xyz="0.1 0 0.2"),
                             joint("j2", "l1", "l2", rpy=f"0 {angle} {angle}", axis="0 1 0")))
    m = rbdgen.load_urdf(p)
    pm = pin.buildModelFromUrdf(str(p))
    data = pm.createData()
    rng = np.random.default_rng(1)
    q, v, a = m.random_q(rng), rng.normal(size=2), rng.normal(size=2)
    assert relerr(ref.rnea(m, q, v, a), pin.rnea(pm, data, q, v, a)) <= TOL64
    pin.forwardKinematics(pm, data, q)
    want = np.stack([data.oMi[j].homogeneous for j in (1, 2)])
    assert relerr(ref.forward_kinematics(m, q), want) <= TOL64


def test_quarter_turns_are_still_exact(tmp_path):
    p = write(tmp_path, urdf(link("base"), link("l1"), joint("j1", "base", "l1", rpy="1.5707963267948966 0 0")))
    X = rbdgen.load_urdf(p).X_tree[0]
    assert X[1, 1] == 0.0 and X[2, 2] == 0.0  # cos(π/2) exactly 0, not 6e-17


# ---- files that are not URDFs -----------------------------------------------------------------

def test_unknown_xml_encoding_is_one_line(tmp_path, capsys):
    p = tmp_path / "enc.urdf"
    p.write_text('<?xml version="1.0" encoding="klingon"?>\n<robot name="r"/>\n')
    with pytest.raises(URDFError, match="klingon"):
        rbdgen.load_urdf(p)
    rc, out, err = run_main(capsys, "inspect", p)
    assert rc == 2
    assert_one_error_line(err, out, str(p), "malformed XML")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_is_refused_not_waited_on(tmp_path, capsys):
    fifo = tmp_path / "robot.urdf"
    os.mkfifo(fifo)
    t = time.monotonic()
    rc, out, err = run_main(capsys, "inspect", fifo)
    assert rc == 2 and time.monotonic() - t < 5
    assert_one_error_line(err, out, str(fifo), "not a regular file")


# ---- deep chains ------------------------------------------------------------------------------

def test_deep_chain_loads_and_generates(tmp_path, capsys):
    """1000 links (a recursive tree walk stopped at ~700): loads, and rnea and forward
    kinematics generate; the traced kernel agrees with the reference."""
    from rbdgen.robots import chain_urdf

    p = write(tmp_path, chain_urdf(1000, seed=3, fixed_every=None))
    m = rbdgen.load_urdf(p)
    assert m.nb == 1000 and m.parent[-1] == 998
    rng = np.random.default_rng(0)
    q = m.random_q(rng)
    v = 0.1 * rng.normal(size=m.nv)
    k = registry.trace(m, "rnea", cached=False)
    assert relerr(rbdgen.ir.run(k, q, v, v), ref.rnea(m, q, v, v)) <= TOL64
    rc, out, err = run_main(capsys, "generate", p, "--out", tmp_path / "out", "--kernels", "rnea,forward_kinematics",
                            "--dtype", "float64", "-q")
    assert rc == 0, err


# ---- a moving link with no mass ---------------------------------------------------------------

def _massless_leaf(tmp_path):
    return write(tmp_path, urdf(link("base"), link("l1"), link("finger", inertial=False),
                                joint("j1", "base", "l1"), joint("j_finger", "l1", "finger", axis="1 0 0")))


def test_massless_leaf_refuses_only_the_kernels_that_need_minv(tmp_path, capsys):
    p = _massless_leaf(tmp_path)
    m = rbdgen.load_urdf(p)
    for k in registry.kernels():
        if registry.get(k).needs_minv:
            with pytest.raises(UnsupportedError, match="j_finger.*finger.*singular"):
                registry.trace(m, k, cached=False)
        else:
            registry.trace(m, k, cached=False)  # rnea, crba, the derivatives of rnea, FK: fine
    out_dir = tmp_path / "out"
    rc, out, err = run_main(capsys, "generate", p, "--out", out_dir, "-q")
    assert rc == 2
    line = assert_one_error_line(err, out, str(p), "j_finger", "'finger'", "mass matrix is singular", "--skip-kernels")
    assert "aba" in line
    assert not out_dir.exists() or os.listdir(out_dir) == []  # nothing left behind
    rc, out, err = run_main(capsys, "generate", p, "--out", out_dir, "-q", "--skip-kernels", "aba,minv,aba_derivatives")
    assert rc == 0, err
    rc, out, err = run_main(capsys, "inspect", p, "--cost", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "j_finger")
    with pytest.raises(UnsupportedError, match="j_finger"):
        rbdgen.build(m, kernels=("aba",))
