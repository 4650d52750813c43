"""Issue 46, items 4, 7 and 8: inputs that passed validation falsely, stopped with a traceback,
or were silently misread. Each case failed before the fix; the expectations are facts about the
input (a kernel that is off by a factor of two is wrong at any scale; a format nothing was
measured for has no bound; a state is within its joint limits), not numbers rbdgen printed."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from rbdgen import reference as ref
from rbdgen import registry
from rbdgen import validate as V
from rbdgen.errors import RbdgenError, UnsupportedError, URDFError
from rbdgen.reference import Contact, ContactError

from conftest import TOL64, kernel_err, _erd_dir, assert_one_error_line, run_main
from test_model import joint, link, urdf, write

IIWA = rbdgen.robots.path("iiwa14")


def _nothing_in(folder) -> bool:
    return not folder.exists() or not any(folder.iterdir())


# ---- item 4: a tolerance comes from a measured bound, and scales with the outputs ------------------

def test_hls_bound_is_measured_or_derived_from_a_coarser_measured_format():
    """ap_fixed<32,30> (2 fractional bits) was held to the Q16.16 bound scaled up 2^14 times
    and capped at 1.0, and ap_fixed<64,64> to 1.0: errors of 0.5 and 1.0 passed. A bound is
    now the one measured for the format, or derived from a measured format it refines (no
    fewer fractional and no fewer integer bits); else there is none."""
    from rbdgen.targets import get_target
    from rbdgen.targets.hls.emit import NumType, measured_bound

    hls = get_target("hls")
    for k in registry.kernels():
        d = registry.get(k)
        measured = d.fixed_tol
        assert (32, 16) in measured
        for fmt, tol in measured.items():
            assert hls.tolerance(d, "float64", {"fixed": fmt}) == tol
        for coarse in ((32, 30), (64, 64), (24, 8), (32, 12), (16, 8), (20, 4)):
            refines = [f for f in measured if coarse[0] - coarse[1] >= f[0] - f[1] and coarse[1] >= f[1]]
            assert not refines and measured_bound(d, NumType("fixed", *coarse)) is None, (k, coarse)
            assert hls.tolerance(d, "float64", {"fixed": coarse}) is None
        for fine in ((40, 20), (34, 16), (48, 20), (64, 32)):
            b = measured_bound(d, NumType("fixed", *fine))
            # no looser than a measured format it refines, finer quantum → no larger bound
            assert b is not None and 0 < b <= min(t for f, t in measured.items()
                                                   if fine[0] - fine[1] >= f[0] - f[1] and fine[1] >= f[1])


@pytest.fixture(scope="module")
def iiwa_rnea():
    m = rbdgen.load_urdf(IIWA)
    return m, rbdgen.build(m, kernels=("rnea",), opt="-O1")


def test_validate_fails_a_format_without_a_measured_bound(iiwa_rnea):
    """Even an exact kernel (the float64 CPU build) is not passed against a bound that was never
    measured: the row says "no bound" and fails."""
    m, k = iiwa_rnea
    rows = V.validate(m, target="hls", fixed=(32, 30), kernels=("rnea",), states=3, pinocchio=False, compiled=k)
    (row,) = rows
    assert row.err_ref <= V.TOL64  # the kernel itself is right...
    assert not row.passed         # ...but nothing says how right a ap_fixed<32,30> kernel must be
    assert "no bound" in V.format_table(rows) and "no measured bound" in row.note
    rows = V.validate(m, target="hls", fixed=(48, 24), kernels=("rnea",), states=3, pinocchio=False, compiled=k)
    assert rows[0].passed and rows[0].tol == registry.get("rnea").fixed_tol[(48, 24)]


def test_cli_validate_hls_without_a_measured_bound_fails(capsys):
    """The false pass of the issue, end to end: ap_fixed<32,30> C simulation of crba, half the
    output's size wrong, reported 'pass' and exit 0."""
    rc, out, err = run_main(capsys, "validate", IIWA, "--target", "hls", "--fixed", "32,30", "--kernels", "crba",
                            "--no-pinocchio", "--states", 4, "-q")
    assert rc == 1, out + err
    row = next(line for line in out.splitlines() if line.startswith("crba"))
    assert "no bound" in row and row.rstrip().endswith("FAIL")
    assert "Traceback" not in err


