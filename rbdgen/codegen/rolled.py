"""The rolled lowering's C printer (issue 44): loops over bodies instead of straight-line code.

:func:`rbdgen.ir.roll.roll` groups a kernel's per-body blocks into kinds; this prints each kind
once, as a function (not inlined: g++'s time stays linear in the kinds) of the member's table
rows, the joint angles' sines and cosines first (four to a call where the dialect groups them),
and a driver that runs the kinds' members in the trace's order (runs of consecutive members of
one kind are one loop), then gathers the outputs from the workspace. The kernel keeps the unrolled kernel's signature
``(inputs, outputs, S* w)`` over the scalar type ``S``, so every template around it (one state,
the SIMD batch, the Python module) is the same; only the scratch grows (every value that
crosses a block lives in ``w``).

For a synthesis tool (``Dialect.rolled_static``, the HLS target) the same kinds take another
shape: each kind's tables inside its function, typed as the datapath (ROMs), the kind called with
its member's row index, and each run printed as a loop of its own with constant bounds; outputs
the dense products read are mirrored in ``w`` as they are gathered ("dot" epilogue: outputs are
write-only ports).
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import NamedTuple

from ..ir.graph import Kernel
from ..ir.ops import OPS
from ..gcpause import pausing
from ..ir.roll import Rolled, roll, run_independent
from .printer import Dialect, PrintedKernel, block_text, epilogue_lines, literal

#: values per line of a printed table
_PER_LINE = 8


class SharedKind(NamedTuple):
    """A kind's function as ``print_rolled(share=True)`` returns it (:attr:`PrintedKernel.kinds`)."""

    local: str    # its name in the kernel's tables and body ({kernel}_k{id})
    text: str     # its definition, ``@KIND@`` for its name: the same for every kernel that prints it alike
    ops: int      # its operations
    like: str     # the block it was printed for, for comments
    params: str   # its parameter list over ``S``, bare (for explicit instantiations)


def _table(ctype: str, name: str, rows: list, fmt, decl: str = "static const") -> list[str]:
    """``static const ctype name[len(rows)][len(rows[0])]``, a row per line (long rows wrapped)."""
    width = len(rows[0])
    lines = [f"{decl} {ctype} {name}[{len(rows)}][{width}] = {{"]
    for r in rows:
        cells = [fmt(x) for x in r]
        if width <= 2 * _PER_LINE:
            lines.append("  {" + ", ".join(cells) + "},")
        else:
            lines.append("  {")
            for i in range(0, width, _PER_LINE):
                lines.append("    " + ", ".join(cells[i:i + _PER_LINE]) + ",")
            lines.append("  },")
    lines.append("};")
    return lines


def _flat(ctype: str, name: str, vals: list, fmt, decl: str = "static const") -> list[str]:
    lines = [f"{decl} {ctype} {name}[{len(vals)}] = {{"]
    for i in range(0, len(vals), 2 * _PER_LINE):
        lines.append("  " + ", ".join(fmt(x) for x in vals[i:i + 2 * _PER_LINE]) + ",")
    lines.append("};")
    return lines


