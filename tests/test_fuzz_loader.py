"""Fuzzing the URDF loader: random mutations of valid URDFs (elements dropped, duplicated or
renamed; attributes set to NaN, huge, negative, empty or non-numeric values; links re-parented
into cycles) always give either a model or one of rbdgen's errors (URDFError, or
UnsupportedError for valid input rbdgen refuses) — never another exception, never a hang."""
from __future__ import annotations

import signal
import warnings
import xml.etree.ElementTree as ET

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rbdgen
import rbdgen.robots
from rbdgen.errors import RbdgenError, RbdgenWarning

BASES = {name: ET.parse(rbdgen.robots.path(name)).getroot() for name in ("iiwa14", "quadruped")}
VALUES = ["nan", "NaN", "inf", "-inf", "1e308", "-1e308", "1e300 0 0", "-1", "0", "", " ", "abc", "1 2",
          "1 2 3 4", "0 0 0", "1e-320", "0x10", "1,2,3", "∞", "-0", "1e16 1e16 1e16"]


@st.composite
def mutated(draw):
    root = ET.fromstring(ET.tostring(BASES[draw(st.sampled_from(sorted(BASES)))]))
    elements = [e for e in root.iter() if e is not root]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["attr", "attr", "attr", "drop", "dup", "rename", "reparent"]))
        el = draw(st.sampled_from(elements))
        if op == "attr":
            keys = sorted(el.attrib) or ["name"]
            el.set(draw(st.sampled_from(keys)), draw(st.sampled_from(VALUES) | st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=6)))
        elif op == "drop":
            for parent in root.iter():
                if el in list(parent):
                    parent.remove(el)
                    break
        elif op == "dup":
            for parent in root.iter():
                if el in list(parent):
                    parent.append(ET.fromstring(ET.tostring(el)))
                    break
        elif op == "rename":
            el.tag = draw(st.sampled_from(["link", "joint", "inertial", "origin", "mass", "axis", "limit",
                                           "parent", "child", "mimic", "robot", "bogus"]))
        else:  # point a joint's parent at a random link (cycles, self-loops, unknown links)
            joints = root.findall("joint")
            links = [lk.get("name", "") for lk in root.findall("link")] + ["nowhere"]
            if joints:
                j = draw(st.sampled_from(joints))
                p = j.find("parent")
                if p is not None:
                    p.set("link", draw(st.sampled_from(links)))
    return ET.tostring(root, encoding="unicode")


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mutated(), floating=st.booleans())
def test_mutated_urdfs_load_or_fail_cleanly(tmp_path_factory, text, floating):
    p = tmp_path_factory.mktemp("fuzz") / "robot.urdf"
    p.write_text(text, encoding="utf-8")
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RbdgenWarning)
            for mimic in ("error", "independent"):
                try:
                    m = rbdgen.load_urdf(p, floating_base=floating, mimic=mimic)
                except RbdgenError as e:
                    assert str(p) in str(e), e  # names the file
                    assert "\n" not in " ".join(str(e).split())
                else:
                    assert m.nb >= 1 and m.nv >= 1
    except _Hang:
        pytest.fail(f"the loader hung on:\n{text}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