def _tiny_robot(tmp_path, mass=1e-11):
    """Two links of ``mass`` kg: every output of rnea is below 1e-9."""
    inertia = (mass * 1e-2,) * 3 + (0.0, 0.0, 0.0)
    return write(tmp_path, urdf(link("base"), link("l1", mass=mass, com="0.1 0 0", inertia=inertia),
                                link("l2", mass=mass, com="0 0.1 0", inertia=inertia),
                                joint("j1", "base", "l1", axis="0 1 0"),
                                joint("j2", "l1", "l2", xyz="0.2 0 0", axis="1 0 0")), "tiny.urdf")


def test_validate_error_scales_with_tiny_outputs(tmp_path, monkeypatch):
    """A kernel twice as large as its reference is wrong whatever the robot's scale; with the
    absolute floor of 1 under the error, a robot whose outputs are below 1e-9 passed anyway."""
    m = rbdgen.load_urdf(_tiny_robot(tmp_path))
    k = rbdgen.build(m, kernels=("rnea",), opt="-O0")
    env = registry.random_inputs(m, 4, 0)
    assert np.abs(ref.rnea(m, env["q"], env["v"], env["a"])).max() < 1e-9  # the premise
    rows = V.validate(m, kernels=("rnea",), states=4, compiled=k)  # the right kernel passes, Pinocchio too
    assert rows[0].passed and rows[0].err_pin is not None, rows
    decl = registry.get("rnea")
    monkeypatch.setitem(registry._REGISTRY, "rnea", dataclasses.replace(
        decl, reference=lambda *a, **kw: 2.0 * decl.reference(*a, **kw)))
    rows = V.validate(m, kernels=("rnea",), states=4, pinocchio=False, compiled=k)
    assert not rows[0].passed and rows[0].err_ref == pytest.approx(0.5)
    # the measure is the relative error: the same for the same robot at any scale
    x, y = np.array([1.0, -3.0, 2.5]), np.array([1.5, -3.0, 2.0])
    floor = np.finfo(np.float64).tiny
    assert V.relerr(1e-12 * x, 1e-12 * y, floor) == pytest.approx(V.relerr(x, y, floor)) == pytest.approx(0.5 / 3.0)


# ---- item 7: one line instead of a traceback -------------------------------------------------------

def _limits_robot(tmp_path, lower, upper, type="revolute"):
    return write(tmp_path, urdf(link("base"), link("l1", com="0.1 0 0"), link("l2", com="0 0 0.1"),
                                joint("j1", "base", "l1", type=type, limit=(lower, upper), axis="0 1 0"),
                                joint("j2", "l1", "l2", xyz="0.2 0 0", limit=(-1, 1), axis="1 0 0")))


@pytest.mark.parametrize("lower,upper", [("-1e308", "1e308"), ("10", "1e308"), ("-1.7976931348623157e308", "-10")])
def test_huge_revolute_limits_draw_states_within_them(tmp_path, capsys, lower, upper):
    """Limits of ±1e308 made random_q's uniform(lo, hi) overflow (OverflowError in generate,
    validate and inspect --cost). A revolute joint's limits wider than a turn hold every
    orientation: states are drawn over one turn of them."""
    p = _limits_robot(tmp_path, lower, upper)
    m = rbdgen.load_urdf(p)
    lo, hi = float(lower), float(upper)
    Q = m.random_q(np.random.default_rng(0), 500)[:, 0]
    assert np.all(np.isfinite(Q)) and np.all(Q >= lo) and np.all(Q <= hi)
    assert Q.max() - Q.min() <= 2 * math.pi and Q.max() - Q.min() > 0.8 * 2 * math.pi  # one turn, spread over it
    rc, out, err = run_main(capsys, "inspect", p, "--cost", "-q")
    assert rc == 0 and "Traceback" not in err, err
    rc, out, err = run_main(capsys, "generate", p, "--out", tmp_path / "out", "--target", "hls", "-q")
    assert rc == 0, err  # the testbench's states are drawn by random_q too


