"""The ``rbdgen`` command line.

User mistakes (bad URDF, unknown option, missing file, unwritable output folder, a compiler that
is missing or refuses a flag) print one line ``error: …`` and exit 2; no traceback. Anything else
is a bug in rbdgen and keeps its traceback. ``rbdgen validate`` exits 1 when a kernel fails.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import warnings

import click
import numpy as np

from .errors import RbdgenError, RbdgenWarning
from .textutil import text_table

EXIT_FAIL = 1   # rbdgen validate: a kernel is wrong
EXIT_USAGE = 2  # a user mistake
INIT_NAME = "__init__.py"

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)


@contextlib.contextmanager
def _report_warnings():
    """rbdgen's own warnings as one ``warning: …`` line each on stderr; others pass through."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RbdgenWarning)
        yield
    for w in caught:
        if issubclass(w.category, RbdgenWarning):
            click.echo(f"warning: {' '.join(str(w.message).split())}", err=True)
        else:  # not ours: hand it back to the warnings machinery rather than dropping it
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _load(path, floating_base, mimic, check_inertia, gravity=None, frames=None, contacts=(), loops=()):
    """A URDF or an MJCF file, by its content (:func:`rbdgen.load_model`); ``gravity`` None: the
    loader's default (URDF: 0 0 -9.81; MJCF: the file's ``<option gravity>``). ``contacts``,
    ``loops``: the --contact FRAME:MODEL and --loop A:B:MODEL values (constrained_fd's)."""
    from .model import load_model

    with _report_warnings():
        try:
            model = load_model(path, floating_base=floating_base, mimic=mimic, check_inertia=check_inertia,
                               **({} if gravity is None else {"gravity": gravity}))
            if frames:
                model = model.with_frames("leaves" if frames == "leaves" else
                                          [n.strip() for n in frames.split(",") if n.strip()])
            if contacts or loops:
                from .model.constraints import constraints_from_cli

                model = model.with_constraints(constraints_from_cli(contacts, loops))
        except ValueError as e:  # load_urdf's and with_frames' checks of the option values
            raise RbdgenError(" ".join(str(e).replace(f"{path}: ", "").split()), file=path) from e
    return model


@contextlib.contextmanager
def _progress(quiet):
    """``with _progress(quiet) as progress``: what the work is doing, on stderr: one line rewritten
    in place on a terminal (cleared when the block ends, before the command prints its results),
    a plain line per message elsewhere (a log), nothing with --quiet (:mod:`rbdgen.progress`)."""
    from .progress import reporting

    with reporting(not quiet) as progress:
        yield False if progress is None else progress  # (None would be rbdgen.build's default: a terminal line)


class _MimicChoice(click.Choice):
    """couple, independent or refuse; ``error``, refuse's old name, is taken but not shown."""

    def convert(self, value, param, ctx):
        return "refuse" if value == "error" else super().convert(value, param, ctx)


def model_options(f):
    f = click.option("--no-check-inertia", "no_check_inertia", is_flag=True,
                     help="Load bodies whose lumped inertia is not physical.")(f)
    f = click.option("--mimic", type=_MimicChoice(["couple", "independent", "refuse"]), default="couple",
                     show_default=True,
                     help="Mimic joints: move with their leader (couple; nq/nv count the free joints, as "
                          "Pinocchio's mimic=True), ordinary joints (independent), or refuse them.")(f)
    f = click.option("--frames", metavar="LINK,...",
                     help="URDF links to generate the frame and contact kernels for (frame_placement, "
                          "frame_jacobian_*, frame_bias_acceleration_*, osim_inverse, contact_terms); "
                          "'leaves': the URDF's leaf links. Default: none, and those kernels are left out.")(f)
    f = click.option("--loop", "loops", metavar="LINK_A:LINK_B:3d|6d[:KP,KD]", multiple=True,
                     help="A loop closed inside the robot for constrained_fd (repeat for several): the two "
                          "links' origins held together (3d) or the links welded (6d); KP,KD: Baumgarte "
                          "gains on its position error (3d loops).")(f)
    f = click.option("--contact", "contacts", metavar="LINK:3d|6d", multiple=True,
                     help="A rigid contact for constrained_fd (repeat for several): the link's origin held "
                          "still (3d) or the link held (6d). With --contact or --loop the constrained_fd "
                          "kernel is generated; their links are added to --frames.")(f)
    f = click.option("--floating-base", is_flag=True,
                     help="Add a free-flyer joint at the URDF root (MJCF: on the first top-level body, "
                          "which must have no joint).")(f)
    # a URDF (<robot>) or an MJCF file (<mujoco>), told apart by content (rbdgen.load_model)
    f = click.argument("urdf", metavar="URDF|MJCF", type=click.Path(dir_okay=False, path_type=str))(f)
    return f