@pausing
def print_rolled(kernel: Kernel, dtype: str, dialect: Dialect, scalar: str = "S",
                 rolled: Rolled | None = None, table: str = "static const", share: bool = False) -> PrintedKernel:
    """Print ``kernel`` rolled: per-kind functions and tables (:attr:`PrintedKernel.tables`,
    namespace scope) and a body that runs them and gathers the outputs. ``table``: how a table
    is declared (the CUDA target names the memory space its device code reads it from).
    ``share``: each kind's function is left out of the tables, which only declare it, and
    returned in :attr:`PrintedKernel.kinds` instead, as a text that does not depend on the kernel
    (it takes the inputs it reads, by name): equal kinds of several kernels are then one
    function (:func:`rbdgen.targets.cpu.emit._shared_kinds`, the CPU target)."""
    R = rolled or roll(kernel)
    zero = dialect.zero.format(scalar=scalar)
    kn = kernel.name
    ins = [a.name for a in kernel.inputs]
    kinds: list = []
    tables = _kind_functions(kernel, R, dtype, dialect, scalar, table, kinds if share else None)
    # the driver: the runs in trace order
    call_in = ", ".join(ins)
    body = [f"{dialect.comment} ---- rolled: {len(R.segments)} blocks of {len(R.kinds)} kinds in {len(R.runs)} runs "
            f"({R.n_ops} ops printed for the {sum(len(s.nodes) for s in R.segments)} the unrolled kernel has)"]
    if not dialect.rolled_static:
        tables += _table("int", f"{kn}_runs", [list(r) for r in R.runs], str, table)
        tables.append("")
    if R.trig:
        names_ = sorted({a for a, _ in R.trig})
        body.append(f"{dialect.comment} ---- sine and cosine of the {len(R.trig)} joint angles, all first"
                    + (f", {dialect.sincos_group} to a call" if dialect.sincos and dialect.sincos_group > 1 else ""))
        for arr in names_:
            idx = [(j, i) for j, (a, i) in enumerate(R.trig) if a == arr]
            tables += _flat("int", f"{kn}_angle_{arr}", [i for _, i in idx], str, table)
            tables += _flat("int", f"{kn}_angle_{arr}_slot", [2 * j for j, _ in idx], str, table)
            n = len(idx)
            group = dialect.sincos_group if dialect.sincos and dialect.sincos_group > 1 else 1
            if group > 1 and n >= group:
                ang, sl = f"{kn}_angle_{arr}", f"{kn}_angle_{arr}_slot"
                xs = ", ".join(f"{arr}[{ang}[j + {g}]]" for g in range(group))
                outs = ", ".join(f"w[{sl}[j + {g}]], w[{sl}[j + {g}] + 1]" for g in range(group))
                body.append(f"for (int j = 0; j + {group} <= {n}; j += {group}) {dialect.sincos}{group}({xs}, {outs});")
            start = n - n % group if group > 1 and n >= group else 0
            if start < n:
                body.append(f"for (int j = {start}; j < {n}; ++j) {_trig_call(kn, arr, dialect)}")
    if dialect.rolled_static:
        # each run its own loop, bounds known to the tool (its trip count, its latency)
        for kid, lo, hi in R.runs:
            k = R.kinds[kid]
            first = R.segments[k.members[lo]].block
            free = hi - lo > 1 and run_independent(R, (kid, lo, hi))
            body.append(f"{dialect.comment} {block_text(first)}" + (f" … ({hi - lo} members" + (
                ", independent" if free else "") + ")" if hi - lo > 1 else ""))
            call = _kind_call(kn, k, scalar, call_in, str(lo) if hi - lo == 1 else "m", dialect=dialect)
            pragmas = dialect.rolled_run_pragma.splitlines() + (dialect.rolled_independent_pragma.splitlines()
                                                                 if free else [])
            if hi - lo == 1:
                body.append(call)
            elif pragmas:
                body += [f"for (int m = {lo}; m < {hi}; ++m) {{", *pragmas, f"  {call}", "}"]
            else:
                body.append(f"for (int m = {lo}; m < {hi}; ++m) {call}")
    else:
        body += [f"for (int r = 0; r < {len(R.runs)}; ++r) {{",
                 f"  const int lo = {kn}_runs[r][1], hi = {kn}_runs[r][2];",
                 f"  switch ({kn}_runs[r][0]) {{"]
        for k in R.kinds:
            kin = ", ".join(_kind_inputs(k)) if share else call_in
            body.append(f"    case {k.id}: for (int m = lo; m < hi; ++m) {_kind_call(kn, k, scalar, kin)} break;")
        body += ["  }", "}"]
    gtables, glines, temp_base, scratch, mirror_base = _gather(kernel, R, dtype, dialect, scalar, table)
    tables += gtables
    tables.append("")
    body += glines
    body += epilogue_lines(kernel, kernel.post, temp_base, mirror_base, dtype, dialect, scalar, zero)
    return PrintedKernel(
        name=kernel.name,
        doc=kernel.doc,
        inputs=kernel.inputs,
        outputs=kernel.all_outputs,
        parts=[],
        body=body,
        scratch=scratch,
        counts=kernel.op_counts(dense_epilogue=dialect.epilogue == "dot"),
        temp_base=temp_base,
        tables=tables,
        lowering="rolled",
        kinds=kinds,
    )


def _trig_call(kn: str, arr: str, dialect: Dialect, j: str = "j") -> str:
    """Sine and cosine of the j-th angle of ``arr`` into its two workspace slots."""
    ang, sl = f"{kn}_angle_{arr}", f"{kn}_angle_{arr}_slot"
    if dialect.sincos:
        return f"{dialect.sincos}({arr}[{ang}[{j}]], w[{sl}[{j}]], w[{sl}[{j}] + 1]);"
    return (f"{{ w[{sl}[{j}]] = {dialect.sin}({arr}[{ang}[{j}]]); "
            f"w[{sl}[{j}] + 1] = {dialect.cos}({arr}[{ang}[{j}]]); }}")