def test_huge_prismatic_limits_are_one_line(tmp_path, capsys):
    """A prismatic joint's limits are lengths: held to the documented 1e6 m (±1e300 loaded, and
    states of 1e300 m overflowed the kernels)."""
    p = _limits_robot(tmp_path, "-1e300", "1e300", type="prismatic")
    with pytest.raises(URDFError, match=r"joint 'j1' <limit>.*lower.*out of range"):
        rbdgen.load_urdf(p)
    for cmd in (("validate", p, "--kernels", "rnea", "-q"), ("generate", p, "--out", tmp_path / "out", "-q"),
                ("inspect", p)):
        rc, out, err = run_main(capsys, *cmd)
        assert rc == 2
        assert_one_error_line(err, out, str(p), "j1", "out of range")
    assert not (tmp_path / "out").exists()
    m = rbdgen.load_urdf(_limits_robot(tmp_path, "-1e6", "1e6", type="prismatic"))  # the bound itself loads
    q = m.random_q(np.random.default_rng(1), 100)[:, 0]
    assert np.all(np.abs(q) <= 1e6)


def test_long_robot_name_is_one_line_and_leaves_nothing(tmp_path, capsys):
    """A robot name of 250 characters named files past the file system's 255 bytes: an OSError
    traceback from validate, and generate left the --out folder it had made behind."""
    from rbdgen.targets import targets

    p = write(tmp_path, urdf(link("base"), link("l1"), joint("j1", "base", "l1"), name="a" * 250))
    with pytest.raises(URDFError, match="250 characters"):
        rbdgen.load_urdf(p)
    for target in ("cpu", "hls"):
        out_dir = tmp_path / "new" / f"out_{target}"
        rc, out, err = run_main(capsys, "generate", p, "--target", target, "--out", out_dir, "-q")
        assert rc == 2
        assert_one_error_line(err, out, str(p), "250 characters")
        assert not (tmp_path / "new").exists()
    rc, out, err = run_main(capsys, "validate", p, "-q")
    assert rc == 2
    assert_one_error_line(err, out, str(p), "250 characters")
    # the longest name taken makes files every target can write
    p = write(tmp_path, urdf(link("base"), link("l1"), joint("j1", "base", "l1"), name="b" * 128), "ok.urdf")
    for target in targets():
        rc, out, err = run_main(capsys, "generate", p, "--target", target, "--kernels", "rnea",
                                "--out", tmp_path / f"ok_{target}", "-q")
        assert rc == 0, (target, err)
    # a --name, or build(name=…), that long: the same
    rc, out, err = run_main(capsys, "generate", IIWA, "--name", "n" * 200, "--kernels", "rnea",
                            "--out", tmp_path / "named", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "200 characters")
    assert not (tmp_path / "named").exists()
    with pytest.raises(ValueError, match="300 characters"):
        rbdgen.build(rbdgen.load_urdf(IIWA), kernels=("rnea",), name="x" * 300)


def test_validate_seed_and_states_are_checked(capsys):
    """--seed -1 was a NumPy traceback; --states 99999999999999 tried to allocate 4.97 PiB."""
    for args, flag in ((("--seed", "-1"), "--seed"), (("--states", "99999999999999"), "--states")):
        rc, out, err = run_main(capsys, "validate", IIWA, "--kernels", "rnea", *args)
        assert rc == 2
        assert_one_error_line(err, out, flag)
    rc, out, err = run_main(capsys, "validate", IIWA, "--kernels", "rnea", "--states", V.MAX_STATES + 1)
    assert rc == 2
    assert_one_error_line(err, out, "--states", str(V.MAX_STATES))
    m = rbdgen.load_urdf(IIWA)
    with pytest.raises(ValueError, match="seed"):
        V.validate(m, kernels=("rnea",), seed=-1)
    with pytest.raises(ValueError, match="states"):
        V.validate(m, kernels=("rnea",), states=99999999999999)


