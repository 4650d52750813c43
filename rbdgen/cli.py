"""The ``rbdgen`` command line.

User mistakes (bad URDF, unknown option, missing file) print one line ``error: …`` and exit 2;
no traceback. Anything else is a bug in rbdgen and keeps its traceback.
"""
from __future__ import annotations

import sys
import warnings

import click
import numpy as np

from .errors import RbdgenError, RbdgenWarning

EXIT_USAGE = 2


def _load(path, floating_base, mimic, check_inertia):
    from .model import load_urdf

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RbdgenWarning)
        model = load_urdf(path, floating_base=floating_base, mimic=mimic, check_inertia=check_inertia)
    for w in caught:
        if issubclass(w.category, RbdgenWarning):
            click.echo(f"warning: {' '.join(str(w.message).split())}", err=True)
        else:  # not ours: hand it back to the warnings machinery rather than dropping it
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return model


def model_options(f):
    f = click.option("--no-check-inertia", "no_check_inertia", is_flag=True,
                     help="Load bodies whose lumped inertia is not physical.")(f)
    f = click.option("--mimic", type=click.Choice(["error", "independent"]), default="error", show_default=True,
                     help="Mimic joints: refuse them, or treat them as independent joints (as Pinocchio does).")(f)
    f = click.option("--floating-base", is_flag=True, help="Add a free-flyer joint at the URDF root.")(f)
    f = click.argument("urdf", type=click.Path(dir_okay=False, path_type=str))(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rbdgen")
def cli():
    """Generate robot-specific rigid-body-dynamics kernels from a URDF."""


def _fmt_axis(model, i):
    if model.joint_types[i] == "floating":
        return "-"
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


@cli.command()
@model_options
def inspect(urdf, floating_base, mimic, no_check_inertia):
    """Print the kinematic tree, sizes, mass and merged fixed joints of URDF."""
    model = _load(urdf, floating_base, mimic, not no_check_inertia)
    base = "floating" if model.floating_base else "fixed"
    click.echo(f"robot {model.name!r} ({urdf}), {base} base")
    click.echo(f"bodies {model.nb}   nq {model.nq}   nv {model.nv}   tree depth {max(model.depth) + 1}   "
               f"total mass {model.total_mass:.4g} kg")
    click.echo("")
    click.echo(format_tree(model))
    if model.merged_fixed:
        click.echo("")
        click.echo(f"fixed joints merged ({len(model.merged_fixed)}):")
        for link, joint, into in model.merged_fixed:
            click.echo(f"  {joint}: link {link} -> {into}")
    if model.ignored_mimic:
        click.echo("")
        click.echo("mimic joints treated as independent: " + ", ".join(model.ignored_mimic))


@cli.command()
def demo():
    """Load the bundled robots, run the reference dynamics and check them against Pinocchio."""
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
    except ValueError as e:
        click.echo(f"error: {' '.join(str(e).split())}", err=True)
        return EXIT_USAGE
    except OSError as e:
        click.echo(f"error: {e}", err=True)
        return EXIT_USAGE
    # Non-standalone click returns the code of a ctx.exit(n) / click.exceptions.Exit(n) here.
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
