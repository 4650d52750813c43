"""The ``rbdgen`` command line: ``inspect`` output, and user mistakes as one ``error:`` line, exit 2.

Most tests call :func:`rbdgen.cli.main` in-process; a few run the real executable.
"""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import rbdgen
import rbdgen.robots
from conftest import assert_one_error_line, run_main  # noqa: E402

IIWA = rbdgen.robots.path("iiwa14")
QUADRUPED = rbdgen.robots.path("quadruped")

_INERTIA = '<inertia ixx="{}" ixy="0" ixz="0" iyy="{}" iyz="0" izz="{}"/>'


def _link(name, mass, ixx, iyy, izz):
    return (f'<link name="{name}"><inertial><mass value="{mass}"/>' + _INERTIA.format(ixx, iyy, izz)
            + "</inertial></link>")


def _joint(name, parent, child, type="revolute", extra=""):
    lim = '<limit lower="-1" upper="1" effort="1" velocity="1"/>' if type == "revolute" else ""
    return (f'<joint name="{name}" type="{type}"><parent link="{parent}"/><child link="{child}"/>'
            f'<axis xyz="0 0 1"/>{lim}{extra}</joint>')


def _robot(*parts):
    return '<robot name="clibot">' + "".join(parts) + "</robot>"


@pytest.fixture
def files(tmp_path):
    """Bad and odd URDFs written to tmp_path."""
    base = _link("base", 1, 0.1, 0.1, 0.1)
    out = {
        "malformed": '<robot name="r"><link name="a"></robot>',
        "mimic": _robot(base, _link("l1", 1, 0.1, 0.1, 0.1), _link("l2", 1, 0.1, 0.1, 0.1),
                        _joint("j1", "base", "l1"), _joint("j2", "l1", "l2", extra='<mimic joint="j1"/>')),
        "sensor": _robot(base, _link("l1", 5, 0.2, 0.2, 0.2), _link("imu_sensor", 0.01, -1e-4, 1e-6, 1e-6),
                         _joint("j1", "base", "l1"), _joint("imu_joint", "l1", "imu_sensor", type="fixed")),
    }
    paths = {}
    for name, text in out.items():
        paths[name] = tmp_path / f"{name}.urdf"
        paths[name].write_text(text)
    paths["missing"] = tmp_path / "missing.urdf"
    return paths




# ---------------------------------------------------------------------------------------------
# inspect

def test_inspect_iiwa14(capsys):
    rc, out, err = run_main(capsys, "inspect", IIWA)
    assert rc == 0, err
    assert err == ""
    assert "nq 7" in out and "nv 7" in out
    root = ET.parse(IIWA).getroot()
    movable = [j.get("name") for j in root.findall("joint") if j.get("type") != "fixed"]
    assert len(movable) == 7
    for name in movable:
        assert name in out
    assert "total mass 17.5 kg" in out
    assert "fixed joints merged (1):" in out
    assert "iiwa_joint_ee: link iiwa_link_ee -> iiwa_link_7" in out
    assert "fixed base" in out


def test_inspect_floating_base_quadruped(capsys):
    rc, out, err = run_main(capsys, "inspect", "--floating-base", QUADRUPED)
    assert rc == 0, err
    assert "root_joint" in out
    assert "nq 19" in out and "nv 18" in out
    assert "floating base" in out
    rc, out, _ = run_main(capsys, "inspect", QUADRUPED)
    assert rc == 0
    assert "root_joint" not in out
    assert "nq 12" in out


def test_inspect_mimic_independent(capsys, files):
    rc, out, err = run_main(capsys, "inspect", "--mimic", "independent", files["mimic"])
    assert rc == 0, err
    assert "mimic joints treated as independent: j2" in out


# ---------------------------------------------------------------------------------------------
# user mistakes: exit 2, one "error: " line naming the file, no traceback

def test_missing_file(capsys, files):
    rc, out, err = run_main(capsys, "inspect", files["missing"])
    assert rc == 2
    assert_one_error_line(err, out, files["missing"], "no such file")