def test_validate_out_of_memory_is_one_error(iiwa_rnea, monkeypatch):
    m, k = iiwa_rnea

    def no_memory(*a, **kw):
        raise MemoryError

    monkeypatch.setattr(V, "random_states", no_memory)
    with pytest.raises(RbdgenError, match="not enough memory to validate 16 states"):
        V.validate(m, kernels=("rnea",), compiled=k)


def _mimic_massless(tmp_path):
    """j1's link and its mimic follower's carry no mass: the mass matrix is singular."""
    return write(tmp_path, urdf(link("base"), link("arm"), link("l1", inertial=False), link("l2", inertial=False),
                                joint("j0", "base", "arm"),
                                joint("j1", "arm", "l1", xyz="0.1 0 0"),
                                joint("j2", "arm", "l2", xyz="0 0.1 0", extra='<mimic joint="j1" multiplier="-1"/>')))


def test_mimic_joints_and_a_massless_link_are_one_line(tmp_path, capsys):
    """Mimic joints coupled and a moving link without mass: AttributeError CoupledModel.nv_joint
    from the singular-mass-matrix check, instead of its one line naming the joint."""
    p = _mimic_massless(tmp_path)
    m = rbdgen.load_urdf(p)
    assert m.coupled and m.nv == 2
    with pytest.raises(UnsupportedError, match="joint 'j1'.*singular"):
        rbdgen.build(m, kernels=("aba",))
    for cmd in (("generate", p, "--out", tmp_path / "out", "-q"), ("inspect", p, "--cost", "-q"),
                ("validate", p, "--kernels", "minv", "-q")):
        rc, out, err = run_main(capsys, *cmd)
        assert rc == 2
        assert_one_error_line(err, out, "joint 'j1'", "mass matrix is singular")
    assert not (tmp_path / "out").exists()
    # reduced coordinates: every column of v belongs to exactly one joint, a follower to none
    owners = [b for c in range(m.nv) for b in range(m.nb) if m.v_start[b] <= c < m.v_start[b] + m.nv_joint(b)]
    assert [m.joint_names[b] for b in owners] == ["j0", "j1"]
    assert m.nv_joint(m.joint_names.index("j2")) == 0


def test_romeo_mimic_hand_is_one_line(capsys):
    p = _erd_dir() / "romeo_description" / "urdf" / "romeo.urdf"
    if not p.exists():
        pytest.skip("example-robot-data's romeo is not installed")
    rc, out, err = run_main(capsys, "inspect", p, "--cost", "--kernels", "aba", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "joint 'LHand'", "mass matrix is singular")


# ---- item 8 ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def iiwa_contact():
    m = rbdgen.load_urdf(IIWA).with_frames(["iiwa_link_ee"])
    return m, rbdgen.build(m, kernels=("rnea", "aba", "aba_derivatives", "contact_terms"), opt="-O0")


def test_contact_fd_on_no_states(iiwa_contact):
    """A batch of 0 states: rnea returns (0, nv); contact_fd stopped in a reshape."""
    m, k = iiwa_contact
    z = np.zeros((0, m.nv))
    assert k.rnea(z, z, z).shape == (0, m.nv)
    cs = [Contact("iiwa_link_ee", "3d")]
    for qdd, F in (k.contact_fd(z, z, z, cs), ref.contact_fd(m, z, z, z, cs)):
        assert qdd.shape == (0, m.nv) and F.shape == (0, 1, 6)


def test_contact_fd_names_a_nan_state_instead_of_a_singular_posture(iiwa_contact):
    m, k = iiwa_contact
    rng = np.random.default_rng(0)
    q, v, tau = m.random_q(rng, 3), rng.normal(size=(3, m.nv)), rng.normal(size=(3, m.nv))
    cs = [Contact("iiwa_link_ee", "3d")]
    q[1, 2] = np.nan
    tau_inf = tau.copy()
    tau_inf[2, 0] = np.inf
    for f in (k.contact_fd, lambda *a: ref.contact_fd(m, *a)):
        with pytest.raises(ValueError, match=r"q has a NaN or infinite entry \(state 1 of the batch\)") as e:
            f(q, v, tau, cs)
        assert not isinstance(e.value, ContactError) and "singular" not in str(e.value)
        with pytest.raises(ValueError, match=r"tau has a NaN or infinite entry \(state 2"):
            f(q[[0, 0, 2]], v, tau_inf, cs)
        with pytest.raises(ValueError, match="q has a NaN"):
            f(q[1], v[1], tau[1], cs)
    # finite inputs whose terms overflow: said as such, not as a singular posture
    with pytest.raises(ValueError, match="NaN or infinite") as e:
        k.contact_fd(q[0], 1e300 * np.ones(m.nv), tau[0], cs)
    assert "singular" not in str(e.value)


