"""`rbdgen generate` into a folder that already holds a package, and a `generate` that is stopped
(issue 46, items 5 and 6): the user's files in the package folder survive a regeneration, and a
run ended by SIGTERM, SIGHUP or SIGINT (or killed outright, and then followed by another run)
leaves no temporary folder and none of the folders it created."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rbdgen.robots
from rbdgen.robots import chain_urdf

from conftest import assert_one_error_line, run_main

IIWA = rbdgen.robots.path("iiwa14")

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")


def _dot_entries(folder: Path) -> list:
    """Temporary folders of rbdgen (``.NAME.tmp-…``, ``.NAME.old-…``) and anything else hidden."""
    return sorted(e for e in os.listdir(folder) if e.startswith("."))


def _user_files(pkg: Path) -> None:
    (pkg / "NOTES.txt").write_text("my notes")
    (pkg / "build").mkdir()
    (pkg / "build" / "CMakeCache.txt").write_text("cmake")
    (pkg / ".gitignore").write_text("build/\n")


def _check_user_files(pkg: Path) -> None:
    assert (pkg / "NOTES.txt").read_text() == "my notes"
    assert (pkg / "build" / "CMakeCache.txt").read_text() == "cmake"
    assert (pkg / ".gitignore").read_text() == "build/\n"


def _check_package(pkg: Path, user=("NOTES.txt", "build", ".gitignore")) -> dict:
    """The folder is one whole package (every file its manifest lists, with the listed bytes)
    plus the user's entries, nothing else."""
    m = json.loads((pkg / "manifest.json").read_text())
    on_disk = sorted(e for e in os.listdir(pkg) if e != "__pycache__")
    assert on_disk == sorted([*m["files"], "manifest.json", *user])
    for fn, digest in m["files"].items():
        assert hashlib.sha256((pkg / fn).read_bytes()).hexdigest() == digest, fn
    return m


# ---- item 5: the user's files in a package folder ----------------------------------------------

def test_regenerate_keeps_files_the_manifest_does_not_list(capsys, tmp_path):
    """Regenerating used to replace the folder whole: NOTES.txt and a CMake build/ folder vanished.
    Now what the old manifest lists is replaced (a kernel no longer generated goes), the rest stays."""
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "gravity,crba",
                            "--dtype", "float64", "-q")
    assert rc == 0, err
    pkg = tmp_path / "iiwa14"
    _user_files(pkg)
    (pkg / "__pycache__").mkdir()  # Python's cache of the generated __init__.py: rbdgen's, not the user's
    (pkg / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"stale")
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "crba", "--dtype", "float64",
                            "-q")
    assert rc == 0, err
    _check_user_files(pkg)
    m = _check_package(pkg)
    assert m["kernel_order"] == ["crba"]
    assert not (pkg / "rbd_iiwa14_gravity_f64.cpp").exists()  # listed by the old manifest: gone
    assert not (pkg / "__pycache__").exists()
    assert _dot_entries(tmp_path) == []


def test_regenerate_refuses_to_overwrite_a_file_it_did_not_write(capsys, tmp_path):
    """A file of the user's with the name of a file the new package writes: refused, one line
    naming it, and nothing changes."""
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "crba", "--dtype", "float64",
                            "-q")
    assert rc == 0, err
    pkg = tmp_path / "iiwa14"
    (pkg / "rbd_iiwa14_gravity_f64.cpp").write_text("// mine")
    before = {f: (pkg / f).read_bytes() for f in os.listdir(pkg)}
    rc, out, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "gravity,crba",
                            "--dtype", "float64", "-q")
    assert rc == 2
    assert_one_error_line(err, out, pkg, "rbd_iiwa14_gravity_f64.cpp", "not listed in its manifest.json")
    assert {f: (pkg / f).read_bytes() for f in os.listdir(pkg)} == before
    assert _dot_entries(tmp_path) == []