def _parse_gravity(ctx, param, value):
    if value is None:
        return None  # the loader's default: 0 0 -9.81, or an MJCF file's <option gravity>
    try:
        g = tuple(float(x) for x in value.replace(",", " ").split())
    except ValueError:
        g = ()
    if len(g) != 3 or not all(np.isfinite(g)):
        raise click.BadParameter(f"expected 3 finite numbers such as '0 0 -9.81', got {value!r}")
    from .model.model import MAX_GRAVITY

    if max(abs(x) for x in g) > MAX_GRAVITY:
        raise click.BadParameter(f"components above {MAX_GRAVITY:g} m/s² are not a robot's (they would overflow "
                                 f"the kernels' arithmetic), got {value!r}")
    return g


def gravity_option(f):
    return click.option("--gravity", callback=_parse_gravity, metavar='"X Y Z"',
                        help="Gravity in world coordinates [m/s²] (default: 0 0 -9.81; an MJCF file's "
                             "<option gravity>).")(f)


def _parse_kernels(ctx, param, value):
    from . import registry

    if value is None:
        return None  # every kernel the model can have: decided once it is loaded
    try:
        return registry.resolve(value)
    except RbdgenError as e:
        raise click.BadParameter(str(e)) from None


def _parse_skip(ctx, param, value):
    from . import registry

    if value is None:
        return ()
    try:
        return registry.resolve(value)
    except RbdgenError as e:
        raise click.BadParameter(str(e)) from None


def kernels_option(f):
    from . import registry

    f = click.option("--skip-kernels", "skip_kernels", callback=_parse_skip, metavar="K1,K2,...",
                     help="Comma-separated kernels to leave out of the selection (a new kernel is still included).")(f)
    return click.option("--kernels", callback=_parse_kernels, metavar="K1,K2,...",
                        help=f"Comma-separated kernels (default: every one the model can have; the frame kernels need "
                             f"--frames, the *_fext variants are built only when named. All: {', '.join(registry.kernels())}; "
                             "`rbdgen kernels` describes each).")(f)


def _selected(model, kernels, skip):
    from . import registry

    out = tuple(k for k in registry.applicable(model, kernels) if k not in skip)
    if not out:
        raise click.UsageError("--skip-kernels leaves no kernel to work on")
    return out


#: which target options each command offers (by the stage they act at)
_COMMAND_STAGES = {"generate": ("generate",), "validate": ("generate", "compile", "run"), "inspect": ("cost",),
                   "build": ("compile",)}


def target_options(command):
    """Every registered target's options that act at ``command``'s stages, each flag once. They
    default to "not given"; :func:`_target_kwargs` refuses those the chosen target lacks."""
    from .targets import all_options, targets_of

    stages = set(_COMMAND_STAGES[command])

    def deco(f):
        for o in reversed(all_options()):
            if not o.flag or not set(o.stages) & stages:
                continue
            kw = dict(o.click)
            choices = kw.pop("choices", None)
            if choices:
                kw["type"] = click.Choice(choices)
            owners = targets_of(o.name)
            text = o.help if ":" in o.help.split(" ")[0] else f"{'/'.join(owners)}: {o.help}"
            if o.check is not None:
                kw["callback"] = _checker(o.check)
            f = click.option(o.flag, o.name, default=False if kw.get("is_flag") else None, help=text, **kw)(f)
        return f

    return deco