def test_out_arrays_must_not_share_memory(iiwa_contact):
    """aba_derivatives(..., out=(X, X, X)) wrote all three outputs into X and returned it three
    times (the last output)."""
    m, k = iiwa_contact
    rng = np.random.default_rng(0)
    q, v, tau = m.random_q(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)
    X = np.empty((m.nv, m.nv))

    class Sub(np.ndarray):
        pass

    B = np.empty((3, m.nv, m.nv))
    for out in ([X, X, X], (X.view(Sub), X.view(Sub), np.empty_like(X)), [B[0], B[1], B[0]]):
        with pytest.raises(ValueError, match="aba_derivatives: out= arrays .* share memory"):
            k.aba_derivatives(q, v, tau, out=out)
        with pytest.raises(ValueError, match="aba_derivatives: out= arrays .* share memory"):
            k.methods["aba_derivatives"](q, v, tau, out=tuple(out))  # the Python method: any tuple
    # distinct arrays, views of one buffer included: the kernel's three outputs, as without out=
    got = k.aba_derivatives(q, v, tau, out=[B[0], B[1], B[2]])
    for g, w in zip(got, k.aba_derivatives(q, v, tau)):
        np.testing.assert_array_equal(g, w)


def test_out_tuple_of_plain_arrays_must_not_share_memory(iiwa_contact):
    """The CPython binding's fast path (plain ndarrays straight to the kernel) checks the out=
    arrays' spans too, and hands a call whose outputs touch to the Python path, which names them;
    distinct and interleaved-but-disjoint outputs still go through, with the reference's numbers."""
    m, k = iiwa_contact
    q = m.random_q(np.random.default_rng(0))
    v, tau = np.zeros(m.nv), np.ones(m.nv)
    X = np.empty((m.nv, m.nv))
    with pytest.raises(ValueError, match="share memory"):
        k.aba_derivatives(q, v, tau, out=(X, X, X))  # the call
    W = np.empty((3, m.nv, m.nv))
    with pytest.raises(ValueError, match="share memory"):  # a batch's rows overlapping another's
        k.aba_derivatives(np.stack([q, q]), np.stack([v, v]), np.stack([tau, tau]), out=(W[:2], W[1:], np.empty((2, m.nv, m.nv))))
    out = tuple(np.empty((m.nv, m.nv)) for _ in range(3))
    got = k.aba_derivatives(q, v, tau, out=out)
    assert all(g is o for g, o in zip(got, out))
    want = ref.aba_derivatives(m, q, v, tau)
    assert max(kernel_err(g, w) for g, w in zip(got, want)) <= TOL64


def test_load_urdf_names_its_bad_arguments():
    with pytest.raises(ValueError, match="gravity must be 3 finite numbers.*'abc'"):
        rbdgen.load_urdf(IIWA, gravity="abc")
    with pytest.raises(ValueError, match="gravity .* out of range"):
        rbdgen.load_urdf(IIWA, gravity=(1e308, 0, 0))
    for kw in ({"floating_base": "no"}, {"floating_base": "yes"}, {"check_inertia": "no"}, {"floating_base": 1}):
        with pytest.raises(ValueError, match=f"{next(iter(kw))} must be True or False"):
            rbdgen.load_urdf(IIWA, **kw)
    assert not rbdgen.load_urdf(IIWA, floating_base=np.bool_(False)).floating_base
    assert rbdgen.load_urdf(IIWA, gravity=[0, 0, -1.62]).gravity[2] == -1.62  # the Moon: fine


