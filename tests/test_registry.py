"""The kernel and target registries: what a declaration promises holds, selections are checked,
traces are shared, and target options go where they belong."""
from __future__ import annotations

import numpy as np
import pytest

import rbdgen
from rbdgen import registry
from rbdgen.targets import all_options, get_target, targets
from rbdgen.errors import RbdgenError

from conftest import ROBOT_CASES, load_case


def _model(case_id="quadruped-floating"):
    return load_case(*[c.values for c in ROBOT_CASES if c.id == case_id][0])


@pytest.mark.parametrize("name", registry.kernels())
def test_declaration_matches_reference_and_trace(name):
    """Declared input sizes and output shapes are what the reference returns and what the
    traced kernel writes, on a floating, branched robot (nq ≠ nv ≠ nb); a constrained kernel with
    a 3d contact on each of its frames."""
    d = registry.get(name)
    # the Schur-complement kernels refuse trees (test_schur.py): a serial chain, fixed base
    m = _model() if registry.supports(_model(), name) else _model("iiwa14-fixed")
    if d.constraints:
        m = m.with_constraints([rbdgen.Contact(f, "3d") for f in m.frames])
    env = registry.random_inputs(m, 2, seed=4)
    for a in d.inputs:
        assert env[a.name].shape == (2, a.size(m)), a.name
    outs = registry.reference(m, name, env)
    assert [o.shape for o in outs] == [(2,) + a.dims(m) for a in d.outputs]
    k = registry.trace(m, name)
    assert [a.name for a in k.inputs] == list(d.input_names)
    assert [(a.name, tuple(a.shape)) for a in k.all_outputs] == [(a.name, a.dims(m)) for a in d.outputs]
    assert d.doc and d.float32_tol > 0 and d.gpu_shape in ("thread", "block")
    assert (32, 16) in d.fixed_tol, "every kernel states its measured Q16.16 bound"


def test_selection_rules():
    every = registry.kernels()
    assert registry.resolve(None) == every
    assert registry.resolve("rnea") == ("rnea",)  # one name, not its letters
    assert registry.resolve("crba, rnea") == ("rnea", "crba")  # canonical order
    assert registry.resolve(["crba", "rnea"]) == ("rnea", "crba")
    with pytest.raises(RbdgenError, match="unknown kernel.*'fly'.*known: rnea"):
        registry.resolve(["rnea", "fly"])
    with pytest.raises(RbdgenError, match="no kernels selected"):
        registry.resolve([])
    with pytest.raises(RbdgenError, match="no kernels selected"):
        registry.resolve(" , ")
    with pytest.raises(RbdgenError, match="unknown kernel"):
        registry.get("nope")


def test_declare_refuses_duplicates_and_bad_shapes():
    d = registry.get("rnea")
    with pytest.raises(ValueError, match="declared twice"):
        registry.declare("rnea", "x", inputs=("q",), outputs=d.outputs, algorithm=d.algorithm,
                         reference=d.reference, float32_tol=1e-6)
    with pytest.raises(ValueError, match="repeat"):
        registry.declare("not_registered_tmp", "x", inputs=("q", "q"), outputs=d.outputs,
                         algorithm=d.algorithm, reference=d.reference, float32_tol=1e-6)
    assert "not_registered_tmp" not in registry.kernels()
    with pytest.raises(ValueError, match="unknown size"):
        registry.Arg("x", ("nz",)).dims(_model())


def test_traces_are_shared_per_model_and_fold():
    m = _model("iiwa14-fixed")
    a = registry.trace(m, "crba")
    assert registry.trace(m, "crba") is a  # every backend of one command gets the same trace
    assert registry.trace(m, "crba", fold=False) is not a
    other = rbdgen.load_urdf(m.source)  # an equal model is another object: traced anew
    b = registry.trace(other, "crba")
    assert b is not a and b.op_counts() == a.op_counts()


def test_target_registry_and_options():
    assert targets() == ("cpu", "cuda", "hls", "verilog")
    names = [o.name for o in all_options()]
    assert len(names) == len(set(names)), "a shared option is declared once"
    hls = get_target("hls")
    st = hls.split_options({"fixed": "32,16", "opt": "-O0", "ii": 2})
    assert st["generate"] == {"fixed": (32, 16), "ii": 2} and st["compile"] == {"opt": "-O0"}
    assert st["cost"] == {"fixed": (32, 16), "ii": 2}
    with pytest.raises(RbdgenError, match="do not apply to target 'cpu'"):
        get_target("cpu").split_options({"fixed": (32, 16)})
    with pytest.raises(RbdgenError, match="integer bits"):
        hls.split_options({"fixed": (16, 20)})
    with pytest.raises(RbdgenError, match="optimisation flag"):
        get_target("cuda").split_options({"opt": "-O9"})
    with pytest.raises(RbdgenError, match="unknown target 'quantum'"):
        get_target("quantum")


def test_hls_tolerance_for_an_unmeasured_format_scales_with_the_quantum():
    d = registry.get("rnea")
    hls = get_target("hls")
    assert hls.tolerance(d, "float64", {"fixed": (32, 16)}) == d.fixed_tol[(32, 16)]
    # two more fractional bits: a quarter of the Q16.16 bound
    assert hls.tolerance(d, "float64", {"fixed": (34, 16)}) == pytest.approx(d.fixed_tol[(32, 16)] / 4)
    assert hls.tolerance(d, "float32", {}) == d.float32_tol
    assert hls.tolerance(d, "float64", {}) == 1e-9


def test_forward_kinematics_is_a_rigid_motion_per_body():
    """Independent of the reference: every placement's rotation is orthonormal with det +1 and
    its last row is [0 0 0 1], and the root body of a floating base sits at q's translation."""
    m = _model()
    env = registry.random_inputs(m, 3, seed=2)
    T = rbdgen.ir.run(registry.trace(m, "forward_kinematics"), env["q"])
    R = T[..., :3, :3]
    assert np.allclose(R @ np.swapaxes(R, -1, -2), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(R), 1.0)
    assert np.array_equal(T[..., 3, :], np.broadcast_to([0.0, 0.0, 0.0, 1.0], T[..., 3, :].shape))
    root = [i for i in range(m.nb) if m.parent[i] < 0]
    assert len(root) == 1
    assert np.allclose(T[:, root[0], :3, 3], env["q"][:, :3], atol=1e-12)
