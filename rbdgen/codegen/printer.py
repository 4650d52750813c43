"""One expression printer for every target: kernel IR → C-family statements.

The printer schedules the live nodes of a kernel (creation order is topological), names
temporaries ``t0, t1, …`` in that order, writes each output as soon as its value exists, splits
very long kernels into parts (compilers slow down super-linearly on huge functions) that pass
values across parts through a workspace array ``w``, and emits a comment whenever the block
(phase, body, tree level) changes. What differs between targets — types, literals, math
functions, qualifiers — comes from a :class:`Dialect`; templates only place the result.
"""
from __future__ import annotations

import re

from dataclasses import dataclass, field, fields

from ..ir.graph import Block, Kernel, Node
from . import escape as esc
from ..ir.ops import OPS
from ..gcpause import pausing

#: statements per part when a kernel is split (keeps g++ -O3 near-linear in kernel size)
DEFAULT_PART_SIZE = 600
#: kernels up to this many statements stay one function: they compile in about a second, and
#: passing values between parts through memory would cost latency on the small, hot kernels
SPLIT_ABOVE = 1500


@dataclass(frozen=True)
class Dialect:
    name: str
    literal_suffix: dict = field(default_factory=lambda: {"float64": "", "float32": "f"})
    sin: str = "rbd_sin"
    cos: str = "rbd_cos"
    #: a function ``f(x, sin_out, cos_out)`` giving both with one range reduction; when set, a
    #: sine and a cosine of the same value in the same part are printed as one call
    sincos: str | None = None
    #: print every sine and cosine (and what they are computed from) first: they depend on the
    #: inputs only, so at the top of the kernel they run back to back and overlap, instead of
    #: sitting on the critical path one tree level after another
    hoist_trig: bool = False
    #: with ``hoist_trig``: the hoisted pairs printed ``sincos_group`` to a call of
    #: ``{sincos}{sincos_group}(x0, …, s0, c0, …)`` (the target's header decides how: the CPU
    #: packs one state's angles into one SIMD call of its vector core; docs/performance.md §14);
    #: a remainder of two or more is padded with the last angle again, a single one stays alone
    sincos_group: int = 0
    #: with ``sincos_group``: appended to the grouped call's name in kernels printed as one
    #: function (not split into parts), e.g. "_inline": the CPU header's variant that inlines
    #: the SIMD core (no call, results in registers; docs/performance.md §24)
    sincos_inline: str = ""
    #: spread the outputs that are constants or inputs (a derivative's structural zeros: 1 661
    #: of TALOS ∇ID's) over the kernel's sequential parts instead of appending them all to the
    #: last one, which they made three times the size of the others and three times as long to
    #: compile (docs/performance.md §11)
    spread_constants: bool = False
    #: constant outputs at consecutive places of one array, this many or more, are stored by a
    #: loop over a static table instead of one statement each (0: never). At -O3 the compiler
    #: turns the loop into vector stores: a 4×4 placement's last row [0 0 0 1], a mass matrix's
    #: zero blocks (iiwa14's forward kinematics: 72 → 64 ns for one state; docs/performance.md
    #: §20). At -Os it does not, and the loop is slower than the stores (TALOS `crba` +9 %)
    const_runs: int = 0
    #: with ``const_runs``: not in kernels of this many statements or more (0: no limit), the
    #: ones the CPU target compiles at -Os (rbdgen.targets.cpu.LARGE_STATEMENTS)
    const_runs_below: int = 0
    qualifier: str = "static inline"
    part_qualifier: str = "static __attribute__((noinline))"
    #: the rolled lowering's per-kind functions (templates over the scalar type): out of line, so
    #: that the compiler's time stays linear in the kinds (rbdgen.codegen.rolled)
    rolled_qualifier: str = "static __attribute__((noinline))"
    #: the rolled lowering's shape for a synthesis tool (HLS): each kind's tables inside its
    #: function, typed ``S`` (ROMs of the datapath's format), the kind called with its member's
    #: row index; each run of members printed as its own loop with constant bounds (no run
    #: table, no switch); ``rolled_pragma`` at the top of each kind's function
    rolled_static: bool = False
    rolled_pragma: str = ""
    #: with ``rolled_static``: lines in each run's loop, and those added where the run's members
    #: are independent (:func:`rbdgen.ir.roll.run_independent`), e.g. a PIPELINE and a
    #: DEPENDENCE pragma (HLS --ii)
    rolled_run_pragma: str = ""
    rolled_independent_pragma: str = ""
    #: parameters matching ``extra_args`` in the functions the printers declare (", bool& dz")
    extra_params: str = ""
    comment: str = "//"
    #: how a literal is written around its digits: "{}" (C literals, the default) or e.g.
    #: "S({})" where the scalar type has no arithmetic with double (HLS ap_fixed)
    literal_wrap: str = "{}"
    #: a zero of the scalar type (``{scalar}`` is its name): value-initialisation by default;
    #: HLS needs ``S(0.0)`` because ap_fixed's default constructor leaves the value undefined
    zero: str = "{scalar}{{}}"
    #: spellings that replace the op table's for this target (op name → spelling, same fields)
    op_spelling: dict = field(default_factory=dict)
    #: text appended to the arguments of every call of a kernel part (e.g. ", dz": a flag the
    #: target's operators write); the target's template declares the matching parameter
    extra_args: str = ""
    #: the ``post`` products: "rows" (an output row accumulated in place over the nonzero spans
    #: of B only; the inner loops are contiguous, so they vectorise) or "dot" (printed dense:
    #: each element summed over all k terms in a local accumulator and written once; what the
    #: products read is mirrored into the workspace ``w`` first, so no output is ever read back:
    #: HLS, where outputs are write-only ports and a pipelined element loop wants the same work
    #: for every element). Op counts follow: ``Kernel.op_counts(dense_epilogue=…)``.
    #: "tiles" (CPU): "rows" summed in register tiles by the template's ``rbd_product_cols``,
    #: over blocks of :data:`TILE_COLUMNS` columns and the rows of B with nonzeros in each block
    #: (:func:`_tiles_epilogue`)
    epilogue: str = "rows"
    #: pragmas of the "dot" epilogue: in its element loop (e.g. HLS PIPELINE) and in its inner
    #: product loop (e.g. HLS UNROLL)
    epilogue_pragma: str = ""
    #: lines at the top of the "dot" epilogue's row loop (e.g. a PIPELINE there when the
    #: element loop is unrolled entirely)
    epilogue_row_pragma: str = ""
    epilogue_inner_pragma: str = ""
    #: pragma before each inner (column span) loop of the "rows" epilogue, e.g. CUDA's
    #: ``#pragma unroll 1``
    epilogue_span_pragma: str = ""
    #: values passed between parts share workspace slots once dead (interval colouring of their
    #: live ranges): the workspace holds the most values live at once, not every value that
    #: crosses a part boundary. Off for HLS, where a shared slot would be a false dependency
    #: between operations the tool could otherwise schedule side by side.
    reuse_workspace: bool = True