def _checker(check):
    def callback(ctx, param, value):
        if value is None or value is False:
            return value
        try:
            return check(value)
        except RbdgenError as e:
            raise click.BadParameter(str(e)) from None

    return callback


def target_option(f):
    from .targets import get_target, targets

    text = "; ".join(f"{t}: {get_target(t).help}" for t in targets())
    return click.option("--target", type=click.Choice(targets()), default="cpu", show_default=True,
                        help=f"Code generation target ({text}).")(f)


def _target_kwargs(target: str, command: str, given: dict) -> dict:
    """The target options the user gave (not None/False), checked against ``target``."""
    from .targets import all_options, get_target, targets_of

    t = get_target(target)
    flags = {o.name: o.flag for o in all_options()}
    used = {k: v for k, v in given.items() if v is not None and v is not False}
    ours = t.option_names(*_COMMAND_STAGES[command])
    wrong = [k for k in used if k not in ours]
    if wrong:
        owners = sorted({x for k in wrong for x in targets_of(k)})
        which = owners[0] if len(owners) == 1 else f"{', '.join(owners[:-1])} or {owners[-1]}"
        raise click.UsageError(f"{', '.join(flags[k] for k in wrong)}: only with --target {which}")
    return used


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rbdgen")
def cli():
    """Generate robot-specific rigid-body-dynamics kernels from a URDF or an MJCF (MuJoCo) file."""


def _fmt_axis(model, i):
    if model.joint_types[i] in ("floating", "spherical"):
        return "-"
    if model.joint_types[i] == "planar":
        return "x-y plane"
    return "(" + ", ".join(f"{x:+.3g}" for x in model.axis[i]) + ")"


def format_tree(model) -> str:
    """The kinematic tree as an aligned text table."""
    depth = model.depth
    rows = [("#", "body", "parent", "joint", "type", "axis", "q", "v", "mass [kg]")]
    for i in range(model.nb):
        p = model.parent[i]
        nq, nv = model.nq_joint(i), model.nv_joint(i)
        qs = str(model.q_start[i]) if nq == 1 else f"{model.q_start[i]}-{model.q_start[i] + nq - 1}"
        vs = str(model.v_start[i]) if nv == 1 else f"{model.v_start[i]}-{model.v_start[i] + nv - 1}"
        rows.append((
            str(i),
            "  " * depth[i] + model.body_names[i],
            model.body_names[p] if p >= 0 else model.world_name,
            model.joint_names[i],
            model.joint_types[i],
            _fmt_axis(model, i),
            qs,
            vs,
            f"{model.inertia[i][5, 5]:.4g}",
        ))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


CLASS_SYMBOL = {"0": ".", "±1": "1", "const": "c", "q": "q"}


def _grid(pattern) -> list[str]:
    return [" ".join(CLASS_SYMBOL[e] for e in row) for row in pattern]


def format_sparsity(model) -> str:
    """Per joint: the class grids of X (joint-to-parent transform), S and I side by side, and
    the multiplies of X·v left after pruning; then totals."""
    from .symbolic import sparsity

    lines = ["sparsity: '.' structural zero, '1' ±1, 'c' constant, 'q' depends on the joint position",
             "X: parent-to-body transform X_i(q_i); S: motion subspace; I: spatial inertia",
             "X·v multiplies: a dense 6×6 X·v takes 36; zeros and ±1 entries need none", ""]
    dense = pruned = 0
    n_class = {c: 0 for c in CLASS_SYMBOL}
    for i, js in enumerate(sparsity(model)):
        dense += js.dense_mults
        pruned += js.pruned_mults
        for row in js.X:
            for e in row:
                n_class[e] += 1
        share = 1.0 - js.pruned_mults / js.dense_mults
        lines.append(f"joint {i} {js.joint} ({model.joint_types[i]}, body {js.body}): X·v {js.pruned_mults}/"
                     f"{js.dense_mults} multiplies, {share:.0%} pruned")
        gx, gs, gi = _grid(js.X), _grid(js.S), _grid(js.I)
        wx, ws = max(len("X"), len(gx[0])), max(len("S"), len(gs[0]))
        lines.append(f"  {'X'.ljust(wx)}   {'S'.ljust(ws)}   I")
        for rx, rs, ri in zip(gx, gs, gi):
            lines.append(f"  {rx.ljust(wx)}   {rs.ljust(ws)}   {ri}")
        lines.append("")
    total = sum(n_class.values())
    lines.append(f"total over {model.nb} joints: X·v {pruned}/{dense} multiplies, {1.0 - pruned / dense:.0%} pruned")
    lines.append("X entries: " + ", ".join(f"{CLASS_SYMBOL[c]} {n} ({n / total:.0%})" for c, n in n_class.items()))
    return "\n".join(lines)


