"""Progress on long work (issue 45, item 2): a line on stderr, rewritten in place, while
``rbdgen.build``, ``rbdgen validate``/``generate``/``build`` and a package's first calls work, when
stderr is a terminal (names and counts: ``compiling 2/3: <source>``); nothing when it is not (a
callable, or ``True``, gets plain messages), nothing with ``progress=False``/``--quiet``. A
generated package compiles only the kernels called, each in a library of its own, unless told to
compile all (``pkg.build()``, ``rbdgen build DIR``), and then loads the whole library.

Fast: the iiwa's small kernels at -O0, the batch path left out where the Python API allows it,
each test with a compile cache of its own (every compile here is a miss, as it must be to show).
"""
from __future__ import annotations

import ctypes
import importlib
import io
import re
import sys

import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from rbdgen import reference as ref
from rbdgen.cli import main
from rbdgen.package import generate_package, load_package

from conftest import TOL64, assert_one_error_line, kernel_err

IIWA = rbdgen.robots.path("iiwa14")
OPT = "-O0"
COUNTED = re.compile(r"compiling (\d+)/(\d+): (\S+\.cpp)")


class FakeTTY(io.StringIO):
    """stderr as a terminal."""

    def isatty(self):
        return True


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty compile cache of the test's own (and no generation cache: every step runs)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(d))
    monkeypatch.setenv("COLUMNS", "250")  # the terminal's width: no message is cut
    return d


def fake_tty(monkeypatch) -> FakeTTY:
    """Make stderr a terminal for the rest of the test (called in the test itself: pytest's
    capturing sets sys.stderr again when the test's call starts)."""
    err = FakeTTY()
    monkeypatch.setattr(sys, "stderr", err)
    return err


@pytest.fixture(scope="module")
def iiwa():
    return rbdgen.load_urdf(IIWA)


def libraries(cache) -> dict:
    """The compile cache's entries: folder name → the C++ sources compiled into its library."""
    return {d.name: sorted(p.name for p in d.glob("*.cpp")) for d in (cache.iterdir() if cache.is_dir() else ())
            if re.fullmatch(r"[0-9a-f]{24}", d.name) and any(d.glob("*.so"))}


def assert_one_line_cleared(text):
    """What a terminal got: one line rewritten in place (no newline), cleared at the end."""
    assert text and "\n" not in text, text
    assert text.startswith("\r") and re.search(r"\r +\r$", text), text[-120:]


# ---------------------------------------------------------------------------------------------
# rbdgen.build

def test_build_draws_one_line_with_counts_and_names_on_a_terminal(cache, iiwa, monkeypatch):
    tty = fake_tty(monkeypatch)
    k = rbdgen.build(iiwa, kernels=["gravity", "crba"], opt=OPT, simd=False)
    text = tty.getvalue()
    assert_one_line_cleared(text)
    counted = COUNTED.findall(text)
    # every source (two kernels, the CPython binding) once, counted 1..n of n, then the link
    assert sorted(int(i) for i, _, _ in counted) == [1, 2, 3] and {n for _, n, _ in counted} == {"3"}, counted
    assert {s for _, _, s in counted} == {"rbd_iiwa14_gravity_f64.cpp", "rbd_iiwa14_crba_f64.cpp",
                                         "rbd_iiwa14_python_f64.cpp"}
    assert "rbdgen: tracing crba" in text and "rbdgen: linking rbd_iiwa14.so" in text
    q = iiwa.random_q(np.random.default_rng(0))
    assert kernel_err(k.gravity(q), ref.gravity(iiwa, q)) <= TOL64


def test_build_is_quiet_off_a_terminal_and_with_progress_false(cache, iiwa, monkeypatch):
    tty = fake_tty(monkeypatch)
    rbdgen.build(iiwa, kernels=["gravity"], opt=OPT, simd=False, progress=False)
    assert tty.getvalue() == ""  # a terminal, told not to
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    rbdgen.build(iiwa, kernels=["nle"], opt=OPT, simd=False)  # compiles: but stderr is no terminal
    assert pipe.getvalue() == ""
    seen = []
    rbdgen.build(iiwa, kernels=["rnea"], opt=OPT, simd=False, progress=seen.append)  # the user's own
    assert any(COUNTED.fullmatch(m) for m in seen) and "linking rbd_iiwa14.so (2 objects)" in seen, seen
    rbdgen.build(iiwa, kernels=["crba"], opt=OPT, simd=False, progress=True)  # plain lines where asked
    lines = pipe.getvalue().splitlines()
    assert lines and all(ln.startswith("rbdgen: ") for ln in lines)
    assert any(COUNTED.search(ln) for ln in lines), lines


# ---------------------------------------------------------------------------------------------
# the command line

