"""The rolled lowering's analysis (issue 44): a traced kernel as loops over bodies.

The unrolled printers emit every live node of a kernel as its own statement: the right code for
an arm, and a ceiling for a 3 000-link chain or a humanoid's ∇FD (megabytes of machine code,
minutes of compilation). The same trace holds the loop structure: the algorithms open a block
(:class:`~rbdgen.ir.graph.Block`) for each body's share of each phase, and every body of the
same joint kind does the same pruned work there, on other constants and other slots.

:func:`roll` finds it. The live nodes, in creation (topological) order, are cut into
*segments*: maximal runs created under one block. Each segment gets a *signature*: its ops,
each operand named relative to the segment — a node of the segment (by its place), a constant
(each occurrence its own), an input element (array, by first use) or a value of an earlier segment (an
*external*, by first use); commutative operands in a canonical order. Segments with equal
signatures are one *kind*: one piece of code, run once per member with the member's row of
the kind's tables — the constants that differ between members (those equal in all members stay
literals, so a kind of one member is the unrolled code), the input indices, and the workspace
slots of its externals. Sparsity pruning is untouched: a structural zero folded away in one
body changes its signature, so a body whose X, S or I have other zeros is another kind, with
its own pruned code — per kind instead of per body.

Values that cross segments, and the outputs, live in a workspace ``w``: each member of a kind
writes its *exports* (the union over the kind's members of the nodes another segment or an
output reads) at ``w + base``. Outputs and epilogue temps are gathered from ``w`` at the end.

Correctness is shared with the unrolled lowering: same graph, same ops in the same order on the
same operands, so the same bits (tests/test_rolled.py checks both against the reference).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import RbdgenError
from .graph import Kernel, Node
from .ops import OPS
from ..gcpause import pausing

#: ``unroll="auto"``: a kernel with at least this many live operations is printed rolled. Where
#: rolled code starts to win (benchmarks/rolled.py, docs/performance.md §22): on random chains
#: around here (100 links: rnea_scan's 119 000 operations rolled 0.91x the unrolled time, aba's
#: 58 000 1.30x; 300 links: aba's 177 000 1.06x, rnea's 76 000 1.32x); TALOS's biggest kernel
#: (∇FD, 67 000) stays unrolled, where it runs 1.66x faster than rolled
AUTO_OPS = 100_000

_COMMUTATIVE = frozenset(name for name, o in OPS.items() if o.commutative)
#: how the signature names the operand kinds 0…3 of :func:`_signature`
_KIND_NAMES = ("l", "x", "i", "c")


@dataclass
class Kind:
    """One piece of rolled code: the ops of every member segment, relative to it."""

    id: int
    #: per op: (op name, operands); an operand is ("l", k) the segment's k-th op, ("c", j) its j-th
    #: constant, ("i", j) its j-th input element, ("x", j) its j-th external
    ops: tuple
    inputs: tuple                   # per input operand j: the array's name
    n_const: int
    n_ext: int
    members: list = field(default_factory=list)   # segment indices, in order
    #: per constant j: its value when every member has the same, else its column in ``ctab``
    const_lit: dict = field(default_factory=dict)
    const_col: dict = field(default_factory=dict)
    input_lit: dict = field(default_factory=dict)  # per input operand j: the index when shared
    input_col: dict = field(default_factory=dict)  # … else its column in ``itab``
    ext_col: dict = field(default_factory=dict)    # per external j: its column in ``itab``
    exports: list = field(default_factory=list)    # op places written to w + base, in order
    export_pos: dict = field(default_factory=dict)  # op place → offset from base
    ctab: list = field(default_factory=list)       # per member: constants (floats)
    itab: list = field(default_factory=list)       # per member: ints (base, inputs, externals)
    block: object = None                            # the first member's block (for comments)


@dataclass
class Segment:
    block: object
    nodes: list      # op nodes, creation order


@dataclass
class Rolled:
    kernel: Kernel
    segments: list          # Segment
    kinds: list             # Kind
    seg_kind: list          # segment index → kind id
    seg_row: list           # segment index → member row in its kind
    runs: list              # (kind id, first row, end row): consecutive segments of one kind
    w_size: int             # workspace slots of the exports
    slot: dict              # node id → w slot (exported nodes)
    #: per traced array (outputs, temps): per element ("w", slot) | ("c", value) | ("i", name, index)
    gather: list
    #: the angles (input array, index) whose sine and cosine are computed first, into w[2j], w[2j+1]
    trig: list = field(default_factory=list)
    #: per segment: its stage (:func:`_stages`), the order a cooperative lowering may run it in
    stage: list = field(default_factory=list)
    #: workspace slots the exports would take without reuse (each segment its own)
    w_unshared: int = 0
    #: what a layout (:func:`_layout`) is computed from: per segment (constants, input elements,
    #: external nodes) in its signature's order; node id → segment (-1: a sine or cosine computed
    #: first); the (angle, sine node, cosine node) computed first
    rows: list = field(default_factory=list, repr=False)
    seg_of: dict = field(default_factory=dict, repr=False)
    trig_nodes: list = field(default_factory=list, repr=False)

    @property
    def n_ops(self) -> int:
        """Operations printed: the kinds' (the sines and cosines first are one loop)."""
        return sum(len(k.ops) for k in self.kinds)


