"""Names from the URDF cannot inject code: generated code is compiled and loaded into the
user's process, so every name reaches it through rbdgen.codegen.escape. With hostile robot,
link and joint names (newlines, quotes, backslashes, ``*/``, ``??/`` trigraphs, ``#error``,
Tcl brackets, non-ASCII), the generated code compiles and gives the reference's numbers, on
every target, and no name appears in it unescaped.
"""
from __future__ import annotations

import importlib
import re
import sys
from xml.sax.saxutils import quoteattr

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rbdgen
import rbdgen.robots
from rbdgen import reference as ref
from rbdgen.codegen import escape as esc
from rbdgen.cli import main

from conftest import TOL64, kernel_err

IIWA = rbdgen.robots.path("iiwa14")
KERNELS = ("rnea", "forward_kinematics", "frame_jacobian_local")  # the last: link names as frames

#: the attacks of the issue that found the hole, and a few more
HOSTILE = {
    "robot": 'r */ #error X /* a"b \\',
    "links": ["l1\nq = v; //", 'a"b', "??/", "x\\", "*/ int evil; /*", "ロボット", "{[$tcl]}", "%s%n"],
    "joints": ["j1\r\n#define S int", "j'2", "j\t3", "??=", "j/*5", "é6", "$::env(X)"],
}


def _renamed(robot: str, links: list, joints: list) -> str:
    """iiwa14's URDF with its robot, link and joint names replaced (XML-escaped attributes;
    control characters as character references so the XML keeps them)."""
    text = IIWA.read_text()
    old_links = re.findall(r'<link name="([^"]+)"', text)
    old_joints = re.findall(r'<joint name="([^"]+)"', text)

    def attr(s):
        return quoteattr(s, {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})

    text = re.sub(r'<robot name="[^"]+"', lambda _: f"<robot name={attr(robot)}", text, count=1)
    for old, new in zip(old_joints, joints):
        text = text.replace(f'<joint name="{old}"', f"<joint name={attr(new)}")
    for old, new in zip(old_links, links):
        text = text.replace(f'"{old}"', attr(new))
    return text


_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _code(line: str) -> str:
    """A line without its comments and the contents of its string literals."""
    s = line.strip()
    if s.startswith(("/*", "* ", "*/", "#")) or s == "*":  # C block-comment lines; Tcl comments
        return ""
    return _STRING.sub('""', line).split("//")[0].rstrip()


def _same_code(hostile: dict, benign: dict) -> None:
    """Names may change comments and string literals only: the same files, the same number of
    lines, and the same code on every line."""
    assert sorted(hostile) == sorted(benign)
    for fn in hostile:
        if fn.endswith((".json", ".py")):
            continue
        a, b = hostile[fn].split("\n"), benign[fn].split("\n")
        assert len(a) == len(b), f"{fn}: a name changed the number of lines"
        for x, y in zip(a, b):
            assert _code(x) == _code(y), (fn, x, y)


def _benign(robot: str, n_links: int = 8, n_joints: int = 7) -> str:
    from rbdgen.codegen.sources import c_identifier

    return _renamed(c_identifier(robot), [f"L{i}" for i in range(n_links)], [f"J{i}" for i in range(n_joints)])


def _check_numbers(kern, model):
    rng = np.random.default_rng(0)
    q = model.random_q(rng, 3)
    v, a = rng.normal(size=(2, 3, model.nv))
    assert kernel_err(kern.rnea(q, v, a), ref.rnea(model, q, v, a)) <= TOL64
    assert kernel_err(kern.forward_kinematics(q), ref.forward_kinematics(model, q)) <= TOL64
    assert kernel_err(kern.kernel("frame_jacobian_local")(q), ref.frame_jacobian(model, q)) <= TOL64


def _all_frames(m):
    """Every link as a frame: every hostile name reaches a frame kernel's comments."""
    return m.with_frames([f.name for f in m.link_frames])


_text = st.lists(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00\x0b\x0c")
                 | st.sampled_from(["*/", "/*", "??/", "\\", "\n", "\r", '"', "'", "//", "#", "{", "}", "[", "$"]),
                 min_size=1, max_size=6).map("".join)


def _xml_ok(s: str) -> bool:
    # XML 1.0 cannot hold other control characters, even as references; a URDF cannot either
    return all(c in "\t\n\r" or ord(c) >= 0x20 for c in s) and s.strip() == s and s != ""


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(robot=_text.filter(_xml_ok), links=st.lists(_text.filter(_xml_ok), min_size=8, max_size=8, unique=True),
       joints=st.lists(_text.filter(_xml_ok), min_size=7, max_size=7, unique=True))
