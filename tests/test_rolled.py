"""The rolled lowering (issue 44): loops over bodies, one piece of code per kind of body.

Oracles: the NumPy reference and Pinocchio (through :func:`rbdgen.validate.validate`, every
kernel, batch and single state), the folded trace interpreted (the generic trace computes the
same numbers), and the structure of the rolled code itself (its size stops growing with links).
"""
from __future__ import annotations

import importlib
import re

import numpy as np
import pytest

import rbdgen
from rbdgen import registry
from rbdgen.errors import RbdgenError
from rbdgen.ir import interp
from rbdgen.ir.roll import AUTO_OPS, roll
from rbdgen.robots import chain_urdf, tree_urdf
from rbdgen.validate import validate

from conftest import ROBOTS, assert_one_error_line, load_case, run_main


def _robot(name):
    return next(r for r in ROBOTS if r.name == name)


def _urdf_model(tmp_path, text, name, floating=False):
    p = tmp_path / f"{name}.urdf"
    p.write_text(text)
    return rbdgen.load_urdf(p, floating_base=floating)


#: the joints of :func:`_periodic`: (type, axis), repeated along the robot
_JOINTS = [("revolute", (0.0, 0.0, 1.0)), ("revolute", (0.36, -0.48, 0.8)), ("prismatic", (1.0, 0.0, 0.0)),
           ("planar", None), ("revolute", (0.0, 1.0, 0.0)), ("spherical", None), ("revolute", (0.0, 0.0, -1.0))]


