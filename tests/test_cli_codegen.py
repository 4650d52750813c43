"""``rbdgen generate`` / ``validate`` / ``inspect --sparsity --cost``: the generated package imports
and computes the reference's numbers, its manifest describes its files, validate's exit status,
user mistakes as one ``error:`` line with exit 2.

Compiles at -O0 (CI time; the arithmetic of -O3, see test_cpu_kernels.py): the iiwa14 package in
float64 and float32, a gravity-only package, and validate's float64/float32 builds of iiwa14
(the same libraries as test_cpu_kernels.py, same sources and flags, so a shared cache compiles
them once). The cache is conftest's RBDGEN_CACHE_DIR.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import sys
import warnings

import numpy as np
import pytest

import rbdgen
from rbdgen import registry
import rbdgen.robots
from rbdgen import reference as ref
from rbdgen.algorithms import KERNELS, trace
from rbdgen.cli import main
from rbdgen.errors import RbdgenError, RbdgenWarning

from conftest import TOL64, case_frames, kernel_args, kernel_err, random_state, ref_out, relerr
from conftest import assert_one_error_line, run_main  # noqa: E402

IIWA = rbdgen.robots.path("iiwa14")
FRAMES = ("--frames", "iiwa_link_ee,iiwa_link_4")  # with them every kernel is generated
#: validate's: the iiwa's frames in test_cpu_kernels.py (conftest.case_frames), so that validate's
#: float64 build is that test's library, found in the compile cache
VALIDATE_FRAMES = ("--frames", ",".join(case_frames(rbdgen.load_urdf(IIWA))))
QUADRUPED = rbdgen.robots.path("quadruped")
OPT = "-O0"




def _import(folder, name):
    """Import the package ``folder/name`` (as a top-level module) and forget it afterwards."""
    sys.path.insert(0, str(folder))
    try:
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def _generate(*args):
    """Run ``rbdgen generate`` in-process (module fixtures cannot use capsys)."""
    rc = main(["generate", *map(str, args)])
    assert rc == 0


@pytest.fixture(scope="module")
def iiwa_model():
    return rbdgen.load_urdf(IIWA).with_frames(["iiwa_link_ee", "iiwa_link_4"])


@pytest.fixture(scope="module")
def iiwa_pkg(tmp_path_factory):
    out = tmp_path_factory.mktemp("codegen")
    _generate(IIWA, "--frames", "iiwa_link_ee,iiwa_link_4", "--out", out, "--name", "iiwa14", "--quiet")
    pkg = _import(out, "iiwa14")
    yield pkg
    sys.modules.pop("iiwa14", None)


# ---------------------------------------------------------------------------------------------
# the generated package

def _check_kernels(kern, model, dtype, tol):
    q, v, a, tau = random_state(model, seed=5, n=9)
    cast = lambda x: np.ascontiguousarray(x, dtype=dtype)  # noqa: E731
    errs = {}
    for k in KERNELS:
        args = [cast(x) for x in kernel_args(k, q, v, a, tau, model)]
        exp = ref_out(model, k, *(x.astype(np.float64) for x in args))
        got = kern.kernel(k)(*args)
        err = kernel_err(got, exp)
        for i in (0, 7):  # single states
            one = kern.kernel(k)(*(x[i] for x in args))
            exp_i = tuple(e[i] for e in exp) if isinstance(exp, tuple) else exp[i]
            err = max(err, kernel_err(one, exp_i))
        errs[k] = err
    bad = {k: e for k, e in errs.items() if not e <= tol}
    assert not bad, f"{dtype}: errors above {tol}: {bad}"


def test_package_float64_matches_reference(iiwa_pkg, iiwa_model):
    # every kernel as one library (calling each kernel of load() first would build one library per
    # kernel: tests/test_progress.py checks that); load() then finds this library in the cache
    k = iiwa_pkg.build(opt=OPT)
    assert k.dtype == np.float64
    assert k.kernels == KERNELS
    assert (k.nq, k.nv, k.nb) == (7, 7, 7)
    _check_kernels(k, iiwa_model, np.float64, TOL64)
    assert iiwa_pkg.load(opt=OPT) is iiwa_pkg.load(opt=OPT)  # loaded once per options


def test_package_float32_matches_reference(iiwa_pkg, iiwa_model):
    k = iiwa_pkg.build(dtype="float32", opt=OPT)
    assert k.dtype == np.float32
    _check_kernels(k, iiwa_model, np.float32, 1e-3)


def test_package_module_level(iiwa_pkg, iiwa_model, monkeypatch):
    assert iiwa_pkg.nq == 7 and iiwa_pkg.nv == 7 and iiwa_pkg.nb == 7
    assert iiwa_pkg.joint_names == iiwa_model.joint_names
    assert iiwa_pkg.robot == "iiwa14" and iiwa_pkg.floating_base is False
    assert iiwa_pkg.dtypes == ("float64", "float32") and iiwa_pkg.kernels == KERNELS
    monkeypatch.setitem(iiwa_pkg.default_options, "opt", OPT)  # the library the other tests built
    q, v, a, tau = random_state(iiwa_model, seed=8)
    assert kernel_err(iiwa_pkg.rnea(q, v, a), ref.rnea(iiwa_model, q, v, a)) <= TOL64
    M = iiwa_pkg.crba(q)
    assert kernel_err(M, ref.crba(iiwa_model, q)) <= TOL64
    d = iiwa_pkg.aba_derivatives(q, v, tau)
    assert kernel_err(d, ref.aba_derivatives(iiwa_model, q, v, tau)) <= TOL64
    out = np.empty(7)
    assert iiwa_pkg.gravity(q, out=out) is out
    qb, vb, ab, _ = random_state(iiwa_model, seed=9, n=5)
    assert kernel_err(iiwa_pkg.nle(qb, vb), ref.nle(iiwa_model, qb, vb)) <= TOL64
    assert "aba_derivatives" in iiwa_pkg.__all__
    assert iiwa_pkg.frames == ("iiwa_link_ee", "iiwa_link_4")
    J = iiwa_pkg.load(opt=OPT).frame_jacobian(q, "iiwa_link_4", "world")  # by name, from a package
    assert kernel_err(J, ref.frame_jacobian(iiwa_model, q, "iiwa_link_4", "world")) <= TOL64
    assert kernel_err(iiwa_pkg.osim_inverse(q), ref.osim_inverse(iiwa_model, q).reshape(2, 6, 2, 6)) <= TOL64
    assert "rnea_derivatives" in (iiwa_pkg.__doc__ or "")
    with pytest.raises(ValueError, match="dtype"):
        iiwa_pkg.rnea(q.astype(np.float32), v, a)


def test_manifest_describes_the_files(iiwa_pkg, iiwa_model):
    folder = os.path.dirname(iiwa_pkg.__file__)
    m = json.loads(open(os.path.join(folder, "manifest.json"), encoding="utf-8").read())
    on_disk = sorted(f for f in os.listdir(folder) if f != "__pycache__")
    assert on_disk == sorted([*m["files"], "manifest.json"])
    for fn, digest in m["files"].items():
        with open(os.path.join(folder, fn), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, fn
    assert m["rbdgen_version"] == rbdgen.__version__
    assert m["robot"] == "iiwa14" and m["package"] == "iiwa14"
    assert m["source"]["urdf"] == str(IIWA)
    assert m["source"]["sha256"] == hashlib.sha256(IIWA.read_bytes()).hexdigest()
    assert (m["nq"], m["nv"], m["nb"]) == (7, 7, 7)
    assert m["joint_names"] == list(iiwa_model.joint_names)
    assert m["options"] == {
        "target": "cpu", "floating_base": False, "mimic": "couple", "check_inertia": True,
        "gravity": [0.0, 0.0, -9.81], "snap": None, "dtypes": ["float64", "float32"], "kernels": list(KERNELS),
        "frames": ["iiwa_link_ee", "iiwa_link_4"], "target_options": {},
    }
    assert m["snap"] is None
    assert m["kernel_order"] == list(KERNELS)
    for k in KERNELS:
        spec = m["kernels"][k]
        assert spec["ops"] == trace(iiwa_model, k).op_counts(), k
        assert [i["name"] for i in spec["inputs"]][0] == "q"
        assert [i["name"] for i in spec["inputs"]] == list(registry.get(k).input_names)
        sizes = {"q": 7, "v": 7, "a": 7, "tau": 7, "stale": 24 * 7, "stale_lwp": 18 * 7}
        assert [i["size"] for i in spec["inputs"]] == [sizes[i["name"]] for i in spec["inputs"]]
        for d, tag in (("float64", "f64"), ("float32", "f32")):
            src = f"{m['prefix']}_{k}_{tag}.cpp"
            assert src in m["files"] and src in m["target"]["sources"][d]
    assert m["kernels"]["aba_derivatives"]["outputs"] == [
        {"name": "dqdd_dq", "shape": [7, 7]}, {"name": "dqdd_dv", "shape": [7, 7]},
        {"name": "dqdd_dtau", "shape": [7, 7]}]
    # no timestamps, sorted keys: the manifest is a function of its content
    text = open(os.path.join(folder, "manifest.json"), encoding="utf-8").read()
    assert text == json.dumps(m, indent=2, sort_keys=True) + "\n"


def test_generate_messages_and_options(capsys, tmp_path):
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "gravity,crba",
                            "--dtype", "float64", "--gravity", "0 0 -3.7")
    assert rc == 0, err
    assert f"wrote {tmp_path / 'iiwa14'}" in out and "2 kernels" in out
    assert "tracing crba" in err and "printing gravity (float64)" in err  # progress on stderr
    m = json.loads((tmp_path / "iiwa14" / "manifest.json").read_text())
    assert m["kernel_order"] == ["gravity", "crba"]  # canonical order, whatever the order given
    assert m["options"]["dtypes"] == ["float64"] and m["options"]["gravity"] == [0.0, 0.0, -3.7]
    assert sorted(m["target"]["sources"]) == ["float64"]
    assert "--gravity '0.0 0.0 -3.7'" in m["regenerate"] and "--kernels gravity,crba" in m["regenerate"]
    # --quiet: nothing on stderr; regenerating replaces the package and leaves no temporary folder
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "crba", "--dtype", "float64",
                            "--quiet")
    assert rc == 0 and err == ""
    assert sorted(os.listdir(tmp_path)) == ["iiwa14"]
    assert json.loads((tmp_path / "iiwa14" / "manifest.json").read_text())["kernel_order"] == ["crba"]
    assert not (tmp_path / "iiwa14" / "rbd_iiwa14_gravity_f64.cpp").exists()


def test_generate_lanes(capsys, tmp_path, iiwa_model):
    """--lanes N: the package's batch path takes N states per vector (a generated package is for
    any x86-64, 2 doubles, unless told the machine it will run on); anything but 2, 4, 8, 16 is
    one error line. The 4-lane package's batch equals its own state-by-state calls and the
    reference."""
    from rbdgen import reference

    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "rnea", "--lanes", 3)
    assert rc == 2
    assert_one_error_line(err, out, "--lanes", "2, 4, 8, 16", "3")
    assert not (tmp_path / "iiwa14").exists()
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "rnea", "--dtype", "float64",
                            "--lanes", 4, "-q")
    assert rc == 0, err
    m = json.loads((tmp_path / "iiwa14" / "manifest.json").read_text())
    assert "--lanes 4" in m["regenerate"] and m["target"]["kernel_lanes"]["float64"] == {"rnea": 4}
    assert "static const int LANES = 4;" in (tmp_path / "iiwa14" / "rbd_iiwa14_rnea_f64.cpp").read_text()
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop("iiwa14", None)
        import iiwa14
        k = iiwa14.load(opt=OPT)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("iiwa14", None)
    assert k.lanes == 4 and k.kernel_lanes == {"rnea": 4}
    q, v, a, _ = random_state(iiwa_model, seed=3, n=10)  # two blocks of 4, then two single states
    batch = k.rnea(q, v, a)
    assert relerr(batch, reference.rnea(iiwa_model, q, v, a)) <= TOL64
    assert relerr(batch, np.stack([k.rnea(q[i], v[i], a[i]) for i in range(10)])) <= TOL64


def test_generated_package_lanes_follow_the_compiler(capsys, tmp_path, iiwa_model):
    """Without --lanes, a package's batch path takes one register of whatever instruction set it
    is compiled for (the preprocessor picks, templates/cpu/prelude.cpp.j2): 2 doubles portable,
    4 with AVX, with AVX-512 8 for the kernels whose arithmetic pays for them. The lanes the
    library reports (compiled in) are the ones the loader reckons, and every width is correct."""
    from rbdgen import reference
    from rbdgen.targets.cpu import resolve_auto_lanes
    from rbdgen.toolchain.compiler import native_target, find_cxx, vector_bytes

    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "rnea,crba", "--dtype",
                            "float64", "-q")
    assert rc == 0, err
    m = json.loads((tmp_path / "iiwa14" / "manifest.json").read_text())
    assert "--lanes" not in m["regenerate"]
    assert m["target"]["kernel_lanes"]["float64"] == {"rnea": "auto-wide", "crba": "auto"}
    assert "static const int LANES = RBD_LANES;" in (tmp_path / "iiwa14" / "rbd_iiwa14_rnea_f64.cpp").read_text()
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop("iiwa14", None)
        import iiwa14
        marches = ["portable", "x86-64-v3"] + (["native"] if native_target(find_cxx()) else [])
        q, v, a, _ = random_state(iiwa_model, seed=5, n=19)
        for march in marches:
            k = iiwa14.load(opt=OPT, march=march)
            width = vector_bytes(None if march == "portable" else march)
            assert k.kernel_lanes == {"rnea": resolve_auto_lanes("auto-wide", "float64", width),
                                      "crba": resolve_auto_lanes("auto", "float64", width)}, march
            assert k.kernel_lanes["crba"] == min(width, 32) // 8 and k.lanes == width // 8, march
            assert relerr(k.rnea(q, v, a), reference.rnea(iiwa_model, q, v, a)) <= TOL64
            assert relerr(k.crba(q), reference.crba(iiwa_model, q)) <= TOL64
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("iiwa14", None)


def test_package_without_dtype_and_edited_sources(tmp_path, iiwa_model):
    _generate(IIWA, "--out", tmp_path, "--name", "iiwa_g", "--kernels", "gravity", "--dtype", "float64", "-q")
    pkg = _import(tmp_path, "iiwa_g")
    try:
        with pytest.raises(RbdgenError, match="float64, not float32"):
            pkg.load(dtype="float32")
        assert pkg.kernels == ("gravity",) and not hasattr(pkg, "rnea")
        src = tmp_path / "iiwa_g" / "rbd_iiwa_g_gravity_f64.cpp"
        src.write_text(src.read_text() + "\n// edited by hand\n")
        with pytest.warns(RbdgenWarning, match="differs from the file rbdgen generated"):
            k = pkg.load(opt=OPT)
        q = iiwa_model.random_q(np.random.default_rng(2))
        assert kernel_err(k.gravity(q), ref.gravity(iiwa_model, q)) <= TOL64
    finally:
        sys.modules.pop("iiwa_g", None)


# ---------------------------------------------------------------------------------------------
# validate

def test_validate_passes(capsys):
    rc, out, err = run_main(capsys, "validate", IIWA, *VALIDATE_FRAMES, "--states", 4, "--opt", OPT)
    assert rc == 0, out + err
    assert "kernel" in out and "vs reference" in out and "vs pinocchio" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in KERNELS}
    assert sorted(rows) == sorted(KERNELS)
    for k, line in rows.items():
        assert line.rstrip().endswith("pass"), line
        assert "n/a" not in line, line  # Pinocchio is a test dependency: every kernel compared
    assert f"all {len(KERNELS)} kernels pass" in out


def test_validate_float32(capsys):
    """float32 against each kernel's declared float32 bound: one kernel of each kind (recursive,
    O(n²) output, divisions, derivatives, frames; test_cpu_kernels.py holds every kernel to its
    bound), which compiles in a third of the time of all 24 (a fresh-clone run: 27 s)."""
    picked = ("rnea", "crba", "aba", "minv", "aba_derivatives", "frame_jacobian_world")
    rc, out, err = run_main(capsys, "validate", IIWA, *FRAMES, "--states", 3, "--opt", OPT, "--dtype", "float32", "-q",
                            "--kernels", ",".join(picked))
    assert rc == 0, out + err
    assert err == ""
    rows = {line.split()[0] for line in out.splitlines() if line.split() and line.split()[0] in KERNELS}
    assert rows == set(picked), out
    assert "float32" in out and "2e-05" in out and f"all {len(picked)} kernels pass" in out  # aba's float32 bound


def test_validate_failure_exits_1(capsys, monkeypatch):
    decl = registry.get("rnea")  # validate compares with the reference declared with the kernel
    monkeypatch.setitem(registry._REGISTRY, "rnea", dataclasses.replace(
        decl, reference=lambda *a, **kw: decl.reference(*a, **kw) + 1.0))
    monkeypatch.setitem(sys.modules, "pinocchio", None)  # import fails: reference only
    rc, out, err = run_main(capsys, "validate", IIWA, *VALIDATE_FRAMES, "--states", 2, "--opt", OPT, "-q")
    assert rc == 1, out + err
    assert "Traceback" not in err
    rows = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in KERNELS}
    assert rows["rnea"].rstrip().endswith("FAIL")
    assert all(rows[k].rstrip().endswith("pass") for k in KERNELS if k != "rnea")
    assert "n/a" in rows["crba"] and "pinocchio not installed" in out
    assert f"FAIL: 1 of {len(KERNELS)} kernels" in out


def test_validate_function_rows(iiwa_model):
    from rbdgen import validate as V

    assert V.tolerance("aba", iiwa_model, "float32") == registry.get("aba").float32_tol == 2e-5
    assert V.tolerance("aba", iiwa_model, "float64") == 1e-9
    assert V.relerr([1.0, 2.0], [1.0, 2.5]) == pytest.approx(0.2)
    assert V.relerr([0.0], [1e-3]) == pytest.approx(1e-3)  # absolute below 1
    assert not V.Row("x", 1, float("nan"), None, 1e-9).passed
    assert not V.Row("x", 1, 0.0, float("nan"), 1e-9).passed
    assert V.Row("x", 1, 1e-12, None, 1e-9).passed
    # a Pinocchio comparison bounded by the conditioning of M (below): its own verdict counts
    assert V.Row("x", 1, 1e-12, 1e-7, 1e-9, "", 1e-6, True).passed
    assert not V.Row("x", 1, 1e-12, 1e-7, 1e-9, "", 1e-6, False).passed
    assert not V.Row("x", 1, 1e-8, 1e-7, 1e-9, "", 1e-6, True).passed  # the reference's bound stays 1e-9
    assert not V.Row("x", 1, 1e-12, 1e-7, 1e-9).passed


def test_validate_bounds_pinocchio_by_the_conditioning_of_m():
    """`rbdgen validate` of the full iCub with a floating base failed minv against Pinocchio
    (2.7e-7 > 1e-9) while matching the reference to 2e-12: at cond(M) ~ 10⁸…10¹¹ it is
    Pinocchio's M⁻¹ that is off. On validate's own states: the reference's M⁻¹ is within 1e-9
    of an iteratively refined inverse (so the reference, which the kernel must meet to 1e-9, is
    right), Pinocchio's is not on some state, and every state's disagreement is within
    validate._conditioning_bound (ε·cond(M)), which is the plain 1e-9 on the iiwa."""
    import pinocchio as pin

    from rbdgen import validate as V
    from conftest import _erd_dir

    path = _erd_dir() / "icub_description" / "robots" / "icub.urdf"
    if not path.exists():  # example-robot-data is installed by the Makefile (make test): not skipped there
        pytest.skip(f"{path} is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RbdgenWarning)
        model = rbdgen.load_urdf(path, floating_base=True)
    env = V.random_states(model, 16, 0, ["minv"])
    bound = V._conditioning_bound(model, env, 1e-9)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer(), mimic=True)
    data = pm.createData()
    ours_off, pin_off = [], []
    for i, q in enumerate(env["q"]):
        M = ref.crba(model, q)
        X0 = np.linalg.inv(M)
        X = X0 + X0 @ (np.eye(model.nv) - M @ X0)  # one step of iterative refinement
        P = pin.computeMinverse(pm, data, model.to_pinocchio_q(q))
        P = np.triu(P) + np.triu(P, 1).T  # Pinocchio fills the upper triangle
        ours = ref.minv(model, q)
        ours_off.append(V.relerr(ours, X))
        pin_off.append(V.relerr(P, ours))
    assert max(ours_off) <= 1e-9, ours_off
    assert max(pin_off) > 1e-9, pin_off  # the case this bound is for (else the test shows nothing)
    assert np.all(np.asarray(pin_off) <= bound), (pin_off, bound)
    iiwa = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    assert np.all(V._conditioning_bound(iiwa, V.random_states(iiwa, 16, 0, ["minv"]), 1e-9) == 1e-9)


# ---------------------------------------------------------------------------------------------
# inspect --sparsity / --cost

def test_inspect_sparsity_iiwa(capsys, iiwa_model):
    rc, out, err = run_main(capsys, "inspect", IIWA, "--sparsity")
    assert rc == 0, err
    lines = out.splitlines()
    for i, name in enumerate(iiwa_model.joint_names):
        head = next(j for j, line in enumerate(lines) if line.startswith(f"joint {i} {name} "))
        assert "pruned" in lines[head]
        grid = lines[head + 2: head + 8]
        # X (6×6), S (6×1: a revolute joint about its frame's z axis), I (6×6)
        for r, row in enumerate(grid):
            cells = row.split()
            assert len(cells) == 13, row
            assert set(cells) <= {".", "1", "c", "q"}
            assert cells[6] == ("1" if r == 2 else "."), (name, row)
        assert any("q" in row.split()[:6] for row in grid)  # X depends on the joint angle
    from rbdgen.symbolic import sparsity

    sp = sparsity(iiwa_model)
    dense = sum(j.dense_mults for j in sp)
    kept = sum(j.pruned_mults for j in sp)
    assert f"total over 7 joints: X·v {kept}/{dense} multiplies" in out
    assert f"{1 - kept / dense:.0%} pruned" in out


def test_inspect_cost_iiwa(capsys, iiwa_model):
    rc, out, err = run_main(capsys, "inspect", IIWA, *FRAMES, "--cost", "-q")
    assert rc == 0, err
    assert err == ""
    assert "mul" in out and "sin/cos" in out and "depth" in out and "reduction" in out
    for k in KERNELS:
        line = next(line for line in out.splitlines() if line.startswith(k + " "))
        p, d = trace(iiwa_model, k).op_counts(), trace(iiwa_model, k, fold=False).op_counts()
        cells = line.split()
        assert cells[1] == f"{p['mul']}/{d['mul']}" and cells[5] == f"{p['total']}/{d['total']}", line
        assert cells[-1] == f"{d['total'] / p['total']:.2f}x"
        assert d["total"] > p["total"]
    # Λ⁻¹ by the O(n) recursion, beside J·minv·Jᵀ: fewer operations
    osim = next(line for line in out.splitlines() if line.startswith("osim_inverse "))
    prod = next(line for line in out.splitlines() if line.strip().startswith("(J·minv·Jᵀ)"))
    assert int(osim.split()[5].split("/")[0]) < int(prod.split()[5])


# ---------------------------------------------------------------------------------------------
# user mistakes: exit 2, one line

def test_unwritable_out(capsys, tmp_path):
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # root ignores permissions: a path under a file
        blocker = tmp_path / "a_file"
        blocker.write_text("")
        out = blocker / "sub"
    else:
        out = tmp_path / "readonly"
        out.mkdir()
        out.chmod(0o500)
    try:
        rc, stdout, err = run_main(capsys, "generate", IIWA, "--out", out, "--kernels", "gravity", "--dtype",
                                   "float64")
    finally:
        if out.name == "readonly":
            out.chmod(0o700)
    assert rc == 2
    assert_one_error_line(err, stdout, out)
    assert "wrote" not in stdout


def test_existing_foreign_folder_refused(capsys, tmp_path):
    (tmp_path / "iiwa14").mkdir()
    (tmp_path / "iiwa14" / "mine.txt").write_text("keep me")
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "gravity", "-q")
    assert rc == 2
    assert_one_error_line(err, out, tmp_path / "iiwa14", "not a package written by rbdgen")
    assert (tmp_path / "iiwa14" / "mine.txt").read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["iiwa14"]  # no temporary folder left


@pytest.mark.parametrize("args,needle", [
    (("--name", "9lives"), "not a Python identifier"),
    (("--name", "class"), "keyword"),
    (("--name", "json"), "shadow"),
    (("--gravity", "0 0"), "--gravity"),
    (("--gravity", "0 0 nan"), "--gravity"),
    (("--kernels", "rnea,fly"), "fly"),
    (("--dtype", "float16"), "float16"),
    (("--snap", "-1"), "--snap"),
    (("--target", "fpga"), "fpga"),
])
def test_generate_user_errors(capsys, tmp_path, args, needle):
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "-q", *args)
    assert rc == 2
    assert_one_error_line(err, out, needle)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args,needle", [
    (("--states", "0"), "--states"),
    (("--opt", "fast"), "--opt"),
    (("--kernels", ""), "--kernels"),
    (("--dtype", "int8"), "int8"),
])
def test_validate_user_errors(capsys, args, needle):
    rc, out, err = run_main(capsys, "validate", IIWA, *args)
    assert rc == 2
    assert_one_error_line(err, out, needle)


def test_missing_urdf(capsys, tmp_path):
    for cmd in ("generate", "validate"):
        rc, out, err = run_main(capsys, cmd, tmp_path / "nope.urdf")
        assert rc == 2
        assert_one_error_line(err, out, "nope.urdf", "no such file")


# ---------------------------------------------------------------------------------------------
# --snap

def test_snap_report_and_manifest(capsys, tmp_path):
    rounded = tmp_path / "iiwa_rounded.urdf"
    rounded.write_text(IIWA.read_text().replace("1.5707963267948966", "1.5708"))
    common = ("--kernels", "crba", "--dtype", "float64", "-q")
    rc, out, err = run_main(capsys, "generate", rounded, "--out", tmp_path / "plain", *common)
    assert rc == 0, err
    rc, out, err = run_main(capsys, "generate", rounded, "--out", tmp_path / "snapped", "--snap", "1e-5", *common)
    assert rc == 0, err
    assert "transform entries snapped" in out and "largest change 3.67e-06" in out
    assert "rnea moves by" in out and "crba by" in out
    plain = json.loads((tmp_path / "plain" / "iiwa14" / "manifest.json").read_text())
    snapped = json.loads((tmp_path / "snapped" / "iiwa14" / "manifest.json").read_text())
    assert plain["snap"] is None and plain["options"]["snap"] is None
    assert snapped["options"]["snap"] == 1e-5
    s = snapped["snap"]
    assert s["count"] > 0 and s["count"] == len(s["entries"])
    assert s["largest_change"] == pytest.approx(3.67e-6, rel=1e-2)
    assert 0 < s["max_rel_diff"]["rnea"] < 1e-4 and 0 < s["max_rel_diff"]["crba"] < 1e-4
    assert {e["new"] for e in s["entries"]} <= {0.0, 1.0, -1.0}
    # snapping removes multiplies: the generated crba changes and gets cheaper
    src = "rbd_iiwa14_crba_f64.cpp"
    assert plain["files"][src] != snapped["files"][src]
    assert snapped["kernels"]["crba"]["ops"]["total"] < plain["kernels"]["crba"]["ops"]["total"]
    # nothing within the tolerance: a report saying so, same sources as without --snap
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path / "none", "--snap", "1e-12", *common)
    assert rc == 0 and "nothing changed" in out


def test_default_name_floating_base(capsys, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rc, out, err = run_main(capsys, "generate", QUADRUPED, "--out", tmp_path, "--kernels", "gravity", "-q",
                                "--dtype", "float32", "--floating-base")
    assert rc == 0 and err == ""
    m = json.loads((tmp_path / "rbd_quadruped" / "manifest.json").read_text())
    assert m["package"] == "rbd_quadruped" and m["floating_base"] is True and m["nq"] == 19