def _trig(kernel: Kernel) -> list:
    """The sines and cosines of input elements (the joint angles), as (input node, sin node or
    None, cos node or None) in order of first use: computed first, all together (the CPU prints
    them four to a SIMD call), instead of one scalar call in each body's block."""
    by: dict[int, list] = {}
    for n in kernel.live_nodes():
        if n.op in ("sin", "cos") and n.args[0].op == "input":
            a = n.args[0]
            e = by.setdefault(a.id, [a, None, None])
            e[1 if n.op == "sin" else 2] = n
    return [tuple(e) for e in by.values()]


def _segments(kernel: Kernel, skip: set) -> tuple[list[Segment], dict]:
    """The live operations (less ``skip``) cut into segments, and each node's segment (node id →
    segment index; ``skip``'s nodes → -1)."""
    segs: list[Segment] = []
    seg_of: dict[int, int] = dict.fromkeys(skip, -1)
    cur = None
    nodes = None
    si = -1
    block = None
    for n in kernel.live_nodes():
        op = n.op
        if op == "const" or op == "input":
            continue
        i = n.id
        if i in skip:
            continue
        if n.block is not block:
            block = n.block
            cur = Segment(block, [])
            nodes = cur.nodes
            segs.append(cur)
            si += 1
        nodes.append(n)
        seg_of[i] = si
    return segs, seg_of


def _signature(seg: Segment):
    """(signature, constants, inputs (name, index), externals (node)) of one segment. The
    signature holds one flat tuple per op: ``(op, kind, place[, kind, place])`` with the operand
    kinds 0…3 of :data:`_KIND_NAMES` (:func:`_nested` gives the printer's form).

    Each operand is named: a node of the segment by its place (0), an external by the order of
    first use (1), an input element by the order of first use (2), a constant each occurrence
    its own (3: whether two constants of a body happen to be the same number, two equal moments
    of inertia, must not make another kind). A commutative op's operands are put in a
    member-independent order: by kind, then by the place already given (new operands last),
    inputs by array name. The loop is written out (no helper calls): a 3 000-link chain's
    rnea_scan names 13 million operands here."""
    local: dict[int, int] = {}
    cvals: list[float] = []
    ins: dict[int, int] = {}
    ivals: list[tuple] = []
    exts: dict[int, int] = {}
    enodes: list[Node] = []
    ops = []
    append = ops.append
    lget = local.get
    big = 1 << 30
    commutative = _COMMUTATIVE
    for k, n in enumerate(seg.nodes):
        args = n.args
        if len(args) == 2:
            a, b = args
            ja = lget(a.id)
            if ja is not None:
                ka = 0
            else:
                op = a.op
                if op == "const":
                    ka, ja = 3, -1
                elif op == "input":
                    ka, ja = 2, ins.get(a.id, -1)
                else:
                    ka, ja = 1, exts.get(a.id, -1)
            jb = lget(b.id)
            if jb is not None:
                kb = 0
            else:
                op = b.op
                if op == "const":
                    kb, jb = 3, -1
                elif op == "input":
                    kb, jb = 2, ins.get(b.id, -1)
                else:
                    kb, jb = 1, exts.get(b.id, -1)
            if n.op in commutative and (ka > kb or (ka == kb and (
                    (ja if ja >= 0 else big) > (jb if jb >= 0 else big) or
                    (ka == 2 and (ja if ja >= 0 else big) == (jb if jb >= 0 else big)
                     and (a.name or "") > (b.name or ""))))):
                a, b, ka, ja, kb, jb = b, a, kb, jb, ka, ja
            if ja < 0:
                if ka == 3:
                    ja = len(cvals)
                    cvals.append(a.value)
                elif ka == 2:
                    ja = ins[a.id] = len(ivals)
                    ivals.append((a.name, a.index))
                else:
                    ja = exts[a.id] = len(enodes)
                    enodes.append(a)
            if jb < 0:
                if kb == 3:
                    jb = len(cvals)
                    cvals.append(b.value)
                elif kb == 2:
                    jb = ins[b.id] = len(ivals)
                    ivals.append((b.name, b.index))
                else:
                    jb = exts[b.id] = len(enodes)
                    enodes.append(b)
            append((n.op, ka, ja, kb, jb))
        else:
            (a,) = args
            ja = lget(a.id)
            if ja is not None:
                ka = 0
            else:
                op = a.op
                if op == "const":
                    ka = 3
                    ja = len(cvals)
                    cvals.append(a.value)
                elif op == "input":
                    ka = 2
                    ja = ins.get(a.id)
                    if ja is None:
                        ja = ins[a.id] = len(ivals)
                        ivals.append((a.name, a.index))
                else:
                    ka = 1
                    ja = exts.get(a.id)
                    if ja is None:
                        ja = exts[a.id] = len(enodes)
                        enodes.append(a)
            append((n.op, ka, ja))
        local[n.id] = k
    sig = (tuple(ops), tuple(name for name, _ in ivals), len(cvals), len(enodes))
    return sig, cvals, ivals, enodes


