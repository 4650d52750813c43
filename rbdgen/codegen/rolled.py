"""The rolled lowering's C printer (issue 44): loops over bodies instead of straight-line code.

:func:`rbdgen.ir.roll.roll` groups a kernel's per-body blocks into kinds; this prints each kind
once, as a function (not inlined: g++'s time stays linear in the kinds) of the member's table
rows, the joint angles' sines and cosines first (four to a call where the dialect groups them),
and a driver that runs the kinds' members in the trace's order (runs of consecutive members of
one kind are one loop), then gathers the outputs from the workspace. The kernel keeps the unrolled kernel's signature
``(inputs, outputs, S* w)`` over the scalar type ``S``, so every template around it (one state,
the SIMD batch, the Python module) is the same; only the scratch grows (every value that
crosses a block lives in ``w``).
"""
from __future__ import annotations

from ..ir.graph import Kernel
from ..ir.ops import OPS
from ..ir.roll import Rolled, roll
from .printer import Dialect, PrintedKernel, block_text, epilogue_lines, literal

#: values per line of a printed table
_PER_LINE = 8


def _table(ctype: str, name: str, rows: list, fmt) -> list[str]:
    """``static const ctype name[len(rows)][len(rows[0])]``, a row per line (long rows wrapped)."""
    width = len(rows[0])
    lines = [f"static const {ctype} {name}[{len(rows)}][{width}] = {{"]
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


def _flat(ctype: str, name: str, vals: list, fmt) -> list[str]:
    lines = [f"static const {ctype} {name}[{len(vals)}] = {{"]
    for i in range(0, len(vals), 2 * _PER_LINE):
        lines.append("  " + ", ".join(fmt(x) for x in vals[i:i + 2 * _PER_LINE]) + ",")
    lines.append("};")
    return lines


