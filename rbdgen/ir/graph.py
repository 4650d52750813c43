"""Kernel IR: a hash-consed expression DAG traced from the algorithms.

Algorithms compute with :class:`Value` objects (Python operators work on them). Every operation
goes through :class:`Graph`, which

* folds constants (``2·3 → 6``) and structural zeros and ones (``0·x → 0``, ``1·x → x``,
  ``x + 0 → x``, ``−1·x → −x``) — this is where sparsity pruning happens: a multiply by a
  structural zero is never emitted;
* sums a chain of constants once (``(x + c₁) − c₂ → x + (c₁ − c₂)``, ``c₁·(c₂·x) → (c₁c₂)·x``,
  ``c·x + c·x → (2c)·x``) and cancels a term added and taken away within two levels
  (``u + ((z − u) − c) → z − c``) where what is left costs one operation or none — never more
  than the operation it replaces. These reassociate: the result may differ from the order
  written in the last bit (the composite inertias' parallel-axis terms: crba 10–16 % fewer
  operations, docs/performance.md §43);
* shares common subexpressions (the same op on the same operands is one node);
* tags each node with the block (body, phase, tree level) active when it was created, so
  generated code can say where a statement comes from and backends can map tree levels to
  parallel hardware.

With ``fold=False`` nothing is folded or shared: the *dense* version of the same algorithm, used
for op-count comparison and as a cross-check of the pruned code.

Node ids are creation order, which is a topological order (operands exist before their users).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .ops import COST_CLASSES, OPS

#: ops whose operands the hash-consing key may order
_COMMUTATIVE = frozenset(name for name, o in OPS.items() if o.commutative)


@dataclass(frozen=True)
class Block:
    """Where a node comes from: a phase of the algorithm and (optionally) a body and its level."""

    phase: str
    body: int | None = None
    level: int | None = None
    label: str = ""


class Node:
    __slots__ = ("id", "op", "args", "value", "block", "name", "index")

    def __init__(self, id, op, args=(), value=None, block=None, name=None, index=None):
        self.id = id
        self.op = op          # "const", "input" or a name in ops.OPS
        self.args = args      # tuple of Node
        self.value = value    # float for const
        self.block = block
        self.name = name      # input array name
        self.index = index    # input array index

    def __repr__(self):
        if self.op == "const":
            return f"Const({self.value!r})"
        if self.op == "input":
            return f"{self.name}[{self.index}]"
        return f"t{self.id}={self.op}({', '.join('t%d' % a.id if a.op not in ('const', 'input') else repr(a) for a in self.args)})"


class Value:
    """A scalar in a traced computation; arithmetic builds graph nodes."""

    __slots__ = ("g", "node")

    def __init__(self, g: "Graph", node: Node):
        self.g = g
        self.node = node

    # constants known at generation time
    @property
    def const(self) -> float | None:
        return self.node.value if self.node.op == "const" else None

    def is_zero(self) -> bool:
        return self.node.op == "const" and self.node.value == 0.0

    def _lift(self, x) -> "Value":
        return x if isinstance(x, Value) else self.g.const(x)

    # add, sub and mul of two Values go to Graph._bin, the common case's short path
    def __add__(self, o):
        return self.g._bin("add", self, o if o.__class__ is Value else self.g.const(o))

    def __radd__(self, o):
        return self.g._bin("add", self.g.const(o), self)

    def __sub__(self, o):
        return self.g._bin("sub", self, o if o.__class__ is Value else self.g.const(o))

    def __rsub__(self, o):
        return self.g._bin("sub", self.g.const(o), self)

    def __mul__(self, o):
        return self.g._bin("mul", self, o if o.__class__ is Value else self.g.const(o))

    def __rmul__(self, o):
        return self.g._bin("mul", self.g.const(o), self)

    def __truediv__(self, o):
        return self.g.op("div", self, self._lift(o))

    def __rtruediv__(self, o):
        return self.g.op("div", self._lift(o), self)

    def __neg__(self):
        return self.g.op("neg", self)

    def __pos__(self):
        return self

    def __repr__(self):
        return f"Value({self.node!r})"


class Graph:
    def __init__(self, fold: bool = True, reassociate: bool = True):
        self.fold = fold
        #: the rules that sum constant chains and cancel terms (_constant_chain, _cancel, the
        #: products of constants): off in the rolled lowering's trace, whose kinds must not
        #: depend on which of two bodies' numbers happen to sum to zero
        self.reassociate = reassociate
        self.nodes: list[Node] = []
        self._memo: dict = {}
        self._consts: dict = {}
        self._inputs: dict = {}
        self.block = Block("setup")

    # ---- leaves ----------------------------------------------------------------------------
    def _new(self, op, args=(), value=None, name=None, index=None) -> Node:
        n = Node(len(self.nodes), op, args, value, self.block, name, index)
        self.nodes.append(n)
        return n

    def const(self, x) -> Value:
        # fast path: a constant seen before (−0.0 finds 0.0's node: they compare and hash equal;
        # NaN and ±inf are never stored, so they take the checks below)
        n = self._consts.get(x)
        if n is not None:
            return Value(self, n)
        x = float(x)
        if not math.isfinite(x):
            from ..errors import BuildError

            raise BuildError(f"a constant of the kernel is not finite ({x!r}): the model's numbers (lengths, "
                             f"masses, inertias, gravity) overflow float64")
        if x == 0.0:
            x = 0.0  # no negative zero in generated code
        key = x
        n = self._consts.get(key)
        if n is None:
            n = self._new("const", value=x)
            self._consts[key] = n
        return Value(self, n)

    def param(self, x, key) -> Value:
        """A number of the model that the graph must not fold: a leaf ``"param"`` while tracing
        (its value in ``index``, ``value`` None, so no folding rule sees a constant), made a
        constant by :meth:`params_to_consts` when the trace is done. One node per ``key``. The
        rolled lowering traces the model's per-body numbers (X_tree, inertias) so: each body's
        code then depends on its joint's kind only, not on which of its numbers happen to be
        0 or ±1 (:mod:`rbdgen.ir.roll`)."""
        key = ("param", key)
        n = self._inputs.get(key)
        if n is None:
            x = float(x)
            n = self._new("param", index=0.0 if x == 0.0 else x)
            self._inputs[key] = n
        return Value(self, n)

    def params_to_consts(self) -> None:
        """Every ``param`` leaf becomes a constant of its value (distinct nodes, not shared)."""
        for n in self.nodes:
            if n.op == "param":
                n.op, n.value, n.index = "const", n.index, None

    def fold_constants(self) -> int:
        """Every operation whose operands are all constants becomes a constant of its value, in
        creation order (so chains fold), after :meth:`params_to_consts`; its count. Only the
        operation itself is replaced: no rule of :meth:`op` runs on the result, so a product
        that comes out 0 or ±1 stays an operand like any other and the structure of the code
        around it is the one traced (what keeps a rolled kind's members alike). A result that
        is not finite (a massless body's 1/D) stays an operation, as traced."""
        folded = 0
        for n in self.nodes:
            args = n.args  # the leaves (const, input, param) have none
            if not args:
                continue
            if len(args) == 2:
                a, b = args
                if a.op != "const" or b.op != "const":
                    continue
                vals = (a.value, b.value)
            else:
                if any(a.op != "const" for a in args):
                    continue
                vals = tuple(a.value for a in args)
            try:
                x = float(OPS[n.op].fold(*vals))
            except (ZeroDivisionError, OverflowError, ValueError):
                continue
            if not math.isfinite(x):
                continue
            n.op, n.value, n.args = "const", 0.0 if x == 0.0 else x, ()
            folded += 1
        return folded

    def input(self, name: str, index: int) -> Value:
        key = (name, index)
        n = self._inputs.get(key)
        if n is None:
            n = self._new("input", name=name, index=index)
            self._inputs[key] = n
        return Value(self, n)

    def lift(self, x) -> Value:
        return x if isinstance(x, Value) else self.const(x)

    # ---- operations --------------------------------------------------------------------------
    # The tracer calls these a few million times for a humanoid, so they are written for speed:
    # a node's ``value`` is None unless it is a constant, binary ops (all but ``neg``) take a
    # path of their own, and the hash-consing key is built without a generator. The rules are
    # the ones listed in the module doc; test_ir checks the folded graph against the dense one.
    def op(self, op: str, *args: Value) -> Value:
        if not self.fold:
            return Value(self, self._new(op, tuple(a.node for a in args)))
        if len(args) == 2:
            a, b = args
            an, bn = a.node, b.node
            r = self._simplify2(op, a, b, an, bn, an.value, bn.value)
            if r is not None:
                return r
            if op in _COMMUTATIVE and an.id > bn.id:
                an, bn = bn, an
            key = (op, an.id, bn.id)
            n = self._memo.get(key)
            if n is None:
                n = self._new(op, (an, bn))
                self._memo[key] = n
            return Value(self, n)
        r = self._simplify(op, args)
        if r is not None:
            return r
        key = (op,) + tuple(a.node.id for a in args)
        n = self._memo.get(key)
        if n is None:
            n = self._new(op, tuple(a.node for a in args))
            self._memo[key] = n
        return Value(self, n)

    def _bin(self, op: str, a: Value, b: Value) -> Value:
        """``op(a, b)`` for add, sub and mul: :meth:`op`'s result, node for node. Where no rule of
        :meth:`_simplify2` can apply — folding on; no operand a negation; at most one a constant,
        and not 0 (nor ±1 for mul); for add and sub, not the same node twice and, with the rules
        that reassociate on, neither operand a sum or a difference; for mul with a constant and
        those rules, the other operand not a product — it goes straight to the hash-consing:
        most of a trace's operations (a 1 000-link chain's rnea_scan: 2.2 million calls, its
        trace 6.1 → 5.0 s). The rest go to :meth:`op`."""
        an, bn = a.node, b.node
        ao, bo = an.op, bn.op
        if not self.fold or ao == "neg" or bo == "neg":
            return self.op(op, a, b)
        ca, cb = an.value, bn.value
        if ca is not None:
            if cb is not None or ca == 0.0 or (op == "mul" and (ca == 1.0 or ca == -1.0)):
                return self.op(op, a, b)
        elif cb is not None and (cb == 0.0 or (op == "mul" and (cb == 1.0 or cb == -1.0))):
            return self.op(op, a, b)
        if op == "mul":
            if self.reassociate and (ca is not None or cb is not None) and (ao == "mul" or bo == "mul"):
                return self.op(op, a, b)
            if an.id > bn.id:
                an, bn = bn, an
        elif an is bn or (self.reassociate and (ao == "add" or ao == "sub" or bo == "add" or bo == "sub")):
            return self.op(op, a, b)
        elif op == "add" and an.id > bn.id:
            an, bn = bn, an
        key = (op, an.id, bn.id)
        n = self._memo.get(key)
        if n is None:
            n = Node(len(self.nodes), op, (an, bn), None, self.block)
            self.nodes.append(n)
            self._memo[key] = n
        return Value(self, n)

    def _simplify2(self, op, a, b, an, bn, ca, cb):
        """The folding rules of a binary op; ``ca``/``cb``: the operands' constants or None."""
        if ca is not None and cb is not None:
            return self.const(OPS[op].fold(ca, cb))
        if op == "mul":
            c, y = (ca, b) if ca is not None else (cb, a)  # at most one operand is a constant here
            if c is not None:
                if c == 0.0:
                    return self.const(0.0)
                if c == 1.0:
                    return y
                if c == -1.0:
                    return self.op("neg", y)
                # c·(k·y) is (c·k)·y: the two constants multiplied once
                yn = y.node
                if yn.op == "mul" and self.reassociate:
                    u, w = yn.args
                    k = u if u.value is not None else w if w.value is not None else None
                    if k is not None and math.isfinite(c * k.value):
                        return self.op("mul", self.const(c * k.value), Value(self, w if k is u else u))
            # pull negations out so −a·b and a·(−b) share a node
            if an.op == "neg":
                if bn.op == "neg":
                    return self.op("mul", Value(self, an.args[0]), Value(self, bn.args[0]))
                return self.op("neg", self.op("mul", Value(self, an.args[0]), b))
            if bn.op == "neg":
                return self.op("neg", self.op("mul", a, Value(self, bn.args[0])))
        elif op == "add":
            if ca == 0.0:
                return b
            if cb == 0.0:
                return a
            if self.reassociate:
                if ca is not None or cb is not None:
                    r = self._constant_chain(an, ca, 1.0, bn, cb)
                    if r is not None:
                        return r
                if an is bn and an.op == "mul" and (an.args[0].value is not None or an.args[1].value is not None):
                    return self.op("mul", self.const(2.0), a)  # c·y + c·y is (2c)·y, exactly
                r = self._cancel(an, bn, 1.0)
                if r is not None:
                    return r
            if bn.op == "neg":
                return self.op("sub", a, Value(self, bn.args[0]))
            if an.op == "neg":
                return self.op("sub", b, Value(self, an.args[0]))
        elif op == "sub":
            if cb == 0.0:
                return a
            if ca == 0.0:
                return self.op("neg", b)
            if an is bn:
                return self.const(0.0)
            if self.reassociate:
                if ca is not None or cb is not None:
                    r = self._constant_chain(an, ca, -1.0, bn, cb)
                    if r is not None:
                        return r
                r = self._cancel(an, bn, -1.0)
                if r is not None:
                    return r
            if bn.op == "neg":
                return self.op("add", a, Value(self, bn.args[0]))
        elif op == "div":
            if cb == 1.0:
                return a
            if ca == 0.0:
                return self.const(0.0)
            if cb == 0.0:
                raise ZeroDivisionError("structural division by zero while tracing a kernel")
        return None

    def _constant_chain(self, an, ca, sb, bn, cb):
        """a + sb·b where one of a, b is a constant c and the other is y ± k or k − y, another
        constant k: ±y + (k ± c), the two constants summed once (the chains the composite
        inertias' constant terms leave, x + c₁ + c₂ − c₁ …; quadruped crba 58 of 815 operations).
        None where the other operand is not such a node."""
        if ca is not None:
            sc, c, sx, xn = 1.0, ca, sb, bn
        else:
            sc, c, sx, xn = sb, cb, 1.0, an
        if xn.op != "add" and xn.op != "sub":
            return None
        y, k = xn.args
        if k.value is not None:
            p, kv = 1.0, (k.value if xn.op == "add" else -k.value)
        elif y.value is not None and xn.op == "sub":  # k − y
            y, k = k, y
            p, kv = -1.0, k.value
        elif y.value is not None:  # k + y
            y, k = k, y
            p, kv = 1.0, k.value
        else:
            return None
        kc = sx * kv + sc * c
        if not math.isfinite(kc):
            return None
        total = self.const(kc)
        yv = Value(self, y)
        return self.op("add", yv, total) if sx * p > 0 else self.op("sub", total, yv)

    @staticmethod
    def _terms(n, s, depth, out):
        """n·s as signed terms, add/sub/neg opened ``depth`` levels deep."""
        if depth and n.op in ("add", "sub", "neg"):
            if n.op == "neg":
                Graph._terms(n.args[0], -s, depth - 1, out)
            else:
                Graph._terms(n.args[0], s, depth - 1, out)
                Graph._terms(n.args[1], s if n.op == "add" else -s, depth - 1, out)
        else:
            out.append((s, n))
        return out

    def _cancel(self, an, bn, sb):
        """a + sb·b where a term of one operand, two levels deep at most, cancels the other
        (or another term): ``u + ((z − u) − c)`` is ``z − c``. Only where what is left is one
        operation or none, so the result never costs more than the a ± b it replaces
        (quadruped crba: the composite inertias' parallel-axis terms added and taken away)."""
        if an.op not in ("add", "sub", "neg") and bn.op not in ("add", "sub", "neg"):
            return None
        terms = self._terms(an, 1.0, 2, [])
        self._terms(bn, sb, 2, terms)
        if len(terms) > 6:
            return None
        acc: dict = {}
        k = 0.0
        for s, n in terms:
            if n.value is not None:
                k += s * n.value
            else:
                acc[n.id] = (acc.get(n.id, (0.0, n))[0] + s, n)
        left = [(s, n) for s, n in acc.values() if s != 0.0]
        if len(left) == sum(1 for _, n in terms if n.value is None):
            return None  # no term cancelled another (constants alone: _constant_chain's)
        if not math.isfinite(k) or len(left) > 2 or (len(left) == 2 and k != 0.0) \
                or any(abs(s) != 1.0 for s, _ in left):
            return None
        if not left:
            return self.const(k)
        if len(left) == 1:
            s, n = left[0]
            return self.op("add", Value(self, n), self.const(k)) if s > 0 else self.op("sub", self.const(k), Value(self, n))
        (s1, n1), (s2, n2) = sorted(left, key=lambda t: -t[0])
        if s1 < 0:
            return None  # −x − y: a negation more
        return self.op("add" if s2 > 0 else "sub", Value(self, n1), Value(self, n2))

    def _simplify(self, op, args):
        """The folding rules of ops with other than two operands (``neg``)."""
        cs = [a.node.value for a in args]
        if all(c is not None for c in cs):
            return self.const(OPS[op].fold(*cs))
        if op == "neg":
            (a,) = args
            if a.node.op == "neg":
                return Value(self, a.node.args[0])
        return None


@dataclass
class Array:
    """A kernel argument: a flat array of ``size`` scalars, logically of ``shape``."""

    name: str
    shape: tuple[int, ...]
    doc: str = ""

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class MatMul:
    """Epilogue ``out = scale · A @ B`` (A: n×k, B: k×m, row-major arrays by name).

    Products with nothing to prune in A (e.g. −M⁻¹ ∂τ/∂q) are O(n³) lines of code unrolled;
    targets print them as loops. ``b_spans`` is B's structural sparsity, found at trace time:
    for each row l of B, the contiguous column spans ``(lo, hi)`` that may hold nonzeros (every
    other entry is the graph's constant zero, whatever the inputs), in increasing order; None
    when B is dense. A backend that prints the loops over these spans only does
    :attr:`terms` multiplies (and as many subtractions) per row of A, not k·m."""

    out: str
    a: str
    b: str
    n: int
    k: int
    m: int
    scale: float = 1.0
    b_spans: tuple | None = None

    @staticmethod
    def spans_of(nonzero, k: int, m: int) -> tuple | None:
        """``b_spans`` from a k·m row-major sequence of booleans (True: may be nonzero); None
        when every entry may be nonzero."""
        rows = []
        for r in range(k):
            spans, lo = [], None
            for j in range(m + 1):
                nz = j < m and bool(nonzero[r * m + j])
                if nz and lo is None:
                    lo = j
                elif not nz and lo is not None:
                    spans.append((lo, j))
                    lo = None
            rows.append(tuple(spans))
        dense = ((0, m),) if m else ()
        return None if all(s == dense for s in rows) else tuple(rows)

    def op_counts(self) -> tuple[int, int]:
        """(multiplies, adds) of the product as printed over B's nonzero spans: one of each per
        term, each output element starting from zero, and a multiply per element for a
        ``scale`` other than ±1."""
        mul = add = self.n * self.terms
        if self.scale not in (1.0, -1.0):
            mul += self.n * self.m
        return mul, add

    def row_spans(self, r: int) -> tuple:
        """The column spans of row ``r`` of B that the product reads."""
        return ((0, self.m),) if self.b_spans is None else self.b_spans[r]

    def row_groups(self) -> list[tuple[int, int, tuple]]:
        """Runs of consecutive rows of B with the same spans, ``(first, end, spans)``; rows
        with no nonzero are left out."""
        groups: list[tuple[int, int, tuple]] = []
        for r in range(self.k):
            s = self.row_spans(r)
            if not s:
                continue
            if groups and groups[-1][1] == r and groups[-1][2] == s:
                groups[-1] = (groups[-1][0], r + 1, s)
            else:
                groups.append((r, r + 1, s))
        return groups

    def column_terms(self) -> tuple:
        """Per column j of B: how many rows may be nonzero there (terms of each output sum)."""
        t = [0] * self.m
        for r in range(self.k):
            for lo, hi in self.row_spans(r):
                for j in range(lo, hi):
                    t[j] += 1
        return tuple(t)

    def column_groups(self) -> list[tuple[int, int, tuple]]:
        """Runs of consecutive columns of B whose nonzero rows are the same, ``(first, end,
        row spans)``: the row spans ``(lo, hi)`` of B that hold that column's terms."""
        rows_of = []
        for j in range(self.m):
            rs, lo = [], None
            for r in range(self.k + 1):
                nz = r < self.k and any(a <= j < b for a, b in self.row_spans(r))
                if nz and lo is None:
                    lo = r
                elif not nz and lo is not None:
                    rs.append((lo, r))
                    lo = None
            rows_of.append(tuple(rs))
        groups: list[tuple[int, int, tuple]] = []
        for j, rs in enumerate(rows_of):
            if groups and groups[-1][2] == rs:
                groups[-1] = (groups[-1][0], j + 1, rs)
            else:
                groups.append((j, j + 1, rs))
        return groups

    @property
    def terms(self) -> int:
        """Entries of B that may be nonzero: multiplies per row of A (k·m when dense)."""
        if self.b_spans is None:
            return self.k * self.m
        return sum(hi - lo for spans in self.b_spans for lo, hi in spans)

    @property
    def depth(self) -> int:
        """The longest sum of one output element: its terms (a multiply, then a chain of adds)."""
        return self.k if self.b_spans is None else max(self.column_terms(), default=0)

    def dense(self) -> "MatMul":
        """The same product without its sparsity (what a backend printing it dense computes)."""
        return replace(self, b_spans=None)


@dataclass
class Kernel:
    """A traced kernel: inputs, outputs (each a flat list of Values) and the graph they live in.

    ``temps`` are arrays written by the straight-line part and read by the ``post`` epilogue
    (never seen by callers); ``post`` outputs are listed in ``epilogue_outputs``."""

    name: str
    graph: Graph
    inputs: list[Array]
    outputs: list[tuple[Array, list]]
    doc: str = ""
    meta: dict = field(default_factory=dict)
    temps: list = field(default_factory=list)           # list of (Array, values)
    post: list = field(default_factory=list)            # list of MatMul
    epilogue_outputs: list = field(default_factory=list)  # list of Array
    output_order: list = field(default_factory=list)      # names, when epilogue outputs interleave

    @property
    def all_outputs(self) -> list[Array]:
        """Caller-visible outputs in signature order."""
        arrs = [a for a, _ in self.outputs] + list(self.epilogue_outputs)
        if self.output_order:
            by = {a.name: a for a in arrs}
            return [by[n] for n in self.output_order]
        return arrs

    def traced_arrays(self):
        """(Array, values) written by the straight-line code: outputs then temps."""
        return list(self.outputs) + list(self.temps)

    def live_nodes(self) -> list[Node]:
        """Nodes needed by the outputs, in topological (creation) order. Kept once computed (a
        3 000-link scan kernel: seconds; the rolled printer, op counts and a target each ask),
        for as long as the graph and the traced arrays keep their sizes."""
        key = (len(self.graph.nodes), len(self.outputs), len(self.temps))
        memo = self.__dict__.get("_live")
        if memo is not None and memo[0] == key:
            return memo[1]
        out = self._live_nodes()
        self.__dict__["_live"] = (key, out)
        return out

    def _live_nodes(self) -> list[Node]:
        # one pass from the last node back: a node's operands were made before it (ids are
        # places in graph.nodes, in creation order), so each is marked before it is reached
        # (a 1 000-link chain's rnea_scan: 0.57 s against 0.86 s for a search from the outputs)
        nodes = self.graph.nodes
        live = bytearray(len(nodes))
        for _, vals in self.traced_arrays():
            for v in vals:
                live[v.node.id] = 1
        for n in reversed(nodes):
            if live[n.id]:
                for a in n.args:
                    live[a.id] = 1
        return [n for n in nodes if live[n.id]]

    def op_counts(self, dense_epilogue: bool = False) -> dict:
        """Arithmetic operations in the emitted code, per cost class of the op table (a negation
        counts as an add). Each ``post`` product does one multiply and one subtraction (or add)
        per term it sums, each output element starting from zero: ``n · terms`` of each, terms
        counted over B's nonzero spans (:attr:`MatMul.terms`), or over all of B with
        ``dense_epilogue`` (what a backend that prints the products dense does)."""
        key = (len(self.graph.nodes), len(self.outputs), len(self.temps), len(self.post), bool(dense_epilogue))
        memo = self.__dict__.setdefault("_counts", {})
        if key in memo:
            return dict(memo[key])
        memo[key] = self._op_counts(dense_epilogue)
        return dict(memo[key])

    def _op_counts(self, dense_epilogue: bool) -> dict:
        c = dict.fromkeys(COST_CLASSES, 0)
        depth = [0] * len(self.graph.nodes)  # by id; leaves 0
        cost = {name: o.cost for name, o in OPS.items()}
        for n in self.live_nodes():
            op = n.op
            if op == "const" or op == "input":
                continue
            args = n.args
            d = depth[args[0].id]
            if len(args) == 2 and depth[args[1].id] > d:
                d = depth[args[1].id]
            depth[n.id] = d + 1
            c[cost[op]] += 1
        post = [mm.dense() for mm in self.post] if dense_epilogue else self.post
        for mm in post:
            mul, add = mm.op_counts()
            c["mul"] += mul
            c["add"] += add
        c["depth"] = max(depth, default=0) + max((mm.depth for mm in post), default=0)
        c["total"] = sum(c[k] for k in COST_CLASSES)
        return c