def _nested(ops) -> tuple:
    """The printer's form of a signature's ops: ``(op, ((kind name, place), …))``."""
    return tuple((o[0], tuple((_KIND_NAMES[o[i]], o[i + 1]) for i in range(1, len(o), 2))) for o in ops)


@pausing
def roll(kernel: Kernel, cooperative: bool = False, reuse: bool = True) -> Rolled:
    """The kernel's segments grouped into kinds, with their tables and the workspace layout.
    ``cooperative``: the layout is also valid when the segments run stage by stage on several
    lanes (the CUDA block shape), not only in the trace's order (the CPU; CUDA's thread shape).
    ``reuse``: a segment's exports may take a dead segment's slots; without it (HLS) every slot
    is written once, so a slot carries no dependence but the data's (:func:`run_independent`)."""
    trig = _trig(kernel)
    pre = {n.id for _, sn, cn in trig for n in (sn, cn) if n is not None}
    segs, seg_of = _segments(kernel, pre)
    kinds: list[Kind] = []
    by_sig: dict = {}
    seg_kind, seg_row = [], []
    per_seg = []
    for si, s in enumerate(segs):
        sig, cvals, ivals, enodes = _signature(s)
        k = by_sig.get(sig)
        if k is None:
            k = Kind(len(kinds), _nested(sig[0]), sig[1], sig[2], sig[3], block=s.block)
            by_sig[sig] = k
            kinds.append(k)
        seg_kind.append(k.id)
        seg_row.append(len(k.members))
        k.members.append(si)
        per_seg.append((cvals, ivals, enodes))
    # exports: nodes read by another segment (a segment's externals), or stored to an output or temp
    exported: set[int] = {e.id for _, _, enodes in per_seg for e in enodes}
    for _, vals in kernel.traced_arrays():
        for v in vals:
            if v.node.op not in ("const", "input"):
                exported.add(v.node.id)
    for k in kinds:
        places = set()
        for si in k.members:
            places.update(p for p, n in enumerate(segs[si].nodes) if n.id in exported)
        k.exports = sorted(places)
        k.export_pos = {p: e for e, p in enumerate(k.exports)}
    # tables: a column per value that differs between members (the integer rows: _layout)
    for k in kinds:
        rows = [per_seg[si] for si in k.members]
        ccols, icols = [], [0]  # itab column 0: the base
        for j in range(k.n_const):
            vals = {r[0][j] for r in rows}
            if len(vals) == 1:
                k.const_lit[j] = rows[0][0][j]
            else:
                k.const_col[j] = len(ccols)
                ccols.append(j)
        for j in range(len(k.inputs)):
            idx = {r[1][j][1] for r in rows}
            if len(idx) == 1:
                k.input_lit[j] = rows[0][1][j][1]
            else:
                k.input_col[j] = len(icols)
                icols.append(("i", j))
        for j in range(k.n_ext):
            k.ext_col[j] = len(icols)
            icols.append(("x", j))
        for cvals, _, _ in rows:
            k.ctab.append([cvals[j] for j in ccols])
    runs = []
    for si in range(len(segs)):
        kid, r = seg_kind[si], seg_row[si]
        if runs and runs[-1][0] == kid and runs[-1][2] == r:
            runs[-1][2] = r + 1
        else:
            runs.append([kid, r, r + 1])
    stage = _stages(_reads(per_seg, seg_of))
    sizes = [len(kinds[seg_kind[si]].exports) for si in range(len(segs))]
    R = Rolled(kernel, segs, kinds, seg_kind, seg_row, [tuple(r) for r in runs], 0, {}, [],
               [(a.name, a.index) for a, _, _ in trig], stage, 2 * len(trig) + sum(sizes), per_seg, seg_of, trig)
    _layout(R, cooperative, reuse)
    return R


