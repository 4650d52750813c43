"""M⁻¹ from M's sparse LTDL factorisation, or from the articulated-body recursion on the identity
(rbdgen.algorithms.dynamics: factor_pays, _Factor; docs/performance.md §53).

Both algorithms stay in the generator: the factorisation is O(Σ d²) in the DoFs' depths and wins
on every robot of the suite, the recursion is O(n²) and wins on long serial chains. These tests
hold each to the NumPy reference whichever the model would choose (the suite's robots now all
take the factorisation, so the recursion is exercised here), and hold the choice to what it is
for: fewer operations.
"""
from __future__ import annotations

import numpy as np
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen.algorithms import dynamics as D, trace
from rbdgen.ir.interp import run

from conftest import ROBOT_CASES, ROBOTS, load_case, random_state, relerr
from rbdgen.robots import chain_urdf

FACTOR, RECURSION = 1e12, -1.0  # FACTOR_MACS_PER_PAIR that force one algorithm or the other


def _chain(tmp_path, n):
    p = tmp_path / f"chain{n}.urdf"
    p.write_text(chain_urdf(n, seed=n, fixed_every=0))
    return rbdgen.load_urdf(p)


def _case(name, floating):
    return load_case(next(r for r in ROBOTS if r.name == name), floating)


def _traced(monkeypatch, model, kernel, threshold):
    monkeypatch.setattr(D, "FACTOR_MACS_PER_PAIR", threshold)
    return trace(model, kernel, cached=False)


@pytest.mark.parametrize("robot,floating", ROBOT_CASES)
def test_every_robot_of_the_suite_takes_the_factorisation(robot, floating):
    model = load_case(robot, floating)
    if hasattr(model, "tree"):
        pytest.skip("mimic joints coupled: M⁻¹ is the contracted M's dense solve, neither algorithm here "
                    "(test_mimic.py checks it)")
    assert D.factor_pays(model)


def test_a_long_serial_chain_takes_the_recursion(tmp_path):
    """O(n²) against O(n³) on a chain: the recursion from a few dozen DoFs on (45: 105 617 operations
    against 128 270), the factorisation below (20: 16 075 against 23 087)."""
    assert not D.factor_pays(_chain(tmp_path, 45))
    assert D.factor_pays(_chain(tmp_path, 20))


@pytest.mark.parametrize("which", ["iiwa14", "quadruped-floating", "baxter", "chain20", "chain45"])
def test_the_choice_has_the_fewer_operations(monkeypatch, tmp_path, which):
    model = _chain(tmp_path, int(which[5:])) if which.startswith("chain") else \
        _case(which.split("-")[0], which.endswith("floating"))
    ops = {t: _traced(monkeypatch, model, "minv", t).op_counts()["total"] for t in (FACTOR, RECURSION)}
    monkeypatch.undo()
    chosen = ops[FACTOR if D.factor_pays(model) else RECURSION]
    assert chosen == min(ops.values()), ops
    if which == "iiwa14":  # the factorisation's whole point on an arm: about half the operations
        assert ops[FACTOR] < 0.6 * ops[RECURSION], ops


@pytest.mark.parametrize("threshold", [FACTOR, RECURSION], ids=["factorisation", "recursion"])
@pytest.mark.parametrize("which", ["iiwa14", "quadruped-floating", "baxter", "talos_reduced-floating", "chain30"])
def test_both_algorithms_match_the_reference(monkeypatch, tmp_path, which, threshold):
    """minv, and where the robot is small the forward-dynamics gradient (whose q̈ and M⁻¹ come from
    the same factorisation) with and without external forces, in the IR interpreter."""
    model = _chain(tmp_path, 30) if which == "chain30" else \
        _case(which.split("-")[0], which.endswith("floating"))
    q, v, _, tau = random_state(model, 3, 4)
    out = run(_traced(monkeypatch, model, "minv", threshold), q)
    want = np.stack([ref.minv(model, x) for x in q])
    assert relerr(out, want) < 1e-11
    if model.nv > 20:
        return
    fext = np.random.default_rng(4).normal(size=(4, model.nb, 6))
    for kernel, extra in (("aba_derivatives", ()), ("aba_derivatives_fext", (fext,))):
        got = run(_traced(monkeypatch, model, kernel, threshold), q, v, tau, *[e.reshape(4, -1) for e in extra])
        for s in range(len(q)):
            want = ref.aba_derivatives(model, q[s], v[s], tau[s], *[e[s] for e in extra])
            for g, w in zip(got, want):
                assert relerr(g[s], w) < 1e-10, kernel


def test_the_recursion_compiled(monkeypatch):
    """The recursion's M⁻¹ and gradient built and run on the iiwa (the suite's compiled kernels
    all take the factorisation now): a fresh model (no trace cached for it) and no generation
    cache, so the build traces with the setting."""
    monkeypatch.setenv("RBDGEN_GENERATION_CACHE", "0")
    monkeypatch.setattr(D, "FACTOR_MACS_PER_PAIR", RECURSION)
    model = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    recursion = trace(model, "minv", cached=False).op_counts()["total"]
    kern = rbdgen.build(model, kernels=("minv", "aba_derivatives"), opt="-O1")
    monkeypatch.undo()
    assert kern.op_counts["minv"]["total"] == recursion != trace(model, "minv", cached=False).op_counts()["total"]
    q, v, _, tau = random_state(model, 7, 8)
    assert relerr(kern.minv(q), np.stack([ref.minv(model, x) for x in q])) < 1e-12
    got = kern.aba_derivatives(q, v, tau)
    for s in range(len(q)):
        for g, w in zip(got, ref.aba_derivatives(model, q[s], v[s], tau[s])):
            assert relerr(g[s], w) < 1e-10