def _periodic(n: int, *, floating=False, branched=False, kinds=_JOINTS):
    """A robot of ``n`` joints whose numbers repeat with period ``len(kinds)`` (so each kind of
    body has many members): every joint type, aligned and general axes, identity, quarter-turn
    and general rotations in X_tree; a chain, or a binary tree (parent of joint k: (k − 1) // 2)."""
    from rbdgen import spatial as sp
    from rbdgen.model import ModelBuilder

    rots = [np.eye(3), sp.rot_x(np.pi / 2), sp.rot_z(0.3) @ sp.rot_x(-0.7)]
    b = ModelBuilder(f"periodic{n}{'_tree' if branched else ''}")
    names = []
    if floating:
        b.add_joint("root", "floating", "world", "base", xyz=np.zeros(3), rotation=np.eye(3), axis=None,
                    mass=2.0, com=np.array([0.01, 0.0, 0.02]), inertia=np.diag([0.02, 0.03, 0.04]))
    top = "base" if floating else "world"
    for k in range(n):
        kind, axis = kinds[k % len(kinds)]
        parent = top if k == 0 else names[(k - 1) // 2 if branched else k - 1]
        c = k % len(kinds)
        b.add_joint(f"j{k}", kind, parent, f"l{k}", xyz=np.array([0.1 + 0.01 * c, -0.02 * c, 0.05]),
                    rotation=rots[c % 3], axis=None if axis is None else np.array(axis),
                    mass=0.5 + 0.1 * c, com=np.array([0.02, 0.01 * c, -0.03]),
                    inertia=np.diag([0.004 + 0.001 * c, 0.005, 0.006]))
        names.append(f"l{k}")
    return b.build()


def _validated(model, simd=False, **kw):
    # -O0: what is checked is the lowering, not g++'s -O3 (a quarter of its compile time here).
    # simd=False: the batch runs the scalar OpenMP loop over the single-state call, which halves
    # the compile (the SIMD path is a second instantiation of every kernel); SIMD_CASES and the
    # float32 test keep it, so the rolled kernels' vector batch path is checked on a chain and a
    # floating tree in float64 and on the chain in float32
    rows = validate(model, unroll=False, states=4, seed=3, progress=False, opt="-O0", simd=simd, **kw)
    bad = [(r.kernel, r.err_ref, r.err_pin, r.tol) for r in rows if not r.passed]
    assert not bad, bad
    return rows


#: the cases whose rolled kernels are also checked on the SIMD batch path
SIMD_CASES = ("iiwa14-fixed", "quadruped-floating")


@pytest.mark.parametrize("case", ["iiwa14-fixed", "quadruped-floating", "panda_coupled-fixed"])
def test_every_rolled_kernel_matches_reference_and_pinocchio(case):
    robot, base = case.rsplit("-", 1)
    model = load_case(_robot(robot), base == "floating")
    rows = _validated(model, simd=case in SIMD_CASES)
    assert {r.kernel for r in rows} == set(registry.applicable(model, None))


def test_rolled_float32_within_the_declared_bounds():
    _validated(load_case(_robot("iiwa14"), False), dtype="float32", simd=True,
               kernels=["rnea", "crba", "aba", "minv", "aba_derivatives", "forward_kinematics"])


def test_rolled_joint_kinds_and_branches(tmp_path):
    """Every joint type, on a branched tree and on a floating chain, and a URDF tree."""
    _validated(_periodic(16, branched=True), kernels=["rnea", "crba", "aba", "minv", "rnea_derivatives",
                                                      "aba_derivatives", "forward_kinematics", "rnea_scan",
                                                      "aba_scan"])
    _validated(_periodic(12, floating=True), kernels=["rnea", "aba", "crba", "aba_derivatives"])
    tree = _urdf_model(tmp_path, tree_urdf(9, branching=3, seed=5, joint_types=(
        "revolute", "prismatic", "continuous", "planar")), "tree", True)
    _validated(tree.with_frames(tree.leaf_links[:2]), kernels=["rnea", "aba", "crba", "contact_terms",
                                                               "osim_inverse", "frame_jacobian_world"])


def test_generic_trace_computes_what_the_folded_one_does():
    """The rolled lowering's trace (the model's numbers as unfolded parameters) against the
    folded trace, both interpreted: every kernel of a floating, branched robot."""
    model = load_case(_robot("quadruped"), True)
    inp = registry.random_inputs(model, 3, seed=4)
    for k in registry.applicable(model, None):
        args = [inp[a.name] for a in registry.get(k).inputs]
        a = interp.run(registry.trace(model, k), *args)
        b = interp.run(registry.trace(model, k, generic=True), *args)
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            assert np.max(np.abs(x - y) / (1.0 + np.abs(x))) < 1e-12, k


def test_quarter_turn_frames_stay_folded_in_the_generic_trace(monkeypatch):
    """Bodies whose numbers are parameters but whose X_tree rotation is a quarter turn (nearly
    every URDF joint frame) keep that rotation's zeros and ±1s and their joint axis folded, only
    r_tree and the inertia as parameters: every joint type that has such a path (revolute about
    an aligned and a general axis, prismatic, planar, spherical, the floating base), each with
    one rotation. The generic trace still computes what the folded one does (both interpreted,
    every kernel), and does fewer operations than with every rotation a parameter."""

    from rbdgen.model import ModelBuilder

    T = importlib.import_module("rbdgen.algorithms.trace")  # the module (rbdgen.algorithms.trace is the function)
    perm = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # a quarter-turn rotation
    rx = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    kinds = [("revolute", (0.0, 0.0, 1.0), np.eye(3)), ("prismatic", (1.0, 0.0, 0.0), rx),
             ("revolute", (0.36, -0.48, 0.8), perm), ("planar", None, np.eye(3)),
             ("spherical", None, perm), ("revolute", (0.0, 1.0, 0.0), rx)]
    b = ModelBuilder("quarter_turns")
    b.add_joint("root", "floating", "world", "base", mass=2.0, com=np.array([0.01, 0.0, 0.02]),
                inertia=np.diag([0.02, 0.03, 0.04]))
    for k in range(12):  # two bodies of each kind, their numbers all different: none folded whole
        kind, axis, rot = kinds[k % len(kinds)]
        b.add_joint(f"j{k}", kind, "base" if k < 2 else f"l{(k - 2) // 2}", f"l{k}",
                    xyz=np.array([0.1 + 0.01 * k, -0.02 * k, 0.05]), rotation=rot,
                    axis=None if axis is None else np.array(axis), mass=0.5 + 0.1 * k,
                    com=np.array([0.02, 0.01 * k, -0.03]), inertia=np.diag([0.004 + 0.0002 * k, 0.005, 0.006]))
    model = b.build()
    generic = T.generic_bodies(model)
    assert generic == frozenset(range(model.nb))
    assert T.tree_structured_bodies(model, generic) == generic
    inp = registry.random_inputs(model, 3, seed=5)
    kernels = registry.applicable(model, None)
    for k in kernels:
        args = [inp[a.name] for a in registry.get(k).inputs]
        a = interp.run(registry.trace(model, k), *args)
        g = interp.run(registry.trace(model, k, generic=True), *args)
        for x, y in zip(a if isinstance(a, tuple) else (a,), g if isinstance(g, tuple) else (g,)):
            assert np.max(np.abs(x - y) / (1.0 + np.abs(x))) < 1e-12, k
    ops = {k: registry.trace(model, k, cached=False, generic=True).op_counts()["total"] for k in kernels}
    monkeypatch.setattr(T, "tree_structured_bodies", lambda m, generic: frozenset())
    dense = {k: registry.trace(model, k, cached=False, generic=True).op_counts()["total"] for k in kernels}
    assert all(ops[k] <= dense[k] for k in kernels), {k: (ops[k], dense[k]) for k in kernels}
    for k in ("rnea", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives", "forward_kinematics"):
        assert ops[k] < 0.95 * dense[k], (k, ops[k], dense[k])


def test_bodies_rotated_by_a_general_rotation_are_generic(tmp_path, monkeypatch):
    """A body whose X_tree and inertia have no 0 or ±1 where they could (a frame rotated by a
    general rotation) gains nothing from folding its numbers, and folded, its kind and its
    parents' split on which of its numbers' products happen to come out equal (a rounding apart
    in one body, equal in the next). A random chain's every third body is so (synthetic.py:
    rpy drawn at random): with those bodies generic, aba prints far less code for about the same
    operations a call; with the rule off (every such pattern folded, as before) it does not."""
    T = importlib.import_module("rbdgen.algorithms.trace")
    m = _urdf_model(tmp_path, chain_urdf(300, seed=300, fixed_every=0), "c300dense")
    dense = {i for i in range(m.nb) if T._dense(T._pattern(m, i))}
    assert len(dense) >= m.nb // 4 and dense <= T.generic_bodies(m)
    on = registry.trace(m, "aba", cached=False, generic=True)
    r_on = roll(on)
    monkeypatch.setattr(T, "_dense", lambda pattern: False)
    assert not dense & T.generic_bodies(m)
    off = registry.trace(m, "aba", cached=False, generic=True)
    r_off = roll(off)
    assert r_on.n_ops < 0.8 * r_off.n_ops, (r_on.n_ops, r_off.n_ops)
    assert len(r_on.kinds) < len(r_off.kinds)
    calls_on, calls_off = on.op_counts()["total"], off.op_counts()["total"]
    assert calls_on <= 1.01 * calls_off, (calls_on, calls_off)
    inp = registry.random_inputs(m, 2, seed=3)
    args = [inp[a.name] for a in registry.get("aba").inputs]
    ref = interp.run(registry.trace(m, "aba"), *args)
    got = interp.run(on, *args)
    assert np.max(np.abs(got - ref) / (1.0 + np.abs(ref))) < 1e-9


def test_folded_inertias_are_symmetric_in_the_rolled_trace(tmp_path):
    """The model's spatial inertias can have triangles an ulp apart (R·I·Rᵀ and m·C·Cᵀ round
    them differently; 20 of TALOS's 33 bodies). Folded as they are, a symmetric pair is one
    constant in one body and two in the next body of the same pattern, and the rolled kernel's
    kinds split on it. The rolled trace takes both from the upper triangle: a random chain's
    rolled aba is the same code as for the model with its inertias made exactly symmetric, and
    the chain does have inertias that are not."""
    import dataclasses

    m = _urdf_model(tmp_path, chain_urdf(300, seed=300, fixed_every=0), "c300sym")
    assert sum(bool(np.any(I != I.T)) for I in m.inertia) >= 10
    sym = dataclasses.replace(m, inertia=np.array([np.triu(I) + np.triu(I, 1).T for I in m.inertia]))
    r, r_sym = (roll(registry.trace(x, "aba", cached=False, generic=True)) for x in (m, sym))
    assert (len(r.kinds), r.n_ops) == (len(r_sym.kinds), r_sym.n_ops)


@pytest.mark.parametrize("branched, small, big, kernels", [
    (False, 28, 112, ("rnea", "aba", "crba", "rnea_derivatives")),
    # crba's steps up to each ancestor see the patterns along the path, more of them on a tree
    (True, 112, 224, ("rnea", "aba", "rnea_derivatives"))])
def test_rolled_code_does_not_grow_with_links(branched, small, big, kernels):
    """A robot whose bodies repeat a few patterns: past the size where every combination of a
    body and its neighbours has appeared (the chain: one period of four; the binary tree: 112
    joints, a body's kind also depends on its children's), the rolled kernels print the same
    code for twice or four times the joints, while the work grows with them."""
    sizes = {}
    for n in (small, big):
        m = _periodic(n, branched=branched)
        for k in kernels:
            r = roll(registry.trace(m, k, generic=True))
            sizes[k, n] = (r.n_ops, sum(len(s.nodes) for s in r.segments))
    for k in kernels:
        printed_s, ran_s = sizes[k, small]
        printed_b, ran_b = sizes[k, big]
        assert ran_b > 0.9 * (big / small) * ran_s, k  # the work grows with the links (at least)
        assert printed_b == printed_s, (k, printed_s, printed_b)  # the code does not
        assert printed_b < ran_b / 4, (k, printed_b, ran_b)


def test_big_rolled_kernels_use_a_heap_scratch_and_match_reference(tmp_path):
    """A 300-link chain: rnea_scan's scratch is too big for a thread's stack (the single-state
    call keeps it in a per-thread buffer); batch and single state against the reference."""
    from rbdgen.targets.cpu.emit import STACK_SCRATCH_BYTES, generate_cpu

    m = _urdf_model(tmp_path, chain_urdf(300, seed=300, fixed_every=0), "c300")
    gen = generate_cpu(m, kernels=["rnea_scan"], unroll=False, python=False)
    assert gen.kernels["rnea_scan"].scratch * 8 > STACK_SCRATCH_BYTES
    assert "static thread_local" in gen.files[next(f for f in gen.files if f.endswith("rnea_scan_f64.cpp"))]
    _validated(m, kernels=["rnea", "rnea_scan", "aba"], pinocchio=False)


def test_auto_rolls_only_big_kernels(tmp_path):
    from rbdgen.targets.cpu.emit import generate_cpu

    iiwa = load_case(_robot("iiwa14"), False)
    gen = generate_cpu(iiwa, kernels=["rnea", "aba_derivatives"], unroll="auto", python=False)
    assert {k: pk.lowering for k, pk in gen.kernels.items()} == {"rnea": "unrolled", "aba_derivatives": "unrolled"}
    m = _urdf_model(tmp_path, chain_urdf(150, seed=9, fixed_every=0), "c150")
    live = {k: sum(1 for n in registry.trace(m, k).live_nodes() if n.op not in ("const", "input"))
            for k in ("rnea", "crba")}
    assert live["rnea"] < AUTO_OPS <= live["crba"]
    gen = generate_cpu(m, kernels=["rnea", "crba"], unroll="auto", python=False)
    assert gen.kernels["rnea"].lowering == "unrolled" and gen.kernels["crba"].lowering == "rolled"


def test_rolled_generation_is_deterministic():
    from rbdgen.targets.cpu.emit import generate_cpu

    m = load_case(_robot("quadruped"), True)
    a = generate_cpu(m, kernels=["aba", "crba"], unroll=False, python=False).files
    registry._cache.clear()
    b = generate_cpu(m, kernels=["aba", "crba"], unroll=False, python=False).files
    assert a == b


def test_kinds_that_kernels_print_alike_are_compiled_once(tmp_path, capsys):
    """Each kind of a library's rolled kernels is defined once: the steps that rnea, nle and
    gravity print alike (the quadruped's: parts of the force pass) are one function in a kinds
    source of its own, which each of them calls; a kind only one kernel calls stays in that
    kernel's source. A kernel loaded on its own compiles only the kinds it calls, and gives the
    reference's numbers."""
    from rbdgen.package import load_package
    from rbdgen.package.load import read_sources
    from rbdgen.reference import rnea as ref_rnea
    from rbdgen.targets.base import get_target
    from rbdgen.targets.cpu.emit import generate_cpu

    m = load_case(_robot("quadruped"), True)
    kernels = ["rnea", "nle", "gravity", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives"]
    gen = generate_cpu(m, kernels=kernels, unroll=False, python=False)
    kinds_src = gen.kinds["float64"]
    assert kinds_src and set(kinds_src) <= set(gen.sources["float64"])
    definition = r"void (rbd_kind\d+)\([^;{]*\) \{\n(.*?)\n\}\n"  # not a declaration
    shared = {}
    for src in kinds_src:
        for name, body in re.findall(definition, gen.files[src], re.S):
            assert name not in shared, name
            shared[name] = body
    calls, own = {}, {}
    for k in kernels:
        text = gen.files[f"{gen.prefix}_{k}_f64.cpp"]
        calls[k] = set(re.findall(r"(rbd_kind\d+)<S>\(", text))
        own[k] = dict(re.findall(definition, text, re.S))
        assert calls[k] and calls[k] == set(own[k]) | (calls[k] & set(shared)), k
        assert not set(own[k]) & set(shared), k
        # each kinds source lists the kernels that call it
        assert {s for s, users in kinds_src.items() if k in users} == {
            s for s in kinds_src if any(re.search(rf"void {c}\(", gen.files[s]) for c in calls[k])}, k
    texts = list(shared.values()) + [b for k in kernels for b in own[k].values()]
    assert len(set(texts)) == len(texts) < sum(len(gen.kernels[k].kinds) for k in kernels)  # each text once
    assert all(sum(c in calls[k] for k in kernels) > 1 for c in shared)  # shared: called by several
    assert all(sum(c in calls[j] for j in kernels) == 1 for k in kernels for c in own[k])
    assert calls["rnea"] & calls["nle"] & set(shared) and calls["nle"] & calls["gravity"] & set(shared)
    # a package loaded for rnea alone: its own source and the kinds sources it calls, and the
    # reference's numbers
    out = tmp_path / "pkg"
    rc, _, err = run_main(capsys, "generate", rbdgen.robots.path("quadruped"), "--floating-base", "--unroll", "no",
                          "--kernels", ",".join(kernels), "--out", out, "--quiet")
    assert rc == 0, err
    pkg = next(p for p in out.iterdir() if p.is_dir())
    sub = get_target("cpu").subset(read_sources(pkg), ["rnea"], "float64")
    mine = {s for s, users in kinds_src.items() if "rnea" in users}
    assert set(sub.info["sources"]["float64"]) - {f"{gen.prefix}_left_out_f64.cpp"} == mine | {
        f"{gen.prefix}_rnea_f64.cpp"}
    # … and of those, only the kinds rnea calls
    assert {c for s in mine for c in re.findall(r"void (rbd_kind\d+)\(", sub.files[s])} == calls["rnea"] & set(shared)
    assert any(set(re.findall(r"void (rbd_kind\d+)\(", gen.files[s])) - calls["rnea"] for s in mine)
    kern = load_package(pkg, kernels=["rnea"], opt="-O1")
    rng = np.random.default_rng(3)
    q, v, a = m.random_q(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)
    assert np.max(np.abs(kern.rnea(q, v, a) - ref_rnea(m, q, v, a))) < 1e-10


def test_bad_unroll_values_are_refused(capsys, tmp_path):
    m = load_case(_robot("iiwa14"), False)
    with pytest.raises(RbdgenError, match="unroll must be"):
        rbdgen.build(m, kernels=["rnea"], unroll="sometimes")
    rc, out, err = run_main(capsys, "generate", rbdgen.robots.path("iiwa14"), "--out", tmp_path / "o",
                            "--unroll", "sometimes")
    assert rc == 2
    assert_one_error_line(err, out, "unroll", "sometimes")
    rc, out, err = run_main(capsys, "generate", rbdgen.robots.path("iiwa14"), "--out", tmp_path / "o",
                            "--target", "cuda", "--unroll", "maybe")
    assert rc == 2
    assert_one_error_line(err, out, "unroll", "maybe")
    # the Verilog target has no rolled lowering: the option is refused, not ignored
    rc, out, err = run_main(capsys, "generate", rbdgen.robots.path("iiwa14"), "--out", tmp_path / "o",
                            "--target", "verilog", "--fixed", "32,16", "--unroll", "no")
    assert rc == 2
    assert_one_error_line(err, out, "--unroll", "cpu, cuda or hls")
    with pytest.raises(TypeError, match="unroll"):
        rbdgen.build(m, target="verilog", fixed=(32, 16), kernels=["rnea"], unroll=False)


def test_cli_generates_a_rolled_package(capsys, tmp_path):
    """`rbdgen generate --unroll no`: the package's kernels are rolled, and they load and run."""
    import subprocess
    import sys

    out_dir = tmp_path / "pkg"
    rc, out, err = run_main(capsys, "generate", rbdgen.robots.path("iiwa14"), "--out", out_dir, "--unroll", "no",
                            "--kernels", "rnea,aba")
    assert rc == 0, err
    srcs = list(out_dir.rglob("*_rnea_f64.cpp"))
    assert srcs and "rolled (issue 44)" in srcs[0].read_text()
    code = ("import numpy as np, sys; sys.path.insert(0, sys.argv[1]); import importlib;"
            "import rbdgen.reference as R; import rbdgen, rbdgen.robots;"
            "pkg = importlib.import_module(sys.argv[2]); k = pkg.load();"
            "m = rbdgen.load_urdf(rbdgen.robots.path('iiwa14'));"
            "rng = np.random.default_rng(0); q = m.random_q(rng); v = rng.normal(size=7); a = rng.normal(size=7);"
            "print(float(np.max(np.abs(k.rnea(q, v, a) - R.rnea(m, q, v, a)))))")
    pkg = next(p.name for p in out_dir.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    r = subprocess.run([sys.executable, "-c", code, str(out_dir), pkg], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.split()[-1]) < 1e-9


# ---------------------------------------------------------------------------------------------
# CUDA: the rolled lowering on the GPU target (thread shape: the serial driver on one thread;
# block shape: each stage's blocks shared out over the lanes). No GPU here: nvcc compiles the
# device code (sm_90, warnings as errors) and the host emulation runs the same __host__
# __device__ functions in the kernel's order, thread by thread (test_cuda.py says how).
# ---------------------------------------------------------------------------------------------

def _cuda_errors(kern, model, shape, n=13, single=3):
    """Per kernel: the error of the emulated ``shape`` against the NumPy reference (batch and
    one state), or None where the kernel has no such shape (it refuses, saying why)."""
    from conftest import kernel_args, kernel_err, random_state, ref_out

    q, v, a, tau = random_state(model, seed=7, n=n)
    e = kern.emulated(shape)
    errs = {}
    for k in e.kernels:
        args = kernel_args(k, q, v, a, tau, model)
        exp = ref_out(model, k, *args)
        f = e.kernel(k)
        try:
            batch = f(*args)
        except ValueError as err:
            assert shape == "thread" and "no thread shape" in str(err), err
            errs[k] = None
            continue
        one = f(*(x[single] for x in args))
        exp1 = tuple(x[single] for x in exp) if isinstance(exp, tuple) else exp[single]
        errs[k] = max(kernel_err(batch, exp), kernel_err(one, exp1))
    return errs


def _check_cuda(model, kernels=None, no_thread=("aba_derivatives",), arch="compute_90"):
    """Build rolled (-O0: the emulation is host code; PTX only unless ``arch`` says otherwise:
    nvcc's device front end checks the device code, ptxas adds a third to the build and only
    matters where its limits are the point, as for the big tables below), both shapes against
    the reference; the thread shape missing for ``no_thread`` at most (one state's workspace over
    the per-thread limit)."""
    from conftest import TOL64

    kern = rbdgen.build(model, target="cuda", kernels=kernels, unroll=False, opt="-O0", arch=arch, werror=True)
    assert all(kern.info[k]["lowering"] == "rolled" for k in kern.kernels)
    for shape in ("thread", "block"):
        errs = _cuda_errors(kern, model, shape)
        bad = {k: e for k, e in errs.items() if e is not None and not e <= TOL64}
        assert not bad, (shape, bad)
        # the thread shape is refused only where one state's workspace is over the per-thread limit
        missing = {k for k, e in errs.items() if e is None}
        if shape == "thread":
            assert missing == {k for k in kern.kernels if not kern.info[k]["thread_shape"]}, missing
            assert missing <= set(no_thread), missing
        else:
            assert not missing
    return kern


#: a kernel of each family (the others are these with fewer inputs, other frames, or the same
#: passes: forward kinematics and the bias accelerations are rnea's and the Jacobians' first pass);
#: every kernel of every robot case is built rolled and run on the GPU by the GPU check
#: (test_cuda.py: test_gpu_every_kernel_matches_reference)
CUDA_FAMILIES = ("rnea", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives", "frame_jacobian_world",
                 "contact_terms", "rnea_scan", "aba_scan")


def test_rolled_cuda_every_kernel_family_emulated():
    """A kernel of each family on a floating, branched robot with frames, rolled, in both
    launch shapes."""
    model = load_case(_robot("quadruped"), True)
    kern = _check_cuda(model, CUDA_FAMILIES)
    assert set(kern.kernels) == set(CUDA_FAMILIES) and set(CUDA_FAMILIES) <= set(registry.applicable(model, None))
    # the block shape shares each tree level's bodies out: the four legs side by side
    assert kern.info["rnea"]["lanes"] >= 4 and kern.info["crba"]["lanes"] >= 4


def test_rolled_cuda_joint_kinds_and_a_tree():
    """Every joint type on a binary tree, where a stage holds many members of one kind."""
    _check_cuda(_periodic(14, branched=True), ["rnea", "crba", "minv", "rnea_scan", "aba_scan"])


def test_rolled_stages_never_read_their_own_stage():
    """The block shape runs a stage's blocks on different lanes with no barrier between them, so
    none may read a value another block of the same stage (or a later one) writes. The emulation
    runs the lanes in order and would not notice; this checks the stages themselves, on every
    kernel of a branched floating robot and of a tree with every joint type."""
    for model in (load_case(_robot("quadruped"), True), _periodic(14, branched=True)):
        for k in registry.applicable(model, None):
            R = roll(registry.trace(model, k, generic=True))
            stage = R.stage
            seg_of = {n.id: si for si, s in enumerate(R.segments) for n in s.nodes}
            for si, s in enumerate(R.segments):
                for n in s.nodes:
                    for a in n.args:
                        u = seg_of.get(a.id, si)
                        assert u == si or stage[u] < stage[si], (k, si, u)
                        if a.op in ("sin", "cos") and a.id not in seg_of:
                            assert stage[si] >= 1, (k, si)


def test_rolled_cuda_tables_move_to_global_memory_when_large(tmp_path):
    """A rolled kernel's tables are read from constant memory up to CONSTANT_TABLES bytes and
    from global memory above (64 KiB of constant memory a module); the big chain's still compile
    and run (emulated) against the reference."""
    from rbdgen.targets.cuda.emit import CONSTANT_TABLES, generate_cuda

    small = generate_cuda(load_case(_robot("iiwa14"), False), kernels=["rnea"], unroll=False)
    assert small.kernels["rnea"]["float64"]["tables_bytes"] <= CONSTANT_TABLES
    assert "#define RBD_IIWA14_RNEA_F64_TABLE __constant__" in small.files["rbd_iiwa14_rnea_f64.cuh"]
    m = _urdf_model(tmp_path, chain_urdf(200, seed=200, fixed_every=0), "c200")
    gen = generate_cuda(m, kernels=["rnea", "rnea_scan"], unroll=False)
    # a random chain: every body's numbers its own (~0.9 KB a body for rnea)
    assert all(i["float64"]["tables_bytes"] > CONSTANT_TABLES for i in gen.kernels.values())
    scan = next(t for f, t in gen.files.items() if f.endswith("_rnea_scan_f64.cuh"))
    assert "_RNEA_SCAN_F64_TABLE __device__\n" in scan
    # machine code: ptxas is what refuses a module's constant data over 64 KiB
    kern = _check_cuda(m, ["rnea", "rnea_scan"], no_thread=("rnea", "rnea_scan"), arch="90")
    assert kern.info["rnea_scan"]["lanes"] > 1  # the scan's levels: many bodies side by side


def test_rolled_cuda_generation_is_deterministic_and_smaller():
    from rbdgen.targets.cuda.emit import generate_cuda

    m = load_case(_robot("quadruped"), True)
    a = generate_cuda(m, kernels=["aba_derivatives"], unroll=False).files
    registry._cache.clear()
    b = generate_cuda(m, kernels=["aba_derivatives"], unroll=False).files
    assert a == b
    u = generate_cuda(m, kernels=["aba_derivatives"]).files
    assert sum(map(len, a.values())) < sum(map(len, u.values())) / 2


def test_rolled_cuda_float32_within_the_declared_bounds():
    """float32: the tables' literals, the kinds and the gather in single precision."""
    from conftest import TOL32, kernel_errors

    m = load_case(_robot("iiwa14"), False)
    kern = rbdgen.build(m, target="cuda", dtype="float32", kernels=("rnea", "minv"), unroll=False, opt="-O0",
                        arch="90", werror=True)
    for shape in ("thread", "block"):
        errs = kernel_errors(kern.emulated(shape), m, np.float32, seed=5, n=13, single=3)
        assert all(e <= TOL32[k] for k, e in errs.items()), (shape, errs)


# ---------------------------------------------------------------------------------------------
# HLS: the rolled lowering as a folded design (a module per kind, shared by its members, its
# numbers from ROM tables). C-simulated with g++ and the ap_types headers, as every HLS kernel;
# the synthesis path of the rolled sources is test_hls_synthesis.py's.
# ---------------------------------------------------------------------------------------------


def _straight_line_of_the_same_trace(monkeypatch, model, **kw):
    """The HLS kernels of the rolled lowering's own trace (the generic one) printed straight-line:
    what the rolled kernels must compute bit for bit."""
    with monkeypatch.context() as mp:
        mp.setattr(registry, "trace_lowered",
                   lambda m, k, unroll, fold=True: (registry.trace(m, k, fold=fold, generic=True), False))
        return rbdgen.build(model, target="hls", name=f"{model.name}_straight", **kw)


@pytest.mark.parametrize("case, fixed, kernels", [
    ("iiwa14-fixed", (32, 16), ("rnea", "forward_kinematics", "aba", "minv", "aba_derivatives")),
    ("quadruped-floating", None, ("crba", "aba", "rnea_derivatives")),
], ids=["iiwa14-fixed32_16", "quadruped-floating-double"])
def test_rolled_hls_is_its_trace_bit_for_bit_and_within_the_bounds(case, fixed, kernels, monkeypatch):
    """The rolled HLS kernels (the kinds' functions, their ROM tables, the runs, the gather and
    the dense products' mirrored outputs) against the same trace printed straight-line: the same
    bits in ap_fixed<32,16> and in double. And against the reference (and Pinocchio) within the
    kernel's measured bound for the format: the rolled trace computes from the model's numbers
    alone in float64 (Graph.fold_constants) what the folded trace does, so its ap_fixed error is
    the straight-line design's (before that, 5-10x larger on iiwa aba and minv)."""
    robot, base = case.rsplit("-", 1)
    model = load_case(_robot(robot), base == "floating")
    kw = dict(kernels=kernels, fixed=fixed)
    rolled = rbdgen.build(model, target="hls", unroll=False, **kw)
    straight = _straight_line_of_the_same_trace(monkeypatch, model, **kw)
    inp = registry.random_inputs(model, 6, seed=11)
    for k in kernels:
        args = [inp[a.name] for a in registry.get(k).inputs]
        a, b = getattr(rolled, k)(*args), getattr(straight, k)(*args)
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            np.testing.assert_array_equal(x, y, err_msg=f"{case} {k}: rolled vs straight-line HLS")
    rows = validate(model, target="hls", unroll=False, states=4, seed=3, progress=False, compiled=rolled, **kw)
    bad = [(r.kernel, r.err_ref, r.err_pin, r.tol) for r in rows if not r.passed]
    assert not bad, bad


def test_rolled_hls_sources_are_a_folded_design(tmp_path):
    """What the sources say a tool would build: each kind a function the tool keeps (INLINE off)
    with its tables inside, typed as the datapath (ROMs), each run a loop of constant bounds,
    the workspace a memory (not partitioned into registers); the straight-line design's
    pragmas where they apply. Deterministic, and the options that schedule the straight-line
    datapath are refused with the reason."""
    from rbdgen.targets.hls.emit import generate_hls, numeric_type

    m = load_case(_robot("quadruped"), True)
    nt = numeric_type(fixed=(32, 16))
    gen = generate_hls(m, nt, kernels=("aba", "aba_derivatives"), unroll=False)
    assert gen.files == generate_hls(m, nt, kernels=("aba", "aba_derivatives"), unroll=False).files
    src = gen.files[f"{gen.prefix}_aba_derivatives.cpp"]
    n_kinds = src.count("#pragma HLS INLINE off")
    assert n_kinds >= 5 and src.count("static const S c_tab[") + src.count("static const int x_tab[") > n_kinds
    assert "rolled" in src and "ARRAY_PARTITION variable=w" not in src
    assert "aba_derivatives_runs" not in src and "switch" not in src  # the runs: loops of constant bounds
    body = src[src.index("static void aba_derivatives("):]
    assert "for (int m = " in body and "w[" in body
    unrolled = generate_hls(m, nt, kernels=("aba",)).files[f"{gen.prefix}_aba.cpp"]
    assert "ARRAY_PARTITION variable=w" in unrolled and "INLINE off" not in unrolled
    with pytest.raises(RbdgenError, match=r"--unroll no with --dsp-budget 100: .*straight-line datapath only"):
        generate_hls(m, nt, kernels=("aba",), unroll=False, dsp_budget=100)
    with pytest.raises(RbdgenError, match=r"--fixed auto with --unroll"):
        rbdgen.build(m, target="hls", kernels=("aba",), fixed="auto", unroll=False)


def test_rolled_hls_cost_folds_the_operators_over_the_bodies(capsys):
    """The cost of the folded design (rolled_cost): on chains whose bodies repeat one pattern, the
    DSPs (the kinds' modules side by side) do not grow with the links and the latency grows with
    them (the members run one after another), where the straight-line design's DSPs grow. And
    `inspect --cost --unroll no` reports it on the HLS target, the rolled kernels' kinds on the
    CPU target."""
    from rbdgen.targets.hls.emit import cost_table, numeric_type

    nt = numeric_type(fixed=(32, 16))
    one_kind = [("revolute", (0.0, 0.0, 1.0))]
    rows = {n: cost_table(_periodic(n, kinds=one_kind), nt, ("rnea", "aba"), unroll=False) for n in (8, 16, 32)}
    flat = {n: cost_table(_periodic(n, kinds=one_kind), nt, ("rnea", "aba")) for n in (8, 32)}
    for i, k in enumerate(("rnea", "aba")):
        r = {n: rows[n][i] for n in rows}
        assert all(x["lowering"] == "rolled" and x["kernel"] == k for x in r.values())
        assert r[8]["kinds"] == r[16]["kinds"] == r[32]["kinds"] and r[8]["dsp"] == r[16]["dsp"] == r[32]["dsp"], r
        assert r[8]["latency_cycles"] < r[16]["latency_cycles"] < r[32]["latency_cycles"], r
        # linear in the links: the 16 links from 16 to 32 cost what the 8 from 8 to 16 did, twice
        step1 = r[16]["latency_cycles"] - r[8]["latency_cycles"]
        step2 = r[32]["latency_cycles"] - r[16]["latency_cycles"]
        assert abs(step2 - 2 * step1) <= 0.05 * step2, (step1, step2)
        assert flat[32][i]["dsp"] > flat[8][i]["dsp"] and flat[32][i]["lowering"] == "unrolled", (flat, k)
    rc, out, err = run_main(capsys, "inspect", rbdgen.robots.path("iiwa14"), "--cost", "--target", "hls",
                            "--fixed", "32,16", "--unroll", "no", "--kernels", "rnea,aba", "-q")
    assert rc == 0, err
    assert "rolled (--unroll no): a module per kind" in out and "ROM bits" in out
    rc, out, err = run_main(capsys, "inspect", rbdgen.robots.path("iiwa14"), "--cost", "--unroll", "no",
                            "--kernels", "rnea,aba", "-q")
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("aba ") and "rolled" in ln)
    assert int(line.split()[2]) == len(roll(registry.trace(load_case(_robot("iiwa14"), False), "aba",
                                                             generic=True)).kinds), line


def _independent_runs(R) -> list:
    """The runs of ``R`` whose members read no value another member of the run computes, from the
    traced graph: each member's nodes, and the nodes their operands are."""
    out = []
    for kid, lo, hi in R.runs:
        members = R.kinds[kid].members[lo:hi]
        made = {n.id: si for si in members for n in R.segments[si].nodes}
        reads = any(made.get(a.id, si) != si for si in members for n in R.segments[si].nodes for a in n.args)
        if hi - lo > 1 and not reads:
            out.append((kid, lo, hi))
    return out


def test_rolled_hls_pipelines_its_modules_and_the_independent_runs():
    """--ii with --unroll no: each kind's module pipelined, each run's loop too, and a DEPENDENCE
    pragma (w carries nothing between members) exactly on the runs whose members read nothing of
    each other — ∇ID's columns of one body, not a chain's forward pass. Without the pragmas the
    sources are the latency design's, line for line (so the C simulation is; the synthesis path
    is test_hls_synthesis.py's). The cost model overlaps those runs and only those."""
    from rbdgen.ir.roll import roll
    from rbdgen.targets.hls.emit import cost_table, generate_hls, numeric_type

    m = _periodic(12, kinds=[("revolute", (0.0, 0.0, 1.0))])
    nt = numeric_type(fixed=(32, 16))
    ks = ("rnea", "rnea_derivatives")
    piped = generate_hls(m, nt, kernels=ks, unroll=False, ii=2)
    plain = generate_hls(m, nt, kernels=ks, unroll=False)
    for k in ks:
        src = piped.files[f"{piped.prefix}_{k}.cpp"]

        def statements(text):  # the pragmas out, a loop's braced body back on its line, no line count
            text = "\n".join(ln for ln in text.splitlines() if "#pragma HLS PIPELINE" not in ln
                              and "DEPENDENCE" not in ln and " statements" not in ln)
            return re.sub(r"\{\n\s*([^\n]*;)\n\s*\}", r"\1", text)

        assert statements(src) == statements(plain.files[f"{plain.prefix}_{k}.cpp"]), k
        R = roll(registry.trace(m, k, generic=True), reuse=False)
        free = _independent_runs(R)
        assert src.count("#pragma HLS DEPENDENCE variable=w type=inter false") == len(free), (k, free)
        n_loops = sum(1 for _, lo, hi in R.runs if hi - lo > 1)
        assert src.count("#pragma HLS PIPELINE II=2") == len(R.kinds) + n_loops, k
        assert "#pragma HLS PIPELINE II=2\n  bool dz" not in src  # not the top function: it would unroll the loops
        if k == "rnea":
            assert not free  # body i reads body i - 1
        else:
            assert free  # the columns of one body
        rows = {r["kernel"]: r for r in cost_table(m, nt, (k,), unroll=False, ii=2)}
        assert rows[k]["overlapped"] == sum(hi - lo for _, lo, hi in free), (k, rows[k])
    lat = {ii: {r["kernel"]: r["latency_cycles"] for r in cost_table(m, nt, ks, unroll=False, ii=ii)} for ii in (None, 2)}
    assert lat[2]["rnea_derivatives"] < lat[None]["rnea_derivatives"], lat
