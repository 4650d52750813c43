"""What a target's generator hands on: the generated files and their manifest facts
(:class:`Sources`), and the names and C types every target prints with."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import RbdgenError

#: floating-point dtypes of the CPU and CUDA targets: file/symbol tag and C type
DTYPES = {"float64": ("f64", "double"), "float32": ("f32", "float")}


def c_identifier(name: str) -> str:
    """``name`` as a C identifier: other characters become '_', ``r_`` in front of a digit."""
    s = re.sub(r"[^0-9a-zA-Z_]", "_", name)
    if not s or s[0].isdigit():
        s = "r_" + s
    return s


def prefix_for(name: str) -> str:
    """The symbol and file prefix of generated code: ``rbd_<name as a lower-case identifier>``."""
    ident = c_identifier(name).lower()
    return ident if ident.startswith("rbd_") else "rbd_" + ident


@dataclass
class Sources:
    """What :meth:`Target.generate` produced, and what :meth:`Target.load` compiles.

    ``kernels``: per kernel its manifest entry (``doc``, ``inputs`` [{name, size}], ``outputs``
    [{name, shape}], ``ops``). ``info``: the target's own facts (JSON-able; written into the
    manifest as they are and read back from it): which files to compile for which dtype, etc."""

    target: str
    prefix: str
    files: dict           # file name → text
    kernels: dict
    info: dict
    dtypes: tuple         # dtypes (or datapath types) the sources hold


def check_dtype(sources: Sources, dtype) -> str:
    """``dtype``'s name, if ``sources`` hold code for it (a package generated for other dtypes
    is an error that says how to regenerate it)."""
    dt = np.dtype(dtype).name
    if dt not in sources.info["sources"]:
        raise RbdgenError(f"these sources were generated for {', '.join(sources.info['sources'])}, not {dt}; "
                          f"regenerate them with --dtype {dt}")
    return dt


def kernel_entry(printed) -> dict:
    """The manifest entry of a printed kernel (see :class:`Sources`)."""
    return {
        "doc": printed.doc,
        "inputs": [{"name": a.name, "size": int(a.size)} for a in printed.inputs],
        "outputs": [{"name": a.name, "shape": [int(s) for s in a.shape]} for a in printed.outputs],
        "ops": {c: int(n) for c, n in printed.counts.items()},
    }