COST_COLUMNS = (("mul", "mul"), ("add", "add/sub"), ("div", "div"), ("sincos", "sin/cos"), ("total", "total"),
                ("depth", "depth"))


def format_cost(model, kernels=None, progress=None) -> str:
    """Per kernel: op counts of the pruned kernel against the dense trace of the same algorithm."""
    from .registry import resolve, trace

    from .ir.schedule import critical_path

    rows = [("kernel",) + tuple(h for _, h in COST_COLUMNS) + ("steps ×/+", "reduction")]
    for k in resolve(kernels):
        if progress:
            progress(f"tracing {k} (pruned and dense)")
        pk = trace(model, k, fold=True)
        p = pk.op_counts()
        d = trace(model, k, fold=False).op_counts()
        cp = critical_path(pk)
        ratio = f"{d['total'] / p['total']:.2f}x" if p["total"] else "-"
        rows.append((k,) + tuple(f"{p[c]}/{d[c]}" for c, _ in COST_COLUMNS) + (f"{cp.mul}/{cp.add}", ratio))
        if k == "osim_inverse":
            rows.append(_osim_product_row(model, trace))
    lines = ["op counts, pruned/dense (dense: the same algorithm traced without folding zeros, ones and "
             "shared subexpressions);",
             "depth: the critical path in ops when every op whose operands are ready runs at once (sums in "
             "IR order);",
             "steps ×/+: multiplies and adds on the pruned kernel's critical path (Lathrop's multiply and add "
             "steps); reduction: dense total / pruned total", ""]
    return "\n".join(lines + text_table(rows))


def _osim_product_row(model, trace) -> tuple:
    """What Λ⁻¹ costs the other way, for comparison: J·M⁻¹·Jᵀ from the pruned minv and
    frame_jacobian_local kernels and two dense products (6nf × nv × nv, then × 6nf, symmetric
    half)."""
    mi, jl = trace(model, "minv").op_counts(), trace(model, "frame_jacobian_local").op_counts()
    r, n = 6 * model.nf, model.nv
    mul = r * n * n + r * (r + 1) // 2 * n
    add = r * n * (n - 1) + r * (r + 1) // 2 * (n - 1)
    c = {k: mi[k] + jl[k] for k in ("mul", "add", "div", "sincos")}
    c["mul"] += mul
    c["add"] += add
    c["total"] = sum(c.values())
    cells = tuple(f"{c[k]}" if k in c else "-" for k, _ in COST_COLUMNS)
    return ("  (J·minv·Jᵀ)",) + cells + ("-", "-")


@cli.command()
@model_options
@click.option("--sparsity", "show_sparsity", is_flag=True,
              help="Per joint: the zero/±1/constant/q-dependent pattern of X, S and I, and the X·v multiplies pruned.")
@click.option("--cost", "show_cost", is_flag=True,
              help="Per kernel: op counts of the generated (pruned) code against the dense algorithm, and what "
                   "the target adds (cuda: the block shape's schedule; hls: DSP blocks and latency).")
@target_option
@click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64", show_default=True,
              help="hls: floating-point datapath type when --fixed is not given.")
