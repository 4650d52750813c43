"""Dynamics as parallel prefix scans (issue 12): the operators, the evaluation orders, the
reference and the traced kernels.

Oracles: the sequential recursions of rbdgen.reference (rnea, aba: written independently, body
after body), exact non-commutative operators (string concatenation) for the evaluation orders,
and hypothesis for the associativity the scans rely on. The generated CPU/CUDA/HLS kernels of
rnea_scan and aba_scan are checked with every other kernel (test_cpu_kernels, test_cuda,
test_hls, test_reference_vs_pinocchio take their kernel lists from the registry).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rbdgen import reference as ref
from rbdgen import spatial as sp
from rbdgen.algorithms.scan import traced
from rbdgen.ir.interp import run
from rbdgen.ir.schedule import critical_path
from rbdgen.model import load_urdf
from rbdgen.reference import scan as rs
from rbdgen.registry import trace
from rbdgen.robots import chain_urdf, tree_urdf
from rbdgen.scan import METHODS, blelloch_exclusive, paths, preorder, subtree_sums, tree_scan

from conftest import ROBOT_CASES, TOL64, load_case, random_state, relerr


def load_urdf_string(text, tmp=[]):
    import tempfile
    from pathlib import Path

    if not tmp:
        tmp.append(Path(tempfile.mkdtemp(prefix="rbdgen-scan-")))
    path = tmp[0] / f"robot{len(list(tmp[0].iterdir()))}.urdf"
    path.write_text(text)
    return load_urdf(path)

# ---- the evaluation orders, with an exact non-commutative operator ---------------------------------

concat = lambda x, y: x + y  # noqa: E731  associative, not commutative: any reordering shows


@st.composite
def forests(draw, max_n=40):
    n = draw(st.integers(1, max_n))
    return [draw(st.integers(-1, i - 1)) if i else -1 for i in range(n)]


def _root_path_words(parent):
    out = []
    for i in range(len(parent)):
        word, j = "", i
        while j >= 0:
            word = f"<{j}>" + word
            j = parent[j]
        out.append(word)
    return out


@settings(max_examples=200, deadline=None)
@given(forests(), st.sampled_from(METHODS))
def test_tree_scan_gives_every_root_path_in_order(parent, method):
    got = tree_scan([f"<{i}>" for i in range(len(parent))], parent, concat, method, identity=lambda: "")
    assert got == _root_path_words(parent)


@settings(max_examples=200, deadline=None)
@given(forests())
def test_subtree_sums_cover_each_subtree_once(parent):
    got = subtree_sums([(i,) for i in range(len(parent))], parent, concat)
    for i, s in enumerate(got):
        sub = {i} | {k for k in range(len(parent)) if i in _ancestors(parent, k)}
        assert sorted(s) == sorted(sub)  # every body of the subtree exactly once, nothing else


def _ancestors(parent, k):
    out = set()
    while parent[k] >= 0:
        k = parent[k]
        out.add(k)
    return out


@pytest.mark.parametrize("n", range(1, 40))
def test_blelloch_exclusive_scan(n):
    xs = [chr(65 + k) for k in range(n)]
    assert blelloch_exclusive(xs, concat, lambda: "") == ["".join(xs[:k]) for k in range(n)]


def test_paths_and_preorder_of_a_tree():
    parent = [-1, 0, 1, 0, 3, 3, 5]
    assert paths(parent) == [[0, 1, 2], [3, 4], [5, 6]]
    assert preorder(parent) == [0, 1, 2, 3, 4, 5, 6]
    assert preorder([-1, 0, 0, 1]) == [0, 1, 3, 2]  # breadth-first numbering: subtrees made contiguous


def test_hillis_steele_rounds_are_logarithmic():
    rounds = set()
    tree_scan(["x"] * 64, [-1] + list(range(63)), concat, "hillis_steele", round_hook=lambda label, i: rounds.add(label))
    assert len(rounds) == 6  # ⌈log₂ 64⌉


def test_bad_arguments():
    with pytest.raises(ValueError, match="topological"):
        tree_scan(["a", "b"], [1, -1], concat)
    with pytest.raises(ValueError, match="unknown scan method"):
        tree_scan(["a"], [-1], concat, "kogge")
    with pytest.raises(ValueError, match="identity"):
        tree_scan(["a"], [-1], concat, "blelloch")
    m = load_urdf_string(chain_urdf(3, seed=0))
    with pytest.raises(ValueError, match="method"):
        ref.rnea_scan(m, np.zeros(m.nq), np.zeros(m.nv), np.zeros(m.nv), method="nope")


# ---- the operators are associative (hypothesis) ----------------------------------------------------

finite = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)
vec6 = st.lists(finite, min_size=6, max_size=6).map(np.array)


@st.composite
def transforms(draw):
    quat = np.array(draw(st.lists(st.floats(-1, 1), min_size=4, max_size=4)))
    if np.linalg.norm(quat) < 0.1:
        quat = np.array([0.0, 0.0, 0.0, 1.0])
    R = sp.quat_to_rot(quat / np.linalg.norm(quat))
    return sp.plux(R, np.array(draw(st.lists(finite, min_size=3, max_size=3))))


elements = st.tuples(transforms(), vec6, vec6)


def _close(e, f, tol=1e-11):
    return all(np.allclose(x, y, rtol=tol, atol=tol * max(1.0, np.abs(y).max())) for x, y in zip(e, f))


@settings(max_examples=300, deadline=None)
@given(elements, elements, elements)
def test_forward_operator_is_associative(e1, e2, e3):
    op = rs.forward_op
    assert _close(op(op(e1, e2), e3), op(e1, op(e2, e3)))


@settings(max_examples=100, deadline=None)
@given(elements)
def test_forward_identity_is_two_sided(e):
    I = rs.forward_identity()
    assert _close(rs.forward_op(I, e), e) and _close(rs.forward_op(e, I), e)


@settings(max_examples=100, deadline=None)
@given(elements, vec6, vec6)
def test_forward_operator_carries_velocity_and_acceleration(e, v_in, a_in):
    """Applying a segment to the state entering it (v, a) = applying (1, v, a) ⊕ segment."""
    X, v, a = e
    _, v_out, a_out = rs.forward_op((np.eye(6), v_in, a_in), e)
    assert np.allclose(v_out, X @ v_in + v)
    assert np.allclose(a_out, X @ a_in + a + sp.crm(X @ v_in + v) @ v)  # a + (X v_in) × v: v × v = 0


mat6 = st.lists(finite, min_size=36, max_size=36).map(lambda x: np.array(x).reshape(6, 6))


@settings(max_examples=200, deadline=None)
@given(st.tuples(mat6, vec6), st.tuples(mat6, vec6), st.tuples(mat6, vec6))
def test_affine_operator_is_associative(e1, e2, e3):
    op = rs.affine_op
    assert _close(op(op(e1, e2), e3), op(e1, op(e2, e3)), 1e-10)


# ---- the reference scans against the sequential recursions ----------------------------------------

def _robots():
    out = []
    for n in (1, 2, 7, 33):
        out.append((f"chain{n}", load_urdf_string(chain_urdf(n, seed=n))))
        out.append((f"tree{n}", load_urdf_string(tree_urdf(n, seed=n))))
    return out


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("robot,floating", ROBOT_CASES)
def test_reference_scans_agree_with_rnea_and_aba(method, robot, floating):
    m = load_case(robot, floating)
    q, v, a, tau = random_state(m, seed=3, n=3)
    assert relerr(ref.rnea_scan(m, q, v, a, method=method), ref.rnea(m, q, v, a)) < TOL64
    assert relerr(ref.aba_scan(m, q, v, tau, method=method), ref.aba(m, q, v, tau)) < TOL64


@pytest.mark.parametrize("name, model", _robots(), ids=[n for n, _ in _robots()])
@pytest.mark.parametrize("method", METHODS)
def test_reference_scans_on_synthetic_robots(name, model, method):
    rng = np.random.default_rng(5)
    q, v, a = model.random_q(rng, 2), rng.normal(size=(2, model.nv)), rng.normal(size=(2, model.nv))
    assert relerr(ref.rnea_scan(model, q, v, a, method=method), ref.rnea(model, q, v, a)) < TOL64
    assert relerr(ref.aba_scan(model, q, v, a, method=method), ref.aba(model, q, v, a)) < TOL64


# ---- the traced kernels (IR interpreter: no compiler) on long chains ---------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("n, kernels", [(64, ("rnea_scan", "aba_scan")), (256, ("rnea_scan", "aba_scan"))])
def test_traced_scans_on_long_chains(n, kernels):
    """≤ 1e-9 relative against the sequential reference up to 256 links (seen: ~5e-14 for
    aba_scan at 256; docs/scan.md states the bound for longer chains)."""
    m = load_urdf_string(chain_urdf(n, seed=11))
    rng = np.random.default_rng(2)
    q, v, a = m.random_q(rng, 3), rng.normal(size=(3, m.nv)), rng.normal(size=(3, m.nv))
    for k in kernels:
        exp = (ref.rnea if k == "rnea_scan" else ref.aba)(m, q, v, a)
        assert relerr(run(trace(m, k, cached=False), q, v, a), exp) < TOL64, k


@pytest.mark.parametrize("method", METHODS)
def test_every_traced_order_agrees(method):
    m = load_urdf_string(tree_urdf(12, seed=4))
    rng = np.random.default_rng(8)
    q, v, a = m.random_q(rng, 3), rng.normal(size=(3, m.nv)), rng.normal(size=(3, m.nv))
    assert relerr(run(traced(m, "rnea_scan", method), q, v, a), ref.rnea(m, q, v, a)) < TOL64
    assert relerr(run(traced(m, "aba_scan", method), q, v, a), ref.aba(m, q, v, a)) < TOL64


def test_scan_depth_grows_like_log_n():
    """The point of the scan: on a chain, rnea's critical path grows like n, rnea_scan's like
    log n (the IR's own dependency graph, unlimited processors)."""
    depth = {}
    for n in (16, 64):
        m = load_urdf_string(chain_urdf(n, seed=1))
        depth["rnea", n] = critical_path(trace(m, "rnea", cached=False)).depth
        depth["scan", n] = critical_path(trace(m, "rnea_scan", cached=False)).depth
    assert depth["rnea", 64] > 3 * depth["rnea", 16]           # linear
    assert depth["scan", 64] < depth["scan", 16] + 2 * 12     # two more rounds of a bounded size
    assert depth["scan", 64] * 5 < depth["rnea", 64]