def _kind_call(kn: str, k, scalar: str, call_in: str, m: str = "m", suffix: str = "",
               dialect: Dialect | None = None) -> str:
    fn = f"{kn}_k{k.id}"
    if dialect is not None and dialect.rolled_static:  # the kind reads its own tables' row m
        return f"{fn}<{scalar}>({call_in}, w, {m}{dialect.extra_args});"
    cptr = f"{fn}_c[{m}]" if k.ctab and k.ctab[0] else "nullptr"
    return f"{fn}<{scalar}>({call_in + ', ' if call_in else ''}w, {cptr}, {fn}_x{suffix}[{m}]);"


def _kind_inputs(k) -> list:
    """The input arrays a shared kind's function takes: those it reads, by name."""
    return sorted(set(k.inputs))


def _kind_functions(kernel: Kernel, R: Rolled, dtype: str, dialect: Dialect, scalar: str, table: str,
                    shared: list | None = None) -> list[str]:
    """Each kind's tables and function (namespace scope). ``shared`` (a list): each function is
    appended there instead, as a :class:`SharedKind`, and the tables only declare it."""
    ctype = "float" if dtype == "float32" else "double"
    zero = dialect.zero.format(scalar=scalar)
    names = {"sin": dialect.sin, "cos": dialect.cos}
    lit = lambda x: literal(x, dtype, dialect)  # noqa: E731
    kn = kernel.name
    static = dialect.rolled_static
    in_params = ", ".join((f"const {scalar}* {a.name}" if static else
                           f"[[maybe_unused]] const {scalar}* __restrict {a.name}") for a in kernel.inputs)
    tables: list[str] = []
    members_of = {k.id: len(k.members) for k in R.kinds}
    # each kind a function of its own: g++'s time stays linear in the kinds (inlined into the
    # driver's switch, a 30-link chain's rnea, aba and rnea_scan took 4.1 s to build instead of
    # 2.6, and ran no faster)
    for k in R.kinds:
        fn = f"{kn}_k{k.id}"
        ncol = len(k.ctab[0]) if k.ctab else 0
        ctab = ([f"{dialect.comment} kind {k.id}'s constants that differ between its {members_of[k.id]} members, "
                 "a row per member"]
                + _table(scalar if static else ctype, "c_tab" if static else f"{fn}_c", k.ctab, lit, table)
                if ncol else [])
        xtab = [f"{dialect.comment} kind {k.id}'s integers, a row per member: its workspace base, then the input "
                "indices and the workspace slots it reads"]
        xtab += _table("int", "x_tab" if static else f"{fn}_x", k.itab, str, table)
        if not static:
            tables += ctab + xtab
        tables.append(f"{dialect.comment} kind {k.id} ({members_of[k.id]} member{'s' if members_of[k.id] > 1 else ''}"
                      f", {len(k.ops)} ops), like {block_text(k.block)}")
        if shared is not None:  # declared here, defined in shared (the kernel's tables go on after it)
            bare = [f"const S* {a}" for a in _kind_inputs(k)] + ["S* w", f"const {ctype}* c", "const int* x"]
            params = ", ".join([f"[[maybe_unused]] const S* __restrict {a}" for a in _kind_inputs(k)]
                               + ["S* __restrict w", f"[[maybe_unused]] const {ctype}* __restrict c",
                                  "const int* __restrict x"])
            tables += [f"template <typename S> __attribute__((visibility(\"hidden\"))) void {fn}({params});", ""]
            kept, tables = tables, ["template <typename S>",
                                    f"__attribute__((noinline, visibility(\"hidden\"))) void @KIND@({params}) {{"]
        elif static:
            tables.append("template <typename S>")
            tables.append(f"{dialect.rolled_qualifier} void {fn}({in_params}, S* w, const int m{dialect.extra_params}) {{")
            tables += [f"  {line}" for line in dialect.rolled_pragma.splitlines()]
            tables += [f"  {line}" for line in ctab + xtab]
        else:
            tables.append("template <typename S>")
            tables.append(f"{dialect.rolled_qualifier} void {fn}({in_params}, S* __restrict w, "
                          f"[[maybe_unused]] const {ctype}* __restrict c, const int* __restrict x) {{")
        cref, xref = ("c_tab[m][{}]", "x_tab[m][{}]") if static else ("c[{}]", "x[{}]")

        def ref(a):
            kind, j = a
            if kind == "l":
                return f"t{j}"
            if kind == "c":
                if j in k.const_lit:  # parameters traced unfolded: an operand of -x, of x - y
                    x = lit(k.const_lit[j])
                    return f"({x})" if x.startswith("-") else x
                return cref.format(k.const_col[j])
            if kind == "i":
                name = k.inputs[j]
                return f"{name}[{k.input_lit[j]}]" if j in k.input_lit else f"{name}[{xref.format(k.input_col[j])}]"
            return f"e{j}"

        # sine and cosine of one operand: one call where the dialect has one
        trig: dict = {}
        for p, (op, args) in enumerate(k.ops):
            if op in ("sin", "cos") and args[0][0] != "c":
                trig.setdefault((args[0], op), p)
        pair_first, pair_skip = {}, set()
        if dialect.sincos:
            for (arg, op), p in trig.items():
                other = trig.get((arg, "cos"))
                if op == "sin" and other is not None:
                    first, second = min(p, other), max(p, other)
                    pair_first[first] = (p, other)
                    pair_skip.add(second)
        # the values of earlier blocks, read once: w is also written here, so the compiler could
        # not keep a value read from it across a store
        for j in range(k.n_ext):
            tables.append(f"  const S e{j} = w[{xref.format(k.ext_col[j])}];")
        for p, (op, args) in enumerate(k.ops):
            if p in pair_first:
                sp, cp = pair_first[p]
                tables.append(f"  S t{sp}, t{cp};")
                tables.append(f"  {dialect.sincos}({ref(args[0])}, t{sp}, t{cp});")
            elif p not in pair_skip:
                spelling = dialect.op_spelling.get(op, OPS[op].spelling)
                e = spelling.format(*[ref(a) for a in args], **names)
                if all(a[0] == "c" for a in args):
                    e = f"{zero} + ({e})"
                tables.append(f"  const S t{p} = {e};")
            e = k.export_pos.get(p)
            if e is not None:
                tables.append(f"  w[{xref.format(0)} + {e}] = t{p};" if e else f"  w[{xref.format(0)}] = t{p};")
        tables.append("}")
        if shared is not None:
            shared.append(SharedKind(fn, "\n".join(tables), len(k.ops), f"{kn}'s {block_text(k.block)}",
                                     ", ".join(bare)))
            tables = kept
        else:
            tables.append("")
    return tables


