"""Inputs that used to crash, hang or silently give wrong numbers (each case failed before the
fix): one clear line instead of a traceback, nothing left behind, and Pinocchio's numbers where
the input is valid."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pinocchio as pin
import pytest

import rbdgen
import rbdgen.robots
from rbdgen import reference as ref
from rbdgen import registry
from rbdgen.errors import UnsupportedError, URDFError

from conftest import TOL64, assert_one_error_line, relerr, run_main
from test_model import joint, link, urdf, write


# ---- huge but finite angles -------------------------------------------------------------------

@pytest.mark.parametrize("angle", ["1e300", "1e16", "-3e17", "123456.789", "25.132741228718345"])
def test_any_finite_angle_gives_pinocchios_transform(tmp_path, angle):
    """Quarter turns are snapped only for angles of a few turns: above ~1e16 every double is
    within 4 ulps of some k·π/2, and snapping them all disagreed with Pinocchio by 1.7."""
    p = write(tmp_path, urdf(link("base"), link("l1"), link("l2"),
                             joint("j1", "base", "l1", rpy=f"{angle} 0.3 0", xyz="0.1 0 0.2"),
                             joint("j2", "l1", "l2", rpy=f"0 {angle} {angle}", axis="0 1 0")))
    m = rbdgen.load_urdf(p)
    pm = pin.buildModelFromUrdf(str(p))
    data = pm.createData()
    rng = np.random.default_rng(1)
    q, v, a = m.random_q(rng), rng.normal(size=2), rng.normal(size=2)
    assert relerr(ref.rnea(m, q, v, a), pin.rnea(pm, data, q, v, a)) <= TOL64
    pin.forwardKinematics(pm, data, q)
    want = np.stack([data.oMi[j].homogeneous for j in (1, 2)])
    assert relerr(ref.forward_kinematics(m, q), want) <= TOL64


def test_quarter_turns_are_still_exact(tmp_path):
    p = write(tmp_path, urdf(link("base"), link("l1"), joint("j1", "base", "l1", rpy="1.5707963267948966 0 0")))
    X = rbdgen.load_urdf(p).X_tree[0]
    assert X[1, 1] == 0.0 and X[2, 2] == 0.0  # cos(π/2) exactly 0, not 6e-17


# ---- files that are not URDFs -----------------------------------------------------------------

def test_unknown_xml_encoding_is_one_line(tmp_path, capsys):
    p = tmp_path / "enc.urdf"
    p.write_text('<?xml version="1.0" encoding="klingon"?>\n<robot name="r"/>\n')
    with pytest.raises(URDFError, match="klingon"):
        rbdgen.load_urdf(p)
    rc, out, err = run_main(capsys, "inspect", p)
    assert rc == 2
    assert_one_error_line(err, out, str(p), "malformed XML")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_is_refused_not_waited_on(tmp_path, capsys):
    fifo = tmp_path / "robot.urdf"
    os.mkfifo(fifo)
    t = time.monotonic()
    rc, out, err = run_main(capsys, "inspect", fifo)
    assert rc == 2 and time.monotonic() - t < 5
    assert_one_error_line(err, out, str(fifo), "not a regular file")


# ---- deep chains ------------------------------------------------------------------------------

def test_deep_chain_loads_and_generates(tmp_path, capsys):
    """1000 links (a recursive tree walk stopped at ~700): loads, and rnea and forward
    kinematics generate; the traced kernel agrees with the reference."""
    from rbdgen.robots import chain_urdf

    p = write(tmp_path, chain_urdf(1000, seed=3, fixed_every=None))
    m = rbdgen.load_urdf(p)
    assert m.nb == 1000 and m.parent[-1] == 998
    rng = np.random.default_rng(0)
    q = m.random_q(rng)
    v = 0.1 * rng.normal(size=m.nv)
    k = registry.trace(m, "rnea", cached=False)
    assert relerr(rbdgen.ir.run(k, q, v, v), ref.rnea(m, q, v, v)) <= TOL64
    rc, out, err = run_main(capsys, "generate", p, "--out", tmp_path / "out", "--kernels", "rnea,forward_kinematics",
                            "--dtype", "float64", "-q")
    assert rc == 0, err


# ---- a moving link with no mass ---------------------------------------------------------------

def _massless_leaf(tmp_path):
    return write(tmp_path, urdf(link("base"), link("l1"), link("finger", inertial=False),
                                joint("j1", "base", "l1"), joint("j_finger", "l1", "finger", axis="1 0 0")))


def test_massless_leaf_refuses_only_the_kernels_that_need_minv(tmp_path, capsys):
    p = _massless_leaf(tmp_path)
    m = rbdgen.load_urdf(p).with_frames("leaves")
    for k in registry.kernels():
        if registry.get(k).needs_minv:
            with pytest.raises(UnsupportedError, match="j_finger.*finger.*singular"):
                registry.trace(m, k, cached=False)
        elif registry.get(k).check is not None:  # the Schur kernels: every link's inertia inverted
            with pytest.raises(UnsupportedError, match="link 'finger': mass 0.0 is not positive"):
                registry.trace(m, k, cached=False)
        else:
            registry.trace(m, k, cached=False)  # rnea, crba, the derivatives of rnea, FK: fine
    out_dir = tmp_path / "out"
    rc, out, err = run_main(capsys, "generate", p, "--out", out_dir, "-q")
    assert rc == 2
    line = assert_one_error_line(err, out, str(p), "j_finger", "'finger'", "mass matrix is singular", "--skip-kernels")
    assert "aba" in line
    assert not out_dir.exists()  # nothing left behind, not even the output folder it would have made
    needing = ",".join(k for k in registry.kernels() if registry.get(k).needs_minv)
    assert {"aba", "minv", "aba_derivatives"} <= set(needing.split(","))
    rc, out, err = run_main(capsys, "generate", p, "--out", out_dir, "-q", "--skip-kernels", needing)
    assert rc == 0, err
    rc, out, err = run_main(capsys, "inspect", p, "--cost", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "j_finger")
    with pytest.raises(UnsupportedError, match="j_finger"):
        rbdgen.build(m, kernels=("aba",))


# ---- absurd magnitudes ------------------------------------------------------------------------

@pytest.mark.parametrize("where,part,needle", [
    ("origin", joint("j1", "base", "l1", xyz="1e300 0 0"), "xyz"),
    ("mass", link("l1", mass=1e300), "mass"),
    ("inertia", link("l1", inertia=(1e300, 1e300, 1e300, 0, 0, 0)), "ixx"),
], ids=["translation", "mass", "inertia"])
def test_absurd_magnitudes_are_one_line_and_write_nothing(tmp_path, capsys, where, part, needle):
    """A translation of 1e300 used to stop generate with a traceback (a non-finite constant)
    while --target hls wrote 1e+300 into the datapath and exited 0."""
    parts = [link("base"), link("l1"), joint("j1", "base", "l1")]
    parts[2 if where == "origin" else 1] = part
    p = write(tmp_path, urdf(*parts))
    for target in ("cpu", "hls"):
        out_dir = tmp_path / f"out_{target}"
        rc, out, err = run_main(capsys, "generate", p, "--target", target, "--out", out_dir, "-q")
        assert rc == 2
        assert_one_error_line(err, out, str(p), needle, "out of range")
        assert not out_dir.exists()


# ---- arrays a user may pass -------------------------------------------------------------------

@pytest.fixture(scope="module")
def iiwa_kernels():
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    return m, rbdgen.build(m, kernels=("rnea",), opt="-O1")


def test_array_like_batches_are_accepted(iiwa_kernels, tmp_path):
    m, k = iiwa_kernels
    rng = np.random.default_rng(0)
    q, v, a = m.random_q(rng, 4), rng.normal(size=(4, 7)), rng.normal(size=(4, 7))
    want = ref.rnea(m, q, v, a)
    mm = np.memmap(tmp_path / "q.bin", dtype=np.float64, mode="w+", shape=q.shape)
    mm[:] = q

    class Sub(np.ndarray):
        pass

    for qq in (mm, q.view(Sub), memoryview(q), q.tolist()):
        got = k.rnea(qq, v, a)
        assert got.shape == (4, 7) and relerr(got, want) <= TOL64, type(qq)
    # lists in any position, not only the first
    assert relerr(k.rnea(q[0], v[0].tolist(), list(a[0])), want[0]) <= TOL64


def test_array_mistakes_name_the_argument(iiwa_kernels):
    m, k = iiwa_kernels
    q, v = np.zeros(7), np.zeros(7)
    with pytest.raises(ValueError, match="'v' is float64 in non-native byte order"):
        k.rnea(q, v.astype(">f8"), v)
    with pytest.raises(ValueError, match="'a' is not a rectangular list"):
        k.rnea(q, v, [[0.0] * 7, [0.0] * 6])
    with pytest.raises(ValueError, match="'q' must be a numpy array"):
        k.rnea("q", v, v)


def test_build_kernel_selection(iiwa_kernels):
    m, _ = iiwa_kernels
    assert rbdgen.build(m, kernels="rnea", opt="-O1").kernels == ("rnea",)  # a name, not its letters
    with pytest.raises(ValueError, match="no kernels selected"):
        rbdgen.build(m, kernels=[])


# ---- a killed build, and a cache shared between users -------------------------------------------

def _processes_mentioning(text: str) -> list:
    """PIDs whose command line mentions ``text`` (Linux /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        out.append(int(d))
            except OSError:
                pass
    return out


@pytest.mark.skipif(not os.path.isdir("/proc") or not sys.platform.startswith("linux"),
                    reason="PR_SET_PDEATHSIG and /proc are Linux's; elsewhere compilers outlive a killed build")
def test_killed_build_takes_its_compilers_along_and_a_later_build_cleans_up(tmp_path):
    cache = tmp_path / "cache"
    script = (f"import rbdgen\nfrom rbdgen.robots import chain_urdf\np = {str(tmp_path / 'c.urdf')!r}\n"
              "open(p, 'w').write(chain_urdf(24, seed=1))\n"
              "rbdgen.build(rbdgen.load_urdf(p), kernels=('aba_derivatives',), opt='-O2', simd=False)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ, RBDGEN_CACHE_DIR=str(cache)))
    try:
        deadline = time.monotonic() + 240
        while not _processes_mentioning(str(cache)) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None and _processes_mentioning(str(cache)), "the compiler never started"
        proc.kill()  # SIGKILL: no Python cleanup runs
        proc.wait()
        deadline = time.monotonic() + 20
        while _processes_mentioning(str(cache)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _processes_mentioning(str(cache)), "compilers outlived the killed build"
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [d for d in os.listdir(cache) if d.startswith(".")], "the killed build left its temporary folder"
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    old = os.environ.get("RBDGEN_CACHE_DIR")
    os.environ["RBDGEN_CACHE_DIR"] = str(cache)
    try:
        rbdgen.build(m, kernels=("gravity",), opt="-O0", simd=False)
    finally:
        os.environ["RBDGEN_CACHE_DIR"] = old
    assert not [d for d in os.listdir(cache) if d.startswith(".") and os.path.isdir(cache / d)]


def test_cache_entries_follow_the_umask(tmp_path, monkeypatch):
    """Entries used to be 0700 (mkdtemp's), so a cache could not be shared by a group."""
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path / "shared"))
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    old = os.umask(0o002)
    try:
        k = rbdgen.build(m, kernels=("gravity",), opt="-O0", simd=False)
    finally:
        os.umask(old)
    entry = os.path.dirname(k.path)
    assert os.stat(entry).st_mode & 0o777 == 0o775
    assert os.stat(k.path).st_mode & 0o040  # the group can load the library
    locks = [f for f in os.listdir(tmp_path / "shared") if f.endswith(".lock")]
    assert locks and all(os.stat(tmp_path / "shared" / f).st_mode & 0o020 for f in locks)


# ---- when the oracle is missing or cannot load the file ---------------------------------------

def test_pinocchio_parser_errors_stay_off_stderr(tmp_path, capfd):
    """urdfdom (inside Pinocchio) writes its own "Error:" lines to fd 2; they become part of
    rbdgen's note instead of preceding it on the terminal."""
    from rbdgen.validate import pinocchio_model

    p = write(tmp_path, urdf(link("base"), link("l1"), joint("j1", "base", "l1", limit=None,
                                                                extra='<limit lower="-1" upper="1"/>')))
    m = rbdgen.load_urdf(p)  # rbdgen does not need <limit effort>
    pin_, why = pinocchio_model(m)
    assert pin_ is None and "pinocchio cannot load" in why and "effort" in why
    assert capfd.readouterr().err == ""
    rc, out, err = run_main(capfd, "validate", p, "--kernels", "rnea", "--states", "2", "--opt", "-O0", "-q")
    assert rc == 0 and err == "", err
    assert "note: pinocchio cannot load" in out


def test_demo_without_pinocchio_says_so(monkeypatch, capsys):
    from rbdgen.demo import run_demo

    monkeypatch.setitem(sys.modules, "pinocchio", None)  # import fails as if not installed
    run_demo(opt="-O1", kernels=("rnea", "aba"))  # what is checked is the message, not the -O3 build
    out = capsys.readouterr().out
    assert "nan" not in out.lower()
    assert "pinocchio not installed" in out and "not compared with Pinocchio" in out
    assert "-> OK" in out


def test_errors_doc_cites_tests_that_exist():
    """docs/errors.md backs each row with a test; a renamed or deleted test must show up here."""
    from pathlib import Path
    import re

    root = Path(__file__).resolve().parent.parent
    doc = (root / "docs" / "errors.md").read_text(encoding="utf-8")
    cited, current = [], None
    for m in re.finditer(r"(test_\w+\.py)?::(test_\w+)", doc):
        current = m.group(1) or current
        cited.append((current, m.group(2)))
    assert len(cited) >= 20
    for file, name in cited:
        assert f"def {name}(" in (root / "tests" / file).read_text(encoding="utf-8"), (file, name)
