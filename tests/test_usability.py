"""What a new user trips over (issue 45, item 4): help texts that say what a command does, reference
frames in Pinocchio's spelling, a missing kernel that says how to add it, and a hint to ``--snap``
where a URDF's rounded quarter turns cost operations."""
from __future__ import annotations

import re

import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from conftest import run_main  # noqa: E402
from rbdgen import reference as ref

IIWA = rbdgen.robots.path("iiwa14")
EE = "iiwa_link_ee"


def _help(capsys, *args) -> str:
    rc, out, err = run_main(capsys, *args, "--help")
    assert rc == 0, err
    return " ".join(out.split())


# ---------------------------------------------------------------------------------------------
# help texts

def test_demo_help_says_what_demo_does(capsys):
    """`rbdgen demo` builds, validates and times the iiwa's kernels, then checks CUDA and HLS;
    its help used to speak of "the bundled robots" and "the reference dynamics"."""
    text = _help(capsys, "demo")
    assert "make demo" in text and "iiwa" in text
    for word in ("compile", "Pinocchio", "time", "CUDA", "HLS"):
        assert word in text, word
    assert "bundled robots, run the reference dynamics" not in text


@pytest.mark.parametrize("command", ["inspect", "generate", "validate"])
def test_mimic_help_lists_only_documented_modes(capsys, command):
    text = _help(capsys, command)
    assert "[couple|independent|refuse]" in text
    assert "|error" not in text


def test_mimic_error_is_still_accepted_as_refuse(capsys, tmp_path):
    """'error' was refuse's old name: still taken (scripts and old manifests), just not shown."""
    p = tmp_path / "mimic.urdf"
    p.write_text('<robot name="m"><link name="base"/><link name="l1"><inertial><mass value="1"/>'
                 '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>'
                 '<link name="l2"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" '
                 'izz="0.1"/></inertial></link>'
                 '<joint name="j1" type="continuous"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/></joint>'
                 '<joint name="j2" type="continuous"><parent link="l1"/><child link="l2"/><axis xyz="0 0 1"/>'
                 '<mimic joint="j1"/></joint></robot>')
    outs = []
    for mode in ("error", "refuse"):
        rc, out, err = run_main(capsys, "inspect", p, "--mimic", mode)
        assert rc == 2 and "joint 'j2'" in err, err
        outs.append(err)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("command", ["inspect", "generate", "validate"])
def test_no_help_names_its_target_twice(capsys, command):
    """The target prefix is added once ("hls: hls (ap_fixed): …" was --dsp-budget's help, "cpu/cuda/hls:
    cpu, cuda, hls: yes" --unroll's)."""
    text = " ".join(_help(capsys, command).split())
    twice = r"\b(?:cpu|cuda|hls)(?:/(?:cpu|cuda|hls))*: (?:cpu|cuda|hls)\b(?:[,:]| \()"
    assert not re.search(twice, text), re.search(twice + ".{0,60}", text)
    assert "--dsp-budget N hls: each kernel" in text if command != "validate" else True


# ---------------------------------------------------------------------------------------------
# reference frames in Pinocchio's spelling

SPELLINGS = {"local": ("LOCAL", "Local", "local"), "world": ("WORLD", "World"),
             "local_world_aligned": ("LOCAL_WORLD_ALIGNED", "Local_World_Aligned")}


@pytest.fixture(scope="module")
def iiwa_frames():
    return rbdgen.load_urdf(IIWA).with_frames([EE])


@pytest.mark.parametrize("canonical", sorted(SPELLINGS))
def test_reference_accepts_pinocchio_spelling(iiwa_frames, canonical):
    m = iiwa_frames
    rng = np.random.default_rng(3)
    q, v = m.random_q(rng), rng.standard_normal(m.nv)
    J = ref.frame_jacobian(m, q, EE, canonical)
    a = ref.frame_bias_acceleration(m, q, v, EE, canonical)
    w = ref.frame_velocity(m, q, v, EE, canonical)
    for name in SPELLINGS[canonical]:
        np.testing.assert_array_equal(ref.frame_jacobian(m, q, EE, name), J)
        np.testing.assert_array_equal(ref.frame_bias_acceleration(m, q, v, EE, name), a)
        np.testing.assert_array_equal(ref.frame_velocity(m, q, v, EE, name), w)


def test_reference_accepts_pinocchio_enum(iiwa_frames):
    pin = pytest.importorskip("pinocchio")
    m = iiwa_frames
    q = m.random_q(np.random.default_rng(4))
    for enum, name in ((pin.LOCAL, "local"), (pin.WORLD, "world"), (pin.LOCAL_WORLD_ALIGNED, "local_world_aligned")):
        np.testing.assert_array_equal(ref.frame_jacobian(m, q, EE, enum), ref.frame_jacobian(m, q, EE, name))


def test_unknown_reference_names_the_choices(iiwa_frames):
    q = iiwa_frames.random_q(np.random.default_rng(5))
    with pytest.raises(ValueError, match=r"reference must be one of .*'local'.*LOCAL.*got 'body'"):
        ref.frame_jacobian(iiwa_frames, q, EE, "body")
    with pytest.raises(ValueError, match="reference must be"):
        ref.frame_jacobian(iiwa_frames, q, EE, 3)