def _gather(kernel: Kernel, R: Rolled, dtype: str, dialect: Dialect, scalar: str, table: str,
            lanes: tuple | None = None, suffix: str = ""):
    """(tables, lines, temp_base, scratch, mirror_base): the outputs and temps gathered from the
    workspace (the temps after the exports in ``w``; for the "dot" epilogue, the outputs its
    products read also copied to ``w + mirror_base[name]``, so no output is read back).
    ``lanes``: (this thread's lane, the number of lanes) as C expressions, to share the copies
    out over cooperating threads (element k on lane k mod lanes); the tables are the same either
    way. ``Dialect.rolled_static``: the literals' table is the kernel's own, typed ``S``."""
    ctype = "float" if dtype == "float32" else "double"
    zero = dialect.zero.format(scalar=scalar)
    lit = lambda x: literal(x, dtype, dialect)  # noqa: E731
    kn = kernel.name
    first, step = ("0", "++k") if lanes is None else (lanes[0], f"k += {lanes[1]}")

    def jloop(n: int) -> str:  # the same loop over a list of n elements, index j
        return f"for (int j = {first}; j < {n}; " + ("++j)" if lanes is None else f"j += {lanes[1]})")
    tables: list[str] = []
    body: list[str] = []
    temp_base: dict[str, int] = {}
    scratch = R.w_size
    for spec, _ in kernel.temps:
        temp_base[spec.name] = scratch
        scratch += spec.size
    mirror_base: dict[str, int] = {}
    if dialect.epilogue == "dot":
        sizes = {a.name: a.size for a in kernel.all_outputs}
        for mm in kernel.post:
            for name in (mm.a, mm.b):
                if name not in temp_base and name not in mirror_base:
                    mirror_base[name] = scratch
                    scratch += sizes[name]
    for (spec, _), g in zip(kernel.traced_arrays(), R.gather):
        dest = spec.name if spec.name not in temp_base else f"(w + {temp_base[spec.name]})"
        mb = mirror_base.get(spec.name)
        lits: list[float] = []
        codes: list[int] = []
        copies: list[str] = []
        copy_at: list[tuple] = []
        for idx, item in enumerate(g):
            if item[0] == "w":
                codes.append(item[1])
            elif item[0] == "c":
                codes.append(-1 - len(lits))
                lits.append(item[1])
            else:
                codes.append(-1 - len(lits))
                lits.append(0.0)
                src = f"{item[1]}[{item[2]}]"
                copies.append(f"{dest}[{idx}] = {src};" + (f" w[{mb + idx}] = {src};" if mb is not None else ""))
                copy_at.append((idx, copies[-1]))
        body.append(f"{dialect.comment} ---- {spec.name}: gathered from the workspace"
                    + (f" (and copied to w + {mb}, which the products read)" if mb is not None else ""))
        loop = f"for (int k = {first}; k < {len(codes)}; {step})"

        def store(value):
            if mb is None:
                return f"{dest}[k] = {value};"
            return f"{{ const {scalar} y = {value}; {dest}[k] = y; w[{mb} + k] = y; }}"

        contiguous = all(c >= 0 for c in codes) and codes == list(range(codes[0], codes[0] + len(codes)))
        if contiguous:
            body.append(f"{loop} {store(f'w[{codes[0]} + k]')}")
            continue
        frm, lt = f"{kn}_{spec.name}_from{suffix}", f"{kn}_{spec.name}_lit{suffix}"
        if not lits:
            tables += _flat("int", frm, codes, str, table)
            body.append(f"{loop} {store(f'w[{frm}[k]]')}")
        else:
            # the workspace's elements and the literals in two loops of their own, without a branch
            # per element between them: an output's constant entries (a branched robot's M is
            # mostly structural zeros) come in runs that a branch predictor misses at every edge
            # (docs/performance.md §45). The input copies' places are written by the copies.
            copied = {idx for idx, _ in copy_at}
            at_w = [(k, c) for k, c in enumerate(codes) if c >= 0]
            at_lit = [(k, lits[-1 - c]) for k, c in enumerate(codes) if c < 0 and k not in copied]
            to = f"{kn}_{spec.name}_to{suffix}"
            if at_w:
                tables += _flat("int", frm, [c for _, c in at_w], str, table)
                tables += _flat("int", to, [k for k, _ in at_w], str, table)
                body.append(f"{jloop(len(at_w))} {{ const int k = {to}[j]; {store(f'w[{frm}[j]]')} }}")
            if at_lit:
                lto = f"{kn}_{spec.name}_lit_to{suffix}"
                tables += _flat("int", lto, [k for k, _ in at_lit], str, table)
                values = [v for _, v in at_lit]
                head = f"{jloop(len(at_lit))} {{ const int k = {lto}[j];"
                if all(v == 0.0 and math.copysign(1.0, v) > 0 for v in values):
                    body.append(f"{head} {store(zero)} }}")
                elif dialect.rolled_static:  # a ROM of the datapath's format, in the kernel
                    body += _flat(scalar, lt, values, lit, table)
                    body.append(f"{head} {store(f'{lt}[j]')} }}")
                else:
                    tables += _flat(ctype, lt, values, lit, table)
                    body.append(f"{head} {store(f'{zero} + {lt}[j]')} }}")
        if lanes is not None:
            # element idx's copy by one lane (nothing else writes its place)
            copies = [f"if ({idx} % {lanes[1]} == {lanes[0]}) {c}" for idx, c in copy_at]
        body += copies
    return tables, body, temp_base, scratch, mirror_base