@kernels_option
@click.option("--quiet", "-q", is_flag=True, help="No progress messages on stderr.")
@target_options("inspect")
def inspect(urdf, floating_base, mimic, frames, contacts, loops, no_check_inertia, show_sparsity, show_cost, target, dtype, kernels,
            skip_kernels, quiet, **given):
    """Print the kinematic tree, sizes, mass and merged fixed joints of URDF
    (or, with --sparsity / --cost, what code generation prunes)."""
    from .targets import get_target

    topts = _target_kwargs(target, "inspect", given)
    if target != "cpu" and not show_cost:
        raise click.UsageError(f"--target {target} goes with --cost")
    model = _load(urdf, floating_base, mimic, not no_check_inertia, frames=frames, contacts=contacts, loops=loops)
    kernels = _selected(model, kernels, skip_kernels)
    base = "floating" if model.floating_base else "fixed"
    click.echo(f"robot {model.name!r} ({urdf}), {base} base")
    click.echo(f"bodies {model.nb}   nq {model.nq}   nv {model.nv}   tree depth {max(model.depth) + 1}   "
               f"total mass {model.total_mass:.4g} kg")
    if show_sparsity or show_cost:
        if show_cost:
            from .registry import check_model

            check_model(model, kernels)
        if show_sparsity:
            click.echo("")
            click.echo(format_sparsity(model))
        if show_cost:
            click.echo("")
            with _progress(quiet) as progress:
                table = format_cost(model, kernels, progress=progress)
            click.echo(table)
            with _progress(quiet) as progress:
                sections = get_target(target).cost_sections(model, kernels, dtype=dtype, progress=progress, **topts)
            for section in sections:
                click.echo("")
                click.echo(section)
        _echo_snap_hint(model)
        return
    click.echo("")
    click.echo(format_tree(getattr(model, "tree", model)))
    if model.merged_fixed:
        click.echo("")
        click.echo(f"fixed joints merged ({len(model.merged_fixed)}):")
        for link, joint, into in model.merged_fixed:
            click.echo(f"  {joint}: link {link} -> {into}")
    if getattr(model, "coupled", False):
        click.echo("")
        click.echo("mimic joints coupled (q, v above are the tree's; nq, nv count the free joints):")
        for f, (lead, mult, off) in sorted(model.mimic.items()):
            click.echo(f"  {model.joint_names[f]} = {mult:g} * {model.joint_names[lead]} + {off:g}")
    elif model.ignored_mimic:
        click.echo("")
        click.echo("mimic joints treated as independent: " + ", ".join(model.ignored_mimic))
    click.echo("")
    click.echo("frames (--frames): " + (", ".join(model.frames) or "none selected") +
               "; leaf links: " + (", ".join(model.leaf_links) or "none"))
    _echo_snap_hint(model)


def _echo_snap_hint(model) -> None:
    hint = snap_hint(model)
    if hint:
        click.echo("")
        click.echo(hint)


@cli.command(name="kernels")
def kernels_cmd():
    """List the kernels rbdgen generates: signature, meaning, float32 bound, preferred GPU shape."""
    from . import registry

    rows = [("kernel", "inputs -> outputs", "float32 bound", "gpu shape", "what it computes")]
    for k in registry.kernels():
        d = registry.get(k)
        outs = ", ".join(f"{a.name}{'(' + ','.join(map(str, a.shape)) + ')'}" for a in d.outputs)
        doc = d.doc if d.variant_of is None else f"{d.doc} [{d.variant_of[0]} with {d.variant_of[1]}; built when named]"
        doc += " [built when named]" if d.opt_in else ""
        rows.append((k, f"{', '.join(d.input_names)} -> {outs}", f"{d.float32_tol:.0e}", d.gpu_shape, doc))
    click.echo("\n".join(text_table(rows, left=(0, 1, 3, 4))))


def _check_snap(ctx, param, value):
    from .symbolic import MAX_SNAP

    if value is not None and not (np.isfinite(value) and 0 < value <= MAX_SNAP):
        raise click.BadParameter(f"expected a positive tolerance up to {MAX_SNAP:g} such as 1e-6 (a rounding of "
                                 f"printed numbers, not a change of geometry), got {value!r}")
    return value