def test_cli_draws_one_line_on_a_terminal_and_plain_lines_in_a_log(cache, capsys, monkeypatch):
    tty = fake_tty(monkeypatch)
    argv = ["validate", str(IIWA), "--kernels", "gravity", "--opt", OPT, "--states", "2", "--no-pinocchio"]
    assert main(argv) == 0
    text = tty.getvalue()
    assert_one_line_cleared(text)  # cleared before validate prints its table on stdout
    assert any(s.endswith("_gravity_f64.cpp") for _, _, s in COUNTED.findall(text)), text
    assert "the kernel passes" in capsys.readouterr().out
    assert main([*argv, "--quiet"]) == 0 and tty.getvalue() == text  # --quiet: nothing more
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a log: a line per message, as before
    assert main(["validate", str(IIWA), "--kernels", "nle", "--opt", OPT, "--states", "2", "--no-pinocchio"]) == 0
    lines = sys.stderr.getvalue().splitlines()
    assert any(COUNTED.search(ln) for ln in lines) and all(ln.startswith("rbdgen: ") for ln in lines), lines


# ---------------------------------------------------------------------------------------------
# a generated package: only the kernels called, unless told otherwise

@pytest.fixture
def package(tmp_path, iiwa, cache):
    """A package of three kernels (float64), imported as ``pp``; the batch path left out (faster)."""
    generate_package(iiwa, tmp_path / "out", urdf=str(IIWA), load_options={}, name="pp",
                     kernels=["gravity", "crba", "rnea"], dtypes=["float64"], simd=False)
    sys.path.insert(0, str(tmp_path / "out"))
    sys.modules.pop("pp", None)
    importlib.invalidate_caches()
    try:
        pkg = importlib.import_module("pp")
        pkg.default_options["opt"] = OPT
        yield pkg
    finally:
        sys.path.remove(str(tmp_path / "out"))
        sys.modules.pop("pp", None)


def test_a_package_compiles_only_the_kernel_called(package, cache, iiwa, monkeypatch):
    tty = fake_tty(monkeypatch)
    q = iiwa.random_q(np.random.default_rng(1))
    assert libraries(cache) == {}  # importing compiles nothing
    assert kernel_err(package.gravity(q), ref.gravity(iiwa, q)) <= TOL64
    text = tty.getvalue()
    assert_one_line_cleared(text)  # what it compiles, on the terminal
    assert "rbdgen: pp.gravity: compiling 1/" in text and "rbd_pp_gravity_f64.cpp" in text
    (entry, sources), = libraries(cache).items()
    assert "rbd_pp_gravity_f64.cpp" in sources and not any("crba" in s or "rnea" in s for s in sources), sources
    lib = ctypes.CDLL(str(next((cache / entry).glob("*.so"))))
    assert hasattr(lib, "rbd_pp_gravity_f64_batch") and not hasattr(lib, "rbd_pp_crba_f64_batch")
    k = package.load(opt=OPT)  # what the functions call (default_options)
    assert k.kernels == ("rnea", "gravity", "crba") and "loaded 1 of 3: gravity" in repr(k)
    M = k.crba(q)  # the next kernel called: a library of its own
    assert kernel_err(M, ref.crba(iiwa, q)) <= TOL64 and len(libraries(cache)) == 2
    assert k.kernel("crba") is k.crba and "first call" not in repr(k.crba)  # loaded: the method itself
    assert "compiled on its first call" in repr(k.kernel("rnea"))  # not called yet
    with pytest.raises(AttributeError, match="no kernel or attribute 'aba'.*rnea, gravity, crba"):
        k.aba  # noqa: B018


def test_package_build_compiles_everything_and_later_loads_take_it(package, cache, iiwa, tmp_path):
    q = iiwa.random_q(np.random.default_rng(2))
    package.gravity(q)
    full = package.build(progress=False)  # default_options: -O0
    entries = libraries(cache)
    assert len(entries) == 2 and ["rbd_pp_crba_f64.cpp", "rbd_pp_gravity_f64.cpp", "rbd_pp_python_f64.cpp",
                                  "rbd_pp_rnea_f64.cpp"] in entries.values(), entries
    assert full.kernels == ("rnea", "gravity", "crba") and package.load(opt=OPT).kernel("rnea") is full.rnea
    assert kernel_err(package.rnea(q, q, q), ref.rnea(iiwa, q, q, q)) <= TOL64
    # another process (a fresh load): the whole library is in the cache, nothing is compiled
    seen = []
    k = load_package(tmp_path / "out" / "pp", lazy=True, opt=OPT, progress=seen.append)
    assert kernel_err(k.crba(q), ref.crba(iiwa, q)) <= TOL64
    assert seen == [] and libraries(cache) == entries and k.path == full.path