def test_malformed_xml(capsys, files):
    rc, out, err = run_main(capsys, "inspect", files["malformed"])
    assert rc == 2
    assert_one_error_line(err, out, files["malformed"], "malformed XML")


def test_mimic_refused(capsys, files):
    rc, out, err = run_main(capsys, "inspect", files["mimic"], "--mimic", "refuse")
    assert rc == 2
    assert_one_error_line(err, out, files["mimic"], "joint 'j2'", "--mimic couple", "mimic='independent'")
    rc, out, err = run_main(capsys, "inspect", files["mimic"])  # the default couples it
    assert rc == 0 and "mimic joints coupled" in out


def test_directory(capsys, tmp_path):
    rc, out, err = run_main(capsys, "inspect", tmp_path)
    assert rc == 2
    assert_one_error_line(err, out, tmp_path, "directory")


def test_unknown_option(capsys):
    rc, out, err = run_main(capsys, "inspect", "--bogus", "x.urdf")
    assert rc == 2
    assert_one_error_line(err, out, "--bogus", "rbdgen inspect --help")


def test_unknown_command(capsys):
    rc, out, err = run_main(capsys, "frobnicate", "x.urdf")
    assert rc == 2
    assert_one_error_line(err, out, "frobnicate", "rbdgen --help")


def test_missing_argument(capsys):
    rc, out, err = run_main(capsys, "inspect")
    assert rc == 2
    assert_one_error_line(err, out, "URDF")


def test_no_command(capsys):
    rc, out, err = run_main(capsys)
    assert rc == 2
    assert_one_error_line(err, out, "missing command", "rbdgen --help")


def test_bad_choice(capsys):
    rc, out, err = run_main(capsys, "inspect", "--mimic", "sometimes", IIWA)
    assert rc == 2
    assert_one_error_line(err, out, "sometimes")


# ---------------------------------------------------------------------------------------------
# warnings, help, version

def test_non_physical_merged_link_warns(capsys, files):
    rc, out, err = run_main(capsys, "inspect", files["sensor"])
    assert rc == 0, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("warning: ")
    assert "link 'imu_sensor'" in lines[0] and str(files["sensor"]) in lines[0]
    assert "imu_joint: link imu_sensor -> l1" in out


def test_help(capsys):
    rc, out, _ = run_main(capsys, "--help")
    assert rc == 0
    assert "inspect" in out and "Usage:" in out
    rc, out, _ = run_main(capsys, "inspect", "--help")
    assert rc == 0
    assert "--floating-base" in out and "--mimic" in out


def test_version(capsys):
    rc, out, _ = run_main(capsys, "--version")
    assert rc == 0
    assert rbdgen.__version__ in out


# ---------------------------------------------------------------------------------------------
# the real executable

def _run(*args):
    env = dict(os.environ, PYTHONWARNINGS="")
    return subprocess.run([*args], capture_output=True, text=True, timeout=120, env=env)


def test_subprocess_module(files):
    r = _run(sys.executable, "-m", "rbdgen", "inspect", str(IIWA))
    assert r.returncode == 0, r.stderr
    assert "nq 7" in r.stdout and "iiwa_joint_7" in r.stdout
    r = _run(sys.executable, "-m", "rbdgen", "inspect", str(files["malformed"]))
    assert r.returncode == 2
    assert_one_error_line(r.stderr, r.stdout, files["malformed"], "malformed XML")
    r = _run(sys.executable, "-m", "rbdgen", "inspect", "--bogus", "x.urdf")
    assert r.returncode == 2
    assert_one_error_line(r.stderr, r.stdout, "--bogus")


def test_subprocess_console_script(files):
    script = Path(sys.executable).parent / "rbdgen"
    if not script.exists():
        pytest.skip(f"no console script next to {sys.executable}")
    r = _run(str(script), "--version")
    assert r.returncode == 0 and rbdgen.__version__ in r.stdout
    r = _run(str(script), "inspect", str(files["missing"]))
    assert r.returncode == 2
    assert_one_error_line(r.stderr, r.stdout, files["missing"])