def literal(x: float, dtype: str, dialect: Dialect) -> str:
    s = repr(float(x))
    if "e" not in s and "." not in s:
        s += ".0"
    return dialect.literal_wrap.format(s + dialect.literal_suffix[dtype])


_SLOT = re.compile(r"^(\w+)\[(\d+)\]$")


def _const_runs(chunk, min_run: int):
    """``chunk``'s (slot, node) stores in order, as one-element lists ``[(slot, node)]``, except
    that ``min_run`` or more constants at consecutive indices of one array (``M[3]``, ``M[4]``, …)
    become one ``(array, first index, values)`` (with ``min_run`` 0: never)."""
    out, i = [], 0
    while i < len(chunk):
        slot, n = chunk[i]
        m = _SLOT.match(slot) if min_run and n.op == "const" else None
        j = i + 1
        if m:
            arr, first = m.group(1), int(m.group(2))
            while j < len(chunk) and chunk[j][1].op == "const" and _SLOT.match(chunk[j][0]) \
                    and _SLOT.match(chunk[j][0]).groups() == (arr, str(first + j - i)):
                j += 1
        if m and j - i >= min_run:
            out.append((arr, first, [c[1].value for c in chunk[i:j]]))
        else:
            out += [[c] for c in chunk[i:j]]
        i = j
    return out


@dataclass
class PrintedPart:
    name: str
    lines: list[str]