def test_arbitrary_names_compile_and_match_reference(tmp_path_factory, robot, links, joints):
    path = tmp_path_factory.mktemp("names") / "robot.urdf"
    path.write_text(_renamed(robot, links, joints), encoding="utf-8")
    m = _all_frames(rbdgen.load_urdf(path))
    assert m.name == robot and set(m.joint_names) == set(joints)
    from rbdgen.targets.cpu import generate_cpu

    ok = path.with_name("benign.urdf")
    ok.write_text(_benign(robot))
    _same_code(generate_cpu(m, kernels=KERNELS, name="x").files,
               generate_cpu(_all_frames(rbdgen.load_urdf(ok)), kernels=KERNELS, name="x").files)
    _check_numbers(rbdgen.build(m, kernels=KERNELS, opt="-O0", simd=False), m)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "robot.urdf"
    path.write_text(_renamed(HOSTILE["robot"], HOSTILE["links"], HOSTILE["joints"]), encoding="utf-8")
    return path, _all_frames(rbdgen.load_urdf(path))


def _cli_files(urdf, out, *args):
    frames = ",".join(f.name for f in rbdgen.load_urdf(urdf).link_frames)  # (no commas in HOSTILE)
    rc = main(["generate", str(urdf), "--out", str(out), "--name", "evil", "--kernels", ",".join(KERNELS), "-q",
               "--frames", frames, *args])
    assert rc == 0
    return {p.name: p.read_text(encoding="utf-8") for p in (out / "evil").iterdir()}


@pytest.fixture(scope="module")
def benign(tmp_path_factory):
    path = tmp_path_factory.mktemp("benign") / "robot.urdf"
    path.write_text(_benign(HOSTILE["robot"]), encoding="utf-8")
    return path


@pytest.mark.parametrize("target", [["--dtype", "float64"], ["--target", "cuda", "--dtype", "float64"],
                                    ["--target", "hls", "--fixed", "32,16"]], ids=["cpu", "cuda", "hls"])
def test_hostile_names_change_only_comments_and_strings(hostile, benign, tmp_path, target):
    _same_code(_cli_files(hostile[0], tmp_path / "h", *target), _cli_files(benign, tmp_path / "b", *target))


def test_hostile_names_generated_package(hostile, tmp_path, capsys):
    """The CLI writes a package whose C++ compiles and whose __init__.py imports and runs."""
    path, m = hostile
    _cli_files(path, tmp_path, "--dtype", "float64")
    sys.path.insert(0, str(tmp_path))
    try:
        pkg = importlib.import_module("evil")
        assert pkg.robot == HOSTILE["robot"] and tuple(pkg.joint_names) == m.joint_names
        assert HOSTILE["robot"] in pkg.__doc__
        _check_numbers(pkg.load(opt="-O0"), m)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("evil", None)


def test_hostile_names_cuda_emulated(hostile):
    pytest.importorskip("nvidia", reason="nvcc comes from the CUDA wheels `make` installs")
    _, m = hostile
    # PTX only (nvcc's device front end sees the names; no ptxas, no second architecture)
    kern = rbdgen.build(m, target="cuda", kernels=KERNELS, opt="-O0", arch="compute_90", werror=True)
    _check_numbers(kern.emulated(), m)


def test_hostile_names_hls_csim_and_tcl(hostile):
    _, m = hostile
    from rbdgen.targets.hls.emit import generate_hls

    gen = generate_hls(m, kernels=KERNELS)
    tcl = gen.files[gen.tcl]
    assert not re.search(r"^[^#\n]*[\[\]$]", "\n".join(ln for ln in tcl.splitlines() if "robot" in ln.lower()))
    _check_numbers(rbdgen.build(m, target="hls", kernels=KERNELS, opt="-O0"), m)


def test_escape_functions():
    assert esc.comment("a*/b\n") == "a<U+002A><U+002F>b<U+000A>"
    assert esc.comment("iiwa_link_4 (joint j-4)") == "iiwa_link_4 (joint j-4)"  # ordinary names read as is
    assert esc.c_string('a"b\\?') == "a\\042b\\134\\077"
    assert esc.c_string("é") == "\\303\\251"
    assert esc.py_docstring('x"""\\\x00') == 'x\\"\\"\\"\\\\\\U00000000'
