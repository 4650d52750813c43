"""Forward-mode differentiation of traced Values: tangents as more Values in the same graph.

:func:`tangents` takes output Values of a traced computation, seeds on some of its input nodes
(one tangent per direction, ``None`` for zero) and returns each output's tangent along every
direction, built with the graph's own ops: constant folding and structural zeros prune them as
they prune everything (a direction that never reaches a node costs nothing there), and common
subexpressions are shared with the primal computation. Nodes in ``stop`` are held constant (their
tangent is zero and what they depend on is not visited): the partial derivatives at fixed values
of some intermediate quantities, as the implicit-function theorem needs.

The rule of every op of :data:`rbdgen.ir.ops.OPS` is in :data:`RULES` (an op without one is an
error at import: adding an op means saying how it differentiates).
"""
from __future__ import annotations

from .graph import Graph, Value
from .ops import OPS


def _add(g, a, r, da, db):
    return da if db is None else (db if da is None else da + db)


def _sub(g, a, r, da, db):
    return da if db is None else (-db if da is None else da - db)


def _mul(g, a, r, da, db):
    out = None if da is None else da * a[1]
    if db is not None:
        out = a[0] * db if out is None else out + a[0] * db
    return out


def _div(g, a, r, da, db):
    # d(x / y) = (dx − (x / y)·dy) / y: the quotient itself is reused
    if db is None:
        return da / a[1]
    return ((-(r * db)) if da is None else (da - r * db)) / a[1]


def _neg(g, a, r, da, db):
    return -da


def _sin(g, a, r, da, db):
    return g.op("cos", a[0]) * da


def _cos(g, a, r, da, db):
    return -(g.op("sin", a[0]) * da)


#: op name → (graph, operand Values, result Value, operand tangents (None: zero)) → tangent
RULES = {"add": _add, "sub": _sub, "mul": _mul, "div": _div, "neg": _neg, "sin": _sin, "cos": _cos}
_missing = set(OPS) - set(RULES)
if _missing:
    raise AssertionError(f"rbdgen.ir.forward: no differentiation rule for op(s) {sorted(_missing)}")


def tangents(g: Graph, outputs, seeds: dict, stop=frozenset(), directions: int | None = None):
    """The tangents of ``outputs`` (Values of ``g``): a list per output of one Value per direction.

    ``seeds``: node id → a list (one entry per direction) of Values or None (zero). An input's
    seed is its tangent; any other node's is a tangent known beforehand (e.g. from an analytical
    formula), which is then used as it is: what that node depends on is not differentiated through
    on its way. ``stop``: node ids held constant. Directions a seed leaves out are zero."""
    k = directions if directions is not None else len(next(iter(seeds.values())))
    zero = g.const(0.0)
    nodes, todo = {}, [o.node for o in outputs]
    while todo:
        n = todo.pop()
        if n.id in nodes:
            continue
        nodes[n.id] = n
        if n.id not in stop and n.id not in seeds:
            todo.extend(n.args)
    tan: dict[int, list] = {}
    for nid in sorted(nodes):  # ids are creation order: operands before their users
        n = nodes[nid]
        if nid in seeds and nid not in stop:
            if n.op == "const":
                raise ValueError("tangents: a constant node cannot be seeded (its tangent is zero)")
            tan[nid] = [None if x is None or x.is_zero() else x for x in seeds[nid]] + [None] * (k - len(seeds[nid]))
            continue
        if n.op == "input":
            continue
        if nid in stop or n.op not in RULES:  # constants, parameters, held values
            continue
        ts = [tan.get(a.id) for a in n.args]
        if all(t is None for t in ts):
            continue
        args = [Value(g, a) for a in n.args]
        me = Value(g, n)
        rule = RULES[n.op]
        out = [None] * k
        for d in range(k):
            da = ts[0][d] if ts[0] is not None else None
            db = ts[1][d] if len(ts) > 1 and ts[1] is not None else None
            if da is None and db is None:
                continue
            r = rule(g, args, me, da, db)
            out[d] = None if r is None or r.is_zero() else r
        if any(x is not None for x in out):
            tan[nid] = out
    res = []
    for o in outputs:
        t = tan.get(o.node.id)
        res.append([zero if t is None or t[d] is None else t[d] for d in range(k)])
    return res