@dataclass
class PrintedKernel:
    """A kernel ready for a template: ``body`` is the kernel function's statements; when the
    kernel is split, ``parts`` are helper functions that ``body`` calls in order. All of them
    take (inputs, outputs[, w]) where ``w`` is scratch of ``scratch`` scalars."""

    name: str
    doc: str
    inputs: list   # Array
    outputs: list  # Array, signature order
    parts: list[PrintedPart]
    body: list[str]
    scratch: int
    counts: dict
    temp_base: dict = field(default_factory=dict)  # temp array name → its offset in w
    #: lines at namespace scope before the kernel (the rolled lowering's per-body tables)
    tables: list = field(default_factory=list)
    #: "unrolled" (straight-line, :func:`print_kernel`) or "rolled" (:mod:`rbdgen.codegen.rolled`)
    lowering: str = "unrolled"
    #: rolled and shared (``print_rolled(share=True)``): the kinds' functions, which ``tables``
    #: only declare (:class:`rbdgen.codegen.rolled.SharedKind`)
    kinds: list = field(default_factory=list)

    @property
    def n_statements(self) -> int:
        return sum(len(p.lines) for p in self.parts) + len(self.body)


def block_text(b: Block) -> str:
    """What a comment says of a block; the label holds link and joint names from the URDF, so it
    goes through :func:`rbdgen.codegen.escape.comment` (the phase is rbdgen's own constant text)."""
    if b.body is None:
        return b.phase
    return f"{b.phase}: body {b.body} {esc.comment(b.label)}, tree level {b.level}"


def _block_comment(b: Block, dialect: Dialect) -> str:
    """The comment naming a block (:func:`block_text`)."""
    return f"{dialect.comment} ---- {block_text(b)}"


def _share_slots(crossing: list, defined: dict, last_use: dict) -> dict:
    """Workspace slot of each value in ``crossing`` (ids in creation order): a value is live
    from ``defined[id]`` to ``last_use[id]`` (times in execution order) and may take the slot of
    one whose last read came strictly before its definition. Greedy in order of definition,
    smallest free slot first: optimal for intervals (as many slots as values live at once)."""
    import heapq

    slot: dict[int, int] = {}
    active: list[tuple[int, int]] = []  # (last use, slot)
    free: list[int] = []
    n_slots = 0
    for v in sorted(crossing, key=lambda v: (defined[v], v)):
        while active and active[0][0] < defined[v]:
            heapq.heappush(free, heapq.heappop(active)[1])
        if free:
            s = heapq.heappop(free)
        else:
            s, n_slots = n_slots, n_slots + 1
        slot[v] = s
        heapq.heappush(active, (last_use[v], s))
    return slot


