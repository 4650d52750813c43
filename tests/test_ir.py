"""Kernel IR: the traced algorithms (through the NumPy interpreter of the IR) against the
reference on every robot; dense (unpruned) and pruned IR agree; the graph's folding rules."""
from __future__ import annotations

import numpy as np
import pytest

from rbdgen.algorithms import KERNELS, trace
from rbdgen.targets.cpu import CPU
from rbdgen.codegen.printer import print_kernel
from rbdgen.ir import Graph, run
from rbdgen.ir.graph import Array, Block, Kernel
from rbdgen.ir.ops import COST_CLASSES, OPS

from conftest import ROBOT_CASES, TOL32, TOL64, by_robot, kernel_args, kernel_err, load_case, random_state, ref_out


# by_robot: a robot's two interpreted tests and its compiled one (test_cpu_kernels) share its traces
@pytest.mark.parametrize("robot,floating", by_robot(ROBOT_CASES))
def test_interpreted_kernels_match_reference(robot, floating):
    m = load_case(robot, floating)
    q, v, a, tau = random_state(m, seed=21, n=3)
    errs = {}
    for k in KERNELS:
        args = kernel_args(k, q, v, a, tau, m)
        errs[k] = kernel_err(run(trace(m, k), *args), ref_out(m, k, *args))
    bad = {k: e for k, e in errs.items() if not e <= TOL64}
    assert not bad, f"{robot.name}: {bad}"


@pytest.mark.parametrize("robot,floating", by_robot(ROBOT_CASES))
def test_interpreted_kernels_in_float32(robot, floating):
    """Every kernel on every robot in float32 arithmetic (the interpreter computes in the
    kernel's dtype), within the measured float32 bounds (conftest.TOL32)."""
    m = load_case(robot, floating)
    q, v, a, tau = random_state(m, seed=23, n=2)
    errs = {}
    for k in KERNELS:
        args = kernel_args(k, q, v, a, tau, m)
        got = run(trace(m, k), *(x.astype(np.float32) for x in args), dtype=np.float32)
        errs[k] = kernel_err(got, ref_out(m, k, *args))
    bad = {k: e for k, e in errs.items() if not e <= TOL32[k]}
    assert not bad, f"{robot.name}: {bad}"


@pytest.mark.parametrize("robot,floating", [c for c in ROBOT_CASES if c.id in ("iiwa14-fixed", "quadruped-floating", "kinova-fixed")])
def test_dense_and_pruned_ir_agree(robot, floating):
    """The same algorithm traced without folding (every multiply by a structural zero kept)
    gives the same numbers, and pruning removes work."""
    m = load_case(robot, floating)
    q, v, a, tau = random_state(m, seed=22, n=2)
    for k in KERNELS:
        args = kernel_args(k, q, v, a, tau, m)
        pruned, dense = trace(m, k), trace(m, k, fold=False)
        assert kernel_err(run(pruned, *args), run(dense, *args)) <= TOL64, k
        cp, cd = pruned.op_counts(), dense.op_counts()
        assert cp["mul"] < cd["mul"] and cp["total"] < cd["total"], (k, cp, cd)


def test_tracing_is_deterministic():
    m = load_case(*[c.values for c in ROBOT_CASES if c.id == "quadruped-floating"][0])
    a, b = trace(m, "aba", cached=False), trace(m, "aba", cached=False)
    assert a is not b
    assert [repr(n) for n in a.live_nodes()] == [repr(n) for n in b.live_nodes()]


def test_graph_folds_structural_zeros_and_ones():
    g = Graph()
    x, y = g.input("q", 0), g.input("q", 1)
    assert (x * 0.0).const == 0.0
    assert (0.0 * x + y) is not None and (0.0 * x + y).node is y.node
    assert (1.0 * x).node is x.node
    assert (x * -1.0).node.op == "neg"
    assert (x - x).const == 0.0
    assert (g.const(2.0) * 3.0).const == 6.0
    assert ((-x) * (-y)).node is (x * y).node          # negations cancel
    assert (x * y).node is (y * x).node                # commutative CSE
    assert (-(-x)).node is x.node
    n0 = len(g.nodes)
    _ = x * y + x * y
    assert len(g.nodes) == n0 + 1                      # x*y shared, one add
    with pytest.raises(ZeroDivisionError):
        _ = x / 0.0