def format_snap(info) -> str:
    if not info["count"]:
        return f"snap {info['tol']:g}: no transform entry within {info['tol']:g} of 0 or ±1; nothing changed"
    moved = info["max_rel_diff"]
    lines = [f"snap {info['tol']:g}: {info['count']} transform entries snapped to 0 or ±1, largest change "
             f"{info['largest_change']:.3g}; the reference rnea moves by {moved['rnea']:.3g} and crba by "
             f"{moved['crba']:.3g} (max relative difference, {info['states']} random states)"]
    for e in info["entries"][:20]:
        idx = ",".join(map(str, e["index"]))
        lines.append(f"  {e['body']} {e['what']}[{idx}]: {e['old']!r} -> {e['new']:g}")
    if info["count"] > 20:
        lines.append(f"  ... and {info['count'] - 20} more (all listed in manifest.json)")
    return "\n".join(lines)


#: rotation entries of the joint transforms this close to 0 without being 0 make the --snap hint
#: (a quarter turn written as rpy 1.5708 leaves cos = 3.7e-6)
SNAP_HINT_WITHIN = 1e-3


def snap_hint(model) -> str | None:
    """One line suggesting ``--snap`` when the joint transforms hold rotation entries within
    :data:`SNAP_HINT_WITHIN` of 0 but not 0 (quarter turns rounded in the URDF, k·π/2 ± 1e-3),
    and snapping them saves operations: the tolerance that catches them (a power of ten) and
    rnea's op count without and with it. None otherwise."""
    import math

    from .registry import trace
    from .symbolic import MAX_SNAP, snap_model

    _, near = snap_model(model, SNAP_HINT_WITHIN)
    devs = [abs(old) for _, what, _, old, new in near.snapped if what == "E_tree" and new == 0.0]
    if not devs:
        return None
    tol = min(MAX_SNAP, 10.0 ** math.ceil(math.log10(max(devs))))
    snapped, report = snap_model(model, tol)
    before, after = trace(model, "rnea").op_counts()["total"], trace(snapped, "rnea").op_counts()["total"]
    if after >= before:
        return None
    return (f"hint: {len(devs)} rotation entries of the joint transforms are within {max(devs):.2g} of 0 without "
            f"being 0 (quarter turns written with too few digits, such as rpy=\"1.5708\"): `rbdgen generate … "
            f"--snap {tol:g}` snaps them ({len(report.snapped)} entries within that of 0 or ±1; it reports how far "
            f"the dynamics move) and saves operations: rnea {before} → {after} ops")