def run_independent(R: Rolled, run) -> bool:
    """Whether no member of ``run`` (kind id, first row, end row) reads a value another member of
    it computes: the members may then overlap (a pipelined loop over them). Exact with a layout
    without reuse, where the workspace slots carry the data's dependences only."""
    kid, lo, hi = run
    members = R.kinds[kid].members[lo:hi]
    mine = set(members)
    for si in members:
        for n in R.segments[si].nodes:
            for a in n.args:
                u = R.seg_of.get(a.id)
                if u is not None and u != si and u in mine:
                    return False
    return True


def relayout(R: Rolled, cooperative: bool) -> Rolled:
    """``R`` with the other workspace layout (:func:`roll`'s ``cooperative``): the same kinds,
    constants and runs; other bases, external slots, gather and workspace size. The CUDA target
    gives its thread shape the trace order's (smaller) layout and its block shape the
    cooperative one, each with its own integer tables."""
    kinds = [replace(k, itab=[]) for k in R.kinds]
    out = replace(R, kinds=kinds, slot={}, gather=[], w_size=0)
    _layout(out, cooperative)
    return out


def _layout(R: Rolled, cooperative: bool, reuse: bool = True) -> None:
    """Fill in ``R``'s workspace layout: the sines and cosines first (sin, cos of each angle),
    then each segment's exports at its base (a place another segment's dead exports left, where
    one fits); the kinds' integer rows; the gather of the outputs."""
    segs, kinds, kernel = R.segments, R.kinds, R.kernel
    slot: dict[int, int] = {}
    for j, (_, sn, cn) in enumerate(R.trig_nodes):
        for n, off in ((sn, 0), (cn, 1)):
            if n is not None:
                slot[n.id] = 2 * j + off
    sizes = [len(kinds[R.seg_kind[si]].exports) for si in range(len(segs))]
    # one thread runs the segments in the trace's order: a "stage" per segment then
    order = R.stage if cooperative else list(range(len(segs)))
    base_of, w = _bases(_reads(R.rows, R.seg_of), R.seg_of, order, sizes, exported_to_arrays(kernel), 2 * len(R.trig),
                        _REUSE_SCAN if reuse else 0)
    for si, s in enumerate(segs):
        k = kinds[R.seg_kind[si]]
        for p, e in k.export_pos.items():
            slot[s.nodes[p].id] = base_of[si] + e
    for k in kinds:
        icols = sorted([(c, ("i", j)) for j, c in k.input_col.items()] + [(c, ("x", j)) for j, c in k.ext_col.items()])
        for si in k.members:
            _, ivals, enodes = R.rows[si]
            row = [base_of[si]]
            for _, (what, j) in icols:
                row.append(ivals[j][1] if what == "i" else slot[enodes[j].id])
            k.itab.append(row)
    gather = []
    for _, vals in kernel.traced_arrays():
        g = []
        for v in vals:
            n = v.node
            if n.op == "const":
                g.append(("c", n.value))
            elif n.op == "input":
                g.append(("i", n.name, n.index))
            else:
                g.append(("w", slot[n.id]))
        gather.append(g)
    R.slot, R.gather, R.w_size = slot, gather, w