def test_graph_sums_constants_once_and_cancels_terms():
    """Chains of constants collapse to one constant, a term added and taken away within two
    levels cancels, and none of these rules ever adds an operation; every result is the value
    the expression has (interpreted against plain float arithmetic on random inputs)."""
    g = Graph()
    x, y, z = g.input("q", 0), g.input("q", 1), g.input("q", 2)

    u = 0.3 * y
    cases = {  # expression, its value in floats, the operations left
        "x + c1 + c2": (lambda: (x + 0.5) + 0.25, lambda x, y, z: x + 0.75, 1),
        "(c1 - x) - c2": (lambda: (0.5 - x) - 0.25, lambda x, y, z: 0.25 - x, 1),
        "c2 - (x - c1)": (lambda: 0.25 - (x - 0.5), lambda x, y, z: 0.75 - x, 1),
        "x + c - c": (lambda: (x - 0.125) + 0.125, lambda x, y, z: x, 0),
        "u + ((z - u) - c)": (lambda: u + ((z - u) - 0.0121), lambda x, y, z: z - 0.0121, 1),
        "(z + u) - u": (lambda: (z + u) - u, lambda x, y, z: z, 0),
        "x - (y + x)": (lambda: x - (y + x), lambda x, y, z: -y, 1),
        "c2·(c1·y)": (lambda: 3.0 * (0.3 * y), lambda x, y, z: 0.9 * y, 1),
        "c·y + c·y": (lambda: u + u, lambda x, y, z: 0.6 * y, 1),
        "no cancellation: (x + y) + z": (lambda: (x + y) + z, lambda x, y, z: x + y + z, 2),
        "left alone (one more op): (x - y) + (z + u) - x": (lambda: ((x - y) + (z + u)) - x,
                                                             lambda x, y, z: z + 0.3 * y - y, 5),
    }
    rng = np.random.default_rng(3)
    vals = rng.uniform(-2, 2, size=(5, 3))
    for name, (build, exact, n_ops) in cases.items():
        k = Kernel("e", g, [Array("q", (3,))], [(Array("out", (1,)), [build()])], "e")
        assert k.op_counts()["total"] == n_ops, (name, k.op_counts())
        for row in vals:
            got = run(k, row)[0]
            assert got == pytest.approx(exact(*row), rel=1e-15, abs=1e-15), name
    # the dense graph keeps every operation as written
    d = Graph(fold=False)
    a = d.input("q", 0)
    assert (a + 0.5 + 0.25).node.args[0].op == "add"


def test_body_force_is_the_product_form():
    """Inertia.body_force (the Newton-Euler equations about the origin, which RNEA's forward pass
    traces) equals I·a + v ×* (I·v) formed with NumPy's 6×6 matrices (rbdgen.spatial), for random
    bodies, velocities and accelerations; and it is cheaper where nothing is zero."""
    from rbdgen import spatial
    from rbdgen.algorithms import spatial as S

    rng = np.random.default_rng(7)
    for _ in range(20):
        A = rng.normal(size=(3, 3))
        I = spatial.spatial_inertia(rng.uniform(0.1, 5.0), rng.normal(size=3), A @ A.T + 0.1 * np.eye(3))
        v, a = rng.normal(size=6), rng.normal(size=6)
        want = I @ a + spatial.crf(v) @ (I @ v)
        got = S.Inertia.from_matrix(I.tolist()).body_force(Graph(fold=False), list(v), list(a))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)

    def traced(product_form: bool) -> int:
        """operations of one body's force, every entry of the inertia, v and a an input"""
        g = Graph()
        x = [g.input("x", k) for k in range(22)]
        h1, h2, h3, m = x[3], x[4], x[5], x[9]
        In = [[x[0], x[1], x[2], 0.0, -h3, h2], [x[1], x[6], x[7], h3, 0.0, -h1], [x[2], x[7], x[8], -h2, h1, 0.0],
              [0.0, h3, -h2, m, 0.0, 0.0], [-h3, 0.0, h1, 0.0, m, 0.0], [h2, -h1, 0.0, 0.0, 0.0, m]]
        In = [[g.const(e) if isinstance(e, float) else e for e in row] for row in In]
        n0 = len(g.nodes)
        v, a = x[10:16], x[16:22]
        if product_form:
            f = S.vadd(S.mat_vec(g, In, a), S.crf(g, v, S.mat_vec(g, In, v)))
        else:
            f = S.Inertia.from_matrix(In).body_force(g, v, a)
        k = Kernel("f", g, [Array("x", (22,))], [(Array("f", (6,)), f)])
        return sum(1 for n in k.live_nodes() if n.id >= n0 and n.op not in ("const", "input"))

    assert (traced(False), traced(True)) == (57 + 45, 66 + 54)


