"""benchmarks/peer_ops.py counts the arithmetic in Pinocchio + CppADCodeGen's generated C, the
other side of the operation counts it sets beside rbdgen's (issue 49). Its counter is checked here
against expressions whose operations are known by construction: random expression trees printed
the way CppADCodeGen prints them, and a few of its own lines counted by hand."""
from __future__ import annotations

import random

import pytest

from conftest import bench_module


def _peer_ops():
    return bench_module("peer_ops")


@pytest.mark.parametrize("expr, want", [
    ("x[3] * v[5] + 0.5 * v[2]", dict(mul=2, add=1, div=0, trig=0)),
    ("-0.22 + -0.1364 * v[52] + 0.00456 * v[57]", dict(mul=2, add=2, div=0, trig=0)),  # two literals
    ("- 15.6 * (- v[63])", dict(mul=1, add=1, div=0, trig=0)),  # a negated value is an add
    ("0 - v[53]", dict(mul=0, add=1, div=0, trig=0)),
    ("sin(x[16])", dict(mul=0, add=0, div=0, trig=1)),
    ("-cos(x[2]) * 2", dict(mul=1, add=1, div=0, trig=1)),
    ("v[1] / v[2] - (v[3] + v[4]) * v[5]", dict(mul=1, add=2, div=1, trig=0)),
    ("-(v[1] * v[2])", dict(mul=1, add=1, div=0, trig=0)),
    ("1e-05 * v[1] + 2.5E+3", dict(mul=1, add=1, div=0, trig=0)),
    ("v[7]", dict(mul=0, add=0, div=0, trig=0)),  # a copy
])
def test_counts_cppadcodegen_lines(expr, want):
    assert _peer_ops().count_expression(expr) == want


def _tree(rng, depth):
    """(C text, operations) of a random expression: binary ops, negations, literals, values."""
    r = rng.random()
    if depth == 0 or r < 0.2:
        if rng.random() < 0.3:
            lit = f"{rng.uniform(0, 9):.4g}"
            return (f"-{lit}", 0) if rng.random() < 0.5 else (lit, 0)  # a negative literal costs nothing
        return f"{rng.choice('vxy')}[{rng.randrange(100)}]", 0
    if r < 0.3:
        text, n = _tree(rng, depth - 1)
        return f"-({text})", n + 1
    a, na = _tree(rng, depth - 1)
    b, nb = _tree(rng, depth - 1)
    op = rng.choice("*/+-")
    return f"({a} {op} {b})" if rng.random() < 0.5 else f"({a}){op}({b})", na + nb + 1


def test_counts_random_trees():
    po = _peer_ops()
    rng = random.Random(49)
    for _ in range(300):
        text, n = _tree(rng, 6)
        c = po.count_expression(text)
        assert c["mul"] + c["add"] + c["div"] == n, text


def test_refuses_what_it_cannot_count():
    po = _peer_ops()
    for expr in ("v[1] > 0 ? v[2] : v[3]", "atan2(v[1], v[2])", "v[1] % v[2]"):
        with pytest.raises(ValueError):
            po.count_expression(expr)


def test_counts_a_generated_file(tmp_path):
    """count_c reads the assignments of a file CppADCodeGen writes (its declarations and
    comments are not operations; duplicated outputs are one output each)."""
    f = tmp_path / "k_forward_zero.c"
    f.write_text("\n".join([
        "void k_forward_zero(double const *const * in, double*const * out) {",
        "   const double* x = in[0];",
        "   double* y = out[0];",
        "   double v[3];",
        "   v[0] = sin(x[0]);",
        "   v[1] = x[1] * v[0] + 2;",
        "   y[0] = 0 - v[1];",
        "   // variable duplicates: 1",
        "   y[1] = y[0];",
        "   y[1] = v[1] / x[2];",
        "}"]))
    c = _peer_ops().count_c([f])
    assert (c["mul"], c["add"], c["div"], c["trig"], c["arith"], c["outputs"], c["statements"]) == (1, 2, 1, 1, 4, 2, 5)
