"""∇FD's products −M⁻¹·∂τ/∂q and −M⁻¹·∂τ/∂v skip the structural zeros of ∂τ.

∂τ_k/∂u_j is identically zero unless joints k and j are on one root-to-leaf path; the trace
records, per row of ∂τ, the column spans that may be nonzero (``MatMul.b_spans``), the C++ and
CUDA printers loop over those spans only and ``op_counts`` counts what they print. The NumPy
interpreter reads only the spans too, so test_ir.py's reference comparison on every robot checks
that no nonzero falls outside them; here: the spans are exactly the traced nonzeros and lie on
root-to-leaf paths, the printed loops do exactly the counted work, and a compiled kernel of a
branched robot equals a dense −M⁻¹·∂τ from the reference. A few seconds in all.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen.algorithms import trace
from rbdgen.targets.cpu import CPU
from rbdgen.targets.cuda.emit import CUDA
from rbdgen.targets.hls.emit import HLS
from rbdgen.codegen import printer
from rbdgen.codegen.printer import print_epilogue_shared, print_kernel
from rbdgen.robots import tree_urdf

from conftest import TOL64, random_state, relerr


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A small branched floating-base robot (7 joints, binary tree), and its fixed-base twin."""
    p = tmp_path_factory.mktemp("tree") / "tree.urdf"
    p.write_text(tree_urdf(7, seed=4, joint_types=("revolute", "prismatic"), fixed_every=0))
    return {fb: rbdgen.load_urdf(p, floating_base=fb) for fb in (True, False)}


def _on_one_path(m, r: int, c: int) -> bool:
    body = lambda j: next(b for b in range(m.nb) if j in range(m.nv)[m.v_slice(b)])  # noqa: E731
    br, bc = body(r), body(c)
    return br in m.ancestors(bc) or bc in m.ancestors(br)


@pytest.mark.parametrize("floating", [True, False], ids=["floating", "fixed"])
def test_spans_are_the_structural_zeros_of_dtau(tree, floating):
    m = tree[floating]
    k = trace(m, "aba_derivatives")
    traced = {spec.name: vals for spec, vals in k.temps}
    assert [(mm.out, mm.b) for mm in k.post] == [("dqdd_dq", "dtau_dq"), ("dqdd_dv", "dtau_dv")]
    n = m.nv
    for mm in k.post:
        assert mm.b_spans is not None and len(mm.b_spans) == n, mm.b
        read = np.zeros((n, n), dtype=bool)
        for r, spans in enumerate(mm.b_spans):
            assert all(lo < hi and (not i or spans[i - 1][1] < lo) for i, (lo, hi) in enumerate(spans)), spans
            for lo, hi in spans:
                read[r, lo:hi] = True
        nonzero = np.array([not v.is_zero() for v in traced[mm.b]]).reshape(n, n)
        assert np.array_equal(read, nonzero), mm.b                      # exactly the traced nonzeros
        assert all(_on_one_path(m, r, c) for r, c in zip(*np.nonzero(read))), mm.b
        assert mm.terms == nonzero.sum() < n * n
    # the counts: the straight-line code plus one multiply and one subtraction per term and row
    # of M⁻¹, against k·m terms per row when the products are counted dense (HLS prints them so)
    c, d = k.op_counts(), k.op_counts(dense_epilogue=True)
    terms = sum(mm.terms for mm in k.post)
    assert d["mul"] - c["mul"] == d["add"] - c["add"] == n * (2 * n * n - terms) > 0
    assert print_kernel(k, "hls", HLS).counts == d and print_kernel(k, "float64", CPU).counts == c