def test_joint_rotation_first_is_the_composed_congruence():
    """A revolute joint about ±x, ±y or ±z after a quarter-turn X_tree: XForm's split
    congruence (the joint's rotation by the double angle, then X_tree's: how ABA carries its
    articulated inertias) and Inertia.to_parent (CRBA's composite inertias), traced and run by
    the IR's interpreter, equal XᵀMX formed with NumPy's 6×6 matrices, X = X_J·X_tree with X_J
    from rbdgen.spatial's Rodrigues rotation; and each costs fewer operations than the same
    product by E = E_J·E_tree."""
    from rbdgen import spatial
    from rbdgen.algorithms import spatial as S

    def traced(k, sign, Et, split):
        g = Graph()
        M = [[g.input("M", 6 * min(a, b) + max(a, b)) for b in range(6)] for a in range(6)]
        x = [g.input("x", n) for n in range(10)]  # m, h, Ī's upper triangle
        Ib = [[x[4 + (3 * min(a, b) - min(a, b) * (min(a, b) - 1) // 2) + abs(a - b)] for b in range(3)] for a in range(3)]
        q = g.input("q", 0)
        c, s = g.op("cos", q), g.op("sin", q)
        r = [g.input("r", n) for n in range(3)]
        ax = np.zeros(3)
        ax[k] = sign
        aaT = np.outer(ax, ax)
        EJ = [[g.lift((np.eye(3) - aaT)[a, b] * c - spatial.skew(ax)[a, b] * s + aaT[a, b]) for b in range(3)] for a in range(3)]
        Etc = [[g.const(e) for e in row] for row in Et]
        X = S.XForm(S.mat_mat(g, EJ, Etc), r, (S.AxisRotation(k, sign, c, s), S.XForm(Etc, r)) if split else None)
        cong = X.congruence(g, M)
        In = S.Inertia(x[0], x[1:4], Ib).to_parent(g, X)
        outs = [[e for row in cong for e in row], [In.m] + In.h + [e for row in In.Ib for e in row]]
        ops = []
        for o in outs:
            kern = Kernel("t", g, [Array("M", (36,)), Array("x", (10,)), Array("q", (1,)), Array("r", (3,))],
                          [(Array("o", (len(o),)), o)])
            ops.append(sum(1 for n in kern.live_nodes() if n.op not in ("const", "input", "cos", "sin")))
        kern = Kernel("t", g, [Array("M", (36,)), Array("x", (10,)), Array("q", (1,)), Array("r", (3,))],
                      [(Array("c", (36,)), outs[0]), (Array("i", (13,)), outs[1])])
        return kern, ops

    rng = np.random.default_rng(11)
    perms = [np.eye(3), np.array([[-1.0, 0, 0], [0, 0, 1], [0, 1, 0]]), np.array([[0, -1.0, 0], [0, 0, -1], [1, 0, 0]])]
    for k in range(3):
        for sign in (1.0, -1.0):
            for Et in perms:
                (ks, ops_split), (kc, ops_composed) = traced(k, sign, Et, True), traced(k, sign, Et, False)
                assert all(a < b for a, b in zip(ops_split, ops_composed)), (ops_split, ops_composed)
                ax = np.zeros(3)
                ax[k] = sign
                q, r = rng.uniform(-3, 3, size=1), rng.normal(size=3)
                X = spatial.plux(spatial.mm(spatial.axis_angle_to_rot(ax, q[0]).T, Et), r)
                A, B = rng.normal(size=(6, 6)), rng.normal(size=(3, 3))
                M = A @ A.T
                m, com, Ic = rng.uniform(0.1, 5.0), rng.normal(size=3), B @ B.T + 0.1 * np.eye(3)
                I = spatial.spatial_inertia(m, com, Ic)
                Ib = I[:3, :3]
                x = np.concatenate([[m], m * com, [Ib[0, 0], Ib[0, 1], Ib[0, 2], Ib[1, 1], Ib[1, 2], Ib[2, 2]]])
                want_I = X.T @ I @ X
                for kern in (ks, kc):
                    cong, inn = run(kern, M.ravel(), x, q, r)
                    np.testing.assert_allclose(cong.reshape(6, 6), X.T @ M @ X, rtol=1e-12, atol=1e-12)
                    got = spatial.spatial_inertia(inn[0], inn[1:4] / inn[0], np.zeros((3, 3)))
                    got[:3, :3] = inn[4:].reshape(3, 3)
                    np.testing.assert_allclose(got, want_I, rtol=1e-12, atol=1e-12)


def test_unfolded_graph_keeps_every_operation():
    g = Graph(fold=False)
    x = g.input("q", 0)
    z = x * 0.0
    assert z.node.op == "mul"
    assert (z + 0.0).node.op == "add"


def test_blocks_tag_bodies_and_levels():
    m = load_case(*[c.values for c in ROBOT_CASES if c.id == "quadruped-fixed"][0])
    k = trace(m, "rnea")
    blocks = {n.block for n in k.live_nodes() if n.op not in ("const", "input")}
    bodies = {b.body for b in blocks if isinstance(b, Block) and b.body is not None}
    assert bodies == set(range(m.nb))
    for b in blocks:
        if b.body is not None:
            assert b.level == m.depth[b.body]
            assert m.body_names[b.body] in b.label


def test_every_op_in_the_table_folds_interprets_prints_and_counts():
    """The op table is the only description of an op: each one, applied to inputs, is run by
    the interpreter like its folded constant, printed with the target's names, and counted in
    its cost class."""
    for op in OPS.values():
        xs = (0.7, -1.3)[:op.arity]
        g = Graph()
        folded = g.op(op.name, *(g.const(x) for x in xs)).const
        assert folded == op.fold(*xs) and type(folded) is float, op.name
        ins = [g.input("x", i) for i in range(op.arity)]
        v = g.op(op.name, *ins)
        if op.commutative:
            assert g.op(op.name, *reversed(ins)).node is v.node, op.name
        k = Kernel(op.name, g, [Array("x", (op.arity,))], [(Array("y", (1,)), [v])])
        got = run(k, np.array(xs))
        np.testing.assert_allclose(got, [folded], rtol=1e-15, err_msg=op.name)  # NumPy vs libm: ulps
        counts = k.op_counts()
        assert counts[op.cost] == counts["total"] == 1, op.name
        (line,) = [ln for ln in print_kernel(k, "float64", CPU).body if ln.startswith("const S t0")]
        expect = {"add": "x[0] + x[1]", "sub": "x[0] - x[1]", "mul": "x[0] * x[1]", "div": "x[0] / x[1]",
                  "neg": "-x[0]", "sin": f"{CPU.sin}(x[0])", "cos": f"{CPU.cos}(x[0])"}[op.name]
        assert line == f"const S t0 = {expect};", op.name
    assert {op.cost for op in OPS.values()} == set(COST_CLASSES)


def test_forward_mode_tangents_of_every_op():
    """rbdgen.ir.forward: the tangents of an expression using every op (add, sub, mul, div, neg,
    sin, cos) against central differences of the same expression, through the interpreter; a held
    node's dependence is cut; every op of OPS has a rule."""
    from rbdgen.ir.forward import RULES, tangents
    from rbdgen.ir.graph import Array, Graph, Kernel
    from rbdgen.ir.interp import run
    from rbdgen.ir.ops import OPS

    assert set(RULES) == set(OPS)
    g = Graph()
    x = [g.input("x", i) for i in range(3)]
    h = g.op("sin", x[0]) * x[1]                                  # held below in the second output
    y = [(h - g.op("cos", x[2])) / (x[0] + 2.0) + (-x[1]) * x[2], h * h]
    one = g.const(1.0)
    seeds = {xi.node.id: [one if d == i else None for d in range(3)] for i, xi in enumerate(x)}
    d_full = tangents(g, [y[0]], seeds)
    d_held = tangents(g, [y[1]], seeds, stop={h.node.id})
    assert all(t.is_zero() for t in d_held[0])                    # h held: h² has no tangent
    k = Kernel("t", g, [Array("x", (3,))], [(Array("y", (1,)), [y[0]]), (Array("dy", (3,)), d_full[0])])
    x0 = np.array([0.3, -1.2, 0.7])
    val, grad = run(k, x0)
    eps = 1e-6
    fd = [(run(k, x0 + eps * e)[0][0] - run(k, x0 - eps * e)[0][0]) / (2 * eps) for e in np.eye(3)]
    assert np.allclose(grad, fd, rtol=1e-8, atol=1e-9)
    # a seed on an intermediate node is its tangent, used as given: h's own (cos x₀·x₁, sin x₀, 0)
    # gives the same derivative; a wrong one (h's tangent doubled) is not corrected from x
    dh = [g.op("cos", x[0]) * x[1], g.op("sin", x[0]), None]
    for scale, same in ((1.0, True), (2.0, False)):
        s2 = {**seeds, h.node.id: [None if t is None else t * scale for t in dh]}
        d2 = tangents(g, [y[0]], s2)
        k2 = Kernel("t2", g, [Array("x", (3,))], [(Array("y", (1,)), [y[0]]), (Array("dy", (3,)), d2[0])])
        assert np.allclose(run(k2, x0)[1], grad, rtol=1e-12) == same
    with pytest.raises(ValueError, match="constant"):
        tangents(g, [y[0]], {**seeds, g.const(2.0).node.id: [one, None, None]})  # y₀ reads the constant 2