def exported_to_arrays(kernel: Kernel) -> set:
    """Ids of the nodes the kernel stores to an output or temp (gathered at the end)."""
    return {v.node.id for _, vals in kernel.traced_arrays() for v in vals}


def _reads(rows: list, seg_of: dict) -> list:
    """Per segment, the segments whose values it reads (-1: the sines and cosines computed
    first), from its externals (``rows``: :attr:`Rolled.rows`)."""
    return [{seg_of[e.id] for e in enodes} for _, _, enodes in rows]


def _stages(reads: list) -> list[int]:
    """Each segment's stage: one after the latest segment it reads a value of (``reads``:
    :func:`_reads`). The sines and cosines computed first (-1) are stage 0's, so a segment
    reading one is in stage 1 or later; a segment that reads nothing computed is in stage 0.
    Segments of one stage never read each other: a cooperative lowering (the CUDA block shape)
    runs them side by side between two barriers."""
    stage = [0] * len(reads)
    for si, us in enumerate(reads):
        st = 0
        for u in us:
            x = 1 if u < 0 else stage[u] + 1
            if x > st:
                st = x
        stage[si] = st
    return stage


#: free places looked at before a segment's exports take new slots (the search stays linear in
#: the segments on a 10 000-link chain)
_REUSE_SCAN = 64


def _bases(reads: list, seg_of: dict, stage: list, sizes: list, to_arrays: set, start: int,
           scan: int = _REUSE_SCAN):
    """(each segment's workspace base, the workspace size). ``reads``: per segment the segments
    it reads (:func:`_reads`). A segment's exports may take the
    slots of an earlier segment's once that one is dead in both orders the kinds may run in: the
    trace order (one thread) and ``stage`` (lanes between barriers; the segment's index where
    only one thread runs them) — the new segment comes after its last reader in the trace and in
    a later stage than it (``scan`` 0: no reuse). Where lanes run the stages the workspace is larger (iiwa14 ∇FD: 1 455
    slots without reuse, 1 206 cooperative, 874 in the trace's order alone): the columns of a
    gradient, one after the other in the trace, are live at once side by side. Exports stored
    to an output or temp stay live to the end. First fit among the oldest :data:`_REUSE_SCAN`
    free places (the rest of a larger place stays free)."""
    n = len(reads)
    last_i = list(range(n))
    last_st = list(stage)
    for i in to_arrays:
        u = seg_of.get(i)
        if u is not None and u >= 0:
            last_i[u], last_st[u] = n, 1 << 30
    for si, us in enumerate(reads):
        st = stage[si]
        for u in us:
            if u >= 0:
                if si > last_i[u]:
                    last_i[u] = si
                if st > last_st[u]:
                    last_st[u] = st
    free: list = []  # [base, size, last reader's trace index, its stage], oldest first
    base_of = []
    w = start
    for si in range(n):
        size = sizes[si]
        base = None
        if size:
            for j in range(min(len(free), scan)):
                b, sz, li, ls = free[j]
                if sz >= size and si > li and stage[si] > ls:
                    base = b
                    if sz > size:  # the rest stays free, dead as long as the whole was
                        free[j] = [b + size, sz - size, li, ls]
                    else:
                        del free[j]
                    break
        if base is None:
            base = w
            w += size
        base_of.append(base)
        if size and last_i[si] < n:
            free.append([base, size, last_i[si], last_st[si]])
    return base_of, w


def check_unroll(value):
    """``unroll`` as True, False or "auto": also the command line's yes/no/auto (and
    true/false/on/off/1/0); anything else is an RbdgenError naming it."""
    if isinstance(value, str):
        table = {"yes": True, "true": True, "on": True, "1": True, "no": False, "false": False, "off": False,
                 "0": False, "auto": "auto"}
        v = table.get(value.strip().lower())
        if v is None:
            raise RbdgenError(f"unroll must be yes, no or auto, got {value!r}")
        return v
    if value is True or value is False:
        return value
    raise RbdgenError(f"unroll must be True, False or 'auto', got {value!r}")


def rolled_lowering(unroll, kernel: Kernel) -> bool:
    """Whether ``kernel`` is printed rolled for ``unroll`` (True: never; False: always; "auto":
    from :data:`AUTO_OPS` live operations on)."""
    if unroll == "auto":
        return sum(1 for n in kernel.live_nodes() if n.op not in ("const", "input")) >= AUTO_OPS
    return not unroll