def test_printed_loops_do_the_counted_work(tree):
    """The C++ loops (output rows × rows of B × column spans: the batch path's, and any scalar
    but double) and the CUDA element loops (columns × rows of B) add up to n·terms
    multiply-subtracts, no more. One state in doubles takes register tiles instead (this robot's
    13 × 13 products are above ``TILE_MIN``): each block of columns reads exactly the rows of B
    with a nonzero in it, and the comment states the multiply-adds that makes."""
    m = tree[True]
    k = trace(m, "aba_derivatives")
    assert min(k.post[0].n, k.post[0].m) >= printer.TILE_MIN  # else this test checks "rows" only
    traced = {spec.name: vals for spec, vals in k.temps}
    pk = print_kernel(k, "float64", CPU)
    body = "\n".join(pk.body) + "\n"
    for mm in k.post:
        start = body.index(f"// ---- {mm.out} = ")
        block = body[start:body.index("\n}\n", start)]
        tiles, rows = block.split("\n} else {\n")
        assert "\nif constexpr (std::is_same<S, double>::value) {\n" in tiles
        assert f"skips the structural zeros of {mm.b}" in rows
        rows_done = 0
        for l0, l1, inner in re.findall(r"for \(int l = (\d+); l < (\d+); \+\+l\) \{\n(.*?)\n    \}", rows, re.S):
            spans = re.findall(r"for \(int j = (\d+); j < (\d+); \+\+j\) o\[j\] -= s \* ", inner)
            rows_done += (int(l1) - int(l0)) * sum(int(b) - int(a) for a, b in spans)
        assert int(re.search(r"for \(int i = 0; i < (\d+);", rows).group(1)) * rows_done == mm.n * mm.terms
        # tiles: blocks of TILE_COLUMNS columns covering [0, m), each reading the rows of B
        # (from its traced values, not from the spans) that hold a nonzero in its columns
        nonzero = np.array([not v.is_zero() for v in traced[mm.b]]).reshape(mm.k, mm.m)
        blocks = re.findall(r"// columns \[(\d+), (\d+)\): rows (.*?) of \w+\n.*?static const short runs\[\] = "
                            r"\{([\d, ]+)\};\n\s*rbd_product_cols<(\d+), (\d+), (\d+), (\d+), (\d+), (\w+)>"
                            r"\(\w+, \(w \+ \d+\), (\w+), runs, (\d+)\)", tiles, re.S)
        assert [(int(b[0]), int(b[1])) for b in blocks] == [(j, min(j + printer.TILE_COLUMNS, mm.m))
                                                            for j in range(0, mm.m, printer.TILE_COLUMNS)]
        done = 0
        for j0, j1, _, flat, n, kk, mcols, jj, w, neg, out, nruns in blocks:
            j0, j1, flat = int(j0), int(j1), [int(x) for x in flat.split(",")]
            assert (int(n), int(kk), int(mcols), int(jj), int(w), neg, out) == (mm.n, mm.k, mm.m, j0, j1 - j0, "true", mm.out)
            assert int(nruns) * 2 == len(flat)
            read = sorted(x for a, b in zip(flat[::2], flat[1::2]) for x in range(a, b))
            assert read == [r for r in range(mm.k) if nonzero[r, j0:j1].any()]
            done += mm.n * (j1 - j0) * len(read)
        assert f"the tiles do {done} multiply-adds" in tiles
    pb = print_kernel(k, "float64", CUDA, epilogue=False)
    for mm, lines in zip(k.post, print_epilogue_shared(k, pb, "float64", CUDA, "lane", "LANES")):
        text = "\n".join(lines)
        work = 0
        for elems, sums in re.findall(r"e < (\d+); e \+= LANES\) \{\n.*?\n.*?\n((?:  for \(int l.*\n)*)", text):
            per = sum(int(b) - int(a) for a, b in re.findall(r"for \(int l = (\d+); l < (\d+);", sums))
            work += int(elems) * per
        assert work == mm.n * mm.terms, mm.out
        assert text.count(f"{mm.out}[i * {mm.m} + j] = acc;") == len(mm.column_groups())  # every element written


def test_compiled_sparse_product_equals_dense_reference(tree):
    """The C++ kernel of the branched robot against −M⁻¹·∂τ formed densely from the reference."""
    m = tree[True]
    kern = rbdgen.build(m, kernels=["aba_derivatives"], opt="-O0", simd=False)
    q, v, _, tau = random_state(m, seed=7, n=4)
    dq, dv, minv = kern.aba_derivatives(q, v, tau)
    qdd = ref.aba(m, q, v, tau)
    dtau_dq, dtau_dv = ref.rnea_derivatives(m, q, v, qdd)
    Mi = ref.minv(m, q)
    assert relerr(minv, Mi) <= TOL64
    assert relerr(dq, -Mi @ dtau_dq) <= TOL64 and relerr(dv, -Mi @ dtau_dv) <= TOL64
    one = kern.aba_derivatives(q[2], v[2], tau[2])
    assert relerr(one[0], -Mi[2] @ dtau_dq[2]) <= TOL64