@pytest.mark.parametrize("cmd,needle", [
    (("generate", IIWA, "--target", "hls", "--clock-mhz", "1e-300"), "--clock-mhz"),
    (("generate", IIWA, "--target", "hls", "--clock-mhz", "1e9"), "--clock-mhz"),
    (("inspect", IIWA, "--cost", "--target", "hls", "--clock-mhz", "1e-300"), "--clock-mhz"),
    (("generate", IIWA, "--gravity", "1e308 0 0"), "--gravity"),
    (("validate", IIWA, "--gravity", "0 0 -1e300"), "--gravity"),
    (("generate", IIWA, "--snap", "10"), "--snap"),
    (("generate", IIWA, "--snap", "0.5"), "--snap"),
], ids=["clock-tiny", "clock-huge", "inspect-clock", "gravity", "validate-gravity", "snap-10", "snap-half"])
def test_out_of_range_options_are_refused_while_parsing(tmp_path, capsys, cmd, needle):
    out_dir = tmp_path / "out"
    args = [*cmd, "--kernels", "rnea", "-q"] + (["--out", out_dir] if cmd[0] == "generate" else [])
    rc, out, err = run_main(capsys, *args)
    assert rc == 2
    assert_one_error_line(err, out, needle)
    assert not out_dir.exists()


def test_options_within_range_are_taken(tmp_path, capsys):
    rc, out, err = run_main(capsys, "generate", IIWA, "--target", "hls", "--clock-mhz", "100", "--gravity", "0 0 -1.62",
                            "--snap", "1e-3", "--kernels", "rnea", "--out", tmp_path, "-q")
    assert rc == 0, err


_INERTIAL = ('<inertial><origin xyz="0 0 0"/><mass value="1"/>'
             '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>')
_HEAVY = _INERTIAL.replace('value="1"', 'value="5"')
_TWO_ORIGINS = _INERTIAL.replace("<mass", '<origin xyz="0 0 0.5"/><mass')
_TWO_MASSES = _INERTIAL.replace("<mass", '<mass value="2"/><mass')


@pytest.mark.parametrize("l1,j1_extra,tag", [
    ('<link name="l1">' + _INERTIAL + _HEAVY + "</link>", "", "inertial"),
    ('<link name="l1">' + _TWO_ORIGINS + "</link>", "", "origin"),
    ('<link name="l1">' + _TWO_MASSES + "</link>", "", "mass"),
    (link("l1"), '<origin xyz="0 0 0.5"/>', "origin"),
    (link("l1"), '<axis xyz="1 0 0"/>', "axis"),
    (link("l1"), '<limit lower="-3" upper="3" effort="1" velocity="1"/>', "limit"),
    (link("l1"), '<parent link="base"/>', "parent"),
], ids=["inertial", "inertial-origin", "mass", "joint-origin", "axis", "limit", "parent"])
def test_duplicate_elements_are_refused(tmp_path, capsys, l1, j1_extra, tag):
    """A second <inertial>, <axis> or <origin> was silently ignored (the first was taken):
    which one the author meant is not ours to guess."""
    p = write(tmp_path, urdf(link("base"), l1, joint("j1", "base", "l1", extra=j1_extra)))
    with pytest.raises(URDFError, match=f"2 <{tag}> elements"):
        rbdgen.load_urdf(p)
    rc, out, err = run_main(capsys, "inspect", p)
    assert rc == 2
    assert_one_error_line(err, out, str(p), f"<{tag}>")