def print_rolled(kernel: Kernel, dtype: str, dialect: Dialect, scalar: str = "S",
                 rolled: Rolled | None = None) -> PrintedKernel:
    """Print ``kernel`` rolled: per-kind functions and tables (:attr:`PrintedKernel.tables`,
    namespace scope) and a body that runs them and gathers the outputs."""
    R = rolled or roll(kernel)
    ctype = "float" if dtype == "float32" else "double"
    zero = dialect.zero.format(scalar=scalar)
    names = {"sin": dialect.sin, "cos": dialect.cos}
    lit = lambda x: literal(x, dtype, dialect)  # noqa: E731
    kn = kernel.name
    ins = [a.name for a in kernel.inputs]
    in_params = ", ".join(f"[[maybe_unused]] const {scalar}* __restrict {a}" for a in ins)
    tables: list[str] = []
    members_of = {k.id: len(k.members) for k in R.kinds}
    # each kind a function of its own: g++'s time stays linear in the kinds (inlined into the
    # driver's switch, a 30-link chain's rnea, aba and rnea_scan took 4.1 s to build instead of
    # 2.6, and ran no faster)
    inline = "__attribute__((noinline))"
    for k in R.kinds:
        fn = f"{kn}_k{k.id}"
        ncol = len(k.ctab[0]) if k.ctab else 0
        if ncol:
            tables += [f"{dialect.comment} kind {k.id}'s constants that differ between its {members_of[k.id]} members, "
                       "a row per member"]
            tables += _table(ctype, f"{fn}_c", k.ctab, lit)
        tables += [f"{dialect.comment} kind {k.id}'s integers, a row per member: its workspace base, then the input "
                   "indices and the workspace slots it reads"]
        tables += _table("int", f"{fn}_x", k.itab, str)
        tables.append(f"{dialect.comment} kind {k.id} ({members_of[k.id]} member{'s' if members_of[k.id] > 1 else ''}"
                      f", {len(k.ops)} ops), like {block_text(k.block)}")
        tables.append("template <typename S>")
        tables.append(f"static {inline} void {fn}({in_params}, S* __restrict w, "
                      f"[[maybe_unused]] const {ctype}* __restrict c, const int* __restrict x) {{")

        def ref(a):
            kind, j = a
            if kind == "l":
                return f"t{j}"
            if kind == "c":
                if j in k.const_lit:  # parameters traced unfolded: an operand of -x, of x - y
                    x = lit(k.const_lit[j])
                    return f"({x})" if x.startswith("-") else x
                return f"c[{k.const_col[j]}]"
            if kind == "i":
                name = k.inputs[j]
                return f"{name}[{k.input_lit[j]}]" if j in k.input_lit else f"{name}[x[{k.input_col[j]}]]"
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
            tables.append(f"  const S e{j} = w[x[{k.ext_col[j]}]];")
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
                tables.append(f"  w[x[0] + {e}] = t{p};" if e else f"  w[x[0]] = t{p};")
        tables.append("}")
        tables.append("")
    # the driver: the runs in trace order
    call_in = ", ".join(ins)
    body = [f"{dialect.comment} ---- rolled: {len(R.segments)} blocks of {len(R.kinds)} kinds in {len(R.runs)} runs "
            f"({R.n_ops} ops printed for the {sum(len(s.nodes) for s in R.segments)} the unrolled kernel has)"]
    tables += _table("int", f"{kn}_runs", [list(r) for r in R.runs], str)
    tables.append("")
    if R.trig:
        names_ = sorted({a for a, _ in R.trig})
        body.append(f"{dialect.comment} ---- sine and cosine of the {len(R.trig)} joint angles, all first"
                    + (f", {dialect.sincos_group} to a call" if dialect.sincos and dialect.sincos_group > 1 else ""))
        for arr in names_:
            idx = [(j, i) for j, (a, i) in enumerate(R.trig) if a == arr]
            tables += _flat("int", f"{kn}_angle_{arr}", [i for _, i in idx], str)
            tables += _flat("int", f"{kn}_angle_{arr}_slot", [2 * j for j, _ in idx], str)
            n = len(idx)
            ang, sl = f"{kn}_angle_{arr}", f"{kn}_angle_{arr}_slot"
            group = dialect.sincos_group if dialect.sincos and dialect.sincos_group > 1 else 1
            if group > 1 and n >= group:
                xs = ", ".join(f"{arr}[{ang}[j + {g}]]" for g in range(group))
                outs = ", ".join(f"w[{sl}[j + {g}]], w[{sl}[j + {g}] + 1]" for g in range(group))
                body.append(f"for (int j = 0; j + {group} <= {n}; j += {group}) {dialect.sincos}{group}({xs}, {outs});")
            start = n - n % group if group > 1 and n >= group else 0
            if start < n:
                if dialect.sincos:
                    call = f"{dialect.sincos}({arr}[{ang}[j]], w[{sl}[j]], w[{sl}[j] + 1]);"
                else:
                    call = (f"{{ w[{sl}[j]] = {dialect.sin}({arr}[{ang}[j]]); "
                            f"w[{sl}[j] + 1] = {dialect.cos}({arr}[{ang}[j]]); }}")
                body.append(f"for (int j = {start}; j < {n}; ++j) {call}")
    body += [f"for (int r = 0; r < {len(R.runs)}; ++r) {{",
             f"  const int lo = {kn}_runs[r][1], hi = {kn}_runs[r][2];",
             f"  switch ({kn}_runs[r][0]) {{"]
    for k in R.kinds:
        fn = f"{kn}_k{k.id}"
        cptr = f"{fn}_c[m]" if k.ctab and k.ctab[0] else "nullptr"
        body.append(f"    case {k.id}: for (int m = lo; m < hi; ++m) {fn}<{scalar}>({call_in}, w, {cptr}, {fn}_x[m]); break;")
    body += ["  }", "}"]
    # gather the outputs and temps from the workspace; temps after it in w
    temp_base: dict[str, int] = {}
    scratch = R.w_size
    for spec, _ in kernel.temps:
        temp_base[spec.name] = scratch
        scratch += spec.size
    for (spec, _), g in zip(kernel.traced_arrays(), R.gather):
        dest = spec.name if spec.name not in temp_base else f"(w + {temp_base[spec.name]})"
        lits: list[float] = []
        codes: list[int] = []
        copies: list[str] = []
        for idx, item in enumerate(g):
            if item[0] == "w":
                codes.append(item[1])
            elif item[0] == "c":
                codes.append(-1 - len(lits))
                lits.append(item[1])
            else:
                codes.append(-1 - len(lits))
                lits.append(0.0)
                copies.append(f"{dest}[{idx}] = {item[1]}[{item[2]}];")
        body.append(f"{dialect.comment} ---- {spec.name}: gathered from the workspace")
        contiguous = all(c >= 0 for c in codes) and codes == list(range(codes[0], codes[0] + len(codes)))
        if contiguous:
            body.append(f"for (int k = 0; k < {len(codes)}; ++k) {dest}[k] = w[{codes[0]} + k];")
            continue
        tables += _flat("int", f"{kn}_{spec.name}_from", codes, str)
        if lits:
            tables += _flat(ctype, f"{kn}_{spec.name}_lit", lits, lit)
            body.append(f"for (int k = 0; k < {len(codes)}; ++k) {{ const int s = {kn}_{spec.name}_from[k]; "
                        f"{dest}[k] = s >= 0 ? w[s] : {zero} + {kn}_{spec.name}_lit[-1 - s]; }}")
        else:
            body.append(f"for (int k = 0; k < {len(codes)}; ++k) {dest}[k] = w[{kn}_{spec.name}_from[k]];")
        body += copies
    tables.append("")
    body += epilogue_lines(kernel, kernel.post, temp_base, {}, dtype, dialect, scalar, zero)
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
    )