def test_tiled_product_scaled_and_both_paths(tree, monkeypatch):
    """The tiles' other branch: a product with a scale other than ±1 (a declared kernel may give
    one; rbdgen's own are −1) sums with += and scales at the store. ∇FD traced with its products'
    scale set to 2.5 must give −2.5 × the usual ∂q̈, in the one-state path (tiles) and in the
    SIMD batch path (rows, same scale) alike."""
    import dataclasses

    from rbdgen import registry

    m = tree[True]
    plain = rbdgen.build(m, kernels=["aba_derivatives"])
    real = registry.trace

    def scaled_trace(model, name, fold=True):
        k = real(model, name, fold=fold)
        if name != "aba_derivatives":
            return k
        k = dataclasses.replace(k, post=[dataclasses.replace(mm, scale=2.5) for mm in k.post])
        return k

    monkeypatch.setattr(registry, "trace", scaled_trace)
    monkeypatch.setenv("RBDGEN_GENERATION_CACHE", "0")  # the cache's key does not see the patched trace
    kern = rbdgen.build(m, kernels=["aba_derivatives"])
    q, v, _, tau = random_state(m, seed=11, n=9)
    want = plain.aba_derivatives(q, v, tau)
    got = kern.aba_derivatives(q, v, tau)                       # batch of 9: SIMD blocks, then one state
    one = kern.aba_derivatives(q[4], v[4], tau[4])
    for i in range(2):
        assert relerr(got[i], -2.5 * want[i]) <= TOL64
        assert relerr(one[i], -2.5 * want[i][4]) <= TOL64
    assert np.array_equal(got[2], want[2])                      # M⁻¹ itself untouched


@pytest.mark.parametrize("march", ["native", "x86-64"])
def test_generated_sources_compile_without_warnings(tmp_path, march):
    """rbdgen's own builds keep the compiler's warnings to themselves when it succeeds, so a
    warning in generated code would reach only the users who compile a generated package with
    their own -Werror. Here every source of a branched floating-base robot's ∇FD (6 joints:
    12 × 12 products in tiles of six rows and vectors of 8 and 4 doubles), both dtypes, compiles
    with -O3 -Wall -Wextra -Werror (the optimiser's warnings need -O3, not -fsyntax-only).
    With nv a multiple of six, GCC 12 warned of an overflow in the tiles' (empty) remainder loop
    before its bounds were made constants (-Waggressive-loop-optimizations)."""
    import subprocess

    from rbdgen.targets.cpu import generate_cpu
    from rbdgen.toolchain.compiler import find_cxx

    p = tmp_path / "tree6.urdf"
    p.write_text(tree_urdf(6, seed=4, joint_types=("revolute", "prismatic"), fixed_every=0))
    m = rbdgen.load_urdf(p, floating_base=True)
    assert m.nv == 12 and m.nv >= printer.TILE_MIN
    gen = generate_cpu(m, dtypes=("float64", "float32"), kernels=["aba_derivatives"], python=False)
    for fn, text in gen.files.items():
        (tmp_path / fn).write_text(text)
    sources = [fn for dt in ("float64", "float32") for fn in gen.sources[dt]]
    assert sum("_parts" not in fn for fn in sources) == 2     # the kernel's own sources, where the tiles are
    for fn in sources:
        r = subprocess.run([find_cxx(), "-std=c++17", "-O3", f"-march={march}", "-fopenmp", "-Wall", "-Wextra",
                            "-Werror", "-Wno-psabi", "-c", fn, "-o", "/dev/null"], cwd=tmp_path,
                           capture_output=True, text=True)
        assert r.returncode == 0, f"{fn} (-march={march}):\n{r.stderr[:3000]}"