class _Terminated(BaseException):
    """SIGTERM or SIGHUP while ``generate`` runs. A BaseException, as KeyboardInterrupt is: it
    unwinds through the ``finally`` clauses that remove the temporary folder and the folders
    --out created."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _cleanup_then_end_by_signal(names=("SIGTERM", "SIGHUP")):
    """While the block runs, SIGTERM (what `timeout` and CI send) and SIGHUP (a closed terminal)
    get the cleanup of Ctrl-C; then the process ends by that signal, as a killed process does (the
    shell sees 128 + its number). A second one during the cleanup is ignored. A signal that is
    ignored (nohup) or handled by someone else is left as it is."""
    previous = {}

    def stop(signum, frame):
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        raise _Terminated(signum)

    if threading.current_thread() is threading.main_thread():
        for name in names:
            s = getattr(signal, name, None)
            if s is not None and signal.getsignal(s) == signal.SIG_DFL:
                previous[s] = signal.signal(s, stop)
    try:
        yield
    except _Terminated as e:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        for s, h in previous.items():
            signal.signal(s, h)
        previous.clear()
        os.kill(os.getpid(), e.signum)  # the default action again: the process ends here
        raise SystemExit(128 + e.signum) from None  # (not reached)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@cli.command()
@model_options
@gravity_option
@target_option
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=str), default=".", show_default=True,
              help="Folder the package folder is written into (created if missing).")
@click.option("--name", default=None,
              help="Package name, a Python identifier (default: the robot's name, lower case).")
@click.option("--dtype", "dtypes", type=click.Choice(["float64", "float32"]), multiple=True,
              help="Scalar type; repeat for several (default: both; hls: one, float64 unless --fixed).")
@kernels_option
@click.option("--snap", type=float, default=None, callback=_check_snap, metavar="TOL",
              help="First snap transform entries within TOL of 0 or ±1 (e.g. rpy 1.5708 for π/2), "
                   "and report how far the dynamics move.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages on stderr.")
@target_options("generate")
def generate(urdf, floating_base, mimic, frames, contacts, loops, no_check_inertia, gravity, target, out, name, dtypes, kernels, skip_kernels,
             snap, quiet, **given):
    """Write the kernels of URDF as a folder OUT/NAME/: the target's sources and manifest.json;
    for cpu and cuda an importable Python package (an __init__.py with load() and one function
    per kernel). The sources are usable from C++ projects as they are (see the header's comment)."""
    from .package import generate_package

    topts = _target_kwargs(target, "generate", given)
    if topts.get("fixed") is not None and dtypes:
        raise click.UsageError("--fixed and --dtype are alternatives for --target hls; give one")
    model = _load(urdf, floating_base, mimic, not no_check_inertia, gravity, frames, contacts, loops)
    kernels = _selected(model, kernels, skip_kernels)
    load_options = {"floating_base": floating_base, "mimic": mimic, "check_inertia": not no_check_inertia}
    with _report_warnings(), _cleanup_then_end_by_signal(), _progress(quiet) as progress:
        pkg = generate_package(model, out, urdf=urdf, load_options=load_options, name=name,
                               dtypes=dtypes or None, kernels=kernels, target=target, snap=snap,
                               progress=progress, **topts)
    if pkg.snap is not None:
        click.echo(format_snap(pkg.snap))
    m = pkg.manifest
    what = f"package '{pkg.name}'" if INIT_NAME in pkg.files else f"{target} sources"
    types = m["target"].get("type") or ", ".join(m["options"]["dtypes"])
    line = (f"wrote {os.path.abspath(pkg.path)}{os.sep} ({len(pkg.files)} files): {what}, robot {m['robot']!r}, "
            f"nq {m['nq']} nv {m['nv']}, {types}, {len(m['kernel_order'])} kernels")
    if m["target"].get("tcl"):
        line += (f"; synthesize with `vitis-run --mode hls --tcl {m['target']['tcl']}` there "
                 f"(Vitis < 2023.2: `vitis_hls -f {m['target']['tcl']}`)")
    click.echo(line)


@cli.command()
@model_options
@gravity_option
@target_option
@click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64", show_default=True)
@click.option("--states", type=click.IntRange(min=1, max=100_000), default=16, show_default=True,
              help="Random states to check (at most 100000: all are held in memory).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random states.")
@kernels_option
@click.option("--no-pinocchio", is_flag=True, help="Compare with the NumPy reference only.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages on stderr.")
@target_options("validate")
def validate(urdf, floating_base, mimic, frames, contacts, loops, no_check_inertia, gravity, target, dtype, states, seed, kernels,
             skip_kernels, no_pinocchio, quiet, **given):
    """Build the kernels of URDF for the target and check each on random states (batch and single)
    against the NumPy reference and Pinocchio. Exit status 0: all pass; 1: a kernel fails."""
    from . import validate as V
    from .targets import get_target

    topts = _target_kwargs(target, "validate", given)
    model = _load(urdf, floating_base, mimic, not no_check_inertia, gravity, frames, contacts, loops)
    kernels = _selected(model, kernels, skip_kernels)
    with _report_warnings(), _progress(quiet) as progress:
        rows = V.validate(model, target=target, dtype=dtype, states=states, seed=seed, kernels=kernels,
                          pinocchio=not no_pinocchio, progress=progress, **topts)
    base = "floating" if model.floating_base else "fixed"
    click.echo(f"robot {model.name!r} ({urdf}), {base} base, nq {model.nq} nv {model.nv}: "
               f"{get_target(target).describe({**topts, 'dtype': dtype})}, {dtype}; {states} random states "
               f"(seed {seed}), batch and single")
    click.echo(f"relative error: {V.MEASURE}")
    click.echo("")
    click.echo(V.format_table(rows))
    notes = sorted({r.note for r in rows if r.note})
    for n in notes:
        click.echo(f"note: {n}")
    hint = snap_hint(model)
    if hint:
        click.echo(hint)
    failed = [r.kernel for r in rows if not r.passed]
    click.echo("")
    if failed:
        unbound = sum(1 for r in rows if r.tol != r.tol)
        why = "above tolerance" if not unbound else \
            ("without a measured bound" if unbound == len(failed) else "above tolerance or without a measured bound")
        click.echo(f"FAIL: {len(failed)} of {len(rows)} kernels {why}: {', '.join(failed)}")
        raise click.exceptions.Exit(EXIT_FAIL)
    click.echo("the kernel passes" if len(rows) == 1 else f"all {len(rows)} kernels pass")


@cli.command(name="build")
@click.argument("folder", metavar="DIR", type=click.Path(path_type=str))
@click.option("--dtype", "dtypes", type=click.Choice(["float64", "float32"]), multiple=True,
              help="Scalar type to compile; repeat for several (default: every one the package holds).")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages on stderr.")
@target_options("build")
def build_cmd(folder, dtypes, quiet, **given):
    """Compile every kernel of the package in DIR (written by `rbdgen generate`) now, as one
    library in rbdgen's compile cache: the package's first call then only loads it (without this,
    a package compiles each kernel on its first call). The options are those of the package's
    target that act at compile time, as in its load()."""
    from .package import load_package, read_manifest
    from .targets import all_options, get_target

    if not os.path.isdir(folder):
        raise RbdgenError(f"{folder}: no such folder")
    if not os.path.isfile(os.path.join(folder, "manifest.json")):
        raise RbdgenError(f"{folder}: not a package written by `rbdgen generate` (no manifest.json there)")
    m = read_manifest(folder)
    t = get_target(m["options"]["target"])
    used = {k: v for k, v in given.items() if v is not None and v is not False}
    wrong = [k for k in used if k not in t.option_names("compile")]
    if wrong:
        flags = {o.name: o.flag for o in all_options()}
        raise click.UsageError(f"{', '.join(flags[k] for k in wrong)}: not an option of this package's target "
                               f"({t.name})")
    with _report_warnings(), _progress(quiet) as progress:
        built = [(d, load_package(folder, d, progress=progress, **used))
                 for d in (dtypes or m["options"].get("dtypes") or ["float64"])]
    for d, kern in built:
        where = f" in {kern.path}" if getattr(kern, "path", None) else ""
        click.echo(f"built package '{m['package']}' ({t.name}, {m['target'].get('type') or d}): "
                   f"{len(kern.kernels)} kernels{where}")


@cli.command()
def demo():
    """What `make demo` runs: generate and compile the bundled KUKA iiwa 14's C++ kernels (g++
    -O3, cached), check each against the NumPy reference and Pinocchio, time them (one state, a
    batch, the reference, Pinocchio), then build two of them for CUDA (run on the GPU, or
    emulated on the CPU without one) and HLS (C simulation in ap_fixed<32,16>) and check those
    too. Exit status 1 if a check fails."""
    from .demo import run_demo

    run_demo()


def _usage_message(e: click.exceptions.UsageError) -> str:
    """One line for a click usage error, with the hint click would print on a separate line."""
    if isinstance(e, click.exceptions.NoArgsIsHelpError):
        msg = "missing command"  # click's message here is the whole help text
    else:
        msg = " ".join(e.format_message().split()).rstrip(".")
    ctx = e.ctx
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        option = max(ctx.command.get_help_option_names(ctx), key=len)
        msg += f" (try '{ctx.command_path} {option}')"
    return msg


def main(argv=None) -> int:
    try:
        rv = cli.main(args=argv, prog_name="rbdgen", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        return 1
    except click.exceptions.UsageError as e:
        click.echo(f"error: {_usage_message(e)}", err=True)
        return EXIT_USAGE
    except click.exceptions.ClickException as e:
        click.echo(f"error: {' '.join(e.format_message().split())}", err=True)
        return EXIT_USAGE
    except RbdgenError as e:
        click.echo(f"error: {' '.join(str(e).split())}", err=True)
        return EXIT_USAGE
    except BrokenPipeError:  # `rbdgen … | head`: the reader went away; not worth a traceback
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_FAIL
    # Non-standalone click returns the code of a ctx.exit(n) / click.exceptions.Exit(n) here.
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