def _default_signals():
    """In the child, before it runs: SIGINT and SIGHUP back to their default action. A child
    inherits ignored signals, and a test run started in the background (``cmd &`` in a script
    ignores SIGINT) or under nohup (SIGHUP) would otherwise see every stop signal of these tests
    ignored, and fail them for how it was started."""
    for s in (signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


_KILL_AT_RENAME = """
import os, signal, sys
out = {out!r}
calls = [0]
real = os.rename
def rename(a, b):
    if out in os.fspath(a) or out in os.fspath(b):
        calls[0] += 1
        if calls[0] == {k}:
            os.kill(os.getpid(), signal.{sig})
    return real(a, b)
os.rename = rename
from rbdgen.cli import main
sys.exit(main({args!r}))
"""


@posix_only
@pytest.mark.parametrize("k", [2, 3, 4], ids=["moving-the-users-files", "before-the-swap", "between-the-renames"])
def test_a_regeneration_killed_mid_swap_loses_nothing(capsys, tmp_path, k):
    """SIGKILL (nothing of rbdgen runs) at the k-th rename of the swap: with the user's files half
    moved into the new package, or with the old package renamed away and the new one not yet in
    place. The next run, of another package into the same folder, puts the folder back whole (the
    old package, or the new one: never a mix) with every file of the user's, and leaves no
    temporary folder."""
    out = tmp_path / "out"
    rc, _, err = run_main(capsys, "generate", IIWA, "--out", out, "--kernels", "gravity,crba", "--dtype", "float64",
                          "-q")
    assert rc == 0, err
    pkg = out / "iiwa14"
    (pkg / "NOTES.txt").write_text("my notes")
    (pkg / "build").mkdir()
    (pkg / "build" / "CMakeCache.txt").write_text("cmake")
    args = ["generate", str(IIWA), "--out", str(out), "--kernels", "crba", "--dtype", "float64", "-q"]
    r = subprocess.run([sys.executable, "-c", _KILL_AT_RENAME.format(out=str(out), k=k, sig="SIGKILL", args=args)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == -signal.SIGKILL, r.stderr
    rc, _, err = run_main(capsys, "generate", IIWA, "--out", out, "--kernels", "gravity", "--dtype", "float64",
                          "--name", "other", "-q")
    assert rc == 0, err
    assert sorted(os.listdir(out)) == ["iiwa14", "other"]
    m = _check_package(pkg, user=("NOTES.txt", "build"))
    assert m["kernel_order"] in (["gravity", "crba"], ["crba"])
    assert (pkg / "NOTES.txt").read_text() == "my notes"
    assert (pkg / "build" / "CMakeCache.txt").read_text() == "cmake"


@posix_only
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_mid_swap_waits_for_the_swap(capsys, tmp_path, sig):
    """SIGTERM or Ctrl-C with the user's files half moved into the new package: the swap finishes
    first (the new package, whole, with every file of the user's), then the signal takes effect."""
    rc, _, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "gravity,crba",
                          "--dtype", "float64", "-q")
    assert rc == 0, err
    pkg = tmp_path / "iiwa14"
    _user_files(pkg)
    args = ["generate", str(IIWA), "--out", str(tmp_path), "--kernels", "crba", "--dtype", "float64", "-q"]
    r = subprocess.run([sys.executable, "-c", _KILL_AT_RENAME.format(out=str(tmp_path), k=2, sig=sig, args=args)],
                       capture_output=True, text=True, timeout=300, preexec_fn=_default_signals)
    if sig == "SIGINT":
        assert r.returncode == 1 and r.stderr.strip() == "error: aborted", r.stderr
    else:
        assert r.returncode == -signal.SIGTERM, r.stderr
    _check_user_files(pkg)
    assert _check_package(pkg)["kernel_order"] == ["crba"]
    assert _dot_entries(tmp_path) == []


# ---- item 6: a generate that is stopped ---------------------------------------------------------

@pytest.fixture(scope="module")
def long_chain(tmp_path_factory):
    """A robot that takes seconds to generate (rnea of 600 links), so a signal finds it generating."""
    p = tmp_path_factory.mktemp("chain") / "chain600.urdf"
    p.write_text(chain_urdf(600))
    return p


def _start_generate(urdf: Path, out: Path, **popen):
    cmd = [sys.executable, "-m", "rbdgen", "generate", str(urdf), "--out", str(out), "--kernels", "rnea",
           "--dtype", "float64", "--name", "chain", "-q"]
    theirs = popen.pop("preexec_fn", None)

    def before():
        _default_signals()
        if theirs is not None:
            theirs()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=before,
                            **popen)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_dir() and any(".tmp-" in e for e in os.listdir(out)):
            return proc  # generating: the temporary folder is made before the slow steps
        time.sleep(0.005)
    proc.kill()
    raise AssertionError(f"never saw the temporary folder: rc {proc.wait()}, {proc.stderr.read()}")


@posix_only
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_signal_during_generate_leaves_nothing_behind(tmp_path, long_chain, sig):
    """SIGTERM (what `timeout` and CI send) and SIGHUP (a closed terminal) used to end the process
    on the spot: OUT/.chain.tmp-* and the folders --out created stayed. Now they get the cleanup of
    Ctrl-C, and the process then ends by the same signal (the shell sees 128 + signal number);
    Ctrl-C still ends with 'error: aborted', exit 1."""
    signum = getattr(signal, sig)
    out = tmp_path / "made" / "by" / "generate"
    proc = _start_generate(long_chain, out)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    assert "wrote" not in stdout  # it was stopped while generating
    if signum == signal.SIGINT:
        assert proc.returncode == 1 and stderr.strip() == "error: aborted", (proc.returncode, stderr)
    else:
        assert proc.returncode == -signum, (proc.returncode, stderr)
        assert stderr == ""
    assert os.listdir(tmp_path) == []  # no temporary folder, and no folder of the ones --out created


@posix_only
def test_an_ignored_sighup_stays_ignored(tmp_path, long_chain):
    """Under `nohup` (SIGHUP ignored) a hangup does not stop generate."""
    out = tmp_path / "out"
    proc = _start_generate(long_chain, out, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    proc.send_signal(signal.SIGHUP)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert os.listdir(out) == ["chain"]


@posix_only
def test_a_later_run_removes_what_a_killed_generate_left(capsys, tmp_path, long_chain):
    """SIGKILL runs no cleanup: the temporary folder stays. The next generate into that folder
    removes it (its process is gone), whatever package it writes."""
    out = tmp_path / "out"
    proc = _start_generate(long_chain, out)
    proc.kill()
    proc.communicate(timeout=60)
    left = _dot_entries(out)
    assert left and all(e.startswith(".chain.tmp-") for e in left)
    rc, _, err = run_main(capsys, "generate", IIWA, "--out", out, "--kernels", "gravity", "--dtype", "float64", "-q")
    assert rc == 0, err
    assert os.listdir(out) == ["iiwa14"]


def test_a_later_run_removes_only_old_temporary_folders_of_unknown_owner(capsys, tmp_path):
    """Temporary folders named without their process (written by rbdgen before this change, or by
    another machine) are removed once they are a day old; younger ones may belong to a run in
    progress and stay."""
    old, young = tmp_path / ".iiwa14.tmp-k2j4_9xq", tmp_path / ".quadruped.tmp-a8c0v1zz"
    for d in (old, young):
        d.mkdir()
        (d / "rbd_iiwa14_rnea_f64.cpp").write_text("half written")
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    rc, _, err = run_main(capsys, "generate", IIWA, "--out", tmp_path, "--kernels", "gravity", "--dtype", "float64",
                          "-q")
    assert rc == 0, err
    assert sorted(os.listdir(tmp_path)) == [young.name, "iiwa14"]
