#!/usr/bin/env python3
"""Per-call cost of DLPack arguments (docs/interop.md): iiwa14 rnea, float64, one state and a
batch, NumPy (the C fast path) against JAX arrays, PyTorch tensors and a bare DLPack producer,
each returned as its own kind; and the parts (NumPy's import of one argument, the framework's
import of one output). Not a test; prints a Markdown table.

    .venv/bin/python benchmarks/interop.py [--n 1000] [--number 2000]

Each figure is the best of 7 repeats of ``--number`` calls (timeit), so a figure is what a call
costs when nothing else disturbs it; the machine is shared, so differences under ~10 % are noise.
"""
from __future__ import annotations

import argparse
import os
import sys
import timeit
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("RBDGEN_CACHE_DIR", str(ROOT / ".cache" / "kernels"))

import rbdgen  # noqa: E402
from rbdgen.kernels import interop  # noqa: E402

KERNELS = ("rnea", "crba", "aba", "rnea_derivatives", "aba_derivatives")


class Producer:
    """A bare DLPack producer (no framework): its results come back as NumPy arrays."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return (1, 0)


def best(f, number):
    f()
    return min(timeit.repeat(f, number=number, repeat=7)) / number * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="batch size (default 1000)")
    ap.add_argument("--number", type=int, default=2000, help="calls per repeat (default 2000)")
    args = ap.parse_args(argv)
    model = rbdgen.load_urdf(str(ROOT / "robots" / "iiwa14.urdf"))
    kern = rbdgen.build(model, kernels=KERNELS, opt="-O1")
    kinds = {"numpy (C fast path)": lambda x: x, "bare DLPack producer → numpy": Producer}
    notes = []
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        kinds["jax.Array → jax.Array"] = jax.numpy.asarray
        notes.append(f"jax {jax.__version__}")
    except ImportError:
        notes.append("jax not installed")
    try:
        import torch

        kinds["torch.Tensor → torch.Tensor"] = torch.from_numpy
        notes.append(f"torch {torch.__version__}")
    except ImportError:
        notes.append("torch not installed")
    rng = np.random.default_rng(0)
    rows = []
    for name, make in kinds.items():
        times = []
        for n in (None, args.n):
            shape = () if n is None else (n,)
            q = np.ascontiguousarray(model.random_q(rng, n))
            v, a = rng.normal(size=shape + (7,)), rng.normal(size=shape + (7,))
            x = tuple(make(y) for y in (q, v, a))
            times.append(best(lambda: kern.rnea(*x), args.number if n is None else max(args.number // 20, 20)))
        rows.append((name, *times))
    base = rows[0]
    print(f"iiwa14 rnea, float64, µs per call (best of 7), numpy {np.__version__}, {', '.join(notes)}\n")
    print(f"| arguments | one state | overhead | N = {args.n} | overhead |")
    print("|---|---:|---:|---:|---:|")
    for name, one, many in rows:
        print(f"| {name} | {one:.2f} | {one - base[1]:+.1f} | {many:.1f} | {many - base[2]:+.1f} |")
    print("\nparts, µs:")
    al = interop._aligned_empty((7,), np.dtype(np.float64), 64)
    if "jax" in sys.modules:
        import jax

        jq = jax.numpy.asarray(al)
        print(f"- np.from_dlpack(jax array): {best(lambda: np.from_dlpack(jq), args.number):.2f}")
        print(f"- jax.dlpack.from_dlpack(aligned ndarray): {best(lambda: jax.dlpack.from_dlpack(al), args.number):.2f}")
    if "torch" in sys.modules:
        import torch

        tq = torch.from_numpy(al)
        print(f"- np.from_dlpack(torch tensor): {best(lambda: np.from_dlpack(tq), args.number):.2f}")
        print(f"- torch.from_dlpack(ndarray): {best(lambda: torch.from_dlpack(al), args.number):.2f}")
    mv = memoryview(np.zeros(7))
    q = np.zeros(7)
    mv_time = best(lambda: kern.rnea(mv, q, q), args.number)
    print(f"- a memoryview argument (Python path, with the DLPack check): {mv_time:.2f}")
    real = interop.any_foreign
    interop.any_foreign = lambda a, o: False
    try:
        print(f"- the same without the DLPack check: {best(lambda: kern.rnea(mv, q, q), args.number):.2f}")
    finally:
        interop.any_foreign = real


if __name__ == "__main__":
    main()