def test_a_package_s_kernels_pickle_as_the_whole_package(package, cache, iiwa):
    import pickle

    k = package.load(opt=OPT, progress=False)
    q = iiwa.random_q(np.random.default_rng(3))
    k.gravity(q)  # one kernel compiled and loaded
    ((sources),) = libraries(cache).values()
    assert "rbd_pp_crba_f64.cpp" not in sources
    back = pickle.loads(pickle.dumps(k))  # the recipe of every kernel: loaded (compiled) whole
    assert back.kernels == ("rnea", "gravity", "crba") and len(libraries(cache)) == 2
    assert kernel_err(back.crba(q), ref.crba(iiwa, q)) <= TOL64


def test_load_package_with_kernels_compiles_those(package, cache, iiwa, tmp_path):
    k = load_package(tmp_path / "out" / "pp", kernels="rnea,crba", opt=OPT, progress=False)
    assert k.kernels == ("rnea", "crba")
    (sources,) = libraries(cache).values()
    assert "rbd_pp_gravity_f64.cpp" not in sources and "rbd_pp_rnea_f64.cpp" in sources
    with pytest.raises(rbdgen.RbdgenError, match=r"no kernel 'aba' \(it has: rnea, gravity, crba\)"):
        load_package(tmp_path / "out" / "pp", kernels=["aba"], opt=OPT)


def test_rbdgen_build_compiles_a_package_now(package, cache, capsys, tmp_path, monkeypatch):
    tty = fake_tty(monkeypatch)
    folder = tmp_path / "out" / "pp"
    assert main(["build", str(folder), "--opt", OPT]) == 0
    out = capsys.readouterr().out
    assert "built package 'pp' (cpu, float64): 3 kernels" in out, out
    text = tty.getvalue()
    assert_one_line_cleared(text)
    assert len(COUNTED.findall(text)) == 4, text  # three kernels and the binding, 1/4 … 4/4
    (sources,) = libraries(cache).values()
    assert len(sources) == 4
    assert main(["build", str(folder), "--opt", OPT, "-q"]) == 0 and tty.getvalue() == text  # cached; quiet
    assert "3 kernels" in capsys.readouterr().out
    # the package's first call now only loads that library
    k = package.load(opt=OPT)
    k.gravity(np.zeros(7))
    assert len(libraries(cache)) == 1 and tty.getvalue() == text


def test_rbdgen_build_refuses_what_is_not_a_package(capsys, tmp_path, cache):
    (tmp_path / "notes").mkdir()
    rc = main(["build", str(tmp_path / "notes")])
    _, err = capsys.readouterr()
    assert rc == 2
    assert_one_error_line(err, "", "not a package written by `rbdgen generate`", "notes")
    rc = main(["build", str(tmp_path / "nowhere")])
    _, err = capsys.readouterr()
    assert rc == 2
    assert_one_error_line(err, "", "no such folder")


def test_rbdgen_build_refuses_an_option_of_another_target(package, capsys, tmp_path):
    rc = main(["build", str(tmp_path / "out" / "pp"), "--arch", "sm_90"])
    _, err = capsys.readouterr()
    assert rc == 2
    assert_one_error_line(err, "", "--arch", "cpu")


def _first_call(f, *args):
    """Call a CUDA package's kernel: its library compiles; without a GPU the launch then says so
    (the call on a machine with one just runs)."""
    try:
        f(*args)
    except rbdgen.RbdgenError as e:
        assert "no CUDA GPU available" in str(e), e


def test_a_cuda_package_compiles_only_the_kernel_called(iiwa, cache, tmp_path):
    """The CUDA target splits too (Target.subset): a package's first call of gravity builds a
    library holding gravity's code and the shared runtime only, and its emulation (the GPU program
    run on the CPU) matches the reference; crba's first call builds a library of its own."""
    from rbdgen.targets.cuda.runtime import CudaKernels

    generate_package(iiwa, tmp_path / "out", urdf=str(IIWA), load_options={}, name="cp", target="cuda",
                     kernels=["gravity", "crba", "rnea"], dtypes=["float64"])
    k = load_package(tmp_path / "out" / "cp", lazy=True, opt=OPT, arch="sm_90", progress=False)
    q = iiwa.random_q(np.random.default_rng(4), 3)
    _first_call(k.gravity, q)
    (owner,) = k._parts.values()
    assert isinstance(owner, CudaKernels) and owner.kernels == ("gravity",)
    lib = ctypes.CDLL(str(owner.path))
    assert hasattr(lib, "rbd_cp_gravity_f64_emulate_thread") and not hasattr(lib, "rbd_cp_crba_f64_emulate_thread")
    assert kernel_err(owner.emulated("thread").gravity(q), ref.gravity(iiwa, q)) <= TOL64
    _first_call(k.crba, q)
    assert set(k._parts) == {"gravity", "crba"} and k._full is None and len(libraries_any(cache)) == 2


def libraries_any(cache) -> list:
    """The compile cache's entries holding a library, whatever its sources' language."""
    return [d for d in cache.iterdir() if re.fullmatch(r"[0-9a-f]{24}", d.name) and any(d.glob("*.so"))]