@pausing
def print_kernel(kernel: Kernel, dtype: str, dialect: Dialect, part_size: int = DEFAULT_PART_SIZE,
                 scalar: str = "S", partition: dict | None = None, epilogue: bool = True,
                 part_stage: list | None = None, split_above: int = SPLIT_ABOVE) -> PrintedKernel:
    """Print ``kernel``. By default kernels of more than ``split_above`` statements are cut
    into sequential parts of ``part_size`` statements. ``partition`` (node id → part index,
    every index used) instead assigns each statement to a part chosen by the caller, e.g. the
    (stage, thread) pieces of a :func:`~rbdgen.ir.schedule.level_schedule`; either way a value used by another part than
    its own passes through ``w``. ``epilogue=False`` leaves the ``post`` products to the
    caller (a backend that runs them on several threads). ``part_stage[p]`` is the step at
    which part ``p`` of a ``partition`` runs (parts of one step may run at once, steps one after
    another): with it, dead workspace slots are reused as in the sequential case."""
    live = kernel.live_nodes()
    ops = [n for n in live if n.op not in ("const", "input")]
    hoisted: set[int] = set()
    if dialect.hoist_trig and partition is None:
        stack = [n for n in ops if n.op in ("sin", "cos")]
        while stack:
            n = stack.pop()
            if n.id not in hoisted and n.op not in ("const", "input"):
                hoisted.add(n.id)
                stack.extend(n.args)
        # both halves keep creation order and the hoisted set holds its own arguments: still
        # a topological order
        ops = [n for n in ops if n.id in hoisted] + [n for n in ops if n.id not in hoisted]
    # partition statements; part index of each op node
    if partition is not None:
        part_of = {n.id: partition[n.id] for n in ops}
        nparts = max(part_of.values(), default=0) + 1
    else:
        nparts = 1 if len(ops) <= max(split_above, part_size) else -(-len(ops) // part_size)
        part_of = {n.id: min(idx // part_size, nparts - 1) for idx, n in enumerate(ops)}
    names = {n.id: f"t{idx}" for idx, n in enumerate(ops)}
    # values used in a later part than their definition go to the workspace
    ws_slot: dict[int, int] = {}
    if nparts > 1:
        for n in ops:
            for a in n.args:
                if a.id in part_of and part_of[a.id] != part_of[n.id] and a.id not in ws_slot:
                    ws_slot[a.id] = len(ws_slot)
    if ws_slot and dialect.reuse_workspace and (partition is None or part_stage is not None):
        # execution time of each statement: its place in the printed order (parts run one after
        # another), or the step of its part
        when = ({n.id: i for i, n in enumerate(ops)} if partition is None
                else {n.id: part_stage[part_of[n.id]] for n in ops})
        last: dict[int, int] = {}
        for n in ops:
            for a in n.args:
                if a.id in ws_slot:
                    last[a.id] = max(last.get(a.id, -1), when[n.id])
        ws_slot = _share_slots(list(ws_slot), when, last)
    # temps (arrays read by the epilogue only) live in the scratch array after the workspace
    temp_base: dict[str, int] = {}
    scratch = max(ws_slot.values(), default=-1) + 1
    for spec, _ in kernel.temps:
        temp_base[spec.name] = scratch
        scratch += spec.size
    post = kernel.post if epilogue else ()
    # "dot" epilogue: the output arrays the products read are mirrored in the scratch array
    mirror_base: dict[str, int] = {}
    if dialect.epilogue == "dot":
        sizes = {a.name: a.size for a in kernel.all_outputs}
        for mm in post:
            for name in (mm.a, mm.b):
                if name not in temp_base and name not in mirror_base:
                    mirror_base[name] = scratch
                    scratch += sizes[name]
    # where each traced value is stored: output array or temp slot
    out_slots: dict[int, list[str]] = {}
    late_outputs: list[tuple[str, Node]] = []
    for spec, vals in kernel.traced_arrays():
        base = temp_base.get(spec.name)
        mirror = mirror_base.get(spec.name)
        for k, v in enumerate(vals):
            n = v.node
            slots = [f"{spec.name}[{k}]" if base is None else f"w[{base + k}]"]
            if mirror is not None:
                slots.append(f"w[{mirror + k}]")
            for slot in slots:
                if n.op in ("const", "input"):
                    late_outputs.append((slot, n))
                else:
                    out_slots.setdefault(n.id, []).append(slot)

    zero = dialect.zero.format(scalar=scalar)
    # names an op's spelling may use besides its operands: the target's functions ({sin}, …)
    dialect_names = {f.name: getattr(dialect, f.name) for f in fields(dialect)}

    def ref(a: Node, cur_part: int) -> str:
        if a.op == "const":
            return literal(a.value, dtype, dialect)
        if a.op == "input":
            return f"{a.name}[{a.index}]"
        if a.id in ws_slot and part_of[a.id] != cur_part:
            return f"w[{ws_slot[a.id]}]"
        return names[a.id]

    # sin and cos of one value, printed as one call where the dialect has one: the pair is
    # declared where the first of the two would be, the second's own statement is left out
    pair_at: dict[int, tuple[Node, Node]] = {}
    declared_early: set[int] = set()
    if dialect.sincos:
        trig: dict[tuple[int, str], Node] = {}
        for n in ops:
            if n.op in ("sin", "cos") and n.args[0].op != "const":
                trig.setdefault((n.args[0].id, n.op), n)
        for (arg, op), n in trig.items():
            other = trig.get((arg, "cos"))
            if op == "sin" and other is not None and part_of[n.id] == part_of[other.id]:
                first, second = (n, other) if n.id < other.id else (other, n)
                pair_at[first.id] = (n, other)
                declared_early.add(second.id)

    parts = [PrintedPart(f"{kernel.name}_part{p}", []) for p in range(nparts)]
    last_block: list = [None] * nparts
    group = dialect.sincos_group if dialect.sincos and hoisted else 0
    inline = dialect.sincos_inline if nparts == 1 and partition is None else ""
    # grouped hoisted pairs, per part: (angle, sin name, cos name), and the stores of their results
    pend_pairs: dict[int, list] = {}
    pend_stores: dict[int, list] = {}

    def flush(p):
        """The part's pending pairs as grouped calls, then the stores of their results."""
        pairs, lines = pend_pairs.pop(p, []), parts[p].lines
        for i in range(0, len(pairs), group):
            g = pairs[i:i + group]
            lines.append(f"{scalar} " + ", ".join(f"{s_}, {c_}" for _, s_, c_ in g) + ";")
            if len(g) == 1:
                lines.append(f"{dialect.sincos}({g[0][0]}, {g[0][1]}, {g[0][2]});")
                continue
            g = g + [g[-1]] * (group - len(g))  # padded: the last angle again, the same outputs
            lines.append(f"{dialect.sincos}{group}{inline}(" + ", ".join(x for x, _, _ in g) + ", "
                         + ", ".join(f"{s_}, {c_}" for _, s_, c_ in g) + ");")
        lines.extend(pend_stores.pop(p, []))

    for n in ops:
        p = part_of[n.id]
        lines = parts[p].lines
        block = "trig" if n.id in hoisted else n.block
        if block != last_block[p]:
            if p in pend_pairs:
                flush(p)
            lines.append(f"{dialect.comment} ---- sine and cosine of the joint angles, all first: independent of each "
                         "other, they overlap" + (f" ({group} to a call)" if group else "")
                         if block == "trig" else _block_comment(n.block, dialect))
            last_block[p] = block
        grouped = group and n.id in hoisted and (n.id in pair_at or n.id in declared_early)
        if grouped:
            # a hoisted pair's call waits for the end of the block; so do the stores of its results
            lines = pend_stores.setdefault(p, [])
        if n.id in pair_at:
            sn, cn = pair_at[n.id]
            if grouped:
                pend_pairs.setdefault(p, []).append((ref(n.args[0], p), names[sn.id], names[cn.id]))
            else:
                lines.append(f"{scalar} {names[sn.id]}, {names[cn.id]};")
                lines.append(f"{dialect.sincos}({ref(n.args[0], p)}, {names[sn.id]}, {names[cn.id]});")
        elif n.id not in declared_early:
            spelling = dialect.op_spelling.get(n.op, OPS[n.op].spelling)
            e = spelling.format(*[ref(x, p) for x in n.args], **dialect_names)
            if all(x.op == "const" for x in n.args):  # only in unfolded (dense) graphs
                e = f"{zero} + ({e})"
            lines.append(f"const {scalar} {names[n.id]} = {e};")
        if n.id in ws_slot:
            lines.append(f"w[{ws_slot[n.id]}] = {names[n.id]};")
        for slot in out_slots.get(n.id, ()):
            lines.append(f"{slot} = {names[n.id]};")
    for p in list(pend_pairs):
        flush(p)
    if late_outputs:
        # they depend on nothing: with sequential parts, any part may store them
        spread = nparts if dialect.spread_constants and partition is None else 1
        per = -(-len(late_outputs) // spread)
        # the statements this kernel has with one per constant output: at or above
        # const_runs_below it is compiled for size, where runs would be loops (see Dialect)
        n_plain = sum(len(pp.lines) for pp in parts) + len(late_outputs)
        runs = dialect.const_runs if not dialect.const_runs_below or n_plain < dialect.const_runs_below else 0
        for p in range(spread):
            chunk = late_outputs[p * per:(p + 1) * per]
            if not chunk:
                continue
            lines = parts[nparts - spread + p].lines
            lines.append(f"{dialect.comment} ---- outputs that are constants or inputs"
                         + (f" ({p + 1} of {spread})" if spread > 1 else ""))
            for run in _const_runs(chunk, runs):
                if len(run) > 1:  # (array, first index, values)
                    arr, first, vals = run
                    ctype = "float" if dtype == "float32" else "double"
                    table = ", ".join(literal(v, dtype, dialect) for v in vals)
                    lines.append(f"{{ static const {ctype} c[{len(vals)}] = {{{table}}}; "
                                 f"for (int k = 0; k < {len(vals)}; ++k) {arr}[{first} + k] = {zero} + c[k]; }}")
                    continue
                slot, n = run[0]
                if n.op == "const":
                    lines.append(f"{slot} = {zero} + {literal(n.value, dtype, dialect)};")
                else:
                    lines.append(f"{slot} = {n.name}[{n.index}];")
    epilogue = epilogue_lines(kernel, post, temp_base, mirror_base, dtype, dialect, scalar, zero)
    if nparts == 1 and partition is None:
        body, parts = parts[0].lines + epilogue, []
    else:
        args = ", ".join([a.name for a in kernel.inputs] + [a.name for a in kernel.all_outputs])
        body = [f"{p.name}<{scalar}>({args}, w{dialect.extra_args});" for p in parts] + epilogue
    return PrintedKernel(
        name=kernel.name,
        doc=kernel.doc,
        inputs=kernel.inputs,
        outputs=kernel.all_outputs,
        parts=parts,
        body=body,
        scratch=scratch,
        counts=kernel.op_counts(dense_epilogue=dialect.epilogue == "dot"),
        temp_base=temp_base,
    )


def epilogue_lines(kernel: Kernel, post, temp_base: dict, mirror_base: dict, dtype: str, dialect: Dialect,
                   scalar: str, zero: str) -> list[str]:
    """The statements of the ``post`` products, which read the kernel's outputs, its temps (at
    ``w + temp_base[name]``) and, for the "dot" epilogue, the mirrored outputs
    (``w + mirror_base[name]``); shared by :func:`print_kernel` and the rolled printer
    (:mod:`rbdgen.codegen.rolled`)."""
    arrays = {a.name: a.name for a in kernel.all_outputs}
    arrays.update({name: f"(w + {base})" for name, base in temp_base.items()})
    arrays.update({name: f"(w + {base})" for name, base in mirror_base.items()})
    epilogue = []
    for mm in post:
        A, B = arrays[mm.a], arrays[mm.b]
        neg = mm.scale == -1.0
        acc_op = "-=" if neg else "+="
        what = f"{mm.out} = {'−' if neg else ''}{mm.a} · {mm.b}"
        if dialect.epilogue == "dot":
            # the same sums in the same order as "rows" (0, then ∓ each product in l order): the
            # same bits, but every output element is written once and nothing is read back
            scaled = "acc" if mm.scale in (1.0, -1.0) else f"{literal(mm.scale, dtype, dialect)} * acc"
            stores = [f"    {mm.out}[i * {mm.m} + j] = {scaled};"]
            if mm.out in mirror_base:  # a later product reads this one
                stores.append(f"    w[{mirror_base[mm.out]} + i * {mm.m} + j] = {scaled};")
            epilogue += [
                f"{dialect.comment} ---- {what} (dense, {mm.b}'s structural zeros included: every element takes "
                f"the same {mm.k} products; each summed in a local accumulator and written once)",
                f"for (int i = 0; i < {mm.n}; ++i) {{",
                *dialect.epilogue_row_pragma.splitlines(),
                f"  for (int j = 0; j < {mm.m}; ++j) {{",
                *dialect.epilogue_pragma.splitlines(),
                f"    {scalar} acc = {zero};",
                f"    for (int l = 0; l < {mm.k}; ++l) {{",
                *filter(None, [dialect.epilogue_inner_pragma]),
                f"      acc {acc_op} {A}[i * {mm.k} + l] * {B}[l * {mm.m} + j];",
                "    }",
                *stores,
                "  }",
                "}",
            ]
            continue
        if tiled(mm, dtype, dialect):
            # one state (S = double) in register tiles; the batch path's vectors of states keep
            # "rows" (each element already a SIMD vector; tiled, they measured 10–25% slower)
            rows = _rows_epilogue(mm, A, B, acc_op, what, dtype, dialect, scalar, zero)
            epilogue += [f"{dialect.comment} ---- {what}: one state in register tiles, the batch path's vectors of "
                         f"states row by row",
                         f"if constexpr (std::is_same<{scalar}, double>::value) {{",
                         *("  " + x for x in _tiles_epilogue(mm, A, B, what, dtype, dialect, zero)),
                         "} else {", *("  " + x for x in rows), "}"]
        else:
            epilogue += _rows_epilogue(mm, A, B, acc_op, what, dtype, dialect, scalar, zero)
    return epilogue


def _sparsity_note(mm) -> str:
    """What a comment says of the product's B: dense, or how much of it its spans skip."""
    if mm.b_spans is None:
        return f"{mm.b} has no structural zeros"
    total = mm.k * mm.m
    return (f"skips the structural zeros of {mm.b}: {mm.terms} of its {total} entries can be nonzero "
            f"({mm.n * mm.terms} multiply-adds instead of {mm.n * total})")


def _rows_epilogue(mm, A: str, B: str, acc_op: str, what: str, dtype: str, dialect: Dialect, scalar: str,
                   zero: str) -> list[str]:
    """The "rows" form of one product: each output row zeroed, then ``±= A[i][l] · B[l][j]``
    for the rows l of B that hold nonzeros, over their nonzero column spans only (consecutive
    rows with the same spans share one loop over l); inner loops contiguous, so they vectorise.
    Each output element still sums its terms in increasing l, as the dense loop does."""
    lines = [
        f"{dialect.comment} ---- {what} (looped, inner loops contiguous so they vectorise; "
        f"{_sparsity_note(mm)})",
        f"for (int i = 0; i < {mm.n}; ++i) {{",
        f"  {scalar}* __restrict o = {mm.out} + i * {mm.m};",
        f"  for (int j = 0; j < {mm.m}; ++j) o[j] = {zero};",
    ]
    for first, end, spans in mm.row_groups():
        if mm.b_spans is not None:
            cols = ", ".join(f"[{lo}, {hi})" for lo, hi in spans)
            which = f"row {first}" if end == first + 1 else f"rows {first}..{end - 1}"
            lines.append(f"  {dialect.comment} {which} of {mm.b}: nonzero in columns {cols}")
        lines += [
            f"  for (int l = {first}; l < {end}; ++l) {{",
            f"    const {scalar} s = {A}[i * {mm.k} + l];",
        ]
        for lo, hi in spans:
            lines += [f"    {p}" for p in dialect.epilogue_span_pragma.splitlines()]
            lines.append(f"    for (int j = {lo}; j < {hi}; ++j) o[j] {acc_op} s * {B}[l * {mm.m} + j];")
        lines.append("  }")
    if mm.scale not in (1.0, -1.0):
        lines.append(f"  for (int j = 0; j < {mm.m}; ++j) o[j] = {literal(mm.scale, dtype, dialect)} * o[j];")
    lines.append("}")
    return lines


#: the "tiles" epilogue's column blocks: the rows of B a block reads are the union over its columns
#: (a 16-column block is one tile row of two AVX-512 vectors, two of AVX2's, four of SSE2's)
TILE_COLUMNS = 16
#: products with fewer output rows or columns than this stay "rows": the iiwa's 7 × 7 ∇FD products
#: measured 19% slower tiled (the whole kernel: 0.99 → 1.17 µs), the quadruped's 18 × 18 21%
#: faster and TALOS's 38 × 38 25% faster (docs/performance.md §16)
TILE_MIN = 12


def tiled(mm, dtype: str, dialect: Dialect) -> bool:
    """Whether ``mm`` is printed in register tiles (for one state: the template's
    ``rbd_product_cols``, which is for doubles)."""
    return dialect.epilogue == "tiles" and dtype == "float64" and min(mm.n, mm.m) >= TILE_MIN


def _tiles_epilogue(mm, A: str, B: str, what: str, dtype: str, dialect: Dialect, zero: str) -> list[str]:
    """The "tiles" form of one product: per block of :data:`TILE_COLUMNS` output columns, one
    call of the CPU template's ``rbd_product_cols`` with the runs of rows of B that hold a
    nonzero in those columns. It reads those rows over the whole block, structural zeros
    included (stored zeros: a multiply-add of zero leaves a sum's bits unchanged), so it does
    more multiply-adds than the op count's (which stays the pruned one; the comment gives both),
    each on registers. Every element sums its terms in increasing l from zero, as "rows" does."""
    neg = mm.scale == -1.0
    scaled = mm.scale not in (1.0, -1.0)
    blocks, done = [], 0
    for j0 in range(0, mm.m, TILE_COLUMNS):
        j1 = min(j0 + TILE_COLUMNS, mm.m)
        runs: list[list[int]] = []
        for r in range(mm.k):
            if any(lo < j1 and hi > j0 for lo, hi in mm.row_spans(r)):
                if runs and runs[-1][1] == r:
                    runs[-1][1] = r + 1
                else:
                    runs.append([r, r + 1])
        blocks.append((j0, j1, runs))
        done += mm.n * (j1 - j0) * sum(b - a for a, b in runs)
    lines = [f"{dialect.comment} ---- {what} (register tiles, {TILE_COLUMNS} columns a block; "
             f"{_sparsity_note(mm)}; the tiles do {done} multiply-adds, zeros inside them included)",
             "{"]
    for j0, j1, runs in blocks:
        held = ", ".join(f"[{a}, {b})" for a, b in runs)
        if not runs:
            # no term: the block's outputs are zero
            lines += [f"  {dialect.comment} columns [{j0}, {j1}): zero in every row of {mm.b}",
                      f"  for (int i = 0; i < {mm.n}; ++i)",
                      f"    for (int j = {j0}; j < {j1}; ++j) {mm.out}[i * {mm.m} + j] = {zero};"]
            continue
        flat = ", ".join(str(x) for a, b in runs for x in (a, b))
        tmpl = f"{mm.n}, {mm.k}, {mm.m}, {j0}, {j1 - j0}, {'true' if neg else 'false'}"
        tail = ""
        if scaled:
            tmpl += ", true"
            tail = f", {literal(mm.scale, dtype, dialect)}"
        lines += [f"  {dialect.comment} columns [{j0}, {j1}): rows {held} of {mm.b}",
                  f"  {{ static const short runs[] = {{{flat}}};",
                  f"    rbd_product_cols<{tmpl}>({A}, {B}, {mm.out}, runs, {len(runs)}{tail}); }}"]
    lines.append("}")
    return lines


def print_epilogue_shared(kernel: Kernel, printed: PrintedKernel, dtype: str, dialect: Dialect,
                          lane: str, nlanes: str, scalar: str = "S") -> list[list[str]]:
    """The ``post`` products shared out over ``nlanes`` cooperating threads (``lane`` is this
    thread's index): one element of the product per thread at a time, summed over the rows of B
    that hold nonzeros in its column. Columns with the same nonzero rows are one loop (their
    elements take the same work, so the lanes stay in step); a product whose B is dense is one
    loop over all its elements. One list of lines per product; the caller puts a barrier between
    them (a product may read an earlier one)."""
    arrays = {a.name: a.name for a in kernel.all_outputs}
    arrays.update({name: f"(w + {base})" for name, base in printed.temp_base.items()})
    out = []
    for mm in kernel.post:
        A, B = arrays[mm.a], arrays[mm.b]
        neg = mm.scale == -1.0
        acc_op = "-=" if neg else "+="
        scaled = "acc" if mm.scale in (1.0, -1.0) else f"{literal(mm.scale, dtype, dialect)} * acc"
        lines = [f"{dialect.comment} ---- {mm.out} = {'−' if neg else ''}{mm.a} · {mm.b}, one element per thread "
                 f"({_sparsity_note(mm)})"]
        for j0, j1, rows in mm.column_groups():
            w = j1 - j0
            if mm.b_spans is not None:
                which = f"column {j0}" if w == 1 else f"columns {j0}..{j1 - 1}"
                held = ", ".join(f"[{lo}, {hi})" for lo, hi in rows)
                lines.append(f"{dialect.comment} {which} of {mm.b}: " + (f"nonzero in rows {held}" if rows else
                                                                         "zero in every row, so are these outputs"))
            ij = (f"i = e, j = {j0}" if w == 1 else f"i = e / {w}, j = {f'{j0} + ' if j0 else ''}e % {w}")
            lines += [
                f"for (int e = {lane}; e < {mm.n * w}; e += {nlanes}) {{",
                f"  const int {ij};",
                f"  {scalar} acc = {scalar}{{}};",
                *(f"  for (int l = {lo}; l < {hi}; ++l) acc {acc_op} {A}[i * {mm.k} + l] * {B}[l * {mm.m} + j];"
                  for lo, hi in rows),
                f"  {mm.out}[i * {mm.m} + j] = {scaled};",
                "}",
            ]
        out.append(lines)
    return out