@dataclass
class RolledLanes:
    """A rolled kernel on cooperating lanes (the CUDA block shape): the segments in stages, each
    stage's members shared out over the lanes, a barrier between stages. ``tables``: the task
    tables and the stage function (after :func:`print_rolled`'s tables, whose kinds, angle and
    gather tables it uses); ``gather``: the outputs gathered from the workspace, element k on
    lane k mod lanes (a phase of its own, before the ``post`` products)."""

    stage_fn: str
    n_stages: int
    lanes: int
    width: int                # most members in one stage
    lane_loads: list          # per stage, the ops of each lane (the warp model's input)
    tables: list
    gather: list
    scratch: int
    temp_base: dict


@pausing
def print_rolled_lanes(kernel: Kernel, R: Rolled, dtype: str, dialect: Dialect, max_lanes: int,
                       scalar: str = "S", table: str = "static const", suffix: str = "") -> RolledLanes:
    """The stage function ``<kernel>_rs(st, lane, inputs…, outputs…, w)`` of the rolled kernel
    ``R`` for ``max_lanes`` cooperating lanes at most: stage ``st``'s members on lane ``lane``
    (longest kind first, each to the least loaded lane), the sines and cosines shared out in
    stage 0. Same kinds, same operations as :func:`print_rolled`'s serial driver, so the same
    bits. ``suffix``: ``R`` has a workspace layout of its own (:func:`rbdgen.ir.roll.relayout`,
    cooperative), whose integer and gather tables are printed here with this suffix; empty:
    the layout of the serial driver's tables, printed there."""
    kn = kernel.name
    stage = R.stage
    n_stages = max(stage, default=0) + 1
    by_stage: list[list[int]] = [[] for _ in range(n_stages)]
    for si, st in enumerate(stage):
        by_stage[st].append(si)
    width = max(len(b) for b in by_stage)
    lanes = max(1, min(max_lanes, width))
    cost = [len(R.kinds[R.seg_kind[si]].ops) for si in range(len(R.segments))]
    tasks: list[list[int]] = []
    at = [0]
    loads = []
    for st, segs in enumerate(by_stage):
        load = [0] * lanes
        mine: list[list[int]] = [[] for _ in range(lanes)]
        if st == 0 and R.trig:  # the sines and cosines first, spread over the lanes
            for j in range(len(R.trig)):
                load[j % lanes] += 2
        for si in sorted(segs, key=lambda si: (-cost[si], si)):
            lane = min(range(lanes), key=lambda x: (load[x], x))
            load[lane] += cost[si]
            mine[lane].append(si)
        for lane in range(lanes):
            for si in sorted(mine[lane]):  # trace order within a lane
                tasks.append([R.seg_kind[si], R.seg_row[si]])
            at.append(len(tasks))
        loads.append(load)
    fn = f"{kn}_rs"
    ins = [a.name for a in kernel.inputs]
    call_in = ", ".join(ins)
    sig = ", ".join([f"[[maybe_unused]] const {scalar}* __restrict {a.name}" for a in kernel.inputs]
                    + [f"[[maybe_unused]] {scalar}* __restrict {a.name}" for a in kernel.all_outputs])
    tables = []
    if suffix:
        tables.append(f"{dialect.comment} the kinds' integers in the block shape's workspace layout (each kind's "
                      f"{{base, input indices, slots}} rows as in _x)")
        for k in R.kinds:
            tables += _table("int", f"{kn}_k{k.id}_x{suffix}", k.itab, str, table)
    tables += [f"{dialect.comment} the block shape's tasks (kind, member), stage by stage and lane by lane: stage st's "
              f"on lane l are {fn}_task[{kn}_at[st * {lanes} + l]] up to {kn}_at[st * {lanes} + l + 1]"]
    tables += _table("int", f"{kn}_task", tasks or [[0, 0]], str, table)
    tables += _flat("int", f"{kn}_at", at, str, table)
    tables += [f"{dialect.comment} one stage of {kn} on one of {lanes} lanes: {n_stages} stages, a barrier after each; "
               f"up to {width} members of kinds in one stage",
               "template <typename S>",
               f"{dialect.rolled_qualifier} void {fn}(int st, int lane, {sig}, S* __restrict w) {{"]
    if R.trig:
        tables.append("  if (st == 0) {  // the joint angles' sines and cosines")
        for arr in sorted({a for a, _ in R.trig}):
            n = sum(1 for a, _ in R.trig if a == arr)
            tables.append(f"    for (int j = lane; j < {n}; j += {lanes}) {_trig_call(kn, arr, dialect)}")
        tables.append("  }")
    tables += [f"  const int lo = {kn}_at[st * {lanes} + lane], hi = {kn}_at[st * {lanes} + lane + 1];",
               "  for (int t = lo; t < hi; ++t) {",
               f"    const int m = {kn}_task[t][1];",
               f"    switch ({kn}_task[t][0]) {{"]
    used = sorted({t[0] for t in tasks})
    for kid in used:
        tables.append(f"      case {kid}: {_kind_call(kn, R.kinds[kid], scalar, call_in, suffix=suffix)} break;")
    tables += ["      default: break;", "    }", "  }", "}", ""]
    gtables, gather, temp_base, scratch, _ = _gather(kernel, R, dtype, dialect, scalar, table,
                                                     lanes=("lane", "LANES"), suffix=suffix)
    if suffix:
        tables = gtables + [""] + tables
    return RolledLanes(fn, n_stages, lanes, width, loads, tables, gather, scratch, temp_base)
