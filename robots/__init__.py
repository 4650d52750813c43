"""Bundled robot descriptions and synthetic robot generators.

Installed as ``rbdgen.robots``.  The URDF files in this package are
dynamics-only models (no meshes): see the comment at the top of each file
for where its parameters come from.

>>> from rbdgen import robots
>>> robots.names()
['iiwa14', 'quadruped']
>>> robots.path("iiwa14").name
'iiwa14.urdf'
"""

from __future__ import annotations

from pathlib import Path

from .synthetic import chain_urdf, tree_urdf

__all__ = ["names", "path", "chain_urdf", "tree_urdf"]

_HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """Names (file stems) of the bundled URDF files, sorted."""
    return sorted(p.stem for p in _HERE.glob("*.urdf") if p.is_file())


def path(name: str) -> Path:
    """Filesystem path of the bundled URDF called ``name`` (a file stem).

    Raises ``KeyError`` for an unknown name; the message lists the
    available ones.
    """
    available = names()
    if not isinstance(name, str) or name not in available:
        raise KeyError(
            f"unknown bundled robot {name!r}; available: {', '.join(available)}"
        )
    return _HERE / f"{name}.urdf"
