"""``--fixed auto`` (issue 48): per kernel the narrowest ap_fixed<W, I> whose error on sampled
states meets a tolerance (rbdgen/targets/hls/autofix.py), and the designs built with it.

Oracles: the HLS C simulation (g++ on Xilinx's ap_types), which the chosen format must hold to
the tolerance on states the search never saw (rbdgen validate: the NumPy reference and
Pinocchio); the exact model's error one fractional bit narrower, which must miss the search's
target (the choice is the narrowest).
"""
from __future__ import annotations

import subprocess
import sys

import pytest

import rbdgen
from rbdgen import registry
from rbdgen.errors import RbdgenError
from rbdgen.targets.hls import autofix
from rbdgen.targets.hls.emit import NumType
from rbdgen.validate import validate

from conftest import ROBOT_CASES, load_case


def _iiwa():
    case = [c for c in ROBOT_CASES if c.id == "iiwa14-fixed"][0]
    return load_case(*case.values)


@pytest.mark.parametrize("kernel", ["rnea", "aba"])
def test_the_choice_is_the_narrowest_that_meets_half_the_tolerance(kernel):
    m = _iiwa()
    c = autofix.choose(m, kernel)
    assert c["tol"] == registry.get(kernel).float32_tol * 100
    assert c["error"] <= c["tol"] / 2
    kern = registry.trace(m, kernel)
    env = registry.random_inputs(m, autofix.STATES, autofix.SEED)
    ref = registry.reference(m, kernel, env)
    narrower = autofix._error(kern, NumType("fixed", c["W"] - 1, c["I"], "AP_RND_CONV", "AP_SAT"), env, ref)
    assert narrower > c["tol"] / 2, (c, narrower)
    # a tighter tolerance needs more bits
    tighter = autofix.choose(m, kernel, tol=c["tol"] / 16)
    assert tighter["W"] > c["W"] and tighter["error"] <= tighter["tol"] / 2


def test_designs_built_with_it_pass_validation_on_other_states():
    """generate resolves auto to one format covering every kernel (recorded per kernel in the
    manifest), and the HLS C simulation in that format meets each kernel's tolerance against
    the reference and Pinocchio on states the search did not use."""
    m = _iiwa()
    ks = ("rnea", "forward_kinematics", "crba")
    rows = validate(m, target="hls", fixed="auto", kernels=ks, states=8, seed=3)
    assert sorted(r.kernel for r in rows) == sorted(ks)
    for r in rows:
        assert r.passed and r.tol == registry.get(r.kernel).float32_tol * 100, r
    from rbdgen.targets import get_target

    src = get_target("hls").generate(m, ks, dtypes=("float64",), name=None, fixed="auto")
    choices = src.info["fixed_auto"]
    assert set(choices) == set(ks)
    nt = src.info["numtype"]
    assert nt["I"] == max(c["I"] for c in choices.values())
    assert nt["W"] - nt["I"] == max(c["W"] - c["I"] for c in choices.values())


def test_refusals():
    m = _iiwa()
    with pytest.raises(RbdgenError, match=r"rnea: no ap_fixed<W,\d+> up to W = 64 meets --tol 1e-30"):
        autofix.choose(m, "rnea", tol=1e-30)
    with pytest.raises(RbdgenError, match=r"--tol is the accuracy --fixed auto chooses formats for"):
        rbdgen.build(m, target="hls", fixed=(32, 16), tol=1e-3, kernels=("rnea",))
    r = subprocess.run([sys.executable, "-m", "rbdgen", "inspect", "robots/iiwa14.urdf", "--cost", "--target", "hls",
                        "--fixed", "auto", "--tol", "-1", "--kernels", "rnea"], capture_output=True, text=True)
    assert r.returncode == 2 and "--tol must be a positive relative error" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_verilog_gives_each_module_its_own_format():
    """Each Verilog module is its own kernel, so --fixed auto builds each in its own format, with a
    CORDIC and divider per format: iiwa rnea and FK (whose formats differ), each bit for bit
    with the HLS C simulation in its format."""
    import numpy as np

    from rbdgen.targets import get_target

    from conftest import random_state

    m = _iiwa()
    ks = ("rnea", "forward_kinematics")
    src = get_target("verilog").generate(m, ks, dtypes=("float64",), name=None, fixed="auto")
    fmt = {k: (e["numtype"]["W"], e["numtype"]["I"]) for k, e in src.kernels.items()}
    assert fmt == {k: (c["W"], c["I"]) for k, c in src.info["fixed_auto"].items()}
    assert fmt["rnea"] != fmt["forward_kinematics"], fmt
    for k, (w, i) in fmt.items():
        assert f"rbd_iiwa14_w{w}i{i}_sincos" in src.files[f"{src.kernels[k]['module']}.v"], k
    kv = rbdgen.build(m, target="verilog", fixed="auto", kernels=ks)
    q, v, a, _ = random_state(m, seed=5, n=5)
    for k in ks:
        kh = rbdgen.build(m, target="hls", fixed=fmt[k], kernels=(k,))
        args = (q,) if k == "forward_kinematics" else (q, v, a)
        np.testing.assert_array_equal(getattr(kv, k)(*args), getattr(kh, k)(*args), err_msg=k)