def test_mimic_multiplier_out_of_range_is_named(tmp_path, capsys):
    """A multiplier of 1e300 was refused with "the model's numbers (lengths, masses, inertias,
    gravity) overflow" (its square overflowed in the contracted mass matrix)."""
    def robot(m1, m2=None):
        parts = [link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"),
                 joint("j2", "l1", "l2", xyz="0.1 0 0", axis="0 1 0", extra=f'<mimic joint="j1" multiplier="{m1}"/>')]
        if m2 is not None:
            parts += [link("l3"), joint("j3", "l2", "l3", xyz="0.1 0 0", axis="1 0 0",
                                        extra=f'<mimic joint="j2" multiplier="{m2}"/>')]
        return write(tmp_path, urdf(*parts), f"m_{m1}_{m2}.urdf")

    p = robot("1e300")
    with pytest.raises(URDFError, match=r"joint 'j2' <mimic>.*multiplier.*out of range") as e:
        rbdgen.load_urdf(p)
    assert "lengths" not in str(e.value)
    rc, out, err = run_main(capsys, "generate", p, "--out", tmp_path / "out", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "multiplier", "out of range")
    # a chain of mimics that multiplies past the bound: named as the chain
    with pytest.raises(UnsupportedError, match=r"joint 'j3'.*chain j3 -> j2 -> j1.*out of range"):
        rbdgen.load_urdf(robot("1e4", "1e4"))
    m = rbdgen.load_urdf(robot("-0.5", "2"))  # gear ratios load, and couple as written
    assert m.nv == 1
    np.testing.assert_array_equal(m.G[:, 0], [1.0, -0.5, -1.0])



def test_reference_on_no_states():
    """A batch of 0 states gives outputs of 0 states in the reference too (it raised IndexError),
    shaped as a one-state call's with a leading 0."""
    m = rbdgen.load_urdf(rbdgen.robots.path("quadruped"), floating_base=True)
    q, v = np.zeros((0, m.nq)), np.zeros((0, m.nv))
    for fn, args in ((ref.rnea, (q, v, v)), (ref.crba, (q,)), (ref.aba, (q, v, v)), (ref.minv, (q,)),
                     (ref.rnea_derivatives, (q, v, v)), (ref.aba_derivatives, (q, v, v)), (ref.forward_kinematics, (q,))):
        with np.errstate(all="ignore"):  # a zero quaternion: NaN values, the shapes are what counts
            one = fn(m, *(np.zeros(a.shape[1:]) for a in args))
        got = fn(m, *args)
        for g, o in zip(got if isinstance(got, tuple) else (got,), one if isinstance(one, tuple) else (one,)):
            assert g.shape == (0,) + o.shape, fn.__name__


def test_snap_tolerance_is_bounded_in_python_too(tmp_path):
    """The CLI refuses --snap 10; the Python path took it and snapped every rotation entry."""
    from rbdgen.package import generate_package
    from rbdgen.symbolic import snap_model

    m = rbdgen.load_urdf(IIWA)
    for tol in (10, 0.5, float("nan"), "1e-3"):
        with pytest.raises(ValueError, match="snap tolerance"):
            snap_model(m, tol)
    with pytest.raises(ValueError, match="snap tolerance"):
        generate_package(m, tmp_path, urdf=IIWA, load_options={}, kernels=("rnea",), snap=10)
    assert list(tmp_path.iterdir()) == []
    assert snap_model(m, 1e-3)[0].nb == m.nb  # within range: fine


def test_snap_on_a_robot_with_coupled_mimic_joints(tmp_path):
    """--snap on the panda (its fingers coupled by a mimic joint) stopped with a TypeError
    (dataclasses.replace on the coupled model); it snaps the tree and keeps the coupling, and the
    snapped kernels still agree with the unsnapped reference to the size of the snap."""
    from rbdgen.symbolic import snap_model

    m = rbdgen.load_urdf(_erd_dir() / "panda_description/urdf/panda.urdf")
    s, report = snap_model(m, 1e-5)
    assert s.coupled and (s.nq, s.nv) == (m.nq, m.nv) and s.followers == m.followers
    q, v = m.random_q(np.random.default_rng(2)), np.ones(m.nv)
    assert kernel_err(ref.rnea(s, q, v, v), ref.rnea(m, q, v, v)) <= 1e-4
    from rbdgen.cli import main

    rc = main(["generate", str(_erd_dir() / "panda_description/urdf/panda.urdf"), "--snap", "1e-5",
                          "--kernels", "rnea", "--out", str(tmp_path), "--name", "p", "--quiet"])
    assert rc == 0 and (tmp_path / "p" / "manifest.json").is_file()