# ---------------------------------------------------------------------------------------------
# loaded kernels: references by any spelling, a missing kernel that says how to add it

@pytest.fixture(scope="module")
def small_build(iiwa_frames):
    return rbdgen.build(iiwa_frames, kernels=["rnea", "frame_jacobian_local", "frame_jacobian_world",
                                              "frame_bias_acceleration_world"], opt="-O1", simd=False)


def test_loaded_kernels_take_pinocchio_spelling(small_build, iiwa_frames):
    k = small_build
    rng = np.random.default_rng(6)
    q, v = iiwa_frames.random_q(rng), rng.standard_normal(iiwa_frames.nv)
    for name in ("LOCAL", "Local"):
        np.testing.assert_array_equal(k.frame_jacobian(q, EE, name), k.frame_jacobian(q, EE, "local"))
    np.testing.assert_array_equal(k.frame_jacobian(q, EE, "WORLD"), k.frame_jacobian(q, EE, "world"))
    np.testing.assert_array_equal(k.frame_bias_acceleration(q, v, EE, "WORLD"),
                                  k.frame_bias_acceleration(q, v, EE, "world"))
    with pytest.raises(ValueError, match="frame_jacobian_local_world_aligned, which was not built"):
        k.frame_jacobian(q, EE, "LOCAL_WORLD_ALIGNED")


def test_missing_kernel_says_what_the_build_has_and_how_to_add_it(small_build):
    k = small_build
    with pytest.raises(AttributeError) as e:
        k.crba
    msg = str(e.value)
    assert type(e.value) is not AttributeError  # a subclass: hasattr() and getattr(k, n, None) still work
    assert "'crba'" in msg and "rnea" in msg and "frame_jacobian_local" in msg
    assert "rbdgen.build(" in msg and "kernels=[" in msg and "'crba'" in msg
    assert not hasattr(k, "aba") and getattr(k, "minv", None) is None
    with pytest.raises(AttributeError, match=r"did you mean 'rnea'"):
        k.rnae
    # the frame methods of this build are installed (each says which kernel it lacks when called)
    with pytest.raises(ValueError, match="osim_inverse, which was not built"):
        k.osim_inverse(np.zeros(k.nq))


def _bare(cls, kernels):
    """An instance with only what the error message reads: no library behind it (CUDA and HLS
    builds take a compiler each; the message does not)."""
    obj = cls.__new__(cls)
    obj.__dict__["kernels"] = tuple(kernels)
    return obj


def test_missing_kernel_on_cuda_and_hls_objects():
    from rbdgen.targets.cuda.runtime import CudaKernels, _Emulated
    from rbdgen.targets.hls.csim import HLSKernels

    for cls in (CudaKernels, _Emulated, HLSKernels):
        obj = _bare(cls, ["rnea", "aba"])
        with pytest.raises(AttributeError, match=r"no kernel 'crba'.*rnea, aba.*kernels=\[") as e:
            obj.crba
        assert type(e.value) is not AttributeError, cls
        with pytest.raises(AttributeError) as e:
            obj._private
        assert "kernel" not in str(e.value)
    # a by-name method of a build without frame kernels: names the kernel it calls and frames=
    with pytest.raises(AttributeError, match=r"no kernel 'frame_jacobian_local' \(which frame_jacobian\(\) calls\)"
                                             r".*kernels=\[\.\.\., 'frame_jacobian_local'\], frames="):
        _bare(CudaKernels, ["rnea"]).frame_jacobian


# ---------------------------------------------------------------------------------------------
# --snap hint

@pytest.fixture(scope="module")
def rounded(tmp_path_factory):
    """The iiwa with its quarter turns written as 1.5708 (as many URDFs have them)."""
    p = tmp_path_factory.mktemp("snap") / "iiwa_rounded.urdf"
    p.write_text(IIWA.read_text().replace("1.5707963267948966", "1.5708"))
    return p


def _ops(model):
    from rbdgen.registry import trace

    return trace(model, "rnea").op_counts()["total"]


def test_inspect_suggests_snap_and_says_what_it_saves(capsys, rounded):
    from rbdgen.symbolic import snap_model

    m = rbdgen.load_urdf(rounded)
    before, after = _ops(m), _ops(snap_model(m, 1e-5)[0])
    assert after < before
    for args in ((), ("--cost", "--kernels", "rnea")):
        rc, out, err = run_main(capsys, "inspect", rounded, *args, "-q")
        assert rc == 0, err
        hint = [line for line in out.splitlines() if line.startswith("hint:")]
        assert len(hint) == 1, out
        assert "--snap 1e-05" in hint[0] and f"rnea {before} → {after} ops" in hint[0], hint
    rc, out, err = run_main(capsys, "inspect", IIWA, "--cost", "--kernels", "rnea", "-q")  # exact quarter turns
    assert rc == 0 and "hint:" not in out and "--snap" not in out


def test_validate_suggests_snap(capsys, rounded):
    rc, out, err = run_main(capsys, "validate", rounded, "--kernels", "rnea", "--states", "2", "--no-pinocchio",
                            "--opt", "-O1", "-q")
    assert rc == 0, err
    assert re.search(r"^hint: .*--snap 1e-05.*rnea \d+ → \d+ ops", out, re.M), out
